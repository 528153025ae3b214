from __future__ import annotations

import numpy as np
import pytest

from monitor.stats.stratppi.allocation import (
    audit_rates,
    heuristic_sd,
    optimal_allocation,
    proportional_allocation,
)


def test_allocations() -> None:
    assert proportional_allocation([1, 1, 2]).tolist() == [0.25, 0.25, 0.5]
    np.testing.assert_allclose(optimal_allocation([0.5, 0.5], [0.0, 0.0]), [0.5, 0.5])
    np.testing.assert_allclose(optimal_allocation([0.8, 0.2], [0.1, 0.4]), [0.5, 0.5])
    np.testing.assert_allclose(heuristic_sd(0.3, 0.09, 0.0), np.sqrt(0.21))
    # lambda = 1: E[f(1 - f)] for a constant judge loss 0.3
    np.testing.assert_allclose(heuristic_sd(0.3, 0.09, 1.0), np.sqrt(0.21))
    np.testing.assert_allclose(heuristic_sd(0.5, 0.5, 1.0), 0.0)  # f in {0, 1}: judge certain


def test_audit_rates_budget_floor_cap() -> None:
    p = np.array([0.6, 0.3, 0.1])
    r = audit_rates([0.1, 0.1, 0.8], p, budget_rate=0.05, floor=0.01)
    assert float(r @ p) == pytest.approx(0.05)
    assert r.min() >= 0.01
    r = audit_rates([0.0, 0.0, 1.0], p, budget_rate=0.2, floor=0.02)
    assert r[2] == 1.0 and r[0] == pytest.approx(r[1]) and r[0] >= 0.02
    assert float(r @ p) <= 0.2 + 1e-12
    assert audit_rates([1, 1], [1, 0], 0.1, 0.05).tolist() == [0.1, 0.05]
    with pytest.raises(ValueError):
        audit_rates([1, 1], [0.5, 0.5], budget_rate=0.01, floor=0.02)
    with pytest.raises(ValueError):
        audit_rates([1, -1], [0.5, 0.5], 0.1)


def test_heuristic_sd_round_off_is_exact_zero_and_allocation_falls_back() -> None:
    # E f^2 = E f (judge losses in {0, 1}) up to round-off of either sign
    m1 = np.array([0.3, 0.3, 0.3])
    m2 = m1 * (1.0 + np.array([1e-15, -1e-15, -3e-16]))
    sd = heuristic_sd(m1, m2, 1.0)
    assert sd.tolist() == [0.0, 0.0, 0.0]
    w = [0.2, 0.3, 0.5]
    np.testing.assert_array_equal(optimal_allocation(w, sd), proportional_allocation(w))
    # a real spread in one stratum keeps the Neyman shares (zero elsewhere)
    sd = heuristic_sd([0.3, 0.3, 0.3], [0.3, 0.25, 0.3 * (1 - 1e-15)], 1.0)
    assert sd[0] == 0.0 and sd[2] == 0.0 and sd[1] == pytest.approx(np.sqrt(0.05))
    np.testing.assert_allclose(optimal_allocation(w, sd), [0.0, 1.0, 0.0])
    # lambda = 0 (Bernoulli variance) unaffected away from the degenerate case
    np.testing.assert_allclose(heuristic_sd(0.3, 0.3, 0.0), np.sqrt(0.21))
    assert heuristic_sd(0.0, 0.0, 0.0).tolist() == 0.0
    assert heuristic_sd(1.0, 1.0, 0.0).tolist() == 0.0
