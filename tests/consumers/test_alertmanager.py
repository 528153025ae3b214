from __future__ import annotations

import json
import os
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from consumers.alertmanager import AlertmanagerSink, alert_labels
from tests.support.processes import free_port, kill9, start_daemon

# ----------------------------------------------------------------------------- helpers


class FakeClock:
    def __init__(self, now: float = 1_763_700_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class FakeAM:
    """Records POSTed payloads; fails while ``down`` (network error) or with ``status``."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, list[dict[str, Any]]]] = []
        self.down = False
        self.status = 200
        self.attempts = 0

    def __call__(self, url: str, body: bytes, timeout: float) -> int:
        self.attempts += 1
        if self.down:
            raise ConnectionRefusedError("down")
        if self.status >= 400:
            raise urllib.error.HTTPError(url, self.status, "err", None, None)  # type: ignore[arg-type]
        self.posts.append((url, json.loads(body)))
        return self.status

    def last(self) -> list[dict[str, Any]]:
        return self.posts[-1][1]


def record(kind: str, model: str = "m1", round_: int = 100, method: str = "r_autoeval_plus",
           ts: float = 1_763_699_990.0) -> dict[str, Any]:
    return {
        "id": f"id-{kind}-{model}-{round_}", "kind": kind, "suite": "qa", "model": model,
        "certificate": "risk", "method": method, "round": round_, "ts": ts,
        "evidence": {"verdict": "violated", "test": "violate", "log_e_value": 3.75,
                     "log_threshold": 3.6889, "rounds": round_, "risk_lower_bound": 0.1,
                     "bound_confidence": 0.975, "two_sided_cs_lower": 0.021,
                     "two_sided_cs_upper": 0.94, "rho_weights": [0.5, 0.5]},
    }


def make_sink(am: FakeAM, clock: FakeClock, **kw: Any) -> AlertmanagerSink:
    return AlertmanagerSink(
        "http://am:9093/", grafana_url="http://grafana:3000/", clock=clock, sleep=clock.sleep,
        transport=am, **kw,
    )


# ----------------------------------------------------------------------------- unit tests


def test_labels_annotations_and_times() -> None:
    am, clock = FakeAM(), FakeClock()
    sink = make_sink(am, clock, extra_labels={"env": "prod"})
    sink.emit(record("violated"))
    url, alerts = am.posts[0]
    assert url == "http://am:9093/api/v2/alerts"
    (alert,) = alerts
    assert alert["labels"] == {
        "alertname": "CertmonCertificateViolated", "severity": "critical", "origin": "certmon",
        "suite": "qa", "model": "m1", "certificate": "risk", "method": "r_autoeval_plus",
        "env": "prod",
    }
    ann = alert["annotations"]
    assert ann["description"] == (
        "risk >= 0.1 (one-sided, 97.5% confidence); violate log e-value 3.75 >= threshold "
        "3.689; 100 rounds"
    )
    assert ann["alert_id"] == "id-violated-m1-100"
    assert json.loads(ann["evidence"])["rho_weights"] == [0.5, 0.5]
    assert ann["dashboard"] == (
        "http://grafana:3000/d/certmon-model/certmon-model?var-suite=qa&var-model=m1"
    )
    assert alert["generatorURL"] == ann["dashboard"]
    # startsAt = processing time (the sink's clock), not the event's ts; the latter is annotated
    assert alert["startsAt"] == "2025-11-21T04:40:00.000000Z"
    assert ann["event_time"] == "2025-11-21T04:39:50.000000Z"
    assert alert["endsAt"] == "2025-11-21T05:40:00.000000Z"  # now + 1 h (the default lifetime)


def test_label_set_is_stable_across_rounds_and_replays() -> None:
    a = alert_labels(record("certified", round_=10))
    b = alert_labels(record("certified", round_=999, ts=0.0))
    assert a == b


def test_state_transitions_resolve_previous_alert() -> None:
    am, clock = FakeAM(), FakeClock()
    sink = make_sink(am, clock)
    sink.emit(record("certified", round_=80))
    assert [a["labels"]["alertname"] for a in am.last()] == ["CertmonCertificateCertified"]
    clock.now += 10
    sink.emit(record("certificate_lost", round_=300))
    names = [(a["labels"]["alertname"], a["endsAt"]) for a in am.last()]
    # resolution first (endsAt = now), then the new alert
    assert names[0] == ("CertmonCertificateCertified", "2025-11-21T04:40:10.000000Z")
    assert names[1][0] == "CertmonCertificateLost"
    # a later `violated` for the same key is absorbed by the more specific Lost alert
    posts = len(am.posts)
    sink.emit(record("violated", round_=300))
    assert len(am.posts) == posts
    assert [a["alertname"] for a in sink.active_alerts()] == ["CertmonCertificateLost"]
    # replaying the same record does not post again
    sink.emit(record("certificate_lost", round_=300))
    assert len(am.posts) == posts


def test_periodic_resend_while_active_and_not_after_resolution() -> None:
    am, clock = FakeAM(), FakeClock()
    sink = make_sink(am, clock, resend_interval=30)
    sink.emit(record("violated"))
    sink.flush()
    assert len(am.posts) == 1  # nothing due yet
    clock.now += 31
    sink.flush()
    assert len(am.posts) == 2
    assert am.last()[0]["endsAt"] == "2025-11-21T05:40:31.000000Z"  # refreshed: now + 1 h
    sink.reconcile({"suites": {}})  # certificate gone from the state: resolved
    assert am.last()[0]["endsAt"] == "2025-11-21T04:40:31.000000Z"
    clock.now += 120
    sink.flush()
    assert len(am.posts) == 3 and sink.active_alerts() == []


def test_retries_with_bounded_backoff_and_no_blocking_in_emit() -> None:
    am, clock = FakeAM(), FakeClock()
    sink = make_sink(am, clock, max_attempts=4, backoff_initial=1.0, backoff_max=2.0)
    am.down = True
    start = clock.now
    sink.emit(record("violated"))
    assert am.attempts == 1 and clock.now == start  # emit never sleeps
    sink.emit(record("certified", model="m2"))
    assert am.attempts == 1  # in backoff: not even tried
    sink.flush()  # 4 attempts, 3 sleeps between them, each capped at backoff_max
    assert am.attempts == 5
    assert clock.now - start == 3 * 2.0
    am.down = False
    clock.now += 5
    sink.flush()
    assert sorted(a["labels"]["model"] for a in am.last()) == ["m1", "m2"]
    assert sink.failed_posts == 5 and sink.delivered == 2


def test_client_errors_are_not_retried() -> None:
    am, clock = FakeAM(), FakeClock()
    sink = make_sink(am, clock)
    am.status = 400
    sink.emit(record("violated"))
    sink.flush()
    assert am.attempts == 1 and sink.failed_posts == 1


def test_reconcile_from_state_document() -> None:
    am, clock = FakeAM(), FakeClock()
    sink = make_sink(am, clock)

    def state(status: str, certified_at: int | None) -> dict[str, Any]:
        view = {"status": status, "certified_at_round": certified_at, "violated_at_round": 400,
                "log_e_certify": 4.0, "log_e_violate": 3.9, "log_threshold": 3.7, "rounds": 420,
                "cs_lower": 0.1, "cs_upper": 0.2, "status_changed_ts": 1_763_699_000.0}
        methods = {"r_eval": view, "r_autoeval_plus": dict(view, status="pending")}
        return {"suites": {"qa": {"models": {"m1": {"certificates": {"risk": {
            "alpha": 0.1, "delta": 0.05, "methods": methods}}}}}}}

    sink.reconcile(state("certified", 50))
    assert [a["alertname"] for a in sink.active_alerts()] == ["CertmonCertificateCertified"]
    sink.reconcile(state("violated", 50))
    assert [a["alertname"] for a in sink.active_alerts()] == ["CertmonCertificateLost"]
    assert am.last()[0]["labels"]["alertname"] == "CertmonCertificateCertified"  # resolved
    sink.reconcile(state("violated", 50), methods=["r_autoeval_plus"])  # filter: r_eval ignored
    assert [a["alertname"] for a in sink.active_alerts()] == ["CertmonCertificateLost"]
    sink.reconcile(state("pending", None))
    assert sink.active_alerts() == []


def test_best_model_and_one_shot_alerts() -> None:
    am, clock = FakeAM(), FakeClock()
    sink = make_sink(am, clock)
    best = {"id": "b1", "kind": "best_model", "suite": "qa", "model": "m1", "round": 5,
            "ts": clock.now, "evidence": {}}
    sink.emit(best)
    sink.emit(dict(best, id="b2", model="m2"))
    assert [a["model"] for a in sink.active_alerts()] == ["m2"]
    sink.emit(record("precision_reached"))
    (alert,) = [a for a in am.last() if a["labels"]["alertname"] == "CertmonPrecisionReached"]
    assert alert["endsAt"] == "2025-11-21T05:40:00.000000Z"  # once_lifetime = 1h
    clock.now += 600
    sink.flush()
    assert all(a["labels"]["alertname"] != "CertmonPrecisionReached" for a in am.last())


# ----------------------------------------------------------------------------- integration


def _require_tools() -> bool:
    return os.environ.get("CERTMON_REQUIRE_TOOLS") == "1"


def _find_alertmanager() -> str | None:
    for name in ("prometheus-alertmanager", "alertmanager"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = _find_alertmanager()
    if binary is None:
        if _require_tools():
            pytest.fail("alertmanager not installed (apt-get install prometheus-alertmanager)")
        pytest.skip("alertmanager not installed")
    workdir: Path = tmp_path_factory.mktemp("alertmanager")
    config = Path(__file__).resolve().parents[2] / "deploy" / "alertmanager" / "alertmanager.yml"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_daemon(
        [binary, f"--config.file={config}", f"--storage.path={workdir}",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
         "--log.level=warn"],
        workdir / "am.log", base + "/-/ready", timeout=20)
    try:
        yield base
    finally:
        kill9(proc)


def _alerts(base: str) -> list[dict[str, Any]]:
    alerts: list[dict[str, Any]] = _get_json(base + "/api/v2/alerts")
    return alerts


def _wait_for(base: str, predicate: Any, timeout: float = 10.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        alerts = _alerts(base)
        if predicate(alerts) or time.monotonic() > deadline:
            return alerts
        time.sleep(0.1)


@pytest.mark.integration
def test_real_alertmanager_receives_and_resolves(alertmanager: str) -> None:
    sink = AlertmanagerSink(alertmanager, grafana_url="http://grafana:3000", resend_interval=60,
                            extra_labels={"env": "test"})
    now = time.time()
    sink.emit(record("certified", model="m-int", round_=80, ts=now - 5))
    sink.emit(record("violated", model="m-viol", round_=40, ts=now - 5))
    sink.flush()

    def names(alerts: list[dict[str, Any]]) -> set[tuple[str, str]]:
        return {(a["labels"]["alertname"], a["labels"].get("model", "")) for a in alerts
                if a["labels"].get("env") == "test"}

    alerts = _wait_for(alertmanager, lambda a: len(names(a)) == 2)
    assert names(alerts) == {("CertmonCertificateCertified", "m-int"),
                             ("CertmonCertificateViolated", "m-viol")}
    viol = next(a for a in alerts if a["labels"]["alertname"] == "CertmonCertificateViolated")
    assert viol["labels"]["severity"] == "critical"
    assert viol["labels"]["certificate"] == "risk" and viol["labels"]["method"] == "r_autoeval_plus"
    assert viol["annotations"]["dashboard"].endswith("var-suite=qa&var-model=m-viol")
    assert "log e-value 3.75" in viol["annotations"]["description"]
    assert viol["status"]["state"] in ("active", "unprocessed")

    # m-int loses its certificate: Certified is resolved (gone from the active list) and Lost fires
    sink.emit(record("certificate_lost", model="m-int", round_=200, ts=time.time()))
    sink.flush()
    alerts = _wait_for(
        alertmanager, lambda a: ("CertmonCertificateCertified", "m-int") not in names(a)
        and ("CertmonCertificateLost", "m-int") in names(a))
    assert names(alerts) == {("CertmonCertificateLost", "m-int"),
                             ("CertmonCertificateViolated", "m-viol")}
    # the state document says both are pending again (e.g. state reset): everything resolves
    sink.reconcile({"suites": {"qa": {"models": {}}}})
    sink.close()
    alerts = _wait_for(alertmanager, lambda a: not names(a))
    assert names(alerts) == set()


@pytest.mark.integration
def test_real_alertmanager_inhibits_rule_alert_duplicated_by_push(alertmanager: str) -> None:
    """The Prometheus-rule twin of a pushed alert (origin=rules) is inhibited by the push."""
    labels = {"suite": "qa", "model": "m-inh", "certificate": "risk", "method": "r_eval",
              "env": "inhibit"}
    sink = AlertmanagerSink(alertmanager, extra_labels={"env": "inhibit"})
    sink.emit(record("violated", model="m-inh", method="r_eval", ts=time.time()))
    sink.flush()
    rule_alert = [{"labels": {**labels, "alertname": "CertmonCertificateViolated",
                              "severity": "critical", "origin": "rules"},
                   "annotations": {"summary": "from rules"}}]
    req = urllib.request.Request(alertmanager + "/api/v2/alerts",
                                 data=json.dumps(rule_alert).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=5).read()

    def inhibited(alerts: list[dict[str, Any]]) -> bool:
        return any(a["labels"].get("origin") == "rules" and a["labels"].get("env") == "inhibit"
                   and a["status"]["inhibitedBy"] for a in alerts)

    alerts = _wait_for(alertmanager, inhibited, timeout=15)
    assert inhibited(alerts), alerts
    pushed = [a for a in alerts if a["labels"].get("env") == "inhibit"
              and a["labels"]["origin"] == "certmon"]
    assert pushed and not pushed[0]["status"]["inhibitedBy"]
    sink.reconcile({"suites": {}})
    sink.close()


def test_background_thread_resends_active_alerts() -> None:
    am = FakeAM()
    sink = AlertmanagerSink("http://am:9093", resend_interval=0.05, transport=am)
    sink.emit(record("violated", ts=time.time()))
    sink.start(tick=0.01)
    deadline = time.monotonic() + 5
    while len(am.posts) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    sink.close()
    assert len(am.posts) >= 4
    assert all(p[1][0]["labels"]["alertname"] == "CertmonCertificateViolated" for p in am.posts)
    posts = len(am.posts)
    time.sleep(0.1)
    assert len(am.posts) == posts  # the thread stopped with close()


def comparison_record(kind: str, comparison: str = "v2-vs-v1", candidate: str = "m2",
                      round_: int = 300) -> dict[str, Any]:
    return {
        "id": f"id-{kind}-{comparison}-{candidate}", "kind": kind, "suite": "qa",
        "model": candidate, "certificate": comparison, "method": "paired", "round": round_,
        "ts": 1_763_699_990.0, "comparison": comparison, "baseline": "m1",
        "candidate": candidate,
        "evidence": {"status": kind, "estimate": 0.07, "labels": 2 * round_,
                     "bound": 0.03 if kind == "inferior" else 0.01, "margin": 0.02,
                     "bound_side": "lower" if kind == "inferior" else "upper",
                     "bound_confidence": 0.95, "missing_pairs": 3},
    }


def test_comparison_alerts_one_per_candidate_inferior_replaces_non_inferior() -> None:
    am, clock = FakeAM(), FakeClock()
    sink = make_sink(am, clock)
    sink.emit(comparison_record("non_inferior"))
    sink.emit(comparison_record("non_inferior", comparison="v3-vs-v1", candidate="m3"))
    active = {(a["alertname"], a["comparison"], a["candidate"]) for a in sink.active_alerts()}
    assert active == {("CertmonNonInferior", "v2-vs-v1", "m2"),
                      ("CertmonNonInferior", "v3-vs-v1", "m3")}
    pushed = next(a for _, post in am.posts for a in post if a["labels"]["candidate"] == "m2")
    labels = pushed["labels"]
    assert set(labels) == {"alertname", "severity", "origin", "suite", "comparison", "baseline",
                           "candidate"} and labels["severity"] == "info"
    ann = pushed["annotations"]
    assert ann["summary"] == ("non inferior: m2 vs m1 (qa, v2-vs-v1) at round 300: "
                              "difference <= 0.01 at 95% confidence")
    assert "risk(candidate) - risk(baseline) <= 0.01" in ann["description"]
    assert "600 labels, 3 missing" in ann["description"]
    clock.now += 10
    sink.emit(comparison_record("inferior", round_=500))
    active = {(a["alertname"], a["candidate"]) for a in sink.active_alerts()}
    assert active == {("CertmonInferior", "m2"), ("CertmonNonInferior", "m3")}
    # the state no longer shows m3's verdict (a new epoch): its alert resolves
    state = {"suites": {"qa": {"comparisons": {
        "v2-vs-v1": {"baseline": "m1", "design": "paired", "candidates": {
            "m2": {"status": "inferior", "decided_at_round": 500}}},
        "v3-vs-v1": {"baseline": "m1", "design": "paired", "candidates": {
            "m3": {"status": "pending"}}}}}}}
    sink.reconcile(state)
    assert [(a["alertname"], a["candidate"]) for a in sink.active_alerts()] == [
        ("CertmonInferior", "m2")]
