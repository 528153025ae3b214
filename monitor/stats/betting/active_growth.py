"""Active audits: the propensity rule, the range of the IPW observation, and its growth rate.

Under an active audit policy unit ``t`` is audited (``xi_t = 1``) with a probability ``pi_t``
that depends on the judge's score ``f_t`` (a failure probability in [0, 1]) and on earlier
units only:

``pi(f) = min(1, max(floor, (1 - m) k u(f) + m b))``, ``u(f) = sqrt(f (1 - f))``,

with ``b`` the label budget (``audit_rate``), ``m`` the share of uniform audits, ``floor`` the
smallest propensity and ``k`` the scale that makes the mean propensity over the earlier units'
scores equal to ``b`` (:func:`solve_scale`). Every judged unit gives the observation

``Y_t = rho f_t + (xi_t / pi_t) (L_t - rho f_t)``, ``E[Y_t | past, f_t] = E[L_t | past, f_t]``,

whose range, for any score and label in [0, 1] and ``pi_t >= pi_min = pi(0)``, is
``[rho (1 - 1/pi_min), 1/pi_min]`` (:func:`observation_range`); a bet fixed before ``f_t`` is
seen and capped at ``c / (1/pi_min - alpha)`` (certify) or ``c / (alpha + rho (1/pi_min - 1))``
(violate) keeps every factor at least ``1 - c`` (:func:`bet_cap`).

The floor and the uniform share are chosen by the estimated expected log growth per unit
(:func:`growth_table`), not by variance: a low floor shrinks the cap and can cost more labels
than it saves.

Examples
--------
>>> import numpy as np
>>> round(float(propensity(np.array(0.5), 0.1, 0.05, 0.0, 0.4)), 6)
0.2
>>> observation_range(1.0, 0.05)
(-19.0, 20.0)
>>> cert, viol = bet_cap(0.1, 1.0, 0.05, "certify", 0.95), bet_cap(0.1, 0.0, 0.05, "violate", 0.95)
>>> round(float(cert), 6), round(float(viol), 6)
(0.047739, 9.5)

Notes
-----
Pure math (numpy), no state. The guarantee of the e-process built on it is stated in
:mod:`monitor.stats.betting.active`: the propensity and the bet are functions of earlier units,
so ``E[alpha - Y_t | past] = alpha - E[L_t | past]`` and each factor ``1 + lam_t s (alpha - Y_t)``
has conditional mean at most 1 under the side's null.
"""

from __future__ import annotations

import math

import numpy as np

from monitor.stats.betting.bets import Side

__all__ = ["BINS", "FRACS", "POLICIES", "RHOS", "bet_cap", "bin_of", "expected_labels",
           "growth_table", "observation_range", "propensity", "propensity_u", "solve_scale",
           "uncertainty"]

BINS = 20
"""Equal-width bins of the judge score kept for the policy's estimates."""
POLICIES: tuple[tuple[float, float], ...] = (
    (1.0, 1.0),  # uniform: pi = b (the fallback, first)
    (0.25, 0.0), (0.5, 0.0), (0.25, 0.25), (0.5, 0.25), (0.5, 0.5), (0.75, 0.5),
    (0.75, 0.25), (0.9, 0.5), (0.75, 0.75), (0.9, 0.25))
"""Candidate ``(floor / b, m)`` pairs; the first is the uniform policy."""
RHOS = (0.0, 0.25, 0.5, 0.75, 0.9, 1.0)
"""Candidate reliances of the bettor."""
FRACS = tuple(2.0 ** (-j / 2.0) for j in range(12))
"""Candidate bets as fractions of the cap (:func:`bet_cap`)."""


def uncertainty(f: np.ndarray) -> np.ndarray:
    """Return ``u(f) = sqrt(f (1 - f))`` (0 at 0 and 1, largest at 1/2).

    Examples
    --------
    >>> uncertainty(np.array([0.0, 0.5, 1.0])).tolist()
    [0.0, 0.5, 0.0]
    """
    g = np.clip(np.asarray(f, dtype=float), 0.0, 1.0)
    return np.asarray(np.sqrt(g * (1.0 - g)))


def bin_of(f: np.ndarray) -> np.ndarray:
    """Return the score bin (0 to ``BINS - 1``) of each score in [0, 1].

    Examples
    --------
    >>> bin_of(np.array([0.0, 0.049, 0.5, 1.0])).tolist()
    [0, 0, 10, 19]
    """
    return np.asarray(np.minimum((np.asarray(f) * BINS).astype(np.int64), BINS - 1))


def propensity(f: np.ndarray, b: float | np.ndarray, floor: float | np.ndarray,
               m: float | np.ndarray, k: float | np.ndarray) -> np.ndarray:
    """Return ``pi(f) = min(1, max(floor, (1 - m) k u(f) + m b))`` (broadcasting)."""
    return np.minimum(1.0, np.maximum(floor, (1.0 - m) * k * uncertainty(f) + m * b))


def observation_range(rho: float, pi_min: float) -> tuple[float, float]:
    """Return ``(min, max)`` of ``Y = rho f + (xi / pi) (L - rho f)`` over f, L in [0, 1].

    For every ``pi`` in ``[pi_min, 1]``: ``Y`` is ``rho f`` when not audited and
    ``rho f (1 - 1/pi) + L / pi`` when audited.
    """
    inv = 1.0 / pi_min
    return rho * (1.0 - inv), inv


def bet_cap(alpha: float, rho: float | np.ndarray, pi_min: float | np.ndarray, side: Side,
            c: float) -> float | np.ndarray:
    """Return the largest bet keeping every factor ``1 + lam s (alpha - Y)`` at least ``1 - c``.

    Certify (``s = +1``): ``c / (1/pi_min - alpha)``; violate (``s = -1``):
    ``c / (alpha + rho (1/pi_min - 1))``.
    """
    inv = 1.0 / np.asarray(pi_min, dtype=float)
    out = c / (inv - alpha) if side == "certify" else c / (alpha + rho * (inv - 1.0))
    return float(out) if np.ndim(out) == 0 else np.asarray(out)


def solve_scale(w: np.ndarray, u: np.ndarray, b: float, floor: np.ndarray,
                m: np.ndarray) -> np.ndarray:
    """Scale ``k`` making ``sum_j w_j pi(u_j) = b`` (bisection in log scale, vectorized).

    Parameters
    ----------
    w : array (..., B)
        Weights of the score bins (summing to 1 along the last axis, or all 0).
    u : array (..., B)
        ``u(f)`` of each bin.
    b : float
        The budget.
    floor, m : array (...)
        The candidates' floor and uniform share.

    Returns
    -------
    array (...)
        ``k`` (0 where the mean cannot be matched: no uncertainty mass, or ``m = 1``).

    Examples
    --------
    >>> w, u = np.array([0.5, 0.5]), np.array([0.1, 0.3])
    >>> k = solve_scale(w, u, 0.1, np.array(0.01), np.array(0.0))
    >>> round(float(k), 6), round(float((w * propensity_u(u, 0.1, 0.01, 0.0, k)).sum()), 6)
    (0.5, 0.1)
    """
    floor = np.asarray(floor, dtype=float)[..., None]
    m = np.asarray(m, dtype=float)[..., None]
    lo = np.full(np.broadcast_shapes(w.shape[:-1], floor.shape[:-1]), -12.0)
    hi = np.full_like(lo, 12.0)
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        k = np.exp(mid)[..., None]
        mean = (w * np.minimum(1.0, np.maximum(floor, (1.0 - m) * k * u + m * b))).sum(-1)
        low = mean < b
        lo = np.where(low, mid, lo)
        hi = np.where(low, hi, mid)
    k = np.exp(lo)  # the mean at lo is below b: the budget is never exceeded
    usable = ((w * u).sum(-1) > 0.0) & (m[..., 0] < 1.0)
    return np.where(usable, k, 0.0)


def propensity_u(u: np.ndarray, b: float, floor: float | np.ndarray, m: float | np.ndarray,
                 k: float | np.ndarray) -> np.ndarray:
    """:func:`propensity` from ``u(f)`` already computed."""
    return np.minimum(1.0, np.maximum(floor, (1.0 - m) * k * u + m * b))


def growth_table(w: np.ndarray, fb: np.ndarray, pb: np.ndarray, b: float, alpha: float,
                 side: Side, c: float,
                 policies: tuple[tuple[float, float], ...] = POLICIES
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the expected log growth per unit of every (policy, reliance, bet) candidate.

    Parameters
    ----------
    w, fb, pb : array (R, B)
        Per score bin: its share of units, its mean score and its estimated failure rate
        ``E[L | bin]`` (labels taken as Bernoulli with that mean).
    b, alpha, side, c
        Budget, risk level, side and cap fraction.
    policies
        Candidate ``(floor / b, m)`` pairs.

    Returns
    -------
    growth : array (R, P, len(RHOS), len(FRACS))
        ``E[log(1 + lam s (alpha - Y))]`` per unit, with ``lam = FRACS[j] * cap``.
    scale : array (R, P)
        Each policy's :func:`solve_scale`.
    cap : array (R, P, len(RHOS))
        Each candidate's bet cap (:func:`bet_cap`).

    Examples
    --------
    >>> w = np.array([[0.9, 0.1]]); fb = np.array([[0.01, 0.5]]); pb = fb.copy()
    >>> g, k, cap = growth_table(w, fb, pb, 0.1, 0.15, "certify", 0.95)
    >>> g.shape, bool(g.max() > 0)
    ((1, 11, 6, 12), True)
    """
    R = w.shape[0]
    pol = np.array(policies, dtype=float)
    floor = np.minimum(1.0, pol[:, 0] * b)[None, :]  # (1, P)
    m = pol[:, 1][None, :]
    u = uncertainty(fb)  # (R, B)
    k = solve_scale(w[:, None, :], u[:, None, :], b, np.broadcast_to(floor, (R, len(pol))),
                    np.broadcast_to(m, (R, len(pol))))  # (R, P)
    pi = propensity_u(u[:, None, :], b, floor[..., None], m[..., None], k[..., None])  # (R,P,B)
    pi_min = np.minimum(1.0, np.maximum(floor, m * b))  # (1, P)
    rho = np.array(RHOS)[None, None, :]  # (1, 1, S)
    cap = np.broadcast_to(bet_cap(alpha, rho, pi_min[..., None], side, c),
                          (R, len(pol), len(RHOS)))
    s = 1.0 if side == "certify" else -1.0
    rf = rho[..., None] * fb[:, None, None, :]  # (R, 1, S, B)
    pe = pi[:, :, None, :]  # (R, P, 1, B)
    x0 = s * (alpha - rf)
    x1 = s * (alpha - rf - (1.0 - rf) / pe)
    x2 = s * (alpha - rf + rf / pe)
    lam = cap[..., None, None] * np.array(FRACS)[None, None, None, :, None]  # (R,P,S,F,1)
    wb = w[:, None, None, None, :]
    pbb = pb[:, None, None, None, :]
    pe5 = pe[:, :, :, None, :]
    g = (1.0 - pe5) * np.log1p(lam * x0[:, :, :, None, :]) + pe5 * (
        pbb * np.log1p(lam * x1[:, :, :, None, :])
        + (1.0 - pbb) * np.log1p(lam * x2[:, :, :, None, :]))
    return (wb * g).sum(-1), k, cap


def expected_labels(growth: float, mean_pi: float, delta: float) -> float:
    """Drift approximation of the labels to cross ``log(1/delta)``: ``mean_pi log(1/delta) / g``.

    Examples
    --------
    >>> round(expected_labels(0.01, 0.1, 0.01), 3)
    46.052
    """
    return math.inf if growth <= 0.0 else mean_pi * math.log(1.0 / delta) / growth
