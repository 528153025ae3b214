"""Many independent copies of :class:`~monitor.stats.comparison.DifferenceEProcess` advanced
together (numpy).

For Monte Carlo tests and benchmarks; agrees with the online class up to floating-point rounding
(``tests/stats/comparison/test_comparison.py``).

Examples
--------
>>> b = DifferenceBatch(0.51, "certify", [0.0, 0.5, 1.0], reps=3)
>>> for _ in range(400):
...     b.advance(np.full(3, 0.5), np.zeros(3))
>>> bool((b.log_wealth > np.log(20)).all())
True
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from monitor.stats.betting.bets import DEFAULT_CAP, Side
from monitor.stats.betting.plugin_round import MIN_ROUNDS
from monitor.stats.comparison.eprocess import Grid, grid_cells

__all__ = ["DifferenceBatch"]

Array = NDArray[np.float64]


class DifferenceBatch:
    """``reps`` independent comparison e-processes of one side, one round at a time.

    Parameters are those of :class:`~.eprocess.DifferenceEProcess`, plus ``reps``.

    Notes
    -----
    Same guarantee and assumptions as :class:`~.eprocess.DifferenceEProcess`, for each stream
    separately: the reliance and bets of round ``t`` use rounds ``< t`` of that stream only.
    """

    def __init__(self, alpha: float, side: Side, rhos: Sequence[float], reps: int,
                 grid: Grid = "comparison", c: float | None = None) -> None:
        if not 0.0 < alpha < 1.0 or side not in ("certify", "violate") or reps < 1:
            raise ValueError(f"bad DifferenceBatch arguments: {alpha!r}, {side!r}, {reps!r}")
        self._alpha = float(alpha)
        self._c = DEFAULT_CAP["plugin_up"] if c is None else float(c)
        self._sgn = 1.0 if side == "certify" else -1.0
        self._off = 1.0 - self._alpha if side == "certify" else self._alpha
        self._grid = np.array([float(v) for v in rhos])
        self._plug = self._grid.size > 1
        lam, w = grid_cells(grid, self._alpha, side, self._c)
        self._lam = np.array(lam)[None, :]
        self._log_prior = np.log(np.array(w))[None, :]
        self._lw = np.zeros((reps, len(lam)))
        self._sums = np.zeros((5, reps))
        self._rho = np.full(reps, 0.0 if self._plug else float(self._grid[0]))
        self._rounds = 0

    @property
    def rho(self) -> Array:
        """Reliance of each stream for the next round, shape (reps,)."""
        return self._rho.copy()

    @property
    def bets(self) -> Array:
        """Each stream's cell bets for the next round, shape (reps, cells)."""
        out: Array = np.minimum(self._lam, (self._c / (self._off + self._rho))[:, None])
        return out

    @property
    def log_prior(self) -> Array:
        """Log prior weights of the cells, shape (1, cells)."""
        out: Array = self._log_prior.copy()
        return out

    @property
    def log_wealth(self) -> Array:
        """Mixture log wealth of each stream, shape (reps,)."""
        v = self._lw + self._log_prior
        m = v.max(axis=1)
        out: Array = m + np.log(np.exp(v - m[:, None]).sum(axis=1))
        return out

    def advance(self, human: Array, shift: Array) -> None:
        """One round: unit-scale human and shift values, shape (reps,)."""
        x = self._sgn * (self._alpha - (human + self._rho * shift))
        self._lw += np.log1p(self.bets * x[:, None])
        self._rounds += 1
        self._sums += np.stack([human, shift, human * human, human * shift, shift * shift])
        if self._plug and self._rounds >= MIN_ROUNDS:
            self._rho = self._plugin_rho()

    def _plugin_rho(self) -> Array:
        # plugin_rho of monitor.stats.betting.plugin_round, vectorized over the streams
        t = self._rounds
        sl, sd, sll, sld, sdd = self._sums
        ml, md = sl / t, sd / t
        vl = sll / t - ml * ml
        cov = sld / t - ml * md
        vd = sdd / t - md * md
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
        return out
