"""Vectorized forms of the risk detector: many independent streams at once (tests, studies).

Bit-identical to feeding each stream to :class:`~monitor.stats.changepoint.detector.
RiskIncreaseDetector` round by round (the same kernel, :func:`advance_components`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from monitor.stats.changepoint.detector import (
    FloatArray,
    IntArray,
    Kind,
    RiskIncreaseDetector,
    advance_components,
    log_mean_exp,
)

__all__ = ["run_batch"]


def run_batch(
    x: npt.ArrayLike,
    alpha: float,
    lo: npt.ArrayLike = 0.0,
    *,
    kind: Kind = "sr",
    arl: float | None = None,
    p: float | None = None,
    horizon: int | None = None,
    fractions: Sequence[float] | FloatArray | None = None,
) -> dict[str, FloatArray | IntArray]:
    """Run independent detectors over the rows of ``x`` (vectorized; for tests and studies).

    Parameters
    ----------
    x : array_like, shape (S, T) or (S, T, V)
        Row ``s`` is one stream of ``T`` rounds (with ``V`` views).
    lo : array_like
        Lower bounds, broadcastable to ``x``'s shape.
    alpha, kind, arl, p, horizon, fractions :
        As in :class:`RiskIncreaseDetector`.

    Returns
    -------
    dict
        ``alarm_round`` (int, shape (S,), 0 = no alarm), ``change_round`` (CUSUM estimate at
        the alarm, 0 if none), ``change_view`` (its view, -1 if none), ``risk_after`` and
        ``risk_before`` (at the alarm, NaN if none).
        Identical to feeding each row to :class:`RiskIncreaseDetector`.

    Examples
    --------
    >>> out = run_batch([[0.0] * 50 + [1.0] * 10], 0.1, arl=1000.0)
    >>> int(out["alarm_round"][0]), int(out["change_round"][0])
    (54, 51)
    """
    xa = np.asarray(x, dtype=np.float64)
    if xa.ndim not in (2, 3):
        raise ValueError(f"x must have shape (S, T) or (S, T, V), got {xa.shape}")
    la = np.broadcast_to(np.asarray(lo, dtype=np.float64), xa.shape)
    if xa.ndim == 2:
        xa, la = xa[:, :, None], la[:, :, None]
    if not (np.all(np.isfinite(xa)) and np.all(np.isfinite(la))):
        raise ValueError("x and lo must be finite")
    if np.any(la >= alpha) or np.any(xa < la):
        raise ValueError("need lo < alpha and x >= lo")
    ref = RiskIncreaseDetector(alpha, kind=kind, arl=arl, p=p, horizon=horizon,
                               fractions=fractions, views=xa.shape[2])
    s, t_max, v = xa.shape
    k = ref.fractions.size
    frj = np.tile(ref.fractions, v)
    log_w = -math.log(frj.size)
    log_a = math.log(ref.threshold)
    log_sr = np.full((s, frj.size), -np.inf)
    log_cu = np.full((s, frj.size), -np.inf)
    start = np.ones((s, frj.size), dtype=np.int64)
    seg = np.zeros((s, frj.size))
    total = np.zeros((s, v))
    alarm = np.zeros(s, dtype=np.int64)
    change = np.zeros(s, dtype=np.int64)
    view = np.full(s, -1, dtype=np.int64)
    after = np.full(s, np.nan)
    before = np.full(s, np.nan)
    rows = np.arange(s)
    for t in range(1, t_max + 1):
        xj = np.repeat(xa[:, t - 1, :], k, axis=1)
        lj = np.repeat(la[:, t - 1, :], k, axis=1)
        log_sr, log_cu, start, seg = advance_components(
            log_sr, log_cu, start, seg, t, xj, lj, alpha, frj)
        total = total + xa[:, t - 1, :]
        stat = log_mean_exp(log_sr if kind == "sr" else log_cu, log_w)
        new = (alarm == 0) & (stat >= log_a)
        if np.any(new):
            idx = rows[new]
            best = np.argmax(log_cu[idx], axis=1)
            has = log_cu[idx, best] > 0.0
            st = start[idx, best]
            sg = seg[idx, best]
            alarm[idx] = t
            change[idx] = np.where(has, st, 0)
            view[idx] = np.where(has, best // k, -1)
            after[idx] = np.where(has, sg / (t - st + 1), np.nan)
            tot = total[idx, best // k]
            with np.errstate(divide="ignore", invalid="ignore"):
                before[idx] = np.where(has & (st > 1), (tot - sg) / (st - 1), np.nan)
    return {"alarm_round": alarm, "change_round": change, "change_view": view,
            "risk_after": after, "risk_before": before}
