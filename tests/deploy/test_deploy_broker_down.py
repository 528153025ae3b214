"""The conflict and broker-down scenarios: every dashboard panel against a
live Prometheus scraping a Kafka-source certmon whose suite arrives on a second partition, then
whose brokers become unreachable.

The exposition is the Kafka source's own: a ``KafkaRunner`` wired to its registry as
``run_kafka`` wires it (operational, Kafka and state metrics; ``StateCollector`` with the
runner's state version) behind ``serve_metrics``, fed the deploy stream's events as records of
partition 0 of two assigned partitions (partition 1 gets none: no suite lives there) through a
fake consumer, a durable checkpoint, more events, and then the active broker check failing
(what :class:`consumers.kafka.health.BrokerCheck` reports when no broker answers). No broker is
started: the outage is the runner's own reaction to a failed check.

Asserted, while the brokers are reachable: the lag panel has a series for every assigned
partition, the one without records included (0). Conflict: records of the suite on partition 1
are dead-lettered and counted, ``CertmonSuiteOnTwoPartitions`` fires, the events panel shows
them rejected, and every panel shows data. Brokers unreachable: ``certmon up`` reads 0,
``CertmonNotProcessing`` fires, and every panel of both dashboards returns data except those
whose description says why it is empty in this scenario.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kafka.structs import TopicPartition
from prometheus_client import CollectorRegistry

from consumers.kafka.source import SOURCE_REJECTION_REASONS, KafkaRunner
from monitor.checkpoint import LocalDirectoryStore
from monitor.config import parse_config
from monitor.metrics import OperationalMetrics, StateCollector, serve_metrics, stop_metrics
from monitor.sinks import MemorySink
from tests.consumers.kafka.test_units import FakeConsumer, Rec
from tests.deploy.deploy_support import CONFIG, DASHBOARDS, SUITE, simulated_events
from tests.deploy.test_deploy_scenarios import alerts, query, result, scaled_rules
from tests.support.processes import free_port, start_daemon, stop, wait_until

yaml = pytest.importorskip("yaml")
pytestmark = pytest.mark.integration

TOPIC = "certmon.eval-events.v1"
SUBSTITUTIONS = {"$__rate_interval": "5s", "$suite": SUITE, "$model": "good",
                 "$certificate": "risk", "$method": "r_autoeval_plus"}
# Panels that are empty while the brokers are unreachable, and the words of their description
# that say so (every other panel must show data).
EMPTY_WHEN_BROKERS_DOWN = {
    "Kafka consumer lag": "the brokers are unreachable",
    "Event processing time": "nothing was processed",
}


class Watermarks(FakeConsumer):
    """The group member as the runner sees it: assigned partitions and their high watermarks."""

    def __init__(self) -> None:
        super().__init__()
        self.highs: dict[int, int] = {0: 0, 1: 0}

    def highwater(self, tp: TopicPartition) -> int | None:
        return self.highs.get(tp.partition)


@dataclass
class KafkaCertmon:
    runner: KafkaRunner
    consumer: Watermarks
    url: str
    lock: threading.Lock  # the consumer loop's turn (feeding, health checks)


@pytest.fixture(scope="module")
def kafka_certmon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCertmon]:
    tmp = tmp_path_factory.mktemp("kafka-certmon")
    config = parse_config(CONFIG + f"""
[source]
kind = "kafka"
[kafka]
bootstrap_servers = "127.0.0.1:1"
checkpoint_store = "local"
checkpoint_every_records = 1000000
[checkpoint]
dir = {json.dumps(str(tmp))}
""")
    registry = CollectorRegistry()  # as consumers.kafka.source.run_kafka wires it
    ops = OperationalMetrics(registry, extra_reasons=SOURCE_REJECTION_REASONS)
    runner = KafkaRunner(config, registry, ops=ops, store=LocalDirectoryStore(tmp))
    shown = config.metrics.detail == "shown"
    registry.register(StateCollector(lambda: runner.state_view(shown), config.metrics.detail,
                                     version_fn=runner.state_version))
    consumer = Watermarks()
    runner._consumer = consumer  # type: ignore[assignment]
    runner._sinks = {n: MemorySink() for n in ("alerts", "requests", "dead_letters")}
    tps = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)]
    consumer.assigned = set(tps)
    runner._on_assigned(tps)
    runner._connected(True)  # the consumer reached the brokers (KafkaRunner.run)
    server, thread = serve_metrics(registry, "127.0.0.1", free_port())
    try:
        yield KafkaCertmon(runner, consumer, f"127.0.0.1:{server.server_port}",
                           threading.Lock())
    finally:
        stop_metrics(server, thread)


@pytest.fixture(scope="module")
def prometheus(kafka_certmon: KafkaCertmon,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tests.deploy.deploy_support import find_tool

    binary = find_tool("prometheus")
    base = tmp_path_factory.mktemp("prometheus-broker-down")
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": scaled_rules(base),
        "scrape_configs": [{"job_name": "certmon",
                            "static_configs": [{"targets": [kafka_certmon.url]}]}],
    }
    (base / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    proc = start_daemon(
        [binary, f"--config.file={base / 'prometheus.yml'}",
         f"--storage.tsdb.path={base / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
         "--log.level=warn"], base / "prometheus.log", f"http://127.0.0.1:{port}/-/ready")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


def feed(certmon: KafkaCertmon, records: list[bytes], start: int, seconds: float,
         partition: int = 0) -> int:
    """Process ``records`` as ``partition`` from offset ``start`` over ``seconds``, as the
    consumer loop does (lag checked after each batch); return the next offset."""
    runner, consumer = certmon.runner, certmon.consumer
    chunks = 10
    size = math.ceil(len(records) / chunks)
    offset = start
    for i in range(chunks):
        batch = [Rec(offset + j, raw) for j, raw in enumerate(records[i * size:(i + 1) * size])]
        offset += len(batch)
        consumer.highs[partition] = max(consumer.highs[partition], offset)
        with certmon.lock, runner._lock:
            runner._process({TopicPartition(TOPIC, partition): batch})
            runner._check_health(consumer)  # type: ignore[arg-type]
        time.sleep(seconds / chunks)
    return offset


def panel_results(prom: str) -> tuple[list[str], list[str]]:
    """Run every target of every panel of both dashboards: (titles that show nothing, others)."""
    empty, shown = [], []
    for name, panel in panels():
        rows = []
        for t in panel["targets"]:
            body = query(prom, substitute(t["expr"]))
            assert body["status"] == "success", (name, panel["title"], t["expr"], body)
            rows += body["data"]["result"]
        (empty if shows_nothing(rows) else shown).append(panel["title"])
    return empty, shown


def shows_nothing(rows: list[dict[str, Any]]) -> bool:
    """A query result Grafana draws nothing for: no sample, or only NaN samples."""
    return all(math.isnan(float(r["value"][1])) for r in rows)


def panels() -> list[tuple[str, dict[str, Any]]]:
    return [(path.name, p) for path in DASHBOARDS for p in json.loads(path.read_text())["panels"]
            if p["type"] != "row"]


def substitute(expr: str) -> str:
    for var, value in SUBSTITUTIONS.items():
        expr = expr.replace(var, value)
    return expr


def test_every_panel_in_a_conflict_and_when_the_brokers_are_unreachable(kafka_certmon: KafkaCertmon,
                                                      prometheus: str) -> None:
    prom, runner = prometheus, kafka_certmon.runner
    events = simulated_events()
    half = len(events) * 3 // 4
    offset = feed(kafka_certmon, events[:half], 0, 4.0)
    with kafka_certmon.lock, runner._lock:
        runner._maybe_checkpoint(kafka_certmon.consumer, force=True)  # type: ignore[arg-type]
    offset = feed(kafka_certmon, events[half:], offset, 2.0)  # these wait for a checkpoint

    # brokers reachable: a lag series for every assigned partition, the empty one included
    wait_until(lambda: {r["metric"]["partition"]: r["value"][1] for r in result(
        prom, "certmon_kafka_consumer_lag_messages")} == {"0": "0", "1": "0"},
        "lag of both partitions", 20, interval=0.25)
    lag = next(p for _, p in panels() if p["title"] == "Kafka consumer lag")
    assert result(prom, substitute(lag["targets"][0]["expr"]))

    # conflict: the suite's events arrive on partition 1 too (a mis-keyed producer)
    stray = events[:200]
    feed(kafka_certmon, stray, 0, 1.0, partition=1)  # detected: fenced, partition rewound
    feed(kafka_certmon, stray, 0, 1.0, partition=1)  # re-read: dead-lettered and counted
    wait_until(lambda: ("CertmonSuiteOnTwoPartitions", "") in alerts(prom),  # by (job, suite)
               "CertmonSuiteOnTwoPartitions firing", 20, interval=0.25)
    rejected = next(p for _, p in panels()
                    if p["title"].startswith("Events received / rejected"))
    rows = result(prom, substitute(rejected["targets"][1]["expr"]))
    assert any(r["metric"]["reason"] == "suite_partition_conflict"
               and float(r["value"][1]) > 0 for r in rows), rows
    offset = feed(kafka_certmon, events[-50:], offset, 1.0)  # partition 0 goes on
    empty, shown = panel_results(prom)
    assert empty == [], empty

    # the brokers become unreachable: one failed active check (BrokerCheck.check_once)
    with kafka_certmon.lock, runner._lock:
        runner._broker.reachable = False
        runner._check_health(kafka_certmon.consumer)  # type: ignore[arg-type]
    wait_until(lambda: ("CertmonNotProcessing", kafka_certmon.url) in alerts(prom),
               "CertmonNotProcessing firing", 20, interval=0.25)
    time.sleep(6)  # past the rate windows ($__rate_interval = 5s): nothing processed since
    up = next(p for _, p in panels() if p["title"] == "certmon up")
    assert [r["value"][1] for r in result(prom, up["targets"][0]["expr"])] == ["0"]
    assert result(prom, "certmon_kafka_connected")[0]["value"][1] == "0"
    assert result(prom, "sum(certmon_checkpoint_pending_events)")[0]["value"][1] != "0"

    empty, shown = panel_results(prom)
    assert sorted(empty) == sorted(EMPTY_WHEN_BROKERS_DOWN), (empty, shown)
    for _, panel in panels():
        if panel["title"] in EMPTY_WHEN_BROKERS_DOWN:
            assert EMPTY_WHEN_BROKERS_DOWN[panel["title"]] in panel["description"], panel
    # the template variables still list the suite, model, certificate and method
    for path in DASHBOARDS:
        for var in json.loads(path.read_text())["templating"]["list"]:
            if var["type"] == "query":
                selector = substitute(var["query"]["query"])[len("label_values("):]
                selector = selector.rsplit(",", 1)[0]
                assert result(prom, selector), (path.name, var["name"])
