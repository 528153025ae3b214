"""Cer-Eval partitioned certified mean (Algorithm 1) with the target-stratum rule (step 3).

Online, per (suite, model): one :class:`StratifiedCertifiedMean` holds per-stratum label statistics
(Welford mean / variance) and per-stratum traffic counts, and reports an anytime-valid interval for
the traffic-weighted risk. The radii are in :mod:`monitor.stats.cereval.stitched_radii`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.stats.cereval.stitched_radii import MIN_LOG_FACTOR, bernstein_radius
from monitor.stats.state_contract import check_header, restorer

__all__ = ["StratifiedCertifiedMean", "traffic_weighted_mean"]


def traffic_weighted_mean(
    traffic: ArrayLike, label_sums: ArrayLike, label_counts: ArrayLike
) -> NDArray[np.float64]:
    """Post-stratified estimate ``sum_k p_k * mean_k`` with ``p_k`` the observed traffic share.

    Vectorized over leading axes; strata on the last axis. A stratum with traffic but no label
    contributes ``p_k * 0.5`` (the midpoint of [0, 1]).

    Parameters
    ----------
    traffic : array_like
        Units seen per stratum (audited or not).
    label_sums : array_like
        Sum of human losses per stratum.
    label_counts : array_like
        Number of labels per stratum.

    Returns
    -------
    numpy.ndarray
        The estimate, shape of the leading axes.

    Notes
    -----
    Target: the risk over the traffic seen, ``theta = sum_k p_k R_k`` with ``R_k`` the mean loss
    in stratum k. Conditionally on the traffic's stratum counts and on ``n_k >= 1``, the estimate
    is exactly unbiased for ``theta`` whatever the per-stratum audit rates, provided the audit
    decision is independent of the losses (labels are a random subsample of each stratum). The
    naive pooled label mean is biased whenever audit rates differ and the ``R_k`` differ.

    Examples
    --------
    >>> float(traffic_weighted_mean([900, 100], [9.0, 5.0], [90, 10]))
    0.14
    """
    p = np.asarray(traffic, dtype=np.float64)
    s = np.asarray(label_sums, dtype=np.float64)
    c = np.asarray(label_counts, dtype=np.float64)
    share = p / np.sum(p, axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        means = np.where(c > 0, s / c, 0.5)
    return np.asarray(np.sum(share * means, axis=-1), dtype=np.float64)


class StratifiedCertifiedMean:
    """Cer-Eval's partitioned certified interval, online, with traffic-share weights.

    Parameters
    ----------
    n_strata : int
        K, fixed in advance (the failure budget is split as delta/K per stratum).
    delta : float
        Total failure probability of the interval, over all strata and all times.
    log_factor : float
        Constant c of ``ln(c K / delta)``; paper: 16 (see :func:`bernstein_radius`).
    weights : sequence of float, optional
        Known stratum masses (e.g. ``N_k / N`` of a fixed dataset). If omitted, the weights are the
        observed traffic shares from :meth:`observe_traffic` (uniform before any traffic).

    Notes
    -----
    Guarantee (anytime, union over strata): if within each stratum the labels are conditionally
    i.i.d. from that stratum's loss distribution on [0, 1] (audit independent of the loss; which
    stratum to label may depend on the past, e.g. :attr:`target_stratum` or audit rates steered by
    :meth:`allocation`), then with probability at least ``1 - 5 pi^2 delta / (6c)``
    (``>= 1 - delta`` for ``c >= 8.22``; ``0.514 delta`` spent at c = 16) the per-stratum intervals
    ``[mean_k - eps_k, mean_k + eps_k]`` hold simultaneously for all strata and all label counts.
    On that event, for every weight vector w at every time, ``sum_k w_k R_k`` lies in
    ``[lower, upper]``. Hence the interval covers the **risk over the traffic seen**,
    ``theta_t = sum_k p_{k,t} R_k`` with the observed traffic shares ``p_{k,t}`` treated as known
    constants (finite-population target for the traffic's stratum mix), uniformly over time and
    under unequal audit rates. For the population risk ``sum_k mu_k R_k`` add the share error
    ``sum_k |p_k - mu_k| / 2`` (not included; traffic is usually much larger than the labels).

    What is *not* covered: strata that move with the labels. Re-fitting a partition from the labels
    (Cer-Eval's Algorithm 2 every step) makes the stratum of a labelled unit depend on its loss; the
    paper's Theorem 5.2 assumes a fixed (benign) partition. Fit the partition on warm-up data,
    freeze it, and certify with labels collected afterwards
    (:mod:`monitor.stats.cereval.partition`). K must be fixed in advance; strata created later need
    a new instance (new budget).

    Examples
    --------
    >>> m = StratifiedCertifiedMean(n_strata=2, delta=0.05)
    >>> m.observe_traffic(0, 900)
    >>> m.observe_traffic(1, 100)
    >>> for i in range(200):
    ...     m.update(0, 0.0 if i % 10 else 1.0)
    ...     m.update(1, 0.5)
    >>> round(m.estimate, 4), m.labels
    (0.14, [200, 200])
    >>> m.lower <= m.estimate <= m.upper
    True
    >>> m.target_stratum
    0
    >>> StratifiedCertifiedMean.from_state(m.to_state()).to_state() == m.to_state()
    True
    """

    def __init__(
        self,
        n_strata: int,
        delta: float,
        log_factor: float = 16.0,
        weights: Sequence[float] | None = None,
    ) -> None:
        if n_strata < 1:
            raise ValueError(f"n_strata must be >= 1, got {n_strata}")
        if not 0.0 < delta < 1.0:
            raise ValueError(f"delta must be in (0, 1), got {delta}")
        if log_factor < MIN_LOG_FACTOR:
            raise ValueError(f"log_factor must be >= {MIN_LOG_FACTOR:.4f}, got {log_factor}")
        self._k = int(n_strata)
        self._delta = float(delta)
        self._c = float(log_factor)
        self._fixed: list[float] | None = None
        if weights is not None:
            w = [float(x) for x in weights]
            if len(w) != self._k or min(w) < 0.0 or not math.isclose(sum(w), 1.0, abs_tol=1e-9):
                raise ValueError("weights must be K non-negative numbers summing to 1")
            self._fixed = w
        self._n = [0] * self._k
        self._mean = [0.0] * self._k
        self._m2 = [0.0] * self._k
        self._traffic = [0] * self._k

    # ---------------------------------------------------------------- updates
    def _check(self, stratum: int) -> int:
        s = int(stratum)
        if not 0 <= s < self._k:
            raise ValueError(f"stratum must be in [0, {self._k}), got {stratum}")
        return s

    def update(self, stratum: int, loss: float) -> None:
        """Add one human label (loss in [0, 1]) of an audited unit of ``stratum``."""
        s = self._check(stratum)
        x = float(loss)
        if not 0.0 <= x <= 1.0:
            raise ValueError(f"loss must be in [0, 1], got {loss}")
        self._n[s] += 1
        d = x - self._mean[s]
        self._mean[s] += d / self._n[s]
        self._m2[s] += d * (x - self._mean[s])

    def observe_traffic(self, stratum: int, count: int = 1) -> None:
        """Count ``count`` units of traffic in ``stratum`` (every unit, audited or not)."""
        s = self._check(stratum)
        if count < 0:
            raise ValueError("count must be >= 0")
        self._traffic[s] += int(count)

    # ------------------------------------------------------------- properties
    @property
    def n_strata(self) -> int:
        """K."""
        return self._k

    @property
    def delta(self) -> float:
        """Total failure probability."""
        return self._delta

    @property
    def labels(self) -> list[int]:
        """Labels per stratum."""
        return list(self._n)

    @property
    def n_labels(self) -> int:
        """Total labels."""
        return sum(self._n)

    @property
    def traffic(self) -> list[int]:
        """Traffic units per stratum."""
        return list(self._traffic)

    @property
    def weights(self) -> NDArray[np.float64]:
        """Stratum weights: fixed masses, else observed traffic shares (uniform if no traffic)."""
        if self._fixed is not None:
            return np.array(self._fixed)
        t = np.array(self._traffic, dtype=np.float64)
        total = t.sum()
        return t / total if total > 0 else np.full(self._k, 1.0 / self._k)

    @property
    def stratum_means(self) -> NDArray[np.float64]:
        """Per-stratum label means (0.5 where no label yet)."""
        n = np.array(self._n)
        return np.where(n > 0, np.array(self._mean), 0.5)

    @property
    def stratum_variances(self) -> NDArray[np.float64]:
        """Per-stratum empirical variances with divisor n (0 where n < 2)."""
        n = np.array(self._n, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(n > 0, np.array(self._m2) / n, 0.0)

    @property
    def stratum_radii(self) -> NDArray[np.float64]:
        """Per-stratum radii ``eps_k`` (inf where no label)."""
        return bernstein_radius(np.array(self._n), self.stratum_variances, self._delta,
                                self._k, self._c)

    @property
    def estimate(self) -> float:
        """Point estimate ``sum_k w_k mean_k`` of the risk over the traffic seen."""
        return float(np.sum(self.weights * self.stratum_means))

    @property
    def lower(self) -> float:
        """Certified lower bound ``sum_k w_k max(0, mean_k - eps_k)``."""
        lo = np.maximum(0.0, self.stratum_means - self.stratum_radii)
        return float(np.sum(self.weights * lo))

    @property
    def upper(self) -> float:
        """Certified upper bound ``sum_k w_k min(1, mean_k + eps_k)``."""
        hi = np.minimum(1.0, self.stratum_means + self.stratum_radii)
        return float(np.sum(self.weights * hi))

    @property
    def half_width(self) -> float:
        """``(upper - lower) / 2``; compare with a precision goal epsilon."""
        return 0.5 * (self.upper - self.lower)

    @property
    def paper_radius(self) -> float:
        """The paper's ``eps_hat = sum_k w_k eps_k`` (unclipped; inf if a weighted stratum empty).

        Always ``>= half_width``; both are valid half-widths around different centres.
        """
        w = self.weights
        r = self.stratum_radii
        return float(np.sum(np.where(w > 0, w * r, 0.0)))

    def marginal_gains(self) -> NDArray[np.float64]:
        """Decrease of the weighted radius from one more label per stratum, variance held fixed.

        ``w_k (eps_k(n_k) - eps_k(n_k + 1))``: the finite-difference form of Algorithm 1 step 3's
        ``|d eps_k / d n_k| N_k / N``. Empty strata with positive weight get ``inf``.
        """
        n = np.array(self._n)
        v = self.stratum_variances
        now = bernstein_radius(n, v, self._delta, self._k, self._c)
        nxt = bernstein_radius(n + 1, v, self._delta, self._k, self._c)
        w = self.weights
        with np.errstate(invalid="ignore"):
            g = np.where(n > 0, w * (now - nxt), np.where(w > 0, np.inf, 0.0))
        return np.asarray(g, dtype=np.float64)

    @property
    def target_stratum(self) -> int:
        """Algorithm 1 step 3: the stratum whose next label shrinks the weighted radius most.

        Ties (e.g. several empty strata) go to the larger weight, then the lower index.
        """
        g = self.marginal_gains()
        w = self.weights
        order = np.lexsort((np.arange(self._k), -w, -g))
        return int(order[0])

    def allocation(self) -> NDArray[np.float64]:
        """Label shares minimizing ``sum_k w_k eps_k`` at large n: ``∝ (w_k sqrt(v_up,k))^(2/3)``.

        From ``eps_k ~ 2 sqrt(v_k u / n_k)``: minimizing ``sum_k w_k sqrt(v_k / n_k)`` subject to
        ``sum_k n_k = n`` gives ``n_k ∝ (w_k^2 v_k)^(1/3)``. Uses the variance upper bound
        ``v_up`` (1/4 for empty strata) so a stratum that looks constant early is not starved.
        Use with :func:`monitor.stats.stratppi.allocation.audit_rates` (with a floor) to steer
        auditing.
        """
        n = np.array(self._n, dtype=np.float64)
        u = np.where(n > 0, np.log(np.log2(np.maximum(n, 1.0)) + 1.0) * 2.0
                     + math.log(self._c * self._k / self._delta), 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            eta2 = np.where(n > 0, u / n, 1.0)
        v_up = np.where(n > 0, np.minimum(self.stratum_variances + np.sqrt(eta2) + eta2, 0.25),
                        0.25)
        score = np.cbrt(self.weights**2 * v_up)
        total = float(score.sum())
        return score / total if total > 0 else np.full(self._k, 1.0 / self._k)

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, object]:
        """Return a JSON-serializable state (floats round-trip exactly)."""
        return {
            "kind": "cereval_stratified",
            "n_strata": self._k,
            "delta": self._delta,
            "log_factor": self._c,
            "weights": None if self._fixed is None else list(self._fixed),
            "n": list(self._n),
            "mean": list(self._mean),
            "m2": list(self._m2),
            "traffic": list(self._traffic),
        }

    @classmethod
    @restorer("StratifiedCertifiedMean")
    def from_state(cls, state: dict[str, object]) -> StratifiedCertifiedMean:
        """Rebuild from :meth:`to_state` output."""
        check_header(state, "cereval_stratified", None, "StratifiedCertifiedMean")
        w = state["weights"]
        obj = cls(
            int(state["n_strata"]),  # type: ignore[call-overload]
            float(state["delta"]),  # type: ignore[arg-type]
            float(state["log_factor"]),  # type: ignore[arg-type]
            None if w is None else [float(x) for x in w],  # type: ignore[attr-defined]
        )
        obj._n = [int(x) for x in state["n"]]  # type: ignore[attr-defined]
        obj._mean = [float(x) for x in state["mean"]]  # type: ignore[attr-defined]
        obj._m2 = [float(x) for x in state["m2"]]  # type: ignore[attr-defined]
        obj._traffic = [int(x) for x in state["traffic"]]  # type: ignore[attr-defined]
        if not len(obj._n) == len(obj._mean) == len(obj._m2) == len(obj._traffic) == obj._k:
            raise ValueError("inconsistent state lengths")
        return obj
