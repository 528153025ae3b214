"""Parameters of a PULSE selection run and the UCB-E index they drive (Algorithm 1, inputs).

:class:`SelectionConfig` is the (JSON round-trippable) configuration of
:class:`monitor.stats.pulse.bandit.SelectionBandit`; :func:`ucb_index` is the heuristic UCB-E index
the bandit ranks models by.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.stats.pulse.aipw_plan import LambdaRule
from monitor.stats.state_contract import restorer

__all__ = ["DEFAULTS", "Method", "SelectionConfig", "ucb_index"]

FloatArray = NDArray[np.float64]
Method = Literal["pulse", "ucbe", "naive"]


@dataclass(frozen=True)
class SelectionConfig:
    """Parameters of a selection run (Algorithm 1's inputs).

    Attributes
    ----------
    method : {"pulse", "ucbe", "naive"}
        Estimator driving UCB-E.
    batch_size : int
        ``B``: examples per pull.
    budget : int or None
        ``T``: total evaluations including initialization (None: until everything is observed).
    init_pulls : int
        ``T0``: initial pulls per model (drawn with ``lam = 0``).
    exploration : float
        ``a`` in the UCB-E index ``mu_hat + sqrt(a / |O_i|)``.
    refit_every : int
        ``tau``: refit the model factors every ``tau`` completed bandit pulls.
    l2 : float
        Ridge of the model-factor refit.
    freeze_examples : bool
        Keep the example factors fixed (Algorithm 1). False refits them jointly (eq. 1) at every
        refit, e.g. when no historical matrix warm-started them.
    lambda_rule : {"regression", "paper", "zero", "one"}
        AIPW weight rule (see :class:`monitor.stats.pulse.aipw.AIPWEstimator`). The default is the
        predictable calibration slope; ``"paper"`` is Step 3 (eq. 27), which collapses to 0 when
        the predictions are biased (see the benchmark).
    delta, epsilon, bet_cap : float
        Certificate level, tolerance and bet cap (see
        :class:`monitor.stats.pulse.bestarm.BestModelCertifier`).
    certify : bool
        Maintain the certificate (costs one bisection per pull).
    seed : int
        Randomness of pull ``s`` is ``Philox(SeedSequence(seed, spawn_key=(s,)))``.

    Examples
    --------
    >>> cfg = SelectionConfig(method="ucbe", batch_size=8, budget=120)
    >>> SelectionConfig.from_dict(cfg.to_dict()) == cfg
    True
    >>> SelectionConfig(batch_size=0)
    Traceback (most recent call last):
    ...
    ValueError: batch_size, init_pulls and refit_every must be >= 1
    """

    method: Method = "pulse"
    batch_size: int = 32
    budget: int | None = None
    init_pulls: int = 1
    exploration: float = 1.0
    refit_every: int = 10
    l2: float = 1.0
    freeze_examples: bool = True
    lambda_rule: LambdaRule = "regression"
    delta: float = 0.05
    epsilon: float = 0.0
    bet_cap: float = 0.5
    certify: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        """Validate."""
        if self.method not in ("pulse", "ucbe", "naive"):
            raise ValueError(f"unknown method {self.method!r}")
        if self.batch_size < 1 or self.init_pulls < 1 or self.refit_every < 1:
            raise ValueError("batch_size, init_pulls and refit_every must be >= 1")
        if self.budget is not None and self.budget < 1:
            raise ValueError("budget must be >= 1")
        if self.exploration < 0:
            raise ValueError("exploration must be >= 0")

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serializable dict."""
        return asdict(self)

    @classmethod
    @restorer("SelectionConfig")
    def from_dict(cls, d: dict[str, Any]) -> SelectionConfig:
        """Inverse of :meth:`to_dict`."""
        return cls(**d)


DEFAULTS = SelectionConfig()
"""The default parameters (the ``[suites.selection]`` section takes its defaults from here)."""


def ucb_index(estimates: ArrayLike, n_observed: ArrayLike, exploration: float) -> FloatArray:
    """UCB-E index ``mu_hat + sqrt(a / |O_i|)`` (Algorithm 1, line 13).

    Parameters
    ----------
    estimates : array_like
        Current estimates (nan counts as -inf).
    n_observed : array_like
        Observed examples per model (0 gives +inf).
    exploration : float
        ``a``.

    Returns
    -------
    numpy.ndarray

    Notes
    -----
    Heuristic index (Audibert & Bubeck's UCB-E with ``|O_i|`` observed examples); no coverage
    is claimed for ``mu_hat +- sqrt(a / |O_i|)``. Valid bounds come from
    :class:`monitor.stats.pulse.bestarm.BestModelCertifier`.

    Examples
    --------
    >>> ucb_index([0.5, 0.6], [4, 100], 1.0).round(2).tolist()
    [1.0, 0.7]
    """
    est = np.nan_to_num(np.asarray(estimates, dtype=np.float64), nan=-np.inf)
    k = np.asarray(n_observed, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(k > 0, est + np.sqrt(exploration / np.maximum(k, 1.0)), np.inf)
