"""The checkpoint step of the Kafka runner (a mixin of ``KafkaRunner``).

Every ``checkpoint_every_records`` records or ``checkpoint_every_seconds`` (and, forced, on
stop and before a loop failure drops the engines) the runner flushes every sink, writes the
due partitions' checkpoints durably (:func:`consumers.kafka.partitions.write_checkpoints`),
then commits their offsets to Kafka, advisory only (lag tools see progress; the checkpoint
is the source of truth). If a sink cannot deliver, every partition rewinds to its last
checkpoint; if the store refuses a write, the partitions retry at their next due time. A
member that may have left the generation of its assignment writes nothing
(:meth:`consumers.kafka.rebalance.RebalanceCallbacks._fenced`).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from consumers.kafka.partitions import PartitionWorker, write_checkpoints
from consumers.kafka.sinks import FLUSH_TIMEOUT_S, KafkaOutputs, ProduceError
from monitor.errors import CheckpointError

if TYPE_CHECKING:
    from kafka import KafkaConsumer

    from consumers.kafka.deadlines import ShutdownBudget
    from consumers.kafka.fetcher import FetchProcess
    from consumers.kafka.read_positions import ReadPositions
    from monitor.config import CertmonConfig
    from monitor.config.kafka import KafkaConfig
    from monitor.metrics import OperationalMetrics
    from monitor.sinks import Sink

log = logging.getLogger("certmon.kafka")

# how long the outputs' flush may wait in the checkpoint before a loop failure: in an outage a
# pending output cannot be delivered, and waiting FLUSH_TIMEOUT_S would only delay the failure
SAVE_BEFORE_DROP_FLUSH_S = 2.0

__all__ = ["CheckpointStep"]


class CheckpointStep:
    """How the Kafka runner writes its checkpoints; the attributes are those of ``KafkaRunner``.

    Notes
    -----
    Guarantee: a checkpoint covers exactly the records its offsets cover. Nothing is written
    after a failure inside processing (``_mid_batch``) nor by a fenced member, and the offsets
    committed to Kafka are never read back by certmon.

    Examples
    --------
    >>> CheckpointStep.__name__
    'CheckpointStep'
    """

    config: CertmonConfig
    kafka: KafkaConfig
    ops: OperationalMetrics | None
    _consumer: KafkaConsumer | None
    _workers: dict[int, PartitionWorker]
    _sinks: dict[str, Sink]
    _outputs: KafkaOutputs | None
    _fetcher: FetchProcess | None
    _read: ReadPositions
    _advised: dict[tuple[str, int], int]  # the last offsets committed (advisory)
    _lock: threading.RLock
    _budget: ShutdownBudget
    _ready: bool
    _ckpt_failed: bool  # the last checkpoint attempt failed
    _mid_batch: bool  # inside KafkaRunner._process (see KafkaRunner._process_batch)
    _engine_swaps: int

    def _fenced(self, consumer: Any) -> bool:
        raise NotImplementedError  # RebalanceCallbacks._fenced

    def _sync_fetcher(self, consumer: KafkaConsumer) -> None:
        raise NotImplementedError  # RebalanceCallbacks._sync_fetcher

    def _maybe_checkpoint(self, consumer: KafkaConsumer, force: bool = False,
                          commit: bool = True) -> None:
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata, TopicPartition

        now = time.monotonic()
        k = self.kafka
        if self._fenced(consumer):  # evicted: the partitions' new owner writes them now
            self._ready = False
            return
        with self._lock:
            due = [
                w
                for w in self._workers.values()
                if force or w.due(k.checkpoint_every_records, k.checkpoint_every_seconds, now)
            ]
            try:
                commits = write_checkpoints(due, self._sinks.values(), self.ops)
            except ProduceError as exc:
                log.warning("output delivery failed; rewinding", extra={"error": str(exc)})
                self._rewind(consumer)
                self._ready, self._ckpt_failed = False, True
                return
            except CheckpointError as exc:
                log.warning("checkpoint failed; will retry", extra={"error": str(exc)})
                for w in due:
                    w.last_checkpoint = now
                self._ready, self._ckpt_failed = False, True
                return
        if commits:
            self._ckpt_failed = False
        self._ready = not self._ckpt_failed  # after a failure: until a checkpoint is written
        if not commit:
            return
        with self._lock:
            advice = self._advice(commits)
        if advice:
            try:
                wait = self._budget.left(self._commit_timeout_s())
                consumer.commit({TopicPartition(t, p): OffsetAndMetadata(o, "", -1)
                                 for (t, p), o in advice.items()}, timeout_ms=int(1000 * wait))
                self._advised.update(advice)
            except KafkaError as exc:  # advisory only: the checkpoint is the source of truth
                log.info("offset commit skipped", extra={"error": repr(exc)})

    def _advice(self, commits: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """Return the offsets to commit (advisory), each at the position reading reached.

        Those of the checkpoints just written, and of every checkpointed partition whose
        reading moved past offsets holding no record (a transaction's commit marker read
        after the last checkpoint), at :meth:`ReadPositions.consumed_to
        <consumers.kafka.read_positions.ReadPositions.consumed_to>`: lag tools
        (kafka-consumer-groups) show 0 when certmon is caught up.
        """
        read = self._read if self._fetcher is None else self._fetcher.read
        advice = {(t, p): read.consumed_to(t, p, o) for (t, p), o in commits.items()}
        for w in self._workers.values():
            if w.durable and w.since_checkpoint == 0:  # its offsets are checkpointed
                for t, o in w.offsets.items():
                    key = (t, w.partition)
                    reached = read.consumed_to(t, w.partition, o)
                    if reached > o and self._advised.get(key) != reached:
                        advice.setdefault(key, reached)
        return advice

    def _commit_timeout_s(self) -> float:
        """Return how long an offset commit may wait.

        ``request_timeout_ms``; while stopping, a third of ``shutdown_timeout_seconds``
        (the commit is advisory: the closes after it keep their share of the budget).
        """
        wait = self.kafka.request_timeout_ms / 1e3
        if self._budget.deadline is not None:
            wait = min(wait, self.kafka.shutdown_timeout_seconds / 3)
        return wait

    def _rewind(self, consumer: KafkaConsumer) -> None:
        """Reset every engine to its last durable checkpoint and seek back to it."""
        for w in self._workers.values():
            w.rewind(self.config)
            w.seek(consumer)
        self._engine_swaps += 1
        self._sync_fetcher(consumer)

    def _save_before_drop(self) -> None:
        """Checkpoint the engines' unsaved work before a loop failure drops them.

        Only with a store that does not need the brokers (``checkpoint_store = "local"``):
        the checkpoint topic is unreachable in the outages that fail the loop. Nothing is
        written after a failure inside processing (``_mid_batch``), nor by a member that
        may have left its generation (:meth:`_maybe_checkpoint` checks it), and no offset is
        committed (advisory only; the brokers may be gone). The outputs are flushed first as
        for any checkpoint: if they cannot be delivered nothing is saved and the records are
        read again from the previous checkpoint (exact, the work redone).
        """
        consumer = self._consumer
        if consumer is None or self._mid_batch or self.kafka.checkpoint_store != "local":
            return
        outputs = self._outputs
        stopping = self._budget.deadline is not None
        if outputs is not None:  # an undeliverable output fails the save fast, not in 15 s
            outputs.bound(SAVE_BEFORE_DROP_FLUSH_S, self._budget.left if stopping else None)
        try:
            self._maybe_checkpoint(consumer, force=True, commit=False)
        except Exception as exc:  # the loop failed already; the previous checkpoint stands
            log.warning("checkpoint before reconnecting failed", extra={"error": repr(exc)})
        else:
            if not self._ckpt_failed:
                log.info("checkpoint written before reconnecting")
        finally:
            if outputs is not None:  # back to the usual bound, or the stop's share of it if a
                # stop began meanwhile (begin_shutdown bounded them while this save ran)
                stopping = self._budget.deadline is not None
                budget = self.kafka.shutdown_timeout_seconds / 3
                outputs.bound(budget if stopping else FLUSH_TIMEOUT_S,
                              self._budget.left if stopping else None)
