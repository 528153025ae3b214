"""One suite, one partition, against the broker: a mis-keyed producer writes one suite to two
partitions; the first owner keeps it, the other partition's records of it are dead-lettered
(``suite_partition_conflict``), counted, logged, and readiness drops; ``/metrics`` stays 200.
The direct path (``[kafka] repartition = false``); the default regroups such input instead
(``test_kafka_repartition.py``)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from kafka import KafkaProducer

from tests.kafka.kafka_harness import (
    Consumer,
    KafkaSetup,
    comparable,
    make_events,
    replay_reference,
    sample,
    scrape,
    scrape_until,
)

pytestmark = pytest.mark.kafka

OWNER = {"suite-0": 0, "suite-1": 0, "suite-2": 1, "suite-3": 1}


class Scraper:
    """Scrape ``/metrics`` every 0.1 s from a thread; keep every status seen."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.statuses: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            try:
                self.statuses.append(scrape(self.port)[0])
            except OSError:  # the process is stopping
                return

    def stop(self) -> list[int]:
        self._stop.set()
        self._thread.join(10)
        return self.statuses


def _send(setup: KafkaSetup, records: list[tuple[int, str, bytes]]) -> None:
    producer = KafkaProducer(bootstrap_servers=setup.bootstrap, acks="all", linger_ms=5)
    for partition, key, value in records:
        producer.send(setup.events_topic, key=key.encode(), value=value, partition=partition)
    producer.flush()
    producer.close()


def _mis_keyed(records: list[tuple[str, bytes]]) -> list[tuple[int, str, bytes]]:
    """Every other ``suite-0`` record goes to partition 1 (a second, mis-keyed producer); the
    last ``suite-0`` record is moved to the end, so partition 1's batch ends with a fenced one."""
    out: list[tuple[int, str, bytes]] = []
    n = 0
    for key, value in records:
        p = OWNER[key]
        if key == "suite-0":
            p, n = n % 2, n + 1
        out.append((p, key, value))
    last = max(i for i, (p, k, _) in enumerate(out) if k == "suite-0" and p == 1)
    out.append(out.pop(last))
    return out


def _offsets(sent: list[tuple[int, str, bytes]], base: int) -> dict[bytes, int]:
    """Offset on partition 1 of each record sent there (``base``: records already there)."""
    return {v: base + i for i, v in enumerate(v for p, _, v in sent if p == 1)}


def _wait_ready(consumer: Consumer, port: int) -> None:
    consumer.wait_log("partitions assigned", timeout=60)
    for _ in range(300):
        if scrape(port, "/readyz")[0] == 200:
            return
        assert consumer.alive(), consumer.log_tail()
        time.sleep(0.1)
    raise AssertionError(f"never ready\n{consumer.log_tail()}")


def test_a_suite_on_two_partitions_keeps_its_first_owner(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    # the direct path (repartition = false): mis-keyed input is fenced, not regrouped
    setup = KafkaSetup(kafka_bootstrap, topic_prefix, tmp_path, partitions=2, every=100,
                       metrics=True, repartition=False)  # fmt: skip
    records = make_events(900, n_suites=4, seed=5)
    phase1 = [(OWNER[k], k, v) for k, v in records[:300]]  # keyed right: partition 0 owns suite-0
    phase2, phase3 = _mis_keyed(records[300:600]), _mis_keyed(records[600:])
    fenced2 = [v for p, k, v in phase2 if k == "suite-0" and p == 1]
    fenced3 = [v for p, k, v in phase3 if k == "suite-0" and p == 1]
    on_1 = _offsets(phase1 + phase2 + phase3, 0)
    fenced = set(fenced2 + fenced3)
    kept = [(k, v) for _, k, v in phase1 + phase2 + phase3 if v not in fenced]
    ref = replay_reference(setup, kept)

    _send(setup, phase1)
    c1 = setup.start("c1")
    port = c1.metrics_port()
    scraper = Scraper(port)
    setup.wait_caught_up(timeout=60, procs=[c1])
    _wait_ready(c1, port)
    # born at 0: increase() sees the first conflict
    born = 'certmon_kafka_suite_partition_conflicts_total{suite="suite-0"} 0.0'
    text = scrape(port)[1]
    for _ in range(150):  # /metrics is cached up to [metrics] min_scrape_interval
        if born in text:
            break
        time.sleep(0.2)
        text = scrape(port)[1]
    assert born in text
    assert 'certmon_events_rejected_total{reason="suite_partition_conflict"} 0.0' in text
    _send(setup, phase2)
    setup.wait_caught_up(timeout=60, procs=[c1])  # the fenced records at the end included
    text = scrape_until(port, "certmon_kafka_suite_partition_conflicts_total", len(fenced2))
    assert scrape(port, "/readyz")[0] == 503  # one suite, two partitions: not ready
    assert sample(text, "certmon_kafka_suite_partition_conflicts_total",
                  suite="suite-0") == len(fenced2)  # fmt: skip
    assert sample(text, "certmon_events_rejected_total",
                  reason="suite_partition_conflict") == len(fenced2)  # fmt: skip
    # received counts every record read, the fenced ones included (as rejected does)
    assert sample(text, "certmon_events_received_total") == sample(
        text, "certmon_kafka_records_consumed_total") + len(fenced2)
    warnings = [json.loads(line) for line in c1.log_path.read_text().splitlines()
                if "suite read from a second partition" in line]  # fmt: skip
    assert [(w["level"], w["suite"], w["partition"], w["owner_partition"])
            for w in warnings] == [("WARNING", "suite-0", 1, 0)]  # fmt: skip
    assert c1.terminate() == 0
    statuses = scraper.stop()
    assert statuses and set(statuses) == {200}, statuses  # /metrics never answers 500

    # after a restart the owner is the partition whose checkpoint holds the suite
    c2 = setup.start("c2")
    port = c2.metrics_port()
    scraper = Scraper(port)
    _wait_ready(c2, port)
    _send(setup, phase3)
    setup.wait_caught_up(timeout=60, procs=[c2])
    assert scrape(port, "/readyz")[0] == 503
    text = scrape_until(port, "certmon_kafka_suite_partition_conflicts_total", len(fenced3))
    assert sample(text, "certmon_kafka_suite_partition_conflicts_total") == len(fenced3)
    assert c2.count_in_log("suite read from a second partition") == 1
    assert c2.terminate() == 0
    statuses = scraper.stop()
    assert statuses and set(statuses) == {200}, statuses

    assert comparable(setup.final_state()) == comparable(ref["state"])
    dead = setup.read_topic(setup.kafka.topics.dead_letters)
    assert {d["reason"] for d in dead} == {"suite_partition_conflict"}
    assert sorted(d["source"]["offset"] for d in dead) == sorted(on_1[v] for v in fenced)
    assert {d["source"]["partition"] for d in dead} == {1}
    assert all("owned by partition 0" in d["detail"] for d in dead)
    # every alert of the reference; any other one can only come from the batch in which the
    # conflict was detected (emitted before partition 1 was rewound)
    alerts = {a["id"]: a for a in setup.read_topic(setup.kafka.topics.alerts)}
    assert {a["id"] for a in ref["alerts"]} <= set(alerts)
    assert {alerts[i]["suite"] for i in set(alerts) - {a["id"] for a in ref["alerts"]}} <= {
        "suite-0"}
