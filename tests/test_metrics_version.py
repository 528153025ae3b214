"""The state families are rendered once per state version.

An idle instance is rendered once however often it is scraped; any change of the state (an
event applied, another engine adopted) is shown by the next scrape; the operational families
(checkpoints, up) stay live between state changes.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Mapping
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry

from consumers.runner import IterSource, Outputs, Runner
from monitor.config import parse_config
from monitor.metrics import (
    MetricsLimits,
    OperationalMetrics,
    StateCollector,
    serve_metrics,
    stop_metrics,
)
from monitor.simulate import SimModel, SimulationSpec, iter_jsonl
from monitor.sinks import MemorySink

CONFIG = """
[[suites]]
name = "*"
models = ["*"]
audit_rate = 0.5
[[suites.certificates]]
name = "risk"
alpha = 0.1
delta = 0.05
methods = ["r_eval", "r_autoeval_plus"]
primary = "r_autoeval_plus"
"""


def _events(n: int, seed: int) -> list[bytes]:
    spec = SimulationSpec(suite="qa", models=(SimModel("m", 0.05, 0.9),), examples=n,
                          audit_rate=0.5)
    return [line.rstrip(b"\n") for line in iter_jsonl(spec, np.random.default_rng(seed))]


def test_collector_reuses_its_rendering_while_the_version_is_unchanged() -> None:
    state: dict[str, Any] = {"suites": {"qa": {"models": {"m": {"counts": {"rounds": 1}}}}}}
    version, reads = [0], [0]

    def view() -> Mapping[str, Any]:
        reads[0] += 1
        return state

    registry = CollectorRegistry()
    registry.register(StateCollector(view, version_fn=lambda: version[0]))
    labels = {"suite": "qa", "model": "m"}
    for _ in range(20):
        assert registry.get_sample_value("certmon_rounds_total", labels) == 1.0
    assert reads[0] == 1
    state["suites"]["qa"]["models"]["m"]["counts"]["rounds"] = 2
    assert registry.get_sample_value("certmon_rounds_total", labels) == 1.0  # same version
    version[0] += 1
    assert registry.get_sample_value("certmon_rounds_total", labels) == 2.0
    assert reads[0] == 2
    # without a version every scrape reads the state (the default, unchanged)
    plain, calls = CollectorRegistry(), [0]
    plain.register(StateCollector(lambda: calls.__setitem__(0, calls[0] + 1) or state))
    for _ in range(3):
        plain.get_sample_value("certmon_rounds_total", labels)
    assert calls[0] == 3


def test_idle_runner_is_rendered_once_and_changes_show_at_once() -> None:
    """``certmon run``'s wiring: ``StateCollector(version_fn=runner.state_version)`` behind the
    server, every scrape rendered (``min_scrape_interval = 0``, no pacing) as before."""
    config = parse_config(CONFIG)
    registry = CollectorRegistry()
    ops = OperationalMetrics(registry)
    runner = Runner(config, Outputs(MemorySink(), MemorySink(), MemorySink()), metrics=ops)
    reads = [0]

    def view() -> dict[str, Any]:
        reads[0] += 1
        return runner.view()

    registry.register(StateCollector(view, version_fn=runner.state_version))
    events = _events(400, 1)
    runner.run(IterSource(events[:200]))
    server, thread = serve_metrics(registry, "127.0.0.1", 0, None,
                                   MetricsLimits(min_scrape_interval=0.0,
                                                 max_scrapes_per_second=0.0))
    url = f"http://127.0.0.1:{server.server_port}/metrics"

    def scrape(until_reads: int | None = None) -> str:
        """A scrape (past the page's cost-based reuse: once ``reads`` reaches the count)."""
        deadline = time.monotonic() + 10
        while True:
            time.sleep(0.05)
            with urllib.request.urlopen(url, timeout=5) as resp:
                text: str = resp.read().decode()
            if until_reads is None or reads[0] >= until_reads or time.monotonic() > deadline:
                return text

    def rounds(text: str) -> str:
        (line,) = [ln for ln in text.splitlines()
                   if ln.startswith('certmon_rounds_total{model="m",suite="qa"}')]
        return line.split()[-1]

    try:
        first = scrape()
        for _ in range(10):
            assert rounds(scrape()) == rounds(first)
        assert reads[0] == 1  # idle: one rendering of the state for 11 scrapes
        ops.checkpoint_written(0.01, 1_700_000_000.0)  # operational families stay live
        deadline = time.monotonic() + 10
        while "certmon_checkpoint_last_success_timestamp_seconds 1.7e+09" not in scrape():
            assert time.monotonic() < deadline
        assert reads[0] == 1
        runner.run(IterSource(events[200:]))  # more events: shown by the next scrape
        after = scrape(until_reads=2)
        assert reads[0] == 2 and float(rounds(after)) > float(rounds(first))
        assert after.split("\n") != first.split("\n")
        runner.adopt(runner.engine.restore(config, runner.engine.snapshot()), None)
        scrape(until_reads=3)
        assert reads[0] == 3  # another engine (same content): a new version all the same
    finally:
        stop_metrics(server, thread)
