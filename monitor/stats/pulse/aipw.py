"""AIPW (doubly robust) estimates of each model's mean score under sampling without replacement.

PULSE (Tolochinsky, Tenzer, Romano), eq. 2-3, batch mode and Step 3. For model ``i`` on a fixed
benchmark of ``n`` examples, a pull draws a batch ``B_t`` uniformly without replacement from the
examples ``U`` the model has not been evaluated on, and contributes

``theta = (1/n) [ sum_{j in O} S_ij + lam * sum_{j in U} Shat_ij + (|U|/|B_t|) sum_{j in B_t}
(S_ij - lam * Shat_ij) ]``

where ``O`` are the already observed examples, ``Shat`` the current low-rank predictions and
``lam`` the predictable weight of Step 3. The running estimate is the average of the thetas.

Design rule (the reason this module exists): everything entering ``theta`` is frozen in a
:class:`~monitor.stats.pulse.aipw_plan.PullPlan` *before* the batch is drawn, and ``theta`` is
computed from the plan and the returned scores only. No running sum of predictions is carried across
refits (``F`` and ``Phi`` are recomputed from the current prediction row when a plan is made), so a
refit can never mix old and new predictions inside one estimate. The plan and the pure formulas
(:func:`~monitor.stats.pulse.aipw_plan.pull_theta`,
:func:`~monitor.stats.pulse.aipw_plan.step3_lambda`,
:func:`~monitor.stats.pulse.aipw_plan.sequential_increments`) are in
:mod:`monitor.stats.pulse.aipw_plan` and re-exported here; this module holds the bookkeeping,
:class:`AIPWEstimator`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.stats.pulse.aipw_plan import (
    FloatArray,
    LambdaRule,
    PullPlan,
    pull_theta,
    sequential_increments,
    step3_lambda,
)

# PullPlan and the pure formulas live in aipw_plan; re-exported here for existing importers.
from monitor.stats.state_contract import MAX_CELLS, StateError, finite_floats, restorer, size

__all__ = ["AIPWEstimator", "LambdaRule", "PullPlan", "pull_theta", "sequential_increments",
           "step3_lambda"]


class AIPWEstimator:
    """AIPW bookkeeping for ``m`` models on one benchmark of ``n`` examples.

    Parameters
    ----------
    n_models, n_examples : int
        Matrix shape.
    lambda_rule : {"paper", "regression", "zero", "one"}
        ``"paper"``: Step 3 / eq. 27. ``"regression"``: the calibration slope
        ``Cov(S, Shat) / Var(Shat)`` (Lemma 2's optimum) estimated on every score observed so far
        (all models) paired with the prediction it had when it was drawn, clipped to [0, 1]
        (0 until two such pairs exist). ``"zero"``: ignore predictions (Horvitz-Thompson).
        ``"one"``: full weight on predictions.

    Notes
    -----
    Guarantee (PULSE Lemma 1): if the plan's ``lam`` and predictions are fixed before the batch is
    drawn and the batch is uniform without replacement from ``U``, then ``E[theta | past] = mu_i``
    exactly, whatever the predictions are (biased, refit on the same data, adversarial), so
    ``theta_k - mu_i`` is a martingale difference sequence in the order of the model's pulls
    (the basis of the confidence sequences in :mod:`monitor.stats.pulse.bestarm`) and the running
    estimate is unbiased for any pull count fixed in advance. Under adaptive selection the
    average over a data-dependent number of pulls is not exactly unbiased (no estimator's is);
    the martingale concentration (paper Theorem 1) is what carries over. A model can have at
    most one outstanding plan; examples are never drawn twice for a model; once every example
    is observed ``theta = mu_i`` exactly. Scores must lie in [0, 1]. The
    ``"regression"`` weight is predictable because it only uses completed pulls, each paired
    with the prediction frozen in its plan.

    Examples
    --------
    >>> est = AIPWEstimator(1, 4)
    >>> plan = est.plan(0, 2, np.random.default_rng(0), predictions=[0.5, 0.5, 0.5, 0.5])
    >>> theta = est.complete(plan, [1.0, 1.0])
    >>> int(est.n_observed[0]), int(est.pulls[0])
    (2, 1)
    """

    def __init__(self, n_models: int, n_examples: int, lambda_rule: LambdaRule = "paper") -> None:
        if n_models < 1 or n_examples < 1:
            raise ValueError("need at least one model and one example")
        if lambda_rule not in ("paper", "regression", "zero", "one"):
            raise ValueError(f"unknown lambda_rule {lambda_rule!r}")
        self._m, self._n = int(n_models), int(n_examples)
        self._rule: LambdaRule = lambda_rule
        self._mask = np.zeros((self._m, self._n), dtype=bool)
        self._scores = np.zeros((self._m, self._n))
        self._obs_sum = np.zeros(self._m)
        self._nobs = np.zeros(self._m, dtype=np.int64)
        self._npulls = np.zeros(self._m, dtype=np.int64)
        self._order: list[list[int]] = [[] for _ in range(self._m)]
        self._thetas: list[list[float]] = [[] for _ in range(self._m)]
        self._theta_sum = np.zeros(self._m)
        self._z_sum = np.zeros(self._m)
        self._pending: list[PullPlan | None] = [None] * self._m
        self._pending_mask = np.zeros(self._m, dtype=bool)
        # Out-of-sample calibration moments: n, sum s, sum p, sum s*p, sum p*p.
        self._cal = [0.0, 0.0, 0.0, 0.0, 0.0]

    @property
    def n_models(self) -> int:
        """Number of models ``m``."""
        return self._m

    @property
    def n_examples(self) -> int:
        """Benchmark size ``n``."""
        return self._n

    @property
    def mask(self) -> NDArray[np.bool_]:
        """Copy of the observation mask, shape (m, n)."""
        return self._mask.copy()

    @property
    def observed_scores(self) -> FloatArray:
        """Copy of the score matrix (0 where unobserved), shape (m, n)."""
        return self._scores.copy()

    @property
    def n_observed(self) -> NDArray[np.int64]:
        """Observed examples per model."""
        return self._nobs.copy()

    @property
    def observed_sum(self) -> FloatArray:
        """Sum of observed scores per model."""
        return self._obs_sum.copy()

    @property
    def pulls(self) -> NDArray[np.int64]:
        """Completed pulls per model."""
        return self._npulls.copy()

    @property
    def pending_mask(self) -> NDArray[np.bool_]:
        """Models with an outstanding plan."""
        return self._pending_mask.copy()

    @property
    def estimates(self) -> FloatArray:
        """AIPW running estimates ``mu_hat`` (eq. 3); nan before a model's first pull.

        A model evaluated on every example gets its exact mean instead of the average of its
        thetas (a deviation from eq. 3: the average is unbiased but still noisy there).
        """
        k = self._npulls
        est = np.where(k > 0, self._theta_sum / np.maximum(k, 1), np.nan)
        full = self._nobs == self._n
        est[full] = self._obs_sum[full] / self._n
        return est

    @property
    def observed_means(self) -> FloatArray:
        """Observation-only means (eq. 4); nan before a model's first observation."""
        k = self._nobs
        return np.where(k > 0, self._obs_sum / np.maximum(k, 1), np.nan)

    def thetas(self, model: int) -> list[float]:
        """One-pull estimates of ``model`` in pull order."""
        return list(self._thetas[model])

    def examples(self, model: int) -> list[int]:
        """Observed examples of ``model`` in draw order."""
        return list(self._order[model])

    def pending(self, model: int) -> PullPlan | None:
        """Outstanding plan of ``model`` (None if none)."""
        return self._pending[model]

    def calibration_slope(self) -> float:
        """Slope of observed scores on their at-draw predictions, clipped to [0, 1].

        Returns
        -------
        float
            ``Cov(S, Shat) / Var(Shat)`` over all observed (score, prediction) pairs whose
            prediction was fixed before the draw; 0 with fewer than two pairs or no spread.
        """
        k, ss, sp, ssp, spp = self._cal
        if k < 2.0:
            return 0.0
        var = spp - sp * sp / k
        if var <= 1e-12 * max(k, 1.0):
            return 0.0
        return float(np.clip((ssp - ss * sp / k) / var, 0.0, 1.0))

    def naive_estimate(self, model: int, predictions: ArrayLike) -> float:
        """Naive pooling (treat predictions as truth): ``(sum_O S + sum_U Shat) / n``.

        Parameters
        ----------
        model : int
            Model index.
        predictions : array_like, shape (n,)
            Current predictions of the model.

        Returns
        -------
        float
        """
        p = np.asarray(predictions, dtype=np.float64)
        return (float(self._obs_sum[model]) + float(p[~self._mask[model]].sum())) / self._n

    def plan(self, model: int, batch_size: int, rng: np.random.Generator,
             predictions: ArrayLike | None = None, step: int = 0) -> PullPlan:
        """Freeze the estimate's ingredients and draw a batch without replacement.

        Parameters
        ----------
        model : int
            Model to pull.
        batch_size : int
            Requested batch size (capped at ``|U|``).
        rng : numpy.random.Generator
            Source of the draw.
        predictions : array_like, shape (n,), optional
            Current predictions of the model; None means no predictions (``lam = 0``).
        step : int
            Recorded in the plan.

        Returns
        -------
        PullPlan

        Raises
        ------
        ValueError
            If the model has an outstanding plan, nothing left to draw, or bad batch size.
        """
        if self._pending[model] is not None:
            raise ValueError(f"model {model} already has an outstanding pull")
        unobs = np.flatnonzero(~self._mask[model])
        if unobs.size == 0:
            raise ValueError(f"model {model} has been evaluated on every example")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        b = min(int(batch_size), int(unobs.size))
        if predictions is None:
            p_u = np.zeros(unobs.size)
            pred = np.zeros(self._n)
            lam = 0.0
        else:
            pred = np.asarray(predictions, dtype=np.float64)
            p_u = pred[unobs]
            k = int(self._npulls[model])
            if self._rule == "zero":
                lam = 0.0
            elif self._rule == "one":
                lam = 1.0
            elif self._rule == "regression":
                lam = self.calibration_slope()
            else:
                lam = step3_lambda(p_u, float(self._z_sum[model]) / k if k > 0 else None)
        drawn = rng.choice(unobs, size=b, replace=False, shuffle=True)
        plan = PullPlan(model=int(model), step=int(step), examples=tuple(int(j) for j in drawn),
                        n_unobserved=int(unobs.size), observed_sum=float(self._obs_sum[model]),
                        lam=float(lam), pred_sum=float(p_u.sum()), pred_max=float(p_u.max()),
                        pred_min=float(p_u.min()),
                        pred_batch=tuple(float(pred[j]) for j in drawn))
        self._pending[model] = plan
        self._pending_mask[model] = True
        return plan

    def complete(self, plan: PullPlan, scores: ArrayLike) -> float:
        """Record the scores of an outstanding plan and return its ``theta``.

        Parameters
        ----------
        plan : PullPlan
            Must be the model's outstanding plan.
        scores : array_like
            Scores of ``plan.examples`` in the same order, each in [0, 1].

        Returns
        -------
        float
            The pull's ``theta``.
        """
        if self._pending[plan.model] != plan:
            raise ValueError("plan is not the model's outstanding pull")
        s = np.asarray(scores, dtype=np.float64)
        if s.shape != (len(plan.examples),):
            raise ValueError("one score per drawn example is required")
        if not np.all(np.isfinite(s)) or s.min() < 0.0 or s.max() > 1.0:
            raise ValueError("scores must lie in [0, 1]")
        theta, z = pull_theta(plan, s, self._n)
        i = plan.model
        idx = np.asarray(plan.examples, dtype=np.int64)
        self._mask[i, idx] = True
        self._scores[i, idx] = s
        self._order[i].extend(plan.examples)
        acc = float(self._obs_sum[i])
        for v in s.tolist():
            acc += v
        self._obs_sum[i] = acc
        self._nobs[i] += s.size
        self._npulls[i] += 1
        if plan.lam > 0.0 or any(plan.pred_batch):
            c = self._cal
            sh = np.asarray(plan.pred_batch, dtype=np.float64)
            c[0] += float(s.size)
            c[1] += float(s.sum())
            c[2] += float(sh.sum())
            c[3] += float(s @ sh)
            c[4] += float(sh @ sh)
        self._thetas[i].append(theta)
        self._theta_sum[i] += theta
        self._z_sum[i] += z
        self._pending[i] = None
        self._pending_mask[i] = False
        return theta

    def to_state(self) -> dict[str, Any]:
        """JSON-serializable state (exact float round trip)."""
        return {
            "n_models": self._m, "n_examples": self._n, "lambda_rule": self._rule,
            "order": [list(o) for o in self._order],
            "scores": [self._scores[i, o].tolist() for i, o in enumerate(self._order)],
            "obs_sum": self._obs_sum.tolist(), "thetas": [list(t) for t in self._thetas],
            "theta_sum": self._theta_sum.tolist(), "z_sum": self._z_sum.tolist(),
            "pending": [None if p is None else p.to_dict() for p in self._pending],
            "calibration": list(self._cal),
        }

    @classmethod
    @restorer("AIPWEstimator")
    def from_state(cls, state: dict[str, Any]) -> AIPWEstimator:
        """Rebuild from :meth:`to_state` output."""
        m, n = size(state["n_models"], "n_models"), size(state["n_examples"], "n_examples")
        if m * n > MAX_CELLS:
            raise StateError(f"{m} models x {n} examples is more than {MAX_CELLS} cells")
        obj = cls(m, n, state["lambda_rule"])
        for i, (o, s) in enumerate(zip(state["order"], state["scores"], strict=True)):
            idx = np.asarray(o, dtype=np.int64)
            obj._order[i] = [int(x) for x in o]
            obj._mask[i, idx] = True
            obj._scores[i, idx] = np.asarray(s, dtype=np.float64)
        obj._obs_sum = np.asarray(finite_floats(state["obs_sum"], m, "obs_sum"))
        obj._thetas = [[float(x) for x in t] for t in state["thetas"]]
        obj._theta_sum = np.asarray(finite_floats(state["theta_sum"], m, "theta_sum"))
        obj._z_sum = np.asarray(finite_floats(state["z_sum"], m, "z_sum"))
        obj._nobs = np.asarray([len(o) for o in obj._order], dtype=np.int64)
        obj._npulls = np.asarray([len(t) for t in obj._thetas], dtype=np.int64)
        obj._pending = [None if p is None else PullPlan.from_dict(p) for p in state["pending"]]
        obj._pending_mask = np.asarray([p is not None for p in obj._pending], dtype=bool)
        obj._cal = [float(x) for x in state["calibration"]]
        return obj
