"""What both one-sided tests of :mod:`.autoeval` keep besides their e-process.

A test's reliance factors and prior weights, its largest log e-value and first crossing, the
running sums of human losses and of ``b - f``, and the state document around its e-process.
:class:`~.autoeval_plugin.PlugInTest` and :class:`~.autoeval_mixture.MixtureTest` extend
:class:`OneSidedBase`; :func:`check_round` validates one round's losses for both.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from monitor.stats.betting.bets import Side
from monitor.stats.state_contract import check_header

__all__ = ["STATE_KIND", "OneSidedBase", "check_round", "check_state"]

STATE_KIND = "certmon.AutoEvalTest"


def check_round(human: float, judge: float, block_mean: float | None) -> None:
    """Raise ``ValueError`` unless the losses are finite floats in [0, 1].

    Examples
    --------
    >>> check_round(0.0, 1.0, None)
    >>> check_round(0.5, 1.5, 0.2)
    Traceback (most recent call last):
    ...
    ValueError: judge_loss must be a finite number in [0, 1], got 1.5
    """
    if (
        0.0 <= human <= 1.0
        and 0.0 <= judge <= 1.0
        and (block_mean is None or 0.0 <= block_mean <= 1.0)
    ):
        return
    for name, v in (("human_loss", human), ("judge_loss", judge), ("block_mean", block_mean)):
        if not (v is None and name == "block_mean") and not 0.0 <= v <= 1.0:  # type: ignore[operator]
            raise ValueError(f"{name} must be a finite number in [0, 1], got {v!r}")


class OneSidedBase:
    """Bookkeeping shared by the one-sided tests: rhos, prior weights, maximum, crossing, sums.

    Parameters
    ----------
    alpha, delta : float
        Risk level and error level in (0, 1).
    side : {"certify", "violate"}
        The test's null hypothesis (see :func:`~.autoeval.one_sided_test`).
    rhos : array_like, shape (S,)
        Reliance factors in [0, 1].
    initial_weights : array_like, optional
        Positive prior weights (normalized to sum 1); uniform by default.

    Examples
    --------
    >>> b = OneSidedBase(0.2, 0.1, "certify", [0.0, 1.0])
    >>> b.rhos.tolist(), b.prior_log_weights == [math.log(0.5)] * 2, b.crossed_at_round
    ([0.0, 1.0], True, None)

    Notes
    -----
    Guarantee: none of its own; it records what the e-process of a subclass computes (the
    maximum and first crossing of its log e-value) and the unbiased running means of the
    effective observations ``l + rho (b - f)``.
    """

    __slots__ = ("_crossed", "_log_e_cache", "_log_threshold", "_log_w0", "_max_log_e",
                 "_rhos", "_side", "_sum_human", "_sum_shift", "_uniform")

    def __init__(self, alpha: float, delta: float, side: Side, rhos: ArrayLike,
                 initial_weights: ArrayLike | None = None) -> None:
        if isinstance(rhos, (list, tuple)) and all(type(v) is float for v in rhos):
            rs: list[float] = list(rhos)  # the common case, without numpy's per-call cost
        else:
            rs = [float(v) for v in np.asarray(rhos, dtype=float).reshape(-1).tolist()]
        if not rs or not all(0.0 <= v <= 1.0 for v in rs):
            raise ValueError(f"rhos must be non-empty values in [0, 1], got {rs}")
        if not (isinstance(alpha, (int, float)) and 0.0 < alpha < 1.0):
            raise ValueError(f"alpha must satisfy 0 < alpha < 1, got {alpha!r}")
        if initial_weights is None:
            w0_list = [1.0 / len(rs)] * len(rs)
        else:
            w0 = np.asarray(initial_weights, dtype=float).reshape(-1)
            if w0.shape != (len(rs),) or not np.all(np.isfinite(w0) & (w0 > 0.0)):
                raise ValueError("initial_weights must be positive, finite and one per rho")
            w0_list = (w0 / w0.sum()).tolist()
        self._rhos = rs
        self._log_w0 = [math.log(v) for v in w0_list]
        self._uniform = len(set(self._log_w0)) == 1  # same rule in load_progress (determinism)
        self._side: Side = side
        self._log_threshold = -math.log(float(delta))
        self._log_e_cache: float | None = None
        self._max_log_e = 0.0
        self._crossed: int | None = None
        self._sum_human = 0.0
        self._sum_shift = 0.0  # sum over rounds of (b - f), 0 for empty blocks

    @property
    def rounds(self) -> int:
        """Number of rounds processed (the subclass's e-process counts them)."""
        return 0

    def _update_max(self, log_e: float) -> None:
        self._log_e_cache = log_e
        if log_e > self._max_log_e:
            self._max_log_e = log_e
            if self._crossed is None and log_e >= self._log_threshold:
                self._crossed = self.rounds

    @property
    def side(self) -> Side:
        """``"certify"`` or ``"violate"``."""
        return self._side

    @property
    def rhos(self) -> np.ndarray:
        """Reliance factors, shape (S,)."""
        return np.array(self._rhos)

    @property
    def rho_list(self) -> list[float]:
        """Reliance factors as the test's own list (read-only; no copy, for the round paths)."""
        return self._rhos

    def _share_into(self, new: OneSidedBase) -> None:
        """Give a fresh copy ``new`` this test's read-only parts and its progress (a spawn)."""
        new._rhos, new._log_w0, new._uniform = self._rhos, self._log_w0, self._uniform
        new._side, new._log_threshold = self._side, self._log_threshold
        new._log_e_cache, new._max_log_e, new._crossed = (self._log_e_cache, self._max_log_e,
                                                          self._crossed)
        new._sum_human, new._sum_shift = self._sum_human, self._sum_shift

    @property
    def log_threshold(self) -> float:
        """``log(1 / delta)``."""
        return self._log_threshold

    @property
    def max_log_e(self) -> float:
        """Largest mixture log e-value seen so far (0 at round 0)."""
        return self._max_log_e

    @property
    def crossed_at_round(self) -> int | None:
        """First round whose mixture ``log_e >= log(1/delta)``, or ``None``."""
        return self._crossed

    @property
    def prior_log_weights(self) -> list[float]:
        """Log prior weights ``log w_{s,0}`` of the rho mixture (reset by restart_reliance)."""
        return list(self._log_w0)

    def set_prior_log_weights(self, log_w0: list[float]) -> None:
        """Restore :attr:`prior_log_weights` (from a snapshot of a shared e-process)."""
        if len(log_w0) != len(self._log_w0) or not all(math.isfinite(v) for v in log_w0):
            raise ValueError("prior log weights: wrong length or not finite")
        self._log_w0 = [float(v) for v in log_w0]
        self._uniform = len(set(self._log_w0)) == 1
        self._log_e_cache = None

    @property
    def progress(self) -> tuple[float, int | None, float, float]:
        """``(max_log_e, crossed_at_round, sum of human losses, sum of b - f)``."""
        return self._max_log_e, self._crossed, self._sum_human, self._sum_shift

    def restore_progress(self, max_log_e: float, crossed: int | None, sum_human: float,
                         sum_shift: float) -> None:
        """Set what :attr:`progress` returns (restoring a snapshot of a shared e-process)."""
        self._max_log_e = float(max_log_e)
        self._crossed = None if crossed is None else int(crossed)
        self._sum_human = float(sum_human)
        self._sum_shift = float(sum_shift)
        self._log_e_cache = None

    @property
    def mean_per_rho(self) -> np.ndarray:
        """Running mean of each rho's effective observations (unbiased for the risk); NaN at t=0."""
        t = self.rounds
        if t == 0:
            return np.full(len(self._rhos), math.nan)
        return (self._sum_human + np.array(self._rhos) * self._sum_shift) / t

    @property
    def mean_human(self) -> float:
        """Running mean of the human losses (NaN before round 1)."""
        t = self.rounds
        return self._sum_human / t if t else math.nan

    def _state(self, eprocess: dict[str, Any]) -> dict[str, Any]:
        """Return the state document around the subclass's e-process state (exact floats)."""
        return {
            "kind": STATE_KIND,
            "version": 1,
            "rhos": list(self._rhos),
            "log_w0": list(self._log_w0),
            "max_log_e": self._max_log_e,
            "crossed_at_round": self._crossed,
            "sum_human": self._sum_human,
            "sum_shift": self._sum_shift,
            "eprocess": eprocess,
        }

    def load_progress(self, d: dict[str, Any]) -> None:
        """Set the mixture weights, maximum, crossing and sums of a :meth:`to_state` document."""
        self._log_w0 = [float(v) for v in d["log_w0"]]
        self._uniform = len(set(self._log_w0)) == 1
        if len(self._log_w0) != len(self._rhos):
            raise ValueError("AutoEvalTest state: log_w0 and rhos differ in length")
        self._max_log_e = float(d["max_log_e"])
        c = d["crossed_at_round"]
        self._crossed = None if c is None else int(c)
        self._sum_human = float(d["sum_human"])
        self._sum_shift = float(d["sum_shift"])


def check_state(d: dict[str, Any]) -> None:
    """Raise ``ValueError`` unless ``d`` is a one-sided test's state document (kind, version)."""
    check_header(d, STATE_KIND, 1, "one_sided_test")
