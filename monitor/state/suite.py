"""State of one suite: an event's path through the join, the audit, its model and the statuses.

:meth:`SuiteState.handle` takes one validated event of the suite and reads, in order:

1. :class:`~monitor.state.join.JoinWindow` (:mod:`monitor.state.join`): dedupe, event time and
   expiry; the judge/label join (pending units, orphan labels);
2. :class:`~monitor.state.audit_policy.AuditPolicy` (:mod:`monitor.state.audit_policy`): whether a
   judged unit is audited, decided at judge time;
3. :class:`~monitor.state.model.ModelState` (:mod:`monitor.state.model`): an unaudited judge loss
   joins the synthetic block; an audited unit with its label is a round;
4. :class:`~monitor.state.status_book.StatusBook` (:mod:`monitor.state.status_book`): statuses
   under the multiplicity rule, status alerts, change detectors.

Models are created on first sight by :class:`~monitor.state.prototypes.ModelFactory`.

Memory is bounded (bounds per suite, configurable in ``[[suites]]``): see
:mod:`monitor.state.join`; totals over suites: :mod:`monitor.state.budget`. A label that
finds no pending unit but whose judge was seen (so the unit was not audited, or its pending
entry expired) is counted as unsolicited and never used.

Examples
--------
>>> from monitor.config import SuiteConfig, CertificateConfig
>>> from monitor.events import decode_event
>>> cfg = SuiteConfig(name="qa", audit_rate=0.0, certificates=[
...     CertificateConfig(name="r", alpha=0.3, delta=0.1, methods=["r_eval"], cs_grid=None)])
>>> s = SuiteState("qa", cfg)
>>> def ev(t, i, ex, audit=None):
...     a = "" if audit is None else f', "audit": {str(audit).lower()}'
...     return decode_event(('{"type": "%s", "event_id": "%s", "suite": "qa", "model": "m",'
...         ' "example_id": "%s", "loss": 0, "ts": 1%s}' % (t, i, ex, a)).encode())
>>> alerts, requests = [], []
>>> s.handle(ev("label", "e1", "x"), alerts, requests)            # label first: orphan
>>> s.handle(ev("judge", "e2", "x", audit=True), alerts, requests)  # judge joins: a round
>>> s.handle(ev("judge", "e2", "x", audit=True), alerts, requests)  # the same event again
'event_id'
>>> s.handle(ev("judge", "e2", "y"), alerts, requests)             # its id, another unit
'event_id_conflict'
>>> s.models["m"].counts["rounds"], s.models["m"].counts["duplicates"]
(1, 1)
"""

from __future__ import annotations

import math
from typing import Any

from monitor.alerts import Alert, label_request
from monitor.config import CertificateConfig, SuiteConfig
from monitor.events import Event
from monitor.state.audit_policy import UNIFORM, AuditPolicy
from monitor.state.comparisons import SuiteComparisons
from monitor.state.hedged import hedged_round
from monitor.state.join import JoinWindow, PendingUnit
from monitor.state.model import ModelState
from monitor.state.prototypes import ModelFactory, threshold_delta
from monitor.state.restore_checks import RefusedState, check_restored_waiting
from monitor.state.status_book import StatusBook
from monitor.state.strata import StrataState, stratified_label
from monitor.state.views import suite_view

__all__ = ["SuiteState"]

ACTIVE = "active"  # the tag and request reason of an active audit
_MAX_REFUSED = 20  # refused model names kept for STATE.json (the count is exact)


def _refused(model: ModelState, dup: str) -> str | None:
    """Count an event :meth:`JoinWindow.admit` refused (of ``model``); return its reason.

    A *late* label (of a unit already taken as missing) is counted and never used (None).
    """
    if dup == "late":
        model.counts["labels"] += 1
        model.counts["late_labels"] += 1
        return None
    if dup != "event_id_conflict":  # a conflict is bad input: the engine dead-letters it
        model.counts["duplicates"] += 1
    return dup


class SuiteState:
    """Everything certmon knows about one suite (see the module docstring)."""

    def __init__(self, name: str, config: SuiteConfig,
                 factory: ModelFactory | None = None) -> None:
        self.name = name
        self.config = config
        self.models: dict[str, ModelState] = {}
        # events of models refused because the Bonferroni family is full (see model())
        self.refused: list[str] = []
        self.refused_count = 0
        self.join = JoinWindow(config)
        self.audit = AuditPolicy(name, config)
        # the factory of this configuration (suites of one [[suites]] entry may share one: its
        # prototypes never see a round)
        self.factory = ModelFactory(config) if factory is None else factory
        self.book = StatusBook(name, config, self.models)
        self.comparisons = SuiteComparisons(name, config)  # [[suites.comparisons]]
        self._certs = list(config.certificates)
        # model -> (its state, unit key prefixes f"{len(model)}:{model}" bare / "j" / "l",
        # whether it is plain: uniform audits without strata or pairs, see handle())
        self._routes: dict[str, tuple[ModelState, str, str, str, bool]] = {}
        # Listed model names (not globs) exist from the start: they are family members (and
        # visible as pending) before their first event.
        for pattern in config.models:
            if not any(ch in pattern for ch in "*?[") and pattern not in self.models:
                self.models[pattern] = self.factory.new(pattern)

    @property
    def watermark(self) -> float:
        """The suite's event time: the largest ``ts`` of an accepted event (-inf before one)."""
        return self.join.watermark

    def threshold_delta(self, cert: CertificateConfig) -> float:
        """Level used by the monitors (:func:`monitor.state.prototypes.threshold_delta`)."""
        return threshold_delta(self.config, cert)

    @property
    def family_size(self) -> int:
        """Configured family size, else models x certificates (models seen so far for globs)."""
        return self.book.family_size

    def model(self, name: str, ts: float, alerts: list[Alert]) -> ModelState | None:
        """Return the model's state (created on first sight), or None if it is not monitored.

        Under Bonferroni a model beyond the family (``(models + 1) x certificates >
        family_size``) is refused: testing it would spend more than ``delta``. Its events
        count as unrouted and its name is listed (up to 20) in the suite's ``refused_models``.
        """
        m = self.models.get(name)
        if m is None:
            if not self.config.matches_model(name):
                return None
            if self.config.multiplicity == "bonferroni" and (len(self.models) + 1) * len(
                    self._certs) > self.config.effective_family_size:
                self.refused_count += 1
                if len(self.refused) < _MAX_REFUSED and name not in self.refused:
                    self.refused.append(name)
                return None
            m = self.models[name] = self.factory.new(name)
            if self.book.family_rule:
                self.book.refresh(None, ts, alerts)
        return m

    # ------------------------------------------------------------------ events
    def handle(self, ev: Event, alerts: list[Alert], requests: list[dict[str, Any]]) -> str | None:
        """Process one validated event of this suite.

        Returns
        -------
        str or None
            ``"event_id"`` / ``"unit"`` for a dropped duplicate, ``"event_id_conflict"`` for an
            event id reused with other content (bad input, changes nothing), ``"unrouted"``
            when the model is not monitored, else None.
        """
        model_name = ev.model
        route = self._routes.get(model_name)
        if route is None:
            m = self.models.get(model_name) or self.model(model_name, ev.ts, alerts)
            if m is None:
                return "unrouted"
            p = f"{len(model_name)}:{model_name}"
            route = self._routes[model_name] = (
                m, p, "j" + p, "l" + p, m.active is None and m.strata is None
                and model_name not in self.comparisons.paired_models)
        model, kp, jp, lp, plain = route
        example_id = ev.example_id
        key = kp + example_id  # the unit key f"{len(model)}:{model}{example_id}"
        join = self.join
        is_judge = ev.type == "judge"
        dup = join.admit(ev.event_id, key, (jp if is_judge else lp) + example_id, is_judge,
                         ev.ts, ev.loss)
        if join.expired:  # also after a late label: admit moved the watermark first
            self._expired(ev.ts, alerts)
        if dup is not None:
            return _refused(model, dup)
        if not is_judge:
            self._label(ev, model, key, alerts)
        elif not plain:
            self._judge(ev, model, key, alerts, requests)
        else:  # the usual judge event: _judge's steps, without its calls for an unaudited unit
            model.counts["judge"] += 1
            first = join.take_orphan(key)  # a label that came first
            if first is not None:
                model.orphan_labels -= 1
            if self.audit.audited(ev):
                self._audited(ev, model, key, first, UNIFORM, None, alerts, requests)
            else:
                model.block_sum += ev.loss  # the synthetic block
                model.block_count += 1
                if first is not None:
                    model.counts["unsolicited_labels"] += 1
        return None

    def _judge(self, ev: Event, model: ModelState, key: str, alerts: list[Alert],
               requests: list[dict[str, Any]]) -> None:
        model.counts["judge"] += 1
        first = self.join.take_orphan(key)  # a label that came first
        if first is not None:
            model.orphan_labels -= 1
        if model.active is not None:  # audit_policy = "active": every unit enters the tests
            _judge_active(self, ev, model, key, first, alerts, requests)
            return
        sample, tag = self.audit.decide(ev, model.strata)
        if sample != UNIFORM:  # unaudited for the betting certificates: the synthetic block
            model.block_sum += ev.loss
            model.block_count += 1
        if sample is None:
            if first is not None:
                model.counts["unsolicited_labels"] += 1
            if ev.model in self.comparisons.paired_models:  # an unaudited answer: no pair
                self.comparisons.judged(ev.model, ev.example_id, None, ev.ts,
                                        self.join.watermark, alerts)
            return
        self._audited(ev, model, key, first, sample, tag, alerts, requests)

    def _audited(self, ev: Event, model: ModelState, key: str, first: list[Any] | None,
                 sample: str, tag: list[Any] | None, alerts: list[Alert],
                 requests: list[dict[str, Any]]) -> None:
        """Take an audited judged unit (``sample``: uniform or top-up).

        It waits for its label, or is labelled now by ``first`` (its orphan label).
        """
        # a uniform audit is a betting round: its contemporaneous block closes now and travels
        # with the unit (docs/guarantees.md, assumption 3)
        bsum, bcount = model.close_block() if sample == UNIFORM else (0.0, 0)
        unit = PendingUnit(ev.model, ev.loss, ev.event_id, ev.stratum, tag, bsum, bcount)
        if sample == UNIFORM:  # a round: its place in audit order, its reliances (fixed now,
            # from the rounds applied so far), its bound while it waits
            unit.rhos = model.reliances() or None
            unit.position = model.order.assign(model.groups, ev.loss, (bsum, bcount), unit.rhos)
        if ev.model in self.comparisons.paired_models:  # an example's place in pair order
            self.comparisons.judged(ev.model, ev.example_id,
                                    unit.position if unit.position >= 0 else None, ev.ts,
                                    self.join.watermark, alerts)
        if not self._wait(model, key, unit, first, ev.ts, alerts):
            return
        # (no claim here: a unit waiting at its worst label only lowers the claimed wealth)
        if ev.audit is None and self.audit.requests:
            stratum = ev.stratum
            if model.strata is not None and tag is not None:
                propensity, assigned = model.strata.request_fields(tag[0])
                stratum = stratum if stratum is not None else assigned
            else:
                propensity = self.audit.rate
            requests.append(label_request(
                self.name, ev.model, ev.example_id, ev.event_id, ev.ts, stratum,
                propensity=propensity, reason=sample,
                position=unit.position if unit.position >= 0 else None))
            model.counts["label_requests"] += 1

    def _wait(self, model: ModelState, key: str, unit: PendingUnit, first: Any, ts: float,
              alerts: list[Alert]) -> bool:
        """Take an audited unit: its label if it came first (False), else it waits (True)."""
        if first is not None:
            self._labelled(model, key, unit, float(first[1]), ts, alerts)
            return False
        model.pending_units += 1
        for k, p in self.join.add_pending(key, unit):
            self._expired_pending(k, p, ts, alerts)
        return True

    def _label(self, ev: Event, model: ModelState, key: str, alerts: list[Alert]) -> None:
        model.counts["labels"] += 1
        join = self.join
        unit = join.take_pending(key)
        if unit is not None:
            model.pending_units -= 1
            self._labelled(model, key, unit, ev.loss, ev.ts, alerts)
        elif join.judged(key):
            model.counts["unsolicited_labels"] += 1
        else:
            model.orphan_labels += 1
            for _, p in join.add_orphan(key, ev.model, ev.loss):
                self._expired_orphan(p)

    def _labelled(self, model: ModelState, key: str, unit: PendingUnit, human: float,
                  ts: float, alerts: list[Alert]) -> None:
        """Use an audited unit and its label: a round in audit order; a stratified label."""
        tag = unit.tag
        self.join.mark_rounded(key)
        if tag is not None and tag[0] == ACTIVE and model.active is not None:
            model.active.label(tag[1], human)
            self.book.follow_active(model, ts, alerts)
            if unit.position < 0:  # not in the uniform share: no round of the detectors
                return
        if unit.position >= 0:
            # the reliances learn from the label now; the round waits for its position
            model.learn(human, unit.judge, unit.block)
            model.order.resolve(unit.position, human, unit.judge, unit.block_sum,
                                unit.block_count, unit.rhos, model.groups,
                                lambda: self.join.waiting_units(model.name))
            self._release(model, ts, alerts)
        elif tag is None or tag[1] == UNIFORM:  # a unit of a snapshot without audit order
            model.round(human, unit.judge, unit.block)
            self.book.after_round(model, ts, alerts)
        strata = model.strata
        if tag is not None and strata is not None:
            stratified_label(self.name, model.name, strata, tag, human, unit.judge, ts, alerts)

    def _release(self, model: ModelState, ts: float, alerts: list[Alert]) -> None:
        """Apply the rounds that are next in audit order; claim beyond them."""
        order = model.order
        first = order.applied
        taken = order.take_ready()
        if taken:
            order.settle(model.groups, taken)
            for human, judge, bsum, bcount, _, rhos in taken:
                if human is None:  # (a worst-case round can still move a claim or alarm)
                    model.missing_round(judge, (bsum, bcount), rhos)
                else:
                    model.round(human, judge, (bsum, bcount), rhos, learned=True)
                if model.hedge is not None:  # this unit's per-label values, paired with its
                    # per-unit ones (monitor.state.hedged), before a detector may restart
                    hedged_round(model, self._certs, human is not None)
                    self.book.follow_active(model, ts, alerts)
                self.book.after_round(model, ts, alerts)
            if model.name in self.comparisons.models:  # the same rounds, in audit order
                self.comparisons.applied(model.name, first, taken, ts, self.join.watermark,
                                         alerts)
        self._claim(model, ts, alerts)

    def _claim(self, model: ModelState, ts: float, alerts: list[Alert]) -> None:
        """Offer the tests their wealth with the waiting units at their bounds."""
        if model.order.waiting:
            model.order.claim(model.groups)
            self.book.refresh(model, ts, alerts)

    def _expired(self, ts: float, alerts: list[Alert]) -> None:
        expired = self.join.expired
        self.join.expired = []
        for kind, key, p in expired:
            if kind == "pending":
                self._expired_pending(key, p, ts, alerts)
            else:
                self._expired_orphan(p)

    def _expired_pending(self, key: str, unit: PendingUnit, ts: float,
                         alerts: list[Alert]) -> None:
        """Take a label that did not come in time (TTL or count bound) as missing for good."""
        m = self.models[unit.model]
        m.pending_units -= 1
        m.counts["expired_pending"] += 1
        if unit.position >= 0 or (unit.tag is not None and unit.tag[0] == ACTIVE):
            self.join.mark_missing(key)
        if unit.tag is not None and unit.tag[0] == ACTIVE and m.active is not None:
            m.active.missing(unit.tag[1])  # at its worst value for good
            self.book.follow_active(m, ts, alerts)
        elif unit.tag is not None and m.strata is not None:  # missing for the strata too
            stratified_label(self.name, m.name, m.strata, unit.tag, None, unit.judge, ts,
                             alerts)
        if unit.position >= 0:
            m.order.resolve(unit.position, None, unit.judge, unit.block_sum, unit.block_count,
                            unit.rhos, m.groups, lambda: self.join.waiting_units(m.name))
            self._release(m, ts, alerts)

    def evict_waiting(self, alerts: list[Alert]) -> str:
        """Evict the oldest pending unit or orphan label (the engine's memory budget).

        Exactly as if it expired (:meth:`_expired_pending`: a missing label, applied at its
        worst value; or an expired orphan); returns ``"pending"`` or ``"orphans"``.
        """
        kind, key, p = self.join.pop_oldest_waiting()
        if kind == "pending":
            self._expired_pending(key, p, self.join.watermark, alerts)
        else:
            self._expired_orphan(p)
        return kind

    def _expired_orphan(self, payload: list[Any]) -> None:
        m = self.models[payload[0]]
        m.orphan_labels -= 1
        m.counts["expired_orphans"] += 1

    # ------------------------------------------------------------------ views
    def view(self, shown_only: bool = False) -> dict[str, Any]:
        """Return this suite's part of STATE.json (``shown_only``: see ``model_view``)."""
        return suite_view(self, shown_only)

    # ------------------------------------------------------------------ snapshot
    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable snapshot (ordered structures as lists)."""
        w = self.join.watermark
        d = {
            "name": self.name,
            "watermark": None if w == -math.inf else w,
            "models": [m.to_dict() for m in self.models.values()],
            **self.join.to_dict(),
            "refused": [self.refused_count, list(self.refused)],
        }
        if self.comparisons:  # absent without comparisons (older snapshots stay the same)
            d["comparisons"] = self.comparisons.to_dict()
        return d

    @classmethod
    def from_dict(cls, config: SuiteConfig, d: dict[str, Any],
                  factory: ModelFactory | None = None) -> SuiteState:
        """Inverse of :meth:`to_dict` (``factory``: as for the constructor)."""
        s = cls(str(d["name"]), config, factory)
        s.models.clear()
        watermark = -math.inf if d["watermark"] is None else float(d["watermark"])
        strata = s.factory.strata
        for md in d["models"]:
            m = ModelState.from_dict(md, s.factory.group_prototype)
            if strata is not None:
                m.strata = StrataState.from_dict(strata, md["strata"])
            s.models[m.name] = m
        s.join = JoinWindow.from_dict(config, watermark, d)
        check_restored_waiting(s.name, config, s.models, s.join, s.factory)
        if config.comparisons:
            if "comparisons" not in d:
                raise RefusedState(f"suite {s.name!r}: the checkpoint has no comparison state")
            s.comparisons = SuiteComparisons.from_dict(s.name, config, d["comparisons"])
        count, names = d.get("refused", [0, []])  # absent in older snapshots
        s.refused_count, s.refused = int(count), [str(n) for n in names]
        return s


def _judge_active(suite: SuiteState, ev: Event, model: ModelState, key: str, first: Any,
                  alerts: list[Alert], requests: list[dict[str, Any]]) -> None:
    """Take a judged unit under ``audit_policy = "active"`` or ``"hedged"`` (:class:`ActiveAudit`).

    certmon's salted hash is the coin for every unit (an event's own ``audit`` flag does
    not decide: its probability would be unknown); the judge loss is the score. An
    audited unit waits for its label with its ticket (propensity and bets fixed now); its
    request carries the propensity and reason ``"active"``. A unit whose coin is below
    the policy's smallest propensity (a uniform random sample) is also a round in audit
    order, with the other units as its block: the change and judge-drift detectors and
    the confidence sequences run on these (docs/guarantees.md, "Active audits"). Under
    ``"hedged"`` (the uniform policy) every audited unit is such a round, and its request
    has reason ``"uniform"`` and its audit position.
    """
    active = model.active
    if active is None:  # only called for an active model
        return
    coin = suite.audit.uniform(ev.model, ev.example_id)
    # a coin below the policy's smallest propensity audits whatever the score: these units
    # are a uniform random sample, the rounds of the change and judge-drift detectors
    base = coin < active.pi_min
    audited, pi, ticket = active.judge(ev.loss, coin)
    if not base:  # (audited or not) the synthetic block of the uniform rounds
        model.add_synthetic(ev.loss)
    if not audited:
        if first is not None:
            model.counts["unsolicited_labels"] += 1
        suite.book.follow_active(model, ev.ts, alerts)
        return
    unit = PendingUnit(ev.model, ev.loss, ev.event_id, ev.stratum, [ACTIVE, ticket], 0.0, 0)
    if base:  # also a uniform round, in audit order (as under uniform audits)
        block = model.close_block()
        unit.block_sum, unit.block_count = block
        unit.rhos = model.reliances() or None
        unit.position = model.order.assign(model.groups, ev.loss, block, unit.rhos)
    if not suite._wait(model, key, unit, first, ev.ts, alerts):
        return
    if ev.audit is None and suite.audit.requests:
        hedged = model.hedge is not None  # a uniform audit, with its audit position
        requests.append(label_request(
            suite.name, ev.model, ev.example_id, ev.event_id, ev.ts, ev.stratum, propensity=pi,
            reason=UNIFORM if hedged else ACTIVE, position=unit.position if hedged else None))
        model.counts["label_requests"] += 1
    suite.book.follow_active(model, ev.ts, alerts)
