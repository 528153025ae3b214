"""A running certmon scraped over HTTP: every statistical sample equals the engine's state."""

from __future__ import annotations

import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from monitor.metrics import StateCollector
from tests.deploy.deploy_support import DETAIL, CertmonEndpoint, scrape

pytestmark = pytest.mark.integration

Sample = tuple[str, tuple[tuple[str, str], ...]]


def expected_samples(state: dict[str, object]) -> dict[Sample, float]:
    registry = CollectorRegistry()
    registry.register(StateCollector(lambda: state, DETAIL))
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text) for s in f.samples
    }


def test_scraped_state_metrics_equal_the_engine_state(certmon: CertmonEndpoint) -> None:
    expected = expected_samples(certmon.state)
    assert len(expected) > 60  # 2 models x 38 series ("shown"; 76 each with "full")
    got = scrape(certmon.metrics_url)
    names = {name for name, _ in expected}
    scraped = {key: value for key, value in got.items() if key[0] in names}
    assert scraped == expected, certmon.mode
    # spot checks against the STATE document itself
    good = certmon.state["suites"]["deploy"]["models"]["good"]  # type: ignore[index]
    key = ("certmon_rounds_total", (("model", "good"), ("suite", "deploy")))
    assert got[key] == good["counts"]["rounds"]


def test_operational_counters_match_engine_counters(certmon: CertmonEndpoint) -> None:
    counters = certmon.state["counters"]
    want = {("certmon_events_received_total", ()): float(counters["events_in"])}  # type: ignore[index]
    for reason, n in counters["rejected"].items():  # type: ignore[index]
        want[("certmon_events_rejected_total", (("reason", reason),))] = float(n)
    for reason, n in counters["duplicates"].items():  # type: ignore[index]
        want[("certmon_events_duplicate_total", (("reason", reason),))] = float(n)
    for kind, n in counters["alerts"].items():  # type: ignore[index]
        want[("certmon_alerts_emitted_total", (("kind", kind),))] = float(n)
    # the runner syncs them from the engine's counters while the source is idle
    deadline = time.monotonic() + 10
    while True:
        got = scrape(certmon.metrics_url)
        have = {k: got.get(k) for k in want}
        # the idle loop syncs the counters, then writes the checkpoint: wait for both
        done = got.get(("certmon_checkpoints_total", ()), 0.0) >= 1
        if (have == want and done) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert have == want
    assert got[("certmon_up", ())] == 1
    assert got[("certmon_checkpoints_total", ())] >= 1


def test_no_created_series(certmon: CertmonEndpoint) -> None:
    """Counters and histograms export no *_created series (a second series per counter that
    dashboards never use and that looks like a counter to PromQL name globs)."""
    import urllib.request

    with urllib.request.urlopen(certmon.metrics_url, timeout=5) as resp:
        text = resp.read().decode()
    assert "certmon_events_received_total" in text
    assert "_created" not in text


def test_timestamps_and_latency_mean_what_their_help_says(certmon: CertmonEndpoint) -> None:
    """``certmon_certificate_last_change_timestamp_seconds`` is the ``ts`` of the event that
    changed the certificate (event time, years before the scrape here), and
    ``certmon_event_processing_seconds`` holds one observation per processing batch, not one
    per event; each help text says so."""
    import json
    import urllib.request

    from monitor.config import parse_config
    from monitor.engine import Engine
    from tests.deploy.deploy_support import CONFIG

    engine = Engine(parse_config(CONFIG))
    changed: dict[tuple[str, str], float] = {}
    for raw in certmon.events:
        for alert in engine.process(raw).alerts:
            if "comparison" in alert:  # a comparison's verdict, no certificate state
                continue
            changed[(alert["model"], alert["method"])] = float(json.loads(raw)["ts"])
    assert changed

    with urllib.request.urlopen(certmon.metrics_url, timeout=5) as resp:
        families = {f.name: f for f in text_string_to_metric_families(resp.read().decode())}
    last = families["certmon_certificate_last_change_timestamp_seconds"]
    assert "Event time" in last.documentation and "not the time certmon processed it" in (
        last.documentation)
    values = {(s.labels["model"], s.labels["method"]): s.value for s in last.samples}
    for key, ts in changed.items():
        assert values[key] == ts, key
        assert ts < time.time() - 86400 * 365  # the simulated stream is from 2023
    latency = families["certmon_event_processing_seconds"]
    assert "one observation per batch, not per event" in latency.documentation
    count = next(s.value for s in latency.samples if s.name.endswith("_count"))
    if certmon.mode == "process":  # the in-process fixture observes every event
        assert 1 <= count < len(certmon.events) / 10
