"""Real Prometheus + Alertmanager against two live certmon replicas, in four scenarios.

Every dashboard panel query and every alert rule is evaluated in each scenario, and the
operator-facing truths are asserted:

1. healthy and busy: input flows into replica A; certificate alerts fire, no pipeline alert;
1b. a certified model regresses: one unsuppressed alert in Alertmanager (the pushed
   CertmonCertificateLost, critical, with the detector's evidence); the rule twins and the
   regression are inhibited, CertmonCertificateViolated stays silent;
2. healthy and idle: the input stops; checkpoints age past the (scaled) 15-minute threshold, yet
   no checkpoint alert is even pending (nothing waits for a checkpoint);
3. one of two replicas down: ``CertmonDown`` fires for it, the "certmon up" panel shows down,
   "Replicas up" shows 1, ``CertmonAbsent`` does not fire;
4. all down: ``CertmonAbsent`` fires and reaches Alertmanager, the up panel shows down and the
   certificate stats read "no data" (not a made-up 0).

The shipped rules run with time scaled down 60 times (``for: 5m`` -> 5 s, ``[15m]`` -> 15 s, the
900/3600 s checkpoint thresholds -> 15/60 s), evaluated and scraped every second: the whole
module takes about a minute.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor.metrics.operational import package_version
from monitor.simulate import SimModel, SimulationSpec, iter_jsonl
from tests.deploy.deploy_support import (
    DETAIL,
    SUITE,
    CertmonEndpoint,
    dashboard_queries,
    expected_state,
    find_tool,
    rule_exprs,
    simulated_events,
    start_process,
)
from tests.support.processes import free_port, start_daemon, stop, wait_until

yaml = pytest.importorskip("yaml")
pytestmark = pytest.mark.integration

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SCALE = 60  # rule durations and thresholds divided by this
PIPELINE_ALERTS = ("CertmonCheckpointStale", "CertmonCheckpointMissing", "CertmonDown",
                   "CertmonNotProcessing",
                   "CertmonAbsent", "CertmonCheckpointFailing", "CertmonDeadLettersRising",
                   "CertmonEventsUnrouted")
SUBSTITUTIONS = {"$__rate_interval": "5s", "$suite": SUITE, "$model": "good",
                 "$certificate": "risk", "$method": "r_autoeval_plus"}


def scaled(duration: str) -> str:
    """``5m`` -> ``5s``, ``1h`` -> ``60s``: a Prometheus duration divided by SCALE."""
    match = re.fullmatch(r"(\d+)([smh])", duration)
    assert match, duration
    seconds = int(match.group(1)) * {"s": 1, "m": 60, "h": 3600}[match.group(2)]
    return f"{max(1, seconds // SCALE)}s"


def scaled_rules(workdir: Path) -> list[str]:
    files = []
    for path in sorted((DEPLOY / "prometheus" / "rules").glob("*.yml")):
        doc = yaml.safe_load(path.read_text())
        for group in doc["groups"]:
            group["interval"] = "1s"
            for rule in group["rules"]:
                for key in ("for", "keep_firing_for"):
                    if key in rule:
                        rule[key] = scaled(rule[key])
                expr = re.sub(r"\[(\d+[smh])\]", lambda m: f"[{scaled(m.group(1))}]",
                              rule["expr"])
                if rule.get("alert") == "CertmonCheckpointStale":
                    expr, n = re.subn(r"> (900|3600)\b",
                                      lambda m: f"> {int(m.group(1)) // SCALE}", expr)
                    assert n == 1, rule["expr"]
                rule["expr"] = expr
        (workdir / path.name).write_text(yaml.safe_dump(doc))
        files.append(str(workdir / path.name))
    return files


@dataclass
class Stack:
    prometheus: str
    alertmanager: str
    replicas: dict[str, CertmonEndpoint]
    stream: Path  # replica "a"'s followed input file
    started: float


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prometheus_bin, am_bin = find_tool("prometheus"), find_tool("alertmanager")
    base = tmp_path_factory.mktemp("scenarios")
    procs: list[subprocess.Popen[bytes]] = []
    replicas: dict[str, CertmonEndpoint] = {}
    started = time.time()
    try:
        am_port = free_port()
        am = f"http://127.0.0.1:{am_port}"
        procs.append(start_daemon(
            [am_bin, f"--config.file={DEPLOY / 'alertmanager' / 'alertmanager.yml'}",
             f"--storage.path={base / 'am'}", f"--web.listen-address=127.0.0.1:{am_port}",
             "--cluster.listen-address=", "--log.level=warn"],
            base / "am.log", am + "/-/ready"))
        events = simulated_events()
        state = expected_state(events)
        for name in ("a", "b"):
            (base / name).mkdir()
            replicas[name] = start_process(base / name, events, state, alertmanager=am)
        targets = [urllib.parse.urlsplit(r.metrics_url).netloc for r in replicas.values()]
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": scaled_rules(base),
            "alerting": {"alertmanagers": [{"static_configs": [
                {"targets": [f"127.0.0.1:{am_port}"]}]}]},
            "scrape_configs": [{"job_name": "certmon",
                                "static_configs": [{"targets": targets}]}],
        }
        (base / "prometheus.yml").write_text(yaml.safe_dump(config))
        prom_port = free_port()
        procs.append(start_daemon(
            [prometheus_bin, f"--config.file={base / 'prometheus.yml'}",
             f"--storage.tsdb.path={base / 'data'}",
             f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
            base / "prometheus.log", f"http://127.0.0.1:{prom_port}/-/ready"))
        yield Stack(f"http://127.0.0.1:{prom_port}", am, replicas, base / "a" / "events.jsonl",
                    started)
    finally:
        for replica in replicas.values():
            replica.close()
        for proc in procs:
            stop(proc)


def query(base: str, promql: str) -> dict[str, Any]:
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            body: dict[str, Any] = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        body = json.loads(exc.read())
    return body


def result(base: str, promql: str) -> list[dict[str, Any]]:
    body = query(base, promql)
    assert body["status"] == "success", (promql, body)
    out: list[dict[str, Any]] = body["data"]["result"]
    return out


def alerts(base: str, state: str = "firing") -> set[tuple[str, str]]:
    """(alertname, instance) of the alerts in ``state`` (pending or firing)."""
    return {(r["metric"]["alertname"], r["metric"].get("instance", ""))
            for r in result(base, f'ALERTS{{alertstate="{state}"}}')}


def pipeline_alerts(base: str) -> set[tuple[str, str]]:
    return {a for s in ("pending", "firing") for a in alerts(base, s)
            if a[0] in PIPELINE_ALERTS}


def panel_expr(title: str) -> str:
    doc = json.loads((DEPLOY / "grafana" / "dashboards" / "certmon-fleet.json").read_text())
    (panel,) = [p for p in doc["panels"] if p["title"] == title]
    expr: str = panel["targets"][0]["expr"]
    return expr


def fleet_panel(title: str) -> dict[str, Any]:
    doc = json.loads((DEPLOY / "grafana" / "dashboards" / "certmon-fleet.json").read_text())
    (panel,) = [p for p in doc["panels"] if p["title"] == title or p["title"].startswith(title)]
    return dict(panel)


def query_at(base: str, promql: str, at: float) -> list[dict[str, Any]]:
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": promql, "time": at})
    with urllib.request.urlopen(url, timeout=5) as resp:
        body: dict[str, Any] = json.loads(resp.read())
    assert body["status"] == "success", (promql, body)
    rows: list[dict[str, Any]] = body["data"]["result"]
    return rows


def check_fleet_panels(base: str, replicas: int) -> None:
    """The fleet panels that once misreported: Version shows the version (not a count), the
    risk panel draws alpha and follows the $method variable (no hard-coded method)."""
    version = fleet_panel("Version")
    assert version["options"]["textMode"] == "name"
    assert version["targets"][0]["legendFormat"] == "{{version}}"
    rows = result(base, version["targets"][0]["expr"])
    assert [(r["metric"]["version"], r["value"][1]) for r in rows] == [
        (package_version(), str(replicas))]
    risk = fleet_panel("Two-sided confidence sequence, upper end, vs alpha")
    assert "$method" in risk["title"] and 'method="r_autoeval_plus"' not in json.dumps(risk)
    exprs = [t["expr"] for t in risk["targets"]]
    assert any("certmon_certificate_alpha" in e for e in exprs)
    # [metrics] detail = "shown" exports the primary method only (every method with "full")
    methods = ("r_eval", "r_autoeval", "r_autoeval_plus") if DETAIL == "full" else (
        "r_autoeval_plus",)
    for method in methods:
        for expr in exprs:
            expr = expr.replace("$method", method).replace("$suite", ".*").replace("$model", ".*")
            assert result(base, expr), (method, expr)  # the alpha line and each method's bound


def panel_value(base: str, title: str) -> float | None:
    """What a stat panel shows: its single value, or None for "no data"."""
    expr = panel_expr(title)
    for var, value in {**SUBSTITUTIONS, "$suite": ".*", "$model": ".*"}.items():  # "All"
        expr = expr.replace(var, value)
    rows = result(base, expr)
    assert len(rows) <= 1, (title, rows)
    return float(rows[0]["value"][1]) if rows else None


def evaluate_everything(base: str) -> int:
    """Run every dashboard query and every rule expression; all must be valid. Returns count."""
    exprs = [q for queries in dashboard_queries().values() for q in queries
             if not q.startswith("label_values(")]
    exprs += rule_exprs()[0]
    for expr in exprs:
        for var, value in SUBSTITUTIONS.items():
            expr = expr.replace(var, value)
        body = query(base, expr)
        assert body["status"] == "success", (expr, body)
    return len(exprs)


def feed(stream: Path, stop_event: threading.Event) -> None:
    """Append fresh events to replica a's followed file until told to stop."""
    spec = SimulationSpec(suite="busy", models=(SimModel("m", risk=0.05, judge_accuracy=0.9),),
                          examples=200_000, audit_rate=0.5)
    lines = iter_jsonl(spec, np.random.default_rng(5))
    with open(stream, "ab") as out:
        while not stop_event.is_set():
            out.write(b"".join(next(lines) for _ in range(200)))
            out.flush()
            stop_event.wait(0.1)


def regression_phase(stack: Stack) -> None:
    """A certified model regresses: one page, CertmonCertificateLost, whose pushed
    evidence states the detector's statistic and the risk before and after; its rule twin, the
    regression (pushed and rule) and the new epoch's violation are inhibited or silent; the
    change-detection panel has data."""
    prom, am = stack.prometheus, stack.alertmanager
    spec = SimulationSpec(suite="drift", models=(
        SimModel("d", risk=0.02, judge_accuracy=0.9, drift_risk=0.5),), examples=2000,
        audit_rate=0.5, drift_at=1000, unsolicited_rate=0.0)
    lines = list(iter_jsonl(spec, np.random.default_rng(7)))
    d = '{suite="drift", model="d", certificate="risk"}'
    with open(stack.stream, "ab") as out:  # before the change: certified, its series scraped
        out.writelines(lines[:len(lines) * 2 // 5])
    wait_until(lambda: bool(result(prom, 'certmon_certificate_state{suite="drift", '
                                         'state="certified"} == 1')), "drift/d certified", 30)
    time.sleep(2)  # a few scrapes at regressions_total 0, so increase() sees the change
    with open(stack.stream, "ab") as out:
        out.writelines(lines[len(lines) * 2 // 5:])
    wait_until(lambda: bool(result(prom, f"certmon_certificate_lost{d} == 1")),
               "the certificate of drift/d lost", 30)
    wait_until(lambda: ("CertmonCertificateLost", "") in alerts(prom), "the Lost rule firing",
               20)
    evaluate_everything(prom)
    mine = {a for s in ("pending", "firing") for a in result(prom, f'ALERTS{{alertstate="{s}", '
            'suite="drift"}') for a in [a["metric"]["alertname"]]}
    assert "CertmonCertificateViolated" not in mine  # the lost certificate pages as Lost only
    assert result(prom, f"certmon_regression_statistic{d}")  # the change panel has data

    def am_drift() -> list[dict[str, Any]]:
        with urllib.request.urlopen(am + "/api/v2/alerts", timeout=5) as resp:
            body: list[dict[str, Any]] = json.loads(resp.read())
        return [a for a in body if a["labels"].get("suite") == "drift"
                and a["status"]["state"] != "unprocessed"]

    def settled() -> bool:
        seen = {(a["labels"]["alertname"], a["labels"]["origin"]) for a in am_drift()}
        return {("CertmonCertificateLost", "certmon"), ("CertmonCertificateLost", "rules"),
                ("CertmonRegression", "rules")} <= seen
    try:
        wait_until(settled, "pushed and rule alerts of drift/d in Alertmanager", 30)
    except AssertionError as exc:
        raise AssertionError([(a["labels"], a["status"]) for a in am_drift()]) from exc
    loud = [a for a in am_drift() if a["status"]["state"] == "active"]
    assert [(a["labels"]["alertname"], a["labels"]["origin"], a["labels"]["severity"])
            for a in loud] == [("CertmonCertificateLost", "certmon", "critical")], loud
    text = loud[0]["annotations"]["description"]
    assert "regression detector statistic" in text and " -> " in text, text
    assert "log e-value" not in text and "risk in [" not in text, text


def test_four_scenarios(stack: Stack) -> None:
    prom, am = stack.prometheus, stack.alertmanager
    up_panel, replicas_panel = "certmon up", "Replicas up"

    # 1. healthy and busy
    stop_feeding = threading.Event()
    feeder = threading.Thread(target=feed, args=(stack.stream, stop_feeding), daemon=True)
    feeder.start()
    try:
        wait_until(lambda: bool(result(prom, 'increase(certmon_events_received_total{'
                                             'instance=~".+"}[3s]) > 0')), "busy input", 20,
                   interval=0.25)
        wait_until(lambda: ("CertmonCertificateViolated", "") in alerts(prom),
                   "certificate alert firing", 20, interval=0.25)
        evaluated = evaluate_everything(prom)
        assert evaluated > 60
        assert panel_value(prom, up_panel) == 1
        assert panel_value(prom, replicas_panel) == 2
        # model "bad": its primary method (every method with [metrics] detail = "full")
        assert panel_value(prom, "Violated certificates") == (3 if DETAIL == "full" else 1)
        check_fleet_panels(prom, replicas=2)
        age = panel_value(prom, "Checkpoint age")  # replica a, whose events wait: fresh
        assert age is not None and age < 900 // SCALE
        assert pipeline_alerts(prom) == set()
    finally:
        stop_feeding.set()
        feeder.join(5)

    # 1b. a certified model regresses: one page
    regression_phase(stack)
    violated = panel_value(prom, "Violated certificates")  # now drift/d's new epoch too
    assert violated is not None and violated > (3 if DETAIL == "full" else 1)

    # 2. healthy and idle: checkpoints age past the scaled threshold without any alert
    wait_until(lambda: result(prom, "sum(certmon_checkpoint_pending_events)")[0]["value"][1]
               == "0", "the last events checkpointed", 20, interval=0.25)
    stale_age = 900 // SCALE + 5 + 3  # threshold, `for`, margin
    deadline = time.monotonic() + stale_age
    while time.monotonic() < deadline:
        assert pipeline_alerts(prom) == set()
        time.sleep(1)
    # idle is healthy: the panel reads 0 (green), not the raw age past the red threshold,
    # although both replicas' last checkpoints are that old
    at = time.time()
    (shown,) = query_at(prom, panel_expr("Checkpoint age"), at)
    assert float(shown["value"][1]) == 0.0
    ages = {r["metric"]["instance"]: float(r["value"][1]) for r in query_at(
        prom, "time() - (certmon_checkpoint_last_success_timestamp_seconds > 0)", at)}
    assert len(ages) == 2 and min(ages.values()) > 900 // SCALE, ages
    # the wall-clock-only rule this replaces would have paged here
    assert len(result(prom, "time() - (certmon_checkpoint_last_success_timestamp_seconds > 0)"
                            f" > {900 // SCALE}")) == 2
    evaluate_everything(prom)
    assert pipeline_alerts(prom) == set()

    # 3. one of two replicas down
    b = urllib.parse.urlsplit(stack.replicas["b"].metrics_url).netloc
    stack.replicas["b"].close()
    wait_until(lambda: ("CertmonDown", b) in alerts(prom), "CertmonDown for replica b", 20,
               interval=0.25)
    evaluate_everything(prom)
    assert panel_value(prom, up_panel) == 0
    assert panel_value(prom, replicas_panel) == 1
    assert pipeline_alerts(prom) == {("CertmonDown", b)}
    assert panel_value(prom, "Violated certificates") == violated

    # 4. all down
    stack.replicas["a"].close()
    wait_until(lambda: ("CertmonAbsent", "") in alerts(prom), "CertmonAbsent firing", 20,
               interval=0.25)
    evaluate_everything(prom)
    assert panel_value(prom, up_panel) == 0
    assert panel_value(prom, replicas_panel) == 0
    for title in ("Certified certificates", "Violated certificates", "Pending certificates",
                  "Labels received (all models)", "Label requests pending"):
        assert panel_value(prom, title) is None, title  # "no data", never a made-up 0

    # Alertmanager got Prometheus' absence alert, and the alerts certmon pushed itself carry the
    # processing time as startsAt (the simulated events are from 2023) and the event time apart.
    def am_alerts() -> list[dict[str, Any]]:
        with urllib.request.urlopen(am + "/api/v2/alerts", timeout=5) as resp:
            body: list[dict[str, Any]] = json.loads(resp.read())
        return body

    wait_until(lambda: any(a["labels"]["alertname"] == "CertmonAbsent" for a in am_alerts()),
               "CertmonAbsent in Alertmanager", 20, interval=0.25)
    pushed = [a for a in am_alerts() if a["labels"].get("origin") == "certmon"]
    assert pushed
    for alert in pushed:
        starts = time.mktime(time.strptime(alert["startsAt"][:19], "%Y-%m-%dT%H:%M:%S"))
        starts -= time.timezone
        assert starts >= stack.started - 5, alert["startsAt"]
        assert alert["annotations"]["event_time"].startswith("2023-"), alert["annotations"]
