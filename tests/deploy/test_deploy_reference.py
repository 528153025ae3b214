"""The metric and alert references of deploy/README.md are generated from the code
(``deploy/build_reference.py``) and match it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_reference",
                                                  DEPLOY / "build_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_references_match_the_code() -> None:
    text = (DEPLOY / "README.md").read_text(encoding="utf-8")
    assert builder().render(text) == text, (
        "deploy/README.md is stale: run python deploy/build_reference.py")


def test_the_reference_names_every_alert_kind_and_family() -> None:
    from consumers.alertmanager.records import KINDS
    from monitor.alerts import ALERT_KINDS
    from monitor.metrics.families import family_order

    text = (DEPLOY / "README.md").read_text(encoding="utf-8")
    for kind in ALERT_KINDS:
        assert f"| `{kind}` | `{KINDS[kind][0]}` |" in text
        assert f"`{kind}`" in text.split("certmon_alerts_emitted_total", 1)[1].split("\n")[0]
    for name, typ, _ in family_order():
        assert f"`{name}{'_total' if typ == 'counter' else ''}`" in text, name


def test_every_rejection_reason_is_explained() -> None:
    from consumers.kafka.source import SOURCE_REJECTION_REASONS
    from monitor.events import REJECTION_REASONS

    text = (DEPLOY / "README.md").read_text(encoding="utf-8")
    glossary = text.split("Rejection reasons (", 1)[1].split("\n### ", 1)[0]
    listed = set(re.findall(r"`([a-z_]+)`", glossary)) - {"certmon_events_rejected_total"}
    listed = {w for w in listed if "." not in w and not w.startswith("events")}
    code = set(REJECTION_REASONS) | set(SOURCE_REJECTION_REASONS)
    assert code <= listed, code - listed
    assert listed - code <= {"max_record_attempts", "ts", "certmon_events_received_total"}


def test_the_reference_can_fail() -> None:
    text = (DEPLOY / "README.md").read_text(encoding="utf-8")
    broken = text.replace("| `certmon_risk_estimate` | gauge |", "| `certmon_risk_x` | gauge |")
    assert builder().render(broken) != broken
