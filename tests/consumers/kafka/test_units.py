"""Unit tests of the Kafka layer without a broker (fake producer / consumer)."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import pytest
from kafka.structs import TopicPartition
from prometheus_client import CollectorRegistry

from consumers.kafka.checkpoints import KafkaTopicStore, chunk_key, split_chunks
from consumers.kafka.deadlines import RebalanceStalled, rebalance_limit_s
from consumers.kafka.health import update_lag
from consumers.kafka.logs import JsonFormatter, configure_json_logging
from consumers.kafka.sinks import KafkaTopicSink, ProduceError
from consumers.kafka.source import KafkaRunner, kafka_config_of
from consumers.kafka.state import merge_state_views, partition_key
from consumers.kafka.topics import topic_specs
from monitor.checkpoint import LocalDirectoryStore
from monitor.config import parse_config
from monitor.config.kafka import KafkaConfig
from monitor.errors import CheckpointError, ConfigError
from monitor.incremental import load_checkpoint
from monitor.sinks import MemorySink

TOPIC = "certmon.eval-events.v1"  # the engines read it: the direct path (repartition = false)
CONFIG = """
[[suites]]
name = "*"
audit_rate = 1.0
[[suites.certificates]]
name = "risk"
alpha = 0.5
delta = 0.1
methods = ["r_eval"]
cs_grid = 50
[source]
kind = "kafka"
[kafka]
bootstrap_servers = "127.0.0.1:1"
checkpoint_store = "local"
checkpoint_every_records = 1000
repartition = false
"""


class _Future:
    def __init__(self, exc: BaseException | None = None) -> None:
        self.exc = exc

    def add_errback(self, fn: Any) -> _Future:
        if self.exc is not None:
            fn(self.exc)
        return self

    def get(self, timeout: float | None = None) -> None:
        if self.exc is not None:
            raise self.exc


class FakeProducer:
    def __init__(self, fail: bool = False) -> None:
        self.sent: list[dict[str, Any]] = []
        self.fail = fail

    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
             headers: Any = None, partition: int | None = None) -> _Future:  # fmt: skip
        from kafka.errors import KafkaTimeoutError

        self.sent.append({"topic": topic, "key": key, "value": value, "headers": headers,
                          "partition": partition})  # fmt: skip
        return _Future(KafkaTimeoutError("down") if self.fail else None)

    def flush(self, timeout: float | None = None) -> None:
        pass

    def partitions_for(self, topic: str) -> set[int]:
        return {0, 1}

    def close(self, timeout: float | None = None) -> None:
        pass


class Rec(NamedTuple):
    offset: int
    value: bytes | None
    key: bytes | None = None


class FakeConsumer:
    def __init__(self) -> None:
        self.seeks: dict[TopicPartition, int | str] = {}
        self.commits: list[dict[TopicPartition, Any]] = []
        self.assigned: set[TopicPartition] = set()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks[tp] = offset

    def seek_to_beginning(self, *tps: TopicPartition) -> None:
        for tp in tps:
            self.seeks[tp] = "beginning"

    def assignment(self) -> set[TopicPartition]:
        return self.assigned

    def highwater(self, tp: TopicPartition) -> int | None:
        return 100

    def position(self, tp: TopicPartition, timeout_ms: int | None = None) -> int | None:
        return None  # unknown (kafka-python: not fetched yet)

    def commit(self, offsets: dict[TopicPartition, Any], timeout_ms: int | None = None) -> None:
        self.commits.append(offsets)  # kafka-python's signature (timeout_ms: the runner's budget)


def _event(i: int, suite: str = "qa", kind: str = "judge") -> bytes:
    return json.dumps({"type": kind, "event_id": f"{kind}{i}", "suite": suite, "model": "m",
                       "example_id": f"x{i}", "loss": 0.0, "ts": i}).encode()  # fmt: skip


def _runner(tmp_path: Path) -> tuple[KafkaRunner, FakeConsumer, dict[str, MemorySink]]:
    config = parse_config(CONFIG, [f"checkpoint.dir={json.dumps(str(tmp_path))}"])
    runner = KafkaRunner(config, CollectorRegistry(), store=LocalDirectoryStore(tmp_path))
    consumer = FakeConsumer()
    sinks = {n: MemorySink() for n in ("alerts", "requests", "dead_letters")}
    runner._consumer = consumer  # type: ignore[assignment]
    runner._sinks = dict(sinks)  # type: ignore[arg-type]
    return runner, consumer, sinks


def _records(lo: int, hi: int) -> list[Rec]:
    out = []
    for i in range(lo, hi):
        out.append(Rec(2 * i, _event(i)))
        out.append(Rec(2 * i + 1, _event(i, kind="label")))
    return out


def test_split_chunks_and_keys() -> None:
    data = bytes(range(256)) * 10
    pieces = split_chunks(data, 1000)
    assert b"".join(pieces) == data and [len(p) for p in pieces] == [1000, 1000, 560]
    assert chunk_key("k", "s", 2) == "k#chunk#s#2"
    with pytest.raises(ValueError):
        split_chunks(b"x", 0)


def test_topic_store_writes_chunks_then_manifest(tmp_path: Path) -> None:
    cfg = KafkaConfig(checkpoint_chunk_bytes=1024, checkpoint_max_bytes=10_000)
    producer = FakeProducer()
    store = KafkaTopicStore(cfg, producer)  # type: ignore[arg-type]
    store.save("ev/0", b"a" * 3000)
    kinds = [dict(m["headers"])["certmon-ckpt"] for m in producer.sent]
    assert kinds == [b"chunk", b"chunk", b"chunk", b"manifest"]
    assert len({m["partition"] for m in producer.sent}) == 1  # one key, one partition: ordered
    producer.sent.clear()
    store.save("ev/0", b"small")
    kinds = [dict(m["headers"])["certmon-ckpt"] for m in producer.sent]
    assert kinds == [b"whole", b"chunk", b"chunk", b"chunk"]  # then tombstones of old chunks
    assert [m["value"] for m in producer.sent[1:]] == [None, None, None]
    with pytest.raises(CheckpointError, match="must not contain"):
        store.save("a#chunk#b", b"x")


def test_topic_store_write_failure_is_a_checkpoint_error() -> None:
    store = KafkaTopicStore(KafkaConfig(), FakeProducer(fail=True))  # type: ignore[arg-type]
    with pytest.raises(CheckpointError, match="write"):
        store.save("ev/0", b"data")


def test_topic_store_assembles_latest_complete_value() -> None:
    store = KafkaTopicStore(KafkaConfig(), FakeProducer())  # type: ignore[arg-type]
    import hashlib

    data = b"0123456789"
    manifest = {"save_id": "s1", "chunks": 2, "size": 10,
                "sha256": hashlib.sha256(data).hexdigest()}  # fmt: skip
    store._apply(chunk_key("k", "s1", 0), data[:5], "chunk")
    store._apply(chunk_key("k", "s1", 1), data[5:], "chunk")
    store._apply("k", json.dumps(manifest).encode(), "manifest")
    store._catch_up = lambda: None  # type: ignore[method-assign]
    assert store.load("k") == data
    store._apply(chunk_key("k", "s1", 1), None, "chunk")  # a chunk lost: refuse, never guess
    with pytest.raises(CheckpointError, match="missing"):
        store.load("k")
    store._apply("k", b"whole-value", "whole")
    assert store.load("k") == b"whole-value"
    store._apply("k", None, "whole")
    assert store.load("k") is None


def test_sink_keys_and_delivery_failures() -> None:
    registry = CollectorRegistry()
    from prometheus_client import Counter

    failures = Counter("certmon_kafka_produce_failures", "x", ["topic"], registry=registry)
    producer = FakeProducer()
    sink = KafkaTopicSink(producer, "alerts", failures=failures)  # type: ignore[arg-type]
    sink.emit({"id": "a", "suite": "s1"})
    sink.flush()
    assert producer.sent[0]["key"] == b"s1"
    producer.fail = True
    sink.emit({"id": "b", "suite": "s1"})
    with pytest.raises(ProduceError):
        sink.flush()
    assert (
        registry.get_sample_value("certmon_kafka_produce_failures_total", {"topic": "alerts"}) == 1
    )
    sink.flush()  # failures are reported once


def test_merge_state_views_rejects_a_suite_in_two_partitions() -> None:
    with pytest.raises(ValueError, match="two partitions"):
        merge_state_views([{"suites": {"a": {}}}, {"suites": {"a": {}}}])
    assert merge_state_views([]) == {"suites": {}}


def test_json_logs_carry_fields(caplog: pytest.LogCaptureFixture) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    log = logging.getLogger("certmon.kafka.unit")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        log.info("assigned", extra={"partitions": [1, 2]})
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            log.warning("failed", exc_info=True)
    finally:
        log.removeHandler(handler)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert lines[0]["msg"] == "assigned" and lines[0]["partitions"] == [1, 2]
    assert "boom" in lines[1]["exc"]
    assert configure_json_logging("certmon.kafka.unit2").name == "certmon.kafka.unit2"


def test_kafka_config_of_and_topic_specs() -> None:
    class C:
        kafka: ClassVar[dict[str, Any]] = {"topics": {"judge": "x.judge-scores.v1"}}

    cfg = kafka_config_of(C())
    specs = topic_specs(cfg)
    assert specs["x.judge-scores.v1"][0] == cfg.events_partitions
    assert specs[cfg.topics.checkpoints][1]["cleanup.policy"] == "compact"

    class Bad:
        kafka: ClassVar[dict[str, Any]] = {"no_such_key": 1}

    with pytest.raises(ConfigError, match=r"\[kafka\]"):
        kafka_config_of(Bad())


def test_runner_assign_process_checkpoint_restore(tmp_path: Path) -> None:
    runner, consumer, sinks = _runner(tmp_path)
    tp0, tp1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
    consumer.assigned = {tp0, tp1}
    runner._on_assigned([tp0, tp1])
    assert consumer.seeks == {tp0: "beginning", tp1: "beginning"}
    assert runner.assigned_partitions() == [0, 1]
    records = [*_records(0, 20), Rec(40, b"\xff garbage")]
    runner._process({tp0: records})
    assert sinks["alerts"].records, "certified alert expected"
    assert sinks["dead_letters"].records[0]["source"] == {
        "kind": "kafka", "topic": TOPIC, "partition": 0, "offset": 40}  # fmt: skip
    update_lag(runner.metrics, consumer, runner._workers, runner._fetcher, runner._read)
    runner._maybe_checkpoint(consumer, force=True)  # type: ignore[arg-type]
    assert consumer.commits and consumer.commits[-1][tp0].offset == 41
    ckpt = load_checkpoint(LocalDirectoryStore(tmp_path), partition_key(TOPIC, 0))
    assert ckpt is not None and ckpt.position["offsets"] == {TOPIC: 41}
    view = runner.state_view()

    # Revocation writes a final checkpoint; a new owner restores and seeks to the next offset.
    runner._process({tp0: _records(21, 25)})
    runner._on_revoked([tp0, tp1])
    assert runner.assigned_partitions() == []
    other, consumer2, _ = _runner(tmp_path)
    other._on_assigned([tp0])
    assert consumer2.seeks == {tp0: 50}
    assert other.state_view()["counters"]["events_in"] == view["counters"]["events_in"] + 8

    # A record below the restored offset (re-delivered) is not counted twice.
    other._process({tp0: [Rec(49, _event(24, kind="label"))]})
    assert other.state_view()["counters"]["events_in"] == view["counters"]["events_in"] + 8


def test_a_rebalance_that_never_ends_closes_the_consumer_to_rejoin(tmp_path: Path) -> None:
    """Revoked, then no assignment for rebalance_limit_s: the loop gets RebalanceStalled
    (its reconnect path opens a fresh consumer); an assignment in time clears the watch."""
    runner, _, _ = _runner(tmp_path)
    tp0 = TopicPartition(TOPIC, 0)
    runner._on_assigned([tp0])
    runner._check_rebalance()  # nothing revoked
    runner._on_revoked([tp0])
    runner._check_rebalance()  # a rebalance in progress, within the limit
    runner._on_assigned([tp0])
    assert runner._revoked_at is None  # the assignment ended the rebalance
    runner._check_rebalance()
    runner._on_revoked([tp0])
    assert runner._revoked_at is not None
    runner._revoked_at -= rebalance_limit_s(runner.kafka) + 1.0  # as if that long ago
    with pytest.raises(RebalanceStalled, match="rejoin the group"):
        runner._check_rebalance()
    runner._check_rebalance()  # raised once; the reconnect starts a new watch


def test_runner_lost_partitions_drop_state_without_writing(tmp_path: Path) -> None:
    runner, _, _ = _runner(tmp_path)
    tp0 = TopicPartition(TOPIC, 0)
    runner._on_assigned([tp0])
    runner._process({tp0: _records(0, 5)})
    runner._drop([tp0])  # on_partitions_lost
    assert runner.assigned_partitions() == []
    assert LocalDirectoryStore(tmp_path).load(partition_key(TOPIC, 0)) is None


def test_runner_rewinds_to_checkpoint_when_outputs_fail(tmp_path: Path) -> None:
    runner, consumer, _ = _runner(tmp_path)
    tp0 = TopicPartition(TOPIC, 0)
    consumer.assigned = {tp0}
    runner._on_assigned([tp0])
    runner._process({tp0: _records(0, 3)})
    runner._maybe_checkpoint(consumer, force=True)  # type: ignore[arg-type]
    before = runner.state_view()
    runner._process({tp0: _records(3, 20)})

    class Failing(MemorySink):
        def flush(self) -> None:
            raise ProduceError("down")

    runner._sinks["alerts"] = Failing()
    runner._maybe_checkpoint(consumer, force=True)  # type: ignore[arg-type]
    assert not runner.ready()
    assert runner.state_view() == before  # back to the last durable checkpoint
    assert consumer.seeks[tp0] == 6


class SizeLimitedProducer(FakeProducer):
    """Refuses (record-level, for good) every value above ``limit`` bytes, as the broker does."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def send(self, topic: str, value: bytes | None = None, key: bytes | None = None,
             headers: Any = None, partition: int | None = None) -> _Future:  # fmt: skip
        from kafka.errors import MessageSizeTooLargeError

        if value is not None and len(value) > self.limit:
            return _Future(MessageSizeTooLargeError(f"{len(value)} bytes"))
        self.sent.append({"topic": topic, "key": key, "value": value})
        return _Future()


def test_a_record_refused_for_good_becomes_a_small_dead_letter_not_a_rewind() -> None:
    from consumers.kafka.sinks import KafkaOutputs
    from monitor.config.kafka import KafkaTopics

    registry = CollectorRegistry()
    producer = SizeLimitedProducer(limit=400)
    outputs = KafkaOutputs(KafkaConfig(topics=KafkaTopics()), registry, producer=producer)  # type: ignore[arg-type]
    outputs.alerts.emit({"id": "big", "suite": "s1", "pad": "x" * 1000})
    outputs.alerts.emit({"id": "ok", "suite": "s1"})
    outputs.dead_letters.emit({"reason": "oversized", "raw": "y" * 1000})
    outputs.alerts.flush()  # no ProduceError: the stream goes on
    outputs.dead_letters.flush()
    sent = [(s["topic"], json.loads(s["value"])) for s in producer.sent]
    assert ("certmon.alerts.v1", {"id": "ok", "suite": "s1"}) in sent
    stand_ins = [d for t, d in sent if t == "certmon.dead-letters.v1"]
    assert sorted((d["topic"], d["reason"]) for d in stand_ins) == [
        ("certmon.alerts.v1", "undeliverable_output"),
        ("certmon.dead-letters.v1", "undeliverable_output")]  # fmt: skip
    big = next(d for d in stand_ins if d["topic"] == "certmon.alerts.v1")
    assert big["id"] == "big" and big["bytes"] > 1000 and len(big["sha256"]) == 64
    assert "MessageSizeTooLarge" in big["detail"]
    for topic in ("certmon.alerts.v1", "certmon.dead-letters.v1"):
        assert registry.get_sample_value("certmon_kafka_undeliverable_records_total",
                                         {"topic": topic}) == 1  # fmt: skip


def test_a_suite_on_a_second_partition_is_fenced_and_dead_lettered(tmp_path: Path) -> None:
    runner, consumer, sinks = _runner(tmp_path)
    tp0, tp1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
    consumer.assigned = {tp0, tp1}
    runner._on_assigned([tp0, tp1])
    runner._ready = True
    runner._process({tp0: _records(0, 5)})  # partition 0 owns "qa"
    other = [Rec(0, _event(100, suite="ops")), Rec(1, _event(101, suite="qa"))]
    consumer.seeks.clear()
    runner._process({tp1: other})  # "qa" on partition 1: detected, partition 1 rewound
    assert consumer.seeks == {tp1: "beginning"}
    assert not runner.ready()
    assert runner._workers[1].engine.suites == {}
    runner._process({tp1: [*other, Rec(2, _event(102, suite="ops"))]})  # re-read: screened
    dead = [d for d in sinks["dead_letters"].records if d["reason"] == "suite_partition_conflict"]
    assert [d["source"]["offset"] for d in dead] == [1]
    assert "owned by partition 0" in dead[0]["detail"]
    assert sorted(runner._workers[1].engine.suites) == ["ops"]
    assert runner._workers[1].offsets == {TOPIC: 3}
    assert runner.registry.get_sample_value("certmon_kafka_suite_partition_conflicts_total",
                                            {"suite": "qa"}) == 1  # fmt: skip
    # a batch that ends with a fenced record moves past it (no lag left behind)
    runner._process({tp1: [Rec(3, _event(104, suite="ops")), Rec(4, _event(105, suite="qa"))]})
    assert runner._workers[1].offsets == {TOPIC: 5}
    runner._process({tp1: [Rec(5, _event(106, suite="qa"))]})  # a batch of fenced records only
    assert runner._workers[1].offsets == {TOPIC: 6}
    # both partitions' checkpoints restored holding "qa": a scrape still answers
    runner._workers[1].engine.process(_event(103, suite="qa"))
    assert "qa" in runner.state_view()["suites"]


def test_kafka_path_counts_unrouted_events_and_samples_processing_time(tmp_path: Path) -> None:
    """The Kafka loop feeds certmon_events_unrouted_total and the sampled latency histogram
    (one observation per partition batch), as the file loop does."""
    from monitor.metrics import OperationalMetrics

    config = parse_config(CONFIG.replace('name = "*"', 'name = "qa"', 1),
                          [f"checkpoint.dir={json.dumps(str(tmp_path))}"])
    registry = CollectorRegistry()
    runner = KafkaRunner(config, registry, store=LocalDirectoryStore(tmp_path),
                         ops=OperationalMetrics(registry))
    consumer = FakeConsumer()
    runner._consumer = consumer  # type: ignore[assignment]
    runner._sinks = {n: MemorySink() for n in ("alerts", "requests", "dead_letters")}  # type: ignore[assignment]
    tp0 = TopicPartition(TOPIC, 0)
    runner._on_assigned([tp0])
    typo = [Rec(40 + i, _event(100 + i, suite="qa-typo")) for i in range(7)]
    runner._process({tp0: [*_records(0, 20), *typo]})
    runner._process({tp0: _records(24, 29)})  # offsets 48..57
    assert registry.get_sample_value("certmon_events_received_total") == 57
    assert registry.get_sample_value("certmon_events_unrouted_total") == 7
    assert registry.get_sample_value("certmon_event_processing_seconds_count") == 2
    assert runner.state_view()["counters"]["unrouted"] == 7
