r"""Selection-mode suites: the ``[suites.selection]`` section, its benchmark, a synthetic one.

A suite with ``mode = "selection"`` holds a fixed benchmark (candidate models x example ids)
and runs PULSE best-model identification over it (:mod:`monitor.stats.pulse.bandit`): certmon emits
evaluation requests and consumes the resulting scores (see :mod:`monitor.state.selection_suites`).
This module is the configuration boundary (pydantic, file loading) plus a synthetic low-rank
benchmark used by the evaluation worker, the demo and the tests.

Score convention: PULSE maximizes a score in [0, 1]; certmon events carry ``loss`` in [0, 1]
(the event contract), so an evaluation event means ``score = 1 - loss``.

Examples
--------
>>> s = SelectionSettings(models=["a", "b", "c"], examples=5, method="ucbe", batch_size=2)
>>> s.example_ids, s.history_matrix is None
(('0', '1', '2', '3', '4'), True)
>>> SelectionSettings(models=["a"], examples=5)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
pydantic_core._pydantic_core.ValidationError: 1 validation error for SelectionSettings
...
>>> b = synthetic_benchmark(4, 50, n_history=10, gap=0.1, seed=0)
>>> b.scores.shape, b.history.shape, bool(round(b.gap, 9) >= 0.1)
((4, 50), (10, 50), True)
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Self

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from monitor.stats.pulse.bandit import SelectionConfig
from monitor.stats.pulse.config import DEFAULTS as _D
from monitor.stats.pulse.lowrank import sigmoid

__all__ = [
    "KICKOFF_EXAMPLE_ID",
    "SelectionSettings",
    "SyntheticBenchmark",
    "load_matrix",
    "synthetic_benchmark",
]

KICKOFF_EXAMPLE_ID: Final = "__start__"
"""``example_id`` of a kickoff event: starts a selection suite that is not started yet."""

FloatArray = NDArray[np.float64]
_PosInt = Annotated[int, Field(ge=1)]


def load_matrix(path: str | Path) -> FloatArray:
    """Load a 2-D score matrix from ``.npy`` or JSON (a list of rows; ``null`` = unobserved).

    Parameters
    ----------
    path : str or Path
        ``.npy`` (NaN = unobserved) or ``.json`` file.

    Returns
    -------
    numpy.ndarray
        Float matrix, NaN where unobserved.

    Raises
    ------
    ValueError
        Unreadable file, wrong suffix, not 2-D, or an observed value outside [0, 1].

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "h.json")
    >>> _ = open(p, "w").write("[[1, 0, null], [0.5, 1, 1]]")
    >>> load_matrix(p).tolist()
    [[1.0, 0.0, nan], [0.5, 1.0, 1.0]]
    """
    p = Path(path)
    try:
        if p.suffix == ".npy":
            arr = np.load(p, allow_pickle=False)
        elif p.suffix == ".json":
            doc = json.loads(p.read_text(encoding="utf-8"))
            arr = np.array([[math.nan if x is None else x for x in row] for row in doc],
                           dtype=np.float64)
        else:
            raise ValueError(f"{path}: expected a .npy or .json file")
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a JSON matrix ({exc})") from None
    out = np.asarray(arr, dtype=np.float64)
    if out.ndim != 2 or 0 in out.shape:
        raise ValueError(f"{path}: expected a non-empty 2-D matrix, got shape {out.shape}")
    seen = out[~np.isnan(out)]
    if seen.size and (seen.min() < 0.0 or seen.max() > 1.0):
        raise ValueError(f"{path}: scores must lie in [0, 1]")
    return out


def _read_ids(path: str) -> tuple[str, ...]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read examples file {path}: {exc.strerror or exc}") from None
    if p.suffix == ".json":
        doc = json.loads(text)
        if not isinstance(doc, list) or not all(isinstance(x, str) for x in doc):
            raise ValueError(f"examples file {path}: expected a JSON list of strings")
        ids = tuple(doc)
    else:
        ids = tuple(line.strip() for line in text.splitlines() if line.strip())
    return ids


class SelectionSettings(BaseModel):
    """The ``[suites.selection]`` section of a suite with ``mode = "selection"``.

    Attributes
    ----------
    models : list of str
        Candidate model names (at least two, no globs, unique).
    examples : int or str
        Number ``N`` of examples (ids ``"0"`` .. ``"N-1"``) or a path to a file of ids (one per
        line, or a ``.json`` list). Relative paths are relative to the working directory.
    history : str, optional
        Historical score matrix (``.npy`` / ``.json``, shape ``(H, N)``, NaN/null unobserved):
        warm-starts the example factors (fitted once, then frozen; unused by ``"ucbe"``).
    method : {"pulse", "ucbe", "naive"}
        Estimator driving UCB-E (see :class:`monitor.stats.pulse.bandit.SelectionConfig`).
    budget : int, optional
        Total evaluations (default: every model on every example).
    batch_size, max_outstanding, refit_every, init_pulls : int
        Examples per request, evaluation requests in flight (distinct models), refit period,
        initial pulls per model.
    delta, epsilon, bet_cap : float
        Best-model certificate level, tolerance and bet cap.
    seed, rank : int
        Seed of the example draws (and of the factor initialization) and latent dimension.
    l2, exploration : float
        Ridge of the model-factor refit and UCB-E exploration ``a``.
    stop_on_certificate : bool
        Issue no new requests once a best model is certified.
    """

    model_config = ConfigDict(extra="forbid", validate_default=True)

    models: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=2)] = Field(
        description="Candidate model names: at least two, unique, no globs.")
    examples: _PosInt | Annotated[str, Field(min_length=1)] = Field(
        description="The benchmark's examples: a number N (ids `\"0\"` .. `\"N-1\"`) or a "
        "file of ids (one per line, or a `.json` list; relative to the working directory).")
    history: str | None = Field(
        None,
        description="Historical score matrix (`.npy` or `.json`, one row per past model, one "
        "column per example, NaN / null = unobserved) that warm-starts the example factors "
        "(fitted once, then frozen; unused by `ucbe`). Unset: factors fitted jointly.")
    method: Literal["pulse", "ucbe", "naive"] = Field(
        _D.method,
        description="Estimator driving the UCB-E bandit: `pulse` (doubly robust, low-rank "
        "predictions), `ucbe` (observed means only) or `naive` (low-rank predictions, no "
        "correction).")
    budget: _PosInt | None = Field(
        _D.budget,
        description="Total evaluations, initial pulls included. Unset: until every model is "
        "evaluated on every example.")
    batch_size: _PosInt = Field(
        _D.batch_size,
        description="Examples per evaluation request (B), at most the number of examples.")
    max_outstanding: _PosInt = Field(
        1,
        description="Evaluation requests in flight at once (each for a distinct model).")
    refit_every: _PosInt = Field(
        _D.refit_every,
        description="Completed bandit pulls between two refits of the model factors (tau).")
    init_pulls: _PosInt = Field(
        _D.init_pulls, description="Initial pulls per model before the bandit chooses (T0).")
    delta: Annotated[float, Field(gt=0.0, lt=1.0)] = Field(
        _D.delta,
        description="Error probability of the best-model certificate (strictly between 0 and "
        "1).")
    epsilon: Annotated[float, Field(ge=0.0, lt=1.0)] = Field(
        _D.epsilon,
        description="Tolerance of the certificate: the certified model's mean score is within "
        "epsilon of the best one (0: exactly the best). In [0, 1).")
    bet_cap: Annotated[float, Field(gt=0.0, lt=1.0)] = Field(
        _D.bet_cap,
        description="Cap on the certificate's bets (strictly between 0 and 1).")
    seed: Annotated[int, Field(ge=0)] = Field(
        _D.seed,
        description="Seed of the example draws and of the factor initialisation (integer "
        ">= 0): same seed, same requests.")
    rank: _PosInt = Field(4, description="Latent dimension of the low-rank score model.")
    l2: Annotated[float, Field(gt=0.0)] = Field(
        _D.l2, description="Ridge penalty of the model-factor refit (> 0).")
    exploration: Annotated[float, Field(ge=0.0)] = Field(
        _D.exploration,
        description="Exploration constant a of the UCB-E index `mu_hat + sqrt(a / n_observed)` "
        "(>= 0; 0 is greedy).")
    stop_on_certificate: bool = Field(
        True, description="Issue no new requests once a best model is certified.")

    _ids: tuple[str, ...] = PrivateAttr(default=())
    _history: FloatArray | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check(self) -> Self:
        if len(set(self.models)) != len(self.models):
            raise ValueError(f"models must be unique, got {self.models}")
        globs = [m for m in self.models if any(ch in m for ch in "*?[")]
        if globs:
            raise ValueError(f"models must be names, not globs: {globs}")
        if isinstance(self.examples, int):
            ids: tuple[str, ...] = tuple(str(j) for j in range(self.examples))
        else:
            ids = _read_ids(self.examples)
            if not ids:
                raise ValueError(f"examples file {self.examples} holds no ids")
            if len(set(ids)) != len(ids):
                raise ValueError(f"examples file {self.examples} repeats ids")
            if KICKOFF_EXAMPLE_ID in ids:
                raise ValueError(f"{KICKOFF_EXAMPLE_ID!r} is reserved and cannot be an example id")
        if self.batch_size > len(ids):
            raise ValueError(f"batch_size {self.batch_size} exceeds the {len(ids)} examples")
        if self.history is not None:
            hist = load_matrix(self.history)
            if hist.shape[1] != len(ids):
                raise ValueError(
                    f"history {self.history} has {hist.shape[1]} columns, expected one per "
                    f"example ({len(ids)})"
                )
            self._history = hist
        self._ids = ids
        self.to_selection_config()  # the stats layer's own checks
        return self

    @property
    def example_ids(self) -> tuple[str, ...]:
        """Example ids in benchmark order (index ``j`` is the ``j``-th id)."""
        return self._ids

    @property
    def history_matrix(self) -> FloatArray | None:
        """The loaded historical matrix (NaN = unobserved), or None."""
        return self._history

    def to_selection_config(self) -> SelectionConfig:
        """Return the :class:`~monitor.stats.pulse.bandit.SelectionConfig` of this suite."""
        return SelectionConfig(
            method=self.method, batch_size=self.batch_size, budget=self.budget,
            init_pulls=self.init_pulls, exploration=self.exploration,
            refit_every=self.refit_every, l2=self.l2,
            freeze_examples=self._history is not None, delta=self.delta,
            epsilon=self.epsilon, bet_cap=self.bet_cap, seed=self.seed,
        )  # fmt: skip


@dataclass(frozen=True)
class SyntheticBenchmark:
    """A synthetic benchmark: test scores, a historical split and the truth."""

    scores: FloatArray
    history: FloatArray
    means: FloatArray
    best: int
    gap: float

    def truth(self, models: list[str]) -> dict[str, Any]:
        """JSON summary: true mean score per model name, the best model and the top-2 gap."""
        return {"means": {m: float(x) for m, x in zip(models, self.means, strict=True)},
                "best": models[self.best], "gap": self.gap}


def synthetic_benchmark(n_models: int, n_examples: int, *, n_history: int = 40,
                        rank: int = 3, gap: float = 0.05, seed: int = 0) -> SyntheticBenchmark:
    """Binary low-rank logistic score matrix with a unique best model and a historical split.

    Parameters
    ----------
    n_models, n_examples : int
        Shape of the test matrix.
    n_history : int
        Historical models (same examples, disjoint models).
    rank : int
        Latent dimension of the generating logits.
    gap : float
        Minimum gap between the best and second-best mean score; reached by turning failures
        of the best model into successes at random examples if needed.
    seed : int
        All randomness.

    Returns
    -------
    SyntheticBenchmark

    Notes
    -----
    ``S_ij ~ Bernoulli(sigmoid(b_i + u_i . v_j - d_j))``; the truth is the realized matrix
    (the bandit's target is each model's mean over this fixed benchmark).

    Examples
    --------
    >>> b = synthetic_benchmark(3, 40, n_history=5, gap=0.2, seed=1)
    >>> int(np.argmax(b.means)) == b.best, sorted(np.unique(b.scores).tolist())
    (True, [0.0, 1.0])
    """
    if n_models < 2 or n_examples < 1 or n_history < 1 or not 0.0 <= gap < 1.0:
        raise ValueError("need n_models >= 2, n_examples >= 1, n_history >= 1, 0 <= gap < 1")
    rng = np.random.Generator(np.random.Philox(np.random.SeedSequence(seed)))
    total = n_models + n_history
    v = rng.standard_normal((n_examples, rank))
    u = 0.7 * rng.standard_normal((total, rank))
    skill = rng.uniform(-0.8, 0.6, total)
    difficulty = rng.standard_normal(n_examples)
    logits = skill[:, None] + u @ v.T - difficulty[None, :]
    all_scores = (rng.random(logits.shape) < sigmoid(logits)).astype(np.float64)
    scores, history = all_scores[:n_models].copy(), all_scores[n_models:].copy()
    means = scores.mean(axis=1)
    best = int(np.argmax(means))
    second = float(np.max(np.delete(means, best)))
    need = math.ceil(round((gap - (means[best] - second)) * n_examples, 9))
    if need > 0:
        zeros = np.flatnonzero(scores[best] == 0.0)
        if need > zeros.size:
            raise ValueError(f"cannot reach gap {gap} with {n_examples} examples")
        scores[best, rng.choice(zeros, size=need, replace=False)] = 1.0
        means = scores.mean(axis=1)
    top = np.sort(means)[::-1]
    return SyntheticBenchmark(scores, history, means, int(np.argmax(means)),
                              float(top[0] - top[1]))
