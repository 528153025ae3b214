"""benchmarks/labels_vs_oracle.py: the active-audit rows run at a tiny size, and their
clairvoyants are what they claim.

No timing assertions: the machine is shared.
"""

from __future__ import annotations

import math

import numpy as np

from benchmarks import labels_vs_oracle as lvo
from benchmarks.active_audit import UNIFORM, clairvoyant, quantile_final
from monitor.stats.betting.active_growth import POLICIES


def test_active_clairvoyant_beats_the_grid_and_the_uniform_policy() -> None:
    """The continuous best bet (whole range) needs at most the labels of active_audit.py's grid
    clairvoyant (bets on a grid below 0.95 of the cap), by a few percent; with an uninformative
    judge no policy beats the uniform one."""
    for judge in ("calibrated", "uninformative"):
        g, mean_pi = lvo.active_clairvoyant(judge, 0.13)
        assert abs(mean_pi - 0.1) < 1e-6  # every policy spends the budget
        labels = mean_pi * math.log(100.0) / g
        grid = clairvoyant(judge, 0.13, 0.01, POLICIES)
        assert 0.9 * grid < labels <= grid
    # calibrated: the active clairvoyant needs fewer labels than the uniform policy's
    g_uni = clairvoyant("calibrated", 0.13, 0.01, UNIFORM)
    g_act, pi = lvo.active_clairvoyant("calibrated", 0.13)
    assert pi * math.log(100.0) / g_act < 0.85 * g_uni


def test_uniform_clairvoyant_is_r_eval_for_an_uninformative_judge() -> None:
    """Every score equal: the shift is 0, every reliance grows as R-Eval, whose growth for
    Bernoulli(0.106) losses is computed exactly."""
    g_best, g0 = lvo.clairvoyant_growth(lvo.uniform_q("uninformative"), 0.13)
    exact = lvo.growth(0.13 - np.array([0.0, 1.0]), np.array([0.894, 0.106]), 1 / 0.87)
    assert g_best == g0
    assert abs(g0 - exact) < 0.05 * exact  # Monte Carlo share of failures


def test_active_rows_tiny_run() -> None:
    rows = lvo.active_rows(reps=6, seed=1, units=5_000)
    assert [(r["judge"], r["delta"]) for r in rows] == [
        (j, d) for j in ("calibrated", "uninformative") for d in lvo.DELTAS]
    for r in rows:
        assert 0 < _num(r["oracle_active"]) < math.inf and 0 < _num(r["oracle_uniform"]) < math.inf
        assert _num(r["active_vs_oracle"]) > 0 and _num(r["uniform_vs_oracle"]) > 0
    lvo.print_active(rows, 6)
    calibrated = [r for r in rows if r["judge"] == "calibrated"]
    assert math.isfinite(_num(calibrated[0]["active"]))  # delta 0.1 within 5000 units


def _num(v: object) -> float:
    assert isinstance(v, int | float)
    return float(v)


def test_quantile_final_waits_for_runs_with_fewer_labels() -> None:
    """A run not crossed yet may still cross with fewer labels than one that crossed (labels
    are not in the order of units across runs): the median waits until it cannot."""
    got = np.array([[100.0, 120.0, np.inf]])
    assert not quantile_final(got, np.array([100, 120, 90]))
    assert quantile_final(got, np.array([100, 120, 130]))
    assert not quantile_final(np.array([[100.0, np.inf, np.inf]]), np.array([100, 200, 200]))
