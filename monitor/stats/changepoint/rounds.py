"""One round of an e-detector's components on plain floats: the per-round path.

:func:`advance` is what :class:`~monitor.stats.changepoint.detector.RiskIncreaseDetector` calls
each round: the compiled ``ckernel.advance`` when it was built (``setup.py``), else
:func:`advance_py`, its Python reference; both give the same bits
(``tests/stats/changepoint/test_ckernel.py``). Anything that is not plain valid floats returns
None from both, unchanged, and :func:`round_views` converts it or raises the precise error.

Examples
--------
>>> sr, cu, start, seg, total = [-math.inf], [-math.inf], [1], [0.0], [0.0]
>>> top = advance(sr, cu, start, seg, total, 1.0, 0.0, (0.5,), 0.1, 1, True)
>>> round(top, 6) == round(math.log1p(0.5 / 0.1 * 0.9), 6), start, total
(True, [1], [1.0])
>>> advance(sr, cu, start, seg, total, [1.0], [0.2], (0.5,), 0.1, 2, True) is None  # lo >= alpha
True

Notes
-----
Guarantee: none of its own; it computes :class:`RiskIncreaseDetector`'s round exactly (see
its Notes for the e-detector guarantee) and refuses, without changing anything, a round whose
bet factors would not all be positive in floating point.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["VIEW_TYPES", "advance", "advance_py", "as_views", "round_views"]

FloatArray = npt.NDArray[np.float64]


def as_views(x: float | Sequence[float] | FloatArray, views: int, name: str) -> FloatArray:
    """Return one observation per view as an array (a scalar is repeated), checked finite."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(views, float(arr))
    if arr.shape != (views,):
        raise ValueError(f"{name} must be a float or have shape ({views},), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {arr.tolist()}")
    return arr


def _float_views(x: float | Sequence[float] | FloatArray, views: int, name: str) -> list[float]:
    # as_views on plain floats (the per-round path)
    if isinstance(x, (int, float)):
        v = float(x)
        if not math.isfinite(v):
            raise ValueError(f"{name} must be finite, got {v}")
        return [v] * views
    if isinstance(x, (list, tuple)) and len(x) == views and all(
            isinstance(v, (int, float)) and math.isfinite(v) for v in x):
        return [float(v) for v in x]
    return [float(v) for v in as_views(x, views, name).tolist()]  # raises the precise error


def round_views(
    x: float | Sequence[float] | FloatArray,
    lo: float | Sequence[float] | FloatArray,
    views: int,
    alpha: float,
) -> tuple[list[float], list[float]]:
    """One round's observations and lower bounds as lists of floats, checked.

    For rounds :func:`advance` refused: ints, bools and numpy values are converted; a value
    that is not finite, ``lo >= alpha`` or ``x < lo`` raises ``ValueError`` with the precise
    reason.
    """
    xs, los = _float_views(x, views, "x"), _float_views(lo, views, "lo")
    for xf, lf in zip(xs, los, strict=True):
        if not lf < alpha:
            raise ValueError(f"lo must be < alpha={alpha}, got {list(los)}")
        if xf < lf:
            raise ValueError(f"x={list(xs)} below its lower bound lo={list(los)}")
    return xs, los


VIEW_TYPES = (list, tuple)  # exactly these (as the compiled kernel): subclasses are converted


def advance_py(
    sr: list[float],
    cu: list[float],
    start: list[int],
    seg: list[float],
    total: list[float],
    xs: object,
    los: object,
    frs: tuple[float, ...],
    alpha: float,
    t: int,
    use_sr: bool,
) -> float | None:
    """One valid round of the components on plain floats, in place; the largest statistic.

    :func:`~monitor.stats.changepoint.detector.advance_components` on floats, in the same order
    (the reference of the compiled :mod:`monitor.stats.changepoint.ckernel`, which must give the
    same bits). ``xs`` and
    ``los`` hold one value per view (a float for one view); unless each is a plain float with
    ``-inf < lo < alpha`` and ``lo <= x < inf``, nothing changes and the result is None.
    """
    xl = (xs,) if type(xs) is float else xs
    ll = (los,) if type(los) is float else los
    if not (isinstance(xl, list | tuple) and isinstance(ll, list | tuple)
            and type(xl) in VIEW_TYPES and type(ll) in VIEW_TYPES):
        return None
    if len(xl) != len(total) or len(ll) != len(total):
        return None
    inf = math.inf
    for xv, lv in zip(xl, ll, strict=True):
        # NaN fails every comparison; ints, bools and numpy floats are converted by the caller
        if not (type(xv) is float and type(lv) is float and -inf < lv < alpha
                and lv <= xv < inf):
            return None
        # every factor 1 + lam (x - alpha) > 0 in floating point too (lo within rounding of
        # alpha can overflow lam): else log1p has no value
        den, dx = alpha - lv, xv - alpha
        if not all(f / den * dx > -1.0 for f in frs):
            return None
    log1p, exp = math.log1p, math.exp
    j = 0
    for v, (xv, lv) in enumerate(zip(xl, ll, strict=True)):
        den = alpha - lv
        dx = xv - alpha
        for f in frs:
            log_l = log1p(f / den * dx)
            a = sr[j]
            sr[j] = log_l + (a + log1p(exp(-a)) if a > 0.0 else log1p(exp(a)))
            c = cu[j]
            if c <= 0.0:
                cu[j] = log_l + 0.0
                start[j] = t
                seg[j] = xv
            else:
                cu[j] = log_l + c
                seg[j] = seg[j] + xv
            j += 1
        total[v] = total[v] + xv
    return max(sr if use_sr else cu)


try:  # the compiled round (setup.py builds it when a C compiler is present): same bits, ~10x
    from monitor.stats.changepoint.ckernel import advance
except ImportError:  # pragma: no cover - depends on the install
    advance = advance_py
