"""A real Prometheus (Debian package) scrapes a running certmon and answers PromQL."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.deploy_support import (
    DETAIL,
    SUITE,
    CertmonEndpoint,
    dashboard_queries,
    find_tool,
    rule_exprs,
    shown_methods,
)
from tests.support.processes import free_port, start_daemon, stop

yaml = pytest.importorskip("yaml")

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def prometheus(certmon: CertmonEndpoint, tmp_path_factory: pytest.TempPathFactory,
               request: pytest.FixtureRequest) -> Iterator[str]:
    binary = find_tool("prometheus")
    workdir = tmp_path_factory.mktemp("prometheus")
    # The shipped rules, evaluated every second instead of every 30 s.
    rule_files = []
    for path in sorted((DEPLOY / "prometheus" / "rules").glob("*.yml")):
        doc = yaml.safe_load(path.read_text())
        for group in doc["groups"]:
            group["interval"] = "1s"
        (workdir / path.name).write_text(yaml.safe_dump(doc))
        rule_files.append(str(workdir / path.name))
    target = urllib.parse.urlsplit(certmon.metrics_url).netloc
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": rule_files,
        "scrape_configs": [{"job_name": "certmon", "static_configs": [{"targets": [target]}]}],
    }
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_daemon(
        [binary, f"--config.file={workdir / 'prometheus.yml'}",
         f"--storage.tsdb.path={workdir / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
        workdir / "prometheus.log", base + "/-/ready")
    try:
        yield base
    finally:
        stop(proc)


def query(base: str, promql: str) -> dict[str, Any]:
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            body: dict[str, Any] = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        body = json.loads(exc.read())
    return body


def wait_result(base: str, promql: str, predicate: Callable[[list[dict[str, Any]]], bool],
                timeout: float = 20.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        body = query(base, promql)
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        if predicate(result) or time.monotonic() > deadline:
            return result
        time.sleep(0.25)


def test_promql_certificate_state_matches_certmon_state(
        prometheus: str, certmon: CertmonEndpoint) -> None:
    models = certmon.state["suites"][SUITE]["models"]
    shown = shown_methods(certmon.state)
    expected = {
        (model, method): view["status"]
        for model, mv in models.items()
        for method, view in mv["certificates"]["risk"]["methods"].items()
        if (model, method) in shown
    }
    assert set(expected.values()) == {"certified", "violated"}
    promql = f'certmon_certificate_state{{suite="{SUITE}", certificate="risk"}} == 1'
    result = wait_result(prometheus, promql, lambda r: len(r) == len(expected))
    got = {(r["metric"]["model"], r["metric"]["method"]): r["metric"]["state"] for r in result}
    assert got == expected
    # a value that is a float in the state, through Prometheus, unchanged
    view = models["good"]["certificates"]["risk"]["methods"]["r_autoeval_plus"]
    result = wait_result(
        prometheus, f'certmon_risk_upper_bound{{suite="{SUITE}", model="good", '
                    f'method="r_autoeval_plus"}}', lambda r: len(r) == 1)
    assert float(result[0]["value"][1]) == view["cs_upper"]


def test_recording_and_alerting_rules_on_real_metrics(prometheus: str) -> None:
    methods = ({"r_eval", "r_autoeval", "r_autoeval_plus"} if DETAIL == "full"
               else {"r_autoeval_plus"})  # "shown": the primary method only
    recorded = wait_result(
        prometheus, 'suite_model_certificate_method:certmon_certificate_state:max'
                    '{state="violated", model="bad"} == 1', lambda r: len(r) == len(methods))
    assert {r["metric"]["method"] for r in recorded} == methods
    # `for: 1m`: the violation alert is pending (firing needs a minute), for the primary
    # method only (the rule joins on certmon_certificate_primary == 1)
    alerts = wait_result(prometheus, 'ALERTS{alertname="CertmonCertificateViolated"}',
                         lambda r: len(r) == 1)
    assert [a["metric"]["method"] for a in alerts] == ["r_autoeval_plus"]
    assert {(a["metric"]["model"], a["metric"]["severity"]) for a in alerts} == {
        ("bad", "critical")}
    assert all(a["metric"]["alertstate"] == "pending" for a in alerts)
    lost = query(prometheus, 'ALERTS{alertname="CertmonCertificateLost"}')
    assert lost["data"]["result"] == []


def test_every_dashboard_and_rule_query_is_valid_promql(prometheus: str) -> None:
    substitutions = {"$__rate_interval": "1m", "$suite": SUITE, "$model": "good",
                     "$certificate": "risk", "$method": "r_eval"}
    exprs = [q for queries in dashboard_queries().values() for q in queries]
    exprs += rule_exprs()[0]
    for expr in exprs:
        if expr.startswith("label_values("):
            continue  # Grafana's own function, not PromQL
        for var, value in substitutions.items():
            expr = expr.replace(var, value)
        body = query(prometheus, expr)
        assert body["status"] == "success", (expr, body)


def test_every_dashboard_query_returns_data(prometheus: str) -> None:
    """Against a certmon fed with a stream, every panel has data (Kafka panels excepted)."""
    substitutions = {"$__rate_interval": "1m", "$suite": SUITE, "$model": "good",
                     "$certificate": "risk", "$method": "r_autoeval_plus"}
    # rate() needs two scrapes inside the window
    wait_result(prometheus, "count_over_time(certmon_up[1m]) >= 3", lambda r: len(r) == 1)
    empty = []
    for name, queries in dashboard_queries().items():
        for expr in queries:
            if expr.startswith("label_values(") or "certmon_kafka_" in expr:
                continue
            if DETAIL == "shown" and "certmon_rho_weight_ratio" in expr:
                continue  # per-rho series only with [metrics] detail = "full" (the panel says so)
            # the verdict's lower bound exists only while violated: the "bad" model's
            subs = {**substitutions, "$model": "bad"} if (
                "certmon_risk_lower_bound" in expr) else substitutions
            for var, value in subs.items():
                expr = expr.replace(var, value)
            if not query(prometheus, expr)["data"]["result"]:
                empty.append((name, expr))
    assert not empty, empty
