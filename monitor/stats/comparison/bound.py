"""Anytime one-sided bounds on a difference of risks that agree with the test's verdict.

The bound inverts the test's own bets. A one-sided test of H0: ``mu >= m`` (certify side, unit
scale) multiplies its wealth by ``1 + lam_t (m - q_t)`` with predictable bets ``lam_t`` (cells of
the test's universal portfolio, capped for the test's level ``alpha``). The same bets give, for
every ``m`` on a grid, a wealth ``E_t(m)``; it is non-decreasing in ``m`` (each factor is), so
the rejected set ``{m : E_t(m) >= 1/delta}`` is an upper ray and its smallest grid point is an
upper bound on ``mu``. The violate side gives a lower bound the same way.

Examples
--------
>>> bd = DifferenceBound(0.51, "certify", 0.05, 0.95)
>>> for _ in range(600):
...     bd.advance(0.5, 0.0, 0.0)          # the two arms always agree: difference 0
>>> bd.bound < 0.02                         # an upper bound on the difference, below the margin
True
>>> DifferenceBound.from_state(bd.to_state()).to_state() == bd.to_state()
True
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from monitor.stats.betting.bets import Side
from monitor.stats.comparison.eprocess import Grid, grid_cells
from monitor.stats.state_contract import check_header, restorer

__all__ = ["STEP", "WINDOW", "DifferenceBound"]

_KIND = "certmon.DifferenceBound"
STEP = 0.005  # grid step on the difference scale
WINDOW = 0.1  # grid half-width around the margin on the difference scale
FloatArray = npt.NDArray[np.float64]


class DifferenceBound:
    """Anytime upper (``"certify"``) or lower (``"violate"``) bound on ``R_c - R_b``.

    Parameters
    ----------
    alpha : float
        The test's level on the unit scale, ``(margin + 1) / 2``.
    side : {"certify", "violate"}
        ``"certify"``: upper bound (the side of ``non_inferior``); ``"violate"``: lower bound
        (the side of ``inferior``).
    delta : float
        Error level in (0, 1).
    c : float
        The test's cap fraction (its bets are reused, capped as the test caps them).
    grid : {"lognormal", "comparison", "certificate"}
        The test's bet grid (:func:`~.eprocess.grid_cells`).

    Notes
    -----
    Guarantee: ``P(exists t: R_c - R_b >= bound_t) <= delta`` (certify) and
    ``P(exists t: R_c - R_b <= bound_t) <= delta`` (violate), under the test's assumptions
    (each round's difference observation has conditional mean ``R_c - R_b``). For a fixed grid
    point ``m`` the wealth is a product of factors with predictable, non-negative bets, so it is
    a nonnegative supermartingale under ``mu = m`` provided no factor can be negative: the bets
    are capped for ``alpha`` (``c / (1 + rho - alpha)``), which keeps the certify factor
    ``>= 0`` for ``m >= 1 - (1 - alpha) / c`` and the violate factor for ``m <= alpha / c``; the
    grid is restricted to those points (on the difference scale: above
    ``1 - (1 - margin) / c`` and below ``(1 + margin) / c - 1``) and to ``margin +/- 0.1``. By
    monotonicity in ``m``, ``mu >= bound_t`` implies ``E_t(mu) >= 1/delta`` (Ville). The bound is
    the running minimum (maximum), ``+inf`` (``-inf``) until a grid point is rejected; on a
    ``non_inferior`` (``inferior``) verdict the owner reports ``min(bound, margin)``
    (``max(bound, margin)``): the grid holds the margin itself, whose wealth is the test's up to
    rounding.
    """

    __slots__ = ("_alpha", "_bound", "_c", "_cells", "_delta", "_grid", "_lam", "_log_thr",
                 "_log_w",
                 "_points", "_sgn", "_side")

    def __init__(self, alpha: float, side: Side, delta: float, c: float,
                 grid: Grid = "lognormal") -> None:
        if side not in ("certify", "violate"):
            raise ValueError(f"side must be 'certify' or 'violate', got {side!r}")
        if not (0.0 < alpha < 1.0 and 0.0 < delta < 1.0 and 0.0 < c < 1.0):
            raise ValueError(f"bad DifferenceBound arguments: {alpha!r}, {delta!r}, {c!r}")
        self._alpha, self._side, self._delta, self._c = float(alpha), side, float(delta), c
        self._sgn = 1.0 if side == "certify" else -1.0
        self._grid: Grid = grid
        lam, w = grid_cells(grid, self._alpha, side, c)
        self._lam = np.array(lam)
        self._log_w = np.log(np.array(w))
        self._log_thr = -math.log(self._delta)
        step, half = STEP / 2.0, WINDOW / 2.0  # unit scale
        k = np.arange(-round(half / step), round(half / step) + 1)
        pts = self._alpha + k * step
        if side == "certify":
            pts = pts[pts > 1.0 - (1.0 - self._alpha) / c + 1e-9]
        else:
            pts = pts[pts < self._alpha / c - 1e-9]
        self._points: FloatArray = np.asarray(pts[(pts > 0.0) & (pts < 1.0)], dtype=np.float64)
        self._cells: FloatArray = np.zeros((self._points.size, self._lam.size))
        self._bound = math.inf if side == "certify" else -math.inf

    @property
    def side(self) -> Side:
        """``"certify"`` (upper bound) or ``"violate"`` (lower bound)."""
        return self._side

    @property
    def bound(self) -> float:
        """The bound on the difference scale (``+inf`` / ``-inf`` before any rejection)."""
        return self._bound

    @property
    def points(self) -> list[float]:
        """Grid points still tracked, difference scale."""
        return [2.0 * float(v) - 1.0 for v in self._points]

    def advance(self, human: float, shift: float, rho: float) -> None:
        """One round on the unit scale with the test's reliance ``rho`` for it (predictable)."""
        if self._points.size == 0:
            return
        off = 1.0 - self._alpha if self._side == "certify" else self._alpha
        bets = np.minimum(self._lam, self._c / (off + rho))
        x = self._sgn * (self._points - (human + rho * shift))
        self._cells += np.log1p(bets[None, :] * x[:, None])
        v = self._cells + self._log_w[None, :]
        m = v.max(axis=1)
        mix = m + np.log(np.exp(v - m[:, None]).sum(axis=1))
        rej = mix >= self._log_thr
        if rej.any():
            # upper bound: smallest rejected point; points at or past it are dropped
            if self._side == "certify":
                j = int(np.argmax(rej))
                self._bound = min(self._bound, 2.0 * float(self._points[j]) - 1.0)
            else:
                j = int(self._points.size - 1 - np.argmax(rej[::-1]))
                self._bound = max(self._bound, 2.0 * float(self._points[j]) - 1.0)
            keep = ~rej
            self._points, self._cells = self._points[keep], self._cells[keep]

    def to_state(self) -> dict[str, Any]:
        """JSON-serializable state (Python floats; infinite bounds as None)."""
        return {"kind": _KIND, "version": 1, "alpha": self._alpha, "side": self._side,
                "delta": self._delta, "c": self._c, "grid": self._grid,
                "bound": None if math.isinf(self._bound) else self._bound,
                "points": [float(v) for v in self._points],
                "cells": [[float(v) for v in row] for row in self._cells]}

    @classmethod
    @restorer("DifferenceBound")
    def from_state(cls, d: dict[str, Any]) -> DifferenceBound:
        """Rebuild from :meth:`to_state` output (kind and version checked)."""
        check_header(d, _KIND, 1, "DifferenceBound")
        b = cls(float(d["alpha"]), d["side"], float(d["delta"]), float(d["c"]), d["grid"])
        pts = np.array([float(v) for v in d["points"]], dtype=np.float64)
        cells = np.array(d["cells"], dtype=np.float64).reshape(pts.size, b._lam.size)
        if not np.all(np.isfinite(cells)) or not np.all(np.isin(pts, b._points)):
            raise ValueError("DifferenceBound state: bad points or cells")
        b._points, b._cells = pts, cells
        if d["bound"] is not None:
            b._bound = float(d["bound"])
        return b
