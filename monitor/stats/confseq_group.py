"""Hedged confidence sequences of several methods computed in one grid-wealth pass.

R-Eval (``rhos = [0]``), R-AutoEval (``[1]``) and R-AutoEval+ (``S`` rhos including 0 and 1)
of one certificate test the same grid points with the same per-rho bets: each rho's wealth at a
grid point depends only on that rho's own observations. :class:`SharedGridWealth` keeps one
log-wealth array over the union of the rhos and the union (hull) of the methods' tracked
windows; each :class:`GridMember` reads its rows and its window and keeps its own bounds. Used
by :class:`monitor.stats.risk_group.CertificateGroup`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from monitor.stats.bets import BetConfig, up_grid
from monitor.stats.grid_wealth import (
    apply_wsr_bets,
    bet_caps,
    fold_wsr_sums,
    grid_points,
    hull_edges,
    log_mixture,
    may_move_edges,
    update_log_wealth,
)

__all__ = ["GridMember", "SharedGridWealth"]

FloatArray = npt.NDArray[np.float64]


class GridMember:
    """One method's view of a :class:`SharedGridWealth`: its rows, window, bounds and validity.

    It offers the read side of :class:`monitor.stats.confseq.HedgedConfidenceSequence`
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
        self._owner = owner
        self._idx = rows
        self._rows = slice(rows[0], rows[-1] + 1)  # contiguous rows (checked by the owner)
        self._rhos = np.array([owner.rhos_list[i] for i in rows])
        self.lo_edge = 0
        self.hi_edge = owner.grid_size
        self.first = 1
        self.width = owner.grid_size - 1
        self.valid = True
        self.frozen: tuple[list[float], list[float], FloatArray] | None = None
        self._scratch: FloatArray | None = None

    @property
    def lower(self) -> float:
        """Lower end of the running intersection."""
        return self.lo_edge / self._owner.grid_size

    @property
    def upper(self) -> float:
        """Upper end of the running intersection."""
        return self.hi_edge / self._owner.grid_size

    @property
    def rounds(self) -> int:
        """Number of rounds processed."""
        return self._owner.rounds

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
            shape[2] = self._owner.grid_size - 1
            self._scratch = np.empty(shape)
        return self._scratch[:, :, : self.width]

    def check(self, lw: FloatArray, first: int) -> None:
        """Move the bounds after a wealth update (HedgedConfidenceSequence.update's tail)."""
        own = self._owner
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
            self.valid = False
            self.frozen = ([own.total[i] for i in self._idx], [own.dev[i] for i in self._idx],
                           mine.copy())
            self._scratch = None
            return
        new_first = max(self.lo_edge, 1)
        new_last = min(self.hi_edge, own.grid_size - 1)
        self.first, self.width = new_first, new_last - new_first + 1

    def to_state(self) -> dict[str, Any]:
        """State in the format of :meth:`HedgedConfidenceSequence.to_state` (equal to it)."""
        own = self._owner
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
            "valid": self.valid,
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
        return [self.lo_edge, self.hi_edge, self.first, self.width, self.valid, fz]

    def load_compact(self, v: Sequence[Any]) -> None:
        """Inverse of :meth:`to_compact`."""
        self.lo_edge, self.hi_edge, self.first, self.width = (int(x) for x in v[:4])
        self.valid = bool(v[4])
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
    >>> from monitor.stats.confseq import HedgedConfidenceSequence
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
    :class:`monitor.stats.confseq.HedgedConfidenceSequence` with the member's rhos, so the
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
        self._set_window()

    def _set_window(self) -> None:
        width = self.log_wealth.shape[2]
        sl = slice(self.first - 1, self.first - 1 + width)
        self._win_grid = self._grid[sl]
        self._win_caps = self._caps[:, :, sl]
        self._win_scratch = (self._scratch[0][:, :, :width], self._scratch[1][:, :, :width])

    def update(self, human: float, judge: float, block_mean: float | None) -> None:
        """One validated round (losses already checked to be floats in [0, 1])."""
        if block_mean is None:
            q = [human] * len(self.rhos_list)
        else:
            q = [r * block_mean + human - r * judge for r in self.rhos_list]
        self.rounds += 1
        live = [m for m in self.members if m.valid]
        if not live:
            return
        t = self.rounds
        lw = self.log_wealth
        sa, sb = self._win_scratch
        if self._up is None:
            apply_wsr_bets(lw, q, t, self.log_threshold, self.bet.horizon, self._var0_l, self.dev,
                           self._win_grid, self._win_caps, (sa, sb))
        else:
            update_log_wealth(lw, np.array(q), self._win_grid, self._win_caps, None, self._up,
                              (sa, sb))
        self.total, self.dev = fold_wsr_sums(q, t, self._mu0_l, self.total, self.dev)
        for m in live:
            m.check(lw, self.first)
        self._shrink()

    def _shrink(self) -> None:
        live = [m for m in self.members if m.valid]
        if not live:
            return
        first = self.first
        last = first + self.log_wealth.shape[2] - 1
        new_first = min(m.first for m in live)
        new_last = max(m.first + m.width - 1 for m in live)
        if (new_first, new_last) != (first, last):
            keep = self.log_wealth[:, :, new_first - first : new_last - first + 1]
            self.log_wealth = np.ascontiguousarray(keep)
            self.first = new_first
            self._set_window()

    def to_state(self) -> dict[str, Any]:
        """Shared statistics, union window and members' bounds as plain JSON types."""
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
        self._set_window()
