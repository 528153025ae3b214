"""The metrics port cannot starve or exhaust certmon."""

from __future__ import annotations

import base64
import json
import resource
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from monitor.config import parse_config
from monitor.errors import CertmonError
from monitor.metrics import (
    MetricsLimits,
    ScrapePacer,
    limits_from_config,
    serve_metrics,
    stop_metrics,
)
from monitor.simulate import SimModel, SimulationSpec, iter_jsonl
from tests.support.processes import certmon_command, free_port, listening_port

MINIMAL = "[[suites]]\n[[suites.certificates]]\nname='r'\nalpha=0.1\ndelta=0.1\n"


class Counting(Collector):
    def __init__(self) -> None:
        self.calls = 0

    def collect(self) -> Iterator[GaugeMetricFamily]:
        self.calls += 1
        yield GaugeMetricFamily("certmon_test", "Test.", value=1.0)


def _server(limits: MetricsLimits) -> tuple[CollectorRegistry, Counting, object, object, str]:
    registry = CollectorRegistry()
    counting = Counting()
    registry.register(counting)
    server, thread = serve_metrics(registry, "127.0.0.1", 0, None, limits)
    return registry, counting, server, thread, f"http://127.0.0.1:{server.server_port}"


def _closed_by_peer(s: socket.socket, wait: float) -> bool:
    s.settimeout(wait)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_default_host_is_loopback() -> None:
    assert parse_config(MINIMAL).metrics.host == "127.0.0.1"


def test_excess_connections_are_closed_and_scrapes_still_work() -> None:
    limits = MetricsLimits(workers=2, max_connections=8, idle_timeout=0.5)
    _, _, server, thread, base = _server(limits)
    port = int(base.rsplit(":", 1)[1])
    try:
        idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(100)]
        time.sleep(0.3)
        closed = sum(_closed_by_peer(s, 0.05) for s in idle)
        assert closed >= 100 - 2 - 8 - 2, closed  # at most workers + queue held open
        time.sleep(limits.idle_timeout * 3)  # the held ones time out too
        assert all(_closed_by_peer(s, 2.0) for s in idle)
        for s in idle:
            s.close()
        assert b"certmon_test" in urllib.request.urlopen(base + "/metrics", timeout=5).read()
    finally:
        stop_metrics(server, thread)  # type: ignore[arg-type]


def test_idle_connection_is_closed_after_the_timeout() -> None:
    _, _, server, thread, base = _server(MetricsLimits(idle_timeout=0.3))
    try:
        s = socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])))
        s.sendall(b"GET /metrics HTTP/1.1\r\n")  # a slow client that never finishes
        t0 = time.monotonic()
        assert _closed_by_peer(s, 5.0)
        assert time.monotonic() - t0 < 3.0
        s.close()
    finally:
        stop_metrics(server, thread)  # type: ignore[arg-type]


def _trickle(port: int, stop: threading.Event, cut: list[int]) -> None:
    """A slow-trickle client: one byte of a never-ending request every 0.3 s (well within
    the idle timeout), reconnecting at once whenever the server closes the connection."""
    request = b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"a" * 100_000
    while not stop.is_set():
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.settimeout(0.3)
            for i in range(len(request)):
                if stop.is_set():
                    return
                try:
                    s.sendall(request[i:i + 1])
                    if s.recv(1) == b"":
                        break
                except TimeoutError:
                    continue
                except OSError:
                    break
            cut[0] += 1


def test_trickling_clients_cannot_hold_the_workers() -> None:
    """Two clients trickling a request byte by byte against two workers: before the request
    deadline they held both workers for as long as they trickled and every scrape timed
    out; now each is cut at ``request_timeout`` and a scrape is answered."""
    limits = MetricsLimits(workers=2, idle_timeout=5.0, request_timeout=0.5,
                           max_scrapes_per_second=0.0)
    _, _, server, thread, base = _server(limits)
    port = int(base.rsplit(":", 1)[1])
    stop, cut = threading.Event(), [0]
    tricklers = [threading.Thread(target=_trickle, args=(port, stop, cut), daemon=True)
                 for _ in range(3)]
    try:
        for t in tricklers:
            t.start()
        time.sleep(0.2)  # the tricklers hold the workers before the scrape arrives
        for _ in range(2):
            body = urllib.request.urlopen(base + "/metrics", timeout=20).read()
            assert b"certmon_test" in body
        waited = time.monotonic() + 5.0  # tricklers hold no worker now: scrapes may be first
        while cut[0] < 1 and time.monotonic() < waited:
            time.sleep(0.05)
        assert cut[0] >= 1  # the server, not the tricklers, ended their connections
        assert all(t.is_alive() for t in tricklers)  # they were trickling all along
    finally:
        stop.set()
        for t in tricklers:
            t.join(10)
        stop_metrics(server, thread)  # type: ignore[arg-type]
    cfg = parse_config(MINIMAL + "[metrics]\nrequest_timeout = 2.5\n")
    assert limits_from_config(cfg.metrics).request_timeout == 2.5
    assert parse_config(MINIMAL).metrics.request_timeout == 3.0
    with pytest.raises(CertmonError, match="request_timeout"):
        parse_config(MINIMAL + "[metrics]\nrequest_timeout = 0\n")


def test_scrapers_share_one_rendering_per_interval() -> None:
    limits = MetricsLimits(min_scrape_interval=60.0, max_scrapes_per_second=0.0)
    _, counting, server, thread, base = _server(limits)
    try:
        for _ in range(50):
            urllib.request.urlopen(base + "/metrics", timeout=5).read()
        assert counting.calls == 1
    finally:
        stop_metrics(server, thread)  # type: ignore[arg-type]


def test_scrapes_are_paced_by_waiting() -> None:
    """Looping scrapers get at most ``max_scrapes_per_second`` answers per second on
    average: each waits for its slot (a fake clock: no wall-clock assertion)."""
    now, slept = [100.0], []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    pacer = ScrapePacer(10.0, clock=lambda: now[0], sleep=sleep)
    for _ in range(1000):
        pacer.wait()
    assert now[0] - 100.0 == pytest.approx((1000 - 11) / 10.0)  # 11 at once, then 10/s
    assert len(slept) == 1000 - 11 and all(0 < s <= 0.1 + 1e-9 for s in slept)
    unpaced = ScrapePacer(0.0, clock=lambda: now[0], sleep=sleep)
    for _ in range(1000):
        unpaced.wait()
    assert len(slept) == 1000 - 11
    cfg = parse_config(MINIMAL + "[metrics]\nmax_scrapes_per_second = 2.5\n")
    assert limits_from_config(cfg.metrics).max_scrapes_per_second == 2.5
    assert parse_config(MINIMAL).metrics.max_scrapes_per_second == 10.0


def test_basic_auth() -> None:
    _, _, server, thread, base = _server(MetricsLimits(basic_auth=("prom", "s3cret")))
    try:
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(base + "/metrics", timeout=5)
        assert err.value.code == 401
        req = urllib.request.Request(base + "/metrics", headers={
            "Authorization": "Basic " + base64.b64encode(b"prom:s3cret").decode()})
        assert urllib.request.urlopen(req, timeout=5).status == 200
        assert urllib.request.urlopen(base + "/healthz", timeout=5).status == 200
    finally:
        stop_metrics(server, thread)  # type: ignore[arg-type]


def test_basic_auth_password_from_file_or_env_only(tmp_path: Path) -> None:
    cfg = parse_config(MINIMAL, ["metrics.basic_auth_username=prom"])
    with pytest.raises(CertmonError, match="needs a password"):
        limits_from_config(cfg.metrics, {})
    pw = tmp_path / "pw"
    pw.write_text("from-file\n")
    cfg = parse_config(MINIMAL, ["metrics.basic_auth_username=prom",
                                 f"metrics.basic_auth_password_file={pw}"])
    assert limits_from_config(cfg.metrics, {}).basic_auth == ("prom", "from-file")


def test_tls(tmp_path: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl not installed")
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    _, _, server, thread, base = _server(MetricsLimits(tls_cert_file=str(cert),
                                                       tls_key_file=str(key)))
    try:
        import ssl
        ctx = ssl.create_default_context(cafile=str(cert))
        ctx.check_hostname = False
        https = base.replace("http://127.0.0.1", "https://127.0.0.1")
        assert b"certmon_test" in urllib.request.urlopen(https + "/metrics", timeout=5,
                                                         context=ctx).read()
    finally:
        stop_metrics(server, thread)  # type: ignore[arg-type]


def test_busy_port_is_one_clear_line() -> None:
    with listening_port() as port:
        with pytest.raises(CertmonError) as err:
            serve_metrics(CollectorRegistry(), "127.0.0.1", port)
        assert str(err.value).startswith(f"cannot serve metrics on 127.0.0.1:{port}: ")
        assert "\n" not in str(err.value)


CONFIG = """
[[suites]]
name = "*"
models = ["*"]
audit_rate = 0.2
[[suites.certificates]]
name = "risk"
alpha = 0.12
delta = 0.1
methods = ["r_eval"]
[checkpoint]
dir = "{ck}"
every_events = 500
every_seconds = 0.1
[metrics]
port = {port}
idle_timeout = 30.0
[source]
kind = "file"
path = "{ev}"
max_events_per_second = 4000
[sinks]
alerts = "none"
requests = "none"
dead_letters = "none"
"""


@pytest.mark.integration
def test_idle_connections_do_not_stop_certmon_run(tmp_path: Path) -> None:
    """The measured attack: 300 idle connections against a 64-file limit while running."""
    spec = SimulationSpec(models=(SimModel("a", 0.03, 0.95),), examples=6000, audit_rate=0.2)
    ev = tmp_path / "ev.jsonl"
    ev.write_bytes(b"".join(iter_jsonl(spec, np.random.default_rng(1))))
    port = free_port()
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG.format(ck=tmp_path / "ck", ev=ev, port=port))
    cmd = certmon_command()

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    proc = subprocess.Popen([*cmd, "run", "--config", str(cfg), "--state-out",
                             str(tmp_path / "STATE.json")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=limit)
    idle: list[socket.socket] = []
    deadline = time.monotonic() + 60
    while proc.poll() is None and len(idle) < 300 and time.monotonic() < deadline:
        try:
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        except OSError:
            time.sleep(0.01)
    if len(idle) < 100:
        proc.kill()
        raise AssertionError(f"certmon ended before the attack: {proc.communicate()[1]!r}")
    _, err = proc.communicate(timeout=120)
    for s in idle:
        s.close()
    assert proc.returncode == 0, err.decode()
    assert (tmp_path / "ck" / "certmon.ckpt.json").exists()
    state = json.loads((tmp_path / "STATE.json").read_text())
    assert state["counters"]["events_in"] == len(ev.read_bytes().splitlines())  # every event
