"""Regroup the input by suite through an internal topic (``[kafka] repartition = true``).

A suite's certificate needs one engine to see all its events, and the engines are per input
partition. Producers do not agree on partitions: librdkafka's default partitioner (crc32)
and the Java / kafka-python one (murmur2) send one key to different partitions, and an
unkeyed producer spreads a suite over all of them. Like Kafka Streams' repartition topics
and quix-streams' ``group_by``, a stage (:class:`Repartitioner`, a thread of the certmon
process, in a consumer group of its own, ``<group_id>.repartition``) reads the input topics
and writes every record unchanged to ``topics.repartition``, keyed by its suite, on the
partition :func:`suite_partition` gives it; the engines' consumer group reads that topic
only. Any producer, keyed or not, then reaches the suite's one engine.

Exactly once: each poll batch is written in one Kafka transaction together with the stage's
input offsets (``send_offsets_to_transaction``), and the engines read with
``isolation_level = "read_committed"``, so a record is in the repartition topic once even if
the stage fails or is fenced mid-batch (the broker fences a zombie through the group
generation, KIP-447); the engines' own checkpoints and offsets are unchanged. Order is kept
per input partition; a suite's judge and label events from two input partitions may be
interleaved differently than they were produced (as with separate judge / label topics).

A record without a readable ``suite`` is written with an empty key (one partition); its
engine dead-letters it with its reason (the dead letter's source is then the repartition
topic). The cost is one more write and read of every record; see
``benchmarks/kafka_repartition_cost.py`` for a measurement.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from consumers.kafka.ownership import record_suite

if TYPE_CHECKING:
    from monitor.config.kafka import KafkaConfig

log = logging.getLogger("certmon.kafka")

__all__ = ["Repartitioner", "repartition_key", "suite_partition", "transactional_id"]

CLOSE_S = 1.0  # the stage's producer close, then its consumer close, within 2 * CLOSE_S
# a transaction left open by a stage that died on partitions nobody reclaims with its id is
# aborted by the broker after this long (as Kafka Streams' exactly-once default, 10 s)
TRANSACTION_TIMEOUT_MS = 10_000


def repartition_key(raw: bytes | None) -> bytes:
    """Return the record key of an input record in the repartition topic (its suite).

    Examples
    --------
    >>> repartition_key(b'{"suite": "qa", "x": 1}'), repartition_key(b"not json")
    (b'qa', b'')
    """
    suite = record_suite(raw)
    return suite.encode() if suite is not None else b""


def suite_partition(key: bytes, partitions: int) -> int:
    """Return certmon's partition of a suite key: murmur2, as Java / kafka-python for a key.

    Examples
    --------
    >>> suite_partition(b"suite-1", 6), suite_partition(b"suite-1", 6) == suite_partition(
    ...     b"suite-1", 6)
    (2, True)
    """
    from kafka.partitioner.default import murmur2

    return (int(murmur2(key)) & 0x7FFFFFFF) % partitions


class Repartitioner:
    """The repartition stage: input topics -> ``topics.repartition``, in transactions.

    Parameters
    ----------
    config : KafkaConfig
        Connection settings, ``group_id`` (the stage's group is ``<group_id>.repartition``),
        the input topics and ``topics.repartition``.

    Notes
    -----
    Guarantee: every input record is in the repartition topic exactly once for a
    ``read_committed`` reader, on ``suite_partition(suite, partitions)``, in its input
    partition's order. Failures (brokers unreachable, fenced) abort the open transaction and
    restart the stage with backoff from its committed offsets.
    """

    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.forwarded = 0  # records committed to the repartition topic by this process
        self.failures = 0
        # False from a failure until the restarted stage holds its partitions again: the
        # engines read nothing new meanwhile (readiness follows it)
        self.healthy = True
        self._stop = threading.Event()
        self._started = threading.Event()  # the first session has joined its group
        self._thread: threading.Thread | None = None

    def start(self, wait_s: float = 0.0) -> None:
        """Run the stage in a daemon thread (idempotent); wait up to ``wait_s`` s for it.

        ``wait_s`` bounds the wait for the stage group's first assignment. The runner
        waits before it creates the engines' consumer: a group join of the engines that
        overlapped the stage's start-up stalled (kafka-python, seen on a loaded machine: no
        assignment until the runner's 20 s rebalance limit).
        """
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="certmon-repartition",
                                            daemon=True)
            self._thread.start()
        self._started.wait(wait_s)

    def request_stop(self) -> None:
        """Ask the stage to stop after its batch in flight (returns at once)."""
        self._stop.set()

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the stage to stop and wait up to ``timeout`` s (its batch ends first)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        backoff = 0.5
        while not self._stop.is_set():
            try:
                self._session()
                backoff = 0.5
            except Exception as exc:  # log, back off, start again from committed offsets
                self.failures += 1
                self.healthy = False
                log.warning("repartition stage failed; restarting",
                            extra={"error": repr(exc)[:300], "retry_in_s": backoff})
                self._stop.wait(backoff)
                backoff = min(backoff * 2, self.config.retry_backoff_max_seconds)

    def _session(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer
        from kafka.structs import OffsetAndMetadata

        k = self.config
        consumer = KafkaConsumer(
            **k.client_kwargs(), client_id=f"{k.client_id}-repartition",
            group_id=f"{k.group_id}.repartition", enable_auto_commit=False,
            auto_offset_reset="earliest", isolation_level="read_committed",
            max_poll_records=k.batch_size, session_timeout_ms=k.session_timeout_ms,
            heartbeat_interval_ms=k.heartbeat_interval_ms)
        txn = _Transactions(k)

        class _Revoked(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                txn.close()  # before the group rebalances: the next owner reuses the id

            def on_partitions_assigned(self, assigned: Any) -> None:
                pass

        try:
            consumer.subscribe(topics=k.topics.input_topics(), listener=_Revoked())
            target = k.topics.repartition
            parts = consumer.partitions_for_topic(target)
            if not parts:
                raise RuntimeError(f"repartition topic {target!r} does not exist")
            n = len(parts)
            log.info("repartition stage started", extra={"topic": target, "partitions": n})
            while not self._stop.is_set():
                batches = consumer.poll(timeout_ms=k.poll_timeout_ms)
                if consumer.assignment():
                    self._started.set()
                    self.healthy = True
                if not batches:
                    continue
                producer = txn.producer_for(consumer.assignment())
                producer.begin_transaction()
                try:
                    count = 0
                    offsets = {}
                    for tp, recs in batches.items():
                        for r in recs:
                            key = repartition_key(r.value)
                            producer.send(target, key=key, value=r.value,
                                          partition=suite_partition(key, n))
                        count += len(recs)
                        offsets[tp] = OffsetAndMetadata(recs[-1].offset + 1, "", -1)
                    meta = consumer.group_metadata()
                    if meta.generation_id is None or meta.generation_id < 0:
                        # left the group (evicted): the broker does not check a transactional
                        # commit without a generation, so a zombie's batch is aborted here
                        raise RuntimeError("repartition stage is not in a group generation; "
                                           "batch aborted")
                    producer.send_offsets_to_transaction(offsets, meta)
                    producer.commit_transaction()
                except BaseException:
                    _abort(producer)
                    raise
                self.forwarded += count
        finally:
            t0 = time.monotonic()
            txn.close()
            try:
                left = 2 * CLOSE_S - (time.monotonic() - t0)
                consumer.close(timeout_ms=max(100, int(1000 * left)))
            except Exception as exc:
                log.info("repartition consumer close failed", extra={"error": repr(exc)})


def transactional_id(group_id: str, assignment: Any) -> str:
    """Return the stage's transactional id for an assignment: its first input partition's.

    Members of one generation own disjoint partitions, so no two live members share an id;
    an instance restarted after ``kill -9`` that is given the same partitions reuses its id,
    and ``init_transactions`` then aborts the transaction the dead one left open at once
    (else ``read_committed`` readers would wait for the broker's transaction timeout).

    Examples
    --------
    >>> from kafka.structs import TopicPartition as TP
    >>> transactional_id("g", {TP("ev", 4), TP("ev", 1), TP("labels", 0)})
    'g.repartition.ev-1'
    """
    first = min((tp.topic, tp.partition) for tp in assignment)
    return f"{group_id}.repartition.{first[0]}-{first[1]}"


class _Transactions:
    """The stage's transactional producer, whose id follows the assignment."""

    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.producer: Any = None
        self.tid: str | None = None

    def producer_for(self, assignment: Any) -> Any:
        """Return the producer of ``assignment``'s id (a new one after a rebalance)."""
        from consumers.kafka.sinks import create_producer

        tid = transactional_id(self.config.group_id, assignment)
        if self.producer is None or tid != self.tid:
            self.close()
            k = self.config
            self.producer = create_producer(k, client_id=f"{k.client_id}-repartition",
                                            transactional_id=tid,
                                            transaction_timeout_ms=TRANSACTION_TIMEOUT_MS)
            self.tid = tid
            self.producer.init_transactions()  # fences and aborts this id's last owner
        return self.producer

    def close(self) -> None:
        """Close the producer (an open transaction is aborted by the broker's fencing)."""
        producer, self.producer, self.tid = self.producer, None, None
        if producer is not None:
            try:
                producer.close(timeout=CLOSE_S)
            except Exception as exc:
                log.info("repartition producer close failed", extra={"error": repr(exc)})


def _abort(producer: Any) -> None:
    try:
        producer.abort_transaction()
    except Exception as exc:  # the session restarts anyway
        log.info("repartition transaction abort failed", extra={"error": repr(exc)})
