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
from collections.abc import Iterable, Sequence

from monitor.stats.betting.bets import Side

__all__ = ["AGREE_RATIO", "MIN_ROUNDS", "cell_log_wealths", "log_wealth_with", "plugin_rho",
           "reliance", "reliance_py", "step", "step_py", "sum_in_order"]

MIN_ROUNDS = 2
AGREE_RATIO = 0.3
"""Agreement check of the judge prior: ``sum d^2 <= AGREE_RATIO sum d`` (see :func:`plugin_rho`)."""


def plugin_rho(t: int, sums: Sequence[float], alpha: float, c: float, side: Side,
               rhos: Sequence[float], judge_prior: bool = False) -> float:
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
    judge_prior : bool
        While every past human loss was 0 (their mean and sample variance at most ``1e-12``)
        and the judge looks like it agreed (``sum d^2 <= AGREE_RATIO sum d``: with ``l = f = 0``
        each ``d = b`` is in [0, 1] and ``b^2`` is about ``b / r`` for blocks of ``r`` units, so
        a judge loss of 1 on a unit a human passed, ``d`` near -1, breaks it), the human
        variance and its covariance with ``d``, which zeros cannot show, are taken from the
        judge: ``Var(l) = p (1 - p)`` with ``p`` the mean of ``d`` (the blocks' mean judge loss)
        and ``Cov(l, d) = -Var(l)`` (a judge that agrees). False (the comparison's rule): the
        plain plug-in. ``PlugInEProcess`` sets it on the certify side (see
        :mod:`.plugin`).

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
    >>> # 50 human losses 0, blocks with mean 0.1 and variance 0.009: zeros show no variance,
    >>> # so plainly rho = 0; the judge prior expects failures at rate 0.1 that the judge sees
    >>> s = [0.0, 5.0, 0.0, 0.0, 0.95]
    >>> [plugin_rho(50, s, 0.12, 0.95, "certify", grid, prior) for prior in (False, True)]
    [0.0, 0.5]
    >>> s[4] = 2.0  # sum d^2 > 0.3 sum d: the judge said 1 on units a human passed, no prior
    >>> plugin_rho(50, s, 0.12, 0.95, "certify", grid, True)
    0.0

    Notes
    -----
    A function of past rounds only, so the reliance is predictable: whatever it returns,
    ``E[l_t + rho_t d_t | past] = E[l_t | past]`` because ``E[d_t | past] = 0``.
    """
    if t < MIN_ROUNDS:
        return 0.0
    sl, sd, sll, sld, sdd = sums
    ml, md = sl / t, sd / t
    vl = sll / t - ml * ml
    cov = sld / t - ml * md
    vd = sdd / t - md * md
    if judge_prior and vl <= 1e-12 and ml <= 1e-12 and sdd <= AGREE_RATIO * sd:
        p = min(1.0, max(0.0, md))
        vl = p * (1.0 - p)
        cov = -vl
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


def log_wealth_with(u: list[float], ref: float, log_e: float, terms: Sequence[float],
                    floor: float) -> float:
    """Log wealth of cells ``u`` (scale ``ref``, mixture ``log_e``) if each also took ``terms``.

    A result below ``floor`` may be returned as an upper bound of it instead (cheaper).

    Examples
    --------
    >>> log_wealth_with([0.5, 0.5], 0.0, 0.0, [0.0, 0.0], -math.inf)
    0.0
    """
    m = max(terms)
    if log_e + m < floor:  # log sum u_k e^{t_k} <= log sum u_k + max t
        return log_e + m
    exp = math.exp
    total = sum([a * exp(t - m) for a, t in zip(u, terms, strict=True)])
    return -math.inf if total <= 0.0 else ref + m + math.log(total)


def cell_log_wealths(u: list[float], prior: list[float], ref: float) -> list[float]:
    """Log wealth ``log W_k`` of each cell (``-inf`` for a cell that underflowed).

    Examples
    --------
    >>> cell_log_wealths([0.5, 0.0], [0.5, 0.5], 0.0)
    [0.0, -inf]
    """
    log = math.log
    return [ref + log(a / w) if a > 0.0 else -math.inf for a, w in zip(u, prior, strict=True)]


def sum_in_order(values: Iterable[float]) -> float:
    """Return the sum added left to right from 0.0 (the compiled kernel's order).

    Python 3.11's ``sum()`` of floats adds this way; 3.12's compensates, which would make the
    two paths differ.
    """
    tot = 0.0
    for v in values:
        tot += v
    return tot


def reliance_py(sums: list[float], human: float, shift: float, t: int, alpha: float,
                 c: float, certify: bool, rhos: list[float], judge_prior: bool = False) -> float:
    """Add the round to the running sums (in place); the plug-in reliance of the next round.

    ``t`` counts the rounds the sums hold with this one (the compiled reference);
    ``judge_prior`` as in :func:`plugin_rho`.
    """
    sums[0] += human
    sums[1] += shift
    sums[2] += human * human
    sums[3] += human * shift
    sums[4] += shift * shift
    if t < MIN_ROUNDS:
        return 0.0
    return plugin_rho(t, sums, alpha, c, "certify" if certify else "violate", rhos,
                      judge_prior)


try:  # the compiled round (setup.py builds it when a C compiler is present): same bits
    from monitor.stats.betting.ckernel import reliance, step
except ImportError:  # pragma: no cover - depends on the install
    reliance, step = reliance_py, step_py
