"""Logistic low-rank factorization of a partially observed model x example score matrix.

PULSE (Tolochinsky, Tenzer, Romano), Step 1 / eq. 1: ``P(S_ij = 1) = sigma(u_i . v_j)`` fitted by
binary cross-entropy on the observed entries plus an L2 penalty on the factors. Example factors
``V`` are typically learnt once from a historical (fully observed) score matrix and then frozen;
model factors ``U`` are refit on the test-time observations every ``tau`` bandit steps.

Every solver here is a vectorized damped Newton method on the block-convex subproblems (one small
``r x r`` system per row), so a fit is deterministic given its inputs and the seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.stats.state_contract import restorer

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


def sigmoid(z: ArrayLike) -> FloatArray:
    """Numerically stable logistic function.

    Parameters
    ----------
    z : array_like
        Log-odds.

    Returns
    -------
    numpy.ndarray
        ``1 / (1 + exp(-z))`` computed without overflow.

    Examples
    --------
    >>> float(sigmoid(0.0))
    0.5
    >>> bool(sigmoid(-1000.0) >= 0.0)
    True
    """
    x = np.asarray(z, dtype=np.float64)
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * x)), dtype=np.float64)


@dataclass(frozen=True)
class RefitCost:
    """Compute spent by one (re)fit.

    Attributes
    ----------
    rows : int
        Number of factor rows solved (models for a ``U`` refit; models + examples per sweep for a
        joint fit).
    observations : int
        Observed entries touched per Newton step.
    newton_steps : int
        Newton iterations taken (max over the vectorized rows, summed over sweeps).
    flops : int
        Estimated multiply-adds: per Newton step ``rows * n_cols * r**2`` for the Hessians
        (one GEMM against the precomputed ``v v^T`` table) plus ``rows * n_cols * r`` for the
        logits and gradients, plus ``rows * r**3`` for the solves.
    """

    rows: int
    observations: int
    newton_steps: int
    flops: int

    def to_dict(self) -> dict[str, int]:
        """Return a JSON-serializable dict."""
        return {"rows": self.rows, "observations": self.observations,
                "newton_steps": self.newton_steps, "flops": self.flops}

    def __add__(self, other: RefitCost) -> RefitCost:
        return RefitCost(self.rows + other.rows, self.observations + other.observations,
                         self.newton_steps + other.newton_steps, self.flops + other.flops)


def _row_loss(z: FloatArray, y: FloatArray, w: FloatArray, u: FloatArray,
              ridge: float) -> FloatArray:
    # BCE in logit form: softplus(z) - y z, weighted by the observation mask w.
    bce = (np.logaddexp(0.0, z) - y * z) * w
    return np.asarray(bce.sum(axis=1) + 0.5 * ridge * np.einsum("kr,kr->k", u, u), dtype=np.float64)


def fit_rows(scores: ArrayLike, mask: ArrayLike, factors: ArrayLike, ridge: float,
             init: ArrayLike | None = None, max_newton: int = 25,
             tol: float = 1e-7) -> tuple[FloatArray, RefitCost]:
    """Solve independent L2-regularized logistic regressions, one per row.

    Row ``k`` minimizes ``sum_j mask[k, j] * BCE(scores[k, j], sigmoid(u_k . f_j)) +
    ridge / 2 * |u_k|^2`` over ``u_k`` with the column factors ``f_j`` held fixed.

    Parameters
    ----------
    scores : array_like, shape (k, n)
        Targets in [0, 1] (binary scores, or soft scores); ignored where ``mask`` is False.
    mask : array_like of bool, shape (k, n)
        Which entries are observed.
    factors : array_like, shape (n, r)
        Fixed column factors.
    ridge : float
        L2 penalty (> 0 keeps every subproblem strictly convex).
    init : array_like, shape (k, r), optional
        Warm start (default zeros).
    max_newton : int
        Maximum Newton iterations.
    tol : float
        Stop when every row's max-abs gradient is below ``tol``.

    Returns
    -------
    u : numpy.ndarray, shape (k, r)
        Row factors.
    cost : RefitCost
        Work done.

    Notes
    -----
    Each row's problem is strictly convex (ridge > 0); damped Newton with Armijo backtracking
    converges to its unique minimizer, so the result does not depend on the warm start beyond
    ``tol``. Deterministic: no randomness.

    Examples
    --------
    >>> v = np.array([[1.0], [-1.0]])
    >>> u, cost = fit_rows([[1.0, 0.0]], [[True, True]], v, ridge=1.0)
    >>> bool(u[0, 0] > 0), cost.rows
    (True, 1)
    """
    y = np.asarray(scores, dtype=np.float64)
    w = np.asarray(mask, dtype=np.float64)
    f = np.asarray(factors, dtype=np.float64)
    k, n = w.shape
    r = f.shape[1]
    if ridge <= 0.0:
        raise ValueError("ridge must be > 0")
    y = np.where(w > 0, y, 0.0)
    u = np.zeros((k, r)) if init is None else np.array(init, dtype=np.float64, copy=True)
    outer = (f[:, :, None] * f[:, None, :]).reshape(n, r * r)
    eye = np.eye(r)
    steps = 0
    active = np.ones(k, dtype=bool)
    for _ in range(max_newton):
        if not active.any():
            break
        steps += 1
        idx = np.flatnonzero(active)
        ua, wa, ya = u[idx], w[idx], y[idx]
        z = ua @ f.T
        p = sigmoid(z)
        grad = ((p - ya) * wa) @ f + ridge * ua
        gmax = np.abs(grad).max(axis=1)
        done = gmax < tol
        hess = (((p * (1.0 - p)) * wa) @ outer).reshape(-1, r, r) + ridge * eye
        step = np.linalg.solve(hess, grad[:, :, None])[:, :, 0]
        loss0 = _row_loss(z, ya, wa, ua, ridge)
        slope = np.einsum("kr,kr->k", grad, step)
        t = np.ones(len(idx))
        cand = ua - step
        for _ls in range(30):
            loss1 = _row_loss(cand @ f.T, ya, wa, cand, ridge)
            bad = (loss1 > loss0 - 1e-4 * t * slope) & ~done
            if not bad.any():
                break
            t = np.where(bad, 0.5 * t, t)
            cand = ua - t[:, None] * step
        u[idx] = np.where(done[:, None], ua, cand)
        active[idx[done]] = False
    nobs = int(w.sum())
    flops = steps * (k * n * r * r + 2 * k * n * r + k * r ** 3)
    return u, RefitCost(rows=k, observations=nobs, newton_steps=steps, flops=flops)


def fit_logistic_factors(scores: ArrayLike, mask: ArrayLike, rank: int, l2: float,
                         seed: int = 0, sweeps: int = 15, init_scale: float = 0.1,
                         max_newton: int = 25) -> tuple[FloatArray, FloatArray, RefitCost]:
    """Fit ``U`` and ``V`` jointly by eq. 1 (mean BCE over observed + ``l2/(2(m+n))`` penalty).

    Alternating minimization: each sweep solves the (convex) ``U`` subproblem with ``V`` fixed and
    then the ``V`` subproblem with ``U`` fixed, both by :func:`fit_rows`. Multiplying eq. 1 by the
    number of observed entries ``|Omega|`` gives per-row ridge ``l2 * |Omega| / (m + n)``.

    Parameters
    ----------
    scores, mask : array_like, shape (m, n)
        Historical scores and which are observed.
    rank : int
        Latent dimension ``r``.
    l2 : float
        Eq. 1's lambda.
    seed : int
        Seed of the random initialization of ``V`` (the only randomness).
    sweeps : int
        Alternating sweeps.
    init_scale : float
        Standard deviation of the initial ``V``.
    max_newton : int
        Newton iterations per subproblem.

    Returns
    -------
    U : numpy.ndarray, shape (m, r)
    V : numpy.ndarray, shape (n, r)
    cost : RefitCost
        Summed over sweeps.

    Notes
    -----
    Eq. 1 is not jointly convex; alternating exact block minimization decreases it monotonically
    and stops at a stationary point that depends on the seeded initialization. Deterministic
    given the inputs and ``seed``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> s = (rng.random((20, 30)) < 0.5).astype(float)
    >>> u, v, cost = fit_logistic_factors(s, np.ones_like(s, bool), rank=2, l2=1.0, sweeps=2)
    >>> u.shape, v.shape
    ((20, 2), (30, 2))
    """
    s = np.asarray(scores, dtype=np.float64)
    o = np.asarray(mask, dtype=bool)
    m, n = s.shape
    ridge = l2 * max(int(o.sum()), 1) / (m + n)
    gen = np.random.Generator(np.random.Philox(np.random.SeedSequence(seed)))
    v = init_scale * gen.standard_normal((n, rank))
    u = np.zeros((m, rank))
    total = RefitCost(0, 0, 0, 0)
    for _ in range(sweeps):
        u, c1 = fit_rows(s, o, v, ridge, init=u, max_newton=max_newton)
        v, c2 = fit_rows(s.T, o.T, u, ridge, init=v, max_newton=max_newton)
        total = total + c1 + c2
    return u, v, total


class LogisticLowRank:
    """Low-rank logistic predictor ``S_hat = sigmoid(U V^T)`` with refittable model factors.

    Parameters
    ----------
    n_models : int
        Number of test models (rows of ``U``).
    example_factors : array_like, shape (n, r)
        ``V``: warm start, e.g. from :func:`fit_logistic_factors` on a historical matrix.
    l2 : float
        Ridge on each model factor for the frozen-``V`` refit (see Notes).
    freeze_examples : bool
        If True (PULSE, Alg. 1) ``V`` never changes. If False every refit also runs
        ``joint_sweeps`` alternating sweeps of eq. 1 over all rows and columns.
    joint_sweeps : int
        Sweeps per refit when ``freeze_examples`` is False.
    max_newton : int
        Newton iterations per subproblem.

    Notes
    -----
    With ``V`` frozen, model ``i``'s factor only depends on model ``i``'s own observations, so a
    refit only re-solves the rows whose observations changed since the last refit (the others
    would re-solve to the same optimum). To keep that exact the frozen-``V`` objective is
    ``sum_{j observed} BCE + l2/2 |u_i|^2`` per model, i.e. eq. 1 with a penalty that does not
    rescale with the global ``|Omega|`` (eq. 1 at the current ``|Omega|`` corresponds to
    ``l2 = lambda |Omega| / (m + n)``). Predictions are only ever a plug-in: the AIPW estimator
    is unbiased whatever they are, as long as they are fixed before the examples they are used
    for are drawn.

    Examples
    --------
    >>> lr = LogisticLowRank(2, np.array([[1.0], [-1.0], [0.5]]), l2=1.0)
    >>> s = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    >>> o = np.array([[True, True, False], [True, True, False]])
    >>> cost = lr.refit(s, o)
    >>> p = lr.predictions()
    >>> bool(p[0, 2] > 0.5 > p[1, 2])
    True
    """

    def __init__(self, n_models: int, example_factors: ArrayLike, l2: float = 1.0,
                 freeze_examples: bool = True, joint_sweeps: int = 3,
                 max_newton: int = 25) -> None:
        v = np.array(example_factors, dtype=np.float64, copy=True)
        if v.ndim != 2:
            raise ValueError("example_factors must be 2-D (n_examples, rank)")
        if l2 <= 0.0:
            raise ValueError("l2 must be > 0")
        self._v = v
        self._u = np.zeros((int(n_models), v.shape[1]))
        self._l2 = float(l2)
        self._freeze = bool(freeze_examples)
        self._sweeps = int(joint_sweeps)
        self._max_newton = int(max_newton)
        self._last_cost = RefitCost(0, 0, 0, 0)

    @property
    def rank(self) -> int:
        """Latent dimension ``r``."""
        return int(self._v.shape[1])

    @property
    def model_factors(self) -> FloatArray:
        """Copy of ``U``, shape (m, r)."""
        return self._u.copy()

    @property
    def example_factors(self) -> FloatArray:
        """Copy of ``V``, shape (n, r)."""
        return self._v.copy()

    @property
    def last_cost(self) -> RefitCost:
        """Cost of the most recent :meth:`refit`."""
        return self._last_cost

    def refit(self, scores: ArrayLike, mask: ArrayLike,
              rows: ArrayLike | None = None) -> RefitCost:
        """Refit the model factors on the observed entries.

        Parameters
        ----------
        scores, mask : array_like, shape (m, n)
            Current observations (``scores`` ignored where ``mask`` is False).
        rows : array_like of int, optional
            Models whose observations changed since the last refit (default: all). Ignored
            (all rows refit) when example factors are not frozen.

        Returns
        -------
        RefitCost
            Compute spent (also kept as :attr:`last_cost`).
        """
        s = np.asarray(scores, dtype=np.float64)
        o = np.asarray(mask, dtype=bool)
        if self._freeze:
            idx = (np.arange(self._u.shape[0]) if rows is None
                   else np.unique(np.asarray(rows, dtype=np.int64)))
            if idx.size == 0:
                self._last_cost = RefitCost(0, 0, 0, 0)
                return self._last_cost
            u, cost = fit_rows(s[idx], o[idx], self._v, self._l2, init=self._u[idx],
                               max_newton=self._max_newton)
            self._u[idx] = u
        else:
            m, n = s.shape
            ridge = self._l2 * max(int(o.sum()), 1) / (m + n)
            cost = RefitCost(0, 0, 0, 0)
            for _ in range(self._sweeps):
                self._u, c1 = fit_rows(s, o, self._v, ridge, init=self._u,
                                       max_newton=self._max_newton)
                self._v, c2 = fit_rows(s.T, o.T, self._u, ridge, init=self._v,
                                       max_newton=self._max_newton)
                cost = cost + c1 + c2
        self._last_cost = cost
        return cost

    def predictions(self, rows: ArrayLike | None = None) -> FloatArray:
        """Predicted scores ``sigmoid(U V^T)`` (optionally for a subset of models).

        Parameters
        ----------
        rows : array_like of int, optional
            Models to predict (default all).

        Returns
        -------
        numpy.ndarray, shape (len(rows), n)
        """
        u = self._u if rows is None else self._u[np.asarray(rows, dtype=np.int64)]
        return sigmoid(u @ self._v.T)

    def to_state(self) -> dict[str, Any]:
        """Return a JSON-serializable state (exact float round trip)."""
        return {"u": self._u.tolist(), "v": self._v.tolist(), "l2": self._l2,
                "freeze_examples": self._freeze, "joint_sweeps": self._sweeps,
                "max_newton": self._max_newton, "last_cost": self._last_cost.to_dict()}

    @classmethod
    @restorer("LogisticLowRank")
    def from_state(cls, state: dict[str, Any]) -> LogisticLowRank:
        """Rebuild from :meth:`to_state` output."""
        u = np.asarray(state["u"], dtype=np.float64)
        obj = cls(u.shape[0], np.asarray(state["v"], dtype=np.float64), l2=float(state["l2"]),
                  freeze_examples=bool(state["freeze_examples"]),
                  joint_sweeps=int(state["joint_sweeps"]), max_newton=int(state["max_newton"]))
        obj._u = u.reshape(obj._u.shape).copy()
        obj._last_cost = RefitCost(**{k: int(v) for k, v in state["last_cost"].items()})
        return obj
