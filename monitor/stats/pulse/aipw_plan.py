"""Frozen pull plans and the pure AIPW formulas of PULSE (eq. 2, eq. 27, Lemma 1).

A :class:`PullPlan` holds everything one pull's estimate depends on, fixed *before* the batch is
drawn; :func:`pull_theta` and :func:`sequential_increments` compute the pull's AIPW estimate and
its per-draw increments from the plan and the returned scores only, and :func:`step3_lambda` is
the predictable weight of Step 3. The bookkeeping across pulls (observation mask, running
estimates, state) is :class:`monitor.stats.pulse.aipw.AIPWEstimator`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.stats.state_contract import restorer

__all__ = ["FloatArray", "LambdaRule", "PullPlan", "pull_theta", "sequential_increments",
           "step3_lambda"]

FloatArray = NDArray[np.float64]
LambdaRule = Literal["paper", "regression", "zero", "one"]


@dataclass(frozen=True)
class PullPlan:
    """Everything a pull's estimate depends on, fixed before its examples are drawn.

    Attributes
    ----------
    model : int
        Model index.
    step : int
        Global draw counter of the plan (the randomness used is derived from it).
    examples : tuple of int
        Drawn examples, in draw order (a uniformly random ordered sample of ``U``).
    n_unobserved : int
        ``|U|`` before the draw.
    observed_sum : float
        ``sum_{j in O} S_ij`` before the draw.
    lam : float
        Weight on the predictions, in [0, 1].
    pred_sum : float
        ``F = sum_{j in U} Shat_ij``.
    pred_max, pred_min : float
        Max / min of ``Shat_ij`` over ``U`` (0 when no predictions).
    pred_batch : tuple of float
        ``Shat_ij`` for the drawn examples, in draw order.

    Examples
    --------
    >>> plan = PullPlan(0, 3, (4, 1), 6, 2.0, 0.5, 3.0, 0.9, 0.1, (0.9, 0.2))
    >>> PullPlan.from_dict(plan.to_dict()) == plan
    True
    """

    model: int
    step: int
    examples: tuple[int, ...]
    n_unobserved: int
    observed_sum: float
    lam: float
    pred_sum: float
    pred_max: float
    pred_min: float
    pred_batch: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serializable dict."""
        return {"model": self.model, "step": self.step, "examples": list(self.examples),
                "n_unobserved": self.n_unobserved, "observed_sum": self.observed_sum,
                "lam": self.lam, "pred_sum": self.pred_sum, "pred_max": self.pred_max,
                "pred_min": self.pred_min, "pred_batch": list(self.pred_batch)}

    @classmethod
    @restorer("PullPlan")
    def from_dict(cls, d: dict[str, Any]) -> PullPlan:
        """Inverse of :meth:`to_dict`."""
        return cls(int(d["model"]), int(d["step"]), tuple(int(x) for x in d["examples"]),
                   int(d["n_unobserved"]), float(d["observed_sum"]), float(d["lam"]),
                   float(d["pred_sum"]), float(d["pred_max"]), float(d["pred_min"]),
                   tuple(float(x) for x in d["pred_batch"]))


def step3_lambda(pred_unobserved: ArrayLike, z_bar: float | None) -> float:
    """Predictable weight of PULSE Step 3 (eq. 27).

    ``clip(1 - F * zbar / (|U| * Phi), 0, 1)`` with ``F`` and ``Phi`` the sum and sum of squares of
    the predictions over the unobserved examples and ``zbar`` the mean residual correction of the
    model's previous pulls.

    Parameters
    ----------
    pred_unobserved : array_like
        Current predictions on ``U``.
    z_bar : float or None
        Mean of the model's past residual corrections; None before its first pull (gives 0).

    Returns
    -------
    float
        Weight in [0, 1].

    Notes
    -----
    Predictable by construction: call it with predictions and past residuals only. Derived in
    the paper (App. A.5) from plug-in proxies; when the predictions are biased the proxy for
    ``E[Z]`` is off and the rule tends to return 0 (no variance reduction).

    Examples
    --------
    >>> step3_lambda([0.9, 0.1], z_bar=0.0)
    1.0
    >>> step3_lambda([0.5, 0.5], z_bar=None)
    0.0
    """
    p = np.asarray(pred_unobserved, dtype=np.float64)
    phi = float(p @ p)
    if z_bar is None or p.size == 0 or phi <= 0.0:
        return 0.0
    return float(np.clip(1.0 - float(p.sum()) * z_bar / (p.size * phi), 0.0, 1.0))


def pull_theta(plan: PullPlan, scores: ArrayLike, n_examples: int) -> tuple[float, float]:
    """One-pull AIPW estimate ``theta`` (eq. 2, batch form) and its residual correction ``Z``.

    Parameters
    ----------
    plan : PullPlan
        The frozen plan.
    scores : array_like
        Scores of ``plan.examples`` in the same order, in [0, 1].
    n_examples : int
        Benchmark size ``n``.

    Returns
    -------
    theta, z : float
        ``theta`` has conditional mean ``mu_i`` given everything known when the plan was made.

    Notes
    -----
    PULSE Lemma 1 (batch form): with ``pi = B / |U|`` the inclusion probability of a uniform
    batch without replacement, ``E[Z | past] = sum_U (S - lam Shat)``, hence
    ``E[theta | past] = mu_i``.

    Examples
    --------
    >>> plan = PullPlan(0, 0, (1,), 2, 0.0, 0.0, 0.0, 0.0, 0.0, (0.0,))
    >>> pull_theta(plan, [1.0], n_examples=2)
    (1.0, 2.0)
    """
    s = np.asarray(scores, dtype=np.float64)
    sh = np.asarray(plan.pred_batch, dtype=np.float64)
    z = plan.n_unobserved / s.size * float((s - plan.lam * sh).sum())
    theta = (plan.observed_sum + plan.lam * plan.pred_sum + z) / n_examples
    return float(theta), float(z)


def sequential_increments(plan: PullPlan, scores: ArrayLike,
                          n_examples: int) -> dict[str, FloatArray]:
    """Per-draw AIPW increments of one batch, with their predictable ranges.

    Drawing a uniform batch without replacement is the same as drawing its examples one at a time
    uniformly from what is left. Draw ``b`` (0-based) then gives an estimate with conditional mean
    ``mu_i`` given the plan and draws ``< b``::

        theta_b = (c_b + |U_b| (S_b - lam Shat_b)) / n,
        c_b = sum_O S + sum_{b'<b} S_b' + lam (F - sum_{b'<b} Shat_b'),  |U_b| = |U| - b.

    Parameters
    ----------
    plan : PullPlan
        The frozen plan.
    scores : array_like
        Scores in draw order.
    n_examples : int
        Benchmark size ``n``.

    Returns
    -------
    dict of numpy.ndarray
        ``theta``; ``lo``/``hi``: range of ``theta_b`` over every possible draw and score in
        [0, 1] (predictable); ``l0``/``u0``: deterministic bounds on ``mu_i`` known before draw
        ``b`` (``sum`` of observed scores over ``n``, plus ``|U_b|/n`` for the upper one).

    Notes
    -----
    ``E[theta_b | plan, draws < b] = mu_i`` and ``lo_b <= theta_b <= hi_b``,
    ``l0_b <= mu_i <= u0_b`` surely; ``u0_b`` is non-increasing and ``l0_b`` non-decreasing in
    ``b`` (and across a model's pulls).

    Examples
    --------
    >>> plan = PullPlan(0, 0, (0, 1), 2, 0.0, 0.0, 0.0, 0.0, 0.0, (0.0, 0.0))
    >>> inc = sequential_increments(plan, [1.0, 0.0], n_examples=2)
    >>> inc["theta"].tolist(), inc["u0"].tolist()
    ([1.0, 0.5], [1.0, 1.0])
    """
    s = np.asarray(scores, dtype=np.float64)
    sh = np.asarray(plan.pred_batch, dtype=np.float64)
    lam = plan.lam
    cs = np.concatenate(([0.0], np.cumsum(s)[:-1]))
    csh = np.concatenate(([0.0], np.cumsum(sh)[:-1]))
    ub = plan.n_unobserved - np.arange(s.size, dtype=np.float64)
    base = plan.observed_sum + cs
    c = base + lam * (plan.pred_sum - csh)
    n = float(n_examples)
    return {
        "theta": (c + ub * (s - lam * sh)) / n,
        "lo": (c - ub * lam * plan.pred_max) / n,
        "hi": (c + ub * (1.0 - lam * plan.pred_min)) / n,
        "l0": base / n,
        "u0": (base + ub) / n,
    }
