"""The verdict's one-sided bound (:func:`monitor.stats.betting.verdict.verdict_bound`) holds at
the verdict's own level ``1 - delta``: Monte Carlo over the null side of each verdict and
inside the certified region, where the bound leans on the confidence sequence."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.stats.betting.bets import BetConfig
from monitor.stats.betting.risk import RiskMonitor
from monitor.stats.betting.verdict import verdict_bound
from tests.stats.binomial import clopper_pearson_lower

ALPHA, DELTA = 0.2, 0.2  # a large delta: misses are frequent enough to be measured


def miss_rate(risk: float, reps: int, horizon: int, seed: int) -> tuple[int, int]:
    """Repetitions whose verdict bound ever excluded ``risk``, and how many got a verdict."""
    losses = np.random.default_rng(seed).random((reps, horizon)) < risk
    misses = verdicts = 0
    for row in losses.astype(float).tolist():
        mon = RiskMonitor(ALPHA, DELTA, "r_eval", BetConfig(), cs_grid=200)
        missed = False
        for x in row:
            mon.update(x, x, None)
            if mon.status == "pending":
                continue
            bound = verdict_bound(mon.status, ALPHA, mon.cs_lower, mon.cs_upper, mon.cs_valid)
            assert bound is not None
            side, value = bound
            missed = missed or (risk > value if side == "upper" else risk < value)
        misses += missed
        verdicts += mon.status != "pending"
    return misses, verdicts


@pytest.mark.statistical
@pytest.mark.parametrize(("risk", "seed"), [(0.14, 1), (0.2, 2), (0.24, 3)])
def test_the_verdict_bound_holds_at_the_verdicts_level(risk: float, seed: int) -> None:
    reps = 200
    misses, verdicts = miss_rate(risk, reps, 250, seed)
    assert verdicts > 10  # verdicts happen: the bound is exercised
    assert clopper_pearson_lower(misses, reps, 0.999) <= DELTA, (misses, verdicts)


def test_the_bound_agrees_with_the_verdict() -> None:
    for cs in [(0.0, 1.0), (0.02, 0.07), (0.15, 0.4), (0.3, 0.05)]:
        up = verdict_bound("certified", 0.1, *cs)
        low = verdict_bound("violated", 0.1, *cs)
        assert up is not None and up[0] == "upper" and up[1] <= 0.1
        assert low is not None and low[0] == "lower" and low[1] >= 0.1
    assert verdict_bound("certified", 0.1, float("nan"), float("nan")) == ("upper", 0.1)
