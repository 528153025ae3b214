from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from tests.deploy.deploy_support import (
    CertmonEndpoint,
    dashboard_queries,
    exposed_names,
    metric_names,
    names_in_exposition,
    rule_exprs,
)

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DASHBOARDS = sorted((DEPLOY / "grafana" / "dashboards").glob("*.json"))


def load_builder() -> Any:
    path = DEPLOY / "grafana" / "build_dashboards.py"
    spec = importlib.util.spec_from_file_location("certmon_build_dashboards", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kafka_names() -> set[str]:
    """Names of the Kafka-only metrics, from the Kafka engineer's own collectors."""
    from consumers.kafka.metrics import KafkaMetrics
    from consumers.kafka.sinks import KafkaOutputs
    from monitor.config.kafka import KafkaConfig

    registry = CollectorRegistry()
    KafkaMetrics(registry)
    KafkaOutputs(KafkaConfig(), registry, producer=object())
    return names_in_exposition(generate_latest(registry).decode())


def test_dashboards_are_generated_from_the_builder() -> None:
    rendered = load_builder().render()
    assert sorted(rendered) == [p.name for p in DASHBOARDS]
    for path in DASHBOARDS:
        assert path.read_text() == rendered[path.name], (
            f"{path.name} is stale: run python deploy/grafana/build_dashboards.py")


def test_dashboard_structure() -> None:
    uids = set()
    for path in DASHBOARDS:
        doc = json.loads(path.read_text())
        uids.add(doc["uid"])
        variables = {v["name"] for v in doc["templating"]["list"]}
        assert {"datasource", "suite", "model"} <= variables, path.name
        ids = [p["id"] for p in doc["panels"]]
        assert len(ids) == len(set(ids)), path.name
        for panel in doc["panels"]:
            pos = panel["gridPos"]
            assert pos["x"] + pos["w"] <= 24 and pos["h"] > 0, panel["title"]
            if panel["type"] != "row":
                assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
                assert panel["targets"], panel["title"]
        for expr in dashboard_queries()[path.name]:
            for var in re.findall(r"\$(\w+)", expr):
                assert var in variables or var.startswith("__"), (path.name, expr)
    assert uids == {"certmon-fleet", "certmon-model"}
    panels = {p["title"] for path in DASHBOARDS for p in json.loads(path.read_text())["panels"]}
    for title in ("Every suite / model / certificate / method", "Risk: $method",
                  "log e-values: $method", "Judge bias (mean judge - human loss)",
                  "Label requests vs labels received (per minute)", "Rounds per minute",
                  "Kafka consumer lag", "Checkpoint age", "Checkpoint duration"):
        assert title in panels, title


@pytest.mark.integration
def test_every_metric_in_dashboards_and_rules_is_exposed_by_certmon(
        certmon: CertmonEndpoint) -> None:
    exposed = exposed_names(certmon.metrics_url)
    kafka = kafka_names()
    exprs, recorded = rule_exprs()
    used: dict[str, set[str]] = {}
    for source, queries in [*dashboard_queries().items(), ("rules", exprs)]:
        for expr in queries:
            for name in metric_names(expr):
                used.setdefault(name, set()).add(source)
    assert len(used) > 30
    missing = {
        name: sorted(sources) for name, sources in used.items()
        if name not in exposed and name not in recorded
        and not (name.startswith("certmon_kafka_") and name in kafka)
    }
    assert not missing, f"used but not exposed by certmon ({certmon.mode}): {missing}"
    # every Kafka name used is one the Kafka collectors define (and only Kafka names need that)
    assert {n for n in used if n.startswith("certmon_kafka_")} <= kafka


@pytest.mark.integration
def test_every_exposed_metric_is_in_the_reference(certmon: CertmonEndpoint) -> None:
    readme = (DEPLOY / "README.md").read_text()
    families = {n for n in exposed_names(certmon.metrics_url)
                if n.startswith("certmon_") and not n.endswith(("_created", "_bucket", "_sum",
                                                                    "_count"))}
    kafka = {n for n in kafka_names() if not n.endswith("_created")}
    documented = set(re.findall(r"`(certmon_[a-z_]+)`", readme))
    missing = {
        n for n in families | kafka
        if n not in documented and f"{n}_total" not in documented
    }
    assert not missing, f"not in deploy/README.md's metric reference: {sorted(missing)}"


def _panels() -> dict[str, dict[str, Any]]:
    return {p["title"]: p for path in DASHBOARDS for p in json.loads(path.read_text())["panels"]}


def test_dashboards_name_their_bounds_and_scales() -> None:
    """The verdict's one-sided bounds and the two-sided sequence
    are named as such; the change-detection statistics are on a log axis with the threshold
    drawn; checkpoint age ignores idle replicas; every panel says what empty means where it
    can be empty."""
    panels = _panels()
    risk = panels["Risk: $method"]
    legends = {t["legendFormat"]: t["expr"] for t in risk["targets"]}
    assert "certmon_risk_upper_bound" in legends["risk <= (certified)"]
    assert "certmon_risk_lower_bound" in legends["risk >= (violated)"]
    assert "certmon_risk_cs_upper_bound" in legends["two-sided CS upper"]
    change = panels["Change detection: regression statistic vs threshold"]
    scale = change["fieldConfig"]["defaults"]["custom"]["scaleDistribution"]
    assert scale == {"type": "log", "log": 10}
    assert any("certmon_regression_threshold" in t["expr"] for t in change["targets"])
    age = panels["Checkpoint age"]["targets"][0]["expr"]
    assert "certmon_checkpoint_pending_events > 0" in age
    table = panels["Every suite / model / certificate / method"]
    names = table["transformations"][1]["options"]["renameByName"]
    assert "Risk <= (certified, one-sided)" in names.values()
    for title, panel in panels.items():  # every panel says what an empty one means
        if panel["type"] != "row":
            text = panel["description"].lower()
            assert "empty" in text or "no data" in text, title
