"""Strata for certified and stratified estimation: labels, judge-loss bins, 1-NN partition.

Three ways to put a unit in one of K strata, all decided *before* the unit's human label exists:

* :class:`LabelStrata` -- the event's own ``stratum`` string, K fixed slots, overflow to "other".
* :class:`JudgeLossBins` -- equal-mass bins of the judge loss, edges fixed after a warm-up.
* :func:`fit_knn_partition` -- Cer-Eval Algorithm 2 (1-nearest-neighbour over embeddings), which
  returns a frozen :class:`NearestNeighbourPartition`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.stats.cereval.stitched_radii import bernstein_radius
from monitor.stats.state_contract import check_header, restorer

__all__ = [
    "DEFAULT_BIN_WARMUP",
    "JudgeLossBins",
    "KnnFit",
    "LabelStrata",
    "NearestNeighbourPartition",
    "fit_knn_partition",
    "nearest_indices",
]

OTHER = "__other__"
DEFAULT_BIN_WARMUP = 1000
"""Judge losses used to estimate the equal-mass bin edges before they are frozen."""


class LabelStrata:
    """Map stratum names to K fixed indices; names beyond K-1 share the last ("other") slot.

    Parameters
    ----------
    n_strata : int
        K >= 1, fixed in advance (the certified interval splits delta over K).

    Notes
    -----
    Names get indices in order of first appearance; the mapping never changes afterwards, so a
    unit's stratum depends only on its own ``stratum`` field, never on its loss. ``None`` and the
    overflow names go to slot ``K - 1``.

    Examples
    --------
    >>> s = LabelStrata(3)
    >>> [s.index(x) for x in ["math", "code", "chat", "math", None]]
    [0, 1, 2, 0, 2]
    >>> s.names
    ['math', 'code', '__other__']
    >>> LabelStrata.from_state(s.to_state()).index("code")
    1
    """

    def __init__(self, n_strata: int) -> None:
        if n_strata < 1:
            raise ValueError(f"n_strata must be >= 1, got {n_strata}")
        self._k = int(n_strata)
        self._names: list[str] = []

    @property
    def n_strata(self) -> int:
        """K."""
        return self._k

    @property
    def names(self) -> list[str]:
        """Slot names (the last is ``__other__`` once all named slots are used)."""
        out = list(self._names)
        if len(out) < self._k and len(out) == self._k - 1:
            out.append(OTHER)
        return out

    def index(self, name: str | None) -> int:
        """Return the stratum index of ``name``, assigning a new slot if one is free."""
        if name is None or name == OTHER:
            return self._k - 1
        if name in self._names:
            return self._names.index(name)
        if len(self._names) < self._k - 1:
            self._names.append(name)
            return len(self._names) - 1
        return self._k - 1

    def to_state(self) -> dict[str, object]:
        """Return a JSON-serializable state."""
        return {"kind": "label_strata", "n_strata": self._k, "names": list(self._names)}

    @classmethod
    @restorer("LabelStrata")
    def from_state(cls, state: dict[str, object]) -> LabelStrata:
        """Rebuild from :meth:`to_state` output."""
        check_header(state, "label_strata", None, "LabelStrata")
        obj = cls(int(state["n_strata"]))  # type: ignore[call-overload]
        obj._names = [str(x) for x in state["names"]]  # type: ignore[attr-defined]
        return obj


class JudgeLossBins:
    """Equal-mass bins of the judge loss, with edges estimated on a warm-up and then frozen.

    Parameters
    ----------
    n_bins : int
        K, the number of strata (fixed; ties in the judge loss may leave some bins empty).
    warmup : int
        Number of judge losses used to estimate the quantile edges.

    Notes
    -----
    During the warm-up, :meth:`update` keeps the judge losses (memory bounded by ``warmup``) and
    :meth:`assign` returns ``None``: those units have no stratum and must not enter a stratified
    certificate. At the ``warmup``-th value the empirical quantiles at ``j/K`` become the fixed
    edges (duplicates removed) and the buffer is dropped. Freezing is what keeps the strata from
    moving under the estimate: afterwards a unit's stratum is a fixed function of its judge loss,
    which is known before and independent of the human label's sampling, so per-stratum labels are
    i.i.d. from a fixed conditional distribution as :class:`StratifiedCertifiedMean` requires.
    Only judge losses (plentiful, unlabelled traffic) are used, so the warm-up costs no labels.
    Bin j is ``(edge_{j-1}, edge_j]``, so a point mass at an edge lands in the lower bin.

    Examples
    --------
    >>> b = JudgeLossBins(n_bins=4, warmup=8)
    >>> for x in [0.1, 0.9, 0.3, 0.7, 0.5, 0.2, 0.8, 0.6]:
    ...     b.update(x)
    >>> b.frozen, [round(e, 3) for e in b.edges]
    (True, [0.2, 0.5, 0.7])
    >>> [b.assign(x) for x in [0.0, 0.2, 0.21, 0.99]]
    [0, 0, 1, 3]
    """

    def __init__(self, n_bins: int, warmup: int = DEFAULT_BIN_WARMUP) -> None:
        if n_bins < 1 or warmup < 1:
            raise ValueError("n_bins and warmup must be >= 1")
        self._k = int(n_bins)
        self._warmup = int(warmup)
        self._buffer: list[float] = []
        self._edges: list[float] | None = None

    @property
    def n_strata(self) -> int:
        """K."""
        return self._k

    @property
    def frozen(self) -> bool:
        """Whether the edges are fixed."""
        return self._edges is not None

    @property
    def edges(self) -> list[float]:
        """Interior bin edges (empty before freezing)."""
        return [] if self._edges is None else list(self._edges)

    def update(self, judge_loss: float) -> None:
        """Feed one judge loss (used only during the warm-up)."""
        if self._edges is not None:
            return
        x = float(judge_loss)
        if not 0.0 <= x <= 1.0:
            raise ValueError(f"judge_loss must be in [0, 1], got {judge_loss}")
        self._buffer.append(x)
        if len(self._buffer) >= self._warmup:
            q = np.quantile(np.array(self._buffer), np.arange(1, self._k) / self._k,
                            method="inverted_cdf")
            self._edges = [float(e) for e in np.unique(q)]
            self._buffer = []

    def assign(self, judge_loss: float) -> int | None:
        """Stratum of a unit with this judge loss, or ``None`` during the warm-up."""
        if self._edges is None:
            return None
        return int(np.searchsorted(np.array(self._edges), float(judge_loss), side="left"))

    def to_state(self) -> dict[str, object]:
        """Return a JSON-serializable state."""
        return {"kind": "judge_loss_bins", "n_bins": self._k, "warmup": self._warmup,
                "buffer": list(self._buffer), "edges": self._edges}

    @classmethod
    @restorer("JudgeLossBins")
    def from_state(cls, state: dict[str, object]) -> JudgeLossBins:
        """Rebuild from :meth:`to_state` output."""
        check_header(state, "judge_loss_bins", None, "JudgeLossBins")
        obj = cls(int(state["n_bins"]), int(state["warmup"]))  # type: ignore[call-overload]
        obj._buffer = [float(x) for x in state["buffer"]]  # type: ignore[attr-defined]
        e = state["edges"]
        obj._edges = None if e is None else [float(x) for x in e]  # type: ignore[attr-defined]
        return obj


def nearest_indices(
    queries: ArrayLike, references: ArrayLike, chunk: int = 2048
) -> NDArray[np.intp]:
    """Index of the nearest reference (Euclidean) for each query row, computed in chunks.

    Examples
    --------
    >>> nearest_indices([[0.0], [0.9], [2.2]], [[0.0], [1.0], [2.0]]).tolist()
    [0, 1, 2]
    """
    q = np.atleast_2d(np.asarray(queries, dtype=np.float64))
    r = np.atleast_2d(np.asarray(references, dtype=np.float64))
    rn = np.einsum("ij,ij->i", r, r)
    out = np.empty(q.shape[0], dtype=np.intp)
    for s in range(0, q.shape[0], chunk):
        block = q[s:s + chunk]
        d = rn[None, :] - 2.0 * block @ r.T
        out[s:s + chunk] = np.argmin(d, axis=1)
    return out


class NearestNeighbourPartition:
    """A frozen 1-NN partition: a unit takes the stratum of its nearest reference embedding.

    Parameters
    ----------
    references : array_like, shape (m, d)
        Reference embeddings.
    labels : array_like of int, shape (m,)
        Stratum of each reference.
    n_strata : int
        K (labels must be in ``[0, K)``).

    Examples
    --------
    >>> p = NearestNeighbourPartition([[0.0, 0.0], [5.0, 0.0]], [0, 1], 2)
    >>> p.assign([4.0, 1.0]), p.assign_many([[0.1, 0.0], [6.0, 0.0]]).tolist()
    (1, [0, 1])
    >>> NearestNeighbourPartition.from_state(p.to_state()).assign([4.0, 1.0])
    1
    """

    def __init__(self, references: ArrayLike, labels: ArrayLike, n_strata: int) -> None:
        self._ref = np.atleast_2d(np.asarray(references, dtype=np.float64))
        self._lab = np.asarray(labels, dtype=np.intp)
        self._k = int(n_strata)
        if self._ref.shape[0] != self._lab.shape[0] or self._ref.shape[0] == 0:
            raise ValueError("need as many labels as (at least one) reference rows")
        if self._lab.min() < 0 or self._lab.max() >= self._k:
            raise ValueError("labels must be in [0, n_strata)")

    @property
    def n_strata(self) -> int:
        """K."""
        return self._k

    def assign(self, embedding: ArrayLike) -> int:
        """Stratum of one embedding."""
        return int(self._lab[nearest_indices(embedding, self._ref)[0]])

    def assign_many(self, embeddings: ArrayLike) -> NDArray[np.intp]:
        """Strata of many embeddings (rows)."""
        return np.asarray(self._lab[nearest_indices(embeddings, self._ref)], dtype=np.intp)

    def to_state(self) -> dict[str, object]:
        """Return a JSON-serializable state (references as nested float lists)."""
        return {"kind": "knn_partition", "n_strata": self._k,
                "references": self._ref.tolist(), "labels": self._lab.tolist()}

    @classmethod
    @restorer("NearestNeighbourPartition")
    def from_state(cls, state: dict[str, object]) -> NearestNeighbourPartition:
        """Rebuild from :meth:`to_state` output."""
        check_header(state, "knn_partition", None, "NearestNeighbourPartition")
        return cls(state["references"], state["labels"],  # type: ignore[arg-type]
                   int(state["n_strata"]))  # type: ignore[call-overload]


@dataclass(frozen=True)
class KnnFit:
    """Result of :func:`fit_knn_partition`.

    Attributes
    ----------
    partition : NearestNeighbourPartition
        The chosen classifier ``C_K``.
    pool_strata : numpy.ndarray
        Stratum of each pool point.
    labelled_strata : numpy.ndarray
        Stratum of each labelled point (training points keep their own label).
    radius : float
        ``sum_j N_j eps_j / N`` of the chosen K.
    candidate_radii : tuple of float
        The same for every candidate k = 1, ..., ceil(ln |S|) + 1.
    """

    partition: NearestNeighbourPartition
    pool_strata: NDArray[np.intp]
    labelled_strata: NDArray[np.intp]
    radius: float
    candidate_radii: tuple[float, ...]


def fit_knn_partition(
    pool: ArrayLike,
    labelled: ArrayLike,
    losses: ArrayLike,
    delta: float,
    rng: np.random.Generator,
    train_fraction: float = 0.5,
    log_factor: float = 16.0,
    labelled_rows: ArrayLike | None = None,
) -> KnnFit:
    """Cer-Eval Algorithm 2: choose K and a 1-NN partition minimizing the weighted radius.

    For ``k = 1, ..., ceil(ln |S|) + 1``: label each labelled point ``min(floor(k Z), k-1)``, train
    a 1-NN classifier on a random subset (``train_fraction``) of the labelled points, partition the
    pool, and compute ``sum_j N_j eps_j / N`` with Algorithm 1's radius at ``delta/k``; keep the
    best k.

    Parameters
    ----------
    pool : array_like, shape (N, d)
        Embeddings of the traffic / dataset to partition (labelled or not).
    labelled : array_like, shape (n, d)
        Embeddings of the labelled points S.
    losses : array_like, shape (n,)
        Their losses Z in [0, 1].
    delta : float
        Failure probability used in the radius.
    rng : numpy.random.Generator
        Randomness for the training subset.
    train_fraction : float
        Fraction of S the classifier is trained on (the paper says "a random subset").
    log_factor : float
        As in :func:`monitor.stats.cereval.stitched_radii.bernstein_radius`.
    labelled_rows : array_like of int, optional
        If the labelled points are rows of ``pool``, their row indices (saves one NN search).

    Returns
    -------
    KnnFit
        The chosen partition and diagnostics.

    Notes
    -----
    The partition is a function of the labelled losses, so labels used to fit it are *not* i.i.d.
    within the resulting strata (training points sit in the stratum of their own loss): the
    interval computed from those same labels is outside every guarantee in the paper (Theorem
    5.2 assumes a fixed partition). For a certificate, fit once, freeze the returned partition,
    and start a new :class:`monitor.stats.cereval.certified_mean.StratifiedCertifiedMean` with the
    labels that arrive afterwards. ``benchmarks/cereval_synthetic.py`` measures the paper's
    refitting variant empirically.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = np.r_[rng.normal(0, 1, (4000, 1)), rng.normal(8, 1, (4000, 1))]
    >>> z = np.r_[np.full(4000, 0.1), np.full(4000, 0.9)]
    >>> fit = fit_knn_partition(x, x, z, 0.05, rng)
    >>> fit.partition.n_strata, round(fit.radius, 3), round(fit.candidate_radii[0], 3)
    (2, 0.028, 0.034)

    With 400 points instead of 8000 the single stratum wins: a near-constant stratum still pays
    ``v_up = eta + eta^2`` for not knowing its variance (the ``eps^(2/3)`` term of Theorem 5.2).
    """
    pool_arr = np.atleast_2d(np.asarray(pool, dtype=np.float64))
    s_arr = np.atleast_2d(np.asarray(labelled, dtype=np.float64))
    z = np.asarray(losses, dtype=np.float64)
    n = z.shape[0]
    if n < 1 or s_arr.shape[0] != n:
        raise ValueError("need at least one labelled point and one loss per labelled point")
    m = max(1, min(n, round(train_fraction * n)))
    train = rng.choice(n, size=m, replace=False)
    nn_pool = nearest_indices(pool_arr, s_arr[train])
    if labelled_rows is None:
        nn_s = nearest_indices(s_arr, s_arr[train])
    else:
        nn_s = nn_pool[np.asarray(labelled_rows, dtype=np.intp)].copy()
    nn_s[train] = np.arange(m)
    n_pool = pool_arr.shape[0]
    radii: list[float] = []
    best: tuple[float, int, NDArray[np.intp]] | None = None
    for k in range(1, math.ceil(math.log(n)) + 2):
        lab = np.minimum(np.floor(k * z[train]).astype(np.intp), k - 1)
        pool_k = lab[nn_pool]
        s_k = lab[nn_s]
        big_n = np.bincount(pool_k, minlength=k).astype(np.float64)
        cnt = np.bincount(s_k, minlength=k).astype(np.float64)
        sums = np.bincount(s_k, weights=z, minlength=k)
        sq = np.bincount(s_k, weights=z * z, minlength=k)
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = np.where(cnt > 0, sums / cnt, 0.0)
            var = np.where(cnt > 0, np.maximum(sq / cnt - mean**2, 0.0), 0.0)
        eps = bernstein_radius(cnt, var, delta, k, log_factor)
        occupied = big_n > 0
        r = float(np.sum(big_n[occupied] * eps[occupied]) / n_pool)
        radii.append(r)
        if best is None or r < best[0]:
            best = (r, k, lab)
    if best is None:
        raise ValueError("fit_knn_partition needs at least one candidate number of strata")
    r, k, lab = best
    part = NearestNeighbourPartition(s_arr[train], lab, k)
    return KnnFit(part, lab[nn_pool], lab[nn_s], r, tuple(radii))
