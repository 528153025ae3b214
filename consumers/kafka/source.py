"""Kafka source: a consumer-group member that feeds one engine per input partition.

Lifecycle of a partition ``p`` (of ``certmon.eval-events.v1``, plus the same partition of the
optional judge/label topics, co-partitioned by the range assignor):

- **assigned**: load the checkpoint ``"<events-topic>/<p>"`` from the store, restore the
  engine from it and seek every topic of ``p`` to the offsets recorded in it (the beginning
  when there is none). The checkpoint, not Kafka's committed offset, is the source of truth.
- **records**: processed in ``poll()`` batches; alerts, label requests and dead letters go to
  their sinks. With ``fetch_process`` (the default) a child process decodes the partitions
  from the same offsets, pipelined with processing (see :mod:`consumers.kafka.fetcher`).
- **checkpoint** every ``checkpoint_every_records`` records or ``checkpoint_every_seconds``:
  flush every sink, write the checkpoint durably, then commit the offsets to Kafka (so lag
  tools see progress). If a sink cannot deliver, every partition rewinds to its last checkpoint.
- **revoked**: flush and write a final checkpoint, then drop the engine; **lost** (evicted
  from the group): drop the engine without writing.

Guarantee: after a crash at any moment (``kill -9``) the restarted group restores each
partition's last durable checkpoint and re-reads from its offsets, so every event is counted
exactly once in the state; outputs are at-least-once with deterministic alert ids.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from consumers.alertmanager.wiring import open_alert_sink, take_over
from consumers.kafka.fetcher import FetchProcess, group_busy
from consumers.kafka.metrics import KafkaMetrics
from consumers.kafka.ownership import new_conflicts, owners, screen
from consumers.kafka.partitions import Columns, PartitionWorker, process_records
from consumers.kafka.retries import RecordFailed
from consumers.kafka.sinks import KafkaOutputs, ProduceError, dead_letter_record
from consumers.kafka.state import merge_state_views, partition_key
from monitor.checkpoint import CheckpointStore, LocalDirectoryStore, secured_store
from monitor.config.kafka import kafka_config_of
from monitor.errors import CertmonError, CheckpointError, ConfigError
from monitor.sinks import Sink, open_sink

if TYPE_CHECKING:
    from collections.abc import Callable

    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    from monitor.config import CertmonConfig
    from monitor.metrics import OperationalMetrics

log = logging.getLogger("certmon.kafka")

# Seconds /readyz answers 503 after a suite was read from a second partition.
CONFLICT_UNREADY_S = 300.0

__all__ = ["KafkaRunner", "StartupTimeout", "StopRequested", "kafka_config_of", "run_kafka"]


class StopRequested(BaseException):
    """Raised by the signal handler to leave a blocking client bootstrap (see :func:`run_kafka`).

    A BaseException, so the Kafka client's own ``except Exception`` cannot swallow it.
    """


class StartupTimeout(CertmonError):
    """No broker answered within ``[kafka] startup_timeout_seconds`` of the first start."""


class KafkaRunner:
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
        self._lock = threading.RLock()
        self._ready = False
        self._discard_on_revoke = False
        self._took_over = False
        self._blocked: dict[int, dict[str, int]] = {}  # partition -> {fenced suite: owner}
        self._conflict_at: float | None = None
        self._joined = False  # a group assignment was received (the brokers were reached)
        self._deadline: float | None = None  # shutdown deadline (monotonic), once stopping
        self.connecting = False  # inside a blocking client bootstrap (see run_kafka)
        self.final_view: dict[str, Any] | None = None
        self.events_topic = self.kafka.topics.events

    # ------------------------------------------------------------------ public views

    def ready(self) -> bool:
        """Readiness: connected, partitions restored, last checkpoint written, no conflict.

        A suite read from a second partition makes it False for ``CONFLICT_UNREADY_S``.
        """
        at = self._conflict_at
        recent = at is not None and time.monotonic() - at < CONFLICT_UNREADY_S
        return self._ready and not recent

    def state_view(self) -> dict[str, Any]:
        """Return the merged ``state_view()`` of the engines this process owns now.

        A suite held by two engines (restored from two partitions' checkpoints) keeps the
        lowest partition's view: a scrape never fails (see :mod:`consumers.kafka.ownership`).
        """
        with self._lock:
            views = [self._workers[p].engine.state_view() for p in sorted(self._workers)]
        return merge_state_views(views, strict=False)

    def assigned_partitions(self) -> list[int]:
        """Input partitions owned now."""
        with self._lock:
            return sorted(self._workers)

    # ------------------------------------------------------------------ setup

    def _open(self) -> None:
        from consumers.kafka.checkpoints import KafkaTopicStore
        from consumers.kafka.topics import ensure_topics

        if self.kafka.create_topics:
            ensure_topics(self.kafka)
        specs = {n: getattr(self.config.sinks, n) for n in ("requests", "dead_letters")}
        kafka_wanted = "kafka" in specs.values() or "kafka" in self.config.sinks.alert_specs
        if self._outputs is None and kafka_wanted:
            self._outputs = KafkaOutputs(self.kafka, self.registry)
        if not self._sinks:
            outputs = self._outputs
            self._sinks["alerts"] = open_alert_sink(
                self.config.sinks,
                append=True,
                kafka=None if outputs is None else (lambda: outputs.sink_for("alerts")),
            )
            for name, spec in specs.items():
                self._sinks[name] = (
                    self._outputs.sink_for(name)
                    if spec == "kafka" and self._outputs is not None
                    else open_sink(spec, append=True)
                )
        if self._store is None:
            if self.kafka.checkpoint_store == "kafka":
                self._store = secured_store(KafkaTopicStore(self.kafka), os.environ)
            else:
                if not self.config.checkpoint.dir:
                    raise ConfigError("kafka.checkpoint_store = 'local' needs checkpoint.dir")
                self._store = secured_store(LocalDirectoryStore(self.config.checkpoint.dir),
                                            os.environ)
        self._consumer = self._make_consumer()
        if self.kafka.fetch_process and self._fetcher is None:
            k = self.kafka
            self._fetcher = FetchProcess(k.client_kwargs(), k.client_id, k.batch_size,
                                         k.poll_timeout_ms)

    def _sync_fetcher(self, consumer: KafkaConsumer) -> None:
        if self._fetcher is not None:
            self._fetcher.follow(consumer, {p: w.offsets for p, w in self._workers.items()})

    def _make_consumer(self) -> KafkaConsumer:
        from kafka import KafkaConsumer
        from kafka.consumer.subscription_state import ConsumerRebalanceListener
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        runner = self

        class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                runner._on_revoked(revoked)

            def on_partitions_assigned(self, assigned: Any) -> None:
                runner._on_assigned(assigned)

            def on_partitions_lost(self, lost: Any) -> None:
                runner._drop(lost)

        k = self.kafka
        consumer = KafkaConsumer(
            **k.client_kwargs(),
            client_id=f"{k.client_id}-consumer",
            group_id=k.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            partition_assignment_strategy=[RangePartitionAssignor],
            max_poll_records=k.batch_size,
            session_timeout_ms=k.session_timeout_ms,
            heartbeat_interval_ms=k.heartbeat_interval_ms,
            max_poll_interval_ms=k.max_poll_interval_ms,
        )
        self._discard_on_revoke = False
        consumer.subscribe(topics=k.topics.input_topics(), listener=_Listener())
        return consumer

    # ------------------------------------------------------------------ rebalance callbacks

    def _require_consumer(self) -> Any:
        if self._consumer is None:
            raise RuntimeError("the Kafka consumer is used before it was opened")
        return self._consumer

    def _require_store(self) -> CheckpointStore:
        if self._store is None:
            raise RuntimeError("the checkpoint store is used before it was opened")
        return self._store

    def _on_assigned(self, assigned: Any) -> None:
        consumer = self._require_consumer()
        store = self._require_store()
        self._joined = True
        by_partition: dict[int, list[TopicPartition]] = {}
        for tp in assigned:
            by_partition.setdefault(tp.partition, []).append(tp)
        with self._lock:
            for p, tps in sorted(by_partition.items()):
                worker = self._workers.get(p)
                if worker is None:
                    data = store.load(partition_key(self.events_topic, p))
                    worker = self._workers[p] = PartitionWorker.start(
                        self.config, p, data, self.kafka.max_record_attempts)
                for tp in tps:
                    if tp.topic in worker.offsets:
                        consumer.seek(tp, worker.offsets[tp.topic])
                    else:
                        consumer.seek_to_beginning(tp)
            self.metrics.assigned(len(self._workers))
            self._sync_fetcher(consumer)
        log.info("partitions assigned", extra={"partitions": sorted(by_partition)})
        if not self._took_over and self._workers and "alerts" in self._sinks:
            # First non-empty assignment: start pushing and take over the alerts a previous
            # process had active (later rebalances do not; see consumers.alertmanager.wiring).
            self._took_over = True
            take_over(self._sinks["alerts"], self.state_view())

    def _on_revoked(self, revoked: Any) -> None:
        if self._discard_on_revoke:
            self._drop(revoked)
            return
        parts = sorted({tp.partition for tp in revoked})
        with self._lock:
            workers = [self._workers[p] for p in parts if p in self._workers]
            try:
                self._checkpoint(workers)
            except (CertmonError, OSError) as exc:  # next owner restores the older checkpoint
                log.warning("final checkpoint failed", extra={"error": repr(exc)})
        self._drop(revoked)
        log.info("partitions revoked", extra={"partitions": parts})

    def _drop(self, tps: Any) -> None:
        with self._lock:
            for tp in tps:
                self._workers.pop(tp.partition, None)
                self._blocked.pop(tp.partition, None)
                self.metrics.forget(tp.topic, tp.partition)
            self.metrics.assigned(len(self._workers))
            if self._consumer is not None:
                self._sync_fetcher(self._consumer)

    # ------------------------------------------------------------------ processing

    def _process(self, records: dict[TopicPartition, Any]) -> None:
        rewound: set[int] = set()
        for tp, recs in records.items():
            worker = self._workers.get(tp.partition)
            if worker is None or tp.partition in rewound:
                continue
            blocked = self._blocked.get(tp.partition)
            fenced_to = None
            if blocked:
                recs, fenced_to = self._fence(worker, tp.topic, recs, blocked)
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
            if self.ops is not None:
                self.ops.events_received(n)
            others = [w.engine for q, w in self._workers.items() if q != tp.partition]
            clash = new_conflicts(worker.engine, known, others) if others else []
            if clash:
                self._on_conflict(worker, clash)
                rewound.add(tp.partition)

    def _on_record_failed(self, worker: PartitionWorker, exc: RecordFailed) -> None:
        """Count and log a processing failure, then rewind the partition to retry it."""
        self.metrics.record_failed(exc.error)
        where = {"topic": exc.topic, "partition": worker.partition, "offset": exc.first,
                 "error": str(exc)}
        if exc.first != exc.last:
            log.warning("processing a batch raised; rewinding to read it one record at a time",
                        extra={**where, "last_offset": exc.last}, exc_info=exc.__cause__)
        elif exc.given_up:
            log.warning("record processing failed for good; it is dead-lettered as "
                        "processing_failed and the partition moves on",
                        extra={**where, "attempts": exc.attempts}, exc_info=exc.__cause__)
        else:
            log.warning("record processing failed; rewinding to retry it",
                        extra={**where, "attempts": exc.attempts,
                               "max_attempts": self.kafka.max_record_attempts},
                        exc_info=exc.__cause__)
        self._rewind_partition(worker)

    def _rewind_partition(self, worker: PartitionWorker) -> None:
        """Reset ``worker`` to its last durable checkpoint and seek its topics back to it."""
        worker.rewind(self.config)
        consumer = self._consumer
        if consumer is not None:
            for tp in consumer.assignment():
                if tp.partition != worker.partition:
                    continue
                if tp.topic in worker.offsets:
                    consumer.seek(tp, worker.offsets[tp.topic])
                else:
                    consumer.seek_to_beginning(tp)
            self._sync_fetcher(consumer)

    def _on_conflict(self, worker: PartitionWorker, suites: list[str]) -> None:
        """Fence ``suites`` off ``worker``'s partition and rewind it to its checkpoint."""
        found = owners({q: w.engine for q, w in self._workers.items()
                        if q != worker.partition})
        blocked = self._blocked.setdefault(worker.partition, {})
        for name in suites:
            blocked[name] = found[name]
            log.warning("suite read from a second partition; its records there are "
                        "dead-lettered", extra={"suite": name, "partition": worker.partition,
                                                "owner_partition": found[name]})
        self._conflict_at = time.monotonic()
        self._rewind_partition(worker)

    def _fence(self, worker: PartitionWorker, topic: str, recs: Any,
               blocked: dict[str, int]) -> tuple[Columns, int | None]:
        """Dead-letter the records of suites another partition owns.

        Returns the other records, and the offset after the last fenced record (None if none).
        """
        if isinstance(recs, Columns):
            offsets, values = recs
        else:
            recs = list(recs)
            offsets, values = [r.offset for r in recs], [r.value for r in recs]
        start = worker.offsets.get(topic, -1)
        new = [i for i, o in enumerate(offsets) if o >= start]
        keep_o, keep_v, fenced = screen([offsets[i] for i in new], [values[i] for i in new],
                                        blocked)
        for offset, raw, suite, owner in fenced:
            self._sinks["dead_letters"].emit(dead_letter_record(
                raw, "suite_partition_conflict",
                f"suite {suite!r} is owned by partition {owner} of this topic",
                topic=topic, partition=worker.partition, offset=offset,
                max_raw_bytes=self.kafka.dead_letter_max_raw_bytes))
            self.metrics.suite_conflict(suite)
            if self.ops is not None:
                self.ops.rejected("suite_partition_conflict")
        if not fenced:
            return Columns(keep_o, keep_v), None
        worker.since_checkpoint += len(fenced)
        return Columns(keep_o, keep_v), fenced[-1][0] + 1

    def _update_lag(self, consumer: KafkaConsumer) -> None:
        fetcher = self._fetcher
        for tp in consumer.assignment():
            worker = self._workers.get(tp.partition)
            high = (consumer.highwater(tp) if fetcher is None
                    else fetcher.highwaters.get((tp.topic, tp.partition)))
            if worker is not None and high is not None and tp.topic in worker.offsets:
                self.metrics.lag(tp.topic, tp.partition, high - worker.offsets[tp.topic])

    # ------------------------------------------------------------------ checkpoints

    def _checkpoint(self, workers: list[PartitionWorker]) -> dict[TopicPartition, int]:
        """Flush sinks, then durably checkpoint ``workers``; return offsets to commit."""
        from kafka.structs import TopicPartition

        due = [w for w in workers if w.since_checkpoint > 0 or w.checkpoint is None]
        if not due:
            return {}
        for sink in self._sinks.values():
            sink.flush()
        store = self._require_store()
        commits: dict[TopicPartition, int] = {}
        for w in due:
            t0 = time.monotonic()
            data = w.encode()
            try:
                store.save(partition_key(self.events_topic, w.partition), data)
            except CertmonError:
                if self.ops is not None:
                    self.ops.checkpoint_failed()
                raise
            w.checkpointed(data)
            if self.ops is not None:
                self.ops.checkpoint_written(time.monotonic() - t0, time.time())
            for topic, offset in w.offsets.items():
                commits[TopicPartition(topic, w.partition)] = offset
        return commits

    def _maybe_checkpoint(self, consumer: KafkaConsumer, force: bool = False) -> None:
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata

        now = time.monotonic()
        k = self.kafka
        with self._lock:
            due = [
                w
                for w in self._workers.values()
                if force or w.due(k.checkpoint_every_records, k.checkpoint_every_seconds, now)
            ]
            try:
                commits = self._checkpoint(due)
            except ProduceError as exc:
                log.warning("output delivery failed; rewinding", extra={"error": str(exc)})
                self._rewind(consumer)
                self._ready = False
                return
            except CheckpointError as exc:
                log.warning("checkpoint failed; will retry", extra={"error": str(exc)})
                for w in due:
                    w.last_checkpoint = now
                self._ready = False
                return
        self._ready = True
        if commits:
            try:
                consumer.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in commits.items()})
            except KafkaError as exc:  # advisory only: the checkpoint is the source of truth
                log.info("offset commit skipped", extra={"error": repr(exc)})

    def _rewind(self, consumer: KafkaConsumer) -> None:
        """Reset every engine to its last durable checkpoint and seek back to it."""
        for w in self._workers.values():
            w.rewind(self.config)
            for tp in consumer.assignment():
                if tp.partition != w.partition:
                    continue
                if tp.topic in w.offsets:
                    consumer.seek(tp, w.offsets[tp.topic])
                else:
                    consumer.seek_to_beginning(tp)
        self._sync_fetcher(consumer)

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
                    self._open()
                except StopRequested:  # SIGTERM during a blocking bootstrap
                    self._close_consumer(clean=False)
                    break
                finally:
                    self.connecting = False
                consumer = self._require_consumer()
                log.info("consumer started", extra={"kafka": self.kafka.redacted()})
                self._connected(True)
                progressed = False
                while not stop.is_set():
                    fetcher = self._fetcher
                    # with a fetch process, poll() only runs the group protocol (all paused):
                    # a blocking poll while joining, else a non-blocking one
                    quick = fetcher is not None and not group_busy(consumer)
                    records = consumer.poll(timeout_ms=0 if quick else self.kafka.poll_timeout_ms)
                    if records:
                        with self._lock:
                            self._process(records)
                    fetched: dict[tuple[str, int], Any] = {}
                    if fetcher is not None:
                        fetched = fetcher.poll(self.kafka.poll_timeout_ms / 1000.0)
                        if fetched:
                            with self._lock:
                                self._process({TopicPartition(t, p): recs
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
                        self._check_startup(started, "no partition assignment from the group")
                    self._update_lag(consumer)
                    self._maybe_checkpoint(consumer)
                self.begin_shutdown()
                self._close_consumer(clean=True)
            except StartupTimeout:
                self._close_consumer(clean=False)
                self.close()
                raise
            except Exception as exc:  # the service stays up: log, back off, reconnect
                self._ready = False
                self._connected(False)
                self.metrics.loop_failed(type(exc).__name__)
                failures += 1
                # a failure that repeats without progress in between is an error, not noise
                log.log(
                    logging.ERROR if failures >= 2 else logging.WARNING,
                    "kafka loop failed; retrying",
                    extra={"error": str(exc) if isinstance(exc, CertmonError) else repr(exc),
                           "retry_in_s": backoff, "consecutive_failures": failures},
                    exc_info=not isinstance(exc, CertmonError),
                )
                self._close_consumer(clean=False)
                if not connected_once:
                    self._check_startup(started, str(exc) if isinstance(exc, CertmonError)
                                        else repr(exc))
                stop.wait(backoff)
                backoff = min(backoff * 2, self.kafka.retry_backoff_max_seconds)
        self._connected(False)
        self.close()

    def _connected(self, up: bool) -> None:
        # certmon_kafka_connected and certmon_up tell the same truth: while the brokers cannot
        # be reached nothing is processed, so the instance is not "up" for its operators
        self.metrics.connected(up)
        if self.ops is not None:
            self.ops.set_up(up)

    def _check_startup(self, started: float, reason: str) -> None:
        """Give up at first start when no broker answered within ``startup_timeout_seconds``."""
        limit = self.kafka.startup_timeout_seconds
        if time.monotonic() - started >= limit:
            servers = ",".join(self.kafka.bootstrap_list())
            raise StartupTimeout(f"cannot reach Kafka at {servers} within {limit:g} s "
                                 f"([kafka] startup_timeout_seconds): {reason}")

    def _close_consumer(self, clean: bool) -> None:
        consumer, self._consumer = self._consumer, None
        fetcher, self._fetcher = self._fetcher, None
        if fetcher is not None:
            fetcher.close()
        if consumer is None:
            return
        try:
            if clean:
                self._maybe_checkpoint(consumer, force=True)
                self.final_view = self.state_view()
            self._discard_on_revoke = True
            with self._lock:
                self._workers.clear()
                self.metrics.assigned(0)
        finally:
            try:
                wait = self._left(self.kafka.request_timeout_ms / 1e3)
                consumer.close(timeout_ms=int(1000 * wait))
            except Exception as exc:
                log.info("consumer close failed", extra={"error": repr(exc)})

    def _left(self, default: float) -> float:
        """Seconds a blocking step may take: ``default``, or what the shutdown budget leaves."""
        if self._deadline is None:
            return default
        return max(0.1, min(default, self._deadline - time.monotonic()))

    def begin_shutdown(self) -> None:
        """Start the shutdown budget: later flushes, saves and closes share it."""
        if self._deadline is not None:
            return
        budget = self.kafka.shutdown_timeout_seconds
        self._deadline = time.monotonic() + budget
        if self._outputs is not None:
            self._outputs.bound(budget / 3)
        if self._store is not None and hasattr(self._store, "timeout"):
            self._store.timeout = budget / 3

    def close(self) -> None:
        """Flush and close sinks, the producer and the checkpoint store."""
        self.begin_shutdown()
        for sink in self._sinks.values():
            try:
                sink.close()
            except Exception as exc:
                log.warning("sink close failed", extra={"error": repr(exc)})
        if self._outputs is not None:
            try:
                self._outputs.close(timeout=self._left(10.0))
            except Exception as exc:
                log.warning("producer close failed", extra={"error": repr(exc)})
        close = getattr(self._store, "close", None)
        if callable(close):
            try:
                close(timeout=self._left(10.0))
            except TypeError:  # a store without a timeout
                close()
        log.info("stopped")


def run_kafka(
    config: CertmonConfig,
    registry: CollectorRegistry,
    stop_event: threading.Event,
    started: Callable[[KafkaRunner], None] | None = None,
) -> dict[str, Any] | None:
    """Run the Kafka source until ``stop_event`` is set (the ``certmon run`` entry point).

    Registers the operational metrics, the scrape-time state collector and the Kafka metrics
    on ``registry``, serves them (with ``/healthz`` and ``/readyz``) on ``[metrics]`` if
    enabled, and logs JSON lines to stderr unless logging is already configured.
    ``started`` is called with the runner before it connects: a signal handler that finds
    ``runner.connecting`` true may raise :class:`StopRequested` to end a blocking bootstrap.

    Returns
    -------
    dict or None
        The merged state view of the partitions owned at the stop (after their final
        checkpoint), for ``--state-out``; None if the stop came before any ownership.

    Raises
    ------
    StartupTimeout
        No broker answered within ``[kafka] startup_timeout_seconds`` at first start.
    """
    from consumers.kafka.logs import configure_json_logging
    from monitor.metrics import (
        OperationalMetrics,
        StateCollector,
        limits_from_config,
        serve_metrics,
        stop_metrics,
    )

    configure_json_logging()
    ops = OperationalMetrics(registry)
    runner = KafkaRunner(config, registry, ops=ops)
    if started is not None:
        started(runner)
    registry.register(StateCollector(runner.state_view))
    server = None
    if config.metrics.enabled:
        server = serve_metrics(registry, config.metrics.host, config.metrics.port, runner.ready,
                               limits_from_config(config.metrics, dict(os.environ)))
        log.info("metrics served", extra={"port": server[0].server_port})
    try:  # certmon_up turns 1 once the consumer reaches the brokers (KafkaRunner._connected)
        runner.run(stop_event)
    finally:
        ops.set_up(False)
        if server is not None:
            stop_metrics(*server)
    return runner.final_view
