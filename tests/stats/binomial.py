"""Clopper-Pearson bounds for Monte Carlo tests (no scipy): bisection on the binomial CDF."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed in log space."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    i = np.arange(k + 1, dtype=float)
    logc = (math.lgamma(n + 1) - np.array([math.lgamma(v + 1) for v in i])
            - np.array([math.lgamma(n - v + 1) for v in i]))
    logt = logc + i * math.log(p) + (n - i) * math.log1p(-p)
    m = float(logt.max())
    return float(min(1.0, math.exp(m) * np.exp(logt - m).sum()))


def _bisect(f: Callable[[float], float], target: float) -> float:  # f decreasing in p on [0, 1]
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if f(mid) > target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def clopper_pearson_upper(k: int, n: int, conf: float) -> float:
    """One-sided upper confidence bound at level ``conf`` for p from k successes in n trials.

    The p with P(X <= k; p) = 1 - conf (1.0 when k == n).
    """
    if not 0 <= k <= n or n < 1 or not 0.0 < conf < 1.0:
        raise ValueError(f"bad arguments k={k}, n={n}, conf={conf}")
    if k == n:
        return 1.0
    return _bisect(lambda p: _binom_cdf(k, n, p), 1.0 - conf)


def clopper_pearson_lower(k: int, n: int, conf: float) -> float:
    """One-sided lower confidence bound at level ``conf``: the p with P(X >= k; p) = 1 - conf."""
    if not 0 <= k <= n or n < 1 or not 0.0 < conf < 1.0:
        raise ValueError(f"bad arguments k={k}, n={n}, conf={conf}")
    if k == 0:
        return 0.0
    # P(X >= k; p) = 1 - cdf(k - 1; p) is increasing in p; solve cdf(k-1; p) = conf
    return _bisect(lambda p: _binom_cdf(k - 1, n, p), conf)
