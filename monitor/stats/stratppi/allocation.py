"""Label allocation across strata and the per-stratum audit rates that realize it.

Proportional and Neyman-form optimal allocation (StratPPI Proposition 3 / eq. 19), the
judge-spread heuristic for the per-stratum standard deviation (eq. 20-22), and
:func:`audit_rates`, which turns an allocation into audit probabilities with a floor so that no
stratum is ever starved.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "DEFAULT_FLOOR",
    "audit_rates",
    "heuristic_sd",
    "optimal_allocation",
    "proportional_allocation",
]

F64 = NDArray[np.float64]
DEFAULT_FLOOR = 0.01
"""Smallest audit rate of any stratum, so that no stratum is ever starved of labels."""


def proportional_allocation(weights: ArrayLike) -> F64:
    """Proportional allocation ``rho_k = w_k`` (natural rates).

    Examples
    --------
    >>> proportional_allocation([3, 1]).tolist()
    [0.75, 0.25]
    """
    w = np.asarray(weights, dtype=np.float64)
    return np.asarray(w / w.sum(), dtype=np.float64)


def optimal_allocation(weights: ArrayLike, sds: ArrayLike) -> F64:
    """Eq. 19: ``rho_k ∝ w_k sigma_k`` with ``sigma_k^2 = Var(Y - lambda_k f | k)`` (Neyman form).

    Notes
    -----
    Falls back to proportional allocation (``rho_k = w_k``) when every ``w_k sigma_k`` is 0:
    with no spread anywhere eq. 19 is 0/0, and normalising whatever is left (round-off) would
    send the whole label budget to arbitrary strata. Spreads are used as given; estimate them
    with :func:`heuristic_sd`, which returns exact zeros for spreads that are 0 up to round-off.
    Strata with ``sigma_k = 0`` get no share here; :func:`audit_rates` keeps their floor.

    Examples
    --------
    >>> optimal_allocation([0.5, 0.5], [0.1, 0.3]).round(6).tolist()
    [0.25, 0.75]
    >>> optimal_allocation([0.75, 0.25], [0.0, 0.0]).tolist()
    [0.75, 0.25]
    """
    w = np.asarray(weights, dtype=np.float64)
    s = w * np.asarray(sds, dtype=np.float64)
    total = float(s.sum())
    return proportional_allocation(w) if total <= 0 else np.asarray(s / total, dtype=np.float64)


def heuristic_sd(
    mean_f: ArrayLike, mean_f2: ArrayLike, lam: ArrayLike = 1.0, *, rtol: float = 1e-9
) -> F64:
    """Eq. 21-22 ``sigma_hat_k`` from judge-loss spread, reading the judge loss as ``P(loss = 1)``.

    With confidence ``c(1|x) = f(x)``, ``c(0|x) = 1 - f(x)`` (binary loss), eq. 21-22 reduce to
    ``mu = (1 - lam) E f`` and ``sigma^2 = E[f - 2 f a + a^2]``, ``a = lam f + mu``, computed from
    the stratum's judge-loss mean ``E f`` and second moment ``E f^2`` (unlabelled data, no labels
    needed). ``lam = 1`` (the paper's heuristic) gives ``E[f (1 - f)]``; ``lam = 0`` gives the
    Bernoulli variance ``E f (1 - E f)``.

    Parameters
    ----------
    mean_f, mean_f2 : array_like
        Judge-loss mean ``E f`` and second moment ``E f^2`` per stratum.
    lam : array_like
        PPI weight ``lambda_k`` (1: the paper's heuristic).
    rtol : float
        Variances at most ``rtol`` times the magnitude of the terms they are computed from are
        round-off and returned as exactly 0 (see Notes).

    Returns
    -------
    numpy.ndarray
        ``sigma_hat_k >= 0``.

    Notes
    -----
    A heuristic: it is exact only if the judge is calibrated for a binary loss. Any allocation
    with all shares positive keeps the (asymptotic) validity of the interval; a miscalibrated judge
    only costs efficiency.

    ``sigma^2`` is a difference of terms of order ``E f``; when it is 0 in exact arithmetic (e.g.
    ``lam = 1`` and judge losses in {0, 1}, where ``E f^2 = E f``) the computed value is
    round-off of either sign, around ``1e-16`` relative (``1e-14`` after 300k streaming
    updates). Such values (``sigma^2 <= rtol * sum of |terms|``) are set to exactly 0, so that
    :func:`optimal_allocation` sees "no spread" and falls back to proportional allocation
    instead of normalising noise (which sent whole label budgets to arbitrary strata). The cost
    is that genuine spreads below ``sqrt(rtol)`` (about 3e-5 for the default) also read as 0.

    Examples
    --------
    >>> [round(x, 3) for x in heuristic_sd([0.5, 0.1], [0.25, 0.01]).tolist()]
    [0.5, 0.3]
    >>> heuristic_sd([0.3, 0.7], [0.3 * (1 + 1e-15), 0.7 * (1 - 1e-15)]).tolist()
    [0.0, 0.0]
    """
    m1 = np.asarray(mean_f, dtype=np.float64)
    m2 = np.asarray(mean_f2, dtype=np.float64)
    lm = np.asarray(lam, dtype=np.float64)
    mu = (1.0 - lm) * m1
    var = m1 - 2.0 * lm * m2 - 2.0 * mu * m1 + lm**2 * m2 + 2.0 * lm * mu * m1 + mu**2
    scale = (np.abs(m1) + 2.0 * np.abs(lm * m2) + 2.0 * np.abs(mu * m1) + lm**2 * np.abs(m2)
             + 2.0 * np.abs(lm * mu * m1) + mu**2)
    var = np.where(var <= rtol * scale, 0.0, var)
    return np.asarray(np.sqrt(var), dtype=np.float64)


def audit_rates(
    allocation: ArrayLike,
    traffic_share: ArrayLike,
    budget_rate: float,
    floor: float = DEFAULT_FLOOR,
) -> F64:
    """Per-stratum audit probabilities that realize a label allocation within a label budget.

    Solves ``r_k = c * rho_k / p_k`` clipped to ``[floor, 1]`` with c chosen (water-filling) so that
    the expected labels per unit of traffic ``sum_k p_k r_k`` equal ``budget_rate``. Strata with no
    traffic yet get ``floor``.

    Parameters
    ----------
    allocation : array_like
        Desired label shares ``rho_k`` (non-negative, any scale).
    traffic_share : array_like
        Traffic shares ``p_k``.
    budget_rate : float
        Overall audit rate (expected labels per unit of traffic), in (0, 1].
    floor : float
        Minimum audit rate of every stratum, ``0 < floor <= budget_rate``: no stratum is starved,
        so every stratum keeps being sampled and its estimate keeps updating.

    Returns
    -------
    numpy.ndarray
        Audit rates in ``[floor, 1]``.

    Notes
    -----
    The audit decision must stay independent of the unit's losses (the rate may depend on the
    stratum and on the past only); then labels are a random subsample of each stratum and the
    traffic-weighted estimators are unbiased for the risk over the traffic seen.

    Examples
    --------
    >>> r = audit_rates([0.5, 0.5], [0.9, 0.1], budget_rate=0.1, floor=0.01)
    >>> [round(x, 4) for x in r.tolist()], round(float(np.dot(r, [0.9, 0.1])), 4)
    ([0.0556, 0.5], 0.1)
    >>> audit_rates([1.0, 0.0], [0.5, 0.5], budget_rate=0.1, floor=0.02).round(3).tolist()
    [0.18, 0.02]
    """
    rho = np.asarray(allocation, dtype=np.float64)
    p = np.asarray(traffic_share, dtype=np.float64)
    if rho.shape != p.shape or rho.ndim != 1:
        raise ValueError("allocation and traffic_share must be 1-d of equal length")
    if np.any(rho < 0) or np.any(p < 0) or float(p.sum()) <= 0:
        raise ValueError("allocation and traffic_share must be non-negative, traffic non-zero")
    if not 0.0 < budget_rate <= 1.0:
        raise ValueError(f"budget_rate must be in (0, 1], got {budget_rate}")
    if not 0.0 < floor <= budget_rate:
        raise ValueError(f"floor must be in (0, budget_rate], got {floor}")
    p = p / p.sum()
    r = np.full(p.shape, floor)
    active = p > 0
    lo = ~active | (rho <= 0)
    hi = np.zeros_like(lo)
    for _ in range(2 * p.size + 1):
        free = ~lo & ~hi
        if not free.any():
            break
        rest = budget_rate - float(np.sum(p[lo & active]) * floor) - float(np.sum(p[hi]))
        c = rest / float(np.sum(rho[free]))
        cand = np.where(free, c * rho / np.where(p > 0, p, 1.0), 0.0)
        new_lo = free & (cand < floor)
        new_hi = free & (cand > 1.0)
        if not new_lo.any() and not new_hi.any():
            r = np.where(free, cand, r)
            break
        lo = lo | new_lo
        hi = hi | new_hi
    r = np.where(hi, 1.0, np.where(lo, floor, r))
    return np.asarray(np.clip(r, floor, 1.0), dtype=np.float64)
