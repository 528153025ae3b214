"""The union e-processes of the ``wsr`` / ``up`` rules, shared by a certificate's methods.

With the rules ``"wsr"`` and ``"up"`` every rho's e-process row depends only on that rho's own
observations, so a :class:`~monitor.stats.betting.risk_group.CertificateGroup` keeps ONE
certify and ONE violate :class:`~monitor.stats.betting.eprocess.BettingEProcess` over the
union of its methods' rhos; :class:`SharedRows` holds them and the members'
:class:`~monitor.stats.betting.autoeval_mixture.MixtureTest` objects, each reading its
method's rows (:class:`~monitor.stats.betting.rows_view.RowsView`). The default rule
``"plugin_up"`` does not share rows (each test has its own) and uses none of this.

Examples
--------
>>> from monitor.stats.betting.bets import BetConfig
>>> bet = BetConfig("wsr", c=0.5)
>>> rows = SharedRows(0.3, 0.1, [0.0, 1.0], bet, union_eprocesses(0.3, 0.1, [0.0, 1.0], bet))
>>> certify, violate = rows.add_method([0.0], [0])
>>> rows.advance(0.0, 0.0, 0.1)
>>> certify.rounds, len(rows.to_state()["tests"])
(1, 2)

Notes
-----
Guarantee: the same as one standalone e-process per rho (see
:class:`~monitor.stats.betting.eprocess.BettingEProcess`): rows do not interact, and each row's
observation, wealth, WSR statistics and bet are computed with the same float operations in
the same order (the twin update included: :meth:`BettingEProcess.advance_twins`).
"""

from __future__ import annotations

from typing import Any

from monitor.stats.betting.autoeval_mixture import MixtureTest
from monitor.stats.betting.bets import BetConfig
from monitor.stats.betting.eprocess import BettingEProcess
from monitor.stats.betting.rows_view import RowsView

__all__ = ["SharedRows", "union_eprocesses"]


def union_eprocesses(alpha: float, threshold_delta: float, rhos: list[float],
                     bet: BetConfig) -> tuple[BettingEProcess, ...]:
    """Return the certify and violate e-processes, one row per rho (range ``[-rho, 1 + rho]``)."""
    return tuple(BettingEProcess(alpha, threshold_delta, side, [-v for v in rhos],
                                 [1.0 + v for v in rhos], bet)
                 for side in ("certify", "violate"))


class SharedRows:
    """The certify and violate e-processes over the union of rhos, and the tests reading them.

    Parameters
    ----------
    alpha, threshold_delta : float
        Risk level and the tests' error level.
    rhos : list of float
        Union of the methods' reliance factors (one row each).
    bet : BetConfig
        Rule ``"wsr"`` or ``"up"``.
    eps : tuple of BettingEProcess
        The certify and violate e-processes (:func:`union_eprocesses`, or restored ones).

    Attributes
    ----------
    eps : tuple of BettingEProcess
        The shared e-processes.
    tests : list of MixtureTest
        Certify and violate test of each method added, in order.
    """

    def __init__(self, alpha: float, threshold_delta: float, rhos: list[float], bet: BetConfig,
                 eps: tuple[BettingEProcess, ...]) -> None:
        self._alpha = alpha
        self._tdelta = threshold_delta
        self._rhos = rhos
        self._bet = bet
        self.eps = eps
        self.tests: list[MixtureTest] = []
        self._twins = bet.rule == "wsr" and eps[0].is_twin_of(eps[1])

    def add_method(self, rhos: list[float], rows: list[int]) -> tuple[MixtureTest, MixtureTest]:
        """Add a method's certify and violate tests, reading rows ``rows`` (its ``rhos``)."""
        certify, violate = (MixtureTest(self._alpha, self._tdelta, ep.side, rhos, self._bet,
                                        e_process=RowsView(ep, rows)) for ep in self.eps)
        self.tests.extend((certify, violate))
        return certify, violate

    def advance(self, h: float, f: float, b: float | None) -> None:
        """One round: every row's observation ``h + rho (b - f)`` (``h`` for an empty block)."""
        d: float | None
        if b is None:
            d = None
            q = [h] * len(self._rhos)
        else:
            d = b - f
            q = [h + r * d for r in self._rhos]
        cert, viol = self.eps
        if self._twins:
            cert.advance_twins(viol, q)
        else:
            cert.advance(q)
            viol.advance(q)
        for t in self.tests:
            t.record_shared_round(h, d)

    def penalize(self, f: float, b: float | None) -> None:
        """Take a round whose label is missing: certify rows see the label 1, violate rows 0."""
        d = None if b is None else b - f
        n = len(self._rhos)
        cert, viol = self.eps
        cert.advance([1.0] * n if d is None else [1.0 + r * d for r in self._rhos])
        viol.advance([0.0] * n if d is None else [r * d for r in self._rhos])
        self._twins = False  # their statistics differ from now on
        for t in self.tests:
            t.record_shared_round(1.0 if t.side == "certify" else 0.0, d)

    def to_state(self) -> dict[str, Any]:
        """Return the rows' part of the group's state: e-processes, progress, running sums."""
        first = self.tests[0]
        return {
            "certify": self.eps[0].to_state(),
            "violate": self.eps[1].to_state(),
            "tests": [list(t.progress[:2]) for t in self.tests],
            "sum_human": first.progress[2],
            "sum_shift": first.progress[3],
        }

    def load_progress(self, d: dict[str, Any]) -> bool:
        """Load the tests' progress (and prior weights) of a group state; True if restarted."""
        if len(d["tests"]) != len(self.tests):
            raise ValueError("CertificateGroup state: wrong number of tests")
        for m, (mx, crossed) in zip(self.tests, d["tests"], strict=True):
            m.restore_progress(mx, crossed, d["sum_human"], d["sum_shift"])
        if "log_w0" not in d:
            return False
        if len(d["log_w0"]) != len(self.tests):
            raise ValueError("CertificateGroup state: wrong number of prior weights")
        for m, w in zip(self.tests, d["log_w0"], strict=True):
            m.set_prior_log_weights([float(v) for v in w])
        return True

    @staticmethod
    def restored_eps(d: dict[str, Any],
                     fresh: tuple[BettingEProcess, ...]) -> tuple[BettingEProcess, ...]:
        """Restore a group state's e-processes, checked against ``fresh`` ones of the config."""
        eps = (BettingEProcess.from_state(d["certify"]), BettingEProcess.from_state(d["violate"]))
        for new, old in zip(eps, fresh, strict=True):
            if (new.lo_list, new.hi_list, new.side, new.alpha, new.delta) != (
                    old.lo_list, old.hi_list, old.side, old.alpha, old.delta):
                raise ValueError("CertificateGroup state: e-processes do not match the config")
        return eps
