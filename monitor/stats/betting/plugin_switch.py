"""The switch cell of a ``plugin_up`` e-process: follow the portfolio, or bet the cap when sure.

A plug-in ``plugin_up`` row (:class:`~.plugin.PlugInEProcess`, several candidate reliances, the
default bet grid) with ``BetConfig.cap_switch`` keeps one more cell next to its fixed bets, with
half the prior mass (the fixed cells keep the other half, in their own proportions). For each
round the switch cell bets:

- the **cap** ``c / (off + rho_t)`` when a lower confidence bound of the plug-in Kelly bet at
  the round's reliance is at least the cap (:func:`sure`): the edge ``e`` less ``Z`` standard
  errors, over ``v + e^2``, with the variance ``v`` of ``q = l + rho_t d`` shrunk towards 1/4 by
  ``N0`` pseudo-rounds, all from the rounds already applied;
- else the fixed cells' wealth-weighted bet (:func:`follow_bet`): its wealth then moves exactly
  as theirs (a cell that follows the mixture costs nothing).

Why (``benchmarks/plugin_gap.py``): when the clairvoyant's Kelly bet lies beyond the cap (low
risks, good judges) the fixed cells clipped at the cap hold only part of the prior mass (1/8 at
risk 0.01) and pay ``log(1/w)`` nats; a plug-in bet at the cap pays about ``log 2`` once sure.
Measured (400 runs): 6-15% fewer labels at risks 0.01 and 0.02, within 3% elsewhere; the worst
ratio to the better of R-Eval and R-AutoEval went from 1.15 to 1.07. A Kelly cell without the
confidence bound, or at 3/4 of the mass, lost 10-60% at judge agreement 0.7. Not adopted,
measured (``benchmarks/plugin_switch_follow.py``, 200 runs seed 13 / 400 runs seed 113):
following only the large cells or the best cell (with linear or geometric grids), leaving at a
lower bound of the Kelly bet instead of the cap, ``Z`` 1.5-2.5, ``N0`` 8, a mass of 0.35-0.65:
none moves the worst case (risk 0.05, gamma 0.99, delta 0.01: 1.35-1.51x the clairvoyant's
labels). There the loss is the plug-in reliance: at the best fixed reliance these cells need
1.13-1.17x, a cell betting the cap at the plug-in reliance 1.40-1.51x.

Examples
--------
>>> sure([0.0, 0.0, 0.0, 0.0, 0.0], 0, 0.1, 0.95, 1.0, 0.9, 0.0)
False
>>> # 200 rounds of l = 0, d = 0 against alpha 0.3: edge 0.3, tiny variance: bet the cap
>>> sure([0.0, 0.0, 0.0, 0.0, 0.0], 200, 0.3, 0.95, 1.0, 0.7, 0.0)
True
>>> round(follow_bet([0.25, 0.75, 5.0], [0.2, 0.4]), 12)
0.35

Notes
-----
Guarantee: the switch cell's bet for round ``t`` is a function of rounds applied before ``t``
(their losses, the cells' wealth) and of ``rho_t`` (fixed before the round): predictable, in
``[0, cap_t]``. So the cell is a nonnegative supermartingale under the null like the fixed
cells, and so is the mixture (``docs/guarantees.md``). Its worst factor over an unknown label or
reliance is at least that of a bet at the cap when that factor is below 1, else 1
(:func:`worst_log_factor`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import mul

from monitor.stats.betting.bets import Side
from monitor.stats.betting.plugin_bounds import worst_log_factors
from monitor.stats.betting.plugin_round import step_py, sum_in_order

__all__ = ["N0", "WEIGHT", "Z", "follow_bet", "step_switch", "step_switch_py", "sure",
           "with_switch", "worst_log_factor"]

Z = 2.0
"""Standard errors taken off the estimated edge."""
N0 = 2.0
"""Pseudo-rounds of variance 1/4 shrinking the estimated variance."""
WEIGHT = 0.5
"""Prior mass of the switch cell."""


def with_switch(w: Sequence[float]) -> list[float]:
    """Prior weights of the fixed cells scaled by ``1 - WEIGHT``, then the switch cell's.

    Examples
    --------
    >>> with_switch([0.5, 0.5])
    [0.25, 0.25, 0.5]
    """
    return [(1.0 - WEIGHT) * v for v in w] + [WEIGHT]


def sure(app: Sequence[float], n: int, alpha: float, c: float, sgn: float, off: float,
         rho: float) -> bool:
    """Tell whether the lower bound of the plug-in Kelly bet at ``rho`` reaches the cap.

    Parameters
    ----------
    app : sequence of 5 floats
        ``sum l, sum d, sum l^2, sum l d, sum d^2`` over the ``n`` rounds applied.
    n : int
        Rounds applied (fewer than 2: False).
    alpha, c : float
        Risk level and cap fraction.
    sgn, off : float
        ``1, 1 - alpha`` (certify) or ``-1, alpha`` (violate).
    rho : float
        The round's reliance.
    """
    if n < 2:
        return False
    t = float(n)
    ml, md = app[0] / t, app[1] / t
    vl = app[2] / t - ml * ml
    cov = app[3] / t - ml * md
    vd = app[4] / t - md * md
    e = sgn * (alpha - (ml + rho * md))
    v = vl + 2.0 * rho * cov + rho * rho * vd
    v = ((v if v > 0.0 else 0.0) * t + N0 * 0.25) / (t + N0)
    lo = e - Z * math.sqrt(v / t)
    return lo > 0.0 and lo >= c / (off + rho) * (v + e * e)


def follow_bet(u: Sequence[float], bets: Sequence[float]) -> float:
    """Wealth-weighted bet of the fixed cells (``u``'s first ``len(bets)`` entries).

    The switch cell's bet when it is not sure: its factor is then the fixed cells' mixture's.
    Both sums are added left to right from 0.0 (:func:`~.plugin_round.sum_in_order`), as the
    compiled ``ckernel.step_switch`` adds them: Python 3.12's ``sum()`` compensates.
    """
    den = sum_in_order(u[: len(bets)])
    return sum_in_order(map(mul, u, bets)) / den if den > 0.0 else 0.0


def worst_log_factor(alpha: float, side: Side, c: float, human: float | None,
                     rho: float | None, shift: float) -> float:
    """Log lower bound of the switch cell's factor for a round not applied yet.

    Its bet is somewhere in ``[0, cap]``: the factor is at least ``min(1, f_cap)`` with
    ``f_cap`` the worst factor of a bet at the cap (see :mod:`.plugin_bounds`).

    Examples
    --------
    >>> round(worst_log_factor(0.1, "certify", 0.95, None, 0.0, 0.0), 6)  # 1 - 0.95
    -2.995732
    >>> worst_log_factor(0.1, "certify", 0.95, 0.0, 0.0, 0.0)
    0.0
    """
    big = c / (1.0 - alpha if side == "certify" else alpha)  # the largest cap: clipped to cap
    v = worst_log_factors(alpha, side, [big], c, human, rho, shift)[0]
    return v if v < 0.0 else 0.0


def step_switch_py(u: list[float], bets: list[float], x: float, ref: float, app: list[float],
                   napp: int, alpha: float, c: float, sgn: float, off: float,
                   rho: float) -> tuple[list[float], float, float]:
    """One round of a row with the switch cell: ``step(u, bets + [sb], x, ref)``.

    ``sb`` is the switch cell's bet at reliance ``rho``: the cap ``c / (off + rho)`` when
    :func:`sure`, else :func:`follow_bet` clipped at the cap. The Python reference of the
    compiled ``ckernel.step_switch`` (the same bits, ``tests/stats/betting/test_ckernel.py``),
    which saves the calls and lists of a round (``benchmarks/replay_shapes.py``).

    Examples
    --------
    >>> cells, ref, log_e = step_switch_py([0.25, 0.25, 0.5], [0.2, 0.4], 0.1, 0.0,
    ...                                    [0.0] * 5, 0, 0.3, 0.95, 1.0, 0.7, 0.0)
    >>> [round(v, 6) for v in cells], ref   # the switch cell follows the fixed cells (0.3)
    ([0.255, 0.26, 0.515], 0.0)
    """
    cap = c / (off + rho)
    if sure(app, napp, alpha, c, sgn, off, rho):
        return step_py(u, [*bets, cap], x, ref)
    sb = follow_bet(u, bets)
    return step_py(u, [*bets, sb if sb < cap else cap], x, ref)


try:  # the compiled round (setup.py builds it when a C compiler is present): same bits
    from monitor.stats.betting.ckernel import step_switch
except ImportError:  # pragma: no cover - depends on the install
    step_switch = step_switch_py
