"""The compiled detector round gives the same bits as the Python reference."""

from __future__ import annotations

import json
import math
import random
from types import ModuleType

import numpy as np
import pytest

from monitor.stats.changepoint import detector as det_mod
from monitor.stats.changepoint.detector import RiskIncreaseDetector
from monitor.stats.changepoint.drift import DriftDetector
from monitor.stats.changepoint.rounds import advance_py
from tests.ckernels import load


@pytest.fixture(scope="module")
def ck() -> ModuleType:
    return load("monitor.stats.changepoint.ckernel")


def _bits(lists: list[list[float] | list[int]]) -> list[list[str]]:
    return [[v.hex() if isinstance(v, float) else repr(v) for v in xs] for xs in lists]


def _random_state(rng: random.Random, j: int, views: int) -> list[list[float] | list[int]]:
    pick = [-math.inf, 0.0, -0.0, 1e-300, 5e-324, 40.0, 800.0, -3.0]
    sr = [rng.choice(pick) if rng.random() < 0.3 else rng.uniform(-5, 30) for _ in range(j)]
    cu = [min(rng.choice(pick) if rng.random() < 0.3 else rng.uniform(-5, 30), s) for s in sr]
    start = [rng.randint(1, 10**6) for _ in range(j)]
    seg = [rng.uniform(-50, 50) for _ in range(j)]
    total = [rng.uniform(-500, 500) for _ in range(views)]
    return [sr, cu, start, seg, total]


def _views(rng: random.Random, views: int, alpha: float) -> tuple[object, object]:
    """Random views of a round: mostly valid floats, sometimes one invalid value or type."""
    los: list[object] = [alpha - rng.choice([1.0, rng.uniform(1e-6, 3)]) for _ in range(views)]
    xs: list[object] = [rng.choice([lo, alpha, lo + rng.uniform(0, 4)]) for lo in los]
    if rng.random() < 0.3:  # one bad value or type: None from both, nothing changed
        bad = rng.choice([math.nan, math.inf, -math.inf, alpha, alpha + 1.0, 1, True,
                          np.float64(0.5), "x", None])
        (xs if rng.random() < 0.5 else los)[rng.randrange(views)] = bad
    box = rng.choice([list, tuple, "scalar"])
    if box == "scalar" and views == 1:
        return xs[0], los[0]
    if box is tuple:
        return tuple(xs), tuple(los)
    return xs, los


def test_random_rounds_match_python(ck: ModuleType) -> None:
    rng = random.Random(20261124)
    nones = 0
    for case in range(5000):
        views = rng.randint(1, 3)
        frs = tuple(rng.uniform(1e-3, 0.999) for _ in range(rng.randint(1, 9)))
        alpha = rng.choice([0.0, 0.1, rng.uniform(-1, 1)])
        xs, los = _views(rng, views, alpha)
        state = _random_state(rng, views * len(frs), views)
        a = [list(s) for s in state]
        b = [list(s) for s in state]
        t = rng.choice([1, 7, 255, 257, 10**9])
        use_sr = rng.random() < 0.5
        top_c = ck.advance(*a, xs, los, frs, alpha, t, use_sr)
        top_p = advance_py(*b, xs, los, frs, alpha, t, use_sr)  # type: ignore[arg-type]
        if top_p is None:
            nones += 1
            assert top_c is None, case
            assert _bits(a) == _bits(state) == _bits(b), case  # nothing changed
            continue
        assert top_c.hex() == top_p.hex(), case
        assert _bits(a) == _bits(b), case
    assert 500 < nones < 2500  # both outcomes were exercised


def test_detectors_match_python_over_streams(ck: ModuleType,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)

    def run() -> list[dict[str, object]]:
        out = []
        for s in range(40):
            d = RiskIncreaseDetector(0.1, kind="sr" if s % 2 else "cusum", arl=500.0,
                                     views=2)
            dr = DriftDetector(-1.0, 1.0, warmup=20, delta_ref=0.01, p=0.01, horizon=400)
            p = 0.05 if s < 20 else 0.3
            for x in (rng.random(300) < p).astype(float).tolist():
                d.update([x, x + 0.5 * (x - 0.1)], [0.0, -0.5])
                dr.update(x - 0.1)
            out += [d.to_state(), dr.to_state()]
        return out

    compiled = run()
    assert det_mod._advance_round is ck.advance  # the default path is the compiled one
    monkeypatch.setattr(det_mod, "_advance_round", advance_py)
    rng = np.random.default_rng(7)
    assert json.dumps(run()) == json.dumps(compiled)
    assert any(s["alarm_round"] is not None for s in compiled if "alarm_round" in s)


def test_bad_input_raises_and_leaves_state(ck: ModuleType) -> None:
    sr, cu, start, seg, tot = [0.5], [0.25], [1], [0.0], [0.0]
    with pytest.raises(TypeError):
        ck.advance(sr, cu, start, [0], tot, [1.0], [0.0], (0.5,), 0.1, 2, True)  # int state
    with pytest.raises(ValueError, match="inconsistent sizes"):
        ck.advance(sr, cu, start, seg, [0.0, 0.0], [1.0], [0.0], (0.5,), 0.1, 2, True)
    with pytest.raises(TypeError):
        ck.advance(sr, cu, start, seg, tot, [1.0], [0.0], (0.5,), 0.1, 2.0, True)  # float t
    assert ck.advance(sr, cu, start, seg, tot, [1.0, 1.0], [0.0], (0.5,), 0.1, 2, True) is None
    assert (sr, cu, start, seg, tot) == ([0.5], [0.25], [1], [0.0], [0.0])


def test_factor_that_rounds_to_zero_is_refused_by_both(ck: ModuleType) -> None:
    # lo within rounding of alpha: f / den overflows, or f / den * dx rounds to -1
    cases = [(0.0, -1e-320, -1e-320, None),
             (-0.009129825816118098, -1.3576035706912675, -1.3576035706912675,
              [math.nextafter(1.0, 0.0)])]
    for alpha, lo, x, fractions in cases:
        frs = tuple(fractions) if fractions else det_mod._DEFAULT_FRS
        for fn in (ck.advance, advance_py):
            state = [[0.5] * len(frs), [0.25] * len(frs), [1] * len(frs), [0.0] * len(frs),
                     [0.0]]
            assert fn(*state, x, lo, frs, alpha, 2, True) is None
            assert state[0] == [0.5] * len(frs) and state[4] == [0.0]
        d = RiskIncreaseDetector(alpha, fractions=fractions)
        before = json.dumps(d.to_state())
        with pytest.raises(ValueError, match="too close to alpha"):
            d.update(x, lo)
        assert json.dumps(d.to_state()) == before


def test_detector_errors_unchanged() -> None:
    d = RiskIncreaseDetector(0.1, views=2)
    for x, lo, msg in (([0.5, math.nan], [0.0, 0.0], "finite"),
                       ([0.5, 0.5], [0.0, 0.2], "lo must be < alpha"),
                       ([0.5, -1.0], [0.0, -0.5], "below its lower bound"),
                       ([0.5], [0.0], "shape")):
        with pytest.raises(ValueError, match=msg):
            d.update(x, lo)
    assert d.rounds == 0 and d.to_state() == RiskIncreaseDetector(0.1, views=2).to_state()
    d.update([1, 0], (0, np.float64(-0.5)))  # ints and numpy floats are converted
    e = RiskIncreaseDetector(0.1, views=2)
    e.update([1.0, 0.0], [0.0, -0.5])
    assert json.dumps(d.to_state()) == json.dumps(e.to_state())
