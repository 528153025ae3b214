"""The reference band of judge drift and the vectorized drift detector (tests and studies).

:func:`eb_band` is the predictable-plug-in empirical-Bernstein interval a
:class:`~monitor.stats.changepoint.drift.DriftDetector` freezes after its warm-up;
:func:`run_drift_batch` runs many independent drift detectors at once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from monitor.stats.changepoint.batch import run_batch
from monitor.stats.changepoint.detector import FloatArray, IntArray, Kind, threshold_from

__all__ = ["CAP", "DEFAULT_DRIFT_HORIZON", "DEFAULT_DRIFT_P", "DEFAULT_DRIFT_WARMUP", "eb_band",
           "run_drift_batch"]

CAP = 0.75  # largest warm-up bet (the paper uses 1/2 or 3/4)

DEFAULT_DRIFT_P = 0.01
DEFAULT_DRIFT_HORIZON = 4500
DEFAULT_DRIFT_WARMUP = 500
"""Labelled rounds observed before the reference band is frozen."""


def _psi(lam: npt.NDArray[np.float64] | float) -> npt.NDArray[np.float64]:
    return np.asarray(-np.log1p(-np.asarray(lam)) - lam, dtype=np.float64)


def eb_band(
    x: npt.ArrayLike, delta: float, lo: float = -1.0, hi: float = 1.0
) -> tuple[FloatArray, FloatArray]:
    """Predictable-plug-in empirical-Bernstein interval for the mean, from rows of a sample.

    Parameters
    ----------
    x : array_like, shape (W,) or (S, W)
        Observations in ``[lo, hi]`` (row ``s`` is one warm-up sample).
    delta : float
        Miscoverage, in ``(0, 1)``.
    lo, hi : float
        Range of the observations.

    Returns
    -------
    (m_lo, m_hi) : arrays of shape () or (S,)
        Interval ends, inside ``[lo, hi]``.

    Examples
    --------
    >>> m_lo, m_hi = eb_band([0.0] * 990 + [-1.0] * 10, 0.01)
    >>> bool(m_lo < -0.01 < m_hi), bool(m_hi - m_lo < 0.06)
    (True, True)

    Notes
    -----
    With ``y = (x - lo) / (hi - lo)`` in ``[0, 1]``, ``mu_{i-1}`` and ``s2_{i-1}`` the regularised
    running mean and variance (priors 1/2 and 1/4), bets
    ``lam_i = min(3/4, sqrt(2 log(2/delta) / (W s2_{i-1})))`` and ``v_i = (y_i - mu_{i-1})^2``,
    the interval is ``sum lam y / sum lam +- (log(2/delta) + sum v_i psi(lam_i)) / sum lam``
    with ``psi(lam) = -log(1 - lam) - lam``. It is the time-``W`` section of a confidence
    sequence, valid whenever every ``y_i`` has conditional mean ``mu0`` given the past
    (martingale-difference noise; no independence needed).
    """
    xa = np.asarray(x, dtype=np.float64)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"need finite lo < hi, got {lo!r}, {hi!r}")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    if xa.ndim not in (1, 2) or xa.shape[-1] < 1:
        raise ValueError(f"x must have shape (W,) or (S, W), got {xa.shape}")
    if not np.all(np.isfinite(xa)) or np.any(xa < lo) or np.any(xa > hi):
        raise ValueError("x must be finite and inside [lo, hi]")
    y = (xa - lo) / (hi - lo)
    w = y.shape[-1]
    log2d = math.log(2.0 / delta)
    # running regularised mean/variance *before* each round: mu_{i-1}, s2_{i-1}
    csum = np.cumsum(y, axis=-1)
    idx = np.arange(1, w + 1, dtype=np.float64)
    mu = (0.5 + csum) / (idx + 1.0)  # mu_i
    mu_prev = np.concatenate([np.full((*y.shape[:-1], 1), 0.5), mu[..., :-1]], axis=-1)
    dev = np.cumsum((y - mu) ** 2, axis=-1)
    s2 = (0.25 + dev) / (idx + 1.0)
    s2_prev = np.concatenate([np.full((*y.shape[:-1], 1), 0.25), s2[..., :-1]], axis=-1)
    lam = np.minimum(CAP, np.sqrt(2.0 * log2d / (w * s2_prev)))
    v = (y - mu_prev) ** 2
    sl = lam.sum(axis=-1)
    centre = (lam * y).sum(axis=-1) / sl
    half = (log2d + (v * _psi(lam)).sum(axis=-1)) / sl
    m_lo = lo + (hi - lo) * np.clip(centre - half, 0.0, 1.0)
    m_hi = lo + (hi - lo) * np.clip(centre + half, 0.0, 1.0)
    return np.asarray(m_lo, dtype=np.float64), np.asarray(m_hi, dtype=np.float64)



def run_drift_batch(
    x: npt.ArrayLike,
    lo: float = -1.0,
    hi: float = 1.0,
    *,
    warmup: int = DEFAULT_DRIFT_WARMUP,
    delta_ref: float = 0.01,
    kind: Kind = "sr",
    arl: float | None = None,
    p: float | None = None,
    horizon: int | None = None,
    fractions: Sequence[float] | FloatArray | None = None,
) -> dict[str, FloatArray | IntArray]:
    """Run independent :class:`DriftDetector` s over the rows of ``x`` (vectorized).

    Parameters
    ----------
    x : array_like, shape (S, T)
        Streams in ``[lo, hi]``, ``T > warmup``.
    lo, hi, warmup, delta_ref, kind, arl, p, horizon, fractions :
        As in :class:`DriftDetector`.

    Returns
    -------
    dict
        ``alarm_round`` and ``change_round`` (counted from the start of the warm-up, 0 = none),
        ``direction`` (+1 up, -1 down, 0 none), ``m_lo`` and ``m_hi`` (the bands).

    Examples
    --------
    >>> x = [[-1.0 if t % 50 == 0 else 0.0 for t in range(600)]
    ...      + [-1.0 if t % 3 == 0 else 0.0 for t in range(100)]]
    >>> out = run_drift_batch(x, warmup=200, arl=1e4)
    >>> int(out["change_round"][0]), int(out["direction"][0])
    (601, -1)
    """
    xa = np.asarray(x, dtype=np.float64)
    if xa.ndim != 2 or xa.shape[1] <= warmup:
        raise ValueError(f"x must have shape (S, T) with T > warmup, got {xa.shape}")
    if arl is None and p is None and horizon is None:
        p, horizon = DEFAULT_DRIFT_P, DEFAULT_DRIFT_HORIZON
    m_lo, m_hi = eb_band(xa[:, :warmup], delta_ref, lo, hi)
    post = xa[:, warmup:]
    views = np.stack([post - m_hi[:, None], m_lo[:, None] - post], axis=2)
    lows = np.stack([np.broadcast_to((lo - m_hi)[:, None], post.shape),
                     np.broadcast_to((m_lo - hi)[:, None], post.shape)], axis=2)
    out = run_batch(views, 0.0, lows, kind=kind, arl=threshold_from(arl, p, horizon),
                    fractions=fractions)
    a = np.asarray(out["alarm_round"], dtype=np.int64)
    c = np.asarray(out["change_round"], dtype=np.int64)
    up = np.asarray(out["change_view"], dtype=np.int64)
    return {
        "alarm_round": np.where(a > 0, a + warmup, 0),
        "change_round": np.where(c > 0, c + warmup, 0),
        "direction": np.where(c > 0, np.where(up == 0, 1, -1), 0),
        "m_lo": m_lo,
        "m_hi": m_hi,
    }
