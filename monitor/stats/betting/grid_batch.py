"""Many WSR rounds of grid wealth at once: the batched path of the shared confidence sequence.

:class:`monitor.stats.betting.confseq_group.SharedGridWealth` buffers rounds and applies them here
in one vectorized pass: the bets and running sums of every round (:func:`wsr_rounds_stats`), the
log-wealth after every round (:func:`accumulate_wsr_rounds`), and the rounds at which a member's
interval edge may move (:func:`edge_candidates`). Every value is bit-identical to the
round-by-round functions of :mod:`monitor.stats.betting.grid_wealth` (same IEEE operations in the
same order; running sums are sequential, never pairwise).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from monitor.stats.betting.bets import wsr_scale
from monitor.stats.betting.grid_wealth import edge_limit, log_mean_exp_rows

__all__ = ["accumulate_wsr_rounds", "edge_candidates", "running_sums", "wsr_rounds_stats"]

FloatArray = npt.NDArray[np.float64]


def accumulate_wsr_rounds(
    log_wealth: FloatArray, qs: FloatArray, lams: FloatArray, grid: FloatArray, caps: FloatArray
) -> FloatArray:
    """Log-wealth after each of ``k`` WSR rounds, shape ``(k, 2, S, W)``, in one pass.

    ``out[i]`` is ``log_wealth`` after rounds ``0..i`` with observations ``qs[i]`` and bets
    ``lams[i]`` (shape ``(k, S)``): the same element-wise operations as ``k`` calls of
    :func:`apply_wsr_bets` (subtract, negate, minimum, multiply, log1p), then a running sum in
    round order, so every value is bit-identical to the round-by-round update.

    Examples
    --------
    >>> import math
    >>> from monitor.stats.betting.grid_wealth import apply_wsr_bets
    >>> lw = np.zeros((2, 1, 1)); one = np.zeros((2, 1, 1))
    >>> out = accumulate_wsr_rounds(lw, np.array([[0.0], [1.0]]), np.array([[4.0], [2.0]]),
    ...                             np.array([0.5]), np.ones((2, 1, 1)))
    >>> apply_wsr_bets(one, [0.0], 1, math.log(4.0), None, [0.25], [0.0], np.array([0.5]),
    ...                np.ones((2, 1, 1)), (np.empty_like(lw), np.empty_like(lw)))
    >>> bool((out[0] == one).all()), out.shape
    (True, (2, 2, 1, 1))
    """
    out = np.empty((len(qs), *log_wealth.shape))
    np.subtract(qs[:, :, None], grid, out=out[:, 1])  # x = q - m
    np.negative(out[:, 1], out=out[:, 0])  # upper test: -x
    bets = np.minimum(lams[:, None, :, None], caps)  # capped bets
    np.multiply(bets, out, out=out)
    np.log1p(out, out=out)
    out[0] += log_wealth
    for i in range(1, len(out)):  # faster than np.add.accumulate along the first axis
        np.add(out[i - 1], out[i], out=out[i])
    return out


def running_sums(a: FloatArray, axis: int) -> FloatArray:
    """Return the running sums of ``a`` along ``axis``, added strictly in order.

    ``out[i] = out[i - 1] + a[i]`` along the axis (never pairwise), so a value does not depend
    on how rounds were batched. numpy's ``add.accumulate`` when the other axes are small (one
    sequence's block), a loop of whole-slice additions when they are large (a fleet's blocks
    at once, where it is about three times faster); the two are bit-identical.

    Examples
    --------
    >>> running_sums(np.array([[1.0, 2.0], [0.5, 0.25]]), axis=0).tolist()
    [[1.0, 2.0], [1.5, 2.25]]
    """
    steps = a.shape[axis]
    if steps < 2 or a.size // steps < 4096:
        out: FloatArray = np.add.accumulate(a, axis=axis)
        return out
    out = np.empty_like(a)
    moved, src = np.moveaxis(out, axis, 0), np.moveaxis(a, axis, 0)  # views
    moved[0] = src[0]
    for i in range(1, steps):
        np.add(moved[i - 1], src[i], out=moved[i])
    return out


def wsr_rounds_stats(
    qs: FloatArray,
    t0: int | npt.NDArray[np.int64],
    log_inv_delta: float,
    horizon: int | None,
    mu0: list[float],
    var0: list[float],
    total: list[float] | FloatArray,
    dev: list[float] | FloatArray,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """WSR bets and running sums of rounds ``t0 + 1 .. t0 + k`` (``qs``: shape ``(k, S)``).

    Returns ``(lams, totals, devs)``, each ``(k, S)``: the bets of each round (from the
    sums before it) and the sums after it, the same float operations in the same order as
    :func:`wsr_lambdas` then :func:`fold_wsr_sums` round by round (running sums with
    sequential additions), so the values are bit-identical. A leading batch axis is allowed
    (``qs`` ``(N, k, S)``, ``t0`` ``(N,)``, ``total`` and ``dev`` ``(N, S)``): each slice is
    what the unbatched call returns.

    Examples
    --------
    >>> import math
    >>> from monitor.stats.betting.grid_wealth import fold_wsr_sums, wsr_lambdas
    >>> lam, tot, dev = wsr_rounds_stats(np.array([[0.0], [1.0]]), 0, math.log(4.0), None,
    ...                                  [0.5], [0.25], [0.0], [0.0])
    >>> lam[0].tolist() == wsr_lambdas(1, math.log(4.0), None, [0.25], [0.0])
    True
    >>> tot.tolist(), dev[0].tolist() == fold_wsr_sums([0.0], 1, [0.5], [0.0], [0.0])[1]
    ([[0.0], [1.0]], True)
    """
    k = qs.shape[-2]
    t = np.asarray(t0, dtype=np.int64)[..., None] + np.arange(1, k + 1)  # (..., k)
    # running sums are strictly sequential along the axis (never pairwise)
    sums = np.empty((*qs.shape[:-2], k + 1, qs.shape[-1]))
    sums[..., 0, :] = total
    sums[..., 1:, :] = qs
    sums = running_sums(sums, axis=sums.ndim - 2)
    err = qs - (np.array(mu0) + sums[..., 1:, :]) / (t + 1)[..., None]
    devs = np.empty_like(sums)
    devs[..., 0, :] = dev
    np.multiply(err, err, out=devs[..., 1:, :])
    devs = running_sums(devs, axis=devs.ndim - 2)
    memo: dict[int, float] = {}
    scale = np.array([memo[tt] if tt in memo else memo.setdefault(
        tt, wsr_scale(log_inv_delta, tt, horizon)) for tt in t.ravel().tolist()]).reshape(t.shape)
    lams = np.sqrt(scale[..., None] / ((np.array(var0) + devs[..., :-1, :]) / t[..., None]))
    return lams, sums[..., 1:, :], devs[..., 1:, :]


def edge_candidates(
    wealth: FloatArray, rows: slice, col_upper: int, col_lower: int, log_threshold: float
) -> npt.NDArray[np.intp]:
    """Return the rounds of ``wealth`` (``(k, 2, S, W)``) where :func:`may_move_edges` may be True.

    Its filter needs the rho mixture (log-mean-exp over ``rows``) at one of the two columns to
    reach the threshold less a margin. Here the mixture of every round is computed at once with
    numpy, against a margin twice as wide (numpy and ``math`` may round differently by a few
    ulps), so every round the filter would pass is kept; skipping the others changes nothing.

    Examples
    --------
    >>> w = np.zeros((3, 2, 1, 2)); w[1, 0, 0, 1] = 5.0
    >>> edge_candidates(w, slice(0, 1), 1, 0, 3.0).tolist()
    [1]
    """
    limit = edge_limit(log_threshold) - 1e-9 * (1.0 + abs(log_threshold))
    up = log_mean_exp_rows(wealth[:, 0, rows, col_upper], axis=1)
    low = log_mean_exp_rows(wealth[:, 1, rows, col_lower], axis=1)
    return np.flatnonzero((up >= limit) | (low >= limit))
