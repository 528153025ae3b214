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
