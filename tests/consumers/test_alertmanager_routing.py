"""Every alert kind has a severity and a route, one incident pages once.

Unit level: the kind table covers :data:`monitor.alerts.ALERT_KINDS`, regressions are warning
or critical, the pushed and rule alerts of one condition share their alert name and labels
so the push inhibits its twin, an improvement ends the violated state alert. Against a real
Alertmanager with the shipped configuration: a certified model's regression, pushed and
rule-evaluated, leaves one unsuppressed alert (critical, CertmonCertificateLost); a regression
of a model that was never certified reaches the team as a warning; ``amtool`` routes every
severity to its receiver.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from consumers.alertmanager import AlertmanagerSink, alert_labels
from consumers.alertmanager.records import KINDS
from monitor.alerts import ALERT_KINDS
from tests.consumers.test_alertmanager import (  # noqa: F401  (the fixture)
    FakeAM,
    FakeClock,
    _wait_for,
    alertmanager,
    make_sink,
    record,
)
from tests.deploy.deploy_support import find_tool

yaml = pytest.importorskip("yaml")

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RECEIVER = {"critical": "pager", "warning": "team", "info": "info"}


def rule_alerts() -> dict[str, dict[str, Any]]:
    doc = yaml.safe_load((DEPLOY / "prometheus" / "rules" / "certmon-alerts.yml").read_text())
    return {r["alert"]: r for g in doc["groups"] for r in g["rules"] if "alert" in r}


def test_every_kind_has_a_severity_and_regressions_reach_the_team() -> None:
    assert set(KINDS) == set(ALERT_KINDS)
    for kind in ALERT_KINDS:
        _, severity, group = KINDS[kind]
        assert severity in RECEIVER and group in ("state", "once", "best", "comparison"), kind
        assert alert_labels({"kind": kind, "suite": "s", "model": "m"})["severity"] == severity
    assert KINDS["regression"][1] in ("warning", "critical")
    assert KINDS["certificate_lost"][1] == "critical"
    assert KINDS["judge_drift"][1] == "warning"


def test_pushed_and_rule_twins_share_name_severity_and_labels() -> None:
    """A rule mirroring a pushed kind has its alert name and severity, and the labels the
    inhibition compares (suite, model, certificate) are present on both or on neither."""
    rules = rule_alerts()
    assert "CertmonCertificateLostToRegression" not in rules  # one name per condition
    twins = {"violated", "certificate_lost", "regression", "judge_drift"}
    for kind in twins:
        name, severity, _ = KINDS[kind]
        rule = rules[name]
        assert rule["labels"] == {"severity": severity, "origin": "rules"}, name
        pushed = alert_labels({"kind": kind, "suite": "s", "model": "m", "certificate": "c",
                               "method": "k"})
        by = rule["expr"].split("by (", 1)[1].split(")", 1)[0]
        assert ("certificate" in pushed) == ("certificate" in by), name
    for kind in ("non_inferior", "inferior"):  # comparisons: the same four labels on both
        name, severity, _ = KINDS[kind]
        rule = rules[name]
        assert rule["labels"] == {"severity": severity, "origin": "rules"}, name
        pushed = alert_labels({"kind": kind, "suite": "s", "model": "b", "certificate": "c",
                               "method": "paired", "comparison": "c", "baseline": "a",
                               "candidate": "b"})
        by = rule["expr"].split("by (", 1)[1].split(")", 1)[0]
        assert {n.strip() for n in by.split(",")} == set(pushed) - {
            "alertname", "severity", "origin"}, name
    assert KINDS["inferior"][1] == "warning" and KINDS["non_inferior"][1] == "info"
    for name, rule in rules.items():
        assert rule["labels"]["origin"] == "rules", name  # as alertmanager.yml says


def test_improvement_resolves_the_violated_state_alert() -> None:
    am, clock = FakeAM(), FakeClock()
    sink = make_sink(am, clock)
    sink.emit(record("violated", round_=40))
    clock.now += 10
    sink.emit(record("improvement", round_=300))
    assert sink.active_alerts() == []  # the state alert resolved; improvement is one-shot
    resolved = [a for a in am.last() if a["labels"]["alertname"] == "CertmonCertificateViolated"]
    assert resolved and resolved[0]["endsAt"] == "2025-11-21T04:40:10.000000Z"
    assert next(a for a in am.last() if a["labels"]["alertname"] == "CertmonImprovement")[
        "labels"]["severity"] == "info"


def test_amtool_routes_every_severity_to_its_receiver() -> None:
    amtool = find_tool("amtool")
    config = DEPLOY / "alertmanager" / "alertmanager.yml"
    names = {(name, sev) for name, sev, _ in KINDS.values()}
    names |= {(n, r["labels"]["severity"]) for n, r in rule_alerts().items()}
    for name, severity in sorted(names):
        out = subprocess.run(
            [amtool, "config", "routes", "test", f"--config.file={config}",
             f"alertname={name}", f"severity={severity}", "suite=s", "model=m"],
            capture_output=True, text=True, timeout=30, check=False)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == RECEIVER[severity], (name, severity, out.stdout)


def _post(base: str, alerts: list[dict[str, Any]]) -> None:
    req = urllib.request.Request(base + "/api/v2/alerts", data=json.dumps(alerts).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=5).read()


def _rule_twin(name: str, severity: str, env: str, **labels: str) -> dict[str, Any]:
    return {"labels": {"alertname": name, "severity": severity, "origin": "rules", "env": env,
                       **labels}, "annotations": {"summary": "from rules"}}


def _unsuppressed(alerts: list[dict[str, Any]], env: str) -> list[dict[str, str]]:
    return [a["labels"] for a in alerts if a["labels"].get("env") == env
            and a["status"]["state"] == "active" and not a["status"]["inhibitedBy"]]


def _settled(env: str, total: int) -> Any:
    def ok(alerts: list[dict[str, Any]]) -> bool:
        mine = [a for a in alerts if a["labels"].get("env") == env]
        return len(mine) == total and all(a["status"]["state"] != "unprocessed" for a in mine)
    return ok


@pytest.mark.integration
def test_a_certified_models_regression_pages_once(alertmanager: str) -> None:  # noqa: F811
    """Engine alerts of a stream where certified models regress, pushed by the sink, plus the
    rule alerts Prometheus evaluates for the same certificates: one unsuppressed alert per
    model, critical CertmonCertificateLost; its regression and the next violation inhibited."""
    from tests.test_alert_evidence import stream_alerts

    env = "page-once"
    records = [a for a in stream_alerts(0.05) if a["model"].startswith("good")]
    assert {a["kind"] for a in records} >= {"certified", "regression", "certificate_lost",
                                             "violated"}
    sink = AlertmanagerSink(alertmanager, extra_labels={"env": env})
    for rec in records:
        sink.emit(dict(rec, ts=time.time()))
    sink.flush()
    models = sorted({a["model"] for a in records})
    twins = []
    for m in models:
        cert = {"suite": "ev", "model": m, "certificate": "risk"}
        twins += [_rule_twin("CertmonCertificateLost", "critical", env, **cert),
                  _rule_twin("CertmonRegression", "warning", env, **cert)]
    _post(alertmanager, twins)
    pushed = len(sink.active_alerts())
    alerts = _wait_for(alertmanager, _settled(env, pushed + len(twins)), timeout=15)
    loud = _unsuppressed(alerts, env)
    assert sorted((a["alertname"], a["model"], a["severity"], a["origin"]) for a in loud) == [
        ("CertmonCertificateLost", m, "critical", "certmon") for m in models], loud
    sink.reconcile({"suites": {}})
    sink.close()


@pytest.mark.integration
def test_regressions_and_judge_drift_reach_the_team_once(alertmanager: str) -> None:  # noqa: F811
    env = "team-once"
    sink = AlertmanagerSink(alertmanager, extra_labels={"env": env})
    now = time.time()
    reg = dict(record("regression", model="m-pend", ts=now),
               evidence={"statistic": 3e5, "threshold": 2.25e5, "risk_before": 0.05,
                         "risk_after": 0.3, "status_before": "pending"})
    drift = dict(record("judge_drift", model="m-judge", ts=now), method="judge", evidence={})
    sink.emit(reg)
    sink.emit(drift)
    sink.flush()
    _post(alertmanager, [
        _rule_twin("CertmonRegression", "warning", env, suite="qa", model="m-pend",
                   certificate="risk"),
        _rule_twin("CertmonJudgeDrift", "warning", env, suite="qa", model="m-judge")])
    alerts = _wait_for(alertmanager, _settled(env, 4), timeout=15)
    loud = _unsuppressed(alerts, env)
    assert sorted((a["alertname"], a["severity"], a["origin"]) for a in loud) == [
        ("CertmonJudgeDrift", "warning", "certmon"), ("CertmonRegression", "warning", "certmon")]
    sink.close()
