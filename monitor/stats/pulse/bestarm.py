"""Anytime-valid best-model certificate from per-model betting confidence sequences on AIPW.

For each model the per-draw AIPW increments of
:func:`monitor.stats.pulse.aipw_plan.sequential_increments` all have conditional mean ``mu_i`` (the
model's mean score on the fixed benchmark) and a range ``[lo_b, hi_b]`` known before the draw. Two
one-sided betting processes per model,

``K+_t(m) = prod_b (1 + lp_b (theta_b - m))``,   ``K-_t(m) = prod_b (1 - lm_b (theta_b - m))``,

with predictable bets ``lp_b, lm_b >= 0`` are nonnegative martingales at ``m = mu_i``. Each is run
at level ``delta / (2 m_models)`` (Bonferroni over ``m`` models and two sides), so by Ville's
inequality all ``m`` intervals cover their means at every time simultaneously with probability at
least ``1 - delta``. A model is certified best when its lower bound exceeds every other model's
upper bound minus ``epsilon``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.stats.state_contract import restorer, size

FloatArray = NDArray[np.float64]
_MARGIN = 1e-12  # guards the strict comparison against floating-point rounding of the bounds


def _bisect(f: Any, lo: float, hi: float, keep_hi: bool, tol: float = 1e-9) -> float:
    # Invariant: f(lo) and f(hi) on opposite sides of the threshold; returns the conservative end.
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if f(mid):
            hi = mid
        else:
            lo = mid
    return hi if keep_hi else lo


class BestModelCertifier:
    """Per-model betting confidence sequences combined into a best-model certificate.

    Parameters
    ----------
    n_models : int
        Number of models ``m``.
    delta : float
        Family-wise error level in (0, 1).
    epsilon : float
        Tolerance: certify ``i`` when ``lower_i > upper_k - epsilon`` for every ``k != i``.
    bet_cap : float
        ``c`` in (0, 1): every factor stays ``>= 1 - c``.

    Notes
    -----
    Guarantee. Assume (a) the scores are fixed numbers in [0, 1] (a finite benchmark), (b) every
    increment passed to :meth:`update` comes from
    :func:`~monitor.stats.pulse.aipw_plan.sequential_increments` of a plan whose predictions and
    weight were fixed before its batch was drawn, uniformly without replacement, and (c) a model's
    increments are passed in draw order. Then, whatever the selection rule, the predictions or
    the refits,

    ``P(exists t, i: mu_i not in [lower_i(t), upper_i(t)]) <= delta``,

    hence ``P(some certificate ever names a model that is not epsilon-best) <= delta``, where
    epsilon-best means ``mu_i > max_{k != i} mu_k - epsilon``. With ``epsilon = 0`` a certified
    model is the unique best, and if two models tie for best, no certificate is issued with
    probability at least ``1 - delta``. The guarantee holds at arbitrary, data-dependent stopping
    times (monitoring continuously is free).

    Construction. Bets are the predictable WSR plug-in ``sqrt(2 log(1/d) / (s2 t log(1 + t)))``
    (``d = delta / (2m)``, ``s2`` a running variance of past increments with prior 1/4)
    capped at ``c / (u0_b - lo_b)`` (``K+``) and ``c / (hi_b - l0_b)`` (``K-``), where
    ``l0_b <= mu_i <= u0_b`` are the deterministic bounds known before the draw. Because ``u0``
    only decreases and ``l0`` only increases, ``K+_t(m)`` is positive and decreasing in ``m`` on
    ``[0, u0_t]`` and ``K-_t`` increasing on ``[l0_t, 1]``, so the level sets are intervals
    found by bisection, returned at their conservative end. Intervals are running
    intersections, clipped to ``[l0_t, u0_t]`` (exact once a model has seen every example).

    Examples
    --------
    >>> cert = BestModelCertifier(2, delta=0.1)
    >>> inc = {"theta": [0.5], "lo": [0.0], "hi": [1.0], "l0": [0.0], "u0": [1.0]}
    >>> cert.update(0, **inc)
    >>> cert.lower.tolist(), cert.upper.tolist(), cert.best_model is None
    ([0.0, 0.0], [1.0, 1.0], True)
    """

    def __init__(self, n_models: int, delta: float, epsilon: float = 0.0,
                 bet_cap: float = 0.5) -> None:
        if not 0.0 < delta < 1.0:
            raise ValueError("delta must be in (0, 1)")
        if not 0.0 < bet_cap < 1.0:
            raise ValueError("bet_cap must be in (0, 1)")
        if epsilon < 0.0:
            raise ValueError("epsilon must be >= 0")
        self._m = int(n_models)
        self._delta = float(delta)
        self._eps = float(epsilon)
        self._cap = float(bet_cap)
        self._log_thr = math.log(2.0 * self._m / self._delta)
        self._theta: list[list[float]] = [[] for _ in range(self._m)]
        self._lp: list[list[float]] = [[] for _ in range(self._m)]
        self._lm: list[list[float]] = [[] for _ in range(self._m)]
        self._sum = [0.0] * self._m
        self._sq = [0.0] * self._m
        self._lower = [0.0] * self._m
        self._upper = [1.0] * self._m
        self._rounds = 0
        self._certified: dict[str, Any] | None = None

    @property
    def delta(self) -> float:
        """Family-wise error level."""
        return self._delta

    @property
    def log_threshold(self) -> float:
        """``log(2 m / delta)``, the per-side log-wealth threshold."""
        return self._log_thr

    @property
    def lower(self) -> FloatArray:
        """Lower confidence bounds, one per model."""
        return np.asarray(self._lower, dtype=np.float64)

    @property
    def upper(self) -> FloatArray:
        """Upper confidence bounds, one per model."""
        return np.asarray(self._upper, dtype=np.float64)

    @property
    def rounds(self) -> int:
        """Increments processed (all models)."""
        return self._rounds

    @property
    def increments(self) -> NDArray[np.int64]:
        """Increments processed per model."""
        return np.asarray([len(t) for t in self._theta], dtype=np.int64)

    def update(self, model: int, theta: ArrayLike, lo: ArrayLike, hi: ArrayLike,
               l0: ArrayLike, u0: ArrayLike) -> None:
        """Add one batch of per-draw increments of ``model`` (in draw order).

        Parameters
        ----------
        model : int
            Model index.
        theta, lo, hi, l0, u0 : array_like
            As returned by :func:`monitor.stats.pulse.aipw_plan.sequential_increments`.
        """
        th = np.asarray(theta, dtype=np.float64)
        a, b = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
        l0a, u0a = np.asarray(l0, dtype=np.float64), np.asarray(u0, dtype=np.float64)
        if th.size == 0:
            return
        if np.any(th < a - 1e-12) or np.any(th > b + 1e-12):
            raise ValueError("increment outside its predictable range")
        i = int(model)
        k0 = len(self._theta[i])
        t = k0 + 1 + np.arange(th.size, dtype=np.float64)
        csum = self._sum[i] + np.concatenate(([0.0], np.cumsum(th)[:-1]))
        mean_prev = (0.5 + csum) / t
        dev2 = (th - mean_prev) ** 2
        q_prev = self._sq[i] + np.concatenate(([0.0], np.cumsum(dev2)[:-1]))
        s2 = (0.25 + q_prev) / t
        raw = np.sqrt(2.0 * self._log_thr / (s2 * t * np.log1p(t)))
        lp = np.minimum(raw, self._cap / np.maximum(u0a - a, 1e-300))
        lm = np.minimum(raw, self._cap / np.maximum(b - l0a, 1e-300))
        self._theta[i].extend(th.tolist())
        self._lp[i].extend(lp.tolist())
        self._lm[i].extend(lm.tolist())
        self._sum[i] = float(csum[-1] + th[-1])
        self._sq[i] = float(q_prev[-1] + dev2[-1])
        self._rounds += int(th.size)
        self._refresh(i, float(l0a[-1]), float(u0a[-1]))

    def _refresh(self, i: int, lo0: float, hi0: float) -> None:
        # lo0/hi0: deterministic bounds known before the batch's last draw (valid, monotone).
        thetas = np.asarray(self._theta[i])
        lp = np.asarray(self._lp[i])
        lm = np.asarray(self._lm[i])
        thr = self._log_thr
        lower = max(self._lower[i], lo0)
        upper = min(self._upper[i], hi0)

        def gp(x: float) -> float:
            return float(np.log1p(lp * (thetas - x)).sum())

        def gm(x: float) -> float:
            return float(np.log1p(-lm * (thetas - x)).sum())

        if lower < upper and gp(lower) >= thr:
            lower = upper if gp(upper) >= thr else _bisect(lambda x: gp(x) < thr, lower, upper,
                                                           keep_hi=False)
        if lower < upper and gm(upper) >= thr:
            upper = lower if gm(lower) >= thr else _bisect(lambda x: gm(x) >= thr, lower, upper,
                                                           keep_hi=True)
        self._lower[i], self._upper[i] = lower, upper
        if self._certified is None:
            best = self.best_model
            if best is not None:
                self._certified = self.evidence(best)

    def set_exact(self, model: int, lower: float, upper: float) -> None:
        """Tighten a model's interval with deterministic bounds (e.g. ``[l0, u0]`` after a pull).

        Parameters
        ----------
        model : int
            Model index.
        lower, upper : float
            Bounds that hold with certainty (sum of observed scores over ``n``, plus the
            unobserved fraction for the upper one).
        """
        i = int(model)
        self._lower[i] = max(self._lower[i], float(lower))
        self._upper[i] = min(self._upper[i], float(upper))
        if self._certified is None:
            best = self.best_model
            if best is not None:
                self._certified = self.evidence(best)

    @property
    def best_model(self) -> int | None:
        """Model whose lower bound clears every other upper bound (minus epsilon), else None."""
        if self._m == 1:
            return 0
        low = self.lower
        up = self.upper
        order = np.argsort(-low, kind="stable")
        i = int(order[0])
        others = np.delete(up, i)
        return i if bool(low[i] > others.max() - self._eps + _MARGIN) else None

    @property
    def certificate(self) -> dict[str, Any] | None:
        """Evidence of the first certificate issued (sticky), or None."""
        return None if self._certified is None else dict(self._certified)

    def evidence(self, model: int) -> dict[str, Any]:
        """Evidence for naming ``model`` best now.

        Parameters
        ----------
        model : int
            Candidate.

        Returns
        -------
        dict
            ``model``, ``lower``, ``runner_up`` (largest other upper bound's model),
            ``runner_up_upper``, ``epsilon``, ``delta``, ``log_threshold``, ``rounds``.
        """
        up = self.upper.copy()
        up[model] = -np.inf
        r = int(np.argmax(up))
        return {"model": int(model), "lower": self._lower[model], "runner_up": r,
                "runner_up_upper": float(up[r]), "epsilon": self._eps, "delta": self._delta,
                "log_threshold": self._log_thr, "rounds": self._rounds}

    def to_state(self) -> dict[str, Any]:
        """JSON-serializable state (exact float round trip)."""
        return {"n_models": self._m, "delta": self._delta, "epsilon": self._eps,
                "bet_cap": self._cap, "theta": self._theta, "lp": self._lp, "lm": self._lm,
                "sum": self._sum, "sq": self._sq, "lower": self._lower, "upper": self._upper,
                "rounds": self._rounds, "certified": self._certified}

    @classmethod
    @restorer("BestModelCertifier")
    def from_state(cls, state: dict[str, Any]) -> BestModelCertifier:
        """Rebuild from :meth:`to_state` output."""
        obj = cls(size(state["n_models"], "n_models"), float(state["delta"]),
                  float(state["epsilon"]), float(state["bet_cap"]))
        obj._theta = [[float(x) for x in r] for r in state["theta"]]
        obj._lp = [[float(x) for x in r] for r in state["lp"]]
        obj._lm = [[float(x) for x in r] for r in state["lm"]]
        obj._sum = [float(x) for x in state["sum"]]
        obj._sq = [float(x) for x in state["sq"]]
        obj._lower = [float(x) for x in state["lower"]]
        obj._upper = [float(x) for x in state["upper"]]
        obj._rounds = int(state["rounds"])
        c = state["certified"]
        obj._certified = None if c is None else dict(c)
        return obj
