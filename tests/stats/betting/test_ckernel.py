"""The compiled plug-in e-process round gives the same bits as the Python reference."""

from __future__ import annotations

import json
import random
from types import ModuleType

import numpy as np
import pytest

from monitor.stats.betting import plugin as plugin_mod
from monitor.stats.betting import plugin_bounds, plugin_round, plugin_switch
from monitor.stats.betting.bets import BetConfig
from monitor.stats.betting.plugin import PlugInEProcess
from monitor.stats.betting.plugin_bounds import add_worst_log_factors_py, worst_log_factors_py
from monitor.stats.betting.plugin_round import reliance_py, step_py
from monitor.stats.betting.plugin_switch import step_switch_py
from tests.ckernels import load


@pytest.fixture(scope="module")
def ck() -> ModuleType:
    return load("monitor.stats.betting.ckernel")


def _hex(v: object) -> object:
    if isinstance(v, float):
        return v.hex()
    if isinstance(v, list | tuple):
        return [_hex(w) for w in v]
    return v


def test_step_matches_python(ck: ModuleType) -> None:
    rng = random.Random(11)
    moved = 0
    for case in range(5000):
        n = rng.randint(0, 70)  # more than 64 cells takes the allocated buffer
        scale = rng.choice([1.0, 1e-152, 1e-140, 1e148, 1e151])
        u = [rng.choice([0.0, 5e-324, rng.random()]) * scale for _ in range(n)]
        bets = [rng.uniform(0, 5) for _ in range(n)]
        x = rng.choice([0.0, -0.0, -0.19, 0.19, rng.uniform(-0.19, 0.19)])
        ref = rng.choice([0.0, -700.0, rng.uniform(-50, 50)])
        outcomes = []
        for fn in (ck.step, step_py):
            try:
                outcomes.append(_hex(fn(u, bets, x, ref)))
            except (ZeroDivisionError, ValueError) as exc:  # a sum that underflowed to 0
                outcomes.append(type(exc).__name__)
        assert outcomes[0] == outcomes[1], case
        moved += isinstance(outcomes[0], list) and outcomes[0][1] != _hex(ref)
    assert moved > 500  # the renormalisation branch ran


def test_reliance_matches_python(ck: ModuleType) -> None:
    rng = random.Random(12)
    grids = [[0.0], [1.0], [i / 10 for i in range(11)], [rng.random() for _ in range(5)]]
    hits = set()
    changed = 0
    for case in range(20000):
        t = rng.choice([0, 1, 2, 3, 10, 1000, 10**7])
        sums = [rng.uniform(-1, 1) * t * rng.choice([0.0, 0.01, 1.0]) for _ in range(5)]
        sums[2], sums[4] = abs(sums[2]), abs(sums[4])
        h = rng.choice([0.0, 1.0, 1, rng.random()])
        d = rng.choice([0.0, -0.0, rng.uniform(-1, 1)])
        alpha, c = rng.uniform(0.01, 0.99), rng.choice([0.5, 0.95, rng.random()])
        certify = rng.random() < 0.5
        rhos = rng.choice(grids)
        if rng.random() < 0.3:  # human losses all 0 so far, blocks in [0, 1]: the judge prior
            sums[0] = sums[2] = sums[3] = 0.0
            sums[1] = abs(sums[1])
            sums[4] = sums[1] * rng.choice([0.05, 0.3, 0.5])
        sa, sb = list(sums), list(sums)
        prior = rng.choice(["omitted", False, True])
        if prior == "omitted":
            a = ck.reliance(sa, h, d, t, alpha, c, certify, rhos)
            b = reliance_py(sb, h, d, t, alpha, c, certify, rhos)
        else:
            a = ck.reliance(sa, h, d, t, alpha, c, certify, rhos, prior)
            b = reliance_py(sb, h, d, t, alpha, c, certify, rhos, prior)
            if prior and t >= 2:  # the judge prior changed the answer
                s0 = list(sums)
                changed += a != reliance_py(s0, h, d, t, alpha, c, certify, rhos, False)
        assert _hex(a) == _hex(b) and _hex(sa) == _hex(sb), case
        hits.add(a in rhos)
    assert hits == {True, False}  # both exits (a candidate, the fallback rho0) were taken
    assert changed > 100  # the judge-prior branch ran


def test_processes_match_python_over_streams(ck: ModuleType,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    def run() -> list[dict[str, object]]:
        rng = np.random.default_rng(3)
        out = []
        for s in range(24):
            rhos = [[0.0], [1.0], [i / 10 for i in range(11)]][s % 3]
            ep = PlugInEProcess(0.2, 0.1, "certify" if s % 2 else "violate", rhos, BetConfig())
            h = (rng.random(500) < 0.1 + 0.01 * s).astype(float).tolist()
            d = (rng.normal(0, 0.05, 500)).tolist()
            for i, (hv, dv) in enumerate(zip(h, d, strict=True)):
                ep.advance(hv, dv)
                if i == 250:
                    ep.restart_reliance()
            out.append(ep.to_state())
        return out

    compiled = run()
    assert plugin_round.step is ck.step and plugin_round.reliance is ck.reliance
    monkeypatch.setattr(plugin_mod, "step", step_py)  # the names PlugInEProcess calls
    monkeypatch.setattr(plugin_mod, "reliance", reliance_py)
    monkeypatch.setattr(plugin_mod, "step_switch", step_switch_py)
    assert json.dumps(run()) == json.dumps(compiled)


def test_step_switch_matches_python(ck: ModuleType) -> None:
    rng = random.Random(13)
    seen = set()
    for case in range(6000):
        g = rng.choice([0, 1, 8, 13, rng.randint(0, 70)])  # > 63 bets: allocated buffers
        scale = rng.choice([1.0, 1.0, 1e-152, 1e148, 1e151])
        u = [rng.choice([0.0, 5e-324, rng.random()]) * scale for _ in range(g + 1)]
        alpha, c = rng.uniform(0.01, 0.99), rng.choice([0.5, 0.95, rng.random()])
        sgn, off = rng.choice([(1.0, 1.0 - alpha), (-1.0, alpha)])
        rho = rng.choice([0.0, 1.0, rng.random()])
        cap = c / (off + rho)
        bets = [rng.choice([cap, rng.uniform(0, 1.5 * cap)]) for _ in range(g)]
        napp = rng.choice([0, 1, 2, 3, 50, 10**4])
        h = [float(rng.random() < rng.choice([0.0, 0.01, 0.3])) for _ in range(min(napp, 200))]
        dd = [rng.gauss(0.0, rng.choice([0.0, 0.01, 0.2])) for _ in h]
        k = napp / max(1, len(h))
        app = [k * sum(h), k * sum(dd), k * sum(x * x for x in h),
               k * sum(x * y for x, y in zip(h, dd, strict=True)), k * sum(y * y for y in dd)]
        x = rng.choice([0.0, -0.0, -0.19, 0.19, rng.uniform(-0.19, 0.19)])
        ref = rng.choice([0.0, -700.0, rng.uniform(-50, 50)])
        args = (u, bets, x, ref, app, napp, alpha, c, sgn, off, rho)
        outcomes = []
        for fn in (ck.step_switch, step_switch_py):
            try:
                outcomes.append(_hex(fn(*args)))
            except (ZeroDivisionError, ValueError) as exc:  # a sum that underflowed to 0
                outcomes.append(type(exc).__name__)
        assert outcomes[0] == outcomes[1], (case, args)
        if isinstance(outcomes[0], list):
            seen.add(("sure", plugin_switch.sure(app, napp, alpha, c, sgn, off, rho)))
            seen.add(("moved", outcomes[0][1] != _hex(ref)))
    # both bets of the switch cell, and the renormalisation, were compared
    assert seen >= {("sure", True), ("sure", False), ("moved", True)}, seen


def test_worst_log_factors_matches_python(ck: ModuleType) -> None:
    rng = random.Random(13)
    clipped = unknown = 0
    assert plugin_bounds.worst_log_factors is ck.worst_log_factors
    for case in range(20000):
        alpha = rng.choice([0.05, 0.1, rng.uniform(0.01, 0.99)])
        side = rng.choice(["certify", "violate"])
        c = rng.choice([0.5, 0.95, rng.random()])
        n = rng.randint(0, 40)
        lam = [rng.choice([rng.uniform(0.01, 30.0), rng.uniform(0.01, 2.0), 1, 2.5])
               for _ in range(n)]
        if rng.random() < 0.5:
            lam = tuple(lam)
        human = rng.choice([None, 0.0, 1.0, 0, 1, rng.random()])
        rho = rng.choice([None, None, 0.0, 1.0, rng.random()])
        shift = rng.choice([0.0, -0.0, rng.uniform(-1, 1), np.float64(rng.uniform(-1, 1))])
        a = ck.worst_log_factors(alpha, side, lam, c, human, rho, shift)
        b = worst_log_factors_py(alpha, side, lam, c, human, rho, shift)
        assert _hex(a) == _hex(b), case
        s = rng.choice([None, [rng.uniform(-50, 50) for _ in range(n)], [0.0] * n])
        sign = rng.choice([1.0, -1.0])
        a = ck.add_worst_log_factors(s, sign, alpha, side, lam, c, human, rho, shift)
        b = add_worst_log_factors_py(s, sign, alpha, side, lam, c, human, rho, shift)
        assert _hex(a) == _hex(b), case
        unknown += rho is None and n > 0
        off = 1.0 - alpha if side == "certify" else alpha
        clipped += rho is None and any(0.0 < c / lk - off < 1.0 for lk in lam)
    assert unknown > 1000 and clipped > 1000  # the unknown-reliance and clipping paths ran
    for args in ((0.1, "certify", [0.0], 0.5, None, None, 0.0),   # c / 0: as Python
                 (0.0, "violate", [1.0], 0.5, None, 0.0, 0.0)):   # c / (off + 0)
        with pytest.raises(ZeroDivisionError):
            ck.worst_log_factors(*args)
        with pytest.raises(ZeroDivisionError):
            worst_log_factors_py(*args)
    with pytest.raises(ValueError, match="math domain"):  # c > 1, a factor <= 0: log refuses
        ck.worst_log_factors(0.1, "certify", [5.0], 2.0, 1.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="math domain"):
        worst_log_factors_py(0.1, "certify", [5.0], 2.0, 1.0, 0.0, 0.0)
    with pytest.raises(TypeError):
        ck.worst_log_factors(0.1, "certify", ["x"], 0.95, None, None, 0.0)
    for fn in (ck.add_worst_log_factors, add_worst_log_factors_py):
        with pytest.raises(ValueError, match="differ in length"):
            fn([0.0], 1.0, 0.1, "certify", [0.5, 1.0], 0.95, None, None, 0.0)


def test_float_subclasses_and_small_ints_like_python(ck: ModuleType) -> None:
    a = ck.reliance([0.0] * 5, np.float64(1.0), 3, 5, 0.1, 0.5, True, [0.0, 1.0])
    s = [0.0] * 5
    b = reliance_py(s, 1.0, 3.0, 5, 0.1, 0.5, True, [0.0, 1.0])
    assert a == b
    with pytest.raises(TypeError, match="2\\*\\*26"):  # computed differently: refused
        ck.reliance([0.0] * 5, 2**53 + 1, 0.0, 1, 0.1, 0.5, True, [0.0])
    ep = PlugInEProcess(0.2, 0.1, "certify", [0.0, 1.0], BetConfig())
    ep.advance(np.float64(0.0), np.float64(0.01))  # numpy floats are floats
    assert ep.rounds == 1


def test_bad_input_raises(ck: ModuleType) -> None:
    with pytest.raises(TypeError):
        ck.step([1.0], ["x"], 0.5, 0.0)
    with pytest.raises(ValueError, match="differ in length"):
        ck.step([1.0], [1.0, 2.0], 0.5, 0.0)
    with pytest.raises(ValueError, match="one cell more"):
        ck.step_switch([1.0], [1.0], 0.5, 0.0, [0.0] * 5, 0, 0.1, 0.5, 1.0, 0.9, 0.0)
    with pytest.raises(TypeError):
        ck.step_switch([1.0, 1.0], [1.0], 0.5, 0.0, [0.0] * 4, 0, 0.1, 0.5, 1.0, 0.9, 0.0)
    with pytest.raises(TypeError):
        ck.reliance([0.0] * 4, 0.0, 0.0, 3, 0.1, 0.5, True, [0.0])
    with pytest.raises(TypeError):  # too many arguments
        ck.reliance([0.0] * 5, 0.0, 0.0, 3, 0.1, 0.5, True, [0.0], True, 1)
