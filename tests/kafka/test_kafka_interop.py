"""Interoperability with real producers: every codec, two client libraries, certmon's outputs.

Events are written by kafka-python and by confluent-kafka (librdkafka) with each compression
codec Kafka supports, some with headers; ``certmon run`` must process every one of them (same
state as ``certmon replay`` of the same events). certmon's alerts, label requests and dead
letters are then read back with confluent-kafka: keys, JSON values and record counts agree with
what kafka-python reads (a third of the judge events come without ``audit``, so certmon samples
them by hash and emits label requests).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Consumer as CkConsumer
from confluent_kafka import Producer as CkProducer
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaProducer

from tests.kafka.kafka_harness import KafkaSetup, comparable, make_events, replay_reference

pytestmark = pytest.mark.kafka

CODECS = ("gzip", "snappy", "lz4", "zstd")


def _produce_kafka_python(setup: KafkaSetup, codec: str, records: list[tuple[str, bytes]]) -> None:
    producer = KafkaProducer(bootstrap_servers=setup.bootstrap, compression_type=codec,
                             acks="all", linger_ms=20)  # fmt: skip
    for key, value in records:
        producer.send(setup.events_topic, key=key.encode(), value=value,
                      headers=[("producer", b"kafka-python"), ("codec", codec.encode())])
    producer.flush()
    producer.close()


def _produce_confluent(setup: KafkaSetup, codec: str, records: list[tuple[str, bytes]]) -> None:
    # murmur2_random: the Java client's (and kafka-python's) key partitioner, so a suite keyed
    # by librdkafka lands on the same partition as one keyed by kafka-python
    producer = CkProducer({"bootstrap.servers": setup.bootstrap, "compression.type": codec,
                           "partitioner": "murmur2_random", "linger.ms": 20, "acks": "all"})
    errors: list[str] = []

    def report(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    for key, value in records:
        producer.produce(setup.events_topic, key=key.encode(), value=value, on_delivery=report,
                         headers={"producer": b"librdkafka", "codec": codec.encode()})
    assert producer.flush(30) == 0
    assert not errors, errors


def _hash_audited(records: list[tuple[str, bytes]], every: int) -> list[tuple[str, bytes]]:
    """Drop ``audit`` from every ``every``-th judge event: certmon then samples those units by
    hash (``audit_rate``) and asks for their labels (label requests)."""
    out: list[tuple[str, bytes]] = []
    judges = 0
    for key, value in records:
        doc = json.loads(value) if value.startswith(b"{\"type\": \"judge\"") else None
        if doc is not None and "audit" in doc:
            judges += 1
            if judges % every == 0:
                del doc["audit"]
                value = json.dumps(doc).encode()
        out.append((key, value))
    return out


def _read_confluent(bs: str, topic: str, partitions: int) -> list[tuple[bytes | None, bytes]]:
    consumer = CkConsumer({"bootstrap.servers": bs, "group.id": f"{topic}-reader",
                           "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    tps = [CkTopicPartition(topic, p) for p in range(partitions)]
    ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
    consumer.assign([CkTopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[tuple[bytes | None, bytes]] = []
    pos = {p: 0 for p in ends}
    while any(pos[p] < ends[p] for p in ends):
        msg = consumer.poll(5.0)
        assert msg is not None, f"confluent-kafka read stalled on {topic}: {pos} vs {ends}"
        assert msg.error() is None, msg.error()
        pos[msg.partition()] = msg.offset() + 1
        out.append((msg.key(), msg.value()))
    consumer.close()
    return out


def test_every_codec_from_both_clients_then_outputs_read_by_librdkafka(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    setup = KafkaSetup(kafka_bootstrap, topic_prefix, tmp_path, every=200)
    # a third of the judge events without ``audit``: sampled by hash, so certmon emits label
    # requests (with ``audit`` on every event it emits none and the requests check is empty)
    records = _hash_audited(make_events(1600, seed=11), every=3)
    bad = [("suite-0", b"{not json"), ("suite-1", b'{"type": "judge"}')]
    records = records[:50] + bad + records[50:]
    ref = replay_reference(setup, records)
    assert ref["requests"], "the reference asks for no label: the requests check would be empty"
    # 8 producers (4 codecs x 2 clients), each writing a consecutive slice: every partition
    # holds batches of every codec from both clients, in the file's order
    n = len(records)
    cuts = [round(i * n / 8) for i in range(9)]
    slices = [records[cuts[i] : cuts[i + 1]] for i in range(8)]
    for i, codec in enumerate(CODECS):
        _produce_kafka_python(setup, codec, slices[2 * i])
        _produce_confluent(setup, codec, slices[2 * i + 1])

    consumer = setup.start("c")
    setup.wait_caught_up(timeout=90, procs=[consumer])
    assert consumer.terminate() == 0, consumer.log_tail()
    assert consumer.count_in_log("UnsupportedCodecError") == 0
    assert consumer.count_in_log("fetch process exited") == 0

    state = setup.final_state()
    assert state["counters"]["events_in"] == n  # every record of every codec, once
    assert comparable(state) == comparable(ref["state"])

    # certmon's outputs, read with librdkafka: same records as kafka-python reads, keyed as
    # documented (alerts and requests by suite, dead letters by reason), JSON values
    t = setup.kafka.topics
    keyed = ((t.alerts, "suite"), (t.requests, "suite"), (t.dead_letters, "reason"))
    for topic, key_field in keyed:
        with_ck = _read_confluent(kafka_bootstrap, topic, 1)  # output topics: 1 partition
        docs = [json.loads(v) for _, v in with_ck]
        assert len(docs) == len(setup.read_topic(topic)), topic
        assert docs, topic
        for key, doc in zip((k for k, _ in with_ck), docs, strict=True):
            assert key is not None and key.decode() == str(doc[key_field])
    dead = [json.loads(v) for _, v in _read_confluent(kafka_bootstrap, t.dead_letters, 1)]
    assert sorted(d["reason"] for d in dead) == ["invalid_json", "missing_field"]
    # label requests, read with librdkafka: keyed by suite, JSON with the documented fields, the
    # same units the replay asks for (at-least-once: a rewind may repeat one, never lose one)
    fields = ("kind", "request_id", "suite", "model", "example_id", "judge_event_id", "ts")
    asked = _read_confluent(kafka_bootstrap, t.requests, 1)
    assert len(asked) >= len(ref["requests"]) > 0
    for key, value in asked:
        doc = json.loads(value)
        assert set(fields) <= set(doc) and doc["kind"] == "label", doc
        assert key == doc["suite"].encode(), (key, doc)
    units = {tuple(json.loads(v)[f] for f in fields) for _, v in asked}
    assert units == {tuple(r[f] for f in fields) for r in ref["requests"]}
