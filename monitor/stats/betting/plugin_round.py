"""One round of a ``plugin_up`` e-process (:mod:`.plugin`): cells, running sums, reliance.

:func:`step` and :func:`reliance` are what :class:`~.plugin.PlugInEProcess` calls each round:
the compiled ``ckernel`` functions when they were built (``setup.py``), else :func:`step_py` and
:func:`reliance_py`, their Python references; both give the same bits
(``tests/stats/betting/test_ckernel.py``). :func:`plugin_rho` is the plug-in reliance rule.

Examples
--------
>>> cells, ref, log_e = step([0.5, 0.5], [0.2, 0.4], 0.1, 0.0)
>>> [round(c, 6) for c in cells], ref, round(log_e, 6) == round(math.log(1.03), 6)
([0.51, 0.52], 0.0, True)

Notes
-----
Guarantee: none of its own; it computes :class:`~.plugin.PlugInEProcess`'s round exactly (see
its Notes: the wealth is a nonnegative supermartingale under the null, and the reliance is
predictable, a function of past rounds only).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from monitor.stats.betting.bets import Side

__all__ = ["MIN_ROUNDS", "START_VAR", "plugin_rho", "reliance", "reliance_py", "step", "step_py",
           "sum_in_order"]

MIN_ROUNDS = 2
START_VAR = 1e-12
"""Sample variance of the human losses up to which the reliance keeps its start value."""


def plugin_rho(t: int, sums: Sequence[float], alpha: float, c: float, side: Side,
               rhos: Sequence[float], start: float | None = None) -> float:
    """Plug-in reliance for round ``t + 1`` from the running sums of ``t`` past rounds.

    Parameters
    ----------
    t : int
        Number of past rounds; before 2 the result is 0 (R-Eval).
    sums : sequence of 5 floats
        ``sum l, sum d, sum l^2, sum l d, sum d^2`` over past rounds (``d = b - f``).
    alpha, c : float
        Risk level and cap fraction.
    side : {"certify", "violate"}
        The test's side (sets the sign of the edge and the cap ``c / (off + rho)``).
    rhos : sequence of float
        Candidate reliances in [0, 1].
    start : float or None
        Reliance while the past human losses have not varied yet (fewer than 2 rounds, or all
        equal: their sample variance is at most ``1e-12``), when nothing tells the judge's
        quality yet. None: 0 before 2 rounds, the rule below after (the rule of
        ``comparison``). ``PlugInEProcess`` passes the largest candidate on the certify side
        (R-AutoEval until a human loss differs from the others; see :mod:`.plugin`).

    Returns
    -------
    float
        The candidate with the largest plug-in capped growth, or ``rho0`` (the
        variance-minimising reliance clipped to [0, 1]) when no candidate shows an edge.

    Examples
    --------
    >>> grid = [i / 10 for i in range(11)]
    >>> plugin_rho(1, [0.0] * 5, 0.12, 0.95, "certify", grid)
    0.0
    >>> # judge = human, blocks say 0.1: rho0 = 1; certify has an edge (0.02) and trades a
    >>> # little variance for a larger cap (0.8); violate has none and falls back to rho0
    >>> s = [10.0, 0.0, 10.0, -9.0, 9.0]
    >>> [round(plugin_rho(100, s, 0.12, 0.95, side, grid), 6) for side in ("certify", "violate")]
    [0.8, 1.0]
    >>> # 50 rounds, every human loss 0: no sign of the judge's quality yet, the start value
    >>> plugin_rho(50, [0.0, 1.0, 0.0, 0.0, 0.5], 0.12, 0.95, "certify", grid, start=1.0)
    1.0

    Notes
    -----
    A function of past rounds only, so the reliance is predictable: whatever it returns,
    ``E[l_t + rho_t d_t | past] = E[l_t | past]`` because ``E[d_t | past] = 0``.
    """
    if t < MIN_ROUNDS:
        return 0.0 if start is None else start
    sl, sd, sll, sld, sdd = sums
    ml, md = sl / t, sd / t
    vl = sll / t - ml * ml
    if start is not None and vl <= START_VAR:
        return start
    cov = sld / t - ml * md
    vd = sdd / t - md * md
    rho0 = min(1.0, max(0.0, -cov / (vd + 1e-12)))
    if side == "certify":
        e, off = alpha - (ml + rho0 * md), 1.0 - alpha
    else:
        e, off = (ml + rho0 * md) - alpha, alpha
    if e <= 0.0:
        return rho0
    best_g, best_r = 0.0, rho0
    e2 = e * e
    for r in rhos:
        v = vl + 2.0 * r * cov + r * r * vd
        m2 = (v if v > 0.0 else 0.0) + e2
        lam = e / (m2 if m2 > 1e-12 else 1e-12)
        cap = c / (off + r)
        if lam > cap:
            lam = cap
        g = lam * e - 0.5 * lam * lam * m2
        if g > best_g:
            best_g, best_r = g, r
    return best_r


def step_py(u: list[float], bets: list[float], x: float,
             ref: float) -> tuple[list[float], float, float]:
    """Return one round of the cells: ``(cells, ref, log wealth)`` (the compiled reference).

    Cells ``u_k (1 + lam_k x)``; a sum outside ``(1e-150, 1e150)`` is moved into ``ref``.
    """
    out = [a * (1.0 + b * x) for a, b in zip(u, bets, strict=True)]
    tot = sum_in_order(out)
    if not 1e-150 < tot < 1e150:  # factors are >= 1 - c: tot never jumps to 0 in a round
        out = [v / tot for v in out]
        ref += math.log(tot)
        tot = sum_in_order(out)
    return out, ref, ref + math.log(tot)


def sum_in_order(values: list[float]) -> float:
    """Return the sum added left to right from 0.0 (the compiled kernel's order).

    Python 3.11's ``sum()`` of floats adds this way; 3.12's compensates, which would make the
    two paths differ.
    """
    tot = 0.0
    for v in values:
        tot += v
    return tot


def reliance_py(sums: list[float], human: float, shift: float, t: int, alpha: float,
                 c: float, certify: bool, rhos: list[float],
                 start: float | None = None) -> float:
    """Add the round to the running sums (in place); the plug-in reliance of the next round.

    ``t`` counts the rounds the sums hold with this one (the compiled reference); ``start``
    as in :func:`plugin_rho`.
    """
    sums[0] += human
    sums[1] += shift
    sums[2] += human * human
    sums[3] += human * shift
    sums[4] += shift * shift
    if t < MIN_ROUNDS:
        return 0.0 if start is None else start
    return plugin_rho(t, sums, alpha, c, "certify" if certify else "violate", rhos, start)


try:  # the compiled round (setup.py builds it when a C compiler is present): same bits
    from monitor.stats.betting.ckernel import reliance, step
except ImportError:  # pragma: no cover - depends on the install
    reliance, step = reliance_py, step_py
