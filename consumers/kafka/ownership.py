"""One suite, one partition: detect a suite read from a second partition and fence it off.

A suite's certificate is valid only if one engine sees all of its events (README.md, "Kafka"). A
mis-keyed producer, or partitions added to the topic, can put a suite on two partitions; two
engines would then run two certificates for one model. The runner keeps the first owner and
dead-letters the suite's records on every other partition (reason
``suite_partition_conflict``).

Detection costs nothing on the normal path: after a batch, only the suites *new* to the
partition's engine are compared with the other partitions' suites. On a conflict the runner
rewinds that partition to its checkpoint, and from then on its records are screened (their
``suite`` is read) before they reach the engine.

The runner keeps the fenced suites and the time of the last conflict in a
:class:`SuiteFence`: readiness (``/readyz``) answers 503 for ``SuiteFence.UNREADY_S`` after
the last record of a fenced suite, and every such record is counted
(``certmon_kafka_suite_partition_conflicts_total{suite}``).

Scope: the partitions of one process. Two processes that own the two partitions do not see
each other's suites; the merged final state (:func:`consumers.kafka.state.merge_state_views`)
reports such a suite.
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any

from consumers.kafka.partitions import Columns
from consumers.kafka.sinks import dead_letter_record

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from consumers.kafka.metrics import KafkaMetrics
    from consumers.kafka.partitions import PartitionWorker
    from monitor.engine import Engine
    from monitor.metrics import OperationalMetrics
    from monitor.sinks import Sink

log = logging.getLogger("certmon.kafka")

__all__ = ["CONFLICT", "SuiteFence", "new_conflicts", "owners", "record_suite", "screen"]

# Dead-letter reason of a record of a suite that another partition owns.
CONFLICT = "suite_partition_conflict"


def record_suite(raw: bytes | None) -> str | None:
    """Return the ``suite`` of a raw JSON event, or None when it has none (or is not JSON).

    Any record, however malformed or deeply nested, gives None rather than an exception:
    the engine then dead-letters it with its reason.

    Examples
    --------
    >>> record_suite(b'{"suite": "qa", "x": 1}'), record_suite(b"{"), record_suite(None)
    ('qa', None, None)
    >>> record_suite(b"[" * 100_000)  # RecursionError in json.loads: None, not a crash
    """
    if not raw:
        return None
    try:
        doc = json.loads(raw)
    except Exception:  # ValueError, UnicodeDecodeError, RecursionError (deep nesting), ...
        return None
    suite = doc.get("suite") if isinstance(doc, dict) else None
    return suite if isinstance(suite, str) else None


def new_conflicts(
    engine: Engine, known: int, others: Iterable[Engine]
) -> list[str]:
    """Suites created in ``engine`` since it held ``known`` suites that another engine holds.

    Examples
    --------
    >>> from monitor.config import parse_config
    >>> from monitor.engine import Engine
    >>> toml = ["[[suites]]", "[[suites.certificates]]", "name='r'", "alpha=0.1", "delta=0.1"]
    >>> cfg = parse_config(chr(10).join(toml))
    >>> ev = (b'{"type":"judge","event_id":"e","suite":"s","model":"m","example_id":"x",'
    ...       b'"loss":0,"ts":1}')
    >>> a, b = Engine(cfg), Engine(cfg)
    >>> _ = a.process(ev); _ = b.process(ev)
    >>> new_conflicts(b, 0, [a]), new_conflicts(b, 1, [a])
    (['s'], [])
    """
    names = list(engine.suites)
    if len(names) <= known:
        return []
    fresh = names[known:]
    others = list(others)
    return [n for n in fresh if any(n in o.suites for o in others)]


def screen(
    offsets: list[int], values: list[bytes | None], blocked: Mapping[str, int]
) -> tuple[list[int], list[bytes | None], list[tuple[int, bytes, str, int]]]:
    """Split a batch: records to process, and ``(offset, raw, suite, owner)`` to dead-letter.

    Examples
    --------
    >>> screen([5, 6], [b'{"suite": "a"}', b'{"suite": "b"}'], {"a": 0})
    ([6], [b'{"suite": "b"}'], [(5, b'{"suite": "a"}', 'a', 0)])
    """
    keep_o: list[int] = []
    keep_v: list[bytes | None] = []
    fenced: list[tuple[int, bytes, str, int]] = []
    for offset, value in zip(offsets, values, strict=True):
        suite = record_suite(value)
        if suite is not None and suite in blocked:
            fenced.append((offset, value or b"", suite, blocked[suite]))
        else:
            keep_o.append(offset)
            keep_v.append(value)
    return keep_o, keep_v, fenced


def owners(engines: Mapping[int, Engine]) -> dict[str, int]:
    """Map each suite to the lowest partition whose engine holds it.

    Examples
    --------
    >>> owners({})
    {}
    """
    out: dict[str, int] = {}
    for p in sorted(engines):
        for name in engines[p].suites:
            out.setdefault(name, p)
    return out


class SuiteFence:
    """Suites fenced off the partitions that do not own them, and when that was last seen.

    Parameters
    ----------
    metrics : KafkaMetrics
        Counts the fenced records by suite.
    ops : OperationalMetrics, optional
        Counts them as rejected (reason ``suite_partition_conflict``).
    max_raw_bytes : int
        Bytes of a fenced record kept in its dead letter.

    Examples
    --------
    >>> from prometheus_client import CollectorRegistry
    >>> from consumers.kafka.metrics import KafkaMetrics
    >>> from consumers.kafka.partitions import PartitionWorker
    >>> from monitor.config import parse_config
    >>> from monitor.sinks import MemorySink
    >>> toml = ["[[suites]]", "[[suites.certificates]]", "name='r'", "alpha=0.1", "delta=0.1"]
    >>> worker = PartitionWorker.start(parse_config(chr(10).join(toml)), 1, None)
    >>> fence = SuiteFence(KafkaMetrics(CollectorRegistry()), None, 1024)
    >>> fence.recent()
    False
    >>> fence.block(1, ["qa"], {"qa": 0})
    >>> sink = MemorySink()
    >>> fence.screen_batch(worker, "t", Columns([7, 8], [b'{"suite": "ops"}', b'{"suite": "qa"}']),
    ...                    sink)
    (Columns(offsets=[7], values=[b'{"suite": "ops"}']), 9)
    >>> [(d["reason"], d["source"]["offset"]) for d in sink.records], fence.recent()
    ([('suite_partition_conflict', 8)], True)

    Notes
    -----
    Guarantee: a fenced suite's records on a non-owning partition never reach that
    partition's engine; each is dead-lettered and counted when it is read (a re-read after a
    rewind to an older checkpoint dead-letters and counts it again).
    """

    UNREADY_S = 300.0  # seconds /readyz answers 503 after the last record of a fenced suite

    def __init__(self, metrics: KafkaMetrics, ops: OperationalMetrics | None,
                 max_raw_bytes: int) -> None:  # fmt: skip
        self.metrics, self.ops, self.max_raw_bytes = metrics, ops, max_raw_bytes
        self.blocked: dict[int, dict[str, int]] = {}  # partition -> {fenced suite: owner}
        self.conflict_at: float | None = None  # monotonic

    def recent(self) -> bool:
        """Whether a fenced suite was seen within ``UNREADY_S`` (readiness is then False)."""
        at = self.conflict_at
        return at is not None and time.monotonic() - at < self.UNREADY_S

    def block(self, partition: int, suites: Iterable[str], found: Mapping[str, int]) -> None:
        """Fence ``suites`` off ``partition`` (``found``: each suite's owner) and warn."""
        blocked = self.blocked.setdefault(partition, {})
        for name in suites:
            blocked[name] = found[name]
            log.warning("suite read from a second partition; its records there are "
                        "dead-lettered", extra={
                            "suite": name, "partition": partition,
                            "owner_partition": found[name],
                            "hint": "key every producer by suite with one partitioner, or set "
                                    "[kafka] repartition = true, the default (any producer)"})
        self.conflict_at = time.monotonic()

    def forget(self, partition: int) -> None:
        """Drop the fences of a partition this process no longer owns."""
        self.blocked.pop(partition, None)

    def screen_batch(self, worker: PartitionWorker, topic: str, recs: Any,
                     sink: Sink) -> tuple[Any, int | None]:  # fmt: skip
        """Dead-letter the records of suites another partition owns to ``sink``.

        Returns the other records (``recs`` itself when the partition has no fence) and the
        offset after the last fenced record (None if none): the caller moves the worker's
        offset there once the others are processed, as a batch may end with fenced records.
        """
        blocked = self.blocked.get(worker.partition)
        if not blocked:
            return recs, None
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
            sink.emit(dead_letter_record(
                raw, CONFLICT, f"suite {suite!r} is owned by partition {owner} of this topic",
                topic=topic, partition=worker.partition, offset=offset,
                max_raw_bytes=self.max_raw_bytes))
            self.metrics.suite_conflict(suite)
            if self.ops is not None:
                self.ops.rejected(CONFLICT)
        if self.ops is not None and fenced:  # read from the source, as every rejected record
            self.ops.events_received(len(fenced))
        if not fenced:
            return Columns(keep_o, keep_v), None
        self.conflict_at = time.monotonic()  # not ready while the mis-keyed records come
        worker.since_checkpoint += len(fenced)
        return Columns(keep_o, keep_v), fenced[-1][0] + 1
