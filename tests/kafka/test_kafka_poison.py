"""Poison records never stop a partition: a ~900 KB record is dead-lettered (bounded), a record
whose processing raises is dead-lettered after ``max_record_attempts``, and the records after
them are processed."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest
from kafka import KafkaProducer

from tests.kafka import faulty_engine
from tests.kafka.kafka_harness import (
    KafkaSetup,
    comparable,
    make_events,
    replay_reference,
    sample,
    scrape,
    scrape_until,
)

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


def test_a_record_that_fails_processing_is_dead_lettered_after_3_attempts_once(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    setup = KafkaSetup(kafka_bootstrap, topic_prefix, tmp_path, partitions=1, every=100,
                       metrics=True)  # fmt: skip
    assert setup.kafka.max_record_attempts == 3  # the default
    records = make_events(700, seed=23)
    marker = b'"event_id": "j211"'
    bad = next(i for i, (_, v) in enumerate(records) if marker in v)
    first, second = records[:bad + 150], records[bad + 150:]
    ref = replay_reference(setup, [r for r in records if marker not in r[1]])
    # the certmon process raises after applying this one event in full (tests/kafka/
    # faulty_engine.py): any part of it kept in the state would break the equality below
    env = {"CERTMON_TEST_FAIL_ON": marker.decode()}
    setup.produce(first)
    c1 = setup.start("c1", cli=faulty_engine.CLI, env=env)
    port = c1.metrics_port()
    setup.wait_caught_up(timeout=90, procs=[c1])
    text = scrape_until(port, "certmon_kafka_record_failures_total", 3, error="RuntimeError")
    assert scrape(port)[0] == 200
    assert sample(text, "certmon_kafka_record_failures_total", error="RuntimeError") == 3
    assert sample(text, "certmon_events_rejected_total", reason="processing_failed") == 1
    assert c1.count_in_log("record processing failed for good") == 1, c1.log_tail()
    c1.kill9()  # no final checkpoint: the periodic one already passed the record

    setup.produce(second)
    c2 = setup.start("c2", cli=faulty_engine.CLI, env=env)  # still faulty: must not re-read it
    port = c2.metrics_port()
    setup.wait_caught_up(timeout=90, procs=[c2])
    text = scrape_until(port, "certmon_kafka_records_consumed_total", len(second))
    assert sample(text, "certmon_kafka_records_consumed_total") == len(second)
    assert sample(text, "certmon_kafka_record_failures_total") == 0
    assert sample(text, "certmon_events_rejected_total", reason="processing_failed") == 0
    assert c2.count_in_log("injected failure") == 0
    assert c2.terminate() == 0

    state = setup.final_state()
    assert comparable(state) == comparable(ref["state"])  # everything else, exactly once
    assert state["counters"]["events_in"] == len(records) - 1
    dead = setup.read_topic(setup.kafka.topics.dead_letters)
    assert [(d["reason"], d["source"]["offset"]) for d in dead] == [("processing_failed", bad)]
    d = dead[0]
    assert base64.b64decode(d["raw"]) == records[bad][1]
    assert d["detail"].startswith("processing raised RuntimeError: injected failure on")
    assert "3 failed attempts" in d["detail"]
