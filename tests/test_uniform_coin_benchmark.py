"""benchmarks/uniform_coin.py: the hedge it measures is what it says, and valid at the null.

No timing assertions: the machine is shared.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks import uniform_coin as uc
from tests.stats.binomial import clopper_pearson_lower


def test_hedges_are_the_average_and_the_processes_they_follow() -> None:
    rng = np.random.default_rng(5)
    unit = np.cumsum(rng.normal(0.0, 0.3, (50, 7)), axis=0)
    label = np.cumsum(rng.normal(0.05, 0.3, (50, 7)), axis=0)
    avg = uc.hedge(unit, label, "average", 0.0)
    np.testing.assert_allclose(avg, np.log(0.5 * np.exp(unit) + 0.5 * np.exp(label)), atol=1e-12)
    # a leader rule with an infinite margin is the half-half rebalanced portfolio
    np.testing.assert_allclose(uc.hedge(unit, label, "leader", math.inf),
                               uc.hedge(unit, label, "rebalanced", 0.5), atol=1e-12)
    # ahead by more than the margin after the first interval: the leader rule follows its ratios
    big = unit + 5.0 * np.arange(1, 51)[:, None]
    lead = uc.hedge(big, label, "leader", 1.0)
    np.testing.assert_allclose(np.diff(lead, axis=0), np.diff(big, axis=0), atol=1e-9)


def test_the_simulated_streams_have_the_coins_blocks() -> None:
    """Labels come at rate 1/11 per unit, the per-label rounds' shifts are 0 for empty blocks
    (about 1 round in 11) and the per-unit process is certmon's active machinery."""
    w = uc.simulate("ex1", 0.1, 0.12, 0.99, 64, 200, seed=3)
    assert {k: v.shape for k, v in w.items()} == {k: (200, 64) for k in w}
    assert np.isfinite(w["per-unit"]).all()
    assert (w["rho 0"][-1] != w["rho 1"][-1]).any()


@pytest.mark.statistical
def test_the_label_time_hedges_keep_delta_at_the_null_boundary() -> None:
    """Risk == alpha (certify side), a good and a biased judge: every hedge, read at each label
    time, crosses log(1/delta) in at most delta of the runs (Clopper-Pearson at 99%)."""
    reps, delta = 1500, 0.1
    for judge, gamma, seed in (("ex1", 0.9, 11), ("ex1", 0.3, 12)):
        w = uc.simulate(judge, 0.12, 0.12, gamma, reps, 250, seed)
        for rule, par in (("average", 0.0), ("union", 0.0), ("rebalanced", 0.5),
                          ("soft", 2.0), ("leader", 1.0)):
            lw = uc.hedge(w["per-unit"], w["plugin_up"], rule, par)
            k = int((lw >= math.log(1.0 / delta)).any(axis=0).sum())
            assert clopper_pearson_lower(k, reps, 0.99) <= delta, (judge, gamma, rule, k)
