"""The start of the ``plugin_up`` reliance (issue 29): R-AutoEval on the certify side until the
human losses vary; its rule, its power with a good judge and its validity at the null boundary
while the start lasts (a low risk: most early labels are 0), with good, useless and adversarial
judges, asserted with a Clopper-Pearson bound."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from monitor.stats.betting.autoeval import method_rhos
from monitor.stats.betting.bets import BetConfig, Side
from monitor.stats.betting.plugin import PlugInEProcess, plugin_rho
from tests.stats.binomial import clopper_pearson_lower
from tests.support.plugin_batch import PlugInBatch

GRID = method_rhos("r_autoeval_plus").tolist()


def test_certify_starts_at_r_autoeval_until_the_human_losses_vary() -> None:
    cert = PlugInEProcess(0.12, 0.1, "certify", GRID, BetConfig())
    viol = PlugInEProcess(0.12, 0.1, "violate", GRID, BetConfig())
    assert (cert.rho, viol.rho) == (1.0, 0.0)
    for d in (0.1, -0.9, 0.2, 0.0, -0.9):  # human losses all 0, the judge varies
        cert.advance(0.0, d)
        assert cert.rho == 1.0
    cert.advance(1.0, 0.1)  # the first human loss that differs: the plug-in rule takes over
    assert cert.rho == plugin_rho(6, cert.sums, 0.12, 0.95, "certify", GRID)
    twin = PlugInEProcess.from_state(json.loads(json.dumps(cert.to_state())))
    assert twin.rho == cert.rho and twin.to_state() == cert.to_state()
    cert.restart_reliance()  # the judge drifted: the relearned reliance starts at 0
    cert.advance(0.0, 0.1)
    assert cert.rho == 0.0
    cert.advance(0.0, 0.1)
    assert cert.rho == plugin_rho(2, cert.sums, 0.12, 0.95, "certify", GRID) != 1.0
    twin = PlugInEProcess.from_state(json.loads(json.dumps(cert.to_state())))
    assert twin.rho == cert.rho
    # fixed reliances have no start
    assert PlugInEProcess(0.12, 0.1, "certify", [0.0], BetConfig()).rho == 0.0


def test_good_judge_needs_about_the_labels_of_r_autoeval() -> None:
    # Example 1 (risk 0.1, alpha 0.12, r = 10, gamma 0.99), delta 0.1: the start at rho = 0
    # (before issue 29) needed 1.24x the labels of R-AutoEval (200 streams); now about 1.04x
    rng = np.random.default_rng(29)
    reps, alpha, gamma = 200, 0.12, 0.99
    p_f = 0.1 * gamma + 0.9 * (1 - gamma)
    runs = {k: PlugInBatch(alpha, "certify", rhos, BetConfig(), reps)
            for k, rhos in (("plus", GRID), ("autoeval", [1.0]))}
    crossed = {k: np.zeros(reps, dtype=int) for k in runs}
    for t in range(1, 1201):
        h = (rng.random(reps) < 0.1).astype(float)
        f = np.where(rng.random(reps) < gamma, h, 1.0 - h)
        b = rng.binomial(10, p_f, reps) / 10.0
        for k, r in runs.items():
            r.advance(h, b - f)
            crossed[k][(crossed[k] == 0) & (r.log_wealth >= math.log(10))] = t
    med = {k: float(np.median(np.where(v > 0, v, 10**9))) for k, v in crossed.items()}
    assert med["plus"] <= 1.12 * med["autoeval"], med


@pytest.mark.statistical
@pytest.mark.parametrize("judge", ["good", "useless", "adversarial"])
def test_null_boundary_validity_while_the_start_lasts(judge: str) -> None:
    # risk = alpha = 0.03: about 33 labels pass before a human loss of 1, the start's rounds
    reps, horizon, alpha, block = 2000, 400, 0.03, 10
    rng = np.random.default_rng({"good": 1, "useless": 2, "adversarial": 3}[judge])
    sides: tuple[Side, ...] = ("certify", "violate")
    runs = {s: PlugInBatch(alpha, s, GRID, BetConfig(), reps) for s in sides}
    best = {s: np.zeros(reps) for s in sides}

    def judged(h: np.ndarray) -> np.ndarray:
        if judge == "good":
            return np.where(rng.random(h.shape) < 0.95, h, 1.0 - h)
        if judge == "useless":
            return (rng.random(h.shape) < 0.5).astype(float)
        return 1.0 - h  # always wrong: says 1 on every unit a human passes

    for _ in range(horizon):
        h = (rng.random(reps) < alpha).astype(float)
        f = judged(h)
        b = judged((rng.random((reps, block)) < alpha).astype(float)).mean(axis=1)
        for s in sides:
            runs[s].advance(h, b - f)
            np.maximum(best[s], runs[s].log_wealth, out=best[s])
    for s in sides:
        for delta in (0.2, 0.1, 0.05):
            k = int((best[s] >= math.log(1 / delta)).sum())
            assert clopper_pearson_lower(k, reps, 0.999) <= delta, (judge, s, delta, k / reps)
