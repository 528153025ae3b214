"""The consumer-group rebalance callbacks of the Kafka runner (a mixin of ``KafkaRunner``).

- **assigned**: each partition is restored from its checkpoint and its topics are sought to
  the checkpoint's offsets; a partition whose checkpoint cannot be restored is held
  (:mod:`consumers.kafka.held`) and the others run. The first non-empty assignment takes over
  the alerts a previous process had active.
- **revoked**: a final checkpoint of the revoked partitions, then their engines are dropped;
  **lost** (evicted from the group): dropped without writing.
- **fenced**: the group generation of the last assignment is kept; once the member's
  generation differs (kafka-python's heartbeat thread resets it when the broker answers that
  the member is unknown: evicted after a session timeout or a too long poll interval), or no
  heartbeat was answered within the session timeout (the broker may have evicted it, e.g. a
  process stopped for longer, before the heartbeat thread could learn it; see
  :func:`lease_expired`), no checkpoint is
  written (:meth:`RebalanceCallbacks._fenced`), so an evicted member cannot overwrite the
  checkpoints of the partitions' new owner.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from consumers.alertmanager.wiring import take_over
from consumers.kafka.partitions import PartitionWorker, write_checkpoints
from consumers.kafka.state import partition_key
from monitor.errors import CertmonError

if TYPE_CHECKING:
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    from consumers.kafka.fetcher import FetchProcess
    from consumers.kafka.held import HeldPartitions
    from consumers.kafka.metrics import KafkaMetrics
    from consumers.kafka.ownership import SuiteFence
    from monitor.checkpoint import CheckpointStore
    from monitor.config import CertmonConfig
    from monitor.config.kafka import KafkaConfig
    from monitor.metrics import OperationalMetrics
    from monitor.sinks import Sink

log = logging.getLogger("certmon.kafka")

__all__ = ["RebalanceCallbacks", "lease_expired", "member_generation"]


def member_generation(consumer: Any) -> int | None:
    """Return the consumer's group generation id (-1 once evicted), None if not known.

    kafka-python has no public accessor that works while the group is not stable, so the
    coordinator's generation is read; any other consumer (a test double) gives None.

    Examples
    --------
    >>> member_generation(object()) is None
    True
    """
    generation = getattr(getattr(consumer, "_coordinator", None), "_generation", None)
    gid = getattr(generation, "generation_id", None)
    return gid if isinstance(gid, int) else None


def lease_expired(consumer: Any, joined_at: float, now: float | None = None) -> bool:
    """Whether the member may have been evicted: no heartbeat answered for half a session.

    The broker evicts a member ``session_timeout_ms`` after the last heartbeat it received;
    a healthy member hears an answer every ``heartbeat_interval_ms`` (at most a third of the
    session), so half a session since the last answer, or since ``joined_at`` (monotonic
    time of the last assignment, itself an answer), leaves the other half as a safety margin
    for the write that follows the check. kafka-python's own ``last_reset`` is not used: it
    is refreshed when the coordinator is rediscovered, also by a member already evicted.
    False when not known (another client, a test double).

    Examples
    --------
    >>> lease_expired(object(), 0.0)
    False
    """
    coordinator = getattr(consumer, "_coordinator", None)
    try:
        hb: Any = coordinator.heartbeat  # type: ignore[union-attr]
        last = max(float(hb.last_receive), joined_at)
        half = hb.config["session_timeout_ms"] / 2000.0
    except (AttributeError, KeyError, TypeError):
        return False
    t = time.monotonic() if now is None else now
    return bool(t - last > half)


class RebalanceCallbacks:
    """What the group member does when partitions are assigned, revoked or lost.

    The attributes are those of :class:`consumers.kafka.runner.KafkaRunner`, which owns them.
    """

    config: CertmonConfig
    kafka: KafkaConfig
    ops: OperationalMetrics | None
    metrics: KafkaMetrics
    held: HeldPartitions
    events_topic: str
    _store: CheckpointStore | None
    _sinks: dict[str, Sink]
    _consumer: KafkaConsumer | None
    _workers: dict[int, PartitionWorker]
    _fetcher: FetchProcess | None
    _lock: threading.RLock
    _fence: SuiteFence
    _joined: bool
    _revoked_at: float | None
    _took_over: bool
    _discard_on_revoke: bool
    _generation: int | None = None  # the group generation of the last assignment
    _joined_at: float = 0.0  # monotonic time of the last assignment
    _fenced_warned: int | None = None
    _engine_swaps: int = 0  # engines added, dropped or rewound: part of state_version()
    _view_fell_back: bool = False  # the last scrape got an old view (see state_version)

    def state_view(self, shown_only: bool = False) -> dict[str, Any]:
        """Return the merged state view (implemented by ``KafkaRunner``)."""
        raise NotImplementedError

    def state_version(self) -> Hashable:
        """Return the version of :meth:`state_view`'s document (changes whenever it does).

        The engines added, dropped or rewound so far and each owned engine's count of applied
        events (every change of an engine's state is the application of an event, counted
        before it is applied); a fresh object (equal to nothing) after a view that fell back to
        the last one, or while the engines change under the read. For
        ``StateCollector(version_fn=...)``: an idle instance's scrapes reuse one rendering.
        """
        if self._view_fell_back:
            return object()
        try:
            return self._engine_swaps, tuple(
                (p, w.engine.events_in) for p, w in sorted(self._workers.items()))
        except RuntimeError:  # the assignment changed during the read
            return object()

    def _fenced(self, consumer: Any) -> bool:
        """Whether this member left the generation of its assignment (then: write nothing)."""
        if self._joined_at == 0.0 or not self._workers:  # nothing to write (also while a
            return False  # rebalance is joining: the eager protocol revoked everything)
        now = member_generation(consumer)
        fenced = ((self._generation is not None and now is not None and now != self._generation)
                  or lease_expired(consumer, self._joined_at))
        if fenced and self._fenced_warned != self._generation:
            self._fenced_warned = self._generation
            log.warning("maybe no longer a member of the group generation of the assignment "
                        "(evicted, or no heartbeat answered for half a session): no checkpoint "
                        "is written meanwhile", extra={"generation": self._generation, "now": now})
        return fenced

    def _sync_fetcher(self, consumer: KafkaConsumer) -> None:
        if self._fetcher is not None:
            self._fetcher.follow(consumer, {p: w.offsets for p, w in self._workers.items()})

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
        self._generation = member_generation(consumer)
        self._joined_at = time.monotonic()
        self._joined = True
        self._revoked_at = None
        by_partition: dict[int, list[TopicPartition]] = {}
        for tp in assigned:
            by_partition.setdefault(tp.partition, []).append(tp)
        with self._lock:
            for p, tps in sorted(by_partition.items()):
                self._restore_partition(consumer, p, tps)
            self.metrics.assigned(len(self._workers))
            self._sync_fetcher(consumer)
        log.info("partitions assigned", extra={"partitions": sorted(by_partition),
                                               "held": sorted(self.held.reasons())})
        if not self._took_over and self._workers and "alerts" in self._sinks:
            # First non-empty assignment: start pushing and take over the alerts a previous
            # process had active (later rebalances do not; see consumers.alertmanager.wiring).
            self._took_over = True
            take_over(self._sinks["alerts"], self.state_view())

    def _restore_partition(self, consumer: Any, p: int, tps: list[TopicPartition]) -> bool:
        """Restore partition ``p`` and seek ``tps``; hold it (paused) if that raises."""
        worker = self._workers.get(p)
        if worker is None:
            try:
                worker = PartitionWorker.open(
                    self.config, p, self._require_store(), partition_key(self.events_topic, p),
                    self.kafka.checkpoint_max_bytes, self.kafka.max_record_attempts)
            except Exception as exc:  # this partition only (see consumers.kafka.held)
                self.held.hold(p, tps, exc)
                consumer.pause(*tps)
                return False
            self._workers[p] = worker
            self._engine_swaps += 1
        if self.held.release(p):
            log.info("held partition restored", extra={"partition": p})
            if self._fetcher is None:
                consumer.resume(*tps)
        worker.seek(consumer, tps)
        self.metrics.suites_seen(worker.engine.suites)  # restored suites: counters at 0
        return True

    def _retry_held(self, consumer: KafkaConsumer) -> None:
        """Try again to restore the held partitions whose retry is due."""
        due = self.held.due()
        if not due:
            return
        with self._lock:
            restored = [p for p, tps in due if self._restore_partition(consumer, p, tps)]
            if restored:
                self.metrics.assigned(len(self._workers))
                self._sync_fetcher(consumer)

    def _on_revoked(self, revoked: Any) -> None:
        self._revoked_at = time.monotonic()
        consumer = self._consumer
        if self._discard_on_revoke or (consumer is not None and self._fenced(consumer)):
            self._drop(revoked)  # (fenced: evicted, the new owner writes these partitions)
            return
        parts = sorted({tp.partition for tp in revoked})
        with self._lock:
            workers = [self._workers[p] for p in parts if p in self._workers]
            try:
                write_checkpoints(workers, self._sinks.values(), self.ops)
            except (CertmonError, OSError) as exc:  # next owner restores the older checkpoint
                log.warning("final checkpoint failed", extra={"error": repr(exc)})
        self._drop(revoked)
        log.info("partitions revoked", extra={"partitions": parts})

    def _drop(self, tps: Any) -> None:
        with self._lock:
            for tp in tps:
                self._workers.pop(tp.partition, None)
                self._engine_swaps += 1
                self.held.release(tp.partition)
                self._fence.forget(tp.partition)
                self.metrics.forget(tp.topic, tp.partition)
            self.metrics.assigned(len(self._workers))
            if self._consumer is not None:
                self._sync_fetcher(self._consumer)
