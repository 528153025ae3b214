"""Monte Carlo validity of the Cer-Eval certified intervals (anytime failure <= delta).

Each test simulates many independent runs at once (vectorized over repetitions), records whether
the interval *ever* missed the target up to the horizon, and asserts a one-sided Clopper-Pearson
upper bound on that failure probability is <= delta. delta is set large (0.2-0.3) and the tight
log factor is used where possible so the tests have power against a wrong radius.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from monitor.stats.cereval.certified_mean import StratifiedCertifiedMean
from monitor.stats.cereval.stitched_radii import MIN_LOG_FACTOR, bernstein_radius, hoeffding_radius
from monitor.stats.stratppi.allocation import audit_rates

try:  # colleague's helper (tests/stats/binomial.py); fall back to a local one
    from tests.stats.binomial import clopper_pearson_upper
except ImportError:  # pragma: no cover - depends on the other file existing

    def _log_binom_pmf(i: int, n: int, p: float) -> float:
        return (math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                + i * math.log(p) + (n - i) * math.log1p(-p))

    def _binom_cdf(k: int, n: int, p: float) -> float:
        if p <= 0.0:
            return 1.0
        if p >= 1.0:
            return 1.0 if k >= n else 0.0
        return min(1.0, sum(math.exp(_log_binom_pmf(i, n, p)) for i in range(k + 1)))

    def clopper_pearson_upper(k: int, n: int, conf: float) -> float:
        """One-sided upper confidence bound for a binomial proportion."""
        if k >= n:
            return 1.0
        lo, hi = k / n, 1.0
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if _binom_cdf(k, n, mid) > 1.0 - conf:
                lo = mid
            else:
                hi = mid
        return hi


CONF = 0.99


def _beta_params(mean: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = mean * (1 - mean) / var - 1.0
    return mean * s, (1 - mean) * s


@pytest.mark.statistical
def test_seq_anytime_failure_at_most_delta() -> None:
    rng = np.random.default_rng(20261121)
    reps, horizon, delta, p = 3000, 4096, 0.2, 0.5
    x = (rng.random((reps, horizon)) < p).astype(np.int32)
    n = np.arange(1, horizon + 1)
    means = np.cumsum(x, axis=1) / n
    fail = np.any(np.abs(means - p) >= hoeffding_radius(n, delta), axis=1)
    k = int(fail.sum())
    assert clopper_pearson_upper(k, reps, CONF) <= delta, k


def _run_adaptive(
    rng: np.random.Generator,
    reps: int,
    horizon: int,
    weights: np.ndarray,
    means: np.ndarray,
    variances: np.ndarray,
    delta: float,
    rule: str,
) -> np.ndarray:
    """Vectorized Cer-Eval with adaptive stratum choice; returns ever-failed per rep."""
    k = weights.size
    a, b = _beta_params(means, variances)
    theta = float(weights @ means)
    n = np.zeros((reps, k))
    mu = np.zeros((reps, k))
    m2 = np.zeros((reps, k))
    failed = np.zeros(reps, dtype=bool)
    rows = np.arange(reps)
    for t in range(horizon):
        var_hat = np.where(n > 0, m2 / np.maximum(n, 1), 0.0)
        if rule == "target":  # Algorithm 1 step 3, as in StratifiedCertifiedMean.marginal_gains
            now = bernstein_radius(n, var_hat, delta, k, MIN_LOG_FACTOR)
            nxt = bernstein_radius(n + 1, var_hat, delta, k, MIN_LOG_FACTOR)
            with np.errstate(invalid="ignore"):
                gain = np.where(n > 0, weights * (now - nxt), np.inf)
            choice = np.argmax(gain, axis=1)
        else:  # adversarial-looking: label the stratum whose current mean is lowest
            choice = np.where(t < 3 * k, t % k, np.argmin(np.where(n > 0, mu, -1.0), axis=1))
        z = rng.beta(a[choice], b[choice])
        n[rows, choice] += 1
        d = z - mu[rows, choice]
        mu[rows, choice] += d / n[rows, choice]
        m2[rows, choice] += d * (z - mu[rows, choice])
        if t >= k:
            var_hat = np.where(n > 0, m2 / np.maximum(n, 1), 0.0)
            eps = bernstein_radius(n, var_hat, delta, k, MIN_LOG_FACTOR)
            lo = weights @ np.maximum(0.0, np.where(n > 0, mu, 0.5) - eps).T
            hi = weights @ np.minimum(1.0, np.where(n > 0, mu, 0.5) + eps).T
            failed |= (theta < lo) | (theta > hi)
    return failed


@pytest.mark.statistical
@pytest.mark.parametrize("rule", ["target", "lowest_mean"])
def test_stratified_adaptive_anytime_failure_at_most_delta(rule: str) -> None:
    rng = np.random.default_rng(7 if rule == "target" else 8)
    weights = np.array([0.5, 0.3, 0.2])
    means = np.array([0.1, 0.5, 0.85])
    variances = np.array([0.002, 0.05, 0.01])
    delta, reps = 0.3, 1500
    failed = _run_adaptive(rng, reps, 1200, weights, means, variances, delta, rule)
    k = int(failed.sum())
    assert clopper_pearson_upper(k, reps, CONF) <= delta, k


@pytest.mark.statistical
def test_stream_unequal_audit_rates_covers_traffic_weighted_risk() -> None:
    """Units arrive, audited at steered per-stratum rates; target: the risk over traffic seen."""
    rng = np.random.default_rng(11)
    reps, horizon, delta = 1500, 4000, 0.3
    mass = np.array([0.7, 0.2, 0.1])
    r_k = np.array([0.05, 0.4, 0.7])
    a, b = _beta_params(r_k, np.array([0.01, 0.08, 0.05]))
    rates = audit_rates([0.2, 0.4, 0.4], mass, budget_rate=0.1, floor=0.02)
    k = mass.size
    traffic = np.zeros((reps, k))
    n = np.zeros((reps, k))
    mu = np.zeros((reps, k))
    m2 = np.zeros((reps, k))
    failed = np.zeros(reps, dtype=bool)
    rows = np.arange(reps)
    cum = np.cumsum(mass)
    for t in range(horizon):
        s = np.searchsorted(cum, rng.random(reps))
        traffic[rows, s] += 1
        audited = rng.random(reps) < rates[s]
        z = rng.beta(a[s], b[s])
        idx = rows[audited]
        ss = s[audited]
        n[idx, ss] += 1
        d = z[audited] - mu[idx, ss]
        mu[idx, ss] += d / n[idx, ss]
        m2[idx, ss] += d * (z[audited] - mu[idx, ss])
        if t % 10 == 9:
            w = traffic / traffic.sum(axis=1, keepdims=True)
            theta = w @ r_k
            var_hat = np.where(n > 0, m2 / np.maximum(n, 1), 0.0)
            eps = bernstein_radius(n, var_hat, delta, k, MIN_LOG_FACTOR)
            m = np.where(n > 0, mu, 0.5)
            lo = np.sum(w * np.maximum(0.0, m - eps), axis=1)
            hi = np.sum(w * np.minimum(1.0, m + eps), axis=1)
            failed |= (theta < lo) | (theta > hi)
    fails = int(failed.sum())
    assert clopper_pearson_upper(fails, reps, CONF) <= delta, fails


def test_vectorized_rule_matches_class() -> None:
    """The vectorized simulation above implements the same rule and interval as the class."""
    rng = np.random.default_rng(3)
    weights = np.array([0.5, 0.3, 0.2])
    m = StratifiedCertifiedMean(3, 0.3, log_factor=MIN_LOG_FACTOR, weights=weights.tolist())
    n = np.zeros(3)
    mu = np.zeros(3)
    m2 = np.zeros(3)
    for _ in range(300):
        var_hat = np.where(n > 0, m2 / np.maximum(n, 1), 0.0)
        now = bernstein_radius(n, var_hat, 0.3, 3, MIN_LOG_FACTOR)
        nxt = bernstein_radius(n + 1, var_hat, 0.3, 3, MIN_LOG_FACTOR)
        with np.errstate(invalid="ignore"):
            gain = np.where(n > 0, weights * (now - nxt), np.inf)
        choice = int(np.argmax(gain))
        assert choice == m.target_stratum
        z = float(rng.random())
        m.update(choice, z)
        n[choice] += 1
        d = z - mu[choice]
        mu[choice] += d / n[choice]
        m2[choice] += d * (z - mu[choice])
    np.testing.assert_allclose(m.stratum_means, mu)
    np.testing.assert_allclose(m.stratum_variances, m2 / n)
