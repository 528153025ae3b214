"""One input partition's engine, offsets and checkpoint (used by the Kafka runner).

A :class:`PartitionWorker` owns the engine of partition ``p`` (of the events topic and, when
configured, of the co-partitioned judge/label topics), the next offset of every topic it has
read, and the writer of its checkpoints (:class:`monitor.incremental.IncrementalCheckpointer`:
one document per suite, only the changed suites rewritten), which keeps the last durable
checkpoint's documents so the worker can rewind to it without reading the store.

Checkpoint position (stored in the checkpoint's ``position``)::

    {"kind": "kafka", "partition": p, "offsets": {topic: next offset, ...}}
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from consumers.kafka.retries import PROCESSING_FAILED, RecordRetries
from consumers.kafka.sinks import DEFAULT_DEAD_LETTER_RAW_BYTES, dead_letter_record
from monitor.checkpoint import decode_checkpoint, encode_checkpoint
from monitor.errors import CertmonError
from monitor.incremental import IncrementalCheckpointer, SaveStats

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from monitor.checkpoint import CheckpointStore, Position
    from monitor.config import CertmonConfig
    from monitor.engine import Engine, ProcessResult
    from monitor.metrics import OperationalMetrics
    from monitor.sinks import Sink

__all__ = ["Columns", "PartitionWorker", "process_records", "write_checkpoints"]


class Columns(NamedTuple):
    """One partition batch as parallel lists (what the fetch process delivers)."""

    offsets: list[int]
    values: list[bytes | None]


def _restored(config: CertmonConfig, snapshot: dict[str, Any],
              position: Position) -> tuple[Engine, dict[str, int]]:
    from monitor.engine import Engine

    offsets = {str(t): int(o) for t, o in position["offsets"].items()}
    return Engine.restore(config, snapshot), offsets


@dataclass
class PartitionWorker:
    """State owned for one input partition.

    Attributes
    ----------
    partition : int
        Partition number (the same on every co-partitioned input topic).
    engine : Engine
        The engine fed with this partition's records only.
    offsets : dict of str to int
        Next offset to read, per topic; a topic not in it is read from its beginning.
    writer : IncrementalCheckpointer or None
        Writes this partition's checkpoints (None: built by :meth:`start` from bytes).
    durable : bool
        Whether a durable checkpoint exists (loaded or written).
    retries : RecordRetries
        Failed processing attempts of this partition's records (kept across rewinds).
    """

    partition: int
    engine: Engine
    offsets: dict[str, int]
    writer: IncrementalCheckpointer | None
    durable: bool
    since_checkpoint: int = 0
    last_checkpoint: float = field(default_factory=time.monotonic)
    legacy: bytes | None = None  # the single-document checkpoint given to start()
    retries: RecordRetries = field(default_factory=RecordRetries)

    @classmethod
    def open(cls, config: CertmonConfig, partition: int, store: CheckpointStore, key: str,
             max_part_bytes: int | None = None, max_attempts: int = 3) -> PartitionWorker:
        """Build the worker from the checkpoint of ``key`` in ``store`` (empty without one).

        ``max_attempts`` bounds the processing attempts of a record (see
        :mod:`consumers.kafka.retries`).

        Raises
        ------
        CheckpointError
            The checkpoint is corrupt, incomplete, of an unknown version, or for another
            configuration.
        """
        from monitor.engine import Engine

        writer = IncrementalCheckpointer(store, key, max_part_bytes=max_part_bytes,
                                         keep_documents=True)
        retries = RecordRetries(max_attempts)
        ckpt = writer.load()
        if ckpt is None:
            return cls(partition, Engine(config), {}, writer, False, retries=retries)
        engine, offsets = _restored(config, ckpt.snapshot, ckpt.position)
        return cls(partition, engine, offsets, writer, True, retries=retries)

    @classmethod
    def start(cls, config: CertmonConfig, partition: int, data: bytes | None,
              max_attempts: int = 3) -> PartitionWorker:  # fmt: skip
        """Build a worker without a store from a single-document checkpoint (or empty).

        ``max_attempts`` bounds the processing attempts of a record (see
        :mod:`consumers.kafka.retries`).

        Raises
        ------
        CheckpointError
            The checkpoint is corrupt, of an unknown version, or for another configuration.
        """
        if data is None:
            from monitor.engine import Engine

            return cls(partition, Engine(config), {}, None, False,
                       retries=RecordRetries(max_attempts))
        engine, offsets = _restored(config, *decode_checkpoint(data))
        return cls(partition, engine, offsets, None, True, legacy=data,
                   retries=RecordRetries(max_attempts))

    def rewind(self, config: CertmonConfig) -> None:
        """Return to the last durable checkpoint (engine and offsets)."""
        from monitor.engine import Engine

        ckpt = self.writer.durable() if self.writer is not None else None
        if ckpt is not None:
            self.engine, self.offsets = _restored(config, ckpt.snapshot, ckpt.position)
        elif self.writer is None and self.legacy is not None:
            self.engine, self.offsets = _restored(config, *decode_checkpoint(self.legacy))
        else:
            self.engine, self.offsets = Engine(config), {}
        self.since_checkpoint = 0

    def position(self) -> Position:
        """Return the checkpoint position of the offsets read so far."""
        return {"kind": "kafka", "partition": self.partition, "offsets": dict(self.offsets)}

    def seek(self, consumer: Any, tps: Iterable[Any] | None = None) -> None:
        """Seek ``consumer`` to this worker's offsets (a topic it has not read: its beginning).

        ``tps``: the topic-partitions to seek (default: the consumer's assigned ones of this
        partition).
        """
        for tp in consumer.assignment() if tps is None else tps:
            if tp.partition != self.partition:
                continue
            if tp.topic in self.offsets:
                consumer.seek(tp, self.offsets[tp.topic])
            else:
                consumer.seek_to_beginning(tp)

    def encode(self) -> bytes:
        """Serialize the engine and offsets as one single-document checkpoint."""
        return encode_checkpoint(self.engine.snapshot(), self.position())

    def save(self) -> SaveStats:
        """Write a checkpoint through :attr:`writer` (only the changed suites are encoded).

        Once it is durable, the retry counts of the records it passed are forgotten.

        Raises
        ------
        CheckpointError
            The write failed or a suite's document is too large; the worker is unchanged.
        """
        if self.writer is None:
            raise RuntimeError("this worker has no checkpoint store (use PartitionWorker.open)")
        stats = self.writer.save(self.engine, self.position())
        self.durable, self.since_checkpoint, self.last_checkpoint = True, 0, time.monotonic()
        self.retries.passed(self.offsets)
        return stats

    def due(self, every_records: int, every_seconds: float, now: float) -> bool:
        """Whether a periodic checkpoint is due (records or time since the last one)."""
        return self.since_checkpoint >= every_records or (
            self.since_checkpoint > 0 and now - self.last_checkpoint >= every_seconds
        )


def process_records(
    worker: PartitionWorker,
    topic: str,
    records: Iterable[Any] | Columns,
    sinks: Mapping[str, Sink],
    ops: OperationalMetrics | None = None,
    *,
    max_raw_bytes: int = DEFAULT_DEAD_LETTER_RAW_BYTES,
) -> int:
    """Feed one topic-partition's records (``offset``/``value``, or :class:`Columns`) to the engine.

    Alerts, label requests and dead letters go to ``sinks["alerts"|"requests"|
    "dead_letters"]`` (dead letters keep at most ``max_raw_bytes`` of the record). With
    ``ops``, rejections, duplicates, alerts and unrouted events are counted and the batch's
    first event is timed alone (the sampled ``certmon_event_processing_seconds``). Records
    below the worker's next offset (already reflected in the
    restored state) are skipped, so a re-delivery is never counted twice. Records the
    worker's :class:`RecordRetries` gave up on are dead-lettered (``processing_failed``)
    instead of processed; records it reads carefully are processed one at a time.

    Returns
    -------
    int
        Records processed.

    Raises
    ------
    RecordFailed
        Processing raised; the engine may hold part of a record, so the caller must
        rewind the worker to its checkpoint (the failure is counted in ``worker.retries``).

    Examples
    --------
    >>> from collections import namedtuple
    >>> from monitor.config import parse_config
    >>> from monitor.sinks import MemorySink
    >>> toml = ["[[suites]]", "[[suites.certificates]]", "name='r'", "alpha=0.1", "delta=0.1"]
    >>> cfg = parse_config(chr(10).join(toml))
    >>> worker = PartitionWorker.start(cfg, 0, None)
    >>> Rec = namedtuple("Rec", "offset value")
    >>> sinks = {n: MemorySink() for n in ("alerts", "requests", "dead_letters")}
    >>> process_records(worker, "t", [Rec(0, b"nope"), Rec(1, b"{}")], sinks)
    2
    >>> worker.offsets, [d["reason"] for d in sinks["dead_letters"].records]
    ({'t': 2}, ['invalid_json', 'missing_field'])
    >>> process_records(worker, "t", [Rec(1, b"{}")], sinks)  # re-delivered: skipped
    0
    >>> PartitionWorker.start(cfg, 0, worker.encode()).offsets
    {'t': 2}
    """
    if isinstance(records, Columns):
        offsets, values = records
    else:
        recs = list(records)
        offsets, values = [r.offset for r in recs], [r.value for r in recs]
    expected = worker.offsets.get(topic, -1)
    keep = []
    for i, offset in enumerate(offsets):
        if offset >= expected:
            keep.append(i)
            expected = offset + 1
    if len(keep) != len(offsets):
        offsets, values = [offsets[i] for i in keep], [values[i] for i in keep]
    raws = [v if v is not None else b"" for v in values]
    engine, retries = worker.engine, worker.retries
    unrouted = engine.unrouted
    segments = _segments(retries, topic, offsets) if retries.active() else [(0, len(raws))]
    sampled = ops  # the sampled latency: the first event given to the engine, timed alone
    for lo, hi in segments:
        detail = retries.give_up_detail(topic, offsets[lo]) if hi == lo + 1 else None
        if detail is not None:  # given up: dead-lettered, never given to the engine
            sinks["dead_letters"].emit(dead_letter_record(
                raws[lo], PROCESSING_FAILED, detail, topic=topic, partition=worker.partition,
                offset=offsets[lo], max_raw_bytes=max_raw_bytes))
            if ops is not None and retries.first_report(topic, offsets[lo]):
                ops.rejected(PROCESSING_FAILED)
            continue
        try:
            found = _run(engine, raws if (lo, hi) == (0, len(raws)) else raws[lo:hi], sampled)
        except Exception as exc:  # the engine may hold part of a record: the caller rewinds
            raise retries.failed(topic, offsets[lo], offsets[hi - 1], exc) from exc
        sampled = None
        _emit(worker, topic, found, lo, offsets, raws, sinks, ops, max_raw_bytes)
    if ops is not None and engine.unrouted > unrouted:
        ops.unrouted(engine.unrouted - unrouted)
    worker.offsets[topic] = max(expected, worker.offsets.get(topic, 0))
    worker.since_checkpoint += len(raws)
    return len(raws)


def _run(engine: Engine, raws: list[bytes],
         ops: OperationalMetrics | None) -> list[tuple[int, ProcessResult]]:  # fmt: skip
    """Process ``raws`` as one batch; with ``ops``, its first event is timed alone."""
    if ops is None or not raws:
        return engine.process_batch(raws)
    t0 = time.perf_counter()
    found = engine.process_batch(raws[:1])
    ops.observe_event(time.perf_counter() - t0)
    return found + [(i + 1, r) for i, r in engine.process_batch(raws[1:])]


def _segments(retries: RecordRetries, topic: str, offsets: list[int]) -> list[tuple[int, int]]:
    """Split a batch into index ranges: single records where given up or careful, else runs."""
    careful_to = retries.careful.get(topic, -1)
    out: list[tuple[int, int]] = []
    start = 0
    for i, offset in enumerate(offsets):
        if offset <= careful_to or (topic, offset) in retries.given_up:
            if start < i:
                out.append((start, i))
            out.append((i, i + 1))
            start = i + 1
    if start < len(offsets):
        out.append((start, len(offsets)))
    return out


def _emit(
    worker: PartitionWorker, topic: str, found: list[tuple[int, ProcessResult]], base: int,
    offsets: list[int], raws: list[bytes], sinks: Mapping[str, Sink],
    ops: OperationalMetrics | None, max_raw_bytes: int,
) -> None:
    """Send the outputs of a processed run starting at index ``base`` to their sinks."""
    for j, result in found:
        i = base + j
        for alert in result.alerts:
            sinks["alerts"].emit(alert)
            if ops is not None:
                ops.alert_emitted(str(alert.get("kind")))
        for request in result.requests:
            sinks["requests"].emit(request)
        if result.rejection is not None:
            rej = result.rejection
            sinks["dead_letters"].emit(dead_letter_record(
                raws[i], rej.reason, rej.detail, topic=topic, partition=worker.partition,
                offset=offsets[i], max_raw_bytes=max_raw_bytes))
            if ops is not None:
                ops.rejected(rej.reason)
        if result.duplicate is not None and ops is not None:
            ops.duplicate(result.duplicate)


def write_checkpoints(
    workers: Iterable[PartitionWorker],
    sinks: Iterable[Sink],
    ops: OperationalMetrics | None = None,
) -> dict[tuple[str, int], int]:
    """Flush ``sinks``, then durably checkpoint the workers with news; return offsets to commit.

    A worker is checkpointed when it read records since its last checkpoint or has none yet,
    through its :attr:`PartitionWorker.writer` (built by :meth:`PartitionWorker.open` for the
    key ``partition_key(events_topic, partition)``): one document per changed suite, then
    the partition's manifest.

    Returns
    -------
    dict of (str, int) to int
        Next offset of each ``(topic, partition)`` now covered by a durable checkpoint.

    Raises
    ------
    SinkError
        A sink could not deliver (nothing was checkpointed: the caller rewinds).
    CheckpointError
        The store could not save (the workers saved before it are durable).

    Examples
    --------
    >>> from consumers.kafka.state import partition_key
    >>> from monitor.checkpoint import LocalDirectoryStore
    >>> from monitor.config import parse_config
    >>> import tempfile
    >>> toml = ["[[suites]]", "[[suites.certificates]]", "name='r'", "alpha=0.1", "delta=0.1"]
    >>> store = LocalDirectoryStore(tempfile.mkdtemp())
    >>> worker = PartitionWorker.open(parse_config(chr(10).join(toml)), 2, store,
    ...                               partition_key("t", 2))
    >>> worker.offsets["t"] = 5
    >>> write_checkpoints([worker], [])
    {('t', 2): 5}
    >>> write_checkpoints([worker], [])  # nothing new since
    {}
    >>> from monitor.incremental import load_checkpoint
    >>> ckpt = load_checkpoint(store, "t/2")  # a manifest and one document per suite
    >>> ckpt.version, ckpt.position["offsets"]
    (2, {'t': 5})

    Notes
    -----
    Guarantee: sinks are flushed before any checkpoint is written, so a durable checkpoint
    never covers an output that was not delivered.
    """
    due = [w for w in workers if w.since_checkpoint > 0 or not w.durable]
    if not due:
        return {}
    for sink in sinks:
        sink.flush()
    commits: dict[tuple[str, int], int] = {}
    for w in due:
        t0 = time.monotonic()
        try:  # one document per changed suite, then the partition's manifest
            w.save()
        except CertmonError:
            if ops is not None:
                ops.checkpoint_failed()
            raise
        if ops is not None:
            ops.checkpoint_written(time.monotonic() - t0, time.time())
        for topic, offset in w.offsets.items():
            commits[(topic, w.partition)] = offset
    return commits
