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

import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from monitor.alerts import ALERT_KINDS, Alert
from monitor.checkpoint import Position
from monitor.clock_horizon import ClockHorizon
from monitor.config import CertmonConfig, SuiteConfig
from monitor.engine_restore import (
    check_engine_head,
    check_selection_parts,
    restore_counters,
    restore_suite,
)
from monitor.errors import CheckpointError
from monitor.events import (
    REJECTION_REASONS,
    Event,
    Rejection,
    dead_letter_record,
    decode_event,
    peek_route,
)
from monitor.fingerprint import config_fingerprint, fingerprint_hint
from monitor.state.budget import JoinBudget
from monitor.state.prototypes import ModelFactories
from monitor.state.restore_checks import RefusedState
from monitor.state.selection_suites import SelectionSuites
from monitor.state.suite import SuiteState
from monitor.state.views import suite_view_parts
from monitor.stats.betting.confseq_bernstein import BernsteinSequences

SuiteParts = tuple[str, dict[str, Any], Iterator[tuple[str, dict[str, Any]]] | None]
"""A suite of :meth:`Engine.suite_views`: name, suite-level view, its models one at a time."""

__all__ = ["DUPLICATE_REASONS", "SELECTION_PART", "Engine", "ProcessResult"]

DUPLICATE_REASONS: Final = ("event_id", "unit")
SELECTION_PART: Final = ""  # the part of the selection suites (never a suite name)
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


class Engine:
    """State of all suites seen, driven one raw event at a time.

    Parameters
    ----------
    config : CertmonConfig
        Suites are routed to the first ``[[suites]]`` entry whose name or glob matches;
        events of other suites (or of unlisted models) are counted as ``unrouted``.
    clock : callable, optional
        Wall clock in Unix seconds (default :func:`time.time`), read only for an event
        stamped past the last reading plus ``events.max_ts_jump_seconds``.

    Notes
    -----
    Guarantees: each event is validated once; rejected events and duplicates never change
    certificate state; the audit decision depends only on identifiers (or the event's
    ``audit`` flag); each round uses one audited unit and one fresh synthetic block.
    Outputs are deterministic functions of the per-suite event order, of the engine's event
    order for the memory budget's evictions (:mod:`monitor.state.budget`), and of the clock
    for events stamped over ``events.max_ts_jump_seconds`` ahead (``implausible_ts``).
    """

    def __init__(self, config: CertmonConfig, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self._max_bytes = config.events.max_bytes
        # the wall clock (Unix seconds): only far-future event times read it
        self._clock = ClockHorizon(clock, config.events.max_ts_jump_seconds)
        self._max_id_bytes = config.events.max_id_bytes
        self._max_suites = config.events.max_suites
        self._max_suite_models = config.events.max_models_per_suite
        self._max_models = config.events.max_models
        self._suites: dict[str, SuiteState] = {}
        self.factories = ModelFactories()  # one per [[suites]] entry, shared by its suites
        self._n_models = 0  # models of all suites (kept current by _apply and restore)
        self.budget = JoinBudget.of(config.events)  # the memory bound over all suites
        self._fingerprint = config_fingerprint(config)
        self._selection = SelectionSuites(config)  # mode = "selection" suites
        self.changed: set[str] = set()  # parts changed since the last checkpoint cleared it
        self.events_in = 0
        self.unrouted = 0
        self.label_requests = 0
        self.rejected: dict[str, int] = dict.fromkeys(REJECTION_REASONS, 0)
        self.duplicates: dict[str, int] = dict.fromkeys(DUPLICATE_REASONS, 0)
        self.alerts: dict[str, int] = dict.fromkeys(ALERT_KINDS, 0)

    # ------------------------------------------------------------------ processing
    def _admit(self, ev: Event, suite: SuiteState | None) -> SuiteState | Rejection | None:
        """Return the suite of a valid event whose suite or model is new, within the limits.

        Returns the (possibly new) suite, None when no plain suite of this engine owns the
        event (unrouted, or a selection suite), or the rejection when creating the suite or
        the model would exceed ``[events]`` limits; then nothing is created.
        """
        new_model = 0
        if suite is None:
            cfg = self._route(ev.suite)
            if cfg is None:
                return None
            if (cfg.mode != "selection" or ev.suite not in self._selection.states) and (
                    len(self._suites) + len(self._selection.states) >= self._max_suites):
                return Rejection("too_many_suites", f"suite {ev.suite!r} would be suite "
                                 f"{self._max_suites + 1} of this instance, the limit is "
                                 f"{self._max_suites} (events.max_suites)")
            if cfg.mode == "selection":
                return None
            listed = {p for p in cfg.models if not any(ch in p for ch in "*?[")}
            new_model = len(listed) + (ev.model not in listed and cfg.matches_model(ev.model))
            have = 0
        else:
            cfg = suite.config
            new_model = int(ev.model not in suite.models and cfg.matches_model(ev.model))
            have = len(suite.models)
        if new_model:
            if have + new_model > self._max_suite_models:
                return Rejection("too_many_models", f"model {ev.model!r} would be model "
                                 f"{have + new_model} of suite {ev.suite!r}, the limit is "
                                 f"{self._max_suite_models} (events.max_models_per_suite)")
            if self._n_models + new_model > self._max_models:
                return Rejection("too_many_models", f"model {ev.model!r} of suite "
                                 f"{ev.suite!r} would be model {self._n_models + new_model}"
                                 f" of this instance, the limit is {self._max_models} "
                                 "(events.max_models)")
        if suite is None:
            suite = self._suites[ev.suite] = SuiteState(ev.suite, cfg, self.factories.of(cfg))
            self._n_models += len(suite.models)
        return suite

    def _route(self, name: str) -> SuiteConfig | None:
        return next((sc for sc in self.config.suites if sc.matches_suite(name)), None)

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
        res = ProcessResult()
        out = self._apply(raw, res.alerts, res.requests)
        if out is not None:
            if isinstance(out, Rejection):
                res.rejection = out
                res.dead_letter = dead_letter_record(out, raw, position)
            else:
                res.duplicate = out
        return res

    def process_batch(self, raws: Sequence[bytes]) -> list[tuple[int, ProcessResult]]:
        r"""Validate and apply events in order: the same state as :meth:`process` on each.

        The fast path of the file and Kafka loops: no result object is built for the
        (usual) events that produce nothing.

        Parameters
        ----------
        raws : sequence of bytes
            JSON events, in order.

        Returns
        -------
        list of (int, ProcessResult)
            ``(index in raws, result)`` of each event that produced an alert, a request, a
            rejection or a dropped duplicate, in order. ``dead_letter`` is left None: the
            caller knows the positions (:func:`monitor.events.dead_letter_record`).

        Examples
        --------
        >>> from monitor.config import parse_config
        >>> eng = Engine(parse_config("[[suites]]\n[[suites.certificates]]\nname='r'\n"
        ...                           "alpha=0.1\ndelta=0.1"))
        >>> ev = (b'{"type": "label", "event_id": "e1", "suite": "s", "model": "m",'
        ...       b' "example_id": "x", "loss": 0, "ts": 1}')
        >>> [(i, r.rejection and r.rejection.reason, r.duplicate)
        ...  for i, r in eng.process_batch([ev, b"{", ev])]
        [(1, 'invalid_json', None), (2, None, 'event_id')]
        >>> eng.events_in
        3
        """
        found: list[tuple[int, ProcessResult]] = []
        alerts: list[Alert] = []
        requests: list[dict[str, Any]] = []
        apply = self._apply
        for i, raw in enumerate(raws):
            out = apply(raw, alerts, requests)
            if out is None and not alerts and not requests:
                continue
            res = ProcessResult(alerts, requests)
            if out is not None:
                if isinstance(out, Rejection):
                    res.rejection = out
                else:
                    res.duplicate = out
            found.append((i, res))
            alerts, requests = [], []  # res owns the old lists now
        return found

    def _apply(
        self, raw: bytes, alerts: list[Alert], requests: list[dict[str, Any]]
    ) -> Rejection | str | None:
        """Apply one event, appending its outputs; return its rejection or duplicate reason."""
        self.events_in += 1
        ev = decode_event(raw, self._max_bytes, self._max_id_bytes)
        if isinstance(ev, Rejection):
            self._reject(ev, raw)
            return ev
        suite = self._suites.get(ev.suite)
        # the clock is read only past the last horizon; checked first: it creates nothing
        if ev.ts > self._clock.horizon and self._clock.ahead_of_clock(ev.ts):
            rej = Rejection("implausible_ts", self._clock.explain(
                ev.ts, None if suite is None else suite.watermark, ev.suite))
            self._reject(rej, raw)
            return rej
        known = suite is not None and ev.model in suite.models
        if not known:
            admitted = self._admit(ev, suite)
            if isinstance(admitted, Rejection):
                self._reject(admitted, raw)
                return admitted
            suite = admitted
        if suite is None:
            if not self._selection.owns(ev.suite):
                self.unrouted += 1
                return None
            # evaluation requests, not label requests (see monitor/state/selection_suites.py)
            dup = self._selection.handle(ev, alerts, requests)
            self.changed.add(SELECTION_PART)
        else:
            n_models = 0 if known else len(suite.models)  # known: the event creates none
            dup = suite.handle(ev, alerts, requests)
            budget = self.budget
            if budget.slack:  # far below both bounds (JoinBudget.account)
                budget.slack -= 1
            else:
                budget.account(suite.join, self._suites, alerts, self.changed)
            if not known:
                self._n_models += len(suite.models) - n_models
            self.changed.add(ev.suite)
            if requests:
                self.label_requests += len(requests)
        if alerts:
            counts = self.alerts
            for a in alerts:
                counts[a["kind"]] += 1
        if dup is None:
            return None
        if dup == "event_id_conflict":
            rej = Rejection("event_id_conflict", f"event_id {ev.event_id!r} was seen with other "
                            "content (unit, type or loss); the first event stands")
            self._reject(rej, raw)
            return rej
        if dup == "unrouted":
            self.unrouted += 1
            return None
        self.duplicates[dup] += 1
        return dup

    def _reject(self, rej: Rejection, raw: bytes) -> None:
        """Count a rejection, attributed to its model when that model already exists.

        A rejected event never creates a suite or a model (else junk lines grow the state).
        """
        self.rejected[rej.reason] += 1
        route = peek_route(raw) if rej.reason not in ("oversized", "undecodable") else None
        if route is not None:
            suite = self._suites.get(route[0])
            model = suite.models.get(route[1]) if suite is not None else None
            if model is not None:
                model.counts["rejected"] += 1
                self.changed.add(route[0])

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
            "budget_evictions": dict(self.budget.evictions),
        }

    @property
    def suites(self) -> dict[str, SuiteState]:
        """Suite states by name (read-only use)."""
        return self._suites

    def settle(self, parts: Collection[str] | None = None) -> None:
        """Apply the rounds the confidence sequences buffer, of every suite (or of ``parts``).

        Every read calls it first, so a read of a large fleet applies the models' buffered
        rounds in one vectorized pass per configuration
        (:meth:`~monitor.stats.betting.confseq_bernstein.BernsteinSequences.flush_all`)
        instead of model by model. The state is the same either way.
        """
        BernsteinSequences.flush_all(
            seq for name, s in self._suites.items() if parts is None or name in parts
            for m in s.models.values() for g in m.groups.values()
            if (seq := g.sequences) is not None)

    def state_view(self, shown_only: bool = False) -> dict[str, Any]:
        """Return the STATE.json document (JSON-serializable; non-finite numbers become null).

        ``shown_only`` leaves out every method but each certificate's primary one: the
        cheaper document a ``[metrics] detail = "shown"`` scrape reads.
        """
        self.settle()
        return {
            "suites": {
                **{name: s.view(shown_only) for name, s in self._suites.items()},
                **self._selection.views(),
            },
            "counters": self.counters,
        }

    def suite_views(self) -> Iterator[SuiteParts]:
        """Yield the ``suites`` part of :meth:`state_view` one suite at a time, in parts.

        ``(name, view, models)``: ``models`` iterates over ``(model name, model view)``, each
        built when asked for, and ``view`` holds the suite's other fields with ``"models"``
        empty (:func:`~monitor.state.views.suite_view_parts`); for a selection suite
        ``models`` is None and ``view`` is whole. Settles first, as :meth:`state_view`. For
        writers that encode each model view and drop it before building the next (a fleet's
        STATE.json without the document held as Python objects at once).
        """
        self.settle()
        selection = self._selection.views()
        for name, s in self._suites.items():
            if name not in selection:
                yield (name, *suite_view_parts(s))
        for name, v in selection.items():
            yield name, v, None

    # ------------------------------------------------------------------ snapshots
    def snapshot(self, parts: Collection[str] | None = None) -> dict[str, Any]:
        """Full JSON-serializable state (:mod:`monitor.checkpoint`), or only ``parts`` of it."""
        self.settle(parts)
        snap: dict[str, Any] = {"kind": _SNAPSHOT_KIND, "version": 1,
                                "config_fingerprint": self._fingerprint, "counters": self.counters}
        snap["suites"] = [s.to_dict() for n, s in self._suites.items()
                          if parts is None or n in parts]
        if self._selection.states and (parts is None or SELECTION_PART in parts):
            snap["selection"] = self._selection.to_list()  # absent without selection suites
        return snap

    def part_names(self) -> list[str]:
        """Suite names in snapshot order, then SELECTION_PART if there are selection suites."""
        return [*self._suites, *([SELECTION_PART] if self._selection.states else [])]

    def start(self, ts: float | None = None) -> ProcessResult:
        """Start the configured selection-mode suites: their first evaluation requests.

        Idempotent on started suites (re-emits their requests in flight, same ids); ``ts``
        stamps new requests (default: the suite's event time, 0.0 before any event).
        """
        self.changed.add(SELECTION_PART)
        return ProcessResult(requests=self._selection.start(ts))

    @classmethod
    def restore(cls, config: CertmonConfig, snapshot: dict[str, Any],
                clock: Callable[[], float] = time.time) -> Engine:
        """Rebuild an engine from :meth:`snapshot` output (``clock``: as in the constructor).

        Raises
        ------
        CheckpointError
            The snapshot is not an engine snapshot, was written with a different suites
            configuration or different certificate parameters, holds a value out of range
            (see :mod:`monitor.state.restore_checks`), or is malformed. Nothing is
            half-loaded: a new engine is built and returned only on success.
        """
        check_engine_head(snapshot, _SNAPSHOT_KIND)
        eng = cls(config, clock)
        if snapshot.get("config_fingerprint") != eng._fingerprint:
            raise CheckpointError(
                "checkpoint was written with a different [[suites]]/[events] configuration; "
                "use the original config or start from an empty checkpoint directory"
                + fingerprint_hint(snapshot))
        try:
            restore_counters(eng, snapshot["counters"])
            for sd in snapshot["suites"]:
                cfg = eng._route(str(sd["name"]))
                if cfg is None:
                    raise ValueError(f"suite {sd['name']!r} is not routed by this config")
                suite = restore_suite(cfg, sd, eng._clock, eng.factories.of(cfg))
                eng._suites[str(sd["name"])] = suite
                eng._n_models += len(suite.models)
            check_selection_parts(eng._selection, snapshot.get("selection", []))
            eng._selection.restore(snapshot.get("selection", []))
            eng.budget.recount(eng._suites)
        except RefusedState as exc:
            raise CheckpointError(f"checkpoint refused: {exc}") from None
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise CheckpointError(
                f"checkpoint is corrupt: malformed engine state ({exc!r})"
            ) from None
        return eng
