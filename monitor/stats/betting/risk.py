"""One certificate for one model and one method: the object the engine updates once per round.

:class:`RiskMonitor` composes a *certify* test (H0: R > alpha), a *violate* test (H0: R <= alpha)
and, optionally, a hedged two-sided confidence sequence, all fed the same rounds.
"""

from __future__ import annotations

import math
from typing import Any, Literal, Protocol, Self

import numpy as np

from monitor.stats.betting.autoeval import (
    Method,
    MixtureTest,
    OneSidedTest,
    advance_verified_pair,
    check_round,
    method_rhos,
    one_sided_test,
    restore_test,
)
from monitor.stats.betting.bets import DEFAULT_CS_GRID, DEFAULT_RHOS, BetConfig
from monitor.stats.state_contract import check_header, restorer

__all__ = ["CS_KINDS", "METHODS", "Interval", "RiskMonitor", "Status", "check_cs_kind",
           "check_level"]

Status = Literal["pending", "certified", "violated"]
_STATE_KIND = "certmon.RiskMonitor"
METHODS = ("r_eval", "r_autoeval", "r_autoeval_plus")
CS_KINDS = ("bernstein", "grid")


class Interval(Protocol):
    """What a :class:`RiskMonitor` reads from its confidence sequence."""

    @property
    def lower(self) -> float:
        """Lower confidence bound on the risk."""

    @property
    def upper(self) -> float:
        """Upper confidence bound on the risk."""

    @property
    def valid(self) -> bool:
        """False once the sequence is empty (evidence the risk is not stationary)."""

    def update(self, human_loss: float, judge_loss: float, block_mean: float | None) -> None:
        """Process one round."""

    def to_state(self) -> dict[str, Any]:
        """JSON-serializable state."""


def check_cs_kind(kind: object) -> str:
    """Return ``kind`` if it names a confidence-sequence design of :data:`CS_KINDS`.

    Examples
    --------
    >>> check_cs_kind("bernstein")
    'bernstein'
    """
    if kind not in CS_KINDS:
        raise ValueError(f"cs_kind must be one of {CS_KINDS}, got {kind!r}")
    return str(kind)


def make_interval(kind: str, delta: float, rhos: list[float], bet: BetConfig,
                  grid: int) -> Interval:
    """Build a standalone confidence sequence of design ``kind`` (see :data:`CS_KINDS`)."""
    if check_cs_kind(kind) == "grid":
        from monitor.stats.betting.confseq import HedgedConfidenceSequence

        return HedgedConfidenceSequence(delta, rhos, bet, grid_size=grid)
    from monitor.stats.betting.confseq_bernstein import BernsteinSequences

    return BernsteinSequences(delta, rhos, bet, grid, [list(range(len(rhos)))]).members[0]


def interval_from_state(d: dict[str, Any]) -> Interval:
    """Rebuild a standalone confidence sequence from its ``to_state`` output (either design)."""
    from monitor.stats.betting.confseq_bernstein import FORMAT, BernsteinSequences

    if d.get("format") == FORMAT:
        return BernsteinSequences.from_state(d).members[0]
    from monitor.stats.betting.confseq import HedgedConfidenceSequence

    return HedgedConfidenceSequence.from_state(d)


def check_level(name: str, v: object) -> float:
    """Return ``v`` as a float, or raise ``ValueError`` unless ``0 < v < 1``.

    Examples
    --------
    >>> check_level("delta", 0.05)
    0.05
    """
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 < v < 1.0:
        raise ValueError(f"{name} must satisfy 0 < {name} < 1, got {v!r}")
    return float(v)


class RiskMonitor:
    """Anytime-valid certificate ``R <= alpha`` (or violation ``R > alpha``) for one method.

    Parameters
    ----------
    alpha : float
        Risk level in (0, 1).
    delta : float
        Nominal error level in (0, 1) of the certificate.
    method : {"r_eval", "r_autoeval", "r_autoeval_plus"}
        Reliance factors ``[0]``, ``[1]`` or ``n_rhos`` uniform values in [0, 1].
    bet : BetConfig
        Bet rule shared by both tests and the confidence sequence.
    n_rhos : int
        Number of rhos for ``r_autoeval_plus`` (ignored otherwise).
    cs_grid : int or None
        Resolution of the hedged confidence sequence (bounds are multiples of
        ``1 / cs_grid``); ``None`` disables it (then ``cs_lower, cs_upper = 0.0, 1.0``, the
        trivial interval, and ``cs_valid`` is True).
    threshold_delta : float, optional
        The level actually used after multiplicity correction (e.g. ``delta / K`` for
        Bonferroni); defaults to ``delta``. Both tests reject at ``1/threshold_delta``, their WSR
        bets are tuned for it and the confidence sequence has coverage ``1 - threshold_delta``.

    Examples
    --------
    >>> m = RiskMonitor(0.3, 0.1, "r_autoeval_plus", BetConfig(), n_rhos=5, cs_grid=None)
    >>> for i in range(200):
    ...     m.update(float(i % 10 == 0), float(i % 10 == 0), 0.1)
    >>> m.status, m.certified_at_round is not None, m.violated_at_round
    ('certified', True, None)
    >>> round(m.risk_estimate, 3), m.judge_bias
    (0.1, 0.0)
    >>> RiskMonitor.from_state(m.to_state()).to_state() == m.to_state()
    True

    Notes
    -----
    Guarantee: with i.i.d. rounds (random audits, stationary traffic, disjoint synthetic blocks,
    losses in [0, 1]), ``P(status ever becomes "certified" | R > alpha) <= threshold_delta`` and
    ``P(status ever becomes "violated" | R <= alpha) <= threshold_delta``, however often the
    status is read. Both crossings are sticky, and "violated" wins once both have happened
    (possible only with probability <= threshold_delta). ``risk_estimate`` is the
    certify-side rho-weighted mean ``sum_s w_s mean_t(q_s)`` of each rho's effective
    observations (for R-Eval the plain mean of the human losses); it is a point estimate
    without a guarantee: use the confidence sequence for one.
    """

    def __init__(
        self,
        alpha: float,
        delta: float,
        method: str,
        bet: BetConfig,
        n_rhos: int = DEFAULT_RHOS,
        cs_grid: int | None = DEFAULT_CS_GRID,
        threshold_delta: float | None = None,
        cs_kind: str = "bernstein",
    ) -> None:
        self._alpha = check_level("alpha", alpha)
        self._delta = check_level("delta", delta)
        self._tdelta = self._delta if threshold_delta is None else check_level(
            "threshold_delta", threshold_delta)
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}; use one of {METHODS}")
        self._method: Method = method  # type: ignore[assignment]
        self._bet = bet
        self._n_rhos = n_rhos
        self._cs_grid = cs_grid
        self._cs_kind = check_cs_kind(cs_kind)
        rhos = method_rhos(self._method, n_rhos)
        self._certify: OneSidedTest = one_sided_test(self._alpha, self._tdelta, "certify", rhos,
                                                   bet)
        self._violate: OneSidedTest = one_sided_test(self._alpha, self._tdelta, "violate", rhos,
                                                   bet)
        self._twins = _twin_pair(self._certify, self._violate)
        self._cs: Interval | None = None
        if cs_grid is not None:
            self._cs = make_interval(cs_kind, self._tdelta, rhos.tolist(), bet, cs_grid)
        self._sum_bias = 0.0

    @classmethod
    def from_parts(
        cls,
        config: dict[str, Any],
        certify: OneSidedTest,
        violate: OneSidedTest,
        cs: Interval | None,
        sum_bias: float = 0.0,
    ) -> Self:
        """Assemble a monitor from its tests, its confidence sequence and its ``config``.

        ``config`` is the ``"config"`` part of :meth:`to_state`. Used by :meth:`from_state` and by
        owners that share one computation among several monitors
        (:class:`~monitor.stats.betting.risk_group.CertificateGroup`).
        """
        if config["method"] not in METHODS:
            raise ValueError(f"unknown method {config['method']!r} in RiskMonitor state")
        m = cls.__new__(cls)
        m._alpha = float(config["alpha"])
        m._delta = float(config["delta"])
        m._tdelta = float(config["threshold_delta"])
        m._method = config["method"]
        m._bet = config["bet"] if isinstance(config["bet"], BetConfig) else BetConfig.from_dict(
            config["bet"])
        m._n_rhos = int(config["n_rhos"])
        m._cs_grid = None if config["cs_grid"] is None else int(config["cs_grid"])
        m._cs_kind = check_cs_kind(config.get("cs_kind", "grid"))
        m._certify, m._violate = certify, violate
        m._twins = _twin_pair(certify, violate)
        m._cs = cs
        m._sum_bias = float(sum_bias)
        return m

    def respawn(self, certify: OneSidedTest, violate: OneSidedTest, cs: Interval | None) -> Self:
        """Return a monitor of this one's configuration over fresh parts (no round seen).

        Cheaper than :meth:`from_parts` (no config to parse); used by owners that spawn a new
        model's monitors from a prototype's
        (:meth:`~monitor.stats.betting.risk_group.CertificateGroup.spawn`).

        Examples
        --------
        >>> m = RiskMonitor(0.3, 0.1, "r_eval", BetConfig(), cs_grid=None)
        >>> new = m.respawn(m.certify_test.spawn(), m.violate_test.spawn(), None)
        >>> new.to_state() == m.to_state(), new.certify_test is m.certify_test
        (True, False)

        Notes
        -----
        The result equals ``from_parts(config, certify, violate, cs)`` with this monitor's
        config: the configuration attributes are immutable values shared with this monitor,
        the parts are the new monitor's own, and its judge-bias sum starts at 0.
        """
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._certify, new._violate = certify, violate
        new._twins = _twin_pair(certify, violate)
        new._cs = cs
        new._sum_bias = 0.0
        return new

    def add_judge_bias(self, bias: float) -> None:
        """Add one round's ``judge loss - human loss`` (for owners that advance the tests)."""
        self._sum_bias += bias

    @property
    def sum_judge_bias(self) -> float:
        """Sum over rounds of ``judge loss - human loss``."""
        return self._sum_bias

    def update(self, human_loss: float, judge_loss: float, block_mean: float | None) -> None:
        """Process one round: human loss, judge loss on the same unit, synthetic block mean.

        Raises
        ------
        ValueError
            If a loss is outside [0, 1] or not finite; nothing is updated then.
        """
        if not (0.0 <= human_loss <= 1.0 and 0.0 <= judge_loss <= 1.0
                and (block_mean is None or 0.0 <= block_mean <= 1.0)):
            check_round(human_loss, judge_loss, block_mean)  # raises with a precise message
        h = float(human_loss)
        f = float(judge_loss)
        b = None if block_mean is None else float(block_mean)
        if self._twins is not None:  # verified at construction / restore; only advanced here
            advance_verified_pair(self._twins[0], self._twins[1], h, f, b)
        else:
            self._certify.advance(h, f, b)
            self._violate.advance(h, f, b)
        if self._cs is not None:
            self._cs.update(h, f, b)
        self._sum_bias += f - h

    # ------------------------------------------------------------------ properties
    @property
    def alpha(self) -> float:
        """Risk level."""
        return self._alpha

    @property
    def delta(self) -> float:
        """Nominal error level."""
        return self._delta

    @property
    def threshold_delta(self) -> float:
        """Error level after multiplicity correction (the one the thresholds use)."""
        return self._tdelta

    @property
    def method(self) -> Method:
        """``"r_eval"``, ``"r_autoeval"`` or ``"r_autoeval_plus"``."""
        return self._method

    @property
    def rounds(self) -> int:
        """Number of rounds processed."""
        return self._certify.rounds

    @property
    def log_e_certify(self) -> float:
        """Mixture log e-value against H0: R > alpha."""
        return self._certify.log_e

    @property
    def log_e_violate(self) -> float:
        """Mixture log e-value against H0: R <= alpha."""
        return self._violate.log_e

    @property
    def log_threshold(self) -> float:
        """``log(1 / threshold_delta)``."""
        return self._certify.log_threshold

    @property
    def certified_at_round(self) -> int | None:
        """First round at which the certify e-value reached the threshold (sticky)."""
        return self._certify.crossed_at_round

    @property
    def violated_at_round(self) -> int | None:
        """First round at which the violate e-value reached the threshold (sticky)."""
        return self._violate.crossed_at_round

    @property
    def status(self) -> Status:
        """``"violated"`` if ever violated, else ``"certified"`` if ever certified, else pending."""
        if self._violate.crossed_at_round is not None:
            return "violated"
        if self._certify.crossed_at_round is not None:
            return "certified"
        return "pending"

    @property
    def cs_lower(self) -> float:
        """Lower end of the confidence sequence's running intersection (0.0 without CS)."""
        return 0.0 if self._cs is None else self._cs.lower

    @property
    def cs_upper(self) -> float:
        """Upper end of the confidence sequence's running intersection (1.0 without CS)."""
        return 1.0 if self._cs is None else self._cs.upper

    @property
    def cs_valid(self) -> bool:
        """False if the running intersection became empty (True without CS)."""
        return True if self._cs is None else self._cs.valid

    @property
    def risk_estimate(self) -> float:
        """Certify-side rho-weighted mean of the effective observations (NaN before round 1)."""
        if self.rounds == 0:
            return math.nan
        return float(np.dot(self._certify.rho_weights, self._certify.mean_per_rho))

    @property
    def rho_weights(self) -> np.ndarray:
        """Certify-side mixture weights for the next round, shape (S,)."""
        return self._certify.rho_weights

    def weights_and_estimate(self) -> tuple[np.ndarray, float]:
        """Return :attr:`rho_weights` and :attr:`risk_estimate`, the weights computed once.

        For a view reading both (the same values as the two properties).

        Examples
        --------
        >>> m = RiskMonitor(0.2, 0.1, "r_autoeval_plus", BetConfig())
        >>> m.update(0.0, 0.0, 0.1)
        >>> w, est = m.weights_and_estimate()
        >>> w.tolist() == m.rho_weights.tolist(), est == m.risk_estimate
        (True, True)
        """
        c = self._certify
        w = c.rho_weights
        return w, (math.nan if c.rounds == 0 else float(np.dot(w, c.mean_per_rho)))

    @property
    def rhos(self) -> np.ndarray:
        """Reliance factors, shape (S,)."""
        return self._certify.rhos

    @property
    def judge_bias(self) -> float:
        """Mean over rounds of ``judge_loss - human_loss`` (NaN before round 1)."""
        t = self.rounds
        return self._sum_bias / t if t else math.nan

    @property
    def certify_test(self) -> OneSidedTest:
        """The certify-side test (read-only use)."""
        return self._certify

    @property
    def violate_test(self) -> OneSidedTest:
        """The violate-side test (read-only use)."""
        return self._violate

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, Any]:
        """JSON-serializable state; floats are Python floats and round-trip exactly."""
        return {
            "kind": _STATE_KIND,
            "version": 1,
            "config": {
                "alpha": self._alpha,
                "delta": self._delta,
                "method": self._method,
                "bet": self._bet.to_dict(),
                "n_rhos": self._n_rhos,
                "cs_grid": self._cs_grid,
                "cs_kind": self._cs_kind,
                "threshold_delta": self._tdelta,
            },
            "certify": self._certify.to_state(),
            "violate": self._violate.to_state(),
            "cs": None if self._cs is None else self._cs.to_state(),
            "sum_bias": self._sum_bias,
        }

    @classmethod
    @restorer("RiskMonitor")
    def from_state(cls, d: dict[str, Any]) -> RiskMonitor:
        """Rebuild from :meth:`to_state` output; continuing is bit-identical to never stopping."""
        check_header(d, _STATE_KIND, 1, "RiskMonitor")
        cs = None
        if d["cs"] is not None:
            cs = interval_from_state(d["cs"])
        return cls.from_parts(d["config"], restore_test(d["certify"]),
                              restore_test(d["violate"]), cs, d["sum_bias"])


def _twin_pair(certify: OneSidedTest, violate: OneSidedTest
               ) -> tuple[MixtureTest, MixtureTest] | None:
    # the pair when both sides share WSR statistics (advanced in one pass), else None
    if (isinstance(certify, MixtureTest) and isinstance(violate, MixtureTest)
            and certify.is_twin_of(violate)):
        return certify, violate
    return None
