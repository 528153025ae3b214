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
