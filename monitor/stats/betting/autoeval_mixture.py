"""The ``wsr`` / ``up`` one-sided test: one e-process row per rho, mixed by wealth.

:class:`MixtureTest` runs R-AutoEval+ as in the paper: one
:class:`~monitor.stats.betting.eprocess.BettingEProcess` row per reliance ``rho_s``, mixed with
weights proportional to ``w_{s,0} E_{s,i-1}`` (eq. 13), so the mixture e-value (eq. 11) equals
``sum_s w_{s,0} E_{s,i}`` (eq. 25 of the paper's proof). It advances its own rows
(:meth:`MixtureTest.advance`), or reads rows an owner shares and advances, then records the round
(:meth:`MixtureTest.record_shared_round`). :func:`advance_pair` advances a certify test and its
violate twin in one pass.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from monitor.stats.betting.autoeval_base import OneSidedBase, check_round, check_state
from monitor.stats.betting.bets import BetConfig, Side
from monitor.stats.betting.eprocess import BettingEProcess
from monitor.stats.state_contract import restorer

__all__ = ["MixtureTest", "advance_pair", "advance_verified_pair"]


class MixtureTest(OneSidedBase):
    """One-sided test of rules ``"wsr"`` / ``"up"``: a wealth-weighted mixture over rhos.

    Parameters
    ----------
    alpha, delta, side, rhos, initial_weights
        As for :func:`~monitor.stats.betting.autoeval.one_sided_test`.
    bet : BetConfig
        A ``"wsr"`` or ``"up"`` bet configuration.
    e_process : BettingEProcess, optional
        The rows' e-process when an owner shares and advances it (one row per rho with range
        ``[-rho, 1 + rho]``; the owner then calls :meth:`record_shared_round`); by default
        the test builds and advances its own.

    Examples
    --------
    >>> from monitor.stats.betting.autoeval import method_rhos
    >>> t = MixtureTest(0.5, 0.1, "certify", method_rhos("r_autoeval_plus", 3),
    ...                 BetConfig("wsr"))
    >>> for _ in range(20):
    ...     t.update(0.0, 0.0, 0.0)
    >>> t.crossed_at_round is not None and t.log_e >= t.log_threshold
    True
    >>> t.rho_weights.shape
    (3,)

    Notes
    -----
    Guarantee: under the null of its side, ``P(exists t: log_e_t >= log(1/delta)) <= delta``.
    The mixture is a convex combination of e-processes with fixed prior weights, hence itself
    a nonnegative supermartingale (Ville's inequality). Lemma 1: ``log_e`` is at most
    ``log(1 / min_s w_{s,0})`` below the best single-rho ``log E_s``. Assumptions as for
    :func:`~monitor.stats.betting.autoeval.one_sided_test`.
    """

    __slots__ = ("_ep",)

    def __init__(self, alpha: float, delta: float, side: Side, rhos: ArrayLike,
                 bet: BetConfig, initial_weights: ArrayLike | None = None,
                 e_process: BettingEProcess | None = None) -> None:
        super().__init__(alpha, delta, side, rhos, initial_weights)
        self._ep = e_process if e_process is not None else BettingEProcess(
            alpha, delta, side, [-v for v in self._rhos], [1.0 + v for v in self._rhos], bet)

    # ------------------------------------------------------------------ rounds
    def update(self, human_loss: float, judge_loss: float, block_mean: float | None) -> None:
        """Process one round; raises ``ValueError`` on losses outside [0, 1] or non-finite."""
        check_round(human_loss, judge_loss, block_mean)
        self.advance(float(human_loss), float(judge_loss),
                     None if block_mean is None else float(block_mean))

    def advance(self, human: float, judge: float, block_mean: float | None) -> None:
        """Advance the rows and record one round whose losses were already validated."""
        if block_mean is None:
            self._ep.advance([human] * len(self._rhos))
            self.record_shared_round(human, None)
        else:
            d = block_mean - judge
            self._ep.advance([human + r * d for r in self._rhos])
            self.record_shared_round(human, d)

    def record_shared_round(self, human: float, shift: float | None) -> None:
        """Record a round the rows have already seen (mixture, maximum, crossing, sums).

        :meth:`advance` calls it; an owner that advances a shared e-process itself (a
        :class:`~monitor.stats.betting.risk_group.CertificateGroup`) calls it once per round
        with the human loss and ``b - f`` (``None`` for an empty block).
        """
        self._sum_human += human
        if shift is not None:
            self._sum_shift += shift
        self._log_e_cache = None
        mx = max(self._ep.log_wealth_list())
        # the mixture is a convex combination, so log_e <= max_s log E_s: the exact value is
        # only needed when it could set a new maximum (and hence cross the threshold)
        if mx + 1e-9 * (1.0 + abs(mx)) > self._max_log_e:
            self._update_max(self._mixture(mx))

    def _mixture(self, mx: float) -> float:
        # log sum_s w0_s E_s, given mx = max_s log E_s; cached until the next round
        lw = self._ep.log_wealth_list()
        exp = math.exp
        if len(lw) == 1:
            log_e = self._log_w0[0] + lw[0]
        elif self._uniform:
            log_e = self._log_w0[0] + mx + math.log(sum([exp(x - mx) for x in lw]))
        else:
            v = [a + b for a, b in zip(self._log_w0, lw, strict=True)]
            m = max(v)
            log_e = m + math.log(sum([exp(x - m) for x in v]))
        self._log_e_cache = log_e
        return log_e

    def restart_reliance(self) -> None:
        """Restart the reliance on the judge from the next round (after a judge drift).

        The prior weights are reset so that every rho holds an equal share of the current
        wealth, which is a new uniform mixture started now with the wealth reached so far, so
        the e-value is unchanged at this round and stays a supermartingale afterwards
        (rebalancing at a time fixed by past rounds only).
        """
        lw = self._ep.log_wealth_list()
        if len(lw) < 2:
            return
        log_e = self.log_e
        self._log_w0 = [log_e - math.log(len(lw)) - x for x in lw]
        self._uniform = False
        self._log_e_cache = None

    def is_twin_of(self, other: object) -> bool:
        """Tell whether ``self`` (certify) and ``other`` (violate) are WSR twins.

        Twins on the same rows may be advanced in one pass by :func:`advance_verified_pair`.
        """
        return (isinstance(other, MixtureTest) and self.side == "certify"
                and self._ep.is_twin_of(other._ep))

    # ------------------------------------------------------------------ properties
    @property
    def rounds(self) -> int:
        """Number of rounds processed."""
        return self._ep.rounds

    @property
    def plugin(self) -> bool:
        """False: rules ``"wsr"`` / ``"up"`` (one row per rho, mixed)."""
        return False

    @property
    def rho(self) -> float:
        """The rho-weighted mean reliance of the mixture for the next round."""
        return float(np.dot(self.rho_weights, np.array(self._rhos)))

    @property
    def log_e(self) -> float:
        """Mixture log e-value ``log sum_s w_{s,0} E_{s,t}`` (= log of eq. 11)."""
        if self._log_e_cache is None:
            return self._mixture(max(self._ep.log_wealth_list()))
        return self._log_e_cache

    @property
    def log_e_per_rho(self) -> np.ndarray:
        """``log E_{s,t}`` of each rho's own e-process, shape (S,)."""
        return self._ep.log_wealth

    @property
    def rho_weights(self) -> np.ndarray:
        """Weights ``w_{s,t+1}`` (eq. 13) that the NEXT round uses, shape (S,), sum 1."""
        v = np.array(self._log_w0) + self._ep.log_wealth
        w = np.exp(v - v.max())
        out: np.ndarray = w / w.sum()
        return out

    @property
    def next_bets(self) -> np.ndarray:
        """Each rho's bet for the next round, shape (S,)."""
        return self._ep.next_bets

    @property
    def e_process(self) -> BettingEProcess:
        """The underlying per-rho e-processes (read it, do not update it)."""
        return self._ep

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, Any]:
        """Return the full state as a JSON-serializable dict (Python floats, exact)."""
        return self._state(self._ep.to_state())

    @classmethod
    @restorer("MixtureTest")
    def from_state(cls, d: dict[str, Any]) -> MixtureTest:
        """Rebuild a test from :meth:`to_state` output (bit-identical continuation)."""
        check_state(d)
        ep = BettingEProcess.from_state(d["eprocess"])
        t = cls(ep.alpha, ep.delta, ep.side, d["rhos"], ep.bet, e_process=ep)
        t.load_progress(d)
        return t


def advance_pair(certify: MixtureTest, violate: MixtureTest, human: float, judge: float,
                 block_mean: float | None) -> None:
    """Advance a certify test and its violate twin on one validated round.

    Bit-identical to ``certify.advance(...); violate.advance(...)``; when both use WSR bets on
    the same rhos it builds the effective observations once and shares the WSR statistics
    (:meth:`BettingEProcess.advance_twins`), which is what makes a two-sided
    :class:`monitor.stats.betting.risk.RiskMonitor` cheap.

    Examples
    --------
    >>> from monitor.stats.betting.autoeval import method_rhos
    >>> rh = method_rhos("r_autoeval_plus", 4)
    >>> a, b = (MixtureTest(0.2, 0.1, s, rh, BetConfig("wsr")) for s in ("certify", "violate"))
    >>> c, d = (MixtureTest(0.2, 0.1, s, rh, BetConfig("wsr")) for s in ("certify", "violate"))
    >>> advance_pair(a, b, 0.0, 1.0, 0.3)
    >>> c.advance(0.0, 1.0, 0.3); d.advance(0.0, 1.0, 0.3)
    >>> a.to_state() == c.to_state() and b.to_state() == d.to_state()
    True
    """
    if not certify.is_twin_of(violate):
        certify.advance(human, judge, block_mean)
        violate.advance(human, judge, block_mean)
        return
    advance_verified_pair(certify, violate, human, judge, block_mean)


def advance_verified_pair(certify: MixtureTest, violate: MixtureTest, human: float,
                          judge: float, block_mean: float | None) -> None:
    """Advance a verified twin pair (see :func:`advance_pair`) without checking it again.

    For callers that built the pair once and keep it in lockstep (:class:`RiskMonitor`).
    """
    rhos = certify.rho_list
    if block_mean is None:
        q = [human] * len(rhos)
        d: float | None = None
    else:
        d = block_mean - judge
        q = [human + r * d for r in rhos]
    certify._ep.advance_twins(violate._ep, q)
    certify.record_shared_round(human, d)
    violate.record_shared_round(human, d)
