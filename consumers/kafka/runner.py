"""Kafka runner: a consumer-group member that feeds one engine per input partition.

Lifecycle of a partition ``p`` (of ``certmon.eval-events.v1``, plus the same partition of the
optional judge/label topics, co-partitioned by the range assignor):

- **assigned**: load the checkpoint ``"<events-topic>/<p>"`` from the store, restore the
  engine from it and seek every topic of ``p`` to the offsets recorded in it (the beginning
  when there is none). The checkpoint, not Kafka's committed offset, is the source of truth.
- **records**: processed in ``poll()`` batches; alerts, label requests and dead letters go to
  their sinks. With ``fetch_process`` (the default) a child process decodes the partitions
  from the same offsets, pipelined with processing (see :mod:`consumers.kafka.fetcher`).
  A suite read from a second partition is fenced off it (:mod:`consumers.kafka.ownership`);
  a record whose processing raises is retried from the checkpoint (the worker rewinds to the
  last durable one its writer kept), then dead-lettered (:mod:`consumers.kafka.retries`).
- **checkpoint** every ``checkpoint_every_records`` records or ``checkpoint_every_seconds``:
  flush every sink, write the checkpoint durably (one document per suite changed since the
  last one, then the partition's manifest: :mod:`monitor.incremental`), then commit the
  offsets to Kafka (so lag tools see progress). If a sink cannot deliver, every partition
  rewinds to its last checkpoint (:mod:`consumers.kafka.checkpoint_step`).
- **revoked**: flush and write a final checkpoint, then drop the engine; **lost** (evicted
  from the group): drop the engine without writing.

Guarantee: after a crash at any moment (``kill -9``) the restarted group restores each
partition's last durable checkpoint and re-reads from its offsets, so every event is counted
exactly once in the state; outputs are at-least-once with deterministic alert ids.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from consumers.kafka.checkpoint_step import CheckpointStep
from consumers.kafka.clients import (
    engine_read_kwargs,
    kafka_outputs_wanted,
    make_consumer,
    open_sinks,
    open_store,
)
from consumers.kafka.deadlines import (
    RebalanceStalled,
    ShutdownBudget,
    StartupTimeout,
    StopRequested,
    check_startup,
    log_loop_failure,
    rebalance_limit_s,
    startup_bootstrap_ms,
)
from consumers.kafka.fetcher import FetchProcess, group_busy
from consumers.kafka.health import BrokerCheck, EndOffsetProbe, ProgressLog, update_lag
from consumers.kafka.held import HeldPartitions
from consumers.kafka.metrics import KafkaMetrics
from consumers.kafka.ownership import SuiteFence, new_conflicts, owners
from consumers.kafka.partitions import PartitionWorker, process_records
from consumers.kafka.read_positions import ReadPositions
from consumers.kafka.rebalance import RebalanceCallbacks
from consumers.kafka.repartition import Repartitioner
from consumers.kafka.retries import RecordFailed, log_failure
from consumers.kafka.sinks import KafkaOutputs
from consumers.kafka.state import merge_state_views
from consumers.kafka.stopping import StopSequence
from monitor.checkpoint import CheckpointStore
from monitor.config.kafka import kafka_config_of

if TYPE_CHECKING:
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    from monitor.config import CertmonConfig
    from monitor.metrics import OperationalMetrics
    from monitor.sinks import Sink

log = logging.getLogger("certmon.kafka")

__all__ = ["KafkaRunner"]

STAGE_START_WAIT_S = 5.0  # longest the engines' consumer waits for the stage's first join


class KafkaRunner(RebalanceCallbacks, CheckpointStep, StopSequence):
    """Consume, process, checkpoint; see the module docstring for the protocol.

    Parameters
    ----------
    config : CertmonConfig
        Whole configuration; ``config.kafka`` holds the :class:`KafkaConfig`.
    registry : CollectorRegistry
        Where the Kafka metrics are registered.
    ops : OperationalMetrics, optional
        Operational counters to update (events in, rejected, duplicates, alerts, checkpoints).
    store : CheckpointStore, optional
        Overrides the store chosen by ``kafka.checkpoint_store``.
    """

    def __init__(
        self,
        config: CertmonConfig,
        registry: CollectorRegistry,
        *,
        ops: OperationalMetrics | None = None,
        store: CheckpointStore | None = None,
    ) -> None:
        self.config = config
        self.kafka = kafka_config_of(config)
        self.registry = registry
        self.ops = ops
        self.metrics = KafkaMetrics(registry)
        self._store = store
        self._outputs: KafkaOutputs | None = None
        self._sinks: dict[str, Sink] = {}
        self._consumer: KafkaConsumer | None = None
        self._workers: dict[int, PartitionWorker] = {}
        self._fetcher: FetchProcess | None = None
        self._read = ReadPositions()  # without a fetch process: the polls' record ends
        self._advised: dict[tuple[str, int], int] = {}  # offsets last committed (advisory)
        self._lock = threading.RLock()
        self._ready = False
        self._ckpt_failed = False  # the last checkpoint attempt failed
        self._discard_on_revoke = False
        self._took_over = False
        self._fence = SuiteFence(self.metrics, ops, self.kafka.dead_letter_max_raw_bytes)
        self.held = HeldPartitions(self.metrics)  # partitions whose checkpoint was refused
        self._broker = BrokerCheck(
            EndOffsetProbe(self.kafka.client_kwargs(), self.kafka.client_id,
                           self.kafka.topics.events), self.kafka.health_check_seconds)
        self._progress = ProgressLog(self.kafka.progress_log_seconds)
        self._views: dict[bool, dict[str, Any]] = {}  # the last state views (see state_view)
        self._joined = False  # a group assignment was received (the brokers were reached)
        self._revoked_at: float | None = None  # a revocation not yet followed by an assignment
        self._budget = ShutdownBudget()
        self._steps: dict[str, float] = {}
        self._stop_began = 0.0
        self.connecting = False  # inside a blocking client bootstrap (see run_kafka)
        self.final_view: dict[str, Any] | None = None
        self.events_topic = self.kafka.engine_topics()[0]  # names the checkpoint keys
        self._repartitioner: Repartitioner | None = None
        self._mid_batch = False  # inside _process (see _process_batch)

    SCRAPE_WAIT_S = 2.0  # longest a scrape waits for the engines' lock

    # ------------------------------------------------------------------ public views

    def ready(self) -> bool:
        """Readiness: connected, partitions restored, last checkpoint written, no conflict.

        A suite read from a second partition makes it False for ``SuiteFence.UNREADY_S``
        after its last record there; a failed broker check (:mod:`consumers.kafka.health`)
        until a check succeeds; a failed repartition stage until it holds its partitions again
        (the engines get no new records meanwhile: a missing repartition topic, missing
        rights).
        """
        stage = self._repartitioner
        return (self._ready and self._broker.reachable and not self._fence.recent()
                and (stage is None or stage.healthy))

    def state_view(self, shown_only: bool = False) -> dict[str, Any]:
        """Return the merged ``state_view(shown_only)`` of the engines this process owns now.

        A suite held by two engines (restored from two partitions' checkpoints) keeps the
        lowest partition's view: a scrape never fails (see :mod:`consumers.kafka.ownership`).
        A scrape is never held by a long checkpoint or flush: after ``SCRAPE_WAIT_S`` it gets
        the last view computed (empty before the first).
        """
        if not self._lock.acquire(timeout=self.SCRAPE_WAIT_S):
            self._view_fell_back = True  # not the current state: never reused (state_version)
            return self._views.get(shown_only, merge_state_views([], strict=False))
        try:
            views = [self._workers[p].engine.state_view(shown_only)
                     for p in sorted(self._workers)]
            self._view_fell_back = False
        finally:
            self._lock.release()
        view = self._views[shown_only] = merge_state_views(views, strict=False)
        return view

    def assigned_partitions(self) -> list[int]:
        """Input partitions owned now."""
        with self._lock:
            return sorted(self._workers)

    # ------------------------------------------------------------------ setup

    def _open(self, started: float | None) -> None:
        """Open the clients; ``started`` (first start) caps each bootstrap by the deadline."""
        from consumers.kafka.topics import ensure_topics

        k = self.kafka
        if k.create_topics:
            ensure_topics(k, bootstrap_timeout_ms=startup_bootstrap_ms(k, started))
        if self._outputs is None and kafka_outputs_wanted(self.config):
            self._outputs = KafkaOutputs(k, self.registry,
                                         bootstrap_timeout_ms=startup_bootstrap_ms(k, started))
        if not self._sinks:
            self._sinks = open_sinks(self.config, self._outputs)
        if self._store is None:
            self._store = open_store(self.config, k, startup_bootstrap_ms(k, started))
        if k.repartition and self._repartitioner is None:  # joined before the engines join
            self._repartitioner = Repartitioner(k)
            self._repartitioner.start(wait_s=min(STAGE_START_WAIT_S,
                                                 startup_bootstrap_ms(k, started) / 1000))
        self._consumer = self._make_consumer(startup_bootstrap_ms(k, started))
        if k.fetch_process and self._fetcher is None:
            self._fetcher = FetchProcess({**k.client_kwargs(), **engine_read_kwargs(k)},
                                         k.client_id, k.batch_size, k.poll_timeout_ms)

    def _make_consumer(self, bootstrap_timeout_ms: int | None = None) -> KafkaConsumer:
        self._discard_on_revoke = False
        self._read.clear()
        return make_consumer(self.kafka, self._on_assigned, self._on_revoked, self._drop,
                             bootstrap_timeout_ms)

    # ------------------------------------------------------------------ processing

    def _process(self, records: dict[TopicPartition, Any]) -> None:
        rewound: set[int] = set()
        for tp, recs in records.items():
            worker = self._workers.get(tp.partition)
            if worker is None or tp.partition in rewound:
                continue
            recs, fenced_to = self._fence.screen_batch(worker, tp.topic, recs,
                                                       self._sinks["dead_letters"])
            known = len(worker.engine.suites)
            try:
                n = process_records(worker, tp.topic, recs, self._sinks, self.ops,
                                    max_raw_bytes=self.kafka.dead_letter_max_raw_bytes)
            except RecordFailed as exc:
                self._on_record_failed(worker, exc)
                rewound.add(tp.partition)
                continue
            if fenced_to is not None:  # a batch may end with fenced records
                worker.offsets[tp.topic] = max(worker.offsets.get(tp.topic, 0), fenced_to)
            self.metrics.consumed(tp.topic, tp.partition, n)
            self._progress.add(n)
            if self.ops is not None:
                self.ops.events_received(n)
            if len(worker.engine.suites) > known:  # new suites: their conflict counter at 0
                self.metrics.suites_seen(list(worker.engine.suites)[known:])
            others = [w.engine for q, w in self._workers.items() if q != tp.partition]
            clash = new_conflicts(worker.engine, known, others) if others else []
            if clash:
                self._on_conflict(worker, clash)
                rewound.add(tp.partition)

    def _process_batch(self, records: dict[TopicPartition, Any]) -> None:
        """Run :meth:`_process` under the engines' lock.

        An exception out of it leaves ``_mid_batch`` set: an engine may then hold part of a
        batch its offsets do not cover, so its work is not saved (:meth:`_save_before_drop`).
        """
        with self._lock:
            self._mid_batch = True
            self._process(records)
            self._mid_batch = False

    def _on_record_failed(self, worker: PartitionWorker, exc: RecordFailed) -> None:
        """Count and log a processing failure, then rewind the partition to retry it."""
        self.metrics.record_failed(exc.error)
        log_failure(exc, worker.partition, self.kafka.max_record_attempts)
        self._rewind_partition(worker)

    def _rewind_partition(self, worker: PartitionWorker) -> None:
        """Reset ``worker`` to its last durable checkpoint and seek its topics back to it."""
        worker.rewind(self.config)
        self._engine_swaps += 1
        consumer = self._consumer
        if consumer is not None:
            worker.seek(consumer)
            self._sync_fetcher(consumer)

    def _on_conflict(self, worker: PartitionWorker, suites: list[str]) -> None:
        """Fence ``suites`` off ``worker``'s partition and rewind it to its checkpoint."""
        found = owners({q: w.engine for q, w in self._workers.items()
                        if q != worker.partition})
        self._fence.block(worker.partition, suites, found)
        self._rewind_partition(worker)

    def _check_health(self, consumer: KafkaConsumer) -> None:
        """Lag, the active broker check, and the periodic progress line."""
        changed = self._broker.changed()
        if changed is not None:
            self._connected(changed)
        lag = (update_lag(self.metrics, consumer, self._workers, self._fetcher, self._read)
               if self._broker.reachable else None)  # unreachable: unknown (no series)
        if self._progress.due():
            self._progress.emit(partitions=sorted(self._workers), lag=lag,
                                held=sorted(self.held.reasons()),
                                kafka_reachable=self._broker.reachable)

    # ------------------------------------------------------------------ main loop

    def run(self, stop: threading.Event) -> None:
        """Run until ``stop`` is set; retry with exponential backoff while Kafka is down."""
        from kafka.structs import TopicPartition

        backoff = 0.5
        failures = 0  # consecutive failures without progress
        started = time.monotonic()
        connected_once = False
        while not stop.is_set():
            try:
                self.connecting = True
                try:
                    self._open(None if connected_once else started)
                except StopRequested:  # SIGTERM during a blocking bootstrap
                    self._close_consumer(clean=False)
                    break
                finally:
                    self.connecting = False
                consumer = self._require_consumer()
                self._revoked_at = None
                self._broker.start()
                log.info("consumer started", extra={"kafka": self.kafka.redacted()})
                self._connected(self._broker.report())  # reached, unless a check says not
                progressed = False
                while not stop.is_set():
                    fetcher = self._fetcher
                    # with a fetch process, poll() only runs the group protocol (all paused):
                    # a blocking poll while joining or while no partition is owned (nothing
                    # to fetch, and a join the heuristic misses still completes), else a
                    # non-blocking one
                    quick = (fetcher is not None and bool(self._workers)
                             and not group_busy(consumer))
                    records = consumer.poll(timeout_ms=0 if quick else self.kafka.poll_timeout_ms)
                    if records:
                        for tp, recs in records.items():  # returned: their end (see health)
                            if recs:
                                self._read.note(tp.topic, tp.partition, recs[-1].offset + 1, None)
                        self._process_batch(records)
                    fetched: dict[tuple[str, int], Any] = {}
                    if fetcher is not None:
                        fetched = fetcher.poll(self.kafka.poll_timeout_ms / 1000.0)
                        if fetched:
                            self._process_batch({TopicPartition(t, p): recs
                                                 for (t, p), recs in fetched.items()})
                    if (records or fetched) and not progressed:  # healthy again: reset backoff
                        progressed, failures, backoff = True, 0, 0.5
                    # reached: the group coordinator assigned partitions (possibly none) or
                    # records came. Not consumer.bootstrap_connected(): in kafka-python 3 it is
                    # True only while the bootstrap is in progress, so a healthy instance that
                    # never saw it would give up after startup_timeout_seconds.
                    if not connected_once and (self._joined or records or fetched):
                        connected_once = True
                    if not connected_once:
                        check_startup(self.kafka, started, "no partition assignment from the group")
                    self._check_rebalance()
                    self._retry_held(consumer)
                    self._check_health(consumer)
                    if self._broker.reachable:  # else a write could only time out
                        self._maybe_checkpoint(consumer)
                self.begin_shutdown()
                self._steps["loop_exit"] = round(time.monotonic() - self._stop_began, 3)
                self._close_consumer(clean=True)
            except StartupTimeout:
                self._stop_stages()
                self._close_consumer(clean=False)
                self.close()
                raise
            except Exception as exc:  # the service stays up: log, back off, reconnect
                self._ready = False
                self._connected(False)
                self.metrics.loop_failed(type(exc).__name__)
                failures += 1
                reason = log_loop_failure(exc, failures, backoff)
                self._save_before_drop()
                self._ready = False  # (a checkpoint just written does not make it ready)
                self._close_consumer(clean=False)
                self._mid_batch = False  # the engines are dropped: the next ones start clean
                if connected_once:
                    stop.wait(backoff)
                else:  # the backoff does not outlast the startup deadline either
                    check_startup(self.kafka, started, reason)
                    left = self.kafka.startup_timeout_seconds - (time.monotonic() - started)
                    if not stop.wait(max(0.0, min(backoff, left))):
                        check_startup(self.kafka, started, reason)
                backoff = min(backoff * 2, self.kafka.retry_backoff_max_seconds)
        self._stop_stages()
        self._connected(False)
        self.close()

    def _check_rebalance(self) -> None:
        # A rebalance that never ends (kafka-python, rarely: revoked, then no assignment and
        # nothing fetched) would stall this instance for good; a fresh consumer rejoins.
        revoked_at = self._revoked_at
        limit = rebalance_limit_s(self.kafka)
        if revoked_at is not None and time.monotonic() - revoked_at > limit:
            self._revoked_at = None
            raise RebalanceStalled(f"no partition assignment {limit:.0f} s after a revocation: "
                                   "closing the consumer to rejoin the group")

    def _connected(self, up: bool) -> None:
        # certmon_kafka_connected and certmon_up tell the same truth: while the brokers cannot
        # be reached nothing is processed, so the instance is not "up" for its operators
        self.metrics.connected(up)
        if not up:  # the lag is unknown until the brokers answer again: no stale number
            self.metrics.lag_unknown()
        if self.ops is not None:
            self.ops.set_up(up)
