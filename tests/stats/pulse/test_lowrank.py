from __future__ import annotations

import json

import numpy as np
import pytest

from monitor.stats.pulse.lowrank import (
    LogisticLowRank,
    RefitCost,
    fit_logistic_factors,
    fit_rows,
    sigmoid,
)


def _planted(m: int = 40, n: int = 300, r: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((m, r))
    v = 1.5 * rng.standard_normal((n, r))
    p = sigmoid(u @ v.T)
    s = (rng.random((m, n)) < p).astype(float)
    return u, v, p, s


def test_fit_rows_reaches_stationary_point():
    _, v, _, s = _planted()
    rng = np.random.default_rng(1)
    mask = rng.random(s.shape) < 0.3
    u, cost = fit_rows(s, mask, v, ridge=0.5)
    grad = ((sigmoid(u @ v.T) - s) * mask) @ v + 0.5 * u
    assert np.abs(grad).max() < 1e-6
    assert cost.rows == s.shape[0]
    assert cost.observations == int(mask.sum())
    r = v.shape[1]
    n = s.shape[1]
    expected = cost.newton_steps * (40 * n * r * r + 2 * 40 * n * r + 40 * r**3)
    assert cost.flops == expected


def test_frozen_refit_recovers_planted_probabilities():
    _, v, p, s = _planted()
    rng = np.random.default_rng(2)
    mask = rng.random(s.shape) < 0.25
    lr = LogisticLowRank(s.shape[0], v, l2=0.5)
    lr.refit(s, mask)
    pred = lr.predictions()
    held = ~mask
    corr = np.corrcoef(pred[held], p[held])[0, 1]
    assert corr > 0.9
    base = np.full_like(pred, s[mask].mean())
    bce = lambda q: -np.mean(s[held] * np.log(q[held]) + (1 - s[held]) * np.log(1 - q[held]))  # noqa: E731
    assert bce(pred) < bce(base) - 0.1
    np.testing.assert_array_equal(lr.example_factors, v)  # frozen


def test_dirty_row_refit_equals_full_refit():
    _, v, _, s = _planted(seed=3)
    rng = np.random.default_rng(3)
    mask = rng.random(s.shape) < 0.2
    a = LogisticLowRank(s.shape[0], v, l2=1.0)
    b = LogisticLowRank(s.shape[0], v, l2=1.0)
    a.refit(s, mask)
    b.refit(s, mask)
    mask2 = mask.copy()
    rows = [1, 5, 7]
    mask2[rows] |= rng.random((3, s.shape[1])) < 0.2
    ca = a.refit(s, mask2, rows=rows)
    b.refit(s, mask2)
    assert ca.rows == 3
    np.testing.assert_allclose(a.model_factors, b.model_factors, atol=1e-6)


def test_joint_fit_eq1_deterministic_and_decreasing():
    _, _, _, s = _planted(m=30, n=80, seed=4)
    mask = np.ones_like(s, dtype=bool)

    def loss(u, v, l2=0.05):
        q = np.clip(sigmoid(u @ v.T), 1e-12, 1 - 1e-12)
        bce = -np.mean(s * np.log(q) + (1 - s) * np.log(1 - q))
        return bce + l2 / (2 * sum(s.shape)) * ((u**2).sum() + (v**2).sum())

    u1, v1, c1 = fit_logistic_factors(s, mask, rank=3, l2=0.05, seed=7, sweeps=1)
    u2, v2, c2 = fit_logistic_factors(s, mask, rank=3, l2=0.05, seed=7, sweeps=6)
    u3, v3, _ = fit_logistic_factors(s, mask, rank=3, l2=0.05, seed=7, sweeps=6)
    assert loss(u2, v2) < loss(u1, v1) < np.log(2)
    np.testing.assert_array_equal(u2, u3)
    np.testing.assert_array_equal(v2, v3)
    assert c2.flops > c1.flops > 0


def test_unfrozen_mode_updates_example_factors():
    _, v, _, s = _planted(m=20, n=60, seed=5)
    mask = np.random.default_rng(5).random(s.shape) < 0.5
    lr = LogisticLowRank(20, 0.1 * v, l2=0.05, freeze_examples=False, joint_sweeps=2)
    cost = lr.refit(s, mask)
    assert not np.array_equal(lr.example_factors, 0.1 * v)
    assert cost.rows == 2 * (20 + 60)


def test_state_roundtrip_exact():
    _, v, _, s = _planted(m=10, n=50, seed=6)
    mask = np.random.default_rng(6).random(s.shape) < 0.4
    lr = LogisticLowRank(10, v, l2=0.7)
    lr.refit(s, mask)
    back = LogisticLowRank.from_state(json.loads(json.dumps(lr.to_state())))
    np.testing.assert_array_equal(back.predictions(), lr.predictions())
    assert back.last_cost == lr.last_cost
    mask[:, :5] = True
    assert back.refit(s, mask) == lr.refit(s, mask)
    np.testing.assert_array_equal(back.model_factors, lr.model_factors)


def test_validation_and_cost_sum():
    with pytest.raises(ValueError):
        LogisticLowRank(3, np.zeros(4))
    with pytest.raises(ValueError):
        fit_rows(np.zeros((1, 2)), np.ones((1, 2), bool), np.ones((2, 1)), ridge=0.0)
    assert RefitCost(1, 2, 3, 4) + RefitCost(1, 1, 1, 1) == RefitCost(2, 3, 4, 5)
    lr = LogisticLowRank(2, np.ones((3, 1)))
    assert lr.refit(np.zeros((2, 3)), np.zeros((2, 3), bool), rows=[]).rows == 0
