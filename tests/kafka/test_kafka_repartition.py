"""Any producer's partitioning, against the broker.

Judge scores produced with confluent-kafka's default partitioner (librdkafka's
``consistent_random``: crc32), labels with kafka-python (murmur2), one suite's labels
unkeyed, into a 6-partition topic. Without regrouping, a suite lands on several partitions:
certmon fenced all but the first and dead-lettered the rest as ``suite_partition_conflict``
(measured: 25,053 of 42,000 events dead-lettered). With the default configuration
(``[kafka] repartition`` on) every event is regrouped by suite through ``topics.repartition``
in Kafka transactions: every valid event is counted once, none is dead-lettered, across two
instances.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer as CkProducer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.kafka.kafka_harness import Consumer, KafkaSetup, make_events, replay_reference

pytestmark = pytest.mark.kafka

PARTITIONS = 6


def _produce_mixed(setup: KafkaSetup, records: list[tuple[str, bytes]]) -> dict[str, int]:
    """Judge events by librdkafka's default partitioner, labels by kafka-python (keyed), the
    labels of suite-3 unkeyed; return how many records each producer wrote."""
    ck = CkProducer({"bootstrap.servers": setup.bootstrap, "acks": "all", "linger.ms": 5})
    kp = KafkaProducer(bootstrap_servers=setup.bootstrap, acks="all", linger_ms=5)
    topic = setup.events_topic
    sent = {"confluent": 0, "kafka-python": 0, "unkeyed": 0}
    for key, value in records:
        if b'"type": "judge"' in value:
            ck.produce(topic, key=key.encode(), value=value)
            ck.poll(0)
            sent["confluent"] += 1
        elif key == "suite-3":
            kp.send(topic, key=None, value=value)
            sent["unkeyed"] += 1
        else:
            kp.send(topic, key=key.encode(), value=value)
            sent["kafka-python"] += 1
    assert ck.flush(30) == 0
    kp.flush()
    kp.close()
    return sent


def _partitions_of_suites(setup: KafkaSetup) -> dict[str, set[int]]:
    c = KafkaConsumer(bootstrap_servers=setup.bootstrap, group_id=None)
    tps = [TopicPartition(setup.events_topic, p) for p in range(PARTITIONS)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    end = c.end_offsets(tps)
    out: dict[str, set[int]] = {}
    deadline = time.monotonic() + 60
    while any(c.position(tp) < end[tp] for tp in tps) and time.monotonic() < deadline:
        for tp, recs in c.poll(300).items():
            for r in recs:
                out.setdefault(json.loads(r.value)["suite"], set()).add(tp.partition)
    c.close()
    return out


def _counts(state: dict[str, Any]) -> dict[tuple[str, str], tuple[int, int, int]]:
    return {(s, m): (c["counts"]["judge"], c["counts"]["labels"], c["counts"]["rounds"])
            for s, suite in state["suites"].items() for m, c in suite["models"].items()}


def test_any_producer_every_event_counted_once_none_dead_lettered_by_default(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    setup = KafkaSetup(kafka_bootstrap, topic_prefix, tmp_path, partitions=PARTITIONS,
                       every=200)  # fmt: skip
    kafka_section = setup.config_path.read_text().split("[kafka]")[1].split("[kafka.topics]")[0]
    assert "repartition" not in kafka_section  # the default configuration
    assert setup.kafka.repartition and setup.engine_topic == setup.kafka.topics.repartition
    records = make_events(3000, n_suites=6, seed=25)
    ref = replay_reference(setup, records)
    sent = _produce_mixed(setup, records)
    assert min(sent.values()) > 0, sent
    spread = _partitions_of_suites(setup)
    assert any(len(p) > 1 for p in spread.values()), spread  # the input really is mixed

    a, b = setup.start("a"), setup.start("b")
    setup.wait_caught_up(timeout=180, procs=[a, b])  # every record forwarded and checkpointed
    _stop(a, b)
    state = setup.final_state()
    assert state["counters"]["events_in"] == len(records)
    assert sum(state["counters"]["rejected"].values()) == 0, state["counters"]["rejected"]
    assert _counts(state) == _counts(ref["state"])
    assert setup.read_topic(setup.kafka.topics.dead_letters) == []
    for proc in (a, b):
        assert proc.count_in_log('"level":"WARNING"') == 0, proc.log_tail()


def _stop(*procs: Consumer) -> None:
    for proc in procs:
        assert proc.terminate() == 0, proc.log_tail()


@pytest.mark.parametrize("fetch_process", [True, False], ids=["fetch-process", "one-process"])
def test_a_caught_up_instance_shows_no_lag_on_the_transactional_repartition_topic(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path, fetch_process: bool
) -> None:
    """Every repartition transaction ends with a commit marker that takes an offset: counting
    from the last record, a caught-up partition showed a lag of 1 forever (gauge and the
    group's committed offsets, i.e. kafka-consumer-groups). The reading position past the
    marker counts once the records before it are processed."""
    from tests.kafka.kafka_harness import sample, scrape_until

    setup = KafkaSetup(kafka_bootstrap, topic_prefix, tmp_path, partitions=3, every=50,
                       every_seconds=0.5, metrics=True, fetch_process=fetch_process)  # fmt: skip
    assert setup.kafka.repartition and setup.kafka.fetch_process == fetch_process
    records = make_events(600, n_suites=4, seed=31)
    setup.produce(records)
    proc = setup.start("a")
    setup.wait_caught_up(timeout=180, procs=[proc])
    c = KafkaConsumer(bootstrap_servers=setup.bootstrap, group_id=None)
    tps = [TopicPartition(setup.engine_topic, p) for p in range(setup.partitions)]
    ends = c.end_offsets(tps)
    c.close()
    last = setup.engine_end_offsets()
    assert any(ends[tp] > last.get((tp.topic, tp.partition), 0) for tp in tps if ends[tp])
    text = scrape_until(proc.metrics_port(), "certmon_kafka_consumer_lag_messages", 0.0,
                        timeout=30, topic=setup.engine_topic)  # fmt: skip
    assert sample(text, "certmon_kafka_consumer_lag_messages", topic=setup.engine_topic) == 0
    group = KafkaConsumer(bootstrap_servers=setup.bootstrap, group_id=setup.kafka.group_id,
                          enable_auto_commit=False)  # committed() only: never joins
    deadline = time.monotonic() + 30
    committed: dict[TopicPartition, int | None] = {}
    while time.monotonic() < deadline:
        committed = {tp: group.committed(tp) for tp in tps if ends[tp]}
        if all(committed[tp] == ends[tp] for tp in committed):
            break
        time.sleep(0.3)
    group.close()
    assert committed == {tp: ends[tp] for tp in tps if ends[tp]}
    _stop(proc)
