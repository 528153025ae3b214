"""The compiled detector round gives the same bits as the Python reference."""

from __future__ import annotations

import json
import math
import random
from types import ModuleType

import numpy as np
import pytest

from monitor.stats.changepoint import detector as det_mod
from monitor.stats.changepoint.detector import RiskIncreaseDetector, _advance_py
from monitor.stats.changepoint.drift import DriftDetector
from tests.ckernels import load


@pytest.fixture(scope="module")
def ck() -> ModuleType:
    return load("monitor.stats.changepoint.ckernel")


def _bits(xs: list[float] | list[int]) -> list[str]:
    return [v.hex() if isinstance(v, float) else repr(v) for v in xs]


def _random_state(rng: random.Random, j: int) -> tuple[list[float], list[float], list[int],
                                                       list[float]]:
    pick = [-math.inf, 0.0, -0.0, 1e-300, 5e-324, 40.0, 800.0, -3.0]
    sr = [rng.choice(pick) if rng.random() < 0.3 else rng.uniform(-5, 30) for _ in range(j)]
    cu = [min(rng.choice(pick) if rng.random() < 0.3 else rng.uniform(-5, 30), s) for s in sr]
    start = [rng.randint(1, 10**6) for _ in range(j)]
    seg = [rng.uniform(-50, 50) for _ in range(j)]
    return sr, cu, start, seg


def test_random_rounds_match_python(ck: ModuleType) -> None:
    rng = random.Random(20261124)
    for case in range(3000):
        views = rng.randint(1, 3)
        frs = tuple(rng.uniform(1e-3, 0.999) for _ in range(rng.randint(1, 9)))
        alpha = rng.choice([0.0, 0.1, rng.uniform(-1, 1)])
        los = [alpha - rng.choice([1.0, rng.uniform(1e-6, 3)]) for _ in range(views)]
        xs = [rng.choice([lo, alpha, lo + rng.uniform(0, 4), 1.0 if lo <= 1.0 else lo])
              for lo in los]
        if case % 2:
            xs_in: list[float] | tuple[float, ...] = tuple(xs)
        else:
            xs_in = xs
        state = _random_state(rng, views * len(frs))
        a = [list(s) for s in state]
        b = [list(s) for s in state]
        t = rng.choice([1, 7, 255, 257, 10**9])
        use_sr = rng.random() < 0.5
        top_c = ck.advance(a[0], a[1], a[2], a[3], xs_in, los, frs, alpha, t, use_sr)
        top_p = _advance_py(b[0], b[1], b[2], b[3], xs_in, los, frs, alpha, t, use_sr)
        assert top_c.hex() == top_p.hex(), case
        for sa, sb in zip(a, b, strict=True):
            assert _bits(sa) == _bits(sb), case


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
    assert det_mod._advance is ck.advance  # the default path is the compiled one
    monkeypatch.setattr(det_mod, "_advance", _advance_py)
    rng = np.random.default_rng(7)
    assert json.dumps(run()) == json.dumps(compiled)
    assert any(s["alarm_round"] is not None for s in compiled if "alarm_round" in s)


def test_bad_input_raises_and_leaves_state(ck: ModuleType) -> None:
    sr, cu, start, seg = [0.5], [0.25], [1], [0.0]
    with pytest.raises(TypeError):
        ck.advance(sr, cu, start, seg, [1], [0.0], (0.5,), 0.1, 2, True)  # an int x
    with pytest.raises(TypeError):
        ck.advance(sr, cu, start, [0], [1.0], [0.0], (0.5,), 0.1, 2, True)  # an int state
    with pytest.raises(ValueError, match="inconsistent sizes"):
        ck.advance(sr, cu, start, seg, [1.0, 1.0], [0.0], (0.5,), 0.1, 2, True)
    with pytest.raises(TypeError):
        ck.advance(sr, cu, start, seg, [1.0], [0.0], (0.5,), 0.1, 2.0, True)  # a float t
    assert (sr, cu, start, seg) == ([0.5], [0.25], [1], [0.0])
