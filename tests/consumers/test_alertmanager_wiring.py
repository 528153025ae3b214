"""``[sinks] alerts = "alertmanager:URL"``: config, sink wiring, and a real ``certmon`` pushing
its alerts to a real Alertmanager (read back from ``GET /api/v2/alerts``)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from consumers.alertmanager import AlertmanagerSink
from consumers.alertmanager.wiring import (
    FanOutSink,
    alertmanager_urls,
    open_alert_sink,
    primary_view,
    take_over,
)
from monitor.config import parse_config
from monitor.errors import ConfigError, SinkError
from monitor.sinks import MemorySink, NullSink
from tests.consumers import test_alertmanager as am_support
from tests.support.processes import certmon_command

alertmanager = am_support.alertmanager  # the module-scoped real Alertmanager fixture

SUITE = "amtest"
CONFIG = """
[[suites]]
name = "amtest"
models = ["bad", "good"]
audit_rate = 0.5

[[suites.certificates]]
name = "risk"
alpha = 0.1
delta = 0.05
methods = ["r_eval", "r_autoeval_plus"]
primary = "r_autoeval_plus"
cs_grid = 100

[metrics]
enabled = false

[sinks]
alerts = ["file:{alerts_file}", "alertmanager:{url}"]

[sinks.alertmanager]
grafana_url = "http://grafana.test:3000"
resend_seconds = {resend}
lifetime_seconds = {lifetime}
timeout = 2.0
"""
BASE = "[[suites]]\n[[suites.certificates]]\nname='r'\nalpha=0.1\ndelta=0.1\n"


# ----------------------------------------------------------------------------- unit tests


def test_config_accepts_one_spec_or_a_list_and_the_settings_table() -> None:
    cfg = parse_config(BASE + "[sinks]\nalerts='alertmanager:http://am:9093'\n"
                       "[sinks.alertmanager]\ngrafana_url='http://g'\nresend_seconds=30\n")
    assert cfg.sinks.alert_specs == ["alertmanager:http://am:9093"]
    assert cfg.sinks.alertmanager.grafana_url == "http://g"
    assert cfg.sinks.alertmanager.resend_seconds == 30.0
    assert cfg.sinks.alertmanager.timeout == 5.0
    listed = parse_config(BASE, ['sinks.alerts=["stdout", "alertmanager:http://a,http://b"]'])
    assert listed.sinks.alert_specs == ["stdout", "alertmanager:http://a,http://b"]
    assert parse_config(BASE).sinks.alert_specs == ["stdout"]
    with pytest.raises(ConfigError, match=r"sinks\.alertmanager\.nope"):
        parse_config(BASE + "[sinks.alertmanager]\nnope=1\n")
    with pytest.raises(ConfigError, match="resend_seconds"):
        parse_config(BASE, ["sinks.alertmanager.resend_seconds=0"])


def test_open_alert_sink_variants() -> None:
    cfg = parse_config(BASE, ["sinks.alerts=alertmanager:http://am-0:9093,http://am-1:9093",
                              "sinks.alertmanager.resend_seconds=7"])
    sink = open_alert_sink(cfg.sinks)
    assert isinstance(sink, AlertmanagerSink)
    assert [t.url for t in sink._targets] == [
        "http://am-0:9093/api/v2/alerts", "http://am-1:9093/api/v2/alerts"]
    assert sink._resend == 7.0
    sink.close()
    fan = open_alert_sink(parse_config(BASE, ['sinks.alerts=["memory", "none"]']).sinks)
    assert isinstance(fan, FanOutSink)
    assert [type(s) for s in fan.sinks] == [MemorySink, NullSink]
    # The --alerts-out flag replaces the configured sinks.
    assert isinstance(open_alert_sink(cfg.sinks, override="none"), NullSink)
    kafka = MemorySink()
    assert open_alert_sink(parse_config(BASE, ["sinks.alerts=kafka"]).sinks,
                           kafka=lambda: kafka) is kafka
    with pytest.raises(SinkError, match="Kafka"):
        open_alert_sink(parse_config(BASE, ["sinks.alerts=kafka"]).sinks)
    with pytest.raises(SinkError, match="not an http"):
        alertmanager_urls("alertmanager:am:9093")
    with pytest.raises(SinkError, match="expected"):
        alertmanager_urls("alertmanager:")


def test_fan_out_emits_to_every_sink_and_closes_all() -> None:
    a, b = MemorySink(), MemorySink()

    class Failing(MemorySink):
        def close(self) -> None:
            raise OSError("boom")

    fan = FanOutSink([a, Failing(), b])
    fan.emit({"k": 1})
    fan.flush()
    assert a.records == b.records == [{"k": 1}]
    closed: list[str] = []
    b.close = lambda: closed.append("b")  # type: ignore[method-assign]
    with pytest.raises(OSError, match="boom"):
        fan.close()
    assert closed == ["b"]


def _view(primary_status: str, other_status: str) -> dict[str, Any]:
    def method(status: str, primary: bool) -> dict[str, Any]:
        return {"status": status, "primary": primary, "certified_at_round": None,
                "violated_at_round": 40 if status == "violated" else None, "rounds": 50,
                "status_changed_ts": 1_763_699_000.0}

    return {"suites": {"qa": {"models": {"m1": {"certificates": {"risk": {"methods": {
        "r_eval": method(other_status, False),
        "r_autoeval_plus": method(primary_status, True),
    }}}}}}}}


def test_take_over_reconciles_primary_methods_only() -> None:
    view = _view("violated", "violated")
    kept = primary_view(view)["suites"]["qa"]["models"]["m1"]["certificates"]["risk"]["methods"]
    assert list(kept) == ["r_autoeval_plus"]
    posted: list[list[dict[str, Any]]] = []

    def transport(url: str, body: bytes, timeout: float) -> int:
        posted.append(json.loads(body))
        return 200

    am = AlertmanagerSink("http://am:9093", transport=transport)
    fan = FanOutSink([MemorySink(), am])
    assert take_over(fan, view, start=False) == 1
    assert [(a["labels"]["alertname"], a["labels"]["method"]) for a in posted[-1]] == [
        ("CertmonCertificateViolated", "r_autoeval_plus")]
    # A later take-over that sees the certificate pending resolves the alert.
    take_over(am, _view("pending", "violated"), start=False)
    assert posted[-1][0]["labels"]["method"] == "r_autoeval_plus"
    assert am.active_alerts() == []
    assert take_over(MemorySink(), view) == 0
    am.close()


def test_deploy_configs_push_to_alertmanager() -> None:
    yaml = pytest.importorskip("yaml")
    deploy = Path(__file__).resolve().parents[2] / "deploy"
    compose = (deploy / "certmon" / "certmon.toml").read_text()
    docs = {d["kind"]: d for d in yaml.safe_load_all((deploy / "k8s" / "configmap.yaml")
                                                      .read_text()) if d}
    for text in (compose, docs["ConfigMap"]["data"]["certmon.toml"]):
        sinks = parse_config(text).sinks
        fan = open_alert_sink(sinks, kafka=MemorySink)
        assert isinstance(fan, FanOutSink)
        assert [type(s) for s in fan.sinks] == [MemorySink, AlertmanagerSink]
        fan.close()


# ----------------------------------------------------------------------------- integration


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*certmon_command(), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.returncode == 0, f"certmon {args} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def _ours(alerts: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(a["labels"]["alertname"], a["labels"]["model"], a["labels"]["method"]): a
            for a in alerts if a["labels"].get("suite") == SUITE}


@pytest.mark.integration
def test_certmon_replay_and_run_push_to_real_alertmanager(alertmanager: str,
                                                           tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    # "bad" has risk 0.6 against alpha 0.1: its certificate is violated within a few rounds.
    _run(["simulate", "--out", str(events), "--suite", SUITE, "--model", "bad:0.6:0.9",
          "--model", "good:0.01:0.95", "--audit-rate", "0.5", "--examples", "400",
          "--seed", "3"], tmp_path)
    alerts_file = tmp_path / "alerts.jsonl"
    config = tmp_path / "certmon.toml"
    # resend_seconds = 1, lifetime_seconds = 4: an alert lives 4 s after the last send.
    config.write_text(CONFIG.format(alerts_file=alerts_file, url=alertmanager, resend=1.0,
                                    lifetime=4.0))
    ckpt = tmp_path / "ckpt"

    # 1. certmon replay pushes every alert record as it is emitted.
    _run(["replay", "--config", str(config), "--input", str(events), "--state-out",
          str(tmp_path / "STATE.json"), "--checkpoint-dir", str(ckpt), "--quiet"], tmp_path)
    records = [json.loads(line) for line in alerts_file.read_text().splitlines()]
    violated = [r for r in records if r["kind"] == "violated" and r["model"] == "bad"]
    assert violated, records
    key = ("CertmonCertificateViolated", "bad", "r_autoeval_plus")
    alerts = am_support._wait_for(alertmanager, lambda a: key in _ours(a))
    alert = _ours(alerts)[key]
    assert alert["labels"]["severity"] == "critical"
    assert alert["labels"]["origin"] == "certmon"
    assert alert["labels"]["certificate"] == "risk"
    assert alert["annotations"]["alert_id"] == violated[0]["id"]
    assert json.loads(alert["annotations"]["evidence"])["log_e_value"] == pytest.approx(
        violated[0]["evidence"]["log_e_value"])
    assert alert["annotations"]["dashboard"].startswith("http://grafana.test:3000/d/")
    assert alert["status"]["state"] == "active"
    # Only the primary method alerts (the engine emits records for it alone).
    assert {k[2] for k in _ours(alerts)} == {"r_autoeval_plus"}
    if any(r["kind"] == "certified" and r["model"] == "good" for r in records):
        assert ("CertmonCertificateCertified", "good", "r_autoeval_plus") in _ours(alerts)

    # 2. The process is gone: nobody re-sends, so the alert expires from Alertmanager.
    alerts = am_support._wait_for(alertmanager, lambda a: key not in _ours(a), timeout=20)
    assert key not in _ours(alerts)

    # 3. A restarted certmon (now `certmon run`, same checkpoint) takes the alert over at
    #    start-up from its restored state, although no new event crosses anything.
    _run(["run", "--config", str(config), "--set", f"checkpoint.dir={json.dumps(str(ckpt))}",
          "--set", 'source.kind="file"', "--set", f"source.path={json.dumps(str(events))}"],
         tmp_path)
    alerts = am_support._wait_for(alertmanager, lambda a: key in _ours(a))
    assert _ours(alerts)[key]["labels"]["severity"] == "critical"


def test_runner_flush_never_blocks_on_a_dead_alertmanager() -> None:
    am, clock = am_support.FakeAM(), am_support.FakeClock()
    sink = open_alert_sink(parse_config(BASE, ["sinks.alerts=alertmanager:http://am:9093"]).sinks)
    assert isinstance(sink, AlertmanagerSink)
    sink._transport, sink._clock, sink._sleep = am, clock, clock.sleep
    am.down = True
    sink.emit(am_support.record("violated"))
    assert am.attempts == 1
    t0 = clock.now
    sink.flush()  # in backoff: no attempt, no sleep (the runner flushes before checkpoints)
    assert am.attempts == 1 and clock.now == t0
    clock.now += 60
    sink.flush()  # backoff over: exactly one attempt, still no sleep
    assert am.attempts == 2 and clock.now == t0 + 60
    am.down = False
    sink.close()  # close retries, with waits bounded by CLOSE_BACKOFF_MAX
    assert am.posts and am.posts[-1][1][0]["labels"]["alertname"] == "CertmonCertificateViolated"
    assert clock.now - (t0 + 60) <= 5.0
