"""State of one suite: dedupe, audit decisions, the judge/label join, rounds, alerts.

Memory is bounded (all bounds per suite, configurable in ``[[suites]]``):

- ``dedupe_max_ids`` / ``dedupe_ttl_seconds``: a window of recent event ids and of recent
  judged / labelled units (one insertion-ordered map ``event_id -> unit`` and a set).
- ``max_pending`` / ``pending_ttl_seconds``: audited judge losses waiting for their label;
  evicted ones are counted as ``expired_pending``.
- ``max_orphans`` / ``orphan_ttl_seconds``: labels waiting for their judge event; evicted
  ones are counted as ``expired_orphans``.
- ``max_round_units``: units already used in a round (FIFO).

Time is *event time*: each entry is stamped with the suite's watermark (largest ``ts`` of
an accepted event) and expires once the watermark moves more than the TTL past it. The
watermark trusts producer timestamps: one event far in the future expires everything
older than the TTLs. All of it depends
only on the order of the suite's own events, so replays (and Kafka partitions keyed by
suite) reproduce the same state.

Notes
-----
What the dedupe bound implies: a duplicate is caught if its original is still in the
window, or its unit is pending / orphaned / among the last ``max_round_units`` rounded
units. A duplicate beyond all of these is not recognized. A lone duplicate label of an
old unit then waits as an orphan and expires (its judge was consumed); a lone duplicate
judge is either pending and expires, or (unaudited) enters a synthetic block once more,
which slightly perturbs the control variate but never a human loss. Double counting a
*round* requires both the judge and the label to be duplicated beyond the bounds.

Audit: a judge event's ``audit`` flag decides when present (an upstream sampler owns it and
requests its own labels); otherwise the salted hash decides and, when the unit is audited,
a label request is emitted (unless ``label_requests = false``).
With ``[suites.strata]`` or a certificate ``precision`` goal the decision (and the label
request) comes from :mod:`monitor.state.strata` instead: per-stratum rates, uniform vs top-up.

A label that finds no pending unit but whose judge was seen (so the unit was not audited,
or its pending entry expired) is counted as unsolicited and never used.

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
>>> s.handle(ev("judge", "e2", "y"), alerts, requests)
'event_id'
>>> s.models["m"].counts["rounds"], s.models["m"].counts["duplicates"]
(1, 1)
"""

from __future__ import annotations

import fnmatch
import math
from typing import Any

from monitor.alerts import Alert, label_request, make_alert
from monitor.audit import audit_prefix, audit_uniform_fast
from monitor.config import CertificateConfig, SuiteConfig
from monitor.events import Event
from monitor.state.epochs import CertificateEpochs
from monitor.state.expiring import ExpiringMap, FifoExpiringMap
from monitor.state.family import target_statuses
from monitor.state.judge_drift import JudgeDrift
from monitor.state.lifecycle import act_on_detectors
from monitor.state.model import ModelState, build_group
from monitor.state.strata import UNIFORM, StrataSpec, StrataState
from monitor.state.views import alert_evidence, model_view
from monitor.stats.betting.risk_group import CertificateGroup

__all__ = ["SuiteState", "pending_block"]

_MAX_REFUSED = 20  # refused model names kept for STATE.json (the count is exact)



def pending_block(payload: list[Any]) -> tuple[float, int] | None:
    """Return the contemporaneous block ``(sum, count)`` a pending unit carries (None: old).

    Examples
    --------
    >>> pending_block(["m", 0.0, "e1", None, None, 1.5, 3]), pending_block(["m", 0.0, "e1", None])
    ((1.5, 3), None)
    """
    if len(payload) < 7:
        return None
    return float(payload[5]), int(payload[6])


class SuiteState:
    """Everything certmon knows about one suite (see the module docstring)."""

    def __init__(self, name: str, config: SuiteConfig) -> None:
        self.name = name
        self.config = config
        c = config
        self.models: dict[str, ModelState] = {}
        # events of models refused because the Bonferroni family is full (see model())
        self.refused: list[str] = []
        self.refused_count = 0
        self.watermark = -math.inf
        self.ids = FifoExpiringMap(c.dedupe_max_ids, c.dedupe_ttl_seconds)
        # recent units ("j"/"l" + unit key), always exactly the payloads of ``ids``
        self.units: set[str] = set()
        self.pending = ExpiringMap(c.max_pending, c.pending_ttl_seconds)
        self.orphans = ExpiringMap(c.max_orphans, c.orphan_ttl_seconds)
        self.rounded = ExpiringMap(c.max_round_units, math.inf)
        # Lower bound on the watermark at which some entry expires (stale-low is harmless).
        self._due = math.inf
        self._certs = list(c.certificates)
        self._primary = {cert.name: cert.primary_method for cert in self._certs}
        self._family_rule = c.multiplicity in ("fixed_sequence", "e_bh")
        self._max_ids = c.dedupe_max_ids
        self._rate = c.audit_rate
        self._bind()
        self._salt = c.audit_salt
        # Per-model constants of the hot path (pure functions of the name, never stale):
        self._audit_prefix: dict[str, bytes] = {}  # model -> b'salt|suite|model|'
        self._key_prefix: dict[str, tuple[str, str, str]] = {}  # model -> unit key prefixes
        # per certificate, a group that never sees a round: new models spawn from it
        self._protos: dict[str, CertificateGroup] = {}
        self._epoch_protos: dict[str, CertificateEpochs] = {}  # and epochs, with detectors
        self._judge_proto = (JudgeDrift.new(c.judge_drift_warmup, c.judge_drift_false_alarm,
                                            c.judge_drift_horizon) if c.judge_drift else None)
        self._label_requests = c.label_requests
        self._min_ttl = min(c.dedupe_ttl_seconds, c.pending_ttl_seconds, c.orphan_ttl_seconds)
        self._strata = (StrataSpec.from_suite(c, self.threshold_delta)
                        if StrataSpec.enabled(c) else None)
        # Listed model names (not globs) exist from the start: they are family members (and
        # visible as pending) before their first event.
        for pattern in c.models:
            if not any(ch in pattern for ch in "*?[") and pattern not in self.models:
                self.models[pattern] = self._new_model(pattern)

    def _new_model(self, name: str) -> ModelState:
        judge = None if self._judge_proto is None else self._judge_proto.spawn()
        m = ModelState.new(name, self._certs, self.threshold_delta, judge, self._fresh_group,
                           self._fresh_epochs)
        if self._strata is not None:
            m.strata = StrataState(self._strata)
        return m

    def _bind(self) -> None:
        # Direct references to the underlying maps for the hot path.
        self._ids_d = self.ids.data
        self._ids_order = self.ids.order
        self._pending_d = self.pending.data
        self._orphans_d = self.orphans.data
        self._rounded_d = self.rounded.data

    # ------------------------------------------------------------------ routing
    def _fresh_group(self, cert: CertificateConfig) -> CertificateGroup:
        """Return a new model's group for ``cert``, spawned from this suite's prototype."""
        return self._proto(cert).spawn()

    def _fresh_epochs(self, cert: CertificateConfig) -> CertificateEpochs:
        """Return a new model's epochs for ``cert``, spawned from this suite's prototype."""
        proto = self._epoch_protos.get(cert.name)
        if proto is None:
            proto = self._epoch_protos[cert.name] = CertificateEpochs.new(
                cert.alpha, cert.detector_threshold)
        return proto.spawn()

    def _proto(self, cert: CertificateConfig) -> CertificateGroup:
        """Return this suite's prototype group of ``cert`` (built once; it sees no round)."""
        proto = self._protos.get(cert.name)
        if proto is None:
            proto = self._protos[cert.name] = build_group(cert, self.threshold_delta(cert))
        return proto

    def _proto_named(self, name: str) -> CertificateGroup | None:
        """Return the prototype of the certificate called ``name`` (None: not configured)."""
        cert = next((c for c in self._certs if c.name == name), None)
        return None if cert is None else self._proto(cert)

    def threshold_delta(self, cert: CertificateConfig) -> float:
        """Level used by the monitors.

        ``delta / family_size`` under Bonferroni; under fixed-sequence testing every test spends
        the family's level, the smallest ``delta`` of the suite's certificates (testing a
        certificate at its own larger ``delta`` would let the family's error exceed it).
        """
        rule = self.config.multiplicity
        if rule == "bonferroni":
            return cert.delta / self.config.effective_family_size
        if rule == "fixed_sequence":
            return min(c.delta for c in self._certs)
        return cert.delta

    @property
    def family_size(self) -> int:
        """Configured family size, else models x certificates (models seen so far for globs)."""
        c = self.config
        if c.family_size is not None:
            return c.family_size
        if any(ch in p for p in c.models for ch in "*?["):
            return len(self.models) * len(self._certs)
        return len(c.models) * len(self._certs)

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
            m = self.models[name] = self._new_model(name)
            if self._family_rule:
                self._refresh(None, ts, alerts)
        return m

    def audit_u(self, model: str, example_id: str) -> float:
        """Return the unit's :func:`monitor.audit.audit_uniform` (prefix cached per model)."""
        prefix = self._audit_prefix.get(model)
        if prefix is None:
            prefix = self._audit_prefix[model] = audit_prefix(self._salt, self.name, model)
        return audit_uniform_fast(prefix, example_id)

    # ------------------------------------------------------------------ events
    def handle(self, ev: Event, alerts: list[Alert], requests: list[dict[str, Any]]) -> str | None:
        """Process one validated event of this suite.

        Returns
        -------
        str or None
            ``"event_id"`` / ``"unit"`` for a dropped duplicate, ``"unrouted"`` when the
            model is not monitored, else None.
        """
        ts = ev.ts
        model = self.models.get(ev.model) or self.model(ev.model, ts, alerts)
        if model is None:
            return "unrouted"
        eid = ev.event_id
        ids = self._ids_d
        if eid in ids:
            model.counts["duplicates"] += 1
            return "event_id"
        model_name = ev.model
        kp = self._key_prefix.get(model_name)
        if kp is None:
            p = f"{len(model_name)}:{model_name}"
            kp = self._key_prefix[model_name] = (p, "j" + p, "l" + p)
        example_id = ev.example_id
        key = kp[0] + example_id  # the unit key f"{len(model)}:{model}{example_id}"
        is_judge = ev.type == "judge"
        ukey = (kp[1] if is_judge else kp[2]) + example_id  # "j"/"l" + key
        units = self.units
        if ukey in units or key in self._rounded_d or key in (
            self._pending_d if is_judge else self._orphans_d
        ):
            model.counts["duplicates"] += 1
            return "unit"
        # Only accepted events move event time (a duplicate never changes the state).
        if ts > self.watermark:
            self.watermark = ts
            if ts > self._due:
                self._expire()
        tick = self.watermark
        if tick + self._min_ttl < self._due:
            self._due = tick + self._min_ttl
        ids[eid] = (tick, ukey)  # FifoExpiringMap.put, inlined
        order = self._ids_order
        order.append(eid)
        units.add(ukey)
        while len(ids) > self._max_ids:
            units.discard(ids.pop(order.popleft())[1])
        if is_judge:
            self._judge(ev, model, key, tick, alerts, requests)
        else:
            self._label(ev, model, key, tick, alerts)
        return None

    def _judge(
        self,
        ev: Event,
        model: ModelState,
        key: str,
        tick: float,
        alerts: list[Alert],
        requests: list[dict[str, Any]],
    ) -> None:
        model.counts["judge"] += 1
        orphans = self._orphans_d
        entry = orphans.pop(key, None) if orphans else None
        if entry is not None:
            model.orphan_labels -= 1
        if model.strata is not None:  # stratified auditing (monitor.state.strata)
            human = None if entry is None else float(entry[1][1])
            self._judge_stratified(model, model.strata, ev, key, tick, human, alerts, requests)
            return
        if ev.audit is not None:
            audited, by_hash = ev.audit, False
        else:
            rate = self._rate
            by_hash = True
            if rate >= 1.0:
                audited = True
            elif rate > 0.0:  # self.audit_u, inlined
                prefix = self._audit_prefix.get(ev.model)
                if prefix is None:
                    prefix = self._audit_prefix[ev.model] = audit_prefix(
                        self._salt, self.name, ev.model)
                audited = audit_uniform_fast(prefix, ev.example_id) < rate
            else:
                audited = False
        if not audited:
            # the synthetic block (ModelState.add_synthetic, inlined on the hot path)
            model.block_sum += ev.loss
            model.block_count += 1
            if entry is not None:
                model.counts["unsolicited_labels"] += 1
            return
        # the unit's contemporaneous block closes now and travels with it (DESIGN, contract 4)
        bsum, bcount = model.close_block()
        if entry is not None:
            self._round(model, key, float(entry[1][1]), ev.loss, (bsum, bcount), ev.ts, tick,
                        alerts)
            return
        model.pending_units += 1
        payload = [ev.model, ev.loss, ev.event_id, ev.stratum, None, bsum, bcount]
        for _, p in self.pending.put(key, tick, payload):
            self._expired_pending(p)
        if by_hash and self._label_requests:
            requests.append(
                label_request(self.name, ev.model, ev.example_id, ev.event_id, ev.ts, ev.stratum)
            )
            model.counts["label_requests"] += 1

    def _label(
        self, ev: Event, model: ModelState, key: str, tick: float, alerts: list[Alert]
    ) -> None:
        model.counts["labels"] += 1
        pend = self.pending.pop(key)
        if pend is not None:
            model.pending_units -= 1
            block = pending_block(pend)
            if model.strata is not None:
                self._label_stratified(model, model.strata, key, pend[4], ev.loss,
                                       float(pend[1]), block, ev.ts, tick, alerts)
                return
            self._round(model, key, ev.loss, float(pend[1]), block, ev.ts, tick, alerts)
        elif "j" + key in self.units:
            model.counts["unsolicited_labels"] += 1
        else:
            model.orphan_labels += 1
            for _, p in self.orphans.put(key, tick, [ev.model, ev.loss]):
                self._expired_orphan(p)

    def _judge_stratified(
        self,
        model: ModelState,
        strata: StrataState,
        ev: Event,
        key: str,
        tick: float,
        human_first: float | None,
        alerts: list[Alert],
        requests: list[dict[str, Any]],
    ) -> None:
        # Judge event of a model with strata: the strata decide (uniform, top-up or none), the
        # suite acts (human_first: a label that came first).
        u = 1.0 if ev.audit is not None else self.audit_u(ev.model, ev.example_id)
        k, sample = strata.judge(ev.stratum, ev.loss, ev.audit, u)
        if sample != UNIFORM:
            # unaudited for the betting certificates: the synthetic block (top-ups included)
            model.block_sum += ev.loss
            model.block_count += 1
        if sample is None:
            if human_first is not None:
                model.counts["unsolicited_labels"] += 1
            return
        # a uniform audit is a betting round: its contemporaneous block closes now
        bsum, bcount = model.close_block() if sample == UNIFORM else (0.0, 0)
        if human_first is not None:
            self._label_stratified(model, strata, key, [k, sample], human_first, ev.loss,
                                   (bsum, bcount), ev.ts, tick, alerts)
            return
        model.pending_units += 1
        payload = [ev.model, ev.loss, ev.event_id, ev.stratum, [k, sample], bsum, bcount]
        for _, p in self.pending.put(key, tick, payload):
            self._expired_pending(p)
        if ev.audit is None and self.config.label_requests:
            req = label_request(self.name, ev.model, ev.example_id, ev.event_id, ev.ts,
                                ev.stratum)
            req.update(strata.request_fields(k, sample))
            requests.append(req)
            model.counts["label_requests"] += 1

    def _label_stratified(
        self,
        model: ModelState,
        strata: StrataState,
        key: str,
        tag: list[Any],
        human: float,
        judge: float,
        block: tuple[float, int] | None,
        ts: float,
        tick: float,
        alerts: list[Alert],
    ) -> None:
        # A labelled unit of a model with strata: a betting round if uniform; a stratified label.
        k, sample = tag
        if sample == UNIFORM:
            self._round(model, key, human, judge, block, ts, tick, alerts)
        else:
            self.rounded.put(key, tick)
        if strata.label(None if k is None else int(k), human, judge):
            alerts.append(make_alert("precision_reached", self.name, model.name,
                                     strata.spec.certificate, "cereval", strata.cert.n_labels,
                                     ts, strata.evidence()))

    def _round(
        self,
        model: ModelState,
        key: str,
        human: float,
        judge: float,
        block: tuple[float, int] | None,
        ts: float,
        tick: float,
        alerts: list[Alert],
    ) -> None:
        model.round(human, judge, block)
        self.rounded.put(key, tick)
        self._refresh(model, ts, alerts)
        self._lifecycle(model, ts, alerts)

    def _lifecycle(self, model: ModelState, ts: float, alerts: list[Alert]) -> None:
        # the detectors decide (monitor.state.epochs); monitor.state.lifecycle acts
        renewed = act_on_detectors(self.name, model, self._certs, self.threshold_delta,
                                   self.config.multiplicity, ts, alerts)
        if renewed and self._family_rule:
            self._refresh(None, ts, alerts)

    def _expired_pending(self, payload: list[Any]) -> None:
        m = self.models[payload[0]]
        m.pending_units -= 1
        m.counts["expired_pending"] += 1

    def _expired_orphan(self, payload: list[Any]) -> None:
        m = self.models[payload[0]]
        m.orphan_labels -= 1
        m.counts["expired_orphans"] += 1

    def _expire(self) -> None:
        w = self.watermark
        units = self.units
        for _, old in self.ids.expire(w):
            units.discard(old)
        for _, p in self.pending.expire(w):
            self._expired_pending(p)
        for _, p in self.orphans.expire(w):
            self._expired_orphan(p)
        self._due = min(self.ids.due(), self.pending.due(), self.orphans.due())

    # ------------------------------------------------------------------ statuses
    def ordered_models(self) -> list[ModelState]:
        """Models in family order: by first matching pattern of ``models``, then first seen."""
        pats = self.config.models

        def rank(m: ModelState) -> int:
            hits = (i for i, p in enumerate(pats) if fnmatch.fnmatchcase(m.name, p))
            return next(hits, len(pats))

        return sorted(self.models.values(), key=rank)

    def _refresh(self, model: ModelState | None, ts: float, alerts: list[Alert]) -> None:
        if model is not None and not self._family_rule:
            # one model's own statuses (target_statuses of rule none/bonferroni, inlined: this
            # runs every round and a status seldom changes)
            effective = model.effective
            for key, mon in model.monitors.items():
                status = mon.status
                if status != effective[key].status:
                    self._set_status(model, key[0], key[1], status, ts, alerts)
            return
        members = self.ordered_models()
        # family_size only matters to the family rules (e-BH padding)
        size = self.family_size if self._family_rule else 0
        targets = target_statuses(self.config.multiplicity, members, self._certs, size)
        for (mname, cert, meth), new in targets.items():
            m = self.models[mname]
            if new != m.effective[(cert, meth)].status:
                self._set_status(m, cert, meth, new, ts, alerts)

    def _set_status(self, m: ModelState, cert: str, meth: str, new: str, ts: float,
                    alerts: list[Alert]) -> None:
        """Move one effective status to ``new``; alerts for the certificate's primary method."""
        eff = m.effective[(cert, meth)]
        rounds = m.counts["rounds"]
        eff.status = new
        eff.changed_ts = ts if math.isfinite(ts) else None
        kinds: list[str] = []
        if new == "certified":
            if eff.certified_at_round is None:
                eff.certified_at_round = rounds
            eff.ever_certified = True
            kinds.append("certified")
        elif new == "violated":
            if eff.violated_at_round is None:
                eff.violated_at_round = rounds
            kinds.append("violated")
            if eff.ever_certified:
                kinds.append("certificate_lost")
        if meth != self._primary[cert]:
            return
        for kind in kinds:
            alerts.append(
                make_alert(kind, self.name, m.name, cert, meth, rounds, ts,
                           alert_evidence(m, cert, meth, kind, self.config.multiplicity))
            )

    # ------------------------------------------------------------------ views
    def view(self, shown_only: bool = False) -> dict[str, Any]:
        """Return this suite's part of STATE.json (``shown_only``: see ``model_view``)."""
        certs = self._certs
        view: dict[str, Any] = {
            "multiplicity": self.config.multiplicity,
            "family_size": self.family_size,
            "models": {name: model_view(m, certs, shown_only) for name, m in self.models.items()},
        }
        if self.refused_count:
            view["refused_models"] = {"events": self.refused_count, "names": list(self.refused)}
        return view

    # ------------------------------------------------------------------ snapshot
    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable snapshot (ordered structures as lists)."""
        return {
            "name": self.name,
            "watermark": None if self.watermark == -math.inf else self.watermark,
            "models": [m.to_dict() for m in self.models.values()],
            "ids": self.ids.to_columns(),
            "pending": self.pending.to_columns(),
            "orphans": self.orphans.to_columns(),
            "rounded": self.rounded.to_columns(),
            "refused": [self.refused_count, list(self.refused)],
        }

    @classmethod
    def from_dict(cls, config: SuiteConfig, d: dict[str, Any]) -> SuiteState:
        """Inverse of :meth:`to_dict`."""
        s = cls(str(d["name"]), config)
        s.models.clear()
        s.watermark = -math.inf if d["watermark"] is None else float(d["watermark"])
        for md in d["models"]:
            m = ModelState.from_dict(md, s._proto_named)
            if s._strata is not None:
                m.strata = StrataState.from_dict(s._strata, md["strata"])
            s.models[m.name] = m
        c = config
        s.ids = FifoExpiringMap.from_columns(c.dedupe_max_ids, c.dedupe_ttl_seconds, d["ids"])
        s.units = {str(u) for _, (_, u) in s.ids.data.items()}
        s.pending = ExpiringMap.from_columns(c.max_pending, c.pending_ttl_seconds, d["pending"])
        s.orphans = ExpiringMap.from_columns(c.max_orphans, c.orphan_ttl_seconds, d["orphans"])
        s.rounded = ExpiringMap.from_columns(c.max_round_units, math.inf, d["rounded"])
        s._due = min(s.ids.due(), s.pending.due(), s.orphans.due())
        count, names = d.get("refused", [0, []])  # absent in older snapshots
        s.refused_count, s.refused = int(count), [str(n) for n in names]
        s._bind()
        return s

