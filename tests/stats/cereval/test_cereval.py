from __future__ import annotations

import json
import math

import numpy as np
import pytest

from monitor.stats.cereval.certified_mean import StratifiedCertifiedMean, traffic_weighted_mean
from monitor.stats.cereval.stitched_radii import (
    MIN_LOG_FACTOR,
    SequentialMean,
    bernstein_radius,
    hoeffding_radius,
    stitched_log_term,
)


def test_hoeffding_radius_formula() -> None:
    n, d = 5000, 0.05
    expect = math.sqrt((2 * math.log(math.log2(n) + 1) + math.log(4 / d)) / n)
    assert float(hoeffding_radius(n, d)) == pytest.approx(expect, rel=1e-12)
    assert math.isinf(float(hoeffding_radius(0, d)))
    with pytest.raises(ValueError):
        hoeffding_radius(10, 1.0)


def test_stitched_log_term_uses_log2() -> None:
    assert float(stitched_log_term(8, 0.0)) == pytest.approx(2 * math.log(4.0))


def test_bernstein_radius_formula_and_cap() -> None:
    n, v, d, k = 400, 0.02, 0.05, 3
    eta2 = (2 * math.log(math.log2(n) + 1) + math.log(16 * k / d)) / n
    vup = min(v + math.sqrt(eta2) + eta2, 0.25)
    expect = 2 * eta2 / 3 + 2 * math.sqrt(vup * eta2)
    assert float(bernstein_radius(n, v, d, k)) == pytest.approx(expect, rel=1e-12)
    # variance upper bound capped at 1/4
    small = float(bernstein_radius(3, 0.25, d, k))
    eta2 = (2 * math.log(math.log2(3) + 1) + math.log(16 * k / d)) / 3
    assert small == pytest.approx(2 * eta2 / 3 + 2 * math.sqrt(0.25 * eta2))


def test_bernstein_radius_decreases_and_validates() -> None:
    r = bernstein_radius(np.arange(1, 2000), 0.05, 0.05, 2)
    assert np.all(np.diff(r) < 0)
    with pytest.raises(ValueError):
        bernstein_radius(10, 0.1, 0.05, 1, log_factor=MIN_LOG_FACTOR - 0.1)
    with pytest.raises(ValueError):
        bernstein_radius(10, 0.1, 0.05, 0)


def test_sequential_mean_roundtrip_bit_identical() -> None:
    rng = np.random.default_rng(0)
    xs = rng.random(500).tolist()
    a = SequentialMean(0.05)
    for x in xs[:250]:
        a.update(x)
    b = SequentialMean.from_state(json.loads(json.dumps(a.to_state())))
    for x in xs[250:]:
        a.update(x)
        b.update(x)
    assert a.to_state() == b.to_state()
    assert a.mean == pytest.approx(float(np.mean(xs)), abs=1e-15)
    assert a.lower <= a.mean <= a.upper
    with pytest.raises(ValueError):
        a.update(1.5)


def test_stratified_estimate_and_interval() -> None:
    m = StratifiedCertifiedMean(3, 0.05)
    m.observe_traffic(0, 600)
    m.observe_traffic(1, 300)
    m.observe_traffic(2, 100)
    for _ in range(50):
        m.update(0, 0.2)
        m.update(1, 0.4)
    # stratum 2 has traffic and no label: contributes [0, 1] * 0.1
    assert m.estimate == pytest.approx(0.6 * 0.2 + 0.3 * 0.4 + 0.1 * 0.5)
    eps = m.stratum_radii
    assert math.isinf(eps[2])
    assert m.lower == pytest.approx(0.6 * max(0, 0.2 - eps[0]) + 0.3 * max(0, 0.4 - eps[1]))
    assert m.upper == pytest.approx(
        0.6 * min(1, 0.2 + eps[0]) + 0.3 * min(1, 0.4 + eps[1]) + 0.1)
    assert m.half_width <= m.paper_radius
    assert m.target_stratum == 2  # empty weighted stratum first
    assert m.marginal_gains()[2] == math.inf
    alloc = m.allocation()
    assert alloc.sum() == pytest.approx(1.0) and np.all(alloc > 0)


def test_stratified_fixed_weights_and_tiebreak() -> None:
    m = StratifiedCertifiedMean(2, 0.1, weights=[0.3, 0.7])
    assert m.target_stratum == 1  # both empty: larger weight first
    m.observe_traffic(0, 10)  # ignored for weights when fixed
    np.testing.assert_allclose(m.weights, [0.3, 0.7])
    with pytest.raises(ValueError):
        StratifiedCertifiedMean(2, 0.1, weights=[0.3, 0.3])


def test_target_rule_prefers_high_variance_heavy_stratum() -> None:
    m = StratifiedCertifiedMean(2, 0.05, weights=[0.5, 0.5])
    rng = np.random.default_rng(1)
    for _ in range(3000):
        m.update(0, float(rng.random()))  # high variance
        m.update(1, 0.5)  # constant
    assert m.target_stratum == 0
    assert m.allocation()[0] > m.allocation()[1]


def test_single_stratum_matches_formula() -> None:
    m = StratifiedCertifiedMean(1, 0.05)
    xs = np.linspace(0, 1, 101)
    for x in xs:
        m.update(0, float(x))
    v = float(np.var(xs))
    assert m.stratum_variances[0] == pytest.approx(v)
    assert m.paper_radius == pytest.approx(float(bernstein_radius(101, v, 0.05, 1)))


def test_stratified_state_roundtrip_continues_identically() -> None:
    rng = np.random.default_rng(2)
    a = StratifiedCertifiedMean(3, 0.05, log_factor=10.0)
    events = [(int(rng.integers(3)), float(rng.random())) for _ in range(300)]
    for s, x in events[:150]:
        a.observe_traffic(s)
        a.update(s, x)
    b = StratifiedCertifiedMean.from_state(json.loads(json.dumps(a.to_state())))
    for s, x in events[150:]:
        for obj in (a, b):
            obj.observe_traffic(s, 2)
            obj.update(s, x)
    assert a.to_state() == b.to_state()
    assert (a.lower, a.upper, a.target_stratum) == (b.lower, b.upper, b.target_stratum)


def test_invalid_inputs() -> None:
    m = StratifiedCertifiedMean(2, 0.05)
    with pytest.raises(ValueError):
        m.update(2, 0.5)
    with pytest.raises(ValueError):
        m.update(0, -0.1)
    with pytest.raises(ValueError):
        m.observe_traffic(0, -1)
    with pytest.raises(ValueError):
        StratifiedCertifiedMean(0, 0.05)


def test_traffic_weighted_mean_vectorized() -> None:
    out = traffic_weighted_mean([[1, 1], [3, 1]], [[1.0, 0.0], [2.0, 1.0]], [[2, 0], [4, 1]])
    np.testing.assert_allclose(out, [0.5 * 0.5 + 0.5 * 0.5, 0.75 * 0.5 + 0.25 * 1.0])
