"""Many independent copies of the ``plugin_up`` e-process advanced together (numpy).

For Monte Carlo checks and benchmarks: :class:`PlugInBatch` runs ``reps`` independent streams
with the formulas of :class:`~monitor.stats.betting.plugin.PlugInEProcess`, vectorized over the
streams, and agrees with it up to floating-point rounding (checked by the tests). The
comparisons' batch (:class:`tests.support.comparison_batch.DifferenceBatch`) is this class on their
grid.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from monitor.stats.betting.bets import BetConfig, Side
from monitor.stats.betting.plugin import bet_grid, own_cells
from monitor.stats.betting.plugin_round import AGREE_RATIO, MIN_ROUNDS
from monitor.stats.betting.plugin_switch import N0, Z, with_switch

__all__ = ["PlugInBatch"]

Array = NDArray[np.float64]


class PlugInBatch:
    """``reps`` independent ``plugin_up`` e-processes of one side, one round at a time.

    Parameters
    ----------
    alpha : float
        Risk level in (0, 1).
    side : {"certify", "violate"}
        Side of every copy.
    rhos : sequence of float
        One value: fixed reliance; several: plug-in candidates (as for ``PlugInEProcess``).
    bet : BetConfig
        ``rule="plugin_up"``; ``bet.c`` is the cap fraction.
    reps : int
        Number of independent streams.
    judge_prior : bool or None
        ``plugin_rho``'s judge prior; None (default): as ``PlugInEProcess`` (on the certify side
        of a plug-in reliance). False: the plain plug-in (no judge prior), for comparisons.
    start : float or None
        A study variant, not the library's rule: the plug-in reliance is ``start``
        from the first round and while the human losses have not varied. None: no such start.
    cells : pair of sequences of float, optional
        Fixed bets and prior weights instead of ``bet_grid``'s (as for ``PlugInEProcess``).

    The switch cell (``bet.cap_switch``, a plug-in reliance on the default cells) is kept as
    ``PlugInEProcess`` keeps it (:mod:`monitor.stats.betting.plugin_switch`), last.

    Examples
    --------
    >>> b = PlugInBatch(0.3, "certify", [0.0, 0.5, 1.0], BetConfig(), reps=4)
    >>> for _ in range(40):
    ...     b.advance(np.zeros(4), np.zeros(4))
    >>> bool((b.log_wealth > np.log(10)).all()), b.rho.tolist()
    (True, [0.0, 0.0, 0.0, 0.0])

    Notes
    -----
    Same guarantee and assumptions as
    :class:`~monitor.stats.betting.plugin.PlugInEProcess`, for each stream separately: the
    reliance and bets of round ``t`` use rounds ``< t`` of the same stream only.
    """

    def __init__(self, alpha: float, side: Side, rhos: Sequence[float], bet: BetConfig,
                 reps: int, judge_prior: bool | None = None,
                 start: float | None = None,
                 cells: tuple[Sequence[float], Sequence[float]] | None = None) -> None:
        if bet.rule != "plugin_up":
            raise ValueError(f"PlugInBatch needs rule 'plugin_up', got {bet.rule!r}")
        if not 0.0 < alpha < 1.0 or side not in ("certify", "violate") or reps < 1:
            raise ValueError(f"bad PlugInBatch arguments: {alpha!r}, {side!r}, {reps!r}")
        self._alpha = float(alpha)
        self._c = bet.c
        self._side: Side = side
        self._sgn = 1.0 if side == "certify" else -1.0
        self._off = 1.0 - self._alpha if side == "certify" else self._alpha
        self._grid = np.array([float(v) for v in rhos])
        self._plug = self._grid.size > 1
        lam, w = bet_grid(self._alpha, side, self._c) if cells is None else own_cells(cells)
        self._sw = self._plug and cells is None and bet.cap_switch
        if self._sw:
            w = with_switch(w)
        self._lam = np.array(lam)[None, :]
        self._log_prior = np.log(np.array(w))[None, :]
        self._lw = np.zeros((reps, len(w)))
        self._sums = np.zeros((5, reps))
        # the study variant's start value; the judge prior (as PlugInEProcess by default)
        self._start = float(start) if self._plug and start is not None else None
        self._jp = (side == "certify" if judge_prior is None else judge_prior) and self._plug
        first = float(self._grid[0]) if not self._plug else (self._start or 0.0)
        self._rho = np.full(reps, first)
        self._rounds = 0

    @property
    def rounds(self) -> int:
        """Rounds seen."""
        return self._rounds

    @property
    def rho(self) -> Array:
        """Reliance of each stream for the next round, shape (reps,)."""
        return self._rho.copy()

    @property
    def bets(self) -> Array:
        """Each stream's cell bets for the next round, shape (reps, cells)."""
        cap = self._c / (self._off + self._rho)
        out: Array = np.minimum(self._lam, cap[:, None])
        if self._sw:  # the switch cell: the cap when sure, else the fixed cells' mixture's bet
            v = self._lw[:, :-1] + self._log_prior[:, :-1]
            u = np.exp(v - v.max(axis=1, keepdims=True))
            follow = (u * out).sum(axis=1) / u.sum(axis=1)
            out = np.concatenate([out, np.where(self._sure(cap), cap, follow)[:, None]], axis=1)
        return out

    def _sure(self, cap: Array) -> Array:
        t = self._rounds
        if t < 2:
            return np.zeros(self._rho.shape, dtype=bool)
        sl, sd, sll, sld, sdd = self._sums / t
        r = self._rho
        e = self._sgn * (self._alpha - (sl + r * sd))
        v = np.maximum((sll - sl * sl) + 2.0 * r * (sld - sl * sd) + r * r * (sdd - sd * sd), 0.0)
        v = (v * t + N0 * 0.25) / (t + N0)
        lo = e - Z * np.sqrt(v / t)
        out: Array = (lo > 0.0) & (lo >= cap * (v + e * e))
        return out

    @property
    def log_prior(self) -> Array:
        """Log prior weights of the cells, shape (1, cells)."""
        out: Array = self._log_prior.copy()
        return out

    @property
    def max_cell_log_wealth(self) -> Array:
        """Largest bet-cell log wealth of each stream (an upper bound of the mixture)."""
        out: Array = self._lw.max(axis=1)
        return out

    @property
    def log_wealth(self) -> Array:
        """Mixture log wealth of each stream, shape (reps,)."""
        v = self._lw + self._log_prior
        m = v.max(axis=1)
        out: Array = m + np.log(np.exp(v - m[:, None]).sum(axis=1))
        return out

    def advance(self, human: Array, shift: Array) -> None:
        """One round: human losses and ``b - f`` (0 for empty blocks), shape (reps,)."""
        x = self._sgn * (self._alpha - (human + self._rho * shift))
        self._lw += np.log1p(self.bets * x[:, None])
        self._rounds += 1
        self._sums += np.stack([human, shift, human * human, human * shift, shift * shift])
        if self._plug and self._rounds >= MIN_ROUNDS:
            self._rho = self._plugin_rho()

    def _plugin_rho(self) -> Array:
        t = self._rounds
        sl, sd, sll, sld, sdd = self._sums
        ml, md = sl / t, sd / t
        vl = sll / t - ml * ml
        cov = sld / t - ml * md
        vd = sdd / t - md * md
        if self._jp:
            agree = (vl <= 1e-12) & (ml <= 1e-12) & (sdd <= AGREE_RATIO * sd)
            p = np.clip(md, 0.0, 1.0)
            vl = np.where(agree, p * (1.0 - p), vl)
            cov = np.where(agree, -vl, cov)
        rho0 = np.clip(-cov / (vd + 1e-12), 0.0, 1.0)
        e = self._sgn * (self._alpha - (ml + rho0 * md))
        r = self._grid[None, :]
        var = np.maximum(vl[:, None] + 2.0 * r * cov[:, None] + r * r * vd[:, None], 0.0)
        m2 = var + (e * e)[:, None]
        lam = np.minimum(e[:, None] / np.maximum(m2, 1e-12), self._c / (self._off + r))
        g = lam * e[:, None] - 0.5 * lam * lam * m2
        best = np.argmax(g, axis=1)
        ok = (e > 0.0) & (g[np.arange(g.shape[0]), best] > 0.0)
        out: Array = np.where(ok, self._grid[best], rho0)
        if self._start is not None:
            out = np.where(vl <= 1e-12, self._start, out)
        return out

