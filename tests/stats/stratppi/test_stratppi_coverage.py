"""Monte Carlo: StratPPI coverage near 1 - alpha; unbiasedness under unequal audit rates."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from monitor.stats.cereval.certified_mean import traffic_weighted_mean
from monitor.stats.stratppi.allocation import audit_rates, optimal_allocation
from monitor.stats.stratppi.estimator import stratified_ppi

try:  # colleague's helper (tests/stats/binomial.py); fall back to a local one
    from tests.stats.binomial import clopper_pearson_lower, clopper_pearson_upper
except ImportError:  # pragma: no cover - depends on the other file existing

    def _binom_cdf(k: int, n: int, p: float) -> float:
        if p <= 0.0:
            return 1.0
        if p >= 1.0:
            return 1.0 if k >= n else 0.0
        lg = math.lgamma
        return min(1.0, math.fsum(
            math.exp(lg(n + 1) - lg(i + 1) - lg(n - i + 1) + i * math.log(p)
                     + (n - i) * math.log1p(-p)) for i in range(k + 1)))

    def clopper_pearson_upper(k: int, n: int, conf: float) -> float:
        if k >= n:
            return 1.0
        lo, hi = k / n, 1.0
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if _binom_cdf(k, n, mid) > 1.0 - conf else (lo, mid)
        return hi

    def clopper_pearson_lower(k: int, n: int, conf: float) -> float:
        return 1.0 - float(clopper_pearson_upper(n - k, n, conf))


ALPHA = 0.1
BAND = 0.02  # coverage must be within 1 - alpha +- BAND, up to binomial error (99.9% CP)


def _moments(y: np.ndarray, f: np.ndarray, fu: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per-rep labelled/unlabelled moments for one stratum (reps on axis 0)."""
    n = y.shape[1]
    my, mf = y.mean(1), f.mean(1)
    vy, vf = y.var(1, ddof=1), f.var(1, ddof=1)
    cyf = ((y - my[:, None]) * (f - mf[:, None])).sum(1) / (n - 1)
    return (np.full(y.shape[0], float(n)), my, mf, vy, vf, cyf,
            np.full(y.shape[0], float(fu.shape[1])), fu.mean(1), fu.var(1, ddof=1))


def _stack(per_stratum: list[tuple[np.ndarray, ...]]) -> list[np.ndarray]:
    return [np.stack([s[i] for s in per_stratum], axis=-1) for i in range(9)]


def _assert_near(covered: np.ndarray) -> None:
    k, reps = int(covered.sum()), covered.size
    lo = clopper_pearson_lower(k, reps, 0.999)
    hi = clopper_pearson_upper(k, reps, 0.999)
    assert lo <= 1 - ALPHA + BAND and hi >= 1 - ALPHA - BAND, (k / reps, lo, hi)


@pytest.mark.statistical
@pytest.mark.parametrize("alloc", ["proportional", "optimal"])
def test_coverage_gaussian_different_noise(alloc: str) -> None:
    """Section 5.1 (iii): Y ~ N(0,1), f = Y + sigma_k eps, sigma = (0.1, 1.5), equal masses."""
    rng = np.random.default_rng(5 if alloc == "proportional" else 6)
    reps, n, big_n = 3000, 200, 2000
    w = np.array([0.5, 0.5])
    sig = np.array([0.1, 1.5])
    if alloc == "proportional":
        nk = [100, 100]
    else:
        sd = np.sqrt(sig**2 / (1 + sig**2))  # Var(Y - lambda* f) at the optimal lambda
        nk = [round(float(n * r)) for r in optimal_allocation(w, sd)]
    per = []
    for k in range(2):
        y = rng.standard_normal((reps, nk[k]))
        f = y + sig[k] * rng.standard_normal((reps, nk[k]))
        yu = rng.standard_normal((reps, big_n // 2))
        fu = yu + sig[k] * rng.standard_normal((reps, big_n // 2))
        per.append(_moments(y, f, fu))
    est, se, _ = stratified_ppi(w, *_stack(per))
    z = NormalDist().inv_cdf(1 - ALPHA / 2)
    _assert_near(np.abs(est - 0.0) <= z * se)


@pytest.mark.statistical
def test_coverage_binary_losses_with_judge_probabilities() -> None:
    """certmon's setting: binary human loss, judge loss = a noisy probability, two strata."""
    rng = np.random.default_rng(9)
    reps, big_n = 3000, 1500
    w = np.array([0.7, 0.3])
    nk = [150, 150]  # over-samples the rarer stratum (unequal rates)
    base = np.array([0.1, 0.5])
    per, theta = [], 0.0
    for k in range(2):
        def draw(m: int, k: int = k) -> tuple[np.ndarray, np.ndarray]:
            p = np.clip(base[k] + 0.3 * (rng.random((reps, m)) - 0.5), 0, 1)
            y = (rng.random((reps, m)) < p).astype(float)
            f = np.clip(p + 0.1 * rng.standard_normal((reps, m)), 0, 1)
            return y, f
        y, f = draw(nk[k])
        _, fu = draw(big_n)
        per.append(_moments(y, f, fu))
        theta += w[k] * base[k]
    est, se, _ = stratified_ppi(w, *_stack(per))
    z = NormalDist().inv_cdf(1 - ALPHA / 2)
    _assert_near(np.abs(est - theta) <= z * se)


def _stream(rng: np.random.Generator, reps: int, units: int) -> dict[str, np.ndarray]:
    """Traffic with shares (0.8, 0.2), audit rates steered to (0.03, 0.5)."""
    mass = np.array([0.8, 0.2])
    r_true = np.array([0.1, 0.6])
    rates = audit_rates([0.3, 0.7], mass, budget_rate=0.12, floor=0.01)
    s = (rng.random((reps, units)) < mass[1]).astype(int)
    audited = rng.random((reps, units)) < rates[s]
    y = (rng.random((reps, units)) < r_true[s]).astype(float)
    f = np.clip(0.6 * y + 0.2 + 0.1 * rng.standard_normal((reps, units)), 0, 1)
    return {"s": s, "aud": audited, "y": y, "f": f, "r": r_true, "rates": rates}


def _masked_moments(d: dict[str, np.ndarray], k: int) -> tuple[np.ndarray, ...]:
    lab = (d["s"] == k) & d["aud"]
    unl = (d["s"] == k) & ~d["aud"]
    n = lab.sum(1).astype(float)
    big_n = unl.sum(1).astype(float)
    y, f = d["y"], d["f"]
    my = np.where(lab, y, 0).sum(1) / n
    mf = np.where(lab, f, 0).sum(1) / n
    vy = np.where(lab, (y - my[:, None]) ** 2, 0).sum(1) / (n - 1)
    vf = np.where(lab, (f - mf[:, None]) ** 2, 0).sum(1) / (n - 1)
    cyf = np.where(lab, (y - my[:, None]) * (f - mf[:, None]), 0).sum(1) / (n - 1)
    mfu = np.where(unl, f, 0).sum(1) / big_n
    vfu = np.where(unl, (f - mfu[:, None]) ** 2, 0).sum(1) / (big_n - 1)
    return n, my, mf, vy, vf, cyf, big_n, mfu, vfu


@pytest.mark.statistical
def test_unbiased_under_unequal_audit_rates() -> None:
    rng = np.random.default_rng(12)
    reps, units = 3000, 2000
    d = _stream(rng, reps, units)
    assert d["rates"][1] > 5 * d["rates"][0]
    traffic = np.stack([(d["s"] == k).sum(1) for k in range(2)], -1).astype(float)
    w = traffic / traffic.sum(1, keepdims=True)
    theta = w @ d["r"]  # risk over the traffic seen (realized shares, known)
    mom = _stack([_masked_moments(d, k) for k in range(2)])
    assert np.all(mom[0] >= 2)

    def check(est: np.ndarray, tol: float = 0.0) -> float:
        err = est - theta
        bias, se = float(err.mean()), float(err.std(ddof=1) / math.sqrt(reps))
        assert abs(bias) <= 4 * se + tol, (bias, se)
        return bias

    # Post-stratified label mean (what StratifiedCertifiedMean estimates): exactly unbiased.
    sums = mom[1] * mom[0]
    check(traffic_weighted_mean(traffic, sums, mom[0]))
    # StratPPI with a fixed lambda: exactly unbiased.
    est_fixed, _, _ = stratified_ppi(w, *mom, lam=np.array([0.8, 0.8]))
    check(est_fixed)
    # StratPPI with the eq. 18 plug-in lambda fitted on the same labels: O(1/n_k) bias (lambda_hat
    # correlates with mean_f - mean_fu); measured -0.0066 here with ~72 labels in stratum 0
    # (0.36 of one run's standard error). Bounded, not zero: documented in stratified_ppi.
    est_plugin, _, _ = stratified_ppi(w, *mom)
    check(est_plugin, tol=0.01)
    # The naive pooled label mean is badly biased here (sanity check of the setup).
    naive = (d["y"] * d["aud"]).sum(1) / d["aud"].sum(1)
    assert float(np.mean(naive - theta)) > 0.1
