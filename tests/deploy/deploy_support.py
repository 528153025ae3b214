"""A certmon serving /metrics for the deploy tests, and helpers to read its exposition.

``start_certmon`` runs a real ``certmon run`` process (file source, follow mode) on a small
simulated stream when the CLI is installed, else the engine in-process behind
``monitor.metrics.serve_metrics``. Either way ``expected_state`` is computed by feeding the
same bytes to an in-process ``Engine`` (processing is deterministic), so scraped values can
be compared with the state exactly.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from monitor.config import parse_config
from monitor.engine import Engine
from monitor.metrics import OperationalMetrics, StateCollector, serve_metrics, stop_metrics
from monitor.simulate import SimModel, SimulationSpec, iter_jsonl
from tests.support.processes import free_port, log_tail, start_logged, stop

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DASHBOARDS = sorted((DEPLOY / "grafana" / "dashboards").glob("*.json"))
RULES = sorted((DEPLOY / "prometheus" / "rules").glob("*.yml"))
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
SUITE = "deploy"
CONFIG = """
[[suites]]
name = "*"
models = ["*"]
audit_rate = 0.5

[[suites.certificates]]
name = "risk"
alpha = 0.1
delta = 0.05
methods = ["r_eval", "r_autoeval", "r_autoeval_plus"]
primary = "r_autoeval_plus"
betting = "wsr"
rhos = 10

# a live split (unpaired: the models keep their own audit coins): bad is inferior to good,
# good non-inferior to bad, so both one-sided bounds of the comparison row have data
[[suites.comparisons]]
name = "bad-vs-good"
baseline = "good"
candidate = "bad"
design = "unpaired"

[[suites.comparisons]]
name = "good-vs-bad"
baseline = "bad"
candidate = "good"
design = "unpaired"
"""
BAD_LINES = [b"{not json", b'{"type": "judge"}', b"\xff\xfe"]
DETAIL = parse_config(CONFIG).metrics.detail  # the default: what the deploy files get



def simulated_events() -> list[bytes]:
    """~6k events: a good model (certified), a bad one (violated), three rejects, a duplicate."""
    spec = SimulationSpec(
        suite=SUITE,
        models=(SimModel("good", risk=0.03, judge_accuracy=0.95),
                SimModel("bad", risk=0.3, judge_accuracy=0.9)),
        examples=2000, audit_rate=0.5, unsolicited_rate=0.002,
    )
    lines = [line.rstrip(b"\n") for line in iter_jsonl(spec, np.random.default_rng(11))]
    return [*lines[:100], *BAD_LINES, lines[50], *lines[100:]]


def shown_methods(state: dict[str, Any], suite: str = SUITE) -> set[tuple[str, str]]:
    """(model, method) pairs whose per-method series a scrape shows at ``DETAIL``."""
    return {(model, method) for model, mv in state["suites"][suite]["models"].items()
            for method, view in mv["certificates"]["risk"]["methods"].items()
            if DETAIL == "full" or view["primary"]}


def expected_state(events: list[bytes]) -> dict[str, Any]:
    engine = Engine(parse_config(CONFIG))
    for raw in events:
        engine.process(raw)
    return engine.state_view()


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Parse a /metrics page into {(sample name, sorted labels): value}."""
    with urllib.request.urlopen(url, timeout=5) as resp:
        text = resp.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text) for s in family.samples
    }


def exposed_names(url: str) -> set[str]:
    """Every metric name a query may use on a /metrics page (e.g. certmon_foo_total too)."""
    with urllib.request.urlopen(url, timeout=5) as resp:
        return names_in_exposition(resp.read().decode())


SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"),
            "summary": ("_sum", "_count"), "info": ("_info",)}


def names_in_exposition(text: str) -> set[str]:
    """Family names, their sample names, and typed suffixes even for families without samples."""
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ()))
        names.update(s.name for s in family.samples)
    return names


def walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


def dashboard_queries() -> dict[str, list[str]]:
    """{dashboard file: [every PromQL expression, including template variable queries]}."""
    out: dict[str, list[str]] = {}
    for path in DASHBOARDS:
        doc = json.loads(path.read_text())
        exprs = [n["expr"] for n in walk(doc["panels"]) if isinstance(n.get("expr"), str)]
        exprs += [v["query"]["query"] for v in doc["templating"]["list"] if v["type"] == "query"]
        out[path.name] = exprs
    return out


def rule_exprs() -> tuple[list[str], set[str]]:
    exprs: list[str] = []
    import yaml  # PyYAML: see the report (installed here, not declared in pyproject)

    recorded: set[str] = set()
    for path in RULES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                exprs.append(rule["expr"])
                if "record" in rule:
                    recorded.add(rule["record"])
    return exprs, recorded


def metric_names(expr: str) -> set[str]:
    """certmon metric names and recorded series names (with a colon) used in a PromQL string."""
    bare = _STRING.sub('""', expr)
    return {t for t in _IDENT.findall(bare) if t.startswith("certmon_") or ":" in t}


@dataclass
class CertmonEndpoint:
    metrics_url: str
    mode: str  # "process" (real `certmon run`) or "in-process"
    events: list[bytes]
    state: dict[str, Any]
    close: Callable[[], None] = field(repr=False)


# Debian installs Alertmanager as prometheus-alertmanager; upstream tarballs as alertmanager.
TOOLS = {
    "promtool": ("promtool",),
    "prometheus": ("prometheus",),
    "alertmanager": ("prometheus-alertmanager", "alertmanager"),
    "amtool": ("amtool",),
}


def require_tools() -> bool:
    return os.environ.get("CERTMON_REQUIRE_TOOLS") == "1"


def find_tool(name: str) -> str:
    """Path of an external tool, or skip (fail when CERTMON_REQUIRE_TOOLS=1)."""
    for candidate in TOOLS[name]:
        path = shutil.which(candidate)
        if path:
            return path
    message = (f"{name} not found (apt-get install -y prometheus prometheus-alertmanager "
               "provides promtool, prometheus, prometheus-alertmanager and amtool)")
    if require_tools():
        pytest.fail(message)
    pytest.skip(message)


def _cli_available() -> bool:
    return importlib.util.find_spec("consumers.cli") is not None and (
        shutil.which("certmon") is not None)


def wait_processed(url: str, expected: dict[str, Any], proc: subprocess.Popen[bytes] | None,
                    log: Path | None, timeout: float = 30.0) -> None:
    """Wait until the scraped per-model round counts equal the expected state's."""
    want = {
        ("certmon_rounds_total", (("model", m), ("suite", s))): float(mv["counts"]["rounds"])
        for s, sv in expected["suites"].items() for m, mv in sv["models"].items()
    }
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            break
        try:
            got = scrape(url)
            last = {k: got.get(k) for k in want}
            if last == want:
                return
        except OSError as exc:
            last = exc
        time.sleep(0.2)
    raise AssertionError(
        f"certmon did not process the stream: {last!r} != {want!r}\n{log_tail(log)}")


def start_certmon(workdir: Path) -> CertmonEndpoint:
    events = simulated_events()
    state = expected_state(events)
    if _cli_available() and os.environ.get("CERTMON_DEPLOY_INPROCESS") != "1":
        return start_process(workdir, events, state)
    return _start_in_process(events, state)


def start_process(workdir: Path, events: list[bytes], state: dict[str, Any],
                  alertmanager: str | None = None) -> CertmonEndpoint:
    """``certmon run`` following ``workdir/events.jsonl`` (written from ``events``), once it has
    processed them; alerts also pushed to ``alertmanager`` (a base URL) when given."""
    port = free_port()
    alerts = f"file:{workdir / 'alerts.jsonl'}"
    alerts_sink = f'["{alerts}", "alertmanager:{alertmanager}"]' if alertmanager else f'"{alerts}"'

    stream = workdir / "events.jsonl"
    stream.write_bytes(b"\n".join(events) + b"\n")
    config = workdir / "certmon.toml"
    config.write_text(CONFIG + f"""
[metrics]
host = "127.0.0.1"
port = {port}

[checkpoint]
dir = "{workdir / 'checkpoints'}"
every_seconds = 1.0

[source]
kind = "file"
path = "{stream}"
follow = true

[sinks]
alerts = {alerts_sink}
requests = "none"
dead_letters = "file:{workdir / 'dead.jsonl'}"
""")
    log_path = workdir / "certmon.log"
    certmon = shutil.which("certmon") or "certmon"
    proc = start_logged([certmon, "run", "--config", str(config)], log_path, cwd=workdir)
    url = f"http://127.0.0.1:{port}/metrics"

    def close() -> None:
        stop(proc, timeout=10)

    try:
        wait_processed(url, state, proc, log_path)
    except BaseException:
        close()
        raise
    return CertmonEndpoint(url, "process", events, state, close)


def _start_in_process(events: list[bytes], state: dict[str, Any]) -> CertmonEndpoint:
    engine = Engine(parse_config(CONFIG))
    registry = CollectorRegistry()
    shown = DETAIL == "shown"  # as consumers/cli.py wires it
    registry.register(StateCollector(lambda: engine.state_view(shown), DETAIL))
    ops = OperationalMetrics(registry)
    for raw in events:
        start = time.perf_counter()
        ops.events_received()
        result = engine.process(raw)
        if result.rejection is not None:
            ops.rejected(result.rejection.reason)
        if result.duplicate is not None:
            ops.duplicate(result.duplicate)
        for alert in result.alerts:
            ops.alert_emitted(alert["kind"])
        ops.observe_event(time.perf_counter() - start)
    ops.checkpoint_written(0.01, time.time())
    ops.set_up(True)
    server, thread = serve_metrics(registry, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.server_port}/metrics"
    assert json.dumps(engine.state_view(), sort_keys=True) == json.dumps(state, sort_keys=True)
    return CertmonEndpoint(url, "in-process", events, state,
                           lambda: stop_metrics(server, thread))


if __name__ == "__main__":  # manual check: python tests/deploy/deploy_support.py
    ep = start_certmon(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/tmp"))
    print(ep.mode, ep.metrics_url)
    ep.close()
