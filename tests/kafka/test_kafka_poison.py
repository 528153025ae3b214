"""Poison records never stop a partition: a ~900 KB record is dead-lettered (bounded) and the
records after it are processed."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest
from kafka import KafkaProducer

from tests.kafka.kafka_harness import KafkaSetup, comparable, make_events, replay_reference

pytestmark = pytest.mark.kafka


def test_900kb_record_is_dead_lettered_bounded_and_the_partition_moves_on(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    setup = KafkaSetup(kafka_bootstrap, topic_prefix, tmp_path, partitions=1, every=100)
    records = make_events(600, seed=21)
    big = b'{"type": "judge", "suite": "suite-0", "pad": "' + b"x" * 900_000 + b'"}'
    records = [*records[:200], ("suite-0", big), *records[200:]]
    ref = replay_reference(setup, records)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all",
                             max_request_size=1_000_000)  # fmt: skip
    for key, value in records:
        producer.send(setup.events_topic, key=key.encode(), value=value)
    producer.flush()
    producer.close()

    consumer = setup.start("c")
    setup.wait_caught_up(timeout=60, procs=[consumer])  # the record after it is checkpointed
    assert consumer.terminate() == 0, consumer.log_tail()
    assert consumer.count_in_log("MessageSizeTooLarge") == 0, consumer.log_tail()

    state = setup.final_state()
    assert state["counters"]["events_in"] == len(records)
    assert comparable(state) == comparable(ref["state"])
    dead = [d for d in setup.read_topic(setup.kafka.topics.dead_letters)
            if d["reason"] == "oversized"]  # fmt: skip
    assert len(dead) >= 1
    d = dead[0]
    assert d["raw_bytes"] == len(big) and d["raw_truncated"] is True
    assert d["raw_sha256"] == hashlib.sha256(big).hexdigest()
    assert base64.b64decode(d["raw"]) == big[: setup.kafka.dead_letter_max_raw_bytes]
    assert d["source"]["offset"] == 200
