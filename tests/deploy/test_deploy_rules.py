from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES = sorted((DEPLOY / "prometheus" / "rules").glob("*.yml"))
RULE_TESTS = sorted((DEPLOY / "prometheus" / "tests").glob("*.yml"))
SEVERITIES = {"critical", "warning", "info"}
ANNOTATIONS = {"summary", "description", "runbook", "dashboard"}


def run(cmd: list[str], cwd: Path | None = None) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


def all_rules() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in RULES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            out.extend(group["rules"])
    return out


def alerts() -> list[dict[str, Any]]:
    return [r for r in all_rules() if "alert" in r]


def test_promtool_check_rules(tool: Callable[[str], str]) -> None:
    out = run([tool("promtool"), "check", "rules", *map(str, RULES)])
    assert out.count("SUCCESS") == len(RULES)


def test_promtool_rule_unit_tests(tool: Callable[[str], str]) -> None:
    assert RULE_TESTS
    out = run([tool("promtool"), "test", "rules", *(p.name for p in RULE_TESTS)],
              cwd=DEPLOY / "prometheus" / "tests")
    assert "FAILED" not in out and out.count("SUCCESS") == len(RULE_TESTS)


def test_promtool_check_prometheus_config(tool: Callable[[str], str]) -> None:
    run([tool("promtool"), "check", "config", "--syntax-only",
         str(DEPLOY / "prometheus" / "prometheus.yml")])


def test_amtool_check_alertmanager_config(tool: Callable[[str], str]) -> None:
    out = run([tool("amtool"), "check-config", str(DEPLOY / "alertmanager" / "alertmanager.yml")])
    assert "SUCCESS" in out


def test_every_alert_is_documented_tested_and_labelled() -> None:
    readme = (DEPLOY / "README.md").read_text()
    tests_text = "\n".join(p.read_text() for p in RULE_TESTS)
    names = {a["alert"] for a in alerts()}
    assert {"CertmonCertificateViolated", "CertmonCertificateLost", "CertmonLabelsNotArriving",
            "CertmonCheckpointStale", "CertmonConsumerLagGrowing",
            "CertmonDeadLettersRising"} <= names
    for alert in alerts():
        name = alert["alert"]
        assert alert["labels"]["severity"] in SEVERITIES, name
        assert set(alert["annotations"]) == ANNOTATIONS, name
        assert f"alertname: {name}" in tests_text, f"{name} has no promtool unit test"
        assert f"### {name}" in readme, f"{name} missing from deploy/README.md"
        # Anti-flapping: anything that is not instantaneous by nature has a `for`.
        assert "for" in alert, name
    for rule in all_rules():
        if "record" in rule:
            assert re.fullmatch(r"[a-z_]+:certmon_[a-z_]+(:[a-z0-9_]+)?", rule["record"])


def test_prometheusrule_manifest_matches_rule_files() -> None:
    manifest = yaml.safe_load((DEPLOY / "k8s" / "prometheusrule.yaml").read_text())
    groups = [g for path in RULES for g in yaml.safe_load(path.read_text())["groups"]]
    assert manifest["kind"] == "PrometheusRule"
    assert manifest["spec"]["groups"] == groups, (
        "deploy/k8s/prometheusrule.yaml is stale: run python deploy/k8s/build_prometheusrule.py")


def test_promtool_parses_every_dashboard_query(tool: Callable[[str], str],
                                               tmp_path: Path) -> None:
    """Every panel and variable query of both dashboards, as promtool's PromQL parser sees it
    (each becomes a recording rule; Grafana's variables get sample values)."""
    from tests.deploy.deploy_support import dashboard_queries

    values = {"$__rate_interval": "1m", "$__range": "1h", "$__interval": "30s",
              "$suite": "s", "$model": "m", "$certificate": "risk", "$method": "r_eval"}
    rules = []
    for name, queries in dashboard_queries().items():
        for i, expr in enumerate(queries):
            match = re.fullmatch(r"label_values\((.*),\s*\w+\)", expr, re.S)
            expr = match.group(1) if match else expr  # Grafana's function: check its selector
            for var, value in values.items():
                expr = expr.replace(var, value)
            assert "$" not in expr, (name, expr)
            rules.append({"record": f"dashboard:{Path(name).stem.replace('-', '_')}:{i}",
                          "expr": expr})
    assert len(rules) > 60
    path = tmp_path / "dashboards.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    out = run([tool("promtool"), "check", "rules", str(path)])
    assert f"{len(rules)} rules found" in out
