r"""The service loop: source -> engine -> sinks, with checkpoints and metrics.

:class:`Runner` owns one :class:`~monitor.engine.Engine`. It restores it from the
checkpoint store (if any), feeds it the source from the checkpoint's position, emits alerts,
label requests and dead letters to their sinks, and checkpoints every ``every_events``
events, every ``every_seconds`` seconds and when it stops (end of input or
:meth:`Runner.stop`, e.g. from a SIGTERM handler).

Delivery: sinks are flushed before each checkpoint is written, so every output of the
events a checkpoint covers is durable. After a crash, the events after the checkpoint are
processed again and their outputs re-emitted with the same alert ids (*at-least-once*;
receivers deduplicate by id). The state itself counts every event exactly once.

Examples
--------
>>> from monitor.config import parse_config
>>> from monitor.sinks import MemorySink
>>> cfg = parse_config("[[suites]]\naudit_rate=1.0\n[[suites.certificates]]\nname='r'\n"
...                    "alpha=0.5\ndelta=0.1\nmethods=['r_eval']\ncs_grid=20")
>>> out = Outputs(MemorySink(), MemorySink(), MemorySink())
>>> runner = Runner(cfg, out)
>>> events = [b'{"type": "judge", "event_id": "e1", "suite": "s", "model": "m",'
...           b' "example_id": "x", "loss": 0, "ts": 1}', b'not json']
>>> runner.run(IterSource(events))
>>> runner.engine.events_in, out.dead_letters.records[0]["reason"]
(2, 'invalid_json')
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

from consumers.state_json import dumps_state, state_chunks
from monitor.checkpoint import CheckpointStore, Position, atomic_write, remove_stale_temps
from monitor.config import CertmonConfig
from monitor.engine import Engine
from monitor.errors import CertmonError, CheckpointError
from monitor.events import dead_letter_record
from monitor.incremental import IncrementalCheckpointer, SaveStats
from monitor.sinks import Sink

if TYPE_CHECKING:
    from monitor.metrics import OperationalMetrics

__all__ = [
    "EventSource",
    "IterSource",
    "Outputs",
    "Runner",
    "install_signal_handlers",
    "write_engine_state",
    "write_state",
]


class EventSource(Protocol):
    """What :class:`Runner` reads: raw events in batches, plus resumable positions."""

    def read(self, limit: int) -> list[bytes]:
        """Up to ``limit`` raw events; ``[]`` when the input ended (or a stop was asked)."""

    def position(self) -> Position:
        """Position after the last event read."""

    def event_source(self, index: int) -> dict[str, Any]:
        """Where event ``index`` of the last :meth:`read` came from (for dead letters)."""


class IterSource:
    """Adapt an iterable of raw events (position = number of events consumed).

    Examples
    --------
    >>> src = IterSource([b"a", b"b", b"c"], start={"kind": "iter", "count": 1})
    >>> src.read(5), src.position(), src.event_source(0)
    ([b'b', b'c'], {'kind': 'iter', 'count': 3}, {'kind': 'iter', 'index': 2})
    """

    def __init__(self, events: Iterable[bytes], start: Position | None = None) -> None:
        self._events = iter(events)
        self.count = int(start.get("count", 0)) if start else 0
        self._skip = self.count
        self._before = self.count  # count before the last read

    def read(self, limit: int) -> list[bytes]:
        """Up to ``limit`` events (after skipping those the start position already covers)."""
        if self._skip:
            next(islice(self._events, self._skip, self._skip), None)  # drop the covered ones
            self._skip = 0
        batch = list(islice(self._events, limit))
        self._before = self.count
        self.count += len(batch)
        return batch

    def position(self) -> Position:
        """``{"kind": "iter", "count": N}``."""
        return {"kind": "iter", "count": self.count}

    def event_source(self, index: int) -> dict[str, Any]:
        """``{"kind": "iter", "index": N}`` (1-based over the whole input)."""
        return {"kind": "iter", "index": self._before + index + 1}


@dataclass
class Outputs:
    """The three output sinks."""

    alerts: Sink
    requests: Sink
    dead_letters: Sink

    def flush(self) -> None:
        """Flush every sink."""
        self.alerts.flush()
        self.requests.flush()
        self.dead_letters.flush()

    def close(self) -> None:
        """Close every sink."""
        self.alerts.close()
        self.requests.close()
        self.dead_letters.close()


class Runner:
    """Drive an engine from a source to sinks with checkpoints (see the module docstring).

    Parameters
    ----------
    config : CertmonConfig
    outputs : Outputs
    store : CheckpointStore, optional
        Without a store there are no checkpoints and no resume.
    key : str
        Checkpoint key (default ``config.checkpoint.key``).
    metrics : OperationalMetrics, optional
        Updated every 256 events and at each checkpoint.
    on_alert : callable, optional
        Called with every alert after it was emitted (progress display).
    """

    SYNC_EVERY = 256

    def __init__(
        self,
        config: CertmonConfig,
        outputs: Outputs,
        store: CheckpointStore | None = None,
        key: str | None = None,
        metrics: OperationalMetrics | None = None,
        on_alert: Callable[[dict[str, Any]], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.outputs = outputs
        self.store = store
        self.key = key or config.checkpoint.key
        # checkpoints: one document per suite, only the changed ones rewritten
        self.checkpointer = (None if store is None
                             else IncrementalCheckpointer(store, self.key))
        self.last_checkpoint: SaveStats | None = None
        self.metrics = metrics
        self.on_alert = on_alert
        self.every_events = config.checkpoint.every_events
        self.every_seconds = config.checkpoint.every_seconds
        self.rate_limit = config.source.max_events_per_second
        self._clock = clock
        self._lock = threading.Lock()
        self._viewers = 0
        self._viewers_lock = threading.Lock()
        self._stop = threading.Event()
        self.engine = Engine(config)
        self._engines = 0  # engines adopted so far: part of state_version()
        self.start_position: Position | None = None
        self.checkpoints = 0
        self.ready = False
        self._since_ckpt = 0
        self._last_ckpt = 0.0
        self._source: EventSource | None = None
        self._synced: dict[str, Any] = self._counter_snapshot()

    # ------------------------------------------------------------------ lifecycle
    def restore(self) -> Position | None:
        """Load the last checkpoint (if any) into a fresh engine; return its position.

        Raises
        ------
        CheckpointError
            Corrupt, unknown version, or written with a different configuration.
        """
        if self.checkpointer is None:
            return None
        ckpt = self.checkpointer.load()
        if ckpt is None:
            return None
        self.engine = Engine.restore(self.config, ckpt.snapshot)
        self._engines += 1
        self.start_position = ckpt.position
        self._synced = self._counter_snapshot()
        return ckpt.position

    def adopt(self, engine: Engine, position: Position | None,
              checkpointer: IncrementalCheckpointer | None = None) -> None:
        """Continue from an engine restored elsewhere (e.g. by a probe runner) at ``position``.

        Pass the restoring runner's ``checkpointer`` (same store and key) so that the next
        checkpoint rewrites only the suites changed since; without it the next one is full.
        """
        if checkpointer is not None:
            self.checkpointer = checkpointer
        self.engine = engine
        self._engines += 1
        self.start_position = position
        self._synced = self._counter_snapshot()

    def stop(self) -> None:
        """Ask the loop to stop after the current event (signal-handler safe)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stop.is_set()

    def view(self, shown_only: bool = False) -> dict[str, Any]:
        """Thread-safe ``Engine.state_view(shown_only)`` (for the metrics collector, progress)."""
        with self._viewers_lock:
            self._viewers += 1
        try:
            with self._lock:
                return self.engine.state_view(shown_only)
        finally:
            with self._viewers_lock:
                self._viewers -= 1

    def state_version(self) -> tuple[int, int]:
        r"""Return the version of :meth:`view`'s document (changes whenever it does).

        ``(engines adopted, events the engine applied)``: every change of an engine's state
        is the application of an event, counted before it is applied, and every other
        engine is a new one. For ``StateCollector(version_fn=...)``: an idle instance's
        scrapes reuse one rendering. Lock-free (two integer reads).

        Examples
        --------
        >>> from monitor.config import parse_config
        >>> from monitor.sinks import MemorySink
        >>> cfg = parse_config("[[suites]]\n[[suites.certificates]]\nname='r'\nalpha=0.5\n"
        ...                    "delta=0.1\nmethods=['r_eval']\ncs_grid=20")
        >>> runner = Runner(cfg, Outputs(MemorySink(), MemorySink(), MemorySink()))
        >>> before = runner.state_version()
        >>> runner.run(IterSource([b'{"type": "judge", "event_id": "e1", "suite": "s",'
        ...                        b' "model": "m", "example_id": "x", "loss": 0, "ts": 1}']))
        >>> runner.state_version() != before, runner.state_version() == runner.state_version()
        (True, True)
        """
        return self._engines, self.engine.events_in

    # ------------------------------------------------------------------ loop
    def run(self, source: EventSource) -> None:
        """Process the source until it ends or :meth:`stop` is called; checkpoint at the end.

        Events are read and processed in batches of at most ``SYNC_EVERY`` (and never past
        the next ``every_events`` checkpoint), one :meth:`Engine.process_batch` call each.
        The first event of every batch is processed alone and timed: the sampled
        ``certmon_event_processing_seconds`` observation.
        """
        out = self.outputs
        emit_alert = out.alerts.emit
        emit_request = out.requests.emit
        emit_dead = out.dead_letters.emit
        lock = self._lock
        stop = self._stop
        metrics = self.metrics
        n = 0
        synced_at = 0
        self._since_ckpt = 0
        self._last_ckpt = self._clock()
        t_start = self._clock()
        self._source = source
        self.ready = True
        if metrics is not None:
            metrics.set_up(True)
        on_alert = self.on_alert
        store = self.store
        every_events = self.every_events
        sync_every = self.SYNC_EVERY
        perf_counter = time.perf_counter
        try:
            while not stop.is_set():
                limit = sync_every
                if store is not None:
                    limit = max(1, min(limit, every_events - self._since_ckpt))
                raws = source.read(limit)
                if not raws:
                    break
                if self._viewers:
                    self._yield_to_viewers()
                with lock:
                    engine = self.engine
                    if metrics is not None:  # latency of the batch's first event
                        t0 = perf_counter()
                        found = engine.process_batch(raws[:1])
                        metrics.observe_event(perf_counter() - t0)
                        if len(raws) > 1:
                            found += [(i + 1, r) for i, r in engine.process_batch(raws[1:])]
                    else:
                        found = engine.process_batch(raws)
                for i, res in found:
                    if res.rejection is not None:
                        emit_dead(dead_letter_record(res.rejection, raws[i],
                                                     source.event_source(i)))
                    for req in res.requests:
                        emit_request(req)
                    for alert in res.alerts:
                        emit_alert(alert)
                        if on_alert is not None:
                            on_alert(alert)
                n += len(raws)
                self._since_ckpt += len(raws)
                if n - synced_at >= sync_every:
                    synced_at = n
                    self._sync_metrics()
                    now = self._clock()
                    if self.rate_limit is not None:
                        ahead = n / self.rate_limit - (now - t_start)
                        if ahead > 0:
                            stop.wait(ahead)
                    if store is not None and now - self._last_ckpt >= self.every_seconds:
                        self._checkpoint(source)
                if store is not None and self._since_ckpt >= every_events:
                    self._checkpoint(source)
        finally:
            if metrics is not None:
                metrics.set_up(False)
            self._source = None
        self._sync_metrics()
        if self.store is not None:
            self._checkpoint(source)
        else:
            out.flush()

    def idle(self) -> None:
        """Call while the source waits for data: flush outputs, checkpoint if due."""
        source = self._source
        if source is None:
            return
        self._sync_metrics()
        due = self._clock() - self._last_ckpt >= self.every_seconds
        if self.store is not None and self._since_ckpt and due:
            self._checkpoint(source)  # flushes the outputs first
        else:
            self.outputs.flush()

    def _yield_to_viewers(self) -> None:
        deadline = time.monotonic() + 1.0
        while self._viewers and time.monotonic() < deadline:
            time.sleep(0.0005)

    def _checkpoint(self, source: EventSource) -> None:
        writer = self.checkpointer
        if writer is None:
            raise RuntimeError("checkpoint requested but no checkpoint store is configured")
        t0 = time.perf_counter()
        try:
            self.outputs.flush()
            with self._lock:  # only the changed suites are snapshot
                pending = writer.prepare(self.engine, source.position())
            self.last_checkpoint = writer.commit(pending)
        except (CheckpointError, OSError):
            if self.metrics is not None:
                self.metrics.checkpoint_failed()
            raise
        self.checkpoints += 1
        self._since_ckpt = 0
        self._last_ckpt = self._clock()
        if self.metrics is not None:
            self._sync_metrics()  # count what this checkpoint covers before resetting "pending"
            self.metrics.checkpoint_written(time.perf_counter() - t0, time.time())

    # ------------------------------------------------------------------ metrics
    def _counter_snapshot(self) -> dict[str, Any]:
        return self.engine.counters

    def _sync_metrics(self) -> None:
        m = self.metrics
        if m is None:
            return
        now = self._counter_snapshot()
        before = self._synced
        if now["events_in"] > before["events_in"]:
            m.events_received(now["events_in"] - before["events_in"])
        if now["unrouted"] > before.get("unrouted", 0):
            m.unrouted(now["unrouted"] - before.get("unrouted", 0))
        for reason, v in now["rejected"].items():
            for _ in range(v - before["rejected"].get(reason, 0)):
                m.rejected(reason)
        for reason, v in now["duplicates"].items():
            for _ in range(v - before["duplicates"].get(reason, 0)):
                m.duplicate(reason)
        for kind, v in now["alerts"].items():
            for _ in range(v - before["alerts"].get(kind, 0)):
                m.alert_emitted(kind)
        self._synced = now


def write_state(path: str, view: dict[str, Any]) -> None:
    """Write STATE.json atomically (sorted keys, indented: :func:`dumps_state`)."""
    _write(path, dumps_state(view))


def _write(path: str, data: bytes | list[bytes]) -> None:
    try:
        remove_stale_temps(Path(path).resolve().parent)  # a killed run's partial file
        atomic_write(path, data)
    except OSError as exc:
        raise CertmonError(f"cannot write {path}: {exc.strerror or exc}") from None


def write_engine_state(path: str, engine: Engine) -> None:
    """Write ``engine``'s STATE.json atomically, one suite's view at a time.

    The bytes of :func:`write_state` of ``engine.state_view()``
    (:func:`~consumers.state_json.state_chunks`, written chunk by chunk), without the whole
    document held as Python objects, nor its text joined, at once.
    """
    _write(path, state_chunks(engine.suite_views(), lambda: engine.counters))


def install_signal_handlers(stop: Callable[[], None]) -> Callable[[], None]:
    """Route SIGTERM/SIGINT to ``stop``; return a function restoring the old handlers."""

    def handler(signum: int, frame: FrameType | None) -> None:
        stop()

    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}

    def restore() -> None:
        for sig, h in old.items():
            signal.signal(sig, h)

    return restore
