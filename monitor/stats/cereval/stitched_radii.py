"""Stitched (anytime) Hoeffding and empirical-Bernstein radii of Cer-Eval, and the "Seq" interval.

The radii are those of Cer-Eval (Wang, Chen, Li, Xu), Algorithm 3 ("Seq", Lemma B.3) and
Algorithm 1 lines 11-12 (Lemma B.5 with the variance event of the proof of Theorem 5.2), re-derived
from the proofs in Appendices A-B; see the Notes of each function for what exactly holds.

Logarithms: ``log`` inside the iterated term is base 2. The stitching proof (Lemma B.5) splits time
into epochs ``2**l <= n < 2**(l+1)`` and needs ``log(n) >= l`` there; with a natural logarithm the
sum of the per-epoch failure probabilities exceeds the stated budget (``0.512 delta`` per side
instead of ``delta/2``), so base 2 is required for the proof to go through.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.stats.state_contract import check_header, restorer

__all__ = [
    "MIN_LOG_FACTOR",
    "SequentialMean",
    "bernstein_radius",
    "hoeffding_radius",
    "stitched_log_term",
]

#: Smallest ``log_factor`` c in ``ln(c K / delta)`` for which :func:`bernstein_radius` is valid at
#: total level delta over K strata: ``5 pi^2 / 6`` (five one-sided stitched events per stratum,
#: each failing with probability at most ``pi^2 delta / (6 c K)``). The paper uses c = 16.
MIN_LOG_FACTOR = 5.0 * math.pi**2 / 6.0


def stitched_log_term(n: ArrayLike, log_inv_level: ArrayLike) -> NDArray[np.float64]:
    """Return ``u_n = 2 ln(log2(n) + 1) + log_inv_level`` (elementwise, ``n >= 1``).

    Parameters
    ----------
    n : array_like
        Number of observations, at least 1.
    log_inv_level : array_like
        ``ln(4 / delta')`` for the one-sided level ``delta'`` of Lemma B.3 / B.5.

    Returns
    -------
    numpy.ndarray
        The stitched log term.

    Notes
    -----
    Lemma B.3/B.5: with this ``u_n``, a one-sided stitched bound fails with probability at most
    ``sum_l exp(-u_{2^l}) = (delta'/4) sum_l (l+1)^-2 = pi^2 delta' / 24 <= delta' / 2``.

    Examples
    --------
    >>> float(stitched_log_term(1, 0.0))
    0.0
    >>> round(float(stitched_log_term(4, 1.0)), 4)
    3.1972
    """
    n_arr = np.asarray(n, dtype=np.float64)
    return np.asarray(
        2.0 * np.log(np.log2(np.maximum(n_arr, 1.0)) + 1.0) + np.asarray(log_inv_level),
        dtype=np.float64,
    )


def hoeffding_radius(n: ArrayLike, delta: float) -> NDArray[np.float64]:
    """Radius of Cer-Eval's "Seq" interval, ``sqrt((2 ln(log2 n + 1) + ln(4/delta)) / n)``.

    Parameters
    ----------
    n : array_like
        Number of i.i.d. losses in [0, 1] seen so far (``n = 0`` gives ``inf``).
    delta : float
        Failure probability, ``0 < delta < 1``.

    Returns
    -------
    numpy.ndarray
        ``eps_n`` (Algorithm 3, line 3).

    Notes
    -----
    Guarantee (Lemma B.3 applied to both tails; stitched Hoeffding maximal inequality over the
    epochs ``[2^l, 2^(l+1))``): if the losses are conditionally i.i.d. in [0, 1] with mean R,

    ``P(exists n >= 1 : |mean_n - R| >= eps_n) <= pi^2 delta / 12 ~= 0.82 delta``.

    It holds simultaneously over all n (anytime: peek and stop whenever you like). The paper
    states ``delta/2`` per side by bounding ``sum (l+1)^-2 <= 2``; the exact sum gives the
    ``pi^2/24`` per side used here. Cost of being anytime-valid: at n = 5000, delta = 0.05 the
    radius is 0.0437 against 0.0192 for the fixed-n two-sided Hoeffding radius
    ``sqrt(ln(2/delta) / (2n))`` (2.28x). The iterated-log term ``2 ln(log2 n + 1)`` accounts for
    a factor 1.48; the rest is the stitching itself (the epoch maximal inequality runs to ``2n``
    while the threshold is set at n, halving the exponent) and ``ln(4/delta)`` vs ``ln(2/delta)``.

    Examples
    --------
    >>> r = hoeffding_radius([1, 100, 10000], 0.05)
    >>> [round(float(x), 4) for x in r]
    [2.0933, 0.2907, 0.0311]
    """
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    n_arr = np.asarray(n, dtype=np.float64)
    u = stitched_log_term(n_arr, math.log(4.0 / delta))
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.sqrt(u / n_arr)
    return np.asarray(np.where(n_arr > 0, r, np.inf), dtype=np.float64)


def bernstein_radius(
    n: ArrayLike,
    var_hat: ArrayLike,
    delta: float,
    n_strata: int = 1,
    log_factor: float = 16.0,
) -> NDArray[np.float64]:
    """Per-stratum empirical-Bernstein radius of Cer-Eval (Algorithm 1, lines 11-12).

    ``eta^2 = (2 ln(log2 n + 1) + ln(log_factor * K / delta)) / n`` and
    ``eps = 2 eta^2 / 3 + 2 sqrt(v_up eta^2)`` with ``v_up = min(var_hat + eta + eta^2, 1/4)``.

    Parameters
    ----------
    n : array_like
        Labels in the stratum (``n = 0`` gives ``inf``).
    var_hat : array_like
        Empirical variance with divisor n (Algorithm 1 line 10), broadcast against ``n``.
    delta : float
        Total failure probability over all strata.
    n_strata : int
        K, the number of strata the budget is split over (fixed in advance).
    log_factor : float
        The constant c in ``ln(c K / delta)``; the paper uses 16. Any ``c >= MIN_LOG_FACTOR``
        (``5 pi^2 / 6 ~= 8.22``) is valid; smaller values raise ``ValueError``.

    Returns
    -------
    numpy.ndarray
        The radius ``eps_k``.

    Notes
    -----
    Guarantee, checked against the proof of Theorem 5.2 and Lemmas B.3-B.5: let the labels of
    stratum k be conditionally i.i.d. draws (given everything before) from a fixed distribution on
    [0, 1] with mean ``R_k`` and variance ``v_k`` (adaptive choice of *which* stratum to label next
    is allowed; the stratum of a unit must not depend on its loss). With ``delta' = 4 delta/(cK)``
    the following one-sided stitched events each fail with probability at most
    ``pi^2 delta' / 24 = pi^2 delta / (6 c K)``, simultaneously over all n:

    * ``|mean_n - R_k| < eta_n`` (two events, Hoeffding, Lemma B.3);
    * ``mean_n((Z - R_k)^2) > v_k - eta_n`` (one event; then ``v_k <= var_hat + eta + eta^2``
      because ``var_hat = mean((Z - R_k)^2) - (mean_n - R_k)^2``);
    * ``|mean_n - R_k| < eta^2/3 + sqrt(eta^4/9 + 4 v_k eta^2)`` (two events, stitched Bernstein,
      Lemma B.5 with ``v_{2n} = 2 n v_k``), and the returned ``eps`` upper-bounds this because
      ``sqrt(a + b) <= sqrt(a) + sqrt(b)`` and ``v_k <= v_up`` on the previous events.

    Hence ``P(exists k, exists n: |mean_{k,n} - R_k| >= eps_{k,n}) <= 5 pi^2 delta / (6 c)``,
    which is ``0.514 delta`` for the paper's c = 16: the paper's constants are valid (its own
    accounting gives ``5 delta / 8`` one-sided) but loose; ``c = MIN_LOG_FACTOR`` spends exactly
    delta. Capping ``v_up`` at 1/4 (the largest variance on [0, 1]) is an always-valid tightening
    not in the paper. The event ``var_hat <= v_k + eta`` of the paper's proof is only needed for the
    sample-complexity bound, not for validity, and is not charged here.

    Cost: at n = 5000, delta = 0.05, K = 1, ``var_hat = 0.08`` the radius is 0.0351 (0.0337 with
    ``c = MIN_LOG_FACTOR``) against 0.0111 for a fixed-n Bernstein radius with known variance. Most
    of the gap is the variance-estimation term ``eta`` in ``v_up`` (eta ~= 0.047 here), which
    dominates whenever ``v_k < eta``: three strata of 1667 labels with ``v = 0.0093`` get 0.058
    each, worse than the single-stratum 0.035. Stratifying pays only once ``n_k`` is large enough
    that ``eta_k`` is below the stratum variance (the ``eps^(2/3)`` term of Theorem 5.2).

    Examples
    --------
    >>> round(float(bernstein_radius(1000, 0.01, 0.05, n_strata=3)), 4)
    0.0855
    >>> float(bernstein_radius(0, 0.0, 0.05))
    inf
    """
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    if n_strata < 1:
        raise ValueError(f"n_strata must be >= 1, got {n_strata}")
    if log_factor < MIN_LOG_FACTOR:
        raise ValueError(f"log_factor must be >= {MIN_LOG_FACTOR:.4f}, got {log_factor}")
    n_arr = np.asarray(n, dtype=np.float64)
    v = np.asarray(var_hat, dtype=np.float64)
    u = stitched_log_term(n_arr, math.log(log_factor * n_strata / delta))
    with np.errstate(divide="ignore", invalid="ignore"):
        eta2 = u / n_arr
        eta = np.sqrt(eta2)
        v_up = np.minimum(v + eta + eta2, 0.25)
        eps = 2.0 * eta2 / 3.0 + 2.0 * np.sqrt(v_up * eta2)
    return np.asarray(np.where(n_arr > 0, eps, np.inf), dtype=np.float64)


class SequentialMean:
    """Cer-Eval "Seq" (Algorithm 3): running mean with the stitched Hoeffding radius.

    Parameters
    ----------
    delta : float
        Failure probability, ``0 < delta < 1``.

    Notes
    -----
    Guarantee: for losses in [0, 1] that are conditionally i.i.d. with mean R given the past,
    ``P(exists n: R not in [lower_n, upper_n]) <= pi^2 delta / 12 < delta`` (see
    :func:`hoeffding_radius`); valid under optional stopping and continuous monitoring.
    ``lower``/``upper`` are clipped to [0, 1], which keeps validity. The mean is accumulated with
    a compensated (Neumaier) sum so restarts from :meth:`to_state` are bit-identical.

    Examples
    --------
    >>> s = SequentialMean(delta=0.05)
    >>> for x in [0.0, 1.0, 0.0, 0.0]:
    ...     s.update(x)
    >>> s.n, s.mean, round(s.radius, 4)
    (4, 0.25, 1.2825)
    >>> SequentialMean.from_state(s.to_state()).to_state() == s.to_state()
    True
    """

    def __init__(self, delta: float) -> None:
        if not 0.0 < delta < 1.0:
            raise ValueError(f"delta must be in (0, 1), got {delta}")
        self._delta = float(delta)
        self._n = 0
        self._sum = 0.0
        self._comp = 0.0

    def update(self, loss: float) -> None:
        """Add one loss in [0, 1]."""
        x = float(loss)
        if not 0.0 <= x <= 1.0:
            raise ValueError(f"loss must be in [0, 1], got {loss}")
        t = self._sum + x
        if abs(self._sum) >= abs(x):
            self._comp += (self._sum - t) + x
        else:
            self._comp += (x - t) + self._sum
        self._sum = t
        self._n += 1

    @property
    def delta(self) -> float:
        """Failure probability."""
        return self._delta

    @property
    def n(self) -> int:
        """Number of losses seen."""
        return self._n

    @property
    def mean(self) -> float:
        """Running mean (0.5 before any loss)."""
        return (self._sum + self._comp) / self._n if self._n else 0.5

    @property
    def radius(self) -> float:
        """Stitched Hoeffding radius ``eps_n`` (``inf`` before any loss)."""
        return float(hoeffding_radius(self._n, self._delta))

    @property
    def lower(self) -> float:
        """Lower end of the anytime interval, clipped to [0, 1]."""
        return max(0.0, self.mean - self.radius)

    @property
    def upper(self) -> float:
        """Upper end of the anytime interval, clipped to [0, 1]."""
        return min(1.0, self.mean + self.radius)

    def to_state(self) -> dict[str, object]:
        """Return a JSON-serializable state (floats round-trip exactly)."""
        return {"kind": "cereval_seq", "delta": self._delta, "n": self._n,
                "sum": self._sum, "comp": self._comp}

    @classmethod
    @restorer("SequentialMean")
    def from_state(cls, state: dict[str, object]) -> SequentialMean:
        """Rebuild from :meth:`to_state` output."""
        check_header(state, "cereval_seq", None, "SequentialMean")
        obj = cls(float(state["delta"]))  # type: ignore[arg-type]
        obj._n = int(state["n"])  # type: ignore[call-overload]
        obj._sum = float(state["sum"])  # type: ignore[arg-type]
        obj._comp = float(state["comp"])  # type: ignore[arg-type]
        return obj
