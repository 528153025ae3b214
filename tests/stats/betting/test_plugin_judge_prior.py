"""The judge prior of the ``plugin_up`` reliance: while every human loss seen was 0
and the judge agreed, the human variance comes from the judge's failure rate. Its rule, its power
with a good judge (and no loss at a low risk), and its validity at the null boundary while it is
in force (a low risk: most early labels are 0) with good, useless and adversarial judges, both
sides, asserted with a Clopper-Pearson bound."""

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


def test_certify_side_uses_the_judge_prior_while_human_losses_are_zero() -> None:
    cert = PlugInEProcess(0.12, 0.1, "certify", GRID, BetConfig())
    viol = PlugInEProcess(0.12, 0.1, "violate", GRID, BetConfig())
    for ep in (cert, viol):
        for d in (0.1, 0.2, 0.0, 0.1, 0.1, 0.2):  # human and judge losses 0, blocks 0-0.2
            ep.advance(0.0, d)
    assert cert.rho == plugin_rho(6, cert.sums, 0.12, 0.95, "certify", GRID, True) >= 0.5
    assert plugin_rho(6, cert.sums, 0.12, 0.95, "certify", GRID) == 0.0  # without: rho = 0
    assert viol.rho == plugin_rho(6, viol.sums, 0.12, 0.95, "violate", GRID)
    twin = PlugInEProcess.from_state(json.loads(json.dumps(cert.to_state())))
    assert twin.rho == cert.rho and twin.to_state() == cert.to_state()
    cert.advance(0.0, -0.9)  # the judge said 1 on a unit a human passed: no prior any more
    assert cert.rho == plugin_rho(7, cert.sums, 0.12, 0.95, "certify", GRID)


def _labels(risk: float, alpha: float, gamma: float, delta: float, seed: int,
            rounds: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    reps = 200
    p_f = risk * gamma + (1 - risk) * (1 - gamma)
    runs = {"plus": PlugInBatch(alpha, "certify", GRID, BetConfig(), reps),
            "no prior": PlugInBatch(alpha, "certify", GRID, BetConfig(), reps, judge_prior=False),
            "eval": PlugInBatch(alpha, "certify", [0.0], BetConfig(), reps),
            "autoeval": PlugInBatch(alpha, "certify", [1.0], BetConfig(), reps)}
    crossed = {k: np.zeros(reps, dtype=int) for k in runs}
    for t in range(1, rounds + 1):
        h = (rng.random(reps) < risk).astype(float)
        f = np.where(rng.random(reps) < gamma, h, 1.0 - h)
        b = rng.binomial(10, p_f, reps) / 10.0
        for k, r in runs.items():
            r.advance(h, b - f)
            crossed[k][(crossed[k] == 0) & (r.log_wealth >= math.log(1 / delta))] = t
    return {k: float(np.median(np.where(v > 0, v, 10**9))) for k, v in crossed.items()}


def test_good_judge_needs_about_the_labels_of_r_autoeval() -> None:
    # Example 1 (risk 0.1, alpha 0.12, r = 10, gamma 0.99), delta 0.1: without the judge prior
    # 1.24x the labels of R-AutoEval (benchmarks/labels_vs_oracle.py, 200 runs); with it 1.03x
    med = _labels(0.1, 0.12, 0.99, 0.1, 29, 1000)
    assert med["plus"] <= 1.12 * min(med["eval"], med["autoeval"]), med
    assert med["no prior"] > 1.12 * min(med["eval"], med["autoeval"]), med  # the test can fail


def test_low_risk_loses_nothing_to_r_eval() -> None:
    # risk 0.01, alpha 0.1, a poor judge (gamma 0.7): R-Eval is best, the judge prior must not
    # move the reliance to the judge (a start at rho = 1 would need about 2x the labels)
    med = _labels(0.01, 0.1, 0.7, 0.01, 30, 300)
    assert med["plus"] <= 1.1 * med["eval"], med


@pytest.mark.statistical
@pytest.mark.parametrize("judge", ["good", "useless", "adversarial"])
def test_null_boundary_validity_while_the_prior_is_in_force(judge: str) -> None:
    # risk = alpha = 0.03: about 33 labels pass before a human loss of 1
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
        # misses every failure and flags 5% of passes: looks like it agrees while the human
        # losses are 0 (the prior moves the reliance to it), then is wrong on every failure
        return np.where(h == 1.0, 0.0, (rng.random(h.shape) < 0.05).astype(float))

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
