"""State of one model inside a suite: counts, the synthetic block, and the risk monitors.

A *round* takes the human loss and the judge loss of one audited unit plus the mean of its
*contemporaneous* block: the unaudited judge losses that arrived between the previous audited
judge event and this unit's own judge event. The block closes when the audited judge event
arrives (:meth:`ModelState.close_block`) and waits with the pending unit for its label, so the
block and the unit's judge loss come from the same stretch of traffic, however late the label.
Each block is used by exactly one round. The round feeds every certificate's
:class:`~monitor.stats.betting.risk_group.CertificateGroup` and its change detectors
(:class:`~monitor.state.epochs.CertificateEpochs`).

Examples
--------
>>> from monitor.config import CertificateConfig
>>> cert = CertificateConfig(name="risk", alpha=0.3, delta=0.1, methods=["r_eval"], cs_grid=None)
>>> m = ModelState.new("m1", [cert], threshold_delta=lambda c: c.delta)
>>> m.add_synthetic(0.0); m.add_synthetic(1.0)
>>> block = m.close_block()          # the audited unit's judge event arrives
>>> m.round(human=0.0, judge=0.0, block=block)
>>> block, m.counts["rounds"], m.block_count, m.monitors[("risk", "r_eval")].rounds
((1.0, 2), 1, 0, 1)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from monitor.config import CertificateConfig
from monitor.state.audit_order import AuditOrder
from monitor.state.epochs import CertificateEpochs
from monitor.state.judge_drift import JudgeDrift
from monitor.stats.betting.active_online import ActiveAudit
from monitor.stats.betting.bets import BetConfig
from monitor.stats.betting.hedge import HedgedPairs
from monitor.stats.betting.risk import RiskMonitor
from monitor.stats.betting.risk_group import CertificateGroup

if TYPE_CHECKING:
    from monitor.state.strata import StrataState

__all__ = ["COUNT_KEYS", "EffectiveStatus", "ModelState", "build_group", "build_monitor"]

COUNT_KEYS = (
    "judge",
    "labels",
    "rounds",
    "unsolicited_labels",
    "duplicates",
    "rejected",
    "label_requests",
    "expired_pending",
    "expired_orphans",
    "late_labels",
)
_ADDED_COUNTS = frozenset({"late_labels"})  # absent from older snapshots: 0


def build_group(cert: CertificateConfig, threshold_delta: float) -> CertificateGroup:
    """Create the :class:`CertificateGroup` updating all methods of one certificate.

    Examples
    --------
    >>> c = CertificateConfig(name="r", alpha=0.1, delta=0.05, cs_grid=None)
    >>> build_group(c, 0.025)["r_eval"].threshold_delta
    0.025
    """
    bet = BetConfig(rule=cert.betting, c=cert.bet_cap, horizon=cert.horizon, up_grid=cert.up_grid,
                    cap_switch=cert.cap_switch)
    return CertificateGroup(cert.alpha, cert.delta, cert.methods, bet, n_rhos=cert.rhos,
                            cs_grid=cert.cs_grid, threshold_delta=threshold_delta,
                            cs_kind=cert.cs_kind)


def build_monitor(cert: CertificateConfig, method: str, threshold_delta: float) -> RiskMonitor:
    """Create the :class:`RiskMonitor` of one certificate and method.

    Examples
    --------
    >>> c = CertificateConfig(name="r", alpha=0.1, delta=0.05, cs_grid=None)
    >>> build_monitor(c, "r_eval", 0.025).threshold_delta
    0.025
    """
    bet = BetConfig(rule=cert.betting, c=cert.bet_cap, horizon=cert.horizon, up_grid=cert.up_grid,
                    cap_switch=cert.cap_switch)
    return RiskMonitor(
        cert.alpha,
        cert.delta,
        method,
        bet,
        n_rhos=cert.rhos,
        cs_grid=cert.cs_grid,
        threshold_delta=threshold_delta,
        cs_kind=cert.cs_kind,
    )


@dataclass(slots=True)
class EffectiveStatus:
    """Status of one certificate x method after the suite's multiplicity rule.

    ``certified_at_round`` / ``violated_at_round`` are the model's round counts when the
    effective status first became certified / violated; ``changed_ts`` is the event time
    of the last change; ``ever_certified`` makes ``certificate_lost`` detectable.
    """

    status: str = "pending"
    certified_at_round: int | None = None
    violated_at_round: int | None = None
    changed_ts: float | None = None
    ever_certified: bool = False

    def to_list(self) -> list[Any]:
        """JSON form."""
        return [
            self.status,
            self.certified_at_round,
            self.violated_at_round,
            self.changed_ts,
            self.ever_certified,
        ]

    @classmethod
    def from_list(cls, v: Sequence[Any]) -> EffectiveStatus:
        """Inverse of :meth:`to_list`."""
        return cls(str(v[0]), v[1], v[2], v[3], bool(v[4]))


@dataclass(slots=True)
class ModelState:
    """Mutable state of one model (see the module docstring).

    Notes
    -----
    Statistical contract: only audited units reach :meth:`round`; unaudited judge losses
    only reach :meth:`add_synthetic`; each block is consumed by exactly one round.
    """

    name: str
    monitors: dict[tuple[str, str], RiskMonitor]
    effective: dict[tuple[str, str], EffectiveStatus]
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNT_KEYS, 0))
    block_sum: float = 0.0
    block_count: int = 0
    bias_sum: float = 0.0
    pending_units: int = 0
    orphan_labels: int = 0
    strata: StrataState | None = None  # set by the suite when strata/precision is on
    # one CertificateGroup per certificate: it updates all the certificate's methods at once;
    # ``monitors`` holds its per-method members (read-only RiskMonitors)
    groups: dict[str, CertificateGroup] = field(default_factory=dict)
    # epochs and change detectors, one per certificate
    epochs: dict[str, CertificateEpochs] = field(default_factory=dict)
    judge: JudgeDrift | None = None  # judge-drift detectors (None when turned off)
    order: AuditOrder = field(default_factory=AuditOrder)  # rounds in audit order
    last_rhos: dict[str, list[float]] = field(default_factory=dict)  # see reliances()
    # audit_policy = "active": the policy and its inverse-propensity tests (two per
    # certificate, certify then violate, in certificate order); None under uniform audits
    active: ActiveAudit | None = None
    # audit_policy = "hedged": the average of ``active`` (uniform policy) and the per-label
    # tests, paired per audited unit (monitor.state.hedged); None otherwise
    hedge: HedgedPairs | None = None

    @classmethod
    def new(
        cls,
        name: str,
        certificates: Sequence[CertificateConfig],
        threshold_delta: Callable[[CertificateConfig], float],
        judge: JudgeDrift | None = None,
        make_group: Callable[[CertificateConfig], CertificateGroup] | None = None,
        make_epochs: Callable[[CertificateConfig], CertificateEpochs] | None = None,
    ) -> ModelState:
        """Fresh state with one monitor per certificate x method.

        ``make_group`` and ``make_epochs`` return a certificate's fresh group and epochs
        (default: :func:`build_group`, :meth:`CertificateEpochs.new`; a suite passes ones that
        spawn from prototypes, which is cheaper and shares read-only parts).
        """
        groups = {c.name: make_group(c) if make_group is not None
                  else build_group(c, threshold_delta(c)) for c in certificates}
        monitors: dict[tuple[str, str], RiskMonitor] = {
            (c.name, meth): groups[c.name][meth] for c in certificates for meth in c.methods
        }
        epochs = {c.name: make_epochs(c) if make_epochs is not None
                  else CertificateEpochs.new(c.alpha, c.detector_threshold)
                  for c in certificates}
        return cls(name, monitors, {k: EffectiveStatus() for k in monitors}, groups=groups,
                   epochs=epochs, judge=judge)

    def new_epoch(self, cert: CertificateConfig, threshold_delta: float, reason: str,
                  ts: float | None) -> None:
        """End ``cert``'s epoch: fresh e-processes and statuses, detectors restarted."""
        status = self.effective[(cert.name, cert.primary_method)].status
        self.epochs[cert.name].next_epoch(reason, self.counts["rounds"], ts, status)
        if self.active is not None:  # the certificate's active tests start afresh too
            i = list(self.groups).index(cert.name)
            self.active.restart((2 * i, 2 * i + 1))
            if self.hedge is not None:  # and so does their average with the per-label one
                self.hedge.restart((2 * i, 2 * i + 1))
        group = self.groups[cert.name] = build_group(cert, threshold_delta)
        for meth in cert.methods:
            self.monitors[(cert.name, meth)] = group[meth]
            self.effective[(cert.name, meth)] = EffectiveStatus()

    def add_synthetic(self, judge_loss: float) -> None:
        """Add one unaudited judge loss to the current block."""
        self.block_sum += judge_loss
        self.block_count += 1

    def restart_reliance(self) -> None:
        """Re-learn the reliance on the judge from the next round (after a judge drift)."""
        for ep in self.epochs.values():
            ep.restart_reliance()
        for group in self.groups.values():
            group.restart_reliance()

    def close_block(self) -> tuple[float, int]:
        """Close the current block (an audited judge event arrived): ``(sum, count)``."""
        block = (self.block_sum, self.block_count)
        self.block_sum = 0.0
        self.block_count = 0
        return block

    def reliances(self) -> dict[str, list[float]]:
        """Each certificate's ``plugin_up`` tests' reliances for a unit judged now.

        Read-only: while they do not change, every unit judged gets the same object (the
        pending units of a model share it instead of holding a copy each).
        """
        now = {c: r for c, g in self.groups.items() if (r := g.reliances())}
        if now != self.last_rhos:
            self.last_rhos = now
        return self.last_rhos

    def learn(self, human: float, judge: float, block: tuple[float, int] | None) -> None:
        """Let the reliances learn from a label that arrived, before its round is applied."""
        mean = block[0] / block[1] if block is not None and block[1] else None
        for group in self.groups.values():
            group.learn(human, judge, mean)

    def round(self, human: float, judge: float, block: tuple[float, int] | None,
              rhos: dict[str, list[float]] | None = None, learned: bool = False) -> None:
        """Form one round with the unit's own block; feed every monitor and detector.

        ``rhos``: the unit's reliances, fixed when it was judged (:meth:`reliances` then; a
        certificate not in it uses its tests' current ones). ``learned``: the reliances
        already learned from this label (:meth:`learn`, when it arrived).
        """
        mean = block[0] / block[1] if block is not None and block[1] else None
        for cert, group in self.groups.items():
            group.update(human, judge, mean, None if rhos is None else rhos.get(cert),
                         not learned)
        for ep in self.epochs.values():
            ep.update(human, judge, mean)
        if self.judge is not None:
            self.judge.update(human, judge)
        self.counts["rounds"] += 1
        self.bias_sum += judge - human

    def missing_round(self, judge: float, block: tuple[float, int] | None,
                      rhos: dict[str, list[float]] | None = None) -> None:
        """Take an audited unit whose label is missing for good, at each claim's worst value.

        Each certificate's tests take the label least favourable to their claim
        (:meth:`CertificateGroup.penalize`), its change detectors the label least favourable
        to an alarm (:meth:`CertificateEpochs.update_missing`), the default confidence
        sequences the label least favourable to each bound, the judge-drift detectors the
        label least favourable to each direction of an alarm; the judge bias does not see the
        unit. Not a round
        (``counts["rounds"]`` is unchanged).
        """
        mean = block[0] / block[1] if block is not None and block[1] else None
        for cert, group in self.groups.items():
            group.penalize(judge, mean, None if rhos is None else rhos.get(cert))
        for ep in self.epochs.values():
            ep.update_missing(judge, mean)
        if self.judge is not None:
            self.judge.update_missing(judge)

    @property
    def judge_bias(self) -> float | None:
        """Mean of judge minus human loss over rounds (None before the first round)."""
        r = self.counts["rounds"]
        return self.bias_sum / r if r else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable snapshot (floats exact)."""
        return {
            "name": self.name,
            "counts": dict(self.counts),
            "block_sum": self.block_sum,
            "block_count": self.block_count,
            "bias_sum": self.bias_sum,
            "pending_units": self.pending_units,
            "orphan_labels": self.orphan_labels,
            "groups": [[c, g.to_state()] for c, g in self.groups.items()],
            "effective": [[c, m, e.to_list()] for (c, m), e in self.effective.items()],
            "epochs": [[c, e.to_dict()] for c, e in self.epochs.items()],
            "judge_drift": None if self.judge is None else self.judge.to_dict(),
            "audit_order": self.order.to_list(),
            **({} if self.strata is None else {"strata": self.strata.to_dict()}),
            **({} if self.active is None else {"active": self.active.to_state()}),
            **({} if self.hedge is None else {"hedge": self.hedge.to_state()}),
        }

    @classmethod
    def from_dict(
        cls,
        d: dict[str, Any],
        proto: Callable[[str], CertificateGroup | None] | None = None,
    ) -> ModelState:
        """Inverse of :meth:`to_dict`.

        ``proto`` maps a certificate name to its suite's prototype group (or None): a group
        whose configuration is the prototype's is spawned from it and loaded, sharing its
        read-only parts as a live model's group does (:meth:`CertificateGroup.from_state`).
        """
        groups = {str(c): CertificateGroup.from_state(s, None if proto is None else proto(str(c)))
                  for c, s in d["groups"]}
        monitors = {(c, m): g[m] for c, g in groups.items() for m in g.methods}
        effective = {(str(c), str(m)): EffectiveStatus.from_list(e) for c, m, e in d["effective"]}
        c = d["counts"]
        counts = {k: int(c[k] if k in c or k not in _ADDED_COUNTS else 0) for k in COUNT_KEYS}
        return cls(
            str(d["name"]),
            monitors,
            effective,
            counts,
            float(d["block_sum"]),
            int(d["block_count"]),
            float(d["bias_sum"]),
            int(d["pending_units"]),
            int(d["orphan_labels"]),
            groups=groups,
            epochs={str(c): CertificateEpochs.from_dict(e) for c, e in d["epochs"]},
            judge=None if d["judge_drift"] is None else JudgeDrift.from_dict(d["judge_drift"]),
            order=(AuditOrder.from_list(d["audit_order"]) if "audit_order" in d
                   else AuditOrder()),
            active=ActiveAudit.from_state(d["active"]) if "active" in d else None,
            hedge=HedgedPairs.from_state(d["hedge"]) if "hedge" in d else None,
        )


def finite_or_none(x: float) -> float | None:
    """Map NaN and infinities to None (JSON has no representation for them).

    Examples
    --------
    >>> finite_or_none(float("nan")) is None, finite_or_none(0.5)
    (True, 0.5)
    """
    x = float(x)
    return x if math.isfinite(x) else None
