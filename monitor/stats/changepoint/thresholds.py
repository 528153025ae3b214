"""Configuration of the e-detectors: alarm thresholds and bet fractions.

:func:`threshold_from` turns an average run length or a false-alarm budget into the alarm
threshold ``A``; :func:`bet_fractions` and :func:`check_fractions` give and check the constant
bet fractions a detector mixes over (:mod:`monitor.stats.changepoint.detector`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

__all__ = ["DEFAULT_HORIZON", "DEFAULT_P", "FloatArray", "IntArray", "Kind", "bet_fractions",
           "check_fractions", "threshold_from"]

Kind = Literal["sr", "cusum"]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

DEFAULT_P = 0.02
DEFAULT_HORIZON = 4500


def threshold_from(
    arl: float | None = None, p: float | None = None, horizon: int | None = None
) -> float:
    """Alarm threshold ``A`` from an average run length or a false-alarm budget.

    Parameters
    ----------
    arl : float, optional
        Guaranteed lower bound on the average run length under the null; ``A = arl``.
    p, horizon : float and int, optional
        False-alarm probability ``p`` over ``horizon`` rounds: ``A = horizon / p``. Used when
        ``arl`` is None; each defaults to ``0.02`` / ``4500`` (so ``A = 225000``).

    Returns
    -------
    float
        The threshold, ``> 1``.

    Examples
    --------
    >>> threshold_from()
    225000.0
    >>> threshold_from(arl=4e5)
    400000.0
    >>> threshold_from(p=0.01, horizon=1000)
    100000.0

    Notes
    -----
    For the e-detectors here ``R_t + (T - t)`` is a nonnegative supermartingale for
    ``t <= T`` under the null, so ``P(alarm by T) <= T / A`` (Ville), and ``E[N] >= A``
    (optional stopping on ``R_t - t``).
    """
    if arl is not None:
        if p is not None or horizon is not None:
            raise ValueError("give either arl or (p, horizon), not both")
        a = float(arl)
    else:
        pp = DEFAULT_P if p is None else float(p)
        hh = DEFAULT_HORIZON if horizon is None else horizon
        if isinstance(hh, bool) or not isinstance(hh, int) or hh < 1:
            raise ValueError(f"horizon must be an int >= 1, got {hh!r}")
        if not (math.isfinite(pp) and 0.0 < pp < 1.0):
            raise ValueError(f"p must satisfy 0 < p < 1, got {pp!r}")
        a = hh / pp
    if not (math.isfinite(a) and a > 1.0):
        raise ValueError(f"threshold must be finite and > 1, got {a!r}")
    return a


def bet_fractions(k: int = 8, lo: float = 0.05, hi: float = 0.9) -> FloatArray:
    """Return ``k`` log-spaced bet fractions in ``[lo, hi]`` (bet ``u / (alpha - lo_t)``).

    Examples
    --------
    >>> [round(u, 4) for u in bet_fractions(3, 0.1, 0.4).tolist()]
    [0.1, 0.2, 0.4]
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    if not (0.0 < lo <= hi < 1.0):
        raise ValueError(f"need 0 < lo <= hi < 1, got lo={lo!r}, hi={hi!r}")
    return np.asarray(np.geomspace(lo, hi, k), dtype=np.float64)


def check_fractions(fr: Sequence[float] | FloatArray) -> FloatArray:
    """Return the bet fractions as an array, or raise ``ValueError`` unless all lie in (0, 1)."""
    arr = np.asarray(fr, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"fractions must be a non-empty 1-D sequence, got shape {arr.shape}")
    if not (np.all(np.isfinite(arr)) and np.all(arr > 0.0) and np.all(arr < 1.0)):
        raise ValueError(f"fractions must lie in (0, 1), got {arr.tolist()}")
    return arr
