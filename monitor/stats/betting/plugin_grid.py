"""The fixed bet cells of a ``plugin_up`` e-process (:mod:`.plugin`): grid, checks, merging.

Examples
--------
>>> lam, w = bet_grid(0.3, "certify", 0.95)
>>> len(lam), round(sum(w), 12)
(8, 1.0)

Notes
-----
Pure functions, no state; any positive bets clipped at the round's cap keep the e-process
valid (see :class:`~.plugin.PlugInEProcess`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from monitor.stats.betting.bets import Side

__all__ = ["CELLS", "EXT_RATIO", "EXT_WEIGHT", "bet_grid", "merge_clipped", "own_cells"]

CELLS = 8
EXT_RATIO = math.sqrt(2.0)
EXT_WEIGHT = 0.25


def bet_grid(alpha: float, side: Side, c: float) -> tuple[list[float], list[float]]:
    """Return the fixed bets ``lam_k`` and their prior weights for one side.

    ``CELLS = 8`` midpoints of ``(0, lam0]`` with ``lam0 = c / max(alpha, 1 - alpha)`` share
    75% of the mass; a geometric extension ``lam0 sqrt(2)^j`` up to the side's largest cap
    (``c / (1 - alpha)`` certify, ``c / alpha`` violate) shares 25% (none if ``lam0`` already
    reaches it).

    Examples
    --------
    >>> lam, w = bet_grid(0.5, "certify", 0.95)
    >>> [round(v, 5) for v in lam[:2]], len(lam), sum(w)
    ([0.11875, 0.35625], 8, 1.0)
    >>> lam, w = bet_grid(0.12, "violate", 0.95)
    >>> # the last cell passes the rho = 0 cap 0.95 / 0.12; each round clips it at its cap
    >>> len(lam), round(sum(w), 12), round(sum(w[8:]), 12), round(lam[-1] * 0.12, 3)
    (14, 1.0, 0.25, 1.036)
    """
    lam0 = c / max(alpha, 1.0 - alpha)
    lam_max = c / (1.0 - alpha) if side == "certify" else c / alpha
    lin = [lam0 * (k + 0.5) / CELLS for k in range(CELLS)]
    n_ext = max(0, math.ceil(math.log(lam_max / lam0) / math.log(EXT_RATIO) - 1e-9))
    if n_ext == 0:
        return lin, [1.0 / CELLS] * CELLS
    ext = [lam0 * EXT_RATIO ** j for j in range(1, n_ext + 1)]
    w = [(1.0 - EXT_WEIGHT) / CELLS] * CELLS + [EXT_WEIGHT / n_ext] * n_ext
    return lin + ext, w


def own_cells(cells: tuple[Sequence[float], Sequence[float]]) -> tuple[list[float],
                                                                         list[float]]:
    """Check and copy fixed bets and prior weights given instead of :func:`bet_grid`'s.

    Examples
    --------
    >>> own_cells(([0.5, 1.0], [0.25, 0.75]))
    ([0.5, 1.0], [0.25, 0.75])
    """
    lam, w = [float(v) for v in cells[0]], [float(v) for v in cells[1]]
    if not lam or len(lam) != len(w) or not all(v > 0.0 for v in lam + w) or not (
            abs(sum(w) - 1.0) < 1e-9):
        raise ValueError("cells must be positive bets and positive weights summing to 1")
    return lam, w


def merge_clipped(lam: list[float], w: list[float], cap: float) -> tuple[list[float],
                                                                         list[float]]:
    """Merge the cells a fixed ``cap`` clips into one cell at ``cap`` (exact: equal bets).

    Examples
    --------
    >>> merge_clipped([0.5, 1.0, 1.5], [0.25, 0.25, 0.5], 0.8)
    ([0.5, 0.8], [0.25, 0.75])
    """
    keep = [v for v in lam if v < cap]
    lam, w = [*keep, cap], [*w[: len(keep)], sum(w[len(keep):])]
    if w[-1] == 0.0:
        lam, w = lam[:-1], w[:-1]
    return lam, w
