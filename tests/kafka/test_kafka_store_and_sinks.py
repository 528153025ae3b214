from __future__ import annotations

import base64
import json
import os

import pytest
from kafka import KafkaConsumer, TopicPartition
from prometheus_client import CollectorRegistry

from consumers.kafka.checkpoints import CheckpointTooLargeError, KafkaTopicStore
from consumers.kafka.sinks import KafkaOutputs, dead_letter_record
from consumers.kafka.topics import ensure_topics
from monitor.config.kafka import KafkaConfig, KafkaTopics

pytestmark = pytest.mark.kafka


def _config(bs: str, prefix: str, **kw: object) -> KafkaConfig:
    topics = KafkaTopics(
        events=f"{prefix}.events",
        alerts=f"{prefix}.alerts",
        requests=f"{prefix}.requests",
        dead_letters=f"{prefix}.dead-letters",
        checkpoints=f"{prefix}.checkpoints",
    )
    return KafkaConfig(bootstrap_servers=bs, topics=topics, events_partitions=2, **kw)  # type: ignore[arg-type]


def _read_all(bs: str, topic: str) -> list[tuple[bytes | None, bytes | None, dict[str, bytes]]]:
    c = KafkaConsumer(bootstrap_servers=bs, group_id=None, auto_offset_reset="earliest")
    parts = sorted(c.partitions_for_topic(topic) or [])
    tps = [TopicPartition(topic, p) for p in parts]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    end = c.end_offsets(tps)
    out = []
    while any(c.position(tp) < end[tp] for tp in tps):
        for recs in c.poll(500).values():
            out.extend((r.key, r.value, dict(r.headers or [])) for r in recs)
    c.close()
    return out


def test_broker_is_reachable_and_named(kafka_broker) -> None:  # type: ignore[no-untyped-def]
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers)
    assert isinstance(admin.list_topics(), list)
    admin.close()
    assert kafka_broker.kind in ("env", "docker", "apache", "tansu")
    if os.environ.get("CERTMON_KAFKA_MODE") == "apache":
        assert kafka_broker.kind == "apache"


def test_checkpoint_store_small_big_and_too_large(kafka_bootstrap: str, topic_prefix: str) -> None:
    cfg = _config(
        kafka_bootstrap,
        topic_prefix,
        checkpoint_chunk_bytes=64 * 1024,
        checkpoint_max_bytes=4 * 1024 * 1024,
    )
    created = ensure_topics(cfg)
    assert cfg.topics.checkpoints in created
    assert ensure_topics(cfg) == []  # idempotent

    store = KafkaTopicStore(cfg)
    assert store.load("ev/0") is None
    small = b'{"format":"certmon.checkpoint","n":1}'
    store.save("ev/0", small)
    big = os.urandom(300 * 1024) + b"tail"  # 5 chunks
    store.save("ev/1", big)
    big2 = os.urandom(200 * 1024)
    store.save("ev/1", big2)  # newer chunked save; old chunks get tombstones
    with pytest.raises(CheckpointTooLargeError, match="checkpoint_max_bytes"):
        store.save("ev/2", b"x" * (4 * 1024 * 1024 + 1))
    store.close()

    # A fresh instance (another process in the group) restores from the topic alone.
    other = KafkaTopicStore(cfg)
    assert other.load("ev/0") == small
    assert other.load("ev/1") == big2
    assert other.load("ev/2") is None
    assert other.keys() == ["ev/0", "ev/1"]
    # Small overwrites big: latest value wins, even across the whole/chunked layouts.
    other.save("ev/1", b"small-again")
    other.close()
    third = KafkaTopicStore(cfg)
    assert third.load("ev/1") == b"small-again"
    third.close()

    records = _read_all(kafka_bootstrap, cfg.topics.checkpoints)
    kinds = [h.get("certmon-ckpt") for _, _, h in records]
    assert kinds.count(b"manifest") == 2
    tombstones = [k for k, v, _ in records if v is None]
    assert len(tombstones) >= 5  # the first big save's chunks were deleted


def test_outputs_are_delivered_with_keys_and_dead_letters(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    cfg = _config(kafka_bootstrap, topic_prefix)
    ensure_topics(cfg)
    registry = CollectorRegistry()
    outs = KafkaOutputs(cfg, registry)
    assert outs.producer.config["enable_idempotence"] is True
    assert outs.producer.config["acks"] in (-1, "all")
    for i in range(50):
        outs.alerts.emit({"id": f"a{i}", "suite": f"s{i % 3}", "kind": "certified"})
    outs.requests.emit({"kind": "label", "suite": "s0", "example_id": "e1"})
    raw = b"\x00\xffnot json"
    outs.dead_letters.emit(
        dead_letter_record(raw, "undecodable", "bad utf-8", topic="in", partition=1, offset=42)
    )
    outs.close()

    alerts = _read_all(kafka_bootstrap, cfg.topics.alerts)
    assert sorted(json.loads(v)["id"] for _, v, _ in alerts if v) == sorted(
        f"a{i}" for i in range(50)
    )
    assert {k for k, _, _ in alerts} == {b"s0", b"s1", b"s2"}
    dl = _read_all(kafka_bootstrap, cfg.topics.dead_letters)
    assert len(dl) == 1
    doc = json.loads(dl[0][1] or b"")
    assert base64.b64decode(doc["raw"]) == raw
    assert doc["source"] == {"kind": "kafka", "topic": "in", "partition": 1, "offset": 42}
    assert (
        registry.get_sample_value(
            "certmon_kafka_produce_failures_total", {"topic": cfg.topics.alerts}
        )
        is None
    )


def test_checkpoint_store_after_partitions_are_added(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    # a key's old records stay in its old partition; after the topic grows, its new ones go
    # elsewhere: whatever order the partitions are read in, the newest checkpoint wins
    from kafka.admin import KafkaAdminClient, NewPartitions

    cfg = _config(kafka_bootstrap, topic_prefix)
    ensure_topics(cfg)
    keys = [f"{topic_prefix}.events/{p}" for p in range(8)]
    store = KafkaTopicStore(cfg)
    for k in keys:
        store.save(k, b"old " + k.encode())
    store.close()
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    admin.create_partitions({cfg.topics.checkpoints: NewPartitions(total_count=4)})
    admin.close()
    grown = KafkaTopicStore(cfg)
    moved = [k for k in keys if grown._partition_for(k) != 0]
    assert moved, "some keys must map to a new partition"
    for k in keys:
        grown.save(k, b"new " + k.encode())
    grown.close()
    reader = KafkaTopicStore(cfg)
    assert {k: reader.load(k) for k in keys} == {k: b"new " + k.encode() for k in keys}
    reader.close()
    # the same records applied with the partitions in the worst order: new ones first
    c = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=None)
    tps = [TopicPartition(cfg.topics.checkpoints, p) for p in range(4)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    end = c.end_offsets(tps)
    recs = []
    while any(c.position(tp) < end[tp] for tp in tps):
        for batch in c.poll(500).values():
            recs.extend(batch)
    c.close()
    worst = KafkaTopicStore(cfg)
    for r in sorted(recs, key=lambda r: (-r.partition, r.offset)):
        worst._apply(r.key.decode(), r.value, "whole", r.partition, r.timestamp)
    assert {k: worst._latest.get(k) for k in keys} == {k: b"new " + k.encode() for k in keys}
    worst.close()
