"""One round of the WSR and UP bet rules on plain lists.

The formulas of :class:`~monitor.stats.betting.eprocess.BettingEProcess`, without its
bookkeeping.

Each function takes a round's inputs and the rows' running state and returns the new state;
the e-process stores the result. Plain Python floats: for S around 10 rows this beats numpy's
per-call overhead several times over.

Examples
--------
>>> logw, msum, vsum, bets = wsr_round("certify", [0.0], [1.0], [0.0], [0.5], [0.25], [1.0],
...                                     0.5, 1.0, 0.5)
>>> round(logw[0], 12) == round(math.log(1.5), 12), msum, vsum
(True, [0.5], [0.3125])

Notes
-----
Guarantee: none statistical by itself; the e-process's guarantee (Ville's inequality) rests
on the bets returned here depending on the rounds seen only. The float operations and their
order are those the e-process always used (a restored or twin-updated row continues bit for
bit).
"""

from __future__ import annotations

import math

import numpy as np

from monitor.stats.betting.bets import Side

__all__ = ["WsrRows", "up_mixture", "wsr_round", "wsr_twin_round"]

# new (log wealths, mean sums, variance sums, next bets) of the rows
WsrRows = tuple[list[float], list[float], list[float], list[float]]


def wsr_round(side: Side, q: list[float], bets: list[float], logw: list[float],
              msum: list[float], vsum: list[float], caps: list[float], alpha: float, k: float,
              inv: float) -> WsrRows:
    """Advance the WSR rows of one side by the observations ``q``.

    ``k`` is the next round's scale ``K_{t+1} (t + 1)`` and ``inv`` is ``1 / (t + 1)``; the
    running sums include the priors (``mu_t = msum / (t + 1)``, ``sigma_t^2 = vsum / (t + 1)``).
    """
    log1p = math.log1p
    sqrt = math.sqrt
    new_logw = []
    msums = []
    vsums = []
    new_bets = []
    certify = side == "certify"
    for x, lam, lw, ms, vs, cap in zip(q, bets, logw, msum, vsum, caps, strict=True):
        new_logw.append(lw + log1p(lam * (alpha - x) if certify else lam * (x - alpha)))
        ms += x
        msums.append(ms)
        e = x - ms * inv
        vs += e * e
        vsums.append(vs)
        b = sqrt(k / vs)
        new_bets.append(b if b < cap else cap)
    return new_logw, msums, vsums, new_bets


def wsr_twin_round(q: list[float], bets_c: list[float], bets_v: list[float],
                   logw_c: list[float], logw_v: list[float], msum: list[float],
                   vsum: list[float], caps_c: list[float], caps_v: list[float], alpha: float,
                   k: float, inv: float) -> tuple[WsrRows, tuple[list[float], list[float]]]:
    """Advance a certify side and its violate twin (shared sums) by ``q`` in one pass.

    Returns the certify side's ``(logw, msum, vsum, bets)`` and the violate side's
    ``(logw, bets)``: the same floats as two :func:`wsr_round` calls.
    """
    log1p = math.log1p
    sqrt = math.sqrt
    new_c = []
    new_v = []
    msums = []
    vsums = []
    out_c = []
    out_v = []
    for x, lc, lv, wc, wv, ms, vs, cc, cv in zip(
        q, bets_c, bets_v, logw_c, logw_v, msum, vsum, caps_c, caps_v, strict=True,
    ):
        new_c.append(wc + log1p(lc * (alpha - x)))
        new_v.append(wv + log1p(lv * (x - alpha)))
        ms += x
        msums.append(ms)
        e = x - ms * inv
        vs += e * e
        vsums.append(vs)
        b = sqrt(k / vs)
        out_c.append(b if b < cc else cc)
        out_v.append(b if b < cv else cv)
    return (new_c, msums, vsums, out_c), (new_v, out_v)


def up_mixture(lwg: np.ndarray, log_prior: np.ndarray,
               grid_bets: np.ndarray) -> tuple[list[float], list[float]]:
    """Mixture log wealth ``logsumexp_k(log prior_k + log W_k)`` and effective bets of UP rows.

    Examples
    --------
    >>> logw, bets = up_mixture(np.zeros((1, 2)), np.log([0.5, 0.5]), np.array([[0.2, 0.4]]))
    >>> round(logw[0], 12), round(bets[0], 12)
    (0.0, 0.3)
    """
    v = lwg + log_prior
    m = v.max(axis=1)
    e = np.exp(v - m[:, None])
    tot = e.sum(axis=1)
    logw: list[float] = (m + np.log(tot)).tolist()
    bets: list[float] = ((e * grid_bets).sum(axis=1) / tot).tolist()
    return logw, bets
