"""Hedged confidence sequences of several methods computed in one grid-wealth pass.

R-Eval (``rhos = [0]``), R-AutoEval (``[1]``) and R-AutoEval+ (``S`` rhos including 0 and 1)
of one certificate test the same grid points with the same per-rho bets: each rho's wealth at a
grid point depends only on that rho's own observations. :class:`SharedGridWealth` keeps one
log-wealth array over the union of the rhos and the union (hull) of the methods' tracked
windows; each :class:`GridMember` reads its rows and its window and keeps its own bounds. Used
by :class:`monitor.stats.betting.risk_group.CertificateGroup`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from monitor.stats.betting.bets import BetConfig, up_grid
from monitor.stats.betting.grid_batch import (
    accumulate_wsr_rounds,
    edge_candidates,
    wsr_rounds_stats,
)
from monitor.stats.betting.grid_wealth import (
    bet_caps,
    fold_wsr_sums,
    grid_points,
    hull_edges,
    log_mixture,
    may_move_edges,
    update_log_wealth,
    wsr_lambdas,
)
from monitor.stats.betting.members import MemberBounds

__all__ = ["GridMember", "SharedGridWealth"]

FloatArray = npt.NDArray[np.float64]

_MAX_CHUNK_ROUNDS = 128
_CHUNK_VALUES = 1 << 16


class GridMember(MemberBounds):
    """One method's view of a :class:`SharedGridWealth`: its rows, window, bounds and validity.

    It offers the read side of :class:`monitor.stats.betting.confseq.HedgedConfidenceSequence`
    (``lower``, ``upper``, ``valid``, ``rounds``, ``to_state``); the owner updates it.

    Examples
    --------
    >>> g = SharedGridWealth(0.1, [0.0, 0.5, 1.0], BetConfig(), 50, [[0], [0, 1, 2]])
    >>> g.update(0.0, 0.0, None)
    >>> m = g.members[0]
    >>> (m.lower, m.upper, m.valid, m.rounds, m.to_state()["rhos"])
    (0.0, 1.0, True, 1, [0.0])
    """

    def __init__(self, owner: SharedGridWealth, rows: list[int]) -> None:
        super().__init__(owner)
        self._wealth = owner
        self._idx = rows
        self._rows = slice(rows[0], rows[-1] + 1)  # contiguous rows (checked by the owner)
        self._rhos = np.array([owner.rhos_list[i] for i in rows])
        self.first = 1
        self.width = owner.grid_size - 1
        self.frozen: tuple[list[float], list[float], FloatArray] | None = None
        self._scratch: FloatArray | None = None

    def update(self, human_loss: float, judge_loss: float, block_mean: float | None) -> None:
        """Refuse: a member is advanced by its owner only."""
        raise TypeError("a GridMember is updated through its SharedGridWealth")

    def window(self, lw: FloatArray, first: int) -> FloatArray:
        """Return the member's rows and tracked points of the owner's log-wealth ``lw`` (a view)."""
        off = self.first - first
        return lw[:, self._rows, off : off + self.width]

    def _scratch_view(self, lw: FloatArray) -> FloatArray:
        if self._scratch is None:  # same shape as HedgedConfidenceSequence's work buffer
            shape = list(lw.shape)
            shape[2] = self._wealth.grid_size - 1
            self._scratch = np.empty(shape)
        return self._scratch[:, :, : self.width]

    def check(self, lw: FloatArray, first: int) -> None:
        """Move the bounds after a wealth update (HedgedConfidenceSequence.update's tail)."""
        own = self._wealth
        mine = self.window(lw, first)
        if not may_move_edges(mine, self.hi_edge - 1 - self.first, self.lo_edge + 1 - self.first,
                              own.log_threshold):
            return
        mine = np.ascontiguousarray(mine)  # the standalone sequence's own (contiguous) array
        mix = log_mixture(mine, own.up_log_prior, self._scratch_view(mine))
        rejected = mix >= own.log_threshold
        lo_e, hi_e = hull_edges(rejected, self.first)
        self.lo_edge = max(self.lo_edge, lo_e)
        self.hi_edge = min(self.hi_edge, hi_e)
        if self.lo_edge >= self.hi_edge:
            self.is_valid = False
            self.frozen = ([own.total[i] for i in self._idx], [own.dev[i] for i in self._idx],
                           mine.copy())
            self._scratch = None
            return
        new_first = max(self.lo_edge, 1)
        new_last = min(self.hi_edge, own.grid_size - 1)
        self.first, self.width = new_first, new_last - new_first + 1

    def next_check(self, wealth: FloatArray, first: int, start: int) -> int:
        """First round ``>= start`` of buffered wealth ``(k, 2, S, W)`` needing :meth:`check`.

        ``wealth`` covers grid points from ``first`` (a superset of this member's window);
        the other rounds would leave the bounds unchanged. Returns ``k`` if there is none.
        """
        k = int(wealth.shape[0])
        col_upper = self.hi_edge - 1 - self.first
        col_lower = self.lo_edge + 1 - self.first
        width = self.width
        if start >= k or not (0 <= col_upper < width and 0 <= col_lower < width) or width < 2:
            return min(start, k)  # may_move_edges' "any doubt" cases: check every round
        off = self.first - first
        hits = edge_candidates(wealth[start:], self._rows, col_upper + off, col_lower + off,
                               self._wealth.log_threshold)
        if hits.size == 0:
            return k
        return start + int(hits[0])

    def to_state(self) -> dict[str, Any]:
        """State in the format of :meth:`HedgedConfidenceSequence.to_state` (equal to it)."""
        own = self._wealth
        own.flush()
        if self.frozen is None:
            total = [own.total[i] for i in self._idx]
            dev = [own.dev[i] for i in self._idx]
            lw: list[Any] = self.window(own.log_wealth, own.first).tolist()
        else:
            total, dev = list(self.frozen[0]), list(self.frozen[1])
            lw = self.frozen[2].tolist()
        return {
            "format": "certmon.confseq",
            "version": 1,
            "delta": own.delta,
            "rhos": self._rhos.tolist(),
            "bet": own.bet.to_dict(),
            "grid_size": own.grid_size,
            "rounds": own.rounds,
            "valid": self.is_valid,
            "lower_edge": self.lo_edge,
            "upper_edge": self.hi_edge,
            "tracked_first": self.first,
            "wsr_total": total,
            "wsr_dev": dev,
            "log_wealth": lw,
        }

    def to_compact(self) -> list[Any]:
        """Bounds, window and (if invalid) frozen statistics as plain JSON types."""
        fz = None if self.frozen is None else [self.frozen[0], self.frozen[1],
                                               self.frozen[2].tolist()]
        return [self.lo_edge, self.hi_edge, self.first, self.width, self.is_valid, fz]

    def load_compact(self, v: Sequence[Any]) -> None:
        """Inverse of :meth:`to_compact`."""
        self.lo_edge, self.hi_edge, self.first, self.width = (int(x) for x in v[:4])
        self.is_valid = bool(v[4])
        fz = v[5]
        self.frozen = None if fz is None else (
            [float(x) for x in fz[0]], [float(x) for x in fz[1]],
            np.asarray(fz[2], dtype=np.float64))


class SharedGridWealth:
    """Grid log-wealth of the hedged confidence sequences of several rho sets, in one pass.

    Parameters
    ----------
    delta : float
        Miscoverage level of every member's sequence, ``0 < delta < 1``.
    rhos : sequence of float
        The union of the members' reliance factors, in [0, 1].
    bet : BetConfig
        Bet rule and cap fraction (as for ``HedgedConfidenceSequence``).
    grid_size : int
        ``G >= 2``.
    members : sequence of list of int
        Each member's rows of ``rhos`` (consecutive indices, e.g. ``[0]`` or ``[0, ..., S-1]``).

    Examples
    --------
    >>> from monitor.stats.betting.confseq import HedgedConfidenceSequence
    >>> g = SharedGridWealth(0.1, [0.0, 0.5, 1.0], BetConfig(), 100, [[0], [2], [0, 1, 2]])
    >>> ref = HedgedConfidenceSequence(0.1, [1.0], BetConfig(), grid_size=100)
    >>> for i in range(300):
    ...     g.update(float(i % 5 == 0), float(i % 4 == 0), 0.25); ref.update(
    ...         float(i % 5 == 0), float(i % 4 == 0), 0.25)
    >>> g.members[1].to_state() == ref.to_state()
    True

    Notes
    -----
    Each member's bounds, validity and state are bit-identical to a standalone
    :class:`monitor.stats.betting.confseq.HedgedConfidenceSequence` with the member's rhos, so the
    guarantee is the same: ``P(R in [lower, upper] at all rounds) >= 1 - delta`` for i.i.d.
    rounds. Why equal: the wealth at (side, rho, grid point) is built by the same element-wise
    operations (subtract, negate, minimum, multiply, log1p, add: element-wise, so an element's
    value does not depend on the array it sits in), from the same per-rho WSR statistics
    (Python floats, same order); a grid point outside a member's window is never read by that
    member; the mixture and the hull run on a contiguous copy of the member's own window, the
    array the standalone sequence holds. The union window is the hull of the valid members'
    windows, so it only shrinks. A member that becomes invalid freezes its statistics and
    wealth, as the standalone sequence stops updating.
    """

    def __init__(self, delta: float, rhos: Sequence[float], bet: BetConfig, grid_size: int,
                 members: Sequence[list[int]]) -> None:
        if not 0.0 < float(delta) < 1.0:
            raise ValueError(f"delta must satisfy 0 < delta < 1, got {delta!r}")
        r = np.array([float(v) for v in rhos], dtype=np.float64)
        if r.size == 0 or not np.all((r >= 0.0) & (r <= 1.0)):
            raise ValueError(f"rhos must be non-empty values in [0, 1], got {list(rhos)!r}")
        self._grid = grid_points(grid_size)
        self.grid_size = grid_size
        self.delta = float(delta)
        bet = bet.confseq_config()  # plugin_up certificates keep anytime WSR bets here
        self.bet = bet
        self.rhos_list: list[float] = r.tolist()
        self.log_threshold = -math.log(self.delta / 2.0)
        self._caps = bet_caps(r, self._grid, float(bet.c))
        lo, hi = -r, 1.0 + r
        self._var0_l: list[float] = (0.25 * (hi - lo) ** 2).tolist()
        self._mu0_l: list[float] = (0.5 * (lo + hi)).tolist()
        self.up_log_prior: FloatArray | None = None
        self._up: FloatArray | None = None
        if bet.rule == "up":
            self._up, self.up_log_prior = up_grid(bet.up_grid)
        self.rounds = 0
        self.total: list[float] = [0.0] * r.size
        self.dev: list[float] = [0.0] * r.size
        self.first = 1
        shape: tuple[int, ...] = (2, r.size, grid_size - 1)
        if self._up is not None:
            shape = (*shape, self._up.size)
        self.log_wealth = np.zeros(shape)
        self._scratch = (np.empty(shape), np.empty(shape))
        for rows in members:
            if not rows or list(rows) != list(range(rows[0], rows[0] + len(rows))):
                raise ValueError(f"member rows must be consecutive indices, got {rows!r}")
            if rows[-1] >= r.size:
                raise ValueError(f"member rows {rows!r} outside the {r.size} rhos")
        self.members = [GridMember(self, list(rows)) for rows in members]
        self._pending: list[list[float]] = []  # observations of the buffered WSR rounds
        self._dead = False  # every member invalid: wealth and statistics no longer move
        self._chunk = 1
        self._set_window()

    def _set_window(self) -> None:
        width = self.log_wealth.shape[2]
        sl = slice(self.first - 1, self.first - 1 + width)
        self._win_grid = self._grid[sl]
        self._win_caps = self._caps[:, :, sl]
        self._win_scratch = (self._scratch[0][:, :, :width], self._scratch[1][:, :, :width])
        # rounds per flush: up to 128, fewer for wide windows (about 1 MB of wealth per flush)
        self._chunk = max(1, min(_MAX_CHUNK_ROUNDS, _CHUNK_VALUES // self.log_wealth[0].size))

    def update(self, human: float, judge: float, block_mean: float | None) -> None:
        """One validated round (losses already checked to be floats in [0, 1]).

        WSR rounds are buffered and applied by :meth:`flush`, which every read of a member's
        bounds or state calls first (and ``update`` when the buffer is full).
        """
        if block_mean is None:
            q = [human] * len(self.rhos_list)
        else:
            q = [r * block_mean + human - r * judge for r in self.rhos_list]
        self.rounds += 1
        if self._dead:
            return
        if self._up is None:
            self._pending.append(q)
            if len(self._pending) >= self._chunk:
                self.flush()
            return
        lw = self.log_wealth
        update_log_wealth(lw, np.array(q), self._win_grid, self._win_caps, None, self._up,
                          self._win_scratch)
        self.total, self.dev = fold_wsr_sums(q, self.rounds, self._mu0_l, self.total, self.dev)
        live = self._live()
        for m in live:
            m.check(lw, self.first)
        if any(m.is_valid for m in live):
            self._keep(lw, self.first, self._hull())
        else:
            self._dead = True

    def penalize(self, judge: float, block_mean: float | None) -> None:
        """Take a round whose label is missing for good, at each side's worst label.

        The upper test (factor ``1 + lam (m - q)``, the upper bound) sees the label 1, the
        lower test (``1 + lam (q - m)``, the lower bound) the label 0, with the round's own
        bets (from earlier rounds only); the WSR statistics that later bets use take the
        judge's loss (as :meth:`BernsteinSequences.penalize`). Each factor is at most the
        one the real label would have given, so each side's wealth at the true risk is at most
        the real-label wealth under the same bets: the coverage holds whatever makes labels go
        missing. Counted in :attr:`rounds`.
        """
        self.flush()
        self.rounds += 1
        if self._dead:
            return

        def q(h: float) -> FloatArray:
            if block_mean is None:
                return np.full(len(self.rhos_list), h)
            return np.array([r * block_mean + h - r * judge for r in self.rhos_list])

        lw = self.log_wealth
        lam = None if self._up is not None else np.array(wsr_lambdas(
            self.rounds, self.log_threshold, self.bet.horizon, self._var0_l, self.dev))
        upper = lw.copy()
        update_log_wealth(upper, q(1.0), self._win_grid, self._win_caps, lam, self._up,
                          self._win_scratch)
        update_log_wealth(lw, q(0.0), self._win_grid, self._win_caps, lam, self._up,
                          self._win_scratch)
        lw[0] = upper[0]
        self.total, self.dev = fold_wsr_sums(q(float(judge)).tolist(), self.rounds, self._mu0_l,
                                             self.total, self.dev)
        live = self._live()
        for m in live:
            m.check(lw, self.first)
        if any(m.is_valid for m in live):
            self._keep(lw, self.first, self._hull())
        else:
            self._dead = True

    def flush(self) -> None:
        """Apply the buffered WSR rounds: bit-identical to applying each when it arrived.

        One vectorized pass computes the bets and sums of every buffered round
        (:func:`~monitor.stats.betting.grid_wealth.wsr_rounds_stats`) and the wealth after each
        (:func:`~monitor.stats.betting.grid_wealth.accumulate_wsr_rounds`, over the current union
        window, which contains every member's window until the next flush). Members are then
        checked, in round order, only at the rounds where their bounds can move
        (:meth:`GridMember.next_check`); the others would have returned unchanged. If every
        member becomes invalid at a round, wealth and statistics stop there, as they would
        have round by round.
        """
        pending = self._pending
        if not pending:
            return
        self._pending = []
        first = self.first
        k = len(pending)
        qs = np.array(pending)
        lams, totals, devs = wsr_rounds_stats(qs, self.rounds - k, self.log_threshold,
                                              self.bet.horizon, self._mu0_l, self._var0_l,
                                              self.total, self.dev)
        wealth = accumulate_wsr_rounds(self.log_wealth, qs, lams, self._win_grid,
                                       self._win_caps)
        live = self._live()
        nexts = [m.next_check(wealth, first, 0) for m in live]
        while live:
            j = min(nexts)
            if j >= k:
                break
            before = self._hull()  # the union window at the start of round j
            self.total, self.dev = totals[j].tolist(), devs[j].tolist()  # what dying freezes
            for i, m in enumerate(live):
                if nexts[i] == j:
                    m.check(wealth[j], first)
                    nexts[i] = m.next_check(wealth, first, j + 1) if m.is_valid else k
            nexts = [n for n, m in zip(nexts, live, strict=True) if m.is_valid]
            live = [m for m in live if m.is_valid]
            if not live:  # every member is invalid from round j on
                self._dead = True
                self._keep(wealth[j], first, before)
                return
        self.total, self.dev = totals[-1].tolist(), devs[-1].tolist()
        self._keep(wealth[-1], first, self._hull())

    def _live(self) -> list[GridMember]:
        return [m for m in self.members if m.is_valid]

    def _hull(self) -> tuple[int, int]:
        """First and last grid point of the union of the valid members' windows."""
        live = self._live()
        return (min(m.first for m in live), max(m.first + m.width - 1 for m in live))

    def _keep(self, lw: FloatArray, lw_first: int, window: tuple[int, int]) -> None:
        """Make ``lw`` (points from ``lw_first``) restricted to ``window`` the tracked wealth."""
        new_first, new_last = window
        if new_first == lw_first and new_last == lw_first + lw.shape[2] - 1 and (
                lw is self.log_wealth):
            return
        self.log_wealth = np.ascontiguousarray(
            lw[:, :, new_first - lw_first : new_last - lw_first + 1])
        self.first = new_first
        self._set_window()

    def to_state(self) -> dict[str, Any]:
        """Shared statistics, union window and members' bounds as plain JSON types."""
        self.flush()
        return {
            "rounds": self.rounds,
            "wsr_total": list(self.total),
            "wsr_dev": list(self.dev),
            "tracked_first": self.first,
            "log_wealth": self.log_wealth.tolist(),
            "members": [m.to_compact() for m in self.members],
        }

    def load_state(self, d: dict[str, Any]) -> None:
        """Restore :meth:`to_state` output into this (freshly constructed) object."""
        lw = np.asarray(d["log_wealth"], dtype=np.float64)
        total = [float(v) for v in d["wsr_total"]]
        dev = [float(v) for v in d["wsr_dev"]]
        if (lw.ndim != self.log_wealth.ndim or lw.shape[:2] != self.log_wealth.shape[:2]
                or lw.shape[3:] != self.log_wealth.shape[3:] or len(total) != len(self.total)
                or len(dev) != len(self.dev) or len(d["members"]) != len(self.members)):
            raise ValueError("malformed shared grid state: shapes do not match the config")
        self.rounds = int(d["rounds"])
        self.total, self.dev = total, dev
        self.first = int(d["tracked_first"])
        self.log_wealth = lw
        for m, v in zip(self.members, d["members"], strict=True):
            m.load_compact(v)
        self._pending.clear()
        self._dead = not self._live()
        self._set_window()
