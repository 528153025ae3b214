"""Incremental checkpoints on a real broker: many suites per partition, kill -9, exact resume."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from consumers.kafka.checkpoints import KafkaTopicStore
from consumers.kafka.state import partition_key
from monitor.checkpoint import AuthenticatedStore
from monitor.engine import Engine
from monitor.incremental import IncrementalCheckpointer, load_checkpoint
from tests.kafka.kafka_harness import KafkaSetup, comparable, make_events, replay_reference

pytestmark = pytest.mark.kafka


def _checkpoint_records(bs: str, topic: str) -> list[tuple[str, bool]]:
    """(key, is a value) of every checkpoint-topic record, in order (one partition)."""
    c = KafkaConsumer(bootstrap_servers=bs, group_id=None, auto_offset_reset="earliest")
    tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or [])]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    end = c.end_offsets(tps)
    out: list[tuple[str, bool]] = []
    deadline = time.monotonic() + 60
    while any(c.position(tp) < end[tp] for tp in tps) and time.monotonic() < deadline:
        for recs in c.poll(300).values():
            out.extend((r.key.decode(), r.value is not None) for r in recs)
    c.close()
    return out


def test_many_suites_per_partition_kill9_resume_exactly(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    setup = KafkaSetup(kafka_bootstrap, topic_prefix, tmp_path, partitions=2, every=250)
    records = make_events(3000, n_suites=60, seed=14)  # about 30 suites per partition
    # then a few events of one suite only: the checkpoint after them rewrites that suite
    extra = [("suite-7", json.dumps({
        "type": "judge", "event_id": f"extra{i}", "suite": "suite-7", "model": "m0",
        "example_id": f"extra{i}", "loss": 0.0, "ts": 1_700_003_000 + i, "audit": False,
    }).encode()) for i in range(5)]
    ref = replay_reference(setup, records + extra)
    stream = setup.trickle(records, batch=40, pause=0.05)
    rnd = random.Random(14)
    for i in range(2):
        consumer = setup.start(f"run{i}")
        consumer.wait_log("partitions assigned", timeout=60)
        time.sleep(rnd.uniform(0.5, 2.0))
        consumer.kill9()
    stream.join(120)
    consumer = setup.start("final")
    consumer.wait_log("partitions assigned", timeout=60)
    setup.wait_caught_up(procs=[consumer])
    before = len(_checkpoint_records(kafka_bootstrap, setup.kafka.topics.checkpoints))
    setup.produce(extra)
    setup.wait_caught_up(procs=[consumer])
    assert consumer.terminate() == 0, consumer.log_tail()

    state = setup.final_state()
    assert state["counters"]["events_in"] == len(records) + len(extra)  # each counted once
    assert comparable(state) == comparable(ref["state"])

    # the topic holds a manifest per partition and per-suite documents; the checkpoint after
    # the extra events rewrote suite-7's document only
    keys = _checkpoint_records(kafka_bootstrap, setup.kafka.topics.checkpoints)
    owners = {k.partition("#")[0] for k, _ in keys[before:] if k.partition("#")[2] == ""}
    assert len(owners) == 1, keys[before:]
    owner = owners.pop()
    parts = [k for k, v in keys[before:] if k.startswith(owner + "#part#") and v]
    assert len(parts) == 1, keys[before:]
    store = KafkaTopicStore(setup.kafka)
    try:
        for p in range(setup.partitions):
            ckpt = load_checkpoint(store, partition_key(setup.engine_topic, p))
            assert ckpt is not None and ckpt.version == 2
            assert len(ckpt.snapshot["suites"]) >= 20
    finally:
        store.close()


def test_checkpointer_on_the_topic_with_hmac(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    setup = KafkaSetup(kafka_bootstrap, topic_prefix, tmp_path, partitions=1)
    eng = Engine(setup.config)
    for _, value in make_events(1200, n_suites=150, seed=2):
        eng.process(value)
    key = partition_key(setup.engine_topic, 0)
    store = AuthenticatedStore(KafkaTopicStore(setup.kafka), b"s" * 32)
    writer = IncrementalCheckpointer(store, key, max_part_bytes=setup.kafka.checkpoint_max_bytes)
    full = writer.save(eng, {"kind": "kafka", "partition": 0, "offsets": {"t": 1}})
    assert full.parts_written == full.parts_total == 150
    eng.process(json.dumps({"type": "judge", "event_id": "z", "suite": "suite-7", "model": "m0",
                            "example_id": "z", "loss": 0.0, "ts": 1_700_009_999}).encode())
    one = writer.save(eng, {"kind": "kafka", "partition": 0, "offsets": {"t": 2}})
    assert one.parts_written == 1
    store.inner.close()  # type: ignore[attr-defined]

    fresh = AuthenticatedStore(KafkaTopicStore(setup.kafka), b"s" * 32)
    try:
        ckpt = load_checkpoint(fresh, key)
        assert ckpt is not None and ckpt.position["offsets"] == {"t": 2}
        assert json.dumps(ckpt.snapshot, sort_keys=True) == json.dumps(eng.snapshot(),
                                                                       sort_keys=True)
        assert Engine.restore(setup.config, ckpt.snapshot).state_view() == eng.state_view()
    finally:
        fresh.inner.close()  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="hmac mismatch"):
        other = AuthenticatedStore(KafkaTopicStore(setup.kafka), b"x" * 32)
        try:
            load_checkpoint(other, key)
        finally:
            other.inner.close()  # type: ignore[attr-defined]


def test_a_suite_document_above_a_kafka_record_is_chunked_and_restores(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    """One suite of 200 models: its document exceeds Kafka's default ``max.message.bytes``
    (1 MiB); it goes to the topic as records of at most ``checkpoint_chunk_bytes`` and is
    restored bit-identically by a fresh store."""
    setup = KafkaSetup(kafka_bootstrap, topic_prefix, tmp_path, partitions=1)
    eng = Engine(setup.config)
    for i in range(400):
        base = {"suite": "big", "model": f"model-{i % 200}", "example_id": f"x{i}",
                "ts": 1_700_000_000 + i}
        for value in ({"type": "judge", "event_id": f"j{i}", **base, "loss": 0.0,
                       "audit": True}, {"type": "label", "event_id": f"l{i}", **base,
                                        "loss": float(i % 7 == 0)}):
            assert eng.process(json.dumps(value).encode()).rejection is None
    assert len(eng.suites["big"].models) == 200
    key = partition_key(setup.engine_topic, 0)
    store = KafkaTopicStore(setup.kafka)
    writer = IncrementalCheckpointer(store, key, max_part_bytes=setup.kafka.checkpoint_max_bytes)
    stats = writer.save(eng, {"kind": "kafka", "partition": 0, "offsets": {"t": 800}})
    store.close()
    assert stats.parts_written == 1 and stats.bytes_written > 1_048_588  # above one record

    c = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=None,
                      auto_offset_reset="earliest")
    tp = TopicPartition(setup.kafka.topics.checkpoints, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    end = c.end_offsets([tp])[tp]
    sizes: list[int] = []
    deadline = time.monotonic() + 60
    while c.position(tp) < end and time.monotonic() < deadline:
        for recs in c.poll(300).values():
            sizes.extend(len(r.value) for r in recs if r.value is not None)
    c.close()
    assert len(sizes) > 2 and max(sizes) <= setup.kafka.checkpoint_chunk_bytes < 1_048_588

    fresh = KafkaTopicStore(setup.kafka)
    try:
        ckpt = load_checkpoint(fresh, key)
        assert ckpt is not None
        assert json.dumps(ckpt.snapshot, sort_keys=True) == json.dumps(eng.snapshot(),
                                                                       sort_keys=True)
        assert Engine.restore(setup.config, ckpt.snapshot).state_view() == eng.state_view()
    finally:
        fresh.close()
