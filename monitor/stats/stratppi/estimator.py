"""Stratified PPI++ mean (StratPPI, Fisch et al.) with per-stratum lambda and traffic weights.

The estimate and its **asymptotic** (normal-approximation) interval follow Theorem 2 / Corollary 2
for 1-d mean estimation; lambda per stratum follows Proposition 2 / eq. 18; allocation rules
(Proposition 3 / eq. 19-22) and audit rates are in :mod:`monitor.stats.stratppi.allocation`. Unlike
the certified intervals of :mod:`monitor.stats.cereval.certified_mean`, nothing here holds at finite
n or under continuous monitoring: the interval is a fixed-n, large-n approximation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.stats.state_contract import check_header, restorer
from monitor.stats.stratppi.allocation import (
    heuristic_sd,
    optimal_allocation,
    proportional_allocation,
)

__all__ = ["DEFAULT_PPI_ALPHA", "StratifiedPPIMean", "ppi_lambda", "stratified_ppi"]

DEFAULT_PPI_ALPHA = 0.1
"""Miscoverage of the asymptotic StratPPI interval (a 90% interval)."""

F64 = NDArray[np.float64]


def ppi_lambda(cov_yf: ArrayLike, var_f: ArrayLike, n: ArrayLike, big_n: ArrayLike) -> F64:
    """Per-stratum PPI++ weight, eq. 18: ``Cov(Y, f) / ((1 + n_k/N_k) Var(f))``.

    Returns 0 where ``N_k = 0`` or ``Var(f) = 0`` (no synthetic data to lean on).

    Examples
    --------
    >>> ppi_lambda([0.04, 0.0], [0.05, 0.0], [100, 10], [900, 0]).tolist()
    [0.72, 0.0]
    """
    c = np.asarray(cov_yf, dtype=np.float64)
    v = np.asarray(var_f, dtype=np.float64)
    nn = np.asarray(n, dtype=np.float64)
    bn = np.asarray(big_n, dtype=np.float64)
    ok = (bn > 0) & (v > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = c / ((1.0 + nn / np.where(bn > 0, bn, 1.0)) * v)
    return np.asarray(np.where(ok, lam, 0.0), dtype=np.float64)


def stratified_ppi(
    weights: ArrayLike,
    n: ArrayLike,
    mean_y: ArrayLike,
    mean_f: ArrayLike,
    var_y: ArrayLike,
    var_f: ArrayLike,
    cov_yf: ArrayLike,
    big_n: ArrayLike,
    mean_fu: ArrayLike,
    var_fu: ArrayLike,
    *,
    lam: ArrayLike | None = None,
) -> tuple[F64, F64, F64]:
    """StratPPI mean estimate, its asymptotic standard error, and the lambdas used.

    All inputs broadcast; strata on the last axis (vectorize over repetitions on leading axes).
    Labelled moments (``n``, ``mean_y``, ``mean_f``, ``var_y``, ``var_f``, ``cov_yf``; sample
    variances with divisor n-1) and unlabelled moments (``big_n``, ``mean_fu``, ``var_fu``).

    Parameters
    ----------
    weights : array_like
        Stratum weights ``w_k`` (sum 1 over the last axis).
    n, mean_y, mean_f, var_y, var_f, cov_yf : array_like
        Labelled sample size and moments of human loss Y and judge loss f per stratum.
    big_n, mean_fu, var_fu : array_like
        Unlabelled (synthetic) sample size and judge-loss mean / variance per stratum.
    lam : array_like, optional
        Fixed lambdas; default: eq. 18 plug-in with ``Var(f)`` pooled over labelled and
        unlabelled judge losses.

    Returns
    -------
    estimate, se, lam : numpy.ndarray
        ``theta = sum_k w_k (mean_y - lam mean_f + lam mean_fu)``,
        ``se^2 = sum_k w_k^2 (lam^2 var_fu / N_k + Var(Y - lam f) / n_k)`` (``inf`` if a weighted
        stratum has ``n_k < 2``), and the lambdas.

    Notes
    -----
    Asymptotic only (Theorem 2): ``(theta - theta*) / se -> N(0, 1)`` as ``n_k, N_k -> inf`` with
    fixed shares and ``lambda_hat -> lambda``. The target is ``theta* = sum_k w_k E[Y | k]`` for the
    given weights; with observed traffic shares as weights it is the risk over the traffic seen
    (shares treated as known). For fixed lambda the estimate is exactly unbiased for that target
    whatever the per-stratum sampling rates. The plug-in lambda, fitted on the same labels, adds an
    O(1/n_k) bias because ``lambda_hat`` correlates with ``mean_f - mean_fu``: in the unequal-audit
    test (about 72 labels in the large stratum, binary loss) it was -0.0066, a third of one run's
    standard error. Pass a fixed ``lam`` (e.g. fitted on earlier data) to remove it.

    Examples
    --------
    >>> est, se, lam = stratified_ppi([0.5, 0.5], [100, 100], [0.2, 0.6], [0.25, 0.5],
    ...                               [0.16, 0.24], [0.05, 0.05], [0.04, 0.04],
    ...                               [1000, 1000], [0.3, 0.5], [0.05, 0.05])
    >>> round(float(est), 4), round(float(se), 4), [round(x, 3) for x in lam.tolist()]
    (0.4181, 0.0292, [0.725, 0.728])
    """
    w = np.asarray(weights, dtype=np.float64)
    nn = np.asarray(n, dtype=np.float64)
    my = np.asarray(mean_y, dtype=np.float64)
    mf = np.asarray(mean_f, dtype=np.float64)
    vy = np.asarray(var_y, dtype=np.float64)
    vf = np.asarray(var_f, dtype=np.float64)
    cyf = np.asarray(cov_yf, dtype=np.float64)
    bn = np.asarray(big_n, dtype=np.float64)
    mfu = np.asarray(mean_fu, dtype=np.float64)
    vfu = np.asarray(var_fu, dtype=np.float64)
    if lam is None:
        tot = nn + bn
        with np.errstate(divide="ignore", invalid="ignore"):
            m2 = (np.maximum(nn - 1, 0) * vf + np.maximum(bn - 1, 0) * vfu
                  + nn * bn / np.where(tot > 0, tot, 1.0) * (mf - mfu) ** 2)
            v_all = np.where(tot > 1, m2 / np.maximum(tot - 1, 1.0), 0.0)
        lam_arr = ppi_lambda(cyf, v_all, nn, bn)
    else:
        lam_arr = np.broadcast_to(np.asarray(lam, dtype=np.float64), np.broadcast(w, nn).shape)
    lam_arr = np.where(bn > 0, lam_arr, 0.0)
    mfu0 = np.where(bn > 0, mfu, 0.0)
    strat = my - lam_arr * mf + lam_arr * mfu0
    est = np.sum(w * strat, axis=-1)
    vres = np.maximum(vy - 2.0 * lam_arr * cyf + lam_arr**2 * vf, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        term = (np.where(bn > 0, lam_arr**2 * vfu / np.where(bn > 0, bn, 1.0), 0.0)
                + np.where(nn >= 2, vres / np.where(nn > 0, nn, 1.0), np.inf))
        var = np.sum(np.where(w > 0, w**2 * term, 0.0), axis=-1)
    return (np.asarray(est, dtype=np.float64), np.asarray(np.sqrt(var), dtype=np.float64),
            np.asarray(lam_arr, dtype=np.float64))


class StratifiedPPIMean:
    """Online StratPPI mean of the human loss per (suite, model), with traffic-share weights.

    Parameters
    ----------
    n_strata : int
        K.
    alpha : float
        Miscoverage of the asymptotic interval.
    weights : sequence of float, optional
        Known stratum masses; default: observed traffic shares ``(n_k + N_k) / total``.

    Notes
    -----
    Rounds: :meth:`update_label` takes an audited unit's human and judge loss; :meth:`update_judge`
    an unaudited unit's judge loss (the synthetic pool). Traffic per stratum = both. The interval
    ``[lower, upper]`` is the **asymptotic** normal interval of Corollary 2 at a fixed sample size;
    it is not anytime-valid (repeated looks inflate the error rate) and is not a certificate. Use
    :class:`monitor.stats.cereval.certified_mean.StratifiedCertifiedMean` for a guarantee.

    Examples
    --------
    >>> m = StratifiedPPIMean(n_strata=2, alpha=0.1)
    >>> for i in range(400):
    ...     k = i % 2
    ...     f = 0.1 * k + 0.05 * (i % 7)
    ...     m.update_judge(k, f)
    ...     if i % 4 < 2:
    ...         m.update_label(k, min(1.0, f + 0.05), f)
    >>> round(m.estimate, 4), m.labels, m.unlabelled
    (0.2496, [100, 100], [200, 200])
    >>> m.lower < m.estimate < m.upper
    True
    >>> StratifiedPPIMean.from_state(m.to_state()).to_state() == m.to_state()
    True
    """

    _LAB = ("n", "my", "mf", "m2y", "m2f", "cyf")
    _UNL = ("N", "mfu", "m2fu")

    def __init__(self, n_strata: int, alpha: float = DEFAULT_PPI_ALPHA,
                 weights: Sequence[float] | None = None) -> None:
        if n_strata < 1:
            raise ValueError(f"n_strata must be >= 1, got {n_strata}")
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        self._k = int(n_strata)
        self._alpha = float(alpha)
        self._fixed: list[float] | None = None
        if weights is not None:
            w = [float(x) for x in weights]
            if len(w) != self._k or min(w) < 0 or not math.isclose(sum(w), 1.0, abs_tol=1e-9):
                raise ValueError("weights must be K non-negative numbers summing to 1")
            self._fixed = w
        self._s: dict[str, list[float]] = {name: [0.0] * self._k for name in self._LAB + self._UNL}

    def _idx(self, stratum: int) -> int:
        s = int(stratum)
        if not 0 <= s < self._k:
            raise ValueError(f"stratum must be in [0, {self._k}), got {stratum}")
        return s

    @staticmethod
    def _unit(x: float, name: str) -> float:
        v = float(x)
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {x}")
        return v

    def update_label(self, stratum: int, human_loss: float, judge_loss: float) -> None:
        """Add an audited unit (human and judge loss of the same unit)."""
        k = self._idx(stratum)
        y = self._unit(human_loss, "human_loss")
        f = self._unit(judge_loss, "judge_loss")
        s = self._s
        s["n"][k] += 1.0
        n = s["n"][k]
        dy = y - s["my"][k]
        df = f - s["mf"][k]
        s["my"][k] += dy / n
        s["mf"][k] += df / n
        s["m2y"][k] += dy * (y - s["my"][k])
        s["m2f"][k] += df * (f - s["mf"][k])
        s["cyf"][k] += dy * (f - s["mf"][k])

    def update_judge(self, stratum: int, judge_loss: float) -> None:
        """Add an unaudited unit's judge loss (synthetic pool)."""
        k = self._idx(stratum)
        f = self._unit(judge_loss, "judge_loss")
        s = self._s
        s["N"][k] += 1.0
        d = f - s["mfu"][k]
        s["mfu"][k] += d / s["N"][k]
        s["m2fu"][k] += d * (f - s["mfu"][k])

    def _a(self, name: str) -> F64:
        return np.array(self._s[name], dtype=np.float64)

    @property
    def n_strata(self) -> int:
        """K."""
        return self._k

    @property
    def alpha(self) -> float:
        """Miscoverage of the asymptotic interval."""
        return self._alpha

    @property
    def labels(self) -> list[int]:
        """Labelled (audited) units per stratum."""
        return [int(x) for x in self._s["n"]]

    @property
    def unlabelled(self) -> list[int]:
        """Unaudited judge-only units per stratum."""
        return [int(x) for x in self._s["N"]]

    @property
    def weights(self) -> F64:
        """Fixed masses, else traffic shares (uniform before any traffic)."""
        if self._fixed is not None:
            return np.array(self._fixed)
        t = self._a("n") + self._a("N")
        return t / t.sum() if t.sum() > 0 else np.full(self._k, 1.0 / self._k)

    def _fit(self) -> tuple[F64, F64, F64]:
        n, big_n = self._a("n"), self._a("N")
        with np.errstate(divide="ignore", invalid="ignore"):
            d1 = np.where(n > 1, n - 1, 1.0)
            d2 = np.where(big_n > 1, big_n - 1, 1.0)
            return stratified_ppi(self.weights, n, self._a("my"), self._a("mf"),
                                  self._a("m2y") / d1, self._a("m2f") / d1, self._a("cyf") / d1,
                                  big_n, self._a("mfu"), self._a("m2fu") / d2)

    @property
    def estimate(self) -> float:
        """StratPPI point estimate of the traffic-weighted mean human loss."""
        return float(self._fit()[0])

    @property
    def standard_error(self) -> float:
        """Asymptotic standard error (``inf`` while a weighted stratum has < 2 labels)."""
        return float(self._fit()[1])

    @property
    def lambdas(self) -> F64:
        """Per-stratum lambda (eq. 18 plug-in)."""
        return self._fit()[2]

    @property
    def lower(self) -> float:
        """Lower end of the ASYMPTOTIC ``1 - alpha`` interval (not a certificate)."""
        z = NormalDist().inv_cdf(1.0 - self._alpha / 2.0)
        return self.estimate - z * self.standard_error

    @property
    def upper(self) -> float:
        """Upper end of the ASYMPTOTIC ``1 - alpha`` interval (not a certificate)."""
        z = NormalDist().inv_cdf(1.0 - self._alpha / 2.0)
        return self.estimate + z * self.standard_error

    def allocation(self, rule: Literal["proportional", "heuristic", "plugin"]) -> F64:
        """Label shares per stratum.

        ``proportional``: ``w_k``. ``heuristic``: eq. 19 with :func:`heuristic_sd` (lambda = 1)
        from all judge losses of the stratum. ``plugin``: eq. 19 with the labelled residual
        standard deviation ``sd(Y - lambda_k f)`` (heuristic where a stratum has < 2 labels).

        Notes
        -----
        A spread that is 0 up to round-off counts as exactly 0 (:func:`heuristic_sd`), and when
        every stratum's spread is 0 the shares fall back to proportional (``w_k``,
        :func:`optimal_allocation`). This is the case of ``heuristic`` with judge losses in
        {0, 1}: ``E[f (1 - f)] = 0`` in every stratum, and eq. 19 is 0/0. Any allocation keeps
        the asymptotic validity of the interval; the rule only affects efficiency.

        Examples
        --------
        >>> m = StratifiedPPIMean(3)
        >>> for i in range(90):
        ...     m.update_judge(i % 3, float(i % 10 < 3))
        >>> m.allocation("heuristic").tolist() == m.weights.tolist()
        True
        """
        w = self.weights
        if rule == "proportional":
            return proportional_allocation(w)
        n, big_n = self._a("n"), self._a("N")
        tot = n + big_n
        mf, mfu = self._a("mf"), self._a("mfu")
        with np.errstate(divide="ignore", invalid="ignore"):
            mean_all = np.where(tot > 0, (n * mf + big_n * mfu) / tot, 0.0)
            m2_all = (self._a("m2f") + self._a("m2fu")
                      + np.where(tot > 0, n * big_n / tot, 0.0) * (mf - mfu) ** 2)
            ef2 = np.where(tot > 0, m2_all / tot, 0.0) + mean_all**2
        sd = heuristic_sd(mean_all, ef2, 1.0)
        if rule == "plugin":
            lam = self.lambdas
            with np.errstate(divide="ignore", invalid="ignore"):
                d1 = np.where(n > 1, n - 1, 1.0)
                vres = (self._a("m2y") - 2 * lam * self._a("cyf") + lam**2 * self._a("m2f")) / d1
            sd = np.where(n >= 2, np.sqrt(np.maximum(vres, 0.0)), sd)
        elif rule != "heuristic":
            raise ValueError(f"unknown allocation rule {rule!r}")
        return optimal_allocation(w, sd)

    def to_state(self) -> dict[str, object]:
        """Return a JSON-serializable state (floats round-trip exactly)."""
        out: dict[str, object] = {"kind": "stratppi", "n_strata": self._k, "alpha": self._alpha,
                                  "weights": None if self._fixed is None else list(self._fixed)}
        out.update({name: list(v) for name, v in self._s.items()})
        return out

    @classmethod
    @restorer("StratifiedPPIMean")
    def from_state(cls, state: dict[str, object]) -> StratifiedPPIMean:
        """Rebuild from :meth:`to_state` output."""
        check_header(state, "stratppi", None, "StratifiedPPIMean")
        w = state["weights"]
        obj = cls(int(state["n_strata"]), float(state["alpha"]),  # type: ignore[call-overload, arg-type]
                  None if w is None else [float(x) for x in w])  # type: ignore[attr-defined]
        for name in cls._LAB + cls._UNL:
            vals = [float(x) for x in state[name]]  # type: ignore[attr-defined]
            if len(vals) != obj._k:
                raise ValueError(f"state field {name!r} has wrong length")
            obj._s[name] = vals
        return obj
