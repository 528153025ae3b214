"""Counters exist at 0 for every label value they can take, and the
received counter counts every record the rejected counter counts."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from consumers.kafka.metrics import KafkaMetrics
from consumers.kafka.ownership import CONFLICT, SuiteFence
from consumers.kafka.partitions import Columns, PartitionWorker
from consumers.kafka.retries import PROCESSING_FAILED
from consumers.kafka.source import SOURCE_REJECTION_REASONS
from monitor.config import parse_config
from monitor.events import REJECTION_REASONS
from monitor.metrics import OperationalMetrics
from monitor.sinks import MemorySink

TOML = "\n".join(["[[suites]]", "[[suites.certificates]]", "name='r'", "alpha=0.1", "delta=0.1"])


def test_the_kafka_sources_reasons_start_at_zero() -> None:
    assert set(SOURCE_REJECTION_REASONS) == {CONFLICT, PROCESSING_FAILED}
    registry = CollectorRegistry()
    OperationalMetrics(registry, extra_reasons=SOURCE_REJECTION_REASONS)
    for reason in (*REJECTION_REASONS, *SOURCE_REJECTION_REASONS):
        assert registry.get_sample_value("certmon_events_rejected_total",
                                          {"reason": reason}) == 0.0, reason


def test_a_suites_conflict_counter_starts_at_zero_when_the_suite_appears() -> None:
    registry = CollectorRegistry()
    metrics = KafkaMetrics(registry)
    metrics.suites_seen(["qa", "ops"])
    for suite in ("qa", "ops"):
        assert registry.get_sample_value("certmon_kafka_suite_partition_conflicts_total",
                                          {"suite": suite}) == 0.0
    metrics.suite_conflict("qa", 3)
    assert registry.get_sample_value("certmon_kafka_suite_partition_conflicts_total",
                                      {"suite": "qa"}) == 3.0


def test_fenced_records_are_received_as_well_as_rejected() -> None:
    registry = CollectorRegistry()
    ops = OperationalMetrics(registry, extra_reasons=SOURCE_REJECTION_REASONS)
    worker = PartitionWorker.start(parse_config(TOML), 1, None)
    fence = SuiteFence(KafkaMetrics(registry), ops, 1024)
    fence.block(1, ["qa"], {"qa": 0})
    recs = Columns([7, 8, 9], [b'{"suite": "ops"}', b'{"suite": "qa"}', b'{"suite": "qa"}'])
    kept, _ = fence.screen_batch(worker, "t", recs, MemorySink())
    ops.events_received(len(kept.offsets))  # what the runner counts for the processed ones
    get = registry.get_sample_value
    assert get("certmon_events_rejected_total", {"reason": CONFLICT}) == 2.0
    assert get("certmon_events_received_total") == 3.0  # every record read, fenced or not
