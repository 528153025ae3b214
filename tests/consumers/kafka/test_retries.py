"""A record whose processing raises: retried from the checkpoint, then dead-lettered (no broker)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kafka.structs import TopicPartition
from prometheus_client import CollectorRegistry

from consumers.kafka.partitions import Columns
from consumers.kafka.source import KafkaRunner
from consumers.kafka.state import partition_key
from monitor.checkpoint import LocalDirectoryStore
from monitor.config import parse_config
from monitor.engine import Engine
from monitor.incremental import load_checkpoint
from monitor.metrics import OperationalMetrics
from monitor.sinks import MemorySink
from tests.consumers.kafka.test_units import CONFIG, TOPIC, FakeConsumer, Rec, _event, _records
from tests.kafka.faulty_engine import faulty_apply

TP = TopicPartition(TOPIC, 0)


def _runner(tmp_path: Path, attempts: int) -> tuple[KafkaRunner, FakeConsumer,
                                                     dict[str, MemorySink]]:  # fmt: skip
    config = parse_config(CONFIG, [f"checkpoint.dir={json.dumps(str(tmp_path))}",
                                   f"kafka.max_record_attempts={attempts}"])  # fmt: skip
    registry = CollectorRegistry()
    runner = KafkaRunner(config, registry, ops=OperationalMetrics(registry),
                         store=LocalDirectoryStore(tmp_path))  # fmt: skip
    consumer = FakeConsumer()
    consumer.assigned = {TP}
    sinks = {n: MemorySink() for n in ("alerts", "requests", "dead_letters")}
    runner._consumer = consumer  # type: ignore[assignment]
    runner._sinks = dict(sinks)  # type: ignore[arg-type]
    runner._on_assigned([TP])
    return runner, consumer, sinks


def _drain(runner: KafkaRunner, consumer: FakeConsumer, log: list[Rec], batch: int,
           checkpoint_every: int | None = None) -> int:  # fmt: skip
    """Deliver ``log`` from the consumer's position in batches, like the broker; return polls."""
    position = 0
    polls = 0
    while position < len(log) or TP in consumer.seeks:  # a rewind at the end reads again
        seek = consumer.seeks.pop(TP, None)
        if seek is not None:
            position = 0 if seek == "beginning" else int(seek)
        chunk = log[position:position + batch]
        position += len(chunk)
        polls += 1
        assert polls < 1000, "the partition does not move on"
        runner._process({TP: Columns([r.offset for r in chunk], [r.value for r in chunk])})
        if checkpoint_every and polls % checkpoint_every == 0:
            runner._maybe_checkpoint(consumer, force=True)  # type: ignore[arg-type]
    return polls


def _reference(log: list[Rec], skip: bytes) -> dict[str, object]:
    engine = Engine(parse_config(CONFIG))
    for rec in log:
        if rec.value is not None and skip not in rec.value:
            engine.process(rec.value)
    return engine.state_view()


@pytest.mark.parametrize(("attempts", "batch", "checkpoint_every"),
                         [(3, 8, 2), (1, 8, None), (3, 1, 3), (5, 50, None)])  # fmt: skip
def test_a_failing_record_is_retried_then_dead_lettered_and_the_partition_moves_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attempts: int, batch: int,
    checkpoint_every: int | None,
) -> None:
    log = _records(0, 30)
    marker = b'"event_id": "judge13"'
    bad = next(r.offset for r in log if marker in (r.value or b""))
    monkeypatch.setattr(Engine, "_apply", faulty_apply(marker))
    runner, consumer, sinks = _runner(tmp_path, attempts)
    _drain(runner, consumer, log, batch, checkpoint_every)
    runner._maybe_checkpoint(consumer, force=True)  # type: ignore[arg-type]

    dead = [d for d in sinks["dead_letters"].records if d["reason"] == "processing_failed"]
    assert {d["source"]["offset"] for d in dead} == {bad}
    assert "RuntimeError: injected failure" in dead[0]["detail"]
    assert f"{max(attempts, 2) if batch > 1 else attempts} failed attempts" in dead[0]["detail"]
    # the state is exactly that of every other record: nothing of the failed one was kept
    assert runner.state_view() == _reference(log, marker)
    assert runner._workers[0].offsets == {TOPIC: len(log)}
    reg = runner.registry
    assert reg.get_sample_value("certmon_events_rejected_total",
                                {"reason": "processing_failed"}) == 1  # fmt: skip
    failures = reg.get_sample_value("certmon_kafka_record_failures_total",
                                    {"error": "RuntimeError"})  # fmt: skip
    assert failures == (max(attempts, 2) if batch > 1 else attempts)
    assert not runner._workers[0].retries.active()  # forgotten once a checkpoint passed it

    # a new owner restores the checkpoint after the record: it is never read again
    monkeypatch.undo()
    other, consumer2, sinks2 = _runner(tmp_path, attempts)
    assert consumer2.seeks == {TP: len(log)}
    more = [Rec(len(log) + i, r.value) for i, r in enumerate(_records(30, 35))]
    _drain(other, consumer2, [*log, *more], batch)
    assert sinks2["dead_letters"].records == []
    assert other.state_view() == _reference([*log, *more], marker)


def test_a_failure_that_does_not_repeat_loses_nothing(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    log = _records(0, 20)
    original = Engine._apply
    failed: list[bytes] = []

    def once(self: Engine, raw: bytes, alerts: list[object], requests: list[object]) -> object:
        out = original(self, raw, alerts, requests)  # type: ignore[arg-type]
        if b'"judge9"' in raw and not failed:
            failed.append(raw)
            raise MemoryError("transient")
        return out

    monkeypatch.setattr(Engine, "_apply", once)
    runner, consumer, sinks = _runner(tmp_path, 3)
    _drain(runner, consumer, log, batch=6)
    assert failed
    assert [d for d in sinks["dead_letters"].records] == []
    assert runner.state_view() == _reference(log, b"never")
    assert runner.registry.get_sample_value("certmon_kafka_record_failures_total",
                                            {"error": "MemoryError"}) == 1  # fmt: skip


def test_a_crash_before_the_checkpoint_passes_it_tries_the_record_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The counts are in memory: the next owner, restored from the checkpoint before the
    record (kill -9), tries it again and dead-letters it again; the state is still exact."""
    log = _records(0, 30)
    marker = b'"event_id": "judge13"'
    monkeypatch.setattr(Engine, "_apply", faulty_apply(marker))
    runner, consumer, sinks = _runner(tmp_path, 3)
    _drain(runner, consumer, log[:20], batch=4)
    runner._maybe_checkpoint(consumer, force=True)  # type: ignore[arg-type]  # before offset 26
    _drain(runner, consumer, log, batch=4)  # dead-letters it; no checkpoint after: "kill -9"
    assert [d["source"]["offset"] for d in sinks["dead_letters"].records] == [26]

    other, consumer2, sinks2 = _runner(tmp_path, 3)
    assert consumer2.seeks == {TP: 20}
    _drain(other, consumer2, log, batch=4)
    assert [d["source"]["offset"] for d in sinks2["dead_letters"].records] == [26]
    assert other.registry.get_sample_value("certmon_kafka_record_failures_total",
                                           {"error": "RuntimeError"}) == 3  # fmt: skip
    assert other.state_view() == _reference(log, marker)


def test_a_failing_record_rewinds_to_the_last_incremental_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retries and incremental checkpoints together: a failure rewinds the partition to the
    durable manifest + per-suite documents (rebuilt from the writer's kept documents), and
    the checkpoint after it rewrites only the suites that changed since."""
    early = [Rec(i, _event(i, suite=f"s{i % 4}")) for i in range(20)]
    late = [Rec(i, _event(i, suite=f"s{1 + i % 2}")) for i in range(20, 30)]
    log = [*early, *late]
    marker = b'"event_id": "judge25"'
    monkeypatch.setattr(Engine, "_apply", faulty_apply(marker))
    runner, consumer, sinks = _runner(tmp_path, 2)
    _drain(runner, consumer, early, batch=5)
    runner._maybe_checkpoint(consumer, force=True)  # type: ignore[arg-type]
    worker = runner._workers[0]
    assert worker.writer is not None and worker.writer.encoded_parts == 4  # one per suite
    store = LocalDirectoryStore(tmp_path)
    durable = load_checkpoint(store, partition_key(TOPIC, 0))
    assert durable is not None and durable.version == 2

    runner._process({TP: Columns([r.offset for r in late], [r.value for r in late])})
    worker = runner._workers[0]  # rewound: the durable checkpoint's state and offsets
    assert consumer.seeks == {TP: 20} and worker.offsets == {TOPIC: 20}
    assert worker.engine.state_view() == Engine.restore(runner.config,
                                                        durable.snapshot).state_view()
    assert worker.retries.careful == {TOPIC: 29}

    _drain(runner, consumer, log, batch=5)
    runner._maybe_checkpoint(consumer, force=True)  # type: ignore[arg-type]
    assert [d["source"]["offset"] for d in sinks["dead_letters"].records] == [25]
    assert worker.writer.encoded_parts == 4 + 2  # only s1 and s2 changed after the first
    final = load_checkpoint(store, partition_key(TOPIC, 0))
    assert final is not None and final.position["offsets"] == {TOPIC: 30}
    expected = _reference(log, marker)
    assert Engine.restore(runner.config, final.snapshot).state_view() == expected
    assert runner.state_view() == expected and not worker.retries.active()
