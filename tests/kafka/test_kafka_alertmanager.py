"""The Kafka consumer (``certmon run``, Kafka source) pushes its alerts to a real Alertmanager
as well as to the alerts topic, and a restarted consumer takes them over from its checkpoints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.consumers import test_alertmanager as am_support
from tests.kafka.conftest import BrokerInfo
from tests.kafka.kafka_harness import KafkaSetup, make_events

pytestmark = pytest.mark.kafka

alertmanager = am_support.alertmanager  # the module-scoped real Alertmanager fixture

NAMES = {
    "certified": "CertmonCertificateCertified",
    "violated": "CertmonCertificateViolated",
    "certificate_lost": "CertmonCertificateLost",
}


def _expected(records: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """Alert name per (suite, model) after the alert records, in topic order."""
    final: dict[tuple[str, str], str] = {}
    for r in records:
        key = (r["suite"], r["model"])
        if r["kind"] == "violated" and final.get(key) == "certificate_lost":
            continue  # the more specific Lost alert already says it
        final[key] = r["kind"]
    return {k: NAMES[v] for k, v in final.items()}


def _pushed(base: str) -> dict[tuple[str, str], str]:
    return {
        (a["labels"]["suite"], a["labels"]["model"]): a["labels"]["alertname"]
        for a in am_support._alerts(base)
        if a["labels"].get("origin") == "certmon"
    }


def test_kafka_consumer_pushes_and_takes_over(
    kafka_broker: BrokerInfo, topic_prefix: str, tmp_path: Path, alertmanager: str
) -> None:
    setup = KafkaSetup(kafka_broker.bootstrap_servers, topic_prefix, tmp_path)
    text = setup.config_path.read_text().replace(
        'alerts = "kafka"', f'alerts = ["kafka", "alertmanager:{alertmanager}"]'
    )
    # resend_seconds = 1, lifetime_seconds = 4: pushed alerts expire 4 s after the last send.
    setup.config_path.write_text(
        text + "\n[sinks.alertmanager]\nresend_seconds = 1.0\nlifetime_seconds = 4.0\n")
    records: list[tuple[str | None, bytes]] = list(make_events(1500, seed=4))
    setup.produce(records)
    consumer = setup.start("c1")
    try:
        setup.wait_caught_up(procs=[consumer])
        expected = _expected(setup.read_topic(setup.kafka.topics.alerts))
        assert expected, "the stream should reach some certificates"
        got = am_support._wait_for(alertmanager, lambda a: _pushed(alertmanager) == expected)
        assert _pushed(alertmanager) == expected, got
    finally:
        assert consumer.terminate() == 0, consumer.log_tail()
    am_support._wait_for(alertmanager, lambda a: not _pushed(alertmanager), timeout=20)
    assert not _pushed(alertmanager)
    # A new consumer restores every partition from the checkpoint topic and, at its first
    # assignment, re-sends the alerts that state implies (nothing new is consumed).
    restarted = setup.start("c2")
    try:
        am_support._wait_for(alertmanager, lambda a: _pushed(alertmanager) == expected, timeout=60)
        assert _pushed(alertmanager) == expected, restarted.log_tail()
    finally:
        assert restarted.terminate() == 0, restarted.log_tail()
