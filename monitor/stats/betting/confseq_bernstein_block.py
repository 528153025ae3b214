"""One Bernstein confidence sequence's bet block in a few numpy calls.

The single-sequence path of :class:`monitor.stats.betting.confseq_bernstein.BernsteinSequences`:
:class:`SingleSequenceBlockSums` computes what
:func:`~monitor.stats.betting.confseq_bernstein.block_sums` computes for one sequence (the WSR bets
and sums of a block's rounds, then each side's capped bets and quadratic sums after every round),
with the constants of the configuration computed once and both sides in one array, so a block costs
a few dozen small numpy calls instead of about a hundred.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from monitor.stats.betting.quadratic_wealth import N_SUMS, fan_slope

__all__ = ["SingleSequenceBlockSums"]

FloatArray = npt.NDArray[np.float64]

_compiled: tuple[Callable[..., None], Callable[..., None]] | None
try:  # the compiled block (setup.py builds it when a C compiler is present): the same bits
    from monitor.stats.betting.cedges import block_prep, block_terms
    _compiled = (block_prep, block_terms)
except ImportError:  # pragma: no cover - depends on the install
    _compiled = None


class SingleSequenceBlockSums:
    """The bet-block computation of one configuration's sequences (shareable).

    Its arrays are read-only constants; its one mutable part is a one-entry cache of the
    caps of the last cap edges seen (any sibling may replace it: it only saves work).

    Parameters
    ----------
    rho : ndarray, shape (R,)
        Each row's reliance factor.
    row_member : sequence of int
        Each row's member index (into the cap edges).
    mu0, var0 : sequence of float
        The WSR statistics' prior mean and variance of each row.
    c : float
        Cap fraction of the bets.
    log_inv_delta : float
        ``log(1 / delta)`` the WSR bets are tuned for.
    horizon : int or None
        WSR horizon (:func:`~monitor.stats.betting.bets.wsr_scale`).
    grid_size : int
        Grid points are ``j / grid_size``; cap edges are grid indices.
    max_rounds : int
        Most rounds in one block.

    Examples
    --------
    >>> import math
    >>> from monitor.stats.betting.bets import BetConfig
    >>> from monitor.stats.betting.confseq_bernstein import BernsteinSequences, block_sums
    >>> s = BernsteinSequences(0.1, [0.0, 1.0], BetConfig(), 100, [[0], [0, 1]])
    >>> qs = np.array([[0.0, 0.1, 0.1], [1.0, 0.9, 0.9]])
    >>> kern = SingleSequenceBlockSums(np.array([0.0, 0.0, 1.0]), [0, 1, 1], [0.5] * 3,
    ...                    [0.25, 0.25, 2.25], 0.5, -math.log(0.05), None, 100, 32)
    >>> cum, tot, dev = kern.run(qs, 0, [0.0] * 3, [0.0] * 3, np.zeros((2, 5, 3)),
    ...                          [(0, 100), (0, 100)])
    >>> ref = block_sums([s], qs[None])
    >>> [bool((a == b[0]).all()) for a, b in zip((cum[0, 1:], cum[1, 1:], tot, dev), ref)]
    [True, True, True, True]

    Notes
    -----
    Every value is bit-identical to :func:`~monitor.stats.betting.confseq_bernstein.block_sums`
    for one sequence: the same IEEE operations on the same operands element by element (only
    the array layout differs), and every sum is a running sum added strictly in round order
    (``np.add.accumulate``, never pairwise), so nothing depends on the batching.
    """

    def __init__(self, rho: FloatArray, row_member: Sequence[int], mu0: Sequence[float],
                 var0: Sequence[float], c: float, log_inv_delta: float, horizon: int | None,
                 grid_size: int, max_rounds: int) -> None:
        self.rho = rho
        self.one_plus_rho = 1.0 + rho
        self.row_member = [int(i) for i in row_member]
        self.mu0 = np.array(mu0, dtype=np.float64)
        self.var0 = np.array(var0, dtype=np.float64)
        self.c = c
        self.log_inv_delta = log_inv_delta
        self.horizon = horizon
        self.grid_size = grid_size
        # 1 .. max_rounds + 1 as a float column (exact): t and t + 1 of a block's rounds
        self.steps: FloatArray = np.arange(1.0, max_rounds + 2.0)[:, None]
        for a in (self.rho, self.one_plus_rho, self.mu0, self.var0, self.steps):
            a.flags.writeable = False  # shared by spawned sequences
        # the caps of the last cap edges seen: (edges, lo, hi, c / spans (2, 1, R))
        self._caps: tuple[list[tuple[int, int]], FloatArray, FloatArray, FloatArray] | None = None

    def caps(self, cap_edges: Sequence[tuple[int, int]]
             ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Return ``(lo, hi, caps)`` per row for the members' cap edges (read-only arrays).

        ``lo`` and ``hi`` are the edges over ``grid_size``; ``caps`` ``(2, 1, R)`` the bet caps
        ``c / (1 + rho - lo)`` (upper side) and ``c / (hi + rho)`` (lower side). The last
        result is kept: the edges only change at a block's start.
        """
        memo = self._caps
        edges = list(cap_edges)
        if memo is not None and memo[0] == edges:
            return memo[1], memo[2], memo[3]
        g = self.grid_size
        lo = np.array([edges[i][0] for i in self.row_member]) / g
        hi = np.array([edges[i][1] for i in self.row_member]) / g
        span = np.empty((2, 1, len(lo)))
        np.subtract(self.one_plus_rho, lo, out=span[0, 0])
        np.add(hi, self.rho, out=span[1, 0])
        caps = self.c / span
        for a in (lo, hi, caps):
            a.flags.writeable = False
        self._caps = (edges, lo, hi, caps)
        return lo, hi, caps

    def run(self, qs: FloatArray, t0: int, total: Sequence[float], dev: Sequence[float],
            sums: FloatArray, cap_edges: Sequence[tuple[int, int]]
            ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Return ``(cum, totals, devs)`` of the block's rounds ``qs`` (``(k, R)``).

        ``cum`` is ``(2, k + 1, 5, R)``: per side (upper, lower) the quadratic sums before the
        block (``cum[:, 0]``, a copy of ``sums``) and after each round; ``totals`` and
        ``devs`` ``(k, R)`` are the WSR sums after each round. ``t0`` is the number of rounds
        applied before the block and ``cap_edges`` each member's ``(lo, hi)`` cap edges.
        The compiled ``cedges.block_prep`` / ``block_terms`` when built (the same bits; numpy's
        ``log1p`` between them), else :meth:`run_py`.
        """
        k, n_rows = qs.shape
        if (_compiled is None or not k or qs.dtype != np.float64 or not qs.flags.c_contiguous
                or sums.dtype != np.float64 or not sums.flags.c_contiguous):
            return self.run_py(qs, t0, total, dev, sums, cap_edges)
        prep, terms = _compiled
        lo, hi, caps = self.caps(cap_edges)
        fixed = None if self.horizon is None else 2.0 * self.log_inv_delta / self.horizon
        wd = np.empty((2, k + 1, n_rows))  # WSR totals and squared-error sums
        work = np.empty((3, 2, k, n_rows))  # lam, zmin, fan_slope's log1p argument
        prep(qs, t0, total, dev, self.mu0, self.var0, 2.0 * self.log_inv_delta, fixed, lo, hi,
             caps, wd, work)
        cum = np.empty((2, k + 1, N_SUMS, n_rows))
        terms(np.log1p(work[2]), work, qs, sums, cum)
        return cum, wd[0, 1:], wd[1, 1:]

    def run_py(self, qs: FloatArray, t0: int, total: Sequence[float], dev: Sequence[float],
               sums: FloatArray, cap_edges: Sequence[tuple[int, int]]
               ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """:meth:`run` with numpy only (the reference the compiled block is compared with)."""
        k, n_rows = qs.shape
        t = t0 + self.steps[:k]  # (k, 1): rounds t0 + 1 .. t0 + k (exact float integers)
        # WSR statistics: running sums in round order (as wsr_rounds_stats)
        tots = np.add.accumulate(np.concatenate(([total], qs)), axis=0)
        err = qs - (self.mu0 + tots[1:]) / (t0 + self.steps[1 : k + 1])
        err *= err
        devs = np.add.accumulate(np.concatenate(([dev], err)), axis=0)
        # wsr_scale(log_inv_delta, t, horizon) of each round, the same expression inlined
        num = 2.0 * self.log_inv_delta
        if self.horizon is None:
            log1p = math.log1p
            scale = np.array([[num / (tt * log1p(tt))] for tt in range(t0 + 1, t0 + k + 1)])
        else:
            scale = np.full((k, 1), num / self.horizon)
        lams = np.sqrt(scale / ((self.var0 + devs[:-1]) / t))
        # the block's caps: upper side c / (1 + rho - l), lower side c / (u + rho)
        lo, hi, caps = self.caps(cap_edges)
        lam = np.minimum(lams, caps)  # (2, k, R)
        zmin = np.empty((2, k, n_rows))
        np.subtract(lo, qs, out=zmin[0])
        np.subtract(qs, hi, out=zmin[1])
        np.multiply(lam, zmin, out=zmin)
        # sums before the block, then each round's [lam, lam q, kl2, kl2 q, kl2 q^2]
        out = np.empty((2, k + 1, N_SUMS, n_rows))
        out[:, 0] = sums
        terms = out[:, 1:]
        terms[:, :, 0] = lam
        np.multiply(lam, qs, out=terms[:, :, 1])
        kl2 = terms[:, :, 2]
        np.multiply(fan_slope(zmin), lam, out=kl2)
        np.multiply(kl2, lam, out=kl2)
        np.multiply(kl2, qs, out=terms[:, :, 3])
        np.multiply(terms[:, :, 3], qs, out=terms[:, :, 4])
        cum: FloatArray = np.add.accumulate(out, axis=1)
        return cum, tots[1:], devs[1:]
