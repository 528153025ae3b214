"""The comparison's one-sided e-process: the certificates' ``plugin_up`` rule on another bet grid.

A comparison's round on the unit scale (:mod:`.observation`) is a certificate round: human loss
``h`` in [0, 1], shift ``s`` in [-1, 1], observation ``h + rho s`` in ``[-rho, 1 + rho]``, level
``alpha = (margin + 1) / 2``. :class:`DifferenceEProcess` runs the certificates' default rule on
it, with their pure per-round functions (:func:`~monitor.stats.betting.plugin_round.step`, the
cells' round, and :func:`~monitor.stats.betting.plugin_round.reliance`, the plug-in reliance),
and one change: its universal portfolio's fixed bets (:func:`comparison_grid`).

Why another grid (``benchmarks/comparison.py``, margin 0.02, delta 0.05, judge agreement 0.9):
the certificates' grid spreads 75% of its prior over ``(0, c / max(alpha, 1 - alpha)]``, about
``(0, 1.86]`` here. On the unit scale the Kelly bet is ``2 gap / Var(d)``: a difference 0.02
from the margin with ``Var(d)`` around 0.08 (two arms failing 5% of the time) wants about 0.5,
and such slow decisions are where the prior's cost (log of one over the mass near the right bet)
is paid in the most labels, while bets above 1 decide within about a hundred rounds whatever the
prior. ``comparison_grid`` puts 75% of the mass on 8 cells of ``(0, 1]`` and 25% on a geometric
(ratio sqrt 2) extension up to the cap: equal versions at 0.05 decide in 1216 instead of 1490
audited examples (median; the clairvoyant constant bettor needs 1173), equal versions at 0.20
with correlated failures in 1700 instead of 2118, for 0-13% more on fast decisions (306 instead
of 286 for 0.12 against 0.05).

Examples
--------
>>> lam, w = comparison_grid(0.51, "certify", 0.95)
>>> [round(v, 4) for v in lam], round(sum(w), 12)
([0.0625, 0.1875, 0.3125, 0.4375, 0.5625, 0.6875, 0.8125, 0.9375, 1.4142, 1.9388], 1.0)
>>> ep = DifferenceEProcess(0.51, "certify", [0.0, 0.5, 1.0])
>>> for _ in range(400):
...     _ = ep.advance(0.5, 0.0)    # the arms always agree: difference 0 < margin 0.02
>>> ep.log_wealth > math.log(20), ep.rounds
(True, 400)
>>> DifferenceEProcess.from_state(ep.to_state()).to_state() == ep.to_state()
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

from monitor.stats.betting.bets import DEFAULT_CAP, Side
from monitor.stats.betting.plugin import bet_grid
from monitor.stats.betting.plugin_round import plugin_rho, reliance, step, sum_in_order
from monitor.stats.state_contract import check_header, restorer

__all__ = ["CELLS", "EXT_RATIO", "EXT_WEIGHT", "GRIDS", "LAM0", "DifferenceEProcess", "Grid",
           "comparison_grid", "grid_cells"]

_KIND = "certmon.DifferenceEProcess"
Grid = Literal["comparison", "certificate"]
GRIDS: tuple[Grid, ...] = ("comparison", "certificate")
CELLS = 8
LAM0 = 1.0
EXT_RATIO = math.sqrt(2.0)
EXT_WEIGHT = 0.25


def comparison_grid(alpha: float, side: Side, c: float) -> tuple[list[float], list[float]]:
    """Return fixed bets and prior weights: 8 midpoints of ``(0, 1]`` (75%), a tail (25%).

    The tail ``sqrt(2)^j``, ``j >= 1``, stops at the side's largest cap (``c / (1 - alpha)``
    certify, ``c / alpha`` violate; its last cell is that cap); each round clips every bet at
    its own cap ``c / (1 + rho - alpha)`` or ``c / (alpha + rho)``.

    Examples
    --------
    >>> lam, w = comparison_grid(0.51, "violate", 0.95)
    >>> len(lam), round(lam[-1], 4), round(sum(w[8:]), 12)
    (10, 1.8627, 0.25)
    """
    lam_max = c / (1.0 - alpha) if side == "certify" else c / alpha
    top = min(LAM0, lam_max)
    lin = [top * (k + 0.5) / CELLS for k in range(CELLS)]
    ext: list[float] = []
    v = top
    while v * (1.0 + 1e-12) < lam_max:
        v *= EXT_RATIO
        ext.append(min(v, lam_max))
    if not ext:
        return lin, [1.0 / CELLS] * CELLS
    return lin + ext, [(1.0 - EXT_WEIGHT) / CELLS] * CELLS + [EXT_WEIGHT / len(ext)] * len(ext)


def grid_cells(grid: Grid, alpha: float, side: Side, c: float) -> tuple[list[float], list[float]]:
    """Cells of a grid design: :func:`comparison_grid` or the certificates' ``bet_grid``.

    Examples
    --------
    >>> grid_cells("certificate", 0.51, "certify", 0.95) == bet_grid(0.51, "certify", 0.95)
    True
    """
    if grid == "comparison":
        return comparison_grid(alpha, side, c)
    if grid == "certificate":
        return bet_grid(alpha, side, c)
    raise ValueError(f"grid must be one of {GRIDS}, got {grid!r}")


class DifferenceEProcess:
    """One-sided e-process of a comparison on unit-scale rounds (plug-in reliance, portfolio).

    Parameters
    ----------
    alpha : float
        Level on the unit scale, ``(margin + 1) / 2``, in (0, 1).
    side : {"certify", "violate"}
        ``"certify"``: H0 mean > alpha (``non_inferior`` rejects it), factor
        ``1 - lam (q - alpha)``; ``"violate"``: H0 mean <= alpha (``inferior``), factor
        ``1 + lam (q - alpha)``.
    rhos : sequence of float
        Candidate reliances in [0, 1] of the plug-in rule; one value fixes the reliance.
    grid : {"comparison", "certificate"}
        Fixed bets of the portfolio (:func:`grid_cells`).
    c : float, optional
        Cap fraction in (0, 1); default the certificates' 0.95.

    Notes
    -----
    Guarantee: under H0 the wealth (the prior mixture of the cells' wealths) is a nonnegative
    supermartingale with initial value 1, so ``P(exists t: wealth_t >= 1/delta) <= delta``
    (Ville). Each cell bets ``min(lam_k, cap_t)``, ``cap_t = c / (1 + rho_t - alpha)`` (certify)
    or ``c / (alpha + rho_t)`` (violate), with ``rho_t`` chosen from earlier rounds only
    (:func:`~monitor.stats.betting.plugin_round.plugin_rho`), so every factor is at least
    ``1 - c > 0`` and ``E[h_t + rho_t s_t | past]`` is the round's mean. The argument is that of
    :class:`~monitor.stats.betting.plugin.PlugInEProcess`; only the fixed bets differ.
    """

    __slots__ = ("_alpha", "_bets", "_c", "_grid", "_lam", "_log_e", "_off", "_plug", "_prior",
                 "_ref", "_rho", "_rhos", "_rounds", "_sgn", "_side", "_sums", "_u")

    def __init__(self, alpha: float, side: Side, rhos: Sequence[float],
                 grid: Grid = "comparison", c: float | None = None) -> None:
        if side not in ("certify", "violate"):
            raise ValueError(f"side must be 'certify' or 'violate', got {side!r}")
        if not (isinstance(alpha, (int, float)) and 0.0 < alpha < 1.0):
            raise ValueError(f"alpha must satisfy 0 < alpha < 1, got {alpha!r}")
        cap = DEFAULT_CAP["plugin_up"] if c is None else c
        if not 0.0 < cap < 1.0:
            raise ValueError(f"c must satisfy 0 < c < 1, got {c!r}")
        rs = [float(v) for v in rhos]
        if not rs or not all(0.0 <= v <= 1.0 for v in rs):
            raise ValueError(f"rhos must be non-empty values in [0, 1], got {rs}")
        self._alpha, self._side, self._c, self._grid = float(alpha), side, float(cap), grid
        self._rhos = rs
        self._plug = len(rs) > 1
        self._sgn = 1.0 if side == "certify" else -1.0
        self._off = 1.0 - self._alpha if side == "certify" else self._alpha
        self._lam, self._prior = grid_cells(grid, self._alpha, side, self._c)
        self._u = list(self._prior)
        self._ref = 0.0
        self._rounds = 0
        self._sums = [0.0] * 5
        self._log_e = 0.0
        self._set_rho(0.0 if self._plug else rs[0])

    def _set_rho(self, rho: float) -> None:
        self._rho = rho
        cap = self._c / (self._off + rho)
        self._bets = [v if v < cap else cap for v in self._lam]

    @property
    def alpha(self) -> float:
        """Level on the unit scale."""
        return self._alpha

    @property
    def side(self) -> Side:
        """``"certify"`` or ``"violate"``."""
        return self._side

    @property
    def c(self) -> float:
        """Cap fraction."""
        return self._c

    @property
    def grid(self) -> Grid:
        """Grid design of the fixed bets."""
        return self._grid

    @property
    def rounds(self) -> int:
        """Rounds seen."""
        return self._rounds

    @property
    def rho(self) -> float:
        """Reliance of the next round (predictable)."""
        return self._rho

    @property
    def log_wealth(self) -> float:
        """Log of the mixture wealth (0 before the first round)."""
        return self._log_e

    @property
    def cells(self) -> tuple[list[float], list[float]]:
        """The fixed bets and their prior weights (copies)."""
        return list(self._lam), list(self._prior)

    def advance(self, human: float, shift: float) -> float:
        """One validated unit-scale round; returns the log wealth after it."""
        x = self._sgn * (self._alpha - (human + self._rho * shift))
        self._u, self._ref, self._log_e = step(self._u, self._bets, x, self._ref)
        self._rounds += 1
        if self._plug:
            r = reliance(self._sums, human, shift, self._rounds, self._alpha, self._c,
                         self._sgn > 0.0, self._rhos)
            if r != self._rho:
                self._set_rho(r)
        return self._log_e

    def config(self) -> tuple[float, str, list[float], str, float]:
        """Return ``(alpha, side, rhos, grid, c)``: what a state must match to be this one's."""
        return self._alpha, self._side, list(self._rhos), self._grid, self._c

    def to_state(self) -> dict[str, Any]:
        """JSON-serializable state (Python floats, exact)."""
        return {"kind": _KIND, "version": 1, "alpha": self._alpha, "side": self._side,
                "rhos": list(self._rhos), "grid": self._grid, "c": self._c,
                "rounds": self._rounds, "sums": list(self._sums), "ref": self._ref,
                "cells": list(self._u)}

    @classmethod
    @restorer("DifferenceEProcess")
    def from_state(cls, d: dict[str, Any]) -> DifferenceEProcess:
        """Rebuild from :meth:`to_state` output (bit-identical continuation)."""
        check_header(d, _KIND, 1, "DifferenceEProcess")
        ep = cls(d["alpha"], d["side"], d["rhos"], d["grid"], d["c"])
        u = [float(v) for v in d["cells"]]
        sums = [float(v) for v in d["sums"]]
        if len(u) != len(ep._u) or len(sums) != 5 or not all(v >= 0.0 for v in u) or not (
                sum(u) > 0.0) or int(d["rounds"]) < 0:
            raise ValueError("DifferenceEProcess state: bad cells, sums or rounds")
        ep._u, ep._sums, ep._ref, ep._rounds = u, sums, float(d["ref"]), int(d["rounds"])
        ep._log_e = 0.0 if ep._rounds == 0 else ep._ref + math.log(sum_in_order(u))
        if ep._plug:
            ep._set_rho(plugin_rho(ep._rounds, sums, ep._alpha, ep._c, ep._side, ep._rhos))
        return ep
