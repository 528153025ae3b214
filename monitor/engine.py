"""The streaming engine: raw event bytes in; alerts, label requests and state out.

One :class:`Engine` holds the state of every suite it has seen and nothing else (no I/O,
no clocks, no threads): the same events in the same order always give the same state,
and ``Engine.restore(config, engine.snapshot())`` continues bit-identically. The file
runner and the Kafka consumer (one engine per partition) both drive it.

Examples
--------
>>> from monitor.config import parse_config
>>> cfg = parse_config('''
... [[suites]]
... audit_rate = 1.0
... [[suites.certificates]]
... name = "risk"
... alpha = 0.5
... delta = 0.1
... methods = ["r_eval"]
... cs_grid = 50
... ''')
>>> eng = Engine(cfg)
>>> for i in range(40):
...     for kind in ("judge", "label"):
...         r = eng.process(('{"type": "%s", "event_id": "%s%d", "suite": "qa", "model": "m",'
...             ' "example_id": "x%d", "loss": 0.0, "ts": %d}' % (kind, kind, i, i, i)).encode())
...         if r.alerts:
...             print(r.alerts[0]["kind"], r.alerts[0]["round"])
certified 6
>>> eng.process(b'{"type": "judge"}').rejection.reason
'missing_field'
>>> view = eng.state_view()
>>> view["suites"]["qa"]["models"]["m"]["certificates"]["risk"]["methods"]["r_eval"]["status"]
'certified'
>>> Engine.restore(cfg, eng.snapshot()).state_view() == view
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from hashlib import sha256
from typing import Any, Final

from monitor.alerts import ALERT_KINDS, Alert
from monitor.checkpoint import Position, canonical_json
from monitor.config import CertmonConfig, SuiteConfig
from monitor.errors import CheckpointError
from monitor.events import (
    REJECTION_REASONS,
    Rejection,
    dead_letter_record,
    decode_event,
    peek_route,
)
from monitor.state.selection import SelectionSuites
from monitor.state.suite import SuiteState

__all__ = ["DUPLICATE_REASONS", "Engine", "ProcessResult"]

DUPLICATE_REASONS: Final = ("event_id", "unit")
_SNAPSHOT_KIND: Final = "certmon.Engine"


@dataclass(slots=True)
class ProcessResult:
    """What one event produced.

    Attributes
    ----------
    alerts : list of dict
        Alerts (see :mod:`monitor.alerts`), in emission order.
    requests : list of dict
        Label requests and (selection-mode suites) evaluation requests.
    rejection : Rejection or None
        Why the event was refused (then ``dead_letter`` holds the dead-letter record).
    duplicate : str or None
        ``"event_id"`` or ``"unit"`` when the event was a dropped duplicate.
    dead_letter : dict or None
        ``{"reason", "detail", "raw" (base64), "source" (the position)}``.
    """

    alerts: list[Alert] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    rejection: Rejection | None = None
    duplicate: str | None = None
    dead_letter: dict[str, Any] | None = None


def config_fingerprint(config: CertmonConfig) -> str:
    r"""Hash of the parts of the configuration that shape the state (suites, event limits).

    Examples
    --------
    >>> from monitor.config import parse_config
    >>> base = "[[suites]]\n[[suites.certificates]]\nname='r'\nalpha=0.1\ndelta=0.1\n"
    >>> a = config_fingerprint(parse_config(base))
    >>> a == config_fingerprint(parse_config(base, ["metrics.port=1"]))
    True
    >>> a == config_fingerprint(parse_config(base, ["suites.0.audit_rate=0.2"]))
    False
    """
    doc = config.model_dump(mode="json", include={"suites", "events"})
    return sha256(canonical_json(doc).encode("ascii")).hexdigest()


class Engine:
    """State of all suites seen, driven one raw event at a time.

    Parameters
    ----------
    config : CertmonConfig
        Suites are routed to the first ``[[suites]]`` entry whose name or glob matches;
        events of other suites (or of unlisted models) are counted as ``unrouted``.

    Notes
    -----
    Guarantees: each event is validated once; rejected events and duplicates never change
    certificate state; the audit decision depends only on identifiers (or the event's
    ``audit`` flag); each round uses one audited unit and one fresh synthetic block.
    Outputs are deterministic functions of the per-suite event order.
    """

    def __init__(self, config: CertmonConfig) -> None:
        self.config = config
        self._max_bytes = config.events.max_bytes
        self._suites: dict[str, SuiteState] = {}
        self._fingerprint = config_fingerprint(config)
        self._selection = SelectionSuites(config)  # mode = "selection" suites
        self.events_in = 0
        self.unrouted = 0
        self.label_requests = 0
        self.rejected: dict[str, int] = dict.fromkeys(REJECTION_REASONS, 0)
        self.duplicates: dict[str, int] = dict.fromkeys(DUPLICATE_REASONS, 0)
        self.alerts: dict[str, int] = dict.fromkeys(ALERT_KINDS, 0)

    # ------------------------------------------------------------------ processing
    def _suite(self, name: str) -> SuiteState | None:
        s = self._suites.get(name)
        if s is None:
            cfg = self._route(name)
            if cfg is None or cfg.mode == "selection":
                return None
            s = self._suites[name] = SuiteState(name, cfg)
        return s

    def _route(self, name: str) -> SuiteConfig | None:
        for sc in self.config.suites:
            if sc.matches_suite(name):
                return sc
        return None

    def process(self, raw: bytes, position: Position | None = None) -> ProcessResult:
        """Validate and apply one event.

        Parameters
        ----------
        raw : bytes
            One JSON event (UTF-8).
        position : dict, optional
            Where the event came from (file offset and line, Kafka topic/partition/offset);
            only copied into the dead-letter record.

        Returns
        -------
        ProcessResult
        """
        self.events_in += 1
        ev = decode_event(raw, self._max_bytes)
        if isinstance(ev, Rejection):
            return self._reject(ev, raw, position)
        res = ProcessResult()
        suite = self._suites.get(ev.suite) or self._suite(ev.suite)
        if suite is None:
            if self._selection.owns(ev.suite):  # see monitor/state/selection.py
                res.duplicate = self._selection.handle(ev, res.alerts, res.requests)
                if res.duplicate is not None:
                    self.duplicates[res.duplicate] += 1
                for a in res.alerts:
                    self.alerts[a["kind"]] += 1
                return res
            self.unrouted += 1
            return res
        alerts = res.alerts
        requests = res.requests
        dup = suite.handle(ev, alerts, requests)
        if dup is not None:
            if dup == "unrouted":
                self.unrouted += 1
            else:
                self.duplicates[dup] += 1
                res.duplicate = dup
        if requests:
            self.label_requests += len(requests)
        if alerts:
            counts = self.alerts
            for a in alerts:
                counts[a["kind"]] += 1
        return res

    def _reject(self, rej: Rejection, raw: bytes, position: Position | None) -> ProcessResult:
        self.rejected[rej.reason] += 1
        route = peek_route(raw) if rej.reason not in ("oversized", "undecodable") else None
        res = ProcessResult(rejection=rej, dead_letter=dead_letter_record(rej, raw, position))
        if route is not None:
            suite = self._suite(route[0])
            if suite is not None:
                # A rejected event has no trustworthy ts: the model is created at the watermark.
                model = suite.model(route[1], suite.watermark, res.alerts)
                if model is not None:
                    model.counts["rejected"] += 1
                for a in res.alerts:
                    self.alerts[a["kind"]] += 1
        return res

    # ------------------------------------------------------------------ views
    @property
    def counters(self) -> dict[str, Any]:
        """Operational counts (the ``counters`` key of STATE.json)."""
        return {
            "events_in": self.events_in,
            "rejected": dict(self.rejected),
            "duplicates": dict(self.duplicates),
            "alerts": dict(self.alerts),
            "label_requests": self.label_requests,
            "unrouted": self.unrouted,
        }

    @property
    def suites(self) -> dict[str, SuiteState]:
        """Suite states by name (read-only use)."""
        return self._suites

    def state_view(self) -> dict[str, Any]:
        """Return the STATE.json document (JSON-serializable; non-finite numbers become null)."""
        return {
            "suites": {
                **{name: s.view() for name, s in self._suites.items()},
                **self._selection.views(),
            },
            "counters": self.counters,
        }

    # ------------------------------------------------------------------ snapshots
    def snapshot(self) -> dict[str, Any]:
        """Full JSON-serializable state (see :mod:`monitor.checkpoint`)."""
        snap = {
            "kind": _SNAPSHOT_KIND,
            "version": 1,
            "config_fingerprint": self._fingerprint,
            "counters": self.counters,
            "suites": [s.to_dict() for s in self._suites.values()],
        }
        if self._selection.states:  # key absent without selection suites (older snapshots)
            snap["selection"] = self._selection.to_list()
        return snap

    def start(self, ts: float | None = None) -> ProcessResult:
        """Start the configured selection-mode suites: their first evaluation requests.

        Idempotent on started suites (re-emits their requests in flight, same ids); ``ts``
        stamps new requests (default: the suite's event time, 0.0 before any event).
        """
        return ProcessResult(requests=self._selection.start(ts))

    @classmethod
    def restore(cls, config: CertmonConfig, snapshot: dict[str, Any]) -> Engine:
        """Rebuild an engine from :meth:`snapshot` output.

        Raises
        ------
        CheckpointError
            The snapshot is not an engine snapshot, was written with a different suites
            configuration, or is malformed. Nothing is half-loaded: a new engine is built
            and returned only on success.
        """
        if snapshot.get("kind") != _SNAPSHOT_KIND or snapshot.get("version") != 1:
            raise CheckpointError(
                f"not a version-1 engine snapshot (kind={snapshot.get('kind')!r}, "
                f"version={snapshot.get('version')!r})"
            )
        eng = cls(config)
        if snapshot.get("config_fingerprint") != eng._fingerprint:
            raise CheckpointError(
                "checkpoint was written with a different [[suites]]/[events] configuration; "
                "use the original config or start from an empty checkpoint directory"
            )
        try:
            c = snapshot["counters"]
            eng.events_in = int(c["events_in"])
            eng.unrouted = int(c["unrouted"])
            eng.label_requests = int(c["label_requests"])
            eng.rejected = {k: int(c["rejected"][k]) for k in REJECTION_REASONS}
            eng.duplicates = {k: int(c["duplicates"][k]) for k in DUPLICATE_REASONS}
            eng.alerts = {k: int(c["alerts"][k]) for k in ALERT_KINDS}
            for sd in snapshot["suites"]:
                cfg = eng._route(str(sd["name"]))
                if cfg is None:
                    raise ValueError(f"suite {sd['name']!r} is not routed by this config")
                eng._suites[str(sd["name"])] = SuiteState.from_dict(cfg, sd)
            eng._selection.restore(snapshot.get("selection", []))
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise CheckpointError(
                f"checkpoint is corrupt: malformed engine state ({exc!r})"
            ) from None
        return eng
