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

from consumers.kafka.sinks import DEFAULT_DEAD_LETTER_RAW_BYTES, dead_letter_record
from monitor.checkpoint import decode_checkpoint, encode_checkpoint
from monitor.incremental import IncrementalCheckpointer, SaveStats

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from monitor.checkpoint import CheckpointStore, Position
    from monitor.config import CertmonConfig
    from monitor.engine import Engine
    from monitor.metrics import OperationalMetrics
    from monitor.sinks import Sink

__all__ = ["Columns", "PartitionWorker", "process_records"]


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
    """

    partition: int
    engine: Engine
    offsets: dict[str, int]
    writer: IncrementalCheckpointer | None
    durable: bool
    since_checkpoint: int = 0
    last_checkpoint: float = field(default_factory=time.monotonic)
    legacy: bytes | None = None  # the single-document checkpoint given to start()

    @classmethod
    def open(cls, config: CertmonConfig, partition: int, store: CheckpointStore, key: str,
             max_part_bytes: int | None = None) -> PartitionWorker:
        """Build the worker from the checkpoint of ``key`` in ``store`` (empty without one).

        Raises
        ------
        CheckpointError
            The checkpoint is corrupt, incomplete, of an unknown version, or for another
            configuration.
        """
        from monitor.engine import Engine

        writer = IncrementalCheckpointer(store, key, max_part_bytes=max_part_bytes,
                                         keep_documents=True)
        ckpt = writer.load()
        if ckpt is None:
            return cls(partition, Engine(config), {}, writer, False)
        engine, offsets = _restored(config, ckpt.snapshot, ckpt.position)
        return cls(partition, engine, offsets, writer, True)

    @classmethod
    def start(cls, config: CertmonConfig, partition: int, data: bytes | None) -> PartitionWorker:
        """Build a worker without a store from a single-document checkpoint (or empty).

        Raises
        ------
        CheckpointError
            The checkpoint is corrupt, of an unknown version, or for another configuration.
        """
        if data is None:
            from monitor.engine import Engine

            return cls(partition, Engine(config), {}, None, False)
        engine, offsets = _restored(config, *decode_checkpoint(data))
        return cls(partition, engine, offsets, None, True, legacy=data)

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

    def encode(self) -> bytes:
        """Serialize the engine and offsets as one single-document checkpoint."""
        return encode_checkpoint(self.engine.snapshot(), self.position())

    def save(self) -> SaveStats:
        """Write a checkpoint through :attr:`writer` (only the changed suites are encoded).

        Raises
        ------
        CheckpointError
            The write failed or a suite's document is too large; the worker is unchanged.
        """
        if self.writer is None:
            raise RuntimeError("this worker has no checkpoint store (use PartitionWorker.open)")
        stats = self.writer.save(self.engine, self.position())
        self.durable, self.since_checkpoint, self.last_checkpoint = True, 0, time.monotonic()
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
    restored state) are skipped, so a re-delivery is never counted twice.

    Returns
    -------
    int
        Records processed.

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
    engine = worker.engine
    unrouted = engine.unrouted
    if ops is not None and raws:  # the sampled latency: the batch's first event, timed alone
        t0 = time.perf_counter()
        found = engine.process_batch(raws[:1])
        ops.observe_event(time.perf_counter() - t0)
        found += [(i + 1, r) for i, r in engine.process_batch(raws[1:])]
    else:
        found = engine.process_batch(raws)
    for i, result in found:
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
    if ops is not None and engine.unrouted > unrouted:
        ops.unrouted(engine.unrouted - unrouted)
    worker.offsets[topic] = max(expected, worker.offsets.get(topic, 0))
    worker.since_checkpoint += len(raws)
    return len(raws)
