"""How a Bernstein confidence sequence's bounds move through a block of rounds.

Used by :class:`monitor.stats.betting.confseq_bernstein.BernsteinSequences` once a block's sums
are known (:func:`~monitor.stats.betting.confseq_bernstein.block_sums`) and a member's edge
point is rejected at some round: :class:`IntervalNarrowing` applies that member's remaining rounds.
Its tables come from the compiled ``cedges.c`` when it was built (the same decisions).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from monitor.stats.betting.grid_wealth import edge_limit
from monitor.stats.betting.quadratic_wealth import mixture_rejects

__all__ = ["Edges", "IntervalNarrowing", "next_rejections"]

_compiled_mixtures: Callable[..., None] | None
_compiled_filter: Callable[..., None] | None
try:  # compiled tables (setup.py builds them when a C compiler is present): same decisions
    from monitor.stats.betting.cedges import mixtures as _compiled_mixtures
except ImportError:  # pragma: no cover - depends on the install
    _compiled_mixtures = None
try:  # apart: a module built before edge_filter existed still gives its tables
    from monitor.stats.betting.cedges import edge_filter as _compiled_filter
except ImportError:  # pragma: no cover - depends on the install
    _compiled_filter = None

FloatArray = npt.NDArray[np.float64]
WINDOW = 16  # points in an edge search's first table (doubled each time a search leaves it)
SKIP_AFTER = 4  # single steps of a bound move before the rest is skipped on the table


class Edges(Protocol):
    """A member's interval on the grid: what :class:`IntervalNarrowing` reads and moves."""

    lo_edge: int
    hi_edge: int
    is_valid: bool

    @property
    def rows(self) -> slice:
        """The member's rows in the sums."""


class IntervalNarrowing:
    """One member's bound moves through a block, round by round, from tables of its mixtures.

    Parameters
    ----------
    member : Edges
        Its edges (grid indices, moved in place) and rows.
    up, low : ndarray, shape (k, 5, R)
        The upper and lower tests' quadratic sums after each round of the block.
    grid_size : int
        Grid points are ``j / grid_size``.
    log_threshold : float
        ``log(2 / delta)``: a side rejects ``m`` when its mixture reaches it.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> m = SimpleNamespace(lo_edge=0, hi_edge=10, is_valid=True, rows=slice(0, 1))
    >>> up = np.zeros((1, 5, 1)); up[0, :, 0] = [40.0, 8.0, 0.0, 0.0, 0.0]   # Q(m) = 40 m - 8
    >>> IntervalNarrowing(m, up, np.zeros((1, 5, 1)), 10, 3.0).run(0), m.lo_edge, m.hi_edge
    (0, 0, 3)

    Notes
    -----
    At each round, if a side's test rejects the point just inside its edge, the edge moves to
    one cell beyond the first point inward that the test accepts (the upper edge searching
    down to the lower edge, the lower one up to the upper edge, both from the edges before the
    round); if the edges cross, the member's intersection is empty and it stops. These are the
    moves of the running intersection of the accepted hulls, so the guarantee of
    :class:`~monitor.stats.betting.confseq_bernstein.BernsteinSequences` holds as stated
    there. A decision is read from a vectorized table of the mixture over the remaining
    rounds and a window of points inward from the edge (rebuilt twice as wide when a search
    leaves it), and taken in Python floats (:func:`mixture_rejects`) when the table value is
    within a margin (far above rounding) of the threshold: every decision is the exact one,
    whatever the batching.
    """

    def __init__(self, member: Edges, up: FloatArray, low: FloatArray, grid_size: int,
                 log_threshold: float) -> None:
        self.m, self.sums, self.grid_size = member, (up, low), grid_size
        self.log_threshold = log_threshold
        margin = 1e-9 * (1.0 + abs(log_threshold))
        self.clear_reject, self.clear_accept = log_threshold + margin, log_threshold - margin
        # per side: (first round, first point, width, mixtures (rounds, points)) or None
        self.tables: list[tuple[int, int, int, FloatArray] | None] = [None, None]

    def run(self, start: int) -> int:
        """Apply rounds ``start ..`` of the block; return the last round the member counts."""
        m = self.m
        lo, hi = m.lo_edge, m.hi_edge
        rejected = self.rejected
        k = len(self.sums[0])
        j = start
        while j < k:
            up_moves = rejected(0, j, hi - 1)
            low_moves = rejected(1, j, lo + 1)
            if not (up_moves or low_moves):
                # the rounds whose tables clearly accept both edge points change nothing
                j = min(self.next_candidate(0, j + 1, hi - 1),
                        self.next_candidate(1, j + 1, lo + 1))
                continue
            new_hi, new_lo = hi - 1, lo + 1
            if up_moves:
                new_hi -= 1
                steps = 0
                while new_hi >= lo and rejected(0, j, new_hi):
                    new_hi -= 1
                    steps += 1
                    if steps >= SKIP_AFTER:  # a long move (early rounds): skip ahead
                        new_hi = self.skip_rejected(0, j, new_hi, lo)
            if low_moves:
                new_lo += 1
                steps = 0
                while new_lo <= hi and rejected(1, j, new_lo):
                    new_lo += 1
                    steps += 1
                    if steps >= SKIP_AFTER:
                        new_lo = self.skip_rejected(1, j, new_lo, hi)
            lo, hi = max(lo, new_lo - 1), min(hi, new_hi + 1)
            m.lo_edge, m.hi_edge = lo, hi
            if lo >= hi:
                m.is_valid = False  # an empty intersection freezes the member's statistics
                return j
            j += 1
        return k - 1

    def next_candidate(self, side: int, j: int, point: int) -> int:
        """Return the first round from ``j`` at which ``side`` may reject ``point``.

        Reads the current table only: the rounds skipped are exactly those whose table value
        is below the clear-acceptance margin, for which :meth:`rejected` answers False without
        further computation (NaN is never skipped), so the walk's result is unchanged. Returns
        ``j`` itself when the table does not cover the point (or when ``j`` is past the block).
        """
        table = self.tables[side]
        if table is None:
            return j
        j0, base, width, mix = table
        at = base - point if side == 0 else point - base
        if j < j0 or not 0 <= at < width or j >= len(mix) + j0:
            return j
        accept = mix[j - j0:, at] < self.clear_accept  # not empty: j < len(mix) + j0
        first = int(accept.argmin())  # the first False, else 0 (then every value is True)
        return j + (len(accept) if accept[first] else first)

    def skip_rejected(self, side: int, j: int, point: int, limit: int) -> int:
        """Return the first point from ``point`` inward (not past ``limit``) not clearly rejected.

        Reads the current table only: the points skipped are exactly those whose table value
        is at or above the clear-rejection margin, for which :meth:`rejected` answers True
        without further computation, so the walk's result is unchanged. Returns ``point``
        itself when the table does not cover it; the caller keeps stepping with
        :meth:`rejected`, which decides the returned point exactly.
        """
        table = self.tables[side]
        if table is None:
            return point
        j0, base, width, mix = table
        at = base - point if side == 0 else point - base
        if j < j0 or not 0 <= at < width:
            return point
        n = min(width - at, (point - limit if side == 0 else limit - point) + 1)
        if n <= 0:
            return point
        clear = mix[j - j0, at : at + n] >= self.clear_reject  # not empty: n >= 1
        first = int(clear.argmin())  # the first False, else 0 (then every value is True)
        k = n if clear[first] else first
        return point - k if side == 0 else point + k

    def rejected(self, side: int, j: int, point: int) -> bool:
        """Tell whether ``side``'s test (0 upper, 1 lower) rejects grid point ``point`` at ``j``."""
        table = self.tables[side]
        if table is not None:
            j0, base, width, mix = table
            at = base - point if side == 0 else point - base
            if j >= j0 and 0 <= at < width:
                v = float(mix[j - j0, at])
                if v >= self.clear_reject:
                    return True
                if v < self.clear_accept:
                    return False
                return mixture_rejects(self.sums[side][j][:, self.m.rows],
                                       point / self.grid_size, side == 0, self.log_threshold)
        width = min(2 * table[2] if table is not None else WINDOW,
                    self.m.hi_edge - self.m.lo_edge + 2)
        self.tables[side] = (j, point, width, self._mixtures(side, j, point, width))
        return self.rejected(side, j, point)

    def _mixtures(self, side: int, j: int, point: int, width: int) -> FloatArray:
        """Return the mixtures at rounds ``j ..`` and ``width`` points inward from ``point``.

        The compiled ``cedges.mixtures`` when it was built: the same decisions (a table is a
        filter, read with a margin; see ``cedges.c``), about ten times faster.
        """
        sums = self.sums[side]
        r0, r1, step = self.m.rows.indices(sums.shape[2])
        if (_compiled_mixtures is not None and step == 1 and r1 > r0
                and sums.dtype == np.float64 and sums.dtype.isnative
                and sums.flags.c_contiguous and abs(point) + width <= 2**53):
            out = np.empty((len(sums) - j, width))
            _compiled_mixtures(sums, j, r0, r1, side == 0, int(point), width,
                               int(self.grid_size), self.clear_accept, self.clear_reject, out)
            return out
        return self._mixtures_numpy(side, j, point, width)

    def _mixtures_numpy(self, side: int, j: int, point: int, width: int) -> FloatArray:
        """:meth:`_mixtures` with numpy: every value the exact mixture (the reference)."""
        steps = np.arange(width)
        pts = (point - steps if side == 0 else point + steps) / self.grid_size
        s = self.sums[side][j:, :, self.m.rows, None]  # (rounds, 5, rows, 1)
        # log_mean_exp_rows(quadratic_bound(sums, pts, side == 0), axis=1), in place: the same
        # float operations on the same layout, so the same values
        q = pts * s[:, 0]
        if side == 0:
            q -= s[:, 1]  # m A - B
        else:
            np.subtract(s[:, 1], q, out=q)  # B - m A
        quad = pts * s[:, 2]
        quad -= 2.0 * s[:, 3]
        quad *= pts
        quad += s[:, 4]
        q += quad  # (rounds, rows, points)
        mx = q.max(axis=1, keepdims=True)
        q -= mx
        np.exp(q, out=q)
        mean = np.add.reduce(q, axis=1)
        mean /= q.shape[1]
        out: FloatArray = np.log(mean, out=mean)
        out += mx[:, 0]
        return out


def next_rejections(members: Sequence[Edges], row_member: Sequence[int],
                    segments: tuple[npt.NDArray[np.int64], FloatArray], grid_size: int,
                    log_threshold: float, both: FloatArray,
                    which: list[int]) -> dict[int, list[int]]:
    """First round whose upper / lower test rejects the point just inside each member's edge.

    ``both`` is ``(2, k, 5, R)``: the upper and the lower tests' sums after each round of a
    block; ``row_member`` the member of each rho row; ``segments`` the members' first rows and
    row counts (contiguous rows). For each member index in ``which``: ``[upper, lower]``,
    ``k`` where there is none. One vectorized filter (numpy, margin far above rounding)
    covers every member and both sides; each candidate is decided by :func:`mixture_rejects`
    in Python floats, so the result never depends on the batching.
    """
    k = both.shape[1]
    out = {i: [k, k] for i in which}
    if not k or not which:
        return out
    g = grid_size
    starts, counts = segments
    hi_pts = [(m.hi_edge - 1) / g for m in members]  # the points inside the edges
    lo_pts = [(m.lo_edge + 1) / g for m in members]
    limit = edge_limit(log_threshold) - 1e-9 * (1.0 + abs(log_threshold))
    if _compiled_filter is not None and both.dtype == np.float64 and both.ndim == 4:
        # the same filter compiled: values within rounding of numpy's (the margin decides)
        mix = np.empty((2, k, len(members)))
        _compiled_filter(both, list(zip(starts.tolist(), counts.astype(np.int64).tolist(),
                                        strict=True)),
                         (hi_pts, lo_pts), limit, mix)
        return _decide(out, mix, limit, members, hi_pts, lo_pts, both, log_threshold, k)
    points = np.array([[hi_pts[i] for i in row_member], [lo_pts[i] for i in row_member]]
                      )[:, None, :]
    # quadratic_bound of both sides at once: the lower side's b - m a is -(m a - b) exactly
    s = both
    q = np.empty(s.shape[:2] + s.shape[3:])  # (2, k, R)
    np.multiply(points, s[:, :, 0], out=q)
    q -= s[:, :, 1]
    np.negative(q[1], out=q[1])
    quad = points * s[:, :, 2]
    quad -= 2.0 * s[:, :, 3]
    quad *= points
    quad += s[:, :, 4]
    q += quad
    if q.max() < limit:  # a mixture is at most its largest bound: no candidate
        return out
    mx = np.maximum.reduceat(q, starts, axis=2)  # (2, k, members)
    mix = np.log(np.add.reduceat(np.exp(q - mx[:, :, list(row_member)]), starts, axis=2)
                 / counts) + mx
    return _decide(out, mix, limit, members, hi_pts, lo_pts, both, log_threshold, k)


def _decide(out: dict[int, list[int]], mix: FloatArray, limit: float,
            members: Sequence[Edges], hi_pts: list[float], lo_pts: list[float],
            both: FloatArray, log_threshold: float, k: int) -> dict[int, list[int]]:
    """Decide next_rejections' candidates (``mix >= limit``) exactly, earliest round first."""
    for side, r, i in zip(*np.nonzero(mix >= limit), strict=True):
        first = out.get(int(i))
        if first is None or first[side] < k:  # not asked for, or already found
            continue
        m = members[int(i)]
        point = hi_pts[int(i)] if side == 0 else lo_pts[int(i)]
        if mixture_rejects(both[side, int(r)][:, m.rows], point, side == 0, log_threshold):
            first[side] = int(r)
    return out
