"""Many independent copies of :class:`~monitor.stats.comparison.DifferenceEProcess` advanced
together (numpy).

For Monte Carlo tests and benchmarks: the certificates' vectorized ``plugin_up`` e-process
(:class:`~tests.support.plugin_batch.PlugInBatch`) on a comparison's grid, without the
judge prior; it agrees with the online class up to floating-point rounding
(``tests/stats/comparison/test_comparison.py``).

Examples
--------
>>> import numpy as np
>>> b = DifferenceBatch(0.51, "certify", [0.0, 0.5, 1.0], reps=3)
>>> for _ in range(400):
...     b.advance(np.full(3, 0.5), np.zeros(3))
>>> bool((b.log_wealth > np.log(20)).all())
True
"""

from __future__ import annotations

from collections.abc import Sequence

from monitor.stats.betting.bets import DEFAULT_CAP, BetConfig, Side
from monitor.stats.comparison.eprocess import Grid, grid_cells
from tests.support.plugin_batch import PlugInBatch

__all__ = ["DifferenceBatch"]


class DifferenceBatch(PlugInBatch):
    """``reps`` independent comparison e-processes of one side, one round at a time.

    Parameters are those of :class:`~.eprocess.DifferenceEProcess`, plus ``reps``.

    Notes
    -----
    Same guarantee and assumptions as :class:`~.eprocess.DifferenceEProcess`, for each stream
    separately: the reliance and bets of round ``t`` use rounds ``< t`` of that stream only.
    """

    def __init__(self, alpha: float, side: Side, rhos: Sequence[float], reps: int,
                 grid: Grid = "lognormal", c: float | None = None) -> None:
        cap = DEFAULT_CAP["plugin_up"] if c is None else float(c)
        if not 0.0 < alpha < 1.0 or side not in ("certify", "violate") or reps < 1:
            raise ValueError(f"bad DifferenceBatch arguments: {alpha!r}, {side!r}, {reps!r}")
        super().__init__(alpha, side, rhos, BetConfig(c=cap), reps, judge_prior=False,
                         cells=grid_cells(grid, float(alpha), side, cap))
