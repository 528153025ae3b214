"""The metrics port cannot make liveness fail: idle (slowloris) connections and many parallel
scrapers leave ``/healthz`` answered within a second."""

from __future__ import annotations

import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from monitor.metrics import MetricsLimits, serve_metrics, stop_metrics
from monitor.metrics.server import RENDER_BUDGET


def _probe(base: str) -> float:
    t0 = time.monotonic()
    with urllib.request.urlopen(base + "/healthz", timeout=1.0) as resp:
        assert resp.status == 200 and resp.read() == b"ok\n"
    return time.monotonic() - t0


def test_healthz_answers_despite_idle_connections() -> None:
    """Before: the default 2 workers and 16 queue slots held by idle connections; the probe
    was closed at once or waited several ``request_timeout``s."""
    registry = CollectorRegistry()
    Gauge("certmon_up", "Up.", registry=registry).set(1)
    server, thread = serve_metrics(registry, "127.0.0.1", 0, None, MetricsLimits())
    port = server.server_port
    idle: list[socket.socket] = []
    try:
        for i in range(24):  # more than max_connections (16) and workers (2)
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            if i % 2:
                s.sendall(b"GET /metrics HTTP/1.1\r\nX-Slow: ")  # a partial request
            idle.append(s)
        time.sleep(0.3)
        for _ in range(5):
            assert _probe(f"http://127.0.0.1:{port}") < 1.0
    finally:
        for s in idle:
            s.close()
        stop_metrics(server, thread)


def test_healthz_answers_under_64_parallel_scrapers() -> None:
    registry = CollectorRegistry()
    Gauge("certmon_up", "Up.", registry=registry).set(1)
    server, thread = serve_metrics(registry, "127.0.0.1", 0, None, MetricsLimits())
    base = f"http://127.0.0.1:{server.server_port}"
    stop = threading.Event()
    served = [0]

    def scrape() -> None:
        while not stop.is_set():
            try:
                with urllib.request.urlopen(base + "/metrics", timeout=10) as resp:
                    resp.read()
                served[0] += 1
            except (OSError, urllib.error.URLError):
                time.sleep(0.01)

    scrapers = [threading.Thread(target=scrape, daemon=True) for _ in range(64)]
    try:
        for t in scrapers:
            t.start()
        time.sleep(0.5)
        for _ in range(5):
            assert _probe(base) < 1.0
            time.sleep(0.1)
        assert served[0] >= 1
    finally:
        stop.set()
        for t in scrapers:
            t.join(10)
        stop_metrics(server, thread)


class _Costly(Collector):
    """A collector whose rendering burns ``cost`` CPU seconds."""

    def __init__(self, cost: float) -> None:
        self.cost, self.calls = cost, 0

    def collect(self) -> Iterator[GaugeMetricFamily]:
        self.calls += 1
        end = time.thread_time() + self.cost
        while time.thread_time() < end:
            pass
        yield GaugeMetricFamily("certmon_costly", "Costly.", value=1.0)


def test_rendering_cost_is_budgeted() -> None:
    """A rendering of ``c`` CPU seconds is reused for ``c / RENDER_BUDGET`` seconds, even with
    ``min_scrape_interval = 0`` and unpaced scrapers: before, every scrape rendered."""
    registry = CollectorRegistry()
    costly = _Costly(0.02)  # 20 ms: reused for 0.4 s
    registry.register(costly)
    limits = MetricsLimits(min_scrape_interval=0.0, max_scrapes_per_second=0.0)
    server, thread = serve_metrics(registry, "127.0.0.1", 0, None, limits)
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        t0 = time.monotonic()
        for _ in range(10):
            assert b"certmon_costly" in urllib.request.urlopen(base + "/metrics", timeout=5).read()
        elapsed = time.monotonic() - t0
        allowed = 1 + elapsed / (costly.cost / RENDER_BUDGET) + 1
        assert costly.calls <= allowed, (costly.calls, elapsed)
    finally:
        stop_metrics(server, thread)
