"""The comparison's one-sided e-process: the certificates' ``plugin_up`` rule on another bet grid.

A comparison's round on the unit scale (:mod:`.observation`) is a certificate round: human loss
``h`` in [0, 1], shift ``s`` in [-1, 1], observation ``h + rho s`` in ``[-rho, 1 + rho]``, level
``alpha = (margin + 1) / 2``. :class:`DifferenceEProcess` is the certificates' default rule,
:class:`~monitor.stats.betting.plugin.PlugInEProcess` (plug-in reliance, universal portfolio over
fixed bets), run on it without the certificates' judge prior and with a bet grid for
comparisons (:func:`grid_cells`); it keeps its own state format.

Why another grid (``benchmarks/comparison.py``, margin 0.02, delta 0.05, judge agreement 0.9):
the Kelly bet on the unit scale is about ``gap / Var(h + rho s)``, 0.3-0.9 for the slow
decisions that matter (a difference 0.02 from the margin, ``Var`` 0.015-0.03) and up to the cap
(about 1.4-1.9) for fast ones. A mixture's cost against its best cell is about
``-log(prior mass within 1 / sqrt(t Var) of the Kelly bet)``: at a thousand rounds that width is
about 0.2, and each nat of cost is ~400 labels for equal versions at 0.05. The default
``"lognormal"`` grid puts 16 equal cells on ``(0, cap]`` weighted by a log-normal density
(median :data:`LN_MEDIAN` 0.6, log-sd :data:`LN_SIGMA` 0.6): 77% of the mass on 0.3-1.2, 21% on
1.2-1.9. Measured against the previous ``"comparison"`` grid (75% on 8 cells of ``(0, 1]``, 25%
on a sqrt(2) tail) and the certificates' ``"certificate"`` grid in ``benchmarks/comparison.py``;
the study (median labels over 200 runs, ratio to the simulated clairvoyant constant bettor):
1.23 -> 1.14 for equal versions at 0.05, 1.69 -> 1.53 for 0.02 against 0.05, 1.34 -> 1.18 for
0.12 against 0.05; log-spaced cells, narrower or wider log-normals and extra mass at the cap
were each worse somewhere.

Not adopted, measured (``benchmarks/comparison_bettors.py``, 200 runs of 2000, median audited
examples; grid: 1062 for equal versions at 0.05, 155 for 0.02 against 0.05): a predictable
plug-in Kelly bet (aGRAPA, at the plug-in reliance) decides the equal versions in fewer than
half the runs (the first rounds show no failure, so the plug-in variance is about 0 and the bet
sits at its cap until a failure costs most of the wealth), though 138 on the fast case; with a
variance prior or a James-Stein shrink it is 1380-1870 (198-256 on the fast case); the average
of the grid's and aGRAPA's wealths 1324 and 144 (the average costs up to ``log 2`` nats of the
``log(1/delta) = 3``); ONS 1770 and 474. A warm-up of the reliance (300 pseudo-rounds of
reliance 0.3) saves 3-6% with a judge of agreement 0.9 at risks 0.02-0.12 and costs 5-10% at
risks 0.2-0.3 or agreement 0.6. Cells scaled by the plug-in variance, ``e_k / (v_t + e_k^2)``
with a log-normal prior on the edge ``e_k`` around ``margin / 2`` (the edge of equal
versions), decide equal versions sooner (1016, 83% within 2000; 1490 against 1823 at 0.2 with
correlated failures; 1124 against 1334 at agreement 0.7) but everything else later (204
against 155 for 0.02 against 0.05, 358 against 254 for 0.12 against 0.05); half of each prior
sits in between (1052, 176). A second study (same file) gave those cells only the
``non_inferior`` side (the ``inferior`` side keeps the grid) with 70-85% of the prior, the
rest on the grid or its cells >= 1.4, a narrower edge prior or a second one around the edge of
fast decisions, and varied the variance shrinkage: at 1000 runs, every variant with equal
versions decided within 2000 in >= 82% of runs (grid 76%) is 10-24% slower on 0.02 against
0.05 (grid 177) and at least 15% on 0.03 against 0.05 or with a judge of agreement 0.6; the
prior mass that equal versions need at the edge ``margin / 2`` is taken from faster decisions.

Where the rest goes (``benchmarks/comparison_frontier.py``, the benchmark's 400 runs): with the
clairvoyant's reliance the grid alone decides equal versions within 2000 in 77.0% of runs and
0.02 against 0.05 in 1.42x the clairvoyant's median (clairvoyant: 85.8%, 116); with the
clairvoyant's bet the plug-in reliance gives 85.8% and 1.16x. The prior over bets is what
misses both targets; the variance-minimising reliance, per-cell reliances (no cell clipped), a
Kelly upper-confidence clip, a bimodal prior and retiring the large bets after 300 rounds stay
on the same frontier (75.7-78.0%, 1.47-1.49x), and the observation is within 2% of the best
available (one reliance per arm; every example by inverse propensity).

The certificates' switch cell (:mod:`~monitor.stats.betting.plugin_switch`; comparisons pass
their own cells and so do not get it), measured and not adopted
(``benchmarks/comparison_switch.py``, the benchmark's 400 runs): it bets the cap only once a
lower bound of the plug-in Kelly bet reaches the cap, and the fast case's Kelly bet is *at*
the cap (1.46 against 1.42), not beyond it, so that happens by round 1000 in 2% of its runs
(decision: round 173); until then the switch follows the fixed cells and the mixture is the
default's, identically on every row (weights 0.25-0.5). A lower bound at 0-1 standard errors
or at 0.6-0.8 of the cap, a switch following only the cells >= 1 or a sharper posterior, the
log-normal re-tuned (median 0.5, log-sd 0.4-0.5) with the switch present, and plug-in Kelly
bets in the switch stay on the frontier (0.690-0.795, 1.36-1.78x). A switch cell betting the
clairvoyant's constant bet from the first round (a bound, not a bettor) would meet both at
half the mass (0.812, 1.28x): learning that bet in ~170 rounds is what costs.

Examples
--------
>>> lam, w = lognormal_grid(0.51, "certify", 0.95)
>>> len(lam), round(lam[-1], 4), round(sum(w), 12), round(max(w), 3)
(16, 1.8782, 1.0, 0.121)
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

from monitor.stats.betting.bets import DEFAULT_CAP, BetConfig, Side
from monitor.stats.betting.plugin import PlugInEProcess, bet_grid
from monitor.stats.state_contract import check_header, restorer

__all__ = ["CELLS", "EXT_RATIO", "EXT_WEIGHT", "GRIDS", "LAM0", "LN_CELLS", "LN_MEDIAN",
           "LN_SIGMA", "DifferenceEProcess", "Grid", "comparison_grid", "grid_cells",
           "lognormal_grid"]

_KIND = "certmon.DifferenceEProcess"
Grid = Literal["lognormal", "comparison", "certificate"]
GRIDS: tuple[Grid, ...] = ("lognormal", "comparison", "certificate")
LN_CELLS = 16
LN_MEDIAN = 0.6
LN_SIGMA = 0.6
CELLS = 8
LAM0 = 1.0
EXT_RATIO = math.sqrt(2.0)
EXT_WEIGHT = 0.25


def lognormal_grid(alpha: float, side: Side, c: float) -> tuple[list[float], list[float]]:
    """Return the default fixed bets and weights: 16 midpoints of ``(0, cap]``, log-normal weights.

    ``cap`` is the side's largest cap (``c / (1 - alpha)`` certify, ``c / alpha`` violate); the
    weight of a cell ``lam`` is proportional to ``exp(-(log(lam / 0.6) / 0.6)^2 / 2)``. Each
    round clips every bet at its own cap ``c / (1 + rho - alpha)`` or ``c / (alpha + rho)``.

    Examples
    --------
    >>> lam, w = lognormal_grid(0.51, "violate", 0.95)
    >>> round(lam[0], 4), round(lam[-1], 4), round(sum(w[:8]), 3)
    (0.0582, 1.8045, 0.614)
    """
    top = c / (1.0 - alpha) if side == "certify" else c / alpha
    lam = [top * (k + 0.5) / LN_CELLS for k in range(LN_CELLS)]
    raw = [math.exp(-0.5 * (math.log(v / LN_MEDIAN) / LN_SIGMA) ** 2) for v in lam]
    tot = math.fsum(raw)
    return lam, [v / tot for v in raw]


def comparison_grid(alpha: float, side: Side, c: float) -> tuple[list[float], list[float]]:
    """Return the previous default grid ``"comparison"``: 8 cells of ``(0, 1]`` (75%), a tail.

    The tail carries 25% of the mass.

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
    """Cells of a grid design: :func:`lognormal_grid`, :func:`comparison_grid` or ``bet_grid``.

    Examples
    --------
    >>> grid_cells("certificate", 0.51, "certify", 0.95) == bet_grid(0.51, "certify", 0.95)
    True
    """
    if grid == "lognormal":
        return lognormal_grid(alpha, side, c)
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
    grid : {"lognormal", "comparison", "certificate"}
        Fixed bets of the portfolio (:func:`grid_cells`).
    c : float, optional
        Cap fraction in (0, 1); default the certificates' 0.95.

    Notes
    -----
    Guarantee: under H0 the wealth (the prior mixture of the cells' wealths) is a nonnegative
    supermartingale with initial value 1, so ``P(exists t: wealth_t >= 1/delta) <= delta``
    (Ville). It is a :class:`~monitor.stats.betting.plugin.PlugInEProcess` (whose Notes give
    the argument) with other fixed bets and without the judge prior: each cell bets
    ``min(lam_k, cap_t)``, ``cap_t = c / (1 + rho_t - alpha)`` (certify) or
    ``c / (alpha + rho_t)`` (violate), with ``rho_t`` chosen from earlier rounds only, so every
    factor is at least ``1 - c > 0`` and ``E[h_t + rho_t s_t | past]`` is the round's mean.
    """

    __slots__ = ("_ep", "_grid")

    def __init__(self, alpha: float, side: Side, rhos: Sequence[float],
                 grid: Grid = "lognormal", c: float | None = None) -> None:
        if side not in ("certify", "violate"):
            raise ValueError(f"side must be 'certify' or 'violate', got {side!r}")
        if not (isinstance(alpha, (int, float)) and 0.0 < alpha < 1.0):
            raise ValueError(f"alpha must satisfy 0 < alpha < 1, got {alpha!r}")
        cap = DEFAULT_CAP["plugin_up"] if c is None else c
        if not 0.0 < cap < 1.0:
            raise ValueError(f"c must satisfy 0 < c < 1, got {c!r}")
        self._grid: Grid = grid
        # delta is the owner's (PairedComparison's thresholds); the bets do not depend on it
        self._ep = PlugInEProcess(float(alpha), 0.5, side, rhos, BetConfig(c=float(cap)),
                                  cells=grid_cells(grid, float(alpha), side, float(cap)),
                                  judge_prior=False)

    @property
    def alpha(self) -> float:
        """Level on the unit scale."""
        return self._ep.alpha

    @property
    def side(self) -> Side:
        """``"certify"`` or ``"violate"``."""
        return self._ep.side

    @property
    def c(self) -> float:
        """Cap fraction."""
        return self._ep.bet.c

    @property
    def grid(self) -> Grid:
        """Grid design of the fixed bets."""
        return self._grid

    @property
    def rounds(self) -> int:
        """Rounds seen."""
        return self._ep.rounds

    @property
    def rho(self) -> float:
        """Reliance of the next round (predictable)."""
        return self._ep.rho

    @property
    def log_wealth(self) -> float:
        """Log of the mixture wealth (0 before the first round)."""
        return self._ep.log_wealth

    @property
    def cells(self) -> tuple[list[float], list[float]]:
        """The fixed bets and their prior weights (copies)."""
        return grid_cells(self._grid, self.alpha, self.side, self.c)

    def advance(self, human: float, shift: float) -> float:
        """One validated unit-scale round; returns the log wealth after it."""
        return self._ep.advance(human, shift)

    def config(self) -> tuple[float, str, list[float], str, float]:
        """Return ``(alpha, side, rhos, grid, c)``: what a state must match to be this one's."""
        return self.alpha, self.side, self._ep.rhos, self._grid, self.c

    def to_state(self) -> dict[str, Any]:
        """JSON-serializable state (Python floats, exact)."""
        d = self._ep.to_state()
        return {"kind": _KIND, "version": 1, "alpha": self.alpha, "side": self.side,
                "rhos": self._ep.rhos, "grid": self._grid, "c": self.c,
                "rounds": d["rounds"], "sums": d["sums"], "ref": d["ref"], "cells": d["cells"]}

    @classmethod
    @restorer("DifferenceEProcess")
    def from_state(cls, d: dict[str, Any]) -> DifferenceEProcess:
        """Rebuild from :meth:`to_state` output (bit-identical continuation)."""
        check_header(d, _KIND, 1, "DifferenceEProcess")
        ep = cls(d["alpha"], d["side"], d["rhos"], d["grid"], d["c"])
        inner = ep._ep.to_state()
        rounds = int(d["rounds"])
        if rounds < 0:
            raise ValueError("DifferenceEProcess state: bad rounds")
        inner.update(rounds=rounds, learned=rounds, since=0, ref=float(d["ref"]),
                     sums=list(d["sums"]), cells=list(d["cells"]))
        ep._ep.load_state(inner)
        return ep
