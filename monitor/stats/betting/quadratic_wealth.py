"""Quadratic lower bounds on betting log-wealth: a whole grid of tests in five running sums.

Pure helpers behind :class:`monitor.stats.betting.confseq_bernstein.BernsteinSequences`. Betting
``lam_t`` (the same for every candidate mean ``m``) on ``y_t = m - q_t`` (upper test) or
``y_t = q_t - m`` (lower test), Fan's inequality

    ``log(1 + z) >= z + g(z0) z^2``  for every ``z >= z0 > -1``,
    ``g(z) = (log(1 + z) - z) / z^2``  (increasing; ``-1/2`` at 0)

(Fan, Grama and Liu 2015; the step behind Waudby-Smith and Ramdas' predictable-plugin
empirical-Bernstein sequence), with ``z0`` the round's smallest factor ``lam y`` over the
tested means, bounds each round's log factor by a quadratic in ``m``. Summed over rounds, the
log-wealth at *every* ``m`` is bounded below by

    ``Q(m) = +-(m A - B) + m^2 C - 2 m D + E``

with ``A = sum lam``, ``B = sum lam q``, ``C = sum k lam^2``, ``D = sum k lam^2 q``,
``E = sum k lam^2 q^2`` (``k = g(z0_t)``): five numbers per (rho, side) instead of one
wealth per grid point. Rows of the sums arrays are ``[A, B, C, D, E]``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from monitor.stats.betting.grid_batch import running_sums

__all__ = [
    "N_SUMS",
    "fan_slope",
    "fold_sums",
    "mixture_rejects",
    "quadratic_bound",
    "quadratic_bound_list",
    "round_terms",
]

FloatArray = npt.NDArray[np.float64]

N_SUMS = 5
# g is computed below its exact value by at least this much: a margin far above the
# rounding error of log1p and of the series, so the quadratic stays a lower bound
_SLOPE_SLACK = 1e-9
_SERIES_BELOW = 1e-3


def fan_slope(z: FloatArray) -> FloatArray:
    """``g(z) = (log(1 + z) - z) / z^2`` (``-1/2`` at 0), rounded down, for ``z > -1``.

    ``g`` is increasing, so ``log(1 + x) >= x + g(z) x^2`` for every ``x >= z``: with ``z``
    the smallest factor ``lam y`` a round can have over the tested means, one coefficient
    serves them all, and it is exact at ``x = z`` and ``x = 0``.

    Examples
    --------
    >>> round(float(fan_slope(np.array([-0.5]))[0]), 6)   # (log 0.5 + 0.5) / 0.25
    -0.772589
    >>> bool(-0.5 < fan_slope(np.array([0.1]))[0] < -0.45)
    True

    Notes
    -----
    For ``|z| < 1e-3`` the series ``-1/2 + z/3 - z^2/4 + z^3/5`` is used less a bound on its
    remainder, ``z^4 / (6 (1 - |z|))``; otherwise the closed form, whose relative rounding
    error is below ``1e-12``. A ``1e-9`` slack keeps the result below the exact value, so the
    quadratic built from it stays a lower bound.
    """
    z = np.asarray(z, dtype=np.float64)
    if z.ndim == 0:
        return np.asarray(fan_slope(z.reshape(1)).reshape(()), dtype=np.float64)
    # closed = (log1p(s) - s) / s^2 with s = z off the series' range;
    # series = -0.5 + z (1/3 + z (-0.25 + z 0.2)) - z^4 / (6 (1 - |z|)): the same
    # operations in the same order, in place
    az = np.abs(z)
    small = az < _SERIES_BELOW
    safe = np.where(small, 0.5, z)
    out: FloatArray = np.log1p(safe)
    out -= safe
    out /= safe * safe
    series = z * 0.2
    series += -0.25
    series *= z
    series += 1.0 / 3.0
    series *= z
    series += -0.5
    z4 = z * z
    z4 *= z4
    np.subtract(1.0, az, out=az)
    az *= 6.0
    z4 /= az
    series -= z4
    np.copyto(out, series, where=small)
    out -= _SLOPE_SLACK
    return out


def round_terms(lam: FloatArray, q: FloatArray, zmin: FloatArray) -> FloatArray:
    """One round's increments ``[lam, lam q, k lam^2, k lam^2 q, k lam^2 q^2]``, shape (5, ...).

    ``lam`` (bets), ``q`` (observations) and ``zmin`` (the smallest factor ``lam y`` over the
    tested means, ``> -1``) broadcast together; ``k = g(zmin)`` (:func:`fan_slope`).

    Examples
    --------
    >>> t = round_terms(np.array([0.5]), np.array([1.0]), np.array([-0.25]))
    >>> t[:2].ravel().tolist()
    [0.5, 0.5]
    """
    kl2 = fan_slope(zmin) * lam * lam
    kl2q = kl2 * q
    return np.stack([lam, lam * q, kl2, kl2q, kl2q * q])


def fold_sums(sums: FloatArray, terms: FloatArray, axis: int = 0) -> FloatArray:
    """Return the running sums after each round: ``out[i] = sums + terms[0] + ... + terms[i]``.

    ``terms`` has the rounds on ``axis`` and otherwise the shape of ``sums`` (e.g. ``sums``
    ``X``, ``terms`` ``(k, *X)``); additions are sequential in round order (never pairwise), so
    the result does not depend on how rounds are batched.

    Examples
    --------
    >>> fold_sums(np.array([1.0]), np.array([[0.5], [0.25]])).ravel().tolist()
    [1.5, 1.75]
    >>> fold_sums(np.array([[1.0]]), np.array([[[0.5], [0.25]]]), axis=1).ravel().tolist()
    [1.5, 1.75]
    """
    shape = list(terms.shape)
    shape[axis] += 1
    stacked = np.empty(shape)
    first: list[Any] = [slice(None)] * terms.ndim
    first[axis] = 0
    rest = list(first)
    rest[axis] = slice(1, None)
    stacked[tuple(first)] = sums
    stacked[tuple(rest)] = terms
    out: FloatArray = running_sums(stacked, axis)[tuple(rest)]
    return out


def quadratic_bound(sums: FloatArray, m: FloatArray | float, upper: bool) -> FloatArray:
    """Lower bound ``Q(m)`` on the log-wealth from the sums (first axis ``[A, B, C, D, E]``).

    ``upper=True``: the upper test's bets on ``m - q`` (``m A - B + ...``); ``False``: the lower
    test's bets on ``q - m`` (``B - m A + ...``). ``m`` broadcasts against ``sums[0]``.

    Examples
    --------
    >>> s = np.array([1.0, 0.25, -0.5, -0.125, -0.03125])   # one round, lam 1, q 1/4, k -1/2
    >>> float(quadratic_bound(s, 0.75, True))   # 0.5 - 0.5 * 0.25
    0.375
    """
    a, b, c, d, e = sums
    lin = m * a - b if upper else b - m * a
    return np.asarray(lin + (m * (m * c - 2.0 * d) + e), dtype=np.float64)


def quadratic_bound_list(sums: list[list[float]], m: float, upper: bool) -> list[float]:
    """:func:`quadratic_bound` of one ``m`` in Python floats (rows ``[A, B, C, D, E]``).

    Examples
    --------
    >>> quadratic_bound_list([[1.0], [0.25], [-0.5], [-0.125], [-0.03125]], 0.75, True)
    [0.375]
    """
    out = []
    for a, b, c, d, e in zip(*sums, strict=True):
        lin = m * a - b if upper else b - m * a
        out.append(lin + (m * (m * c - 2.0 * d) + e))
    return out


def mixture_rejects(sums: FloatArray, m: float, upper: bool, log_threshold: float) -> bool:
    """Decide in Python floats whether the uniform rho mixture of the bounds rejects ``m``.

    ``sums`` is ``(5, S)`` (one round's sums of the ``S`` rows of a member); the mixture is
    ``log mean_s exp(Q_s(m))`` (:func:`quadratic_bound_list`), compared with ``log_threshold``.
    The exact decision: vectorized filters compare with a margin and defer to it.

    Examples
    --------
    >>> s = np.array([[1.0], [0.25], [-0.5], [-0.125], [-0.03125]])
    >>> mixture_rejects(s, 0.75, True, 0.375), mixture_rejects(s, 0.75, True, 0.4)
    (True, False)
    """
    q = quadratic_bound_list(sums.tolist(), m, upper)
    top = max(q)
    exp = math.exp
    return top + math.log(sum([exp(v - top) for v in q]) / len(q)) >= log_threshold
