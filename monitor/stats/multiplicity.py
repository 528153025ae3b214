"""Error control over a family of K certificates: Bonferroni, fixed-sequence, e-BH.

All three take the e-values in log space, as the e-processes keep them.

- :func:`bonferroni_deltas`: test each of K hypotheses at ``delta / K`` (family-wise error rate,
  FWER <= delta, any dependence).
- :func:`fixed_sequence`: test the hypotheses in a pre-specified order, each at the full
  ``delta``, and stop at the first one that is not rejected (FWER <= delta; the paper's
  quantization experiment visits models by decreasing bit width).
- :func:`e_bh`: e-BH procedure of Wang and Ramdas (2022): false discovery rate <= delta under any
  dependence between the e-values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["bonferroni_deltas", "e_bh", "fixed_sequence"]


def _check_delta(delta: float) -> None:
    if not (isinstance(delta, (int, float)) and 0.0 < delta < 1.0):
        raise ValueError(f"delta must satisfy 0 < delta < 1, got {delta!r}")


def _check_log_e(log_e_values: Sequence[float]) -> list[float]:
    out = [float(v) for v in log_e_values]
    for v in out:
        if math.isnan(v):
            raise ValueError(f"log e-values must not be NaN, got {out}")
    return out


def bonferroni_deltas(delta: float, k: int) -> list[float]:
    """Per-hypothesis levels ``[delta / k] * k``.

    Examples
    --------
    >>> bonferroni_deltas(0.1, 4)
    [0.025, 0.025, 0.025, 0.025]

    Notes
    -----
    Guarantee: if each test has type-I error <= delta / k, the probability of any false
    rejection is <= delta (union bound; no assumption on dependence). With anytime-valid tests
    this holds over the whole stream, at any stopping time.
    """
    _check_delta(delta)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an int >= 1, got {k!r}")
    return [delta / k] * k


def fixed_sequence(log_e_values: Sequence[float], delta: float) -> list[bool]:
    """Fixed-sequence testing: reject in the given order while ``log e >= log(1/delta)``.

    Parameters
    ----------
    log_e_values : sequence of float
        Log e-values in the pre-specified testing order (fixed before seeing any data).
    delta : float
        Family-wise error level.

    Returns
    -------
    list of bool
        ``True`` for rejected (e.g. certified) hypotheses: always a prefix of the order.

    Examples
    --------
    >>> import math
    >>> fixed_sequence([math.log(20), math.log(11), math.log(5), math.log(50)], 0.1)
    [True, True, False, False]

    Notes
    -----
    Guarantee: FWER <= delta when the order is fixed in advance and each hypothesis' e-value is
    valid under its null (any false rejection implies that the first true null in the order
    was rejected at level delta). With e-processes monitored over time, passing each one's
    running maximum (``max_log_e``) is valid too: by Ville's inequality an e-process ever
    crossing ``1/delta`` has probability <= delta under its null.
    """
    _check_delta(delta)
    vals = _check_log_e(log_e_values)
    threshold = -math.log(delta)
    out: list[bool] = []
    go = True
    for v in vals:
        go = go and v >= threshold
        out.append(go)
    return out


def e_bh(log_e_values: Sequence[float], delta: float) -> list[bool]:
    """e-BH: reject the ``k*`` largest e-values, ``k* = max{k : e_(k) >= K / (delta k)}``.

    Parameters
    ----------
    log_e_values : sequence of float
        Log e-values of the K hypotheses (any order).
    delta : float
        Target false discovery rate.

    Returns
    -------
    list of bool
        ``True`` for rejected hypotheses, in the input order.

    Examples
    --------
    >>> import math
    >>> # K = 4, delta = 0.1: thresholds K/(delta k) = 40, 20, 13.3, 10
    >>> e_bh([math.log(v) for v in (15.0, 50.0, 14.0, 1.0)], 0.1)
    [True, True, True, False]
    >>> e_bh([math.log(v) for v in (15.0, 30.0, 1.0, 1.0)], 0.1)
    [False, False, False, False]

    Notes
    -----
    Guarantee (Wang and Ramdas, 2022): FDR <= delta for arbitrarily dependent e-values, each
    valid under its own null. Ties at the cut-off cannot split: if ``e_(k*) = e_(k*+1)`` then
    ``k* + 1`` would also qualify.
    """
    _check_delta(delta)
    vals = _check_log_e(log_e_values)
    k_total = len(vals)
    if k_total == 0:
        return []
    order = sorted(range(k_total), key=lambda i: -vals[i])
    base = math.log(k_total) - math.log(delta)
    k_star = 0
    for rank, i in enumerate(order, start=1):
        if vals[i] >= base - math.log(rank):
            k_star = rank
    rejected = [False] * k_total
    for i in order[:k_star]:
        rejected[i] = True
    return rejected
