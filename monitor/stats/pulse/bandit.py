"""PULSE best-model identification: UCB-E over models with AIPW low-rank-powered estimates.

PULSE (Tolochinsky, Tenzer, Romano), Algorithm 1, in a request/response form an engine can hold
per suite: :meth:`SelectionBandit.next_requests` returns ``(model, example_ids)`` pulls to
evaluate, :meth:`SelectionBandit.update` takes the scores back one at a time, in any order.
Methods: ``"pulse"`` (UCB-E on AIPW estimates), ``"ucbe"`` (UCB-E on observation means) and
``"naive"`` (UCB-E on predictions treated as truth). Every method also feeds the anytime-valid
best-model certificate of :mod:`monitor.stats.pulse.bestarm` with AIPW increments. The run's
parameters and the UCB-E index are in :mod:`monitor.stats.pulse.config` (re-exported here).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.stats.pulse.aipw import AIPWEstimator
from monitor.stats.pulse.aipw_plan import PullPlan, sequential_increments
from monitor.stats.pulse.bestarm import BestModelCertifier

# SelectionConfig and ucb_index live in selection_config; re-exported here for existing importers.
from monitor.stats.pulse.config import Method, SelectionConfig, ucb_index
from monitor.stats.pulse.lowrank import LogisticLowRank, RefitCost
from monitor.stats.pulse.predictions import ScorePredictions
from monitor.stats.state_contract import MAX_CELLS, StateError, restorer, size

__all__ = ["Method", "SelectionBandit", "SelectionConfig", "ucb_index"]

FloatArray = NDArray[np.float64]


class SelectionBandit:
    """One suite's best-model selection state.

    Parameters
    ----------
    config : SelectionConfig
        Parameters.
    n_models, n_examples : int
        Benchmark shape; models and examples are referred to by index.
    example_factors : array_like, shape (n_examples, r), optional
        Example factors, e.g. from :func:`monitor.stats.pulse.lowrank.fit_logistic_factors` on a
        historical matrix (frozen unless ``config.freeze_examples`` is False; without history
        pass a small random matrix and ``freeze_examples=False``). Required for ``"pulse"`` and
        ``"naive"``.

    Notes
    -----
    Guarantees: each AIPW estimate is unbiased at every pull count whatever the predictions
    (:class:`monitor.stats.pulse.aipw.AIPWEstimator`); the certificate names a non-``epsilon``-best
    model with probability at most ``delta`` over the whole run (:class:`BestModelCertifier`). The
    *identification* probability of ``leader`` after a budget ``T`` is the paper's Theorem 2
    (a bound depending on ``a`` and the variances; no level is promised). A model has at most one
    outstanding pull, so several requests in flight go to distinct models (in UCB order); refits
    happen when pulls complete and only affect pulls planned afterwards. ``to_state`` /
    ``from_state`` round-trip exactly: a restored bandit continues bit-identically.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> truth = (rng.random((3, 40)) < [[0.9], [0.5], [0.2]]).astype(float)
    >>> cfg = SelectionConfig(method="ucbe", batch_size=8, budget=120, seed=3)
    >>> bandit = SelectionBandit(cfg, 3, 40)
    >>> while reqs := bandit.next_requests(2):
    ...     for model, ids in reqs:
    ...         bandit.update_many(model, ids, truth[model, ids])
    >>> bandit.leader, bandit.calls_completed
    (0, 120)
    """

    def __init__(self, config: SelectionConfig, n_models: int, n_examples: int,
                 example_factors: ArrayLike | None = None) -> None:
        self._cfg = config
        self._m, self._n = int(n_models), int(n_examples)
        self._aipw = AIPWEstimator(self._m, self._n, config.lambda_rule)
        self._cert = BestModelCertifier(self._m, config.delta, config.epsilon, config.bet_cap)
        lr: LogisticLowRank | None = None
        if config.method != "ucbe":
            if example_factors is None:
                raise ValueError(f"method {config.method!r} needs example_factors")
            lr = LogisticLowRank(self._m, example_factors, l2=config.l2,
                                 freeze_examples=config.freeze_examples)
            if lr.example_factors.shape[0] != self._n:
                raise ValueError("example_factors must have one row per example")
        self._p = ScorePredictions(lr, self._m, config.method, config.freeze_examples)  # refits
        self._received: dict[int, dict[int, float]] = {}
        self._steps = 0
        self._issued = 0
        self._completed = 0
        self._bandit_done = 0

    # ------------------------------------------------------------------ read-only views
    @property
    def config(self) -> SelectionConfig:
        """The configuration."""
        return self._cfg

    @property
    def n_models(self) -> int:
        """Number of models."""
        return self._m

    @property
    def n_examples(self) -> int:
        """Number of examples."""
        return self._n

    @property
    def pulls(self) -> NDArray[np.int64]:
        """Completed pulls per model."""
        return self._aipw.pulls

    @property
    def n_observed(self) -> NDArray[np.int64]:
        """Evaluations received per model (completed pulls)."""
        return self._aipw.n_observed

    @property
    def aipw_estimates(self) -> FloatArray:
        """AIPW estimates (eq. 3), nan before a model's first pull."""
        return self._aipw.estimates

    @property
    def estimates(self) -> FloatArray:
        """Estimates the method ranks by (AIPW, observation means or naive pooling)."""
        if self._cfg.method == "pulse":
            return self._aipw.estimates
        if self._cfg.method == "ucbe" or self._p.pred is None:
            return self._aipw.observed_means
        return self._p.naive.copy()

    @property
    def lower(self) -> FloatArray:
        """Anytime-valid lower bounds (simultaneous at level ``delta``)."""
        return self._cert.lower

    @property
    def upper(self) -> FloatArray:
        """Anytime-valid upper bounds (simultaneous at level ``delta``)."""
        return self._cert.upper

    @property
    def leader(self) -> int:
        """Current argmax of :attr:`estimates` (Algorithm 1's output), ties to lowest index."""
        est = np.nan_to_num(self.estimates, nan=-np.inf)
        return int(np.argmax(est))

    @property
    def ranks(self) -> NDArray[np.int64]:
        """Rank of each model by :attr:`estimates` (0 = leader)."""
        est = np.nan_to_num(self.estimates, nan=-np.inf)
        order = np.argsort(-est, kind="stable")
        r = np.empty(self._m, dtype=np.int64)
        r[order] = np.arange(self._m)
        return r

    @property
    def best_model(self) -> int | None:
        """Model certified best (first certificate, sticky), or None."""
        c = self._cert.certificate
        return None if c is None else int(c["model"])

    @property
    def certificate(self) -> dict[str, Any] | None:
        """Evidence of the best-model certificate (see :meth:`BestModelCertifier.evidence`)."""
        c = self._cert.certificate
        if c is not None:
            c["calls"] = self._completed
        return c

    @property
    def calls_issued(self) -> int:
        """Evaluations requested so far."""
        return self._issued

    @property
    def calls_completed(self) -> int:
        """Evaluations received so far."""
        return self._completed

    @property
    def budget_used_ratio(self) -> float:
        """Issued evaluations over the budget (over ``m n`` when unlimited)."""
        total = self._cfg.budget if self._cfg.budget is not None else self._m * self._n
        return self._issued / total

    @property
    def refits(self) -> int:
        """Refits done."""
        return self._p.refits

    @property
    def refit_cost(self) -> RefitCost:
        """Total compute of all refits."""
        return self._p.cost

    @property
    def stage(self) -> str:
        """``"init"`` until every model has ``T0`` pulls, then ``"bandit"``."""
        return "init" if self._p.pred is None and self._in_init() else "bandit"

    # ------------------------------------------------------------------ requests
    def _in_init(self) -> bool:
        need = (self._aipw.pulls < self._cfg.init_pulls) & (self._aipw.n_observed < self._n)
        return bool(need.any())

    def _remaining_budget(self) -> int:
        if self._cfg.budget is None:
            return self._m * self._n - self._issued
        return self._cfg.budget - self._issued

    def _rng(self, step: int) -> np.random.Generator:
        ss = np.random.SeedSequence(self._cfg.seed, spawn_key=(step,))
        return np.random.Generator(np.random.Philox(ss))

    def _candidates(self) -> list[int]:
        nobs = self._aipw.n_observed
        ok = ~self._aipw.pending_mask & (nobs < self._n)
        if self._in_init():
            return np.flatnonzero(ok & (self._aipw.pulls < self._cfg.init_pulls)).tolist()
        idx = ucb_index(self.estimates, nobs, self._cfg.exploration)
        if not ok.any():
            return []
        idx[~ok] = -np.inf
        order = np.argsort(-idx, kind="stable")
        return [int(i) for i in order[: int(ok.sum())]]

    def next_requests(self, max_requests: int = 1) -> list[tuple[int, list[int]]]:
        """Plan up to ``max_requests`` pulls (distinct models) and return them.

        Parameters
        ----------
        max_requests : int
            Maximum number of pulls to issue now.

        Returns
        -------
        list of (int, list of int)
            ``(model, example_ids)`` per pull; empty when the budget is spent, every model is
            waiting for scores, or everything is observed.
        """
        out: list[tuple[int, list[int]]] = []
        if self._p.pred is None and not self._in_init() and self._p.lr is not None:
            self._p.initial_refit(self._aipw, self._n)
        for i in self._candidates():
            if len(out) >= max_requests:
                break
            left = self._remaining_budget()
            if left < 1:
                break
            bsz = min(self._cfg.batch_size, left)
            in_init = bool(self._aipw.pulls[i] < self._cfg.init_pulls)
            preds = None if (in_init or self._p.pred is None) else self._p.pred[i]
            plan = self._aipw.plan(i, bsz, self._rng(self._steps), predictions=preds,
                                   step=self._steps)
            self._steps += 1
            self._issued += len(plan.examples)
            self._received[i] = {}
            out.append((i, list(plan.examples)))
        return out

    # ------------------------------------------------------------------ responses
    def update(self, model: int, example_id: int, score: float) -> None:
        """Record one requested evaluation; completes the pull when its last score arrives.

        Parameters
        ----------
        model : int
            Model index.
        example_id : int
            Example index; must belong to the model's outstanding pull.
        score : float
            Score in [0, 1].

        Raises
        ------
        ValueError
            Unrequested or duplicate evaluation, or a score outside [0, 1].
        """
        plan = self._aipw.pending(model)
        if plan is None or example_id not in plan.examples:
            raise ValueError(f"evaluation ({model}, {example_id}) was not requested")
        got = self._received[model]
        if example_id in got:
            raise ValueError(f"duplicate evaluation ({model}, {example_id})")
        s = float(score)
        if not 0.0 <= s <= 1.0:
            raise ValueError("score must lie in [0, 1]")
        got[int(example_id)] = s
        if len(got) == len(plan.examples):
            self._complete(plan, [got[j] for j in plan.examples])

    def update_many(self, model: int, example_ids: ArrayLike, scores: ArrayLike) -> None:
        """Record several evaluations of one model (see :meth:`update`).

        Parameters
        ----------
        model : int
            Model index.
        example_ids : array_like of int
            Example indices.
        scores : array_like of float
            Scores in the same order.
        """
        for j, s in zip(np.asarray(example_ids).tolist(), np.asarray(scores).tolist(),
                        strict=True):
            self.update(model, int(j), float(s))

    def _complete(self, plan: PullPlan, scores: list[float]) -> None:
        i = plan.model
        was_init = bool(self._aipw.pulls[i] < self._cfg.init_pulls)
        self._aipw.complete(plan, scores)
        del self._received[i]
        self._completed += len(scores)
        if self._cfg.certify:
            inc = sequential_increments(plan, scores, self._n)
            self._cert.update(i, **inc)
            obs = float(self._aipw.observed_sum[i])
            left = float(self._n - int(self._aipw.n_observed[i]))
            self._cert.set_exact(i, obs / self._n, (obs + left) / self._n)
        self._p.dirty.add(i)
        if self._p.pred is not None:
            self._p.naive_row(self._aipw, i)
        if self._p.lr is None:
            return
        if self._p.pred is None:
            if not self._in_init():
                self._p.initial_refit(self._aipw, self._n)
            return
        if not was_init:
            self._bandit_done += 1
            if self._bandit_done % self._cfg.refit_every == 0:
                self._p.refit(self._aipw)

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, Any]:
        """JSON-serializable state; :meth:`from_state` restores it exactly."""
        return {
            "format": "certmon.selection", "version": 1,
            "config": self._cfg.to_dict(), "n_models": self._m, "n_examples": self._n,
            "aipw": self._aipw.to_state(), "certifier": self._cert.to_state(),
            "lowrank": None if self._p.lr is None else self._p.lr.to_state(),
            "predicted": self._p.pred is not None,
            "received": {str(k): [[j, s] for j, s in v.items()] for k, v in
                         self._received.items()},
            "steps": self._steps, "issued": self._issued, "completed": self._completed,
            "bandit_done": self._bandit_done, "dirty": sorted(self._p.dirty),
            "refits": self._p.refits, "cost": self._p.cost.to_dict(),
        }

    @classmethod
    @restorer("SelectionBandit")
    def from_state(cls, state: dict[str, Any]) -> SelectionBandit:
        """Rebuild from :meth:`to_state` output."""
        if state.get("format") != "certmon.selection" or state.get("version") != 1:
            raise ValueError("not a version-1 selection state")
        cfg = SelectionConfig.from_dict(dict(state["config"]))
        lr_state = state["lowrank"]
        v = None if lr_state is None else np.asarray(lr_state["v"], dtype=np.float64)
        m, n = size(state["n_models"], "n_models"), size(state["n_examples"], "n_examples")
        if m * n > MAX_CELLS:
            raise StateError(f"{m} models x {n} examples is more than {MAX_CELLS} cells")
        obj = cls(cfg, m, n, example_factors=v)
        obj._aipw = AIPWEstimator.from_state(state["aipw"])
        obj._cert = BestModelCertifier.from_state(state["certifier"])
        if lr_state is not None:
            obj._p.lr = LogisticLowRank.from_state(lr_state)
        obj._received = {int(k): {int(j): float(s) for j, s in v_} for k, v_ in
                         state["received"].items()}
        obj._steps, obj._issued = int(state["steps"]), int(state["issued"])
        obj._completed, obj._bandit_done = int(state["completed"]), int(state["bandit_done"])
        obj._p.dirty = {int(x) for x in state["dirty"]}
        obj._p.refits = int(state["refits"])
        obj._p.cost = RefitCost(**{k: int(x) for k, x in state["cost"].items()})
        if state["predicted"] not in (True, False) or (state["predicted"] and obj._p.lr is None):
            raise StateError(f"predicted must be a boolean, and true only with a low-rank "
                             f"model, got {state['predicted']!r}")
        if state["predicted"]:
            obj._p.pred = np.zeros((obj._m, obj._n))
            obj._p.predict_rows(obj._aipw, list(range(obj._m)))
        return obj
