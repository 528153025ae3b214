"""The compiled plug-in e-process round gives the same bits as the Python reference."""

from __future__ import annotations

import json
import random
from types import ModuleType

import numpy as np
import pytest

from monitor.stats.betting import plugin as plugin_mod
from monitor.stats.betting.bets import BetConfig
from monitor.stats.betting.plugin import PlugInEProcess, _plugin_rho_py, _scale_cells_py
from tests.ckernels import load


@pytest.fixture(scope="module")
def ck() -> ModuleType:
    return load("monitor.stats.betting.ckernel")


def test_scale_cells_matches_python(ck: ModuleType) -> None:
    rng = random.Random(11)
    for case in range(3000):
        n = rng.randint(0, 40)
        u = [rng.choice([0.0, 1e-160, 5e-324, 1e149, rng.random()]) for _ in range(n)]
        bets = [rng.uniform(0, 5) for _ in range(n)]
        x = rng.choice([0.0, -0.0, -0.9, 0.9, rng.uniform(-1, 1)])
        a, ta = ck.scale_cells(u, bets, x)
        b, tb = _scale_cells_py(u, bets, x)
        assert [v.hex() for v in a] == [v.hex() for v in b], case
        assert float(ta).hex() == float(tb).hex(), case


def test_plugin_rho_matches_python(ck: ModuleType) -> None:
    rng = random.Random(12)
    grids = [[0.0], [1.0], [i / 10 for i in range(11)], [rng.random() for _ in range(5)]]
    hits = set()
    for case in range(20000):
        t = rng.choice([2, 3, 10, 1000, 10**7])
        sums = [rng.uniform(-1, 1) * t * rng.choice([0.0, 0.01, 1.0]) for _ in range(5)]
        sums[2], sums[4] = abs(sums[2]), abs(sums[4])
        alpha, c = rng.uniform(0.01, 0.99), rng.choice([0.5, 0.95, rng.random()])
        certify = rng.random() < 0.5
        rhos = rng.choice(grids)
        a = ck.plugin_rho(t, sums, alpha, c, certify, rhos)
        b = _plugin_rho_py(t, sums, alpha, c, certify, rhos)
        assert a.hex() == b.hex(), case
        hits.add(a in rhos)
    assert hits == {True, False}  # both exits (a candidate, the fallback rho0) were taken


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
    assert plugin_mod._scale_cells is ck.scale_cells
    monkeypatch.setattr(plugin_mod, "_scale_cells", _scale_cells_py)
    monkeypatch.setattr(plugin_mod, "_plugin_rho", _plugin_rho_py)
    assert json.dumps(run()) == json.dumps(compiled)


def test_bad_input_raises(ck: ModuleType) -> None:
    with pytest.raises(TypeError):
        ck.scale_cells([1.0], [1], 0.5)
    with pytest.raises(ValueError, match="differ in length"):
        ck.scale_cells([1.0], [1.0, 2.0], 0.5)
    with pytest.raises(TypeError):
        ck.plugin_rho(3, [0.0] * 4, 0.1, 0.5, True, [0.0])
