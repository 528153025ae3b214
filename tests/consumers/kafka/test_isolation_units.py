"""One record or one evicted member cannot harm the other partitions.

A 4 KB record ``[`` x 2000 on a partition fenced after a suite conflict raised RecursionError
in the ownership check (only ValueError / UnicodeDecodeError were caught): the consumer loop
failed on it again after every reconnect, offsets frozen on every partition.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from kafka.structs import TopicPartition
from prometheus_client import CollectorRegistry

from consumers.kafka.metrics import KafkaMetrics
from consumers.kafka.ownership import SuiteFence
from consumers.kafka.partitions import Columns, PartitionWorker, process_records
from consumers.kafka.state import partition_key
from monitor.checkpoint import LocalDirectoryStore
from monitor.config import parse_config
from monitor.incremental import load_checkpoint
from monitor.sinks import MemorySink
from tests.consumers.kafka.test_units import TOPIC, FakeConsumer, _records, _runner


class _Generation(NamedTuple):
    generation_id: int


class _Coordinator:
    def __init__(self) -> None:
        self._generation = _Generation(7)


class _GroupConsumer(FakeConsumer):
    """The fake consumer with kafka-python's group generation."""

    def __init__(self) -> None:
        super().__init__()
        self._coordinator = _Coordinator()


TOML = "\n".join(["[[suites]]", "[[suites.certificates]]", "name='r'", "alpha=0.1",
                  "delta=0.1"])


def test_a_deeply_nested_record_on_a_fenced_partition_is_dead_lettered() -> None:
    worker = PartitionWorker.start(parse_config(TOML), 1, None)
    fence = SuiteFence(KafkaMetrics(CollectorRegistry()), None, 1024)
    fence.block(1, ["qa"], {"qa": 0})
    sinks = {n: MemorySink() for n in ("alerts", "requests", "dead_letters")}
    poison = b"[" * 2000
    batch = Columns([7, 8, 9], [b'{"suite": "qa"}', poison, b"{" * 5000])
    kept, fenced_to = fence.screen_batch(worker, "t", batch, sinks["dead_letters"])
    assert fenced_to == 8 and kept.offsets == [8, 9]
    assert process_records(worker, "t", kept, sinks) == 2
    reasons = [(d["reason"], d["source"]["offset"]) for d in sinks["dead_letters"].records]
    assert reasons == [("suite_partition_conflict", 7), ("invalid_json", 8), ("invalid_json", 9)]
    assert worker.offsets == {"t": 10}


def test_an_evicted_member_writes_no_checkpoint(tmp_path: Path) -> None:
    """kafka-python's heartbeat thread resets the generation when the broker says the member
    is unknown (evicted); until the next assignment the member must not write checkpoints,
    or it overwrites those of the partitions' new owner (before: "overwritten by another
    writer", then a refused checkpoint)."""
    runner, consumer, _ = _runner(tmp_path)
    evictable = _GroupConsumer()
    evictable.__dict__.update(consumer.__dict__)
    runner._consumer = evictable  # type: ignore[assignment]
    tp0 = TopicPartition(TOPIC, 0)
    evictable.assigned = {tp0}
    runner._on_assigned([tp0])
    runner._process({tp0: _records(0, 5)})
    runner._maybe_checkpoint(evictable, force=True)  # type: ignore[arg-type]
    key = partition_key(TOPIC, 0)
    first = load_checkpoint(LocalDirectoryStore(tmp_path), key)
    assert first is not None and first.position["offsets"] == {TOPIC: 10}
    evictable._coordinator._generation = _Generation(-1)  # evicted
    runner._process({tp0: _records(5, 8)})
    runner._maybe_checkpoint(evictable, force=True)  # type: ignore[arg-type]
    again = load_checkpoint(LocalDirectoryStore(tmp_path), key)
    assert again is not None and again.position["offsets"] == {TOPIC: 10}
    assert len(evictable.commits) == 1 and not runner.ready()
    evictable._coordinator._generation = _Generation(8)  # rejoined: assigned again
    runner._on_assigned([tp0])
    runner._process({tp0: _records(8, 9)})
    runner._maybe_checkpoint(evictable, force=True)  # type: ignore[arg-type]
    assert len(evictable.commits) == 2


class _FailingStore(LocalDirectoryStore):
    fail = False

    def save(self, key: str, data: bytes) -> None:
        if self.fail:
            from monitor.errors import CheckpointError

            raise CheckpointError("disk full")
        super().save(key, data)

    def save_many(self, items: list[tuple[str, bytes]]) -> None:
        for key, data in items:
            self.save(key, data)


def test_readiness_stays_503_after_a_failed_checkpoint_until_one_is_written(
        tmp_path: Path) -> None:
    """Before: /readyz turned 200 on the next loop iteration after a failed checkpoint (no
    partition was due any more), while the state was still not durable."""
    runner, consumer, _ = _runner(tmp_path)
    store = _FailingStore(tmp_path)
    runner._store = store
    tp0 = TopicPartition(TOPIC, 0)
    consumer.assigned = {tp0}
    runner._on_assigned([tp0])
    runner._process({tp0: _records(0, 5)})
    runner._maybe_checkpoint(consumer, force=True)  # type: ignore[arg-type]
    assert runner.ready()
    store.fail = True
    runner._process({tp0: _records(5, 8)})
    runner._maybe_checkpoint(consumer, force=True)  # type: ignore[arg-type]
    assert not runner.ready()
    runner._maybe_checkpoint(consumer)  # type: ignore[arg-type]  # nothing due now
    assert not runner.ready()
    store.fail = False
    runner._maybe_checkpoint(consumer, force=True)  # type: ignore[arg-type]
    assert runner.ready()


def test_a_scrape_is_not_held_by_a_long_checkpoint_or_flush(tmp_path: Path) -> None:
    """Before: a sink flush held the engines' lock about 60 s and a scrape waited 19.6 s."""
    import threading
    import time

    runner, consumer, _ = _runner(tmp_path)
    tp0 = TopicPartition(TOPIC, 0)
    consumer.assigned = {tp0}
    runner._on_assigned([tp0])
    runner._process({tp0: _records(0, 5)})
    before = runner.state_view()
    held, release = threading.Event(), threading.Event()

    def flush_forever() -> None:
        with runner._lock:  # what a blocked flush or checkpoint does
            held.set()
            release.wait(30)

    t = threading.Thread(target=flush_forever)
    t.start()
    try:
        held.wait(5)
        t0 = time.monotonic()
        view = runner.state_view()
        assert time.monotonic() - t0 < runner.SCRAPE_WAIT_S + 1.0
        assert view == before  # the last view computed
    finally:
        release.set()
        t.join()


def test_a_loop_failure_checkpoints_the_engines_first_with_a_local_store(
        tmp_path: Path) -> None:
    """A consume-loop failure in a broker outage dropped the engines' unsaved work
    (read again later: exact, but redone). With a local store it is checkpointed first, with
    no offset commit (the brokers may be gone); not after a failure inside a batch."""
    runner, consumer, _ = _runner(tmp_path)
    tp0 = TopicPartition(TOPIC, 0)
    consumer.assigned = {tp0}
    runner._on_assigned([tp0])
    runner._process_batch({tp0: _records(0, 5)})
    key = partition_key(TOPIC, 0)
    assert load_checkpoint(LocalDirectoryStore(tmp_path), key) is None  # not due yet
    runner._save_before_drop()
    saved = load_checkpoint(LocalDirectoryStore(tmp_path), key)
    assert saved is not None and saved.position["offsets"] == {TOPIC: 10}
    assert consumer.commits == []
    # a failure inside processing: the engine may hold part of a batch, nothing is saved
    runner._process_batch({tp0: _records(5, 8)})
    runner._mid_batch = True
    runner._save_before_drop()
    again = load_checkpoint(LocalDirectoryStore(tmp_path), key)
    assert again is not None and again.position["offsets"] == {TOPIC: 10}
