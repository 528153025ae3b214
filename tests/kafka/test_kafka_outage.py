"""An outage shows, against the broker.

Before: with the brokers stopped for 5 minutes, ``certmon_up`` and ``certmon_kafka_connected``
stayed 1 and ``/readyz`` 200 (kafka-python retries silently: ``poll()`` just returns
nothing), and nothing was logged. Now an active, bounded broker check
(``[kafka] health_check_seconds``) sets both gauges to 0 and ``/readyz`` to 503 within 30 s,
logs it, and both come back when the brokers do; a progress line is logged periodically.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.kafka.conftest import BrokerInfo
from tests.kafka.kafka_harness import KafkaSetup, make_events, sample, scrape

pytestmark = pytest.mark.kafka


def _health(port: int) -> tuple[float, float, int]:
    text = scrape(port)[1]
    return (sample(text, "certmon_up"), sample(text, "certmon_kafka_connected"),
            scrape(port, "/readyz")[0])


def _wait(port: int, want: tuple[float, float, int], timeout: float) -> float:
    """Seconds until ``_health(port) == want`` (AssertionError after ``timeout``)."""
    t0 = time.monotonic()
    got = _health(port)
    while got != want:
        assert time.monotonic() - t0 < timeout, f"health {got} after {timeout} s, want {want}"
        time.sleep(0.25)
        got = _health(port)
    return time.monotonic() - t0


def test_a_broker_outage_shows_within_30s(
    kafka_broker: BrokerInfo, topic_prefix: str, tmp_path: Path
) -> None:
    if kafka_broker.broker is None:
        pytest.skip(f"broker {kafka_broker.kind} is not controlled by the tests")
    broker = kafka_broker.broker
    # the direct path: its lag is exactly 0 when caught up (on the repartition topic the
    # transactions' commit markers take offsets the lag gauge counts)
    setup = KafkaSetup(kafka_broker.bootstrap_servers, topic_prefix, tmp_path, partitions=2,
                       every=100, metrics=True, repartition=False)  # fmt: skip
    text = setup.config_path.read_text()
    setup.config_path.write_text(text.replace("[kafka]\n", "[kafka]\nprogress_log_seconds = 1\n"))
    setup.produce(make_events(300, seed=3))
    c1 = setup.start("c1")
    port = c1.metrics_port()
    setup.wait_caught_up(timeout=60, procs=[c1])
    _wait(port, (1.0, 1.0, 200), timeout=30)
    c1.wait_log('"progress"', timeout=10, count=c1.count_in_log('"progress"') + 1)
    progress = [json.loads(line) for line in c1.log_path.read_text().splitlines()
                if '"msg":"progress"' in line]
    assert progress[-1]["kafka_reachable"] is True and progress[-1]["partitions"] == [0, 1]
    assert progress[-1]["lag"] == 0
    assert sum(p["records"] for p in progress) == sum(setup.end_offsets().values())

    broker.stop()
    try:
        took = _wait(port, (0.0, 0.0, 503), timeout=30)
        assert c1.alive(), c1.log_tail()
        c1.wait_log("kafka unreachable", timeout=5)
        scrape_t0 = time.monotonic()
        scrape(port)
        assert time.monotonic() - scrape_t0 < 5.0  # a scrape is never held by the outage
    finally:
        broker.start()
    back = _wait(port, (1.0, 1.0, 200), timeout=90)
    c1.wait_log("kafka reachable again", timeout=5)
    assert c1.terminate() == 0
    print(f"outage visible after {took:.1f} s; recovery seen {back:.1f} s after restart")
