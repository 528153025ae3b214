"""Vectorized wealth of two-sided betting tests on a grid of candidate means.

Pure helpers behind :class:`monitor.stats.betting.confseq.HedgedConfidenceSequence`: the grid, the
per-point bet caps, the WSR plug-in statistics kept per reliance factor ``rho``, one round of
log-wealth update for every (side, rho, grid point[, UP bet]) at once, the rho mixture, and the
conversion of rejections into interval edges.

Layout: arrays indexed ``[side, s, j]`` (``[side, s, j, k]`` for the universal portfolio) with
``side = 0`` the *upper* test (H0: R >= m, factor ``1 - lam (q - m)``, rejections give the upper
bound) and ``side = 1`` the *lower* test (H0: R <= m, factor ``1 + lam (q - m)``). Grid point
``j`` (0-based) is ``m_j = (j + 1) / G``; interval edges are integers ``e`` meaning ``e / G``.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from monitor.stats.betting.bets import wsr_scale

__all__ = [
    "apply_wsr_bets",
    "bet_caps",
    "edge_limit",
    "fold_wsr_sums",
    "grid_points",
    "hull_edges",
    "log_mean_exp",
    "log_mean_exp_rows",
    "log_mixture",
    "may_move_edges",
    "update_log_wealth",
    "wsr_bets",
    "wsr_lambdas",
    "wsr_stats_update",
]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def grid_points(grid_size: int) -> FloatArray:
    """Interior grid points ``m_j = j / G``, ``j = 1..G-1`` (the points that are tested).

    Examples
    --------
    >>> grid_points(4).tolist()
    [0.25, 0.5, 0.75]
    """
    if isinstance(grid_size, bool) or not isinstance(grid_size, int) or grid_size < 2:
        raise ValueError(f"grid_size must be an int >= 2, got {grid_size!r}")
    return np.arange(1, grid_size, dtype=np.float64) / grid_size


def bet_caps(rhos: FloatArray, grid: FloatArray, c: float) -> FloatArray:
    """Caps ``c / (M_s - m)`` (upper test) and ``c / (m - m_s)`` (lower test), shape (2, S, P).

    The range of the PPI++ observation for ``rho_s`` is ``[m_s, M_s] = [-rho_s, 1 + rho_s]``.
    Same arithmetic as :func:`monitor.stats.betting.bets.bet_cap` with ``alpha = m``.

    Examples
    --------
    >>> bet_caps(np.array([0.0]), np.array([0.5]), 0.5).tolist()
    [[[1.0]], [[1.0]]]
    """
    lo = -rhos[:, None]
    hi = 1.0 + rhos[:, None]
    m = grid[None, :]
    return np.stack([c / (hi - m), c / (m - lo)])


def wsr_stats_update(
    total: FloatArray, dev: FloatArray, q: FloatArray, rounds: int, mu0: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Fold observation ``q`` (round ``rounds + 1``) into the WSR running sums, eq. (21).

    ``total = sum_k q_k``, ``dev = sum_j (q_j - mu_j)^2`` with
    ``mu_j = (mu0 + sum_{k<=j} q_k) / (j + 1)``; the same operations, in the same order, as the
    batch reference :func:`monitor.stats.betting.bets.wsr_bet`.

    Examples
    --------
    >>> t, d = wsr_stats_update(np.zeros(1), np.zeros(1), np.array([0.0]), 0, np.array([0.5]))
    >>> t.tolist(), d.tolist()   # mu_1 = (0.5 + 0) / 2 = 0.25, dev = 0.0625
    ([0.0], [0.0625])
    """
    new_total = total + q
    mu = (mu0 + new_total) / (rounds + 2)
    return new_total, dev + (q - mu) ** 2


def wsr_bets(
    dev: FloatArray, rounds: int, var0: FloatArray, log_inv_delta: float, horizon: int | None
) -> FloatArray:
    """Uncapped WSR bets ``sqrt(K_t / sigma_{t-1}^2)`` for round ``t = rounds + 1``, shape (S,).

    They depend on past observations only (through ``dev``) and not on the grid point; the cap of
    each grid point is applied by :func:`update_log_wealth`.

    Examples
    --------
    >>> lam = wsr_bets(np.zeros(1), 0, np.array([0.25]), math.log(4.0), None)
    >>> round(float(lam[0]), 12)   # sqrt(2 log 4 / (0.25 * 1 * log 2)) = 4
    4.0
    """
    t = rounds + 1
    sigma2 = (var0 + dev) / t
    return np.asarray(np.sqrt(wsr_scale(log_inv_delta, t, horizon) / sigma2), dtype=np.float64)


def apply_wsr_bets(
    log_wealth: FloatArray,
    q: list[float],
    t: int,
    log_inv_delta: float,
    horizon: int | None,
    var0: list[float],
    dev: list[float],
    grid: FloatArray,
    caps: FloatArray,
    scratch: tuple[FloatArray, FloatArray],
) -> None:
    """Multiply ``log_wealth`` (in place) by round ``t``'s capped WSR factors.

    Fast path shared by the confidence sequence and the certificate group: bets
    ``sqrt(K_t / sigma_{t-1}^2)`` from rounds ``1..t-1`` (``dev``), capped per grid point — the
    same operations, in the same order, as :func:`wsr_bets` then :func:`update_log_wealth`.

    Examples
    --------
    >>> lw = np.zeros((2, 1, 1)); scratch = (np.empty_like(lw), np.empty_like(lw))
    >>> apply_wsr_bets(lw, [0.0], 1, math.log(4.0), None, [0.25], [0.0], np.array([0.5]),
    ...                np.ones((2, 1, 1)), scratch)
    >>> lw.ravel().round(6).tolist()   # bet 4 capped at 1: factors 1.5 and 0.5
    [0.405465, -0.693147]
    """
    sa, sb = scratch
    lam = np.array(wsr_lambdas(t, log_inv_delta, horizon, var0, dev))
    np.subtract(np.array(q)[:, None], grid, out=sa[1])  # x = q - m
    np.negative(sa[1], out=sa[0])  # upper test: -x
    np.minimum(lam[:, None], caps, out=sb)  # capped bets
    np.multiply(sb, sa, out=sa)
    np.log1p(sa, out=sa)
    log_wealth += sa


def wsr_lambdas(
    t: int, log_inv_delta: float, horizon: int | None, var0: list[float], dev: list[float]
) -> list[float]:
    """Uncapped WSR bets of round ``t`` in Python floats (``dev`` from rounds ``1..t-1``).

    Examples
    --------
    >>> wsr_lambdas(1, math.log(4.0), None, [0.25], [0.0])   # sqrt(2 log 4 / (0.25 log 2))
    [4.0]
    """
    k = wsr_scale(log_inv_delta, t, horizon)
    return [math.sqrt(k / ((v0 + d) / t)) for v0, d in zip(var0, dev, strict=True)]


def edge_limit(log_threshold: float) -> float:
    """Threshold less a margin far above rounding error (the bound checks' comparison)."""
    return log_threshold - 1e-9 * (1.0 + abs(log_threshold))


def fold_wsr_sums(
    q: list[float], t: int, mu0: list[float], total: list[float], dev: list[float]
) -> tuple[list[float], list[float]]:
    """:func:`wsr_stats_update` in Python floats for round ``t``: the new ``(total, dev)``.

    Examples
    --------
    >>> fold_wsr_sums([0.0], 1, [0.5], [0.0], [0.0])   # mu_1 = 0.25, dev = 0.0625
    ([0.0], [0.0625])
    """
    new_total = [a + x for a, x in zip(total, q, strict=True)]
    new_dev = []
    for x, m0, tt, d in zip(q, mu0, new_total, dev, strict=True):
        e = x - (m0 + tt) / (t + 1)
        new_dev.append(d + e * e)
    return new_total, new_dev


def update_log_wealth(
    log_wealth: FloatArray,
    q: FloatArray,
    grid: FloatArray,
    caps: FloatArray,
    lam: FloatArray | None,
    up_fractions: FloatArray | None,
    scratch: tuple[FloatArray, FloatArray] | None = None,
) -> None:
    """Add one round's log factors to ``log_wealth`` in place (one vectorized pass).

    Parameters
    ----------
    log_wealth : ndarray, shape (2, S, W) or (2, S, W, K)
        Log-wealth of the tracked grid points; 4-D for the universal portfolio.
    q : ndarray, shape (S,)
        This round's effective observation of every ``rho``.
    grid : ndarray, shape (W,)
        The tracked grid points.
    caps : ndarray, shape (2, S, W)
        Their bet caps (:func:`bet_caps`).
    lam : ndarray, shape (S,), or None
        WSR: the uncapped bets; the bet at a grid point is ``min(lam_s, cap)``.
    up_fractions : ndarray, shape (K,), or None
        UP: fractions ``u_k`` in (0, 1); bettor ``k`` bets ``u_k * cap``.
    scratch : pair of ndarray shaped like ``log_wealth``, optional
        Work buffers (avoids allocating, and page-faulting, large temporaries every round).

    Examples
    --------
    >>> lw = np.zeros((2, 1, 1))
    >>> update_log_wealth(lw, np.array([0.0]), np.array([0.5]), np.ones((2, 1, 1)),
    ...                   np.array([4.0]), None)
    >>> np.exp(lw).ravel().round(12).tolist()   # factors 1 + 0.5 and 1 - 0.5
    [1.5, 0.5]
    """
    if scratch is None:
        scratch = (np.empty_like(log_wealth), np.empty_like(log_wealth))
    a, b = scratch
    if up_fractions is None:
        if lam is None:
            raise ValueError("WSR grid update needs the bets `lam` (or `up_fractions` for UP)")
        np.subtract(q[:, None], grid[None, :], out=a[1])  # x = q - m
        np.negative(a[1], out=a[0])  # upper test: -x
        np.minimum(lam[None, :, None], caps, out=b)  # capped bets
    else:
        np.subtract(q[:, None, None], grid[None, :, None], out=a[1])
        np.negative(a[1], out=a[0])
        np.multiply(caps[..., None], up_fractions, out=b)  # bettor k bets u_k * cap
    np.multiply(b, a, out=a)
    np.log1p(a, out=a)
    log_wealth += a


def log_mixture(
    log_wealth: FloatArray, log_prior: FloatArray | None, scratch: FloatArray | None = None
) -> FloatArray:
    """Log of the mixture wealth ``sum_s w0_s E_s(m)``, uniform ``w0``; shape (2, W).

    For UP, ``E_s(m)`` is first the prior mixture ``sum_k pi_k E_{s,k}(m)`` over bets.
    ``scratch`` (shaped like ``log_wealth``) is an optional work buffer.

    Examples
    --------
    >>> lw = np.log(np.array([[[1.0], [3.0]], [[2.0], [2.0]]]))
    >>> np.exp(log_mixture(lw, None)).round(12).tolist()
    [[2.0], [2.0]]
    """
    lw = log_wealth
    if log_prior is not None:
        if scratch is None:
            scratch = np.empty_like(lw)
        np.add(lw, log_prior, out=scratch)
        lw = _logsumexp(scratch, axis=-1, scratch=scratch)
        scratch = None
    s = lw.shape[1]
    if s == 1:
        return np.asarray(lw[:, 0, :], dtype=np.float64)
    return _logsumexp(lw, axis=1, scratch=scratch) - math.log(s)


def log_mean_exp(values: list[float]) -> float:
    """``log(mean(exp(values)))`` in Python floats: a cheap bound check, not the mixture itself.

    Within a few ulps of :func:`log_mixture` (which uses numpy's ``exp``/``log``); callers
    compare it to a threshold with a margin, then use :func:`log_mixture` for the decision.

    Examples
    --------
    >>> round(log_mean_exp([0.0, math.log(3.0)]), 12) == round(math.log(2.0), 12)
    True
    """
    mx = max(values)
    exp = math.exp
    return mx + math.log(sum([exp(v - mx) for v in values]) / len(values))


def log_mean_exp_rows(x: FloatArray, axis: int) -> FloatArray:
    """``log(mean(exp(x)))`` along ``axis`` (stabilized): the uniform rho mixture.

    Examples
    --------
    >>> round(float(log_mean_exp_rows(np.log(np.array([1.0, 3.0])), 0)), 12) == round(
    ...     math.log(2.0), 12)
    True
    """
    mx = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.mean(np.exp(x - mx), axis=axis)) + np.squeeze(mx, axis=axis)
    return np.asarray(out, dtype=np.float64)


def _logsumexp(a: FloatArray, axis: int, scratch: FloatArray | None) -> FloatArray:
    mx = a.max(axis=axis, keepdims=True)
    if scratch is None:
        scratch = np.empty_like(a)
    np.subtract(a, mx, out=scratch)
    np.exp(scratch, out=scratch)
    out = np.log(scratch.sum(axis=axis)) + np.squeeze(mx, axis=axis)
    return np.asarray(out, dtype=np.float64)


def hull_edges(rejected: BoolArray, first_edge: int) -> tuple[int, int]:
    """Interval edges implied by this round's rejections on the tracked points.

    Parameters
    ----------
    rejected : ndarray of bool, shape (2, W)
        ``rejected[0]``: upper test rejected at the point; ``rejected[1]``: lower test.
    first_edge : int
        Edge index (``e`` means ``e / G``) of the first tracked point.

    Returns
    -------
    (lower_edge, upper_edge) : tuple of int
        ``lower_edge`` is the edge just below the first point the lower test accepts (the last
        tracked point if it accepts none); ``upper_edge`` the edge just above the last point the
        upper test accepts (the first tracked point if it accepts none). Using the first/last
        *accepted* point (the convex hull) is conservative even if floating point broke the
        monotonicity of the wealth in ``m``.

    Examples
    --------
    >>> hull_edges(np.array([[False, False, True], [True, False, False]]), 1)
    (1, 3)
    """
    w = rejected.shape[1]
    acc_up = np.flatnonzero(~rejected[0])
    acc_lo = np.flatnonzero(~rejected[1])
    lower = first_edge - 1 + (int(acc_lo[0]) if acc_lo.size else w)
    upper = first_edge + (int(acc_up[-1]) + 1 if acc_up.size else 0)
    return lower, upper


def may_move_edges(
    log_wealth: FloatArray, col_upper: int, col_lower: int, log_threshold: float
) -> bool:
    """Whether this round's rejections could move an interval edge: a conservative filter.

    :func:`hull_edges` keeps the last point the upper test accepts and the first point the
    lower test accepts, and the tracked window includes the (rejected) edge points themselves.
    So the upper edge ``e`` can only move if the upper test rejects the point ``e - 1`` just
    inside it (column ``col_upper``), and the lower edge ``e'`` only if the lower test rejects
    ``e' + 1`` (column ``col_lower``). Those two mixtures are bounded with a margin far above
    rounding error (a mixture is at most its largest component); any doubt returns True, and
    the caller then runs the exact full-window computation. Columns outside the window (edges
    at the ends of the grid) or a window narrower than 2 points also return True.

    Parameters
    ----------
    log_wealth : ndarray, shape (2, S, W) or (2, S, W, K)
        Log-wealth of the tracked points (4-D: universal-portfolio bettors).
    col_upper, col_lower : int
        Columns of the points just inside the upper and the lower edge.
    log_threshold : float
        ``log(2 / delta)``.

    Examples
    --------
    >>> lw = np.zeros((2, 1, 3))
    >>> may_move_edges(lw, 1, 1, math.log(20.0))
    False
    >>> lw[0, 0, 1] = 3.1
    >>> may_move_edges(lw, 1, 1, 3.0)
    True
    """
    width = log_wealth.shape[2]
    if not (0 <= col_upper < width and 0 <= col_lower < width) or width < 2:
        return True
    limit = edge_limit(log_threshold)
    if log_wealth.ndim == 4:  # mixture over bettors and rhos <= the largest of them
        return bool(log_wealth[0, :, col_upper].max() >= limit
                    or log_wealth[1, :, col_lower].max() >= limit)
    up: list[float] = log_wealth[0, :, col_upper].tolist()
    low: list[float] = log_wealth[1, :, col_lower].tolist()
    if len(up) == 1:
        return up[0] >= limit or low[0] >= limit
    # log-mean-exp <= max: the exponentials are only needed near the threshold
    return ((max(up) >= limit and log_mean_exp(up) >= limit)
            or (max(low) >= limit and log_mean_exp(low) >= limit))
