"""Worst-case factors of a ``plugin_up`` round whose label or reliance is not known yet.

A ``plugin_up`` test (:class:`~.plugin.PlugInEProcess`) multiplies each bet cell ``k`` by
``1 + lam_k(rho) x`` per round, with ``x = alpha - q`` (certify) or ``q - alpha`` (violate),
``q = l + rho d``, ``d = b - f`` and ``lam_k(rho) = min(lam_k, c / (off + rho))``. When a round's
human loss ``l`` is not known yet (a pending or missing label) or its reliance ``rho`` is not known
yet (it depends on earlier labels still pending), the factor is bounded below by its minimum over
the unknowns: ``l`` over [0, 1] (the minimum is at ``l = 1`` for certify, ``l = 0`` for violate,
since the factor is monotone in ``l``), and ``rho`` over [0, 1] for a plug-in reliance. In ``rho``
the factor is linear where the cell's bet is not clipped and monotone where it is (``c x(rho) /
(off + rho)`` has a derivative of constant sign), so its minimum over [0, 1] is at ``rho = 0``,
``rho = 1`` or the clipping point ``rho* = c / lam_k - off``.

Examples
--------
>>> logs = worst_log_factors(0.1, "certify", [0.5, 1.0], 0.95, None, None, 0.0)
>>> [round(v, 6) for v in logs]            # l = 1, rho = 0: 1 - lam_k (1 - 0.1)
[-0.597837, -2.302585]
>>> # l = 0 known, rho unknown: the second cell's bet may be clipped to 0.95 / 1.9 = 0.5
>>> [round(v, 6) for v in worst_log_factors(0.1, "certify", [0.5, 1.0], 0.95, 0.0, None, 0.0)]
[0.04879, 0.04879]

Notes
-----
Guarantee: each returned value is at most the log of the factor the cell would multiply by for
any label in [0, 1] (when ``human`` is None) and any reliance in [0, 1] (when ``rho`` is None);
each factor is at least ``1 - c > 0``. A product of such lower bounds over some rounds, times the
cells' wealth over the other rounds, is at most the cells' true wealth, whatever the labels and
reliances turn out to be.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from monitor.stats.betting.bets import Side

__all__ = ["add_worst_log_factors", "add_worst_log_factors_py", "worst_human", "worst_log_factors",
           "worst_log_factors_py"]


def worst_human(side: Side) -> float:
    """Return the label that lowers a ``side`` test's factor most: 1 (certify), 0 (violate).

    Examples
    --------
    >>> worst_human("certify"), worst_human("violate")
    (1.0, 0.0)
    """
    return 1.0 if side == "certify" else 0.0


def worst_log_factors_py(alpha: float, side: Side, lam: Sequence[float], c: float,
                         human: float | None, rho: float | None, shift: float) -> list[float]:
    """Log of each cell's smallest factor over the unknown label and/or reliance.

    The Python reference of :func:`worst_log_factors` (the compiled ``ckernel`` function when
    it was built, else this one; both give the same bits: ``tests/stats/betting/
    test_ckernel.py``).

    Parameters
    ----------
    alpha : float
        The test's risk level.
    side : {"certify", "violate"}
        The test's side.
    lam : sequence of float
        The cells' fixed bets (:func:`~.plugin.bet_grid`, or a fixed-reliance test's merged
        cells).
    c : float
        Cap fraction: a cell's bet is clipped at ``c / (off + rho)``, ``off = 1 - alpha``
        (certify) or ``alpha`` (violate).
    human : float or None
        The round's human loss, or None when unknown (pending or missing).
    rho : float or None
        The round's reliance, or None when unknown (then any value in [0, 1]).
    shift : float
        ``d = b - f`` (0 for an empty block).

    Returns
    -------
    list of float
        One log factor per cell.
    """
    certify = side == "certify"
    sgn = 1.0 if certify else -1.0
    off = 1.0 - alpha if certify else alpha
    h = worst_human(side) if human is None else human
    out: list[float] = []
    log = math.log
    for lk in lam:
        rhos: tuple[float, ...]
        if rho is not None:
            rhos = (rho,)
        else:
            star = c / lk - off  # where this cell's bet starts being clipped
            rhos = (0.0, 1.0, star) if 0.0 < star < 1.0 else (0.0, 1.0)
        worst = math.inf
        for r in rhos:
            cap = c / (off + r)
            bet = lk if lk < cap else cap
            f = 1.0 + bet * sgn * (alpha - (h + r * shift))
            if f < worst:
                worst = f
        out.append(log(worst))
    return out



def add_worst_log_factors_py(s: list[float] | None, sign: float, alpha: float, side: Side,
                             lam: Sequence[float], c: float, human: float | None,
                             rho: float | None, shift: float) -> list[float]:
    """Return ``s_k + sign * w_k`` per cell, ``w`` the :func:`worst_log_factors_py` of the rest.

    ``s`` None stands for zeros (``0.0 + sign * w_k``). A running sum of bounds gains or loses
    one round's terms in one call (:mod:`monitor.state.audit_order`). The Python reference of
    :func:`add_worst_log_factors` (compiled when built; the same bits).

    Examples
    --------
    >>> w = worst_log_factors_py(0.1, "certify", [0.5, 1.0], 0.95, None, None, 0.0)
    >>> add_worst_log_factors_py(None, 1.0, 0.1, "certify", [0.5, 1.0], 0.95, None, None,
    ...                          0.0) == [0.0 + v for v in w]
    True
    >>> add_worst_log_factors_py([1.0, 2.0], -1.0, 0.1, "certify", [0.5, 1.0], 0.95, None,
    ...                          None, 0.0) == [1.0 - w[0], 2.0 - w[1]]
    True
    """
    if s is not None and len(s) != len(lam):
        raise ValueError("sums and lam differ in length")
    w = worst_log_factors_py(alpha, side, lam, c, human, rho, shift)
    if s is None:
        return [0.0 + sign * v for v in w]
    return [a + sign * v for a, v in zip(s, w, strict=True)]


try:  # the compiled bounds (setup.py builds them when a C compiler is present): same bits
    from monitor.stats.betting.ckernel import add_worst_log_factors, worst_log_factors
except ImportError:  # pragma: no cover - depends on the install
    worst_log_factors = worst_log_factors_py
    add_worst_log_factors = add_worst_log_factors_py
