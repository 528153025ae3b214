"""R-Eval, R-AutoEval and R-AutoEval+: PPI++ effective observations and the one-sided tests.

A *round* is one audited unit: its human loss ``l``, the judge loss ``f`` on the same unit and the
mean ``b`` of the judge losses on the unaudited units of its block (``None`` if the block is
empty). For a reliance factor ``rho`` the PPI++ effective observation is

    q = l + rho * (b - f)        (paper eq. 10; q = l when the block is empty),

an unbiased estimate of the risk ``R = E[l]`` with range ``[-rho, 1 + rho]``. R-Eval is
``rho = 0``, R-AutoEval is ``rho = 1``. A one-sided test (:class:`OneSidedTest`) is one of two
implementations, built by :func:`one_sided_test` from the bet rule:
:class:`~.autoeval_plugin.PlugInTest` (rule ``"plugin_up"``, the default: one row whose reliance
is ``rhos[0]`` or a predictable plug-in choice among ``rhos``) or
:class:`~.autoeval_mixture.MixtureTest` (rules ``"wsr"`` and ``"up"``: one e-process per
``rho_s``, mixed with weights proportional to ``w_{s,0} E_{s,i-1}``, eq. 13).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

import numpy as np
from numpy.typing import ArrayLike

from monitor.stats.betting.autoeval_base import check_round, check_state
from monitor.stats.betting.autoeval_mixture import MixtureTest, advance_pair, advance_verified_pair
from monitor.stats.betting.autoeval_plugin import PlugInTest
from monitor.stats.betting.bets import DEFAULT_RHOS, BetConfig, Side
from monitor.stats.betting.eprocess import BettingEProcess
from monitor.stats.betting.plugin import PlugInEProcess

__all__ = [
    "Method",
    "MixtureTest",
    "OneSidedTest",
    "PlugInTest",
    "advance_pair",
    "advance_verified_pair",
    "check_round",
    "effective_observations",
    "method_rhos",
    "one_sided_test",
    "restore_test",
]

Method = Literal["r_eval", "r_autoeval", "r_autoeval_plus"]


def method_rhos(method: Method, n_rhos: int = DEFAULT_RHOS) -> np.ndarray:
    """Reliance factors of a method: ``[0]``, ``[1]`` or ``n_rhos`` uniform points of [0, 1].

    Examples
    --------
    >>> method_rhos("r_eval").tolist(), method_rhos("r_autoeval").tolist()
    ([0.0], [1.0])
    >>> method_rhos("r_autoeval_plus", 5).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    if method == "r_eval":
        return np.array([0.0])
    if method == "r_autoeval":
        return np.array([1.0])
    if method == "r_autoeval_plus":
        if isinstance(n_rhos, bool) or not isinstance(n_rhos, int) or n_rhos < 2:
            raise ValueError(f"r_autoeval_plus needs n_rhos >= 2, got {n_rhos!r}")
        return np.linspace(0.0, 1.0, n_rhos)
    raise ValueError(f"unknown method {method!r}; use r_eval, r_autoeval or r_autoeval_plus")


def effective_observations(
    human: float, judge: float, block_mean: float | None, rhos: np.ndarray
) -> np.ndarray:
    """PPI++ effective observations ``q_s = l + rho_s (b - f)``, one per rho.

    Parameters
    ----------
    human, judge : float
        Human loss ``l`` and judge loss ``f`` of the audited unit, in [0, 1].
    block_mean : float or None
        Mean ``b`` of the judge losses of the round's synthetic block; ``None`` (empty block)
        gives ``q_s = l`` for every rho.
    rhos : numpy.ndarray
        Reliance factors in [0, 1].

    Returns
    -------
    numpy.ndarray
        Shape ``rhos.shape``; entry ``s`` lies in ``[-rho_s, 1 + rho_s]`` exactly (floating point
        rounding is monotone, so the bounds hold after rounding too).

    Examples
    --------
    >>> effective_observations(1.0, 0.0, 0.5, np.array([0.0, 0.5, 1.0])).tolist()
    [1.0, 1.25, 1.5]
    >>> effective_observations(0.0, 1.0, None, np.array([0.0, 1.0])).tolist()
    [0.0, 0.0]
    """
    check_round(human, judge, block_mean)
    r = np.asarray(rhos, dtype=float)
    if block_mean is None:
        return np.full(r.shape, float(human))
    return float(human) + r * (float(block_mean) - float(judge))


class OneSidedTest(Protocol):
    """What every one-sided test offers its owners (:class:`~.risk.RiskMonitor`, views, state).

    One round is :meth:`update` (validating) or :meth:`advance` (validated losses).
    Implemented by :class:`~.autoeval_plugin.PlugInTest` and
    :class:`~.autoeval_mixture.MixtureTest`; see :func:`one_sided_test` for the guarantee.
    """

    def update(self, human_loss: float, judge_loss: float, block_mean: float | None) -> None:
        """Process one round; raises ``ValueError`` on losses outside [0, 1] or non-finite."""

    def advance(self, human: float, judge: float, block_mean: float | None) -> None:
        """Process one round whose losses were already validated (see :func:`check_round`)."""

    def restart_reliance(self) -> None:
        """Restart the reliance on the judge from the next round (after a judge drift)."""

    def is_twin_of(self, other: object) -> bool:
        """Whether ``self`` (certify) and ``other`` (violate) share WSR statistics."""

    def to_state(self) -> dict[str, Any]:
        """Return the full state as a JSON-serializable dict (Python floats, exact)."""

    def set_prior_log_weights(self, log_w0: list[float]) -> None:
        """Restore :attr:`prior_log_weights`."""

    def restore_progress(self, max_log_e: float, crossed: int | None, sum_human: float,
                         sum_shift: float) -> None:
        """Set what :attr:`progress` returns."""

    @property
    def rounds(self) -> int:
        """Number of rounds processed."""

    @property
    def side(self) -> Side:
        """``"certify"`` or ``"violate"``."""

    @property
    def plugin(self) -> bool:
        """True for the ``"plugin_up"`` rule."""

    @property
    def rho(self) -> float:
        """Reliance of the next round."""

    @property
    def rhos(self) -> np.ndarray:
        """Reliance factors, shape (S,)."""

    @property
    def log_threshold(self) -> float:
        """``log(1 / delta)``."""

    @property
    def log_e(self) -> float:
        """Log e-value now."""

    @property
    def log_e_per_rho(self) -> np.ndarray:
        """``log E`` of each row."""

    @property
    def rho_weights(self) -> np.ndarray:
        """Weights on :attr:`rhos` of the next round, sum 1."""

    @property
    def next_bets(self) -> np.ndarray:
        """Each row's bet for the next round."""

    @property
    def max_log_e(self) -> float:
        """Largest log e-value seen so far (0 at round 0)."""

    @property
    def crossed_at_round(self) -> int | None:
        """First round whose ``log_e >= log(1/delta)``, or ``None``."""

    @property
    def prior_log_weights(self) -> list[float]:
        """Log prior weights of the rho mixture."""

    @property
    def progress(self) -> tuple[float, int | None, float, float]:
        """``(max_log_e, crossed_at_round, sum of human losses, sum of b - f)``."""

    @property
    def mean_per_rho(self) -> np.ndarray:
        """Running mean of each rho's effective observations; NaN at t=0."""

    @property
    def mean_human(self) -> float:
        """Running mean of the human losses (NaN before round 1)."""


# a factory under the name of the former class, so that its callers' constructor call holds
def one_sided_test(
    alpha: float,
    delta: float,
    side: Side,
    rhos: ArrayLike,
    bet: BetConfig,
    initial_weights: ArrayLike | None = None,
    e_process: BettingEProcess | None = None,
) -> PlugInTest | MixtureTest:
    """Build the one-sided R-Eval / R-AutoEval / R-AutoEval+ test of a bet rule.

    Parameters
    ----------
    alpha : float
        Risk level in (0, 1).
    delta : float
        Error level in (0, 1); the test rejects when its log e-value reaches ``log(1/delta)``.
    side : {"certify", "violate"}
        ``"certify"``: evidence that the risk is <= alpha (H0: R > alpha);
        ``"violate"``: evidence that the risk is > alpha (H0: R <= alpha).
    rhos : array_like, shape (S,)
        Reliance factors in [0, 1] (see :func:`method_rhos`).
    bet : BetConfig
        Bet rule. ``"plugin_up"``: a :class:`~.autoeval_plugin.PlugInTest`, whose reliance is
        ``rhos[0]`` (one rho) or the plug-in choice among ``rhos`` (several).
        ``"wsr"``/``"up"``: a :class:`~.autoeval_mixture.MixtureTest`, one e-process per rho,
        mixed.
    initial_weights : array_like, optional
        Positive prior weights ``w_{s,0}`` (normalized to sum 1); uniform by default.
        Not used by ``"plugin_up"``.
    e_process : BettingEProcess, optional
        The rows' e-process when an owner shares and advances it (mixture rules only).

    Returns
    -------
    PlugInTest or MixtureTest
        A fresh test (:class:`OneSidedTest`).

    Examples
    --------
    >>> t = one_sided_test(0.5, 0.1, "certify", method_rhos("r_autoeval_plus", 3),
    ...                  BetConfig("wsr"))
    >>> for _ in range(20):
    ...     t.update(0.0, 0.0, 0.0)
    >>> type(t).__name__, t.crossed_at_round is not None and t.log_e >= t.log_threshold
    ('MixtureTest', True)
    >>> p = one_sided_test(0.5, 0.1, "certify", method_rhos("r_autoeval_plus", 3), BetConfig())
    >>> for _ in range(10):
    ...     p.update(0.0, 0.0, 0.0)
    >>> type(p).__name__, p.crossed_at_round, p.rho, p.rho_weights.tolist()
    ('PlugInTest', 6, 0.0, [1.0, 0.0, 0.0])

    Notes
    -----
    Guarantee: if the rounds are i.i.d. with risk ``R > alpha`` (certify) or ``R <= alpha``
    (violate), ``P(exists t: log_e_t >= log(1/delta)) <= delta``. The mixture is a convex
    combination of e-processes with fixed prior weights, hence itself a nonnegative
    supermartingale (Ville's inequality). Assumptions: audited units are a random sample
    independent of their losses, the block of each round is disjoint from the audited unit and
    from other blocks, and losses lie in [0, 1] (checked). Lemma 1: ``log_e`` is at most
    ``log(1 / min_s w_{s,0})`` below the best single-rho ``log E_s``. With ``"plugin_up"``
    the single row's reliance is chosen from past rounds only, so each round's observation
    stays unbiased for the risk and the same supermartingale argument applies (see
    :class:`~monitor.stats.betting.plugin.PlugInEProcess`).
    """
    if bet.rule == "plugin_up":
        if e_process is not None:
            raise ValueError("rule 'plugin_up' runs its own e-process (no shared rows)")
        return PlugInTest(alpha, delta, side, rhos, bet, initial_weights)
    return MixtureTest(alpha, delta, side, rhos, bet, initial_weights, e_process)


def restore_test(d: dict[str, Any]) -> PlugInTest | MixtureTest:
    """Rebuild a test from its ``to_state`` output (bit-identical continuation).

    Examples
    --------
    >>> t = one_sided_test(0.3, 0.1, "violate", [0.0, 1.0], BetConfig("up"))
    >>> t.update(1.0, 0.5, 0.2)
    >>> restore_test(t.to_state()).to_state() == t.to_state()
    True
    """
    check_state(d)
    if PlugInEProcess.is_state(d["eprocess"]):
        return PlugInTest.from_state(d)
    return MixtureTest.from_state(d)


#: The former name of :func:`one_sided_test`, kept for code that imports it; a one-sided test's
#: snapshot keeps its kind ``"certmon.AutoEvalTest"`` (:data:`.autoeval_base.STATE_KIND`).
AutoEvalTest = one_sided_test
