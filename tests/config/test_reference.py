"""docs/configuration.md is generated from the models, current, and covers every described field."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from monitor.config import (
    AlertmanagerConfig,
    CertificateConfig,
    CertmonConfig,
    KafkaConfig,
    KafkaTopics,
    StrataConfig,
    SuiteConfig,
)
from monitor.config.reference import COMMAND, config_tables, render_reference, undocumented
from monitor.selection_settings import SelectionSettings

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "configuration.md"


def test_reference_is_current() -> None:
    assert DOC.read_text(encoding="utf-8") == render_reference(), (
        f"docs/configuration.md is out of date: regenerate it with `{COMMAND}` from the "
        "repository root and commit it"
    )


def test_every_field_has_a_description() -> None:
    missing = undocumented()
    assert not missing, f"configuration fields without a description: {missing}"


def test_walk_reaches_every_section() -> None:
    found = {t.path: t.model for t in config_tables()}
    expected = {
        "": CertmonConfig,
        "[[suites]]": SuiteConfig,
        "[[suites.certificates]]": CertificateConfig,
        "[suites.strata]": StrataConfig,
        "[suites.selection]": SelectionSettings,
        "[sinks.alertmanager]": AlertmanagerConfig,
        "[kafka]": KafkaConfig,
        "[kafka.topics]": KafkaTopics,
    }
    assert {k: found.get(k) for k in expected} == expected
    assert {"[checkpoint]", "[metrics]", "[sinks]", "[source]", "[events]"} <= set(found)
    for table in config_tables():
        assert [r.key for r in table.rows] == list(table.model.model_fields)


def test_every_field_is_in_the_document() -> None:
    text = DOC.read_text(encoding="utf-8")
    for table in config_tables():
        heading = f"## `{table.path}`" if table.path else "## Top level"
        section = text.split(heading + "\n", 1)[1].split("\n## ", 1)[0]
        for row in table.rows:
            assert f"| `{row.key}` |" in section, f"{table.path} {row.key} not documented"


def test_rows_show_defaults_ranges_and_choices() -> None:
    rows = {(t.path, r.key): r for t in config_tables() for r in t.rows}
    assert rows["[[suites]]", "judge_drift_warmup"].allowed == ">= 10"
    assert rows["[[suites.certificates]]", "alpha"].default == "required"
    assert rows["[[suites.certificates]]", "precision"].allowed == "(0, 0.5]"
    assert rows["[suites.strata]", "allocation"].allowed.startswith('`"uniform"`')
    assert rows["[suites.selection]", "batch_size"].default == "`32`"
    assert rows["[kafka]", "poll_timeout_ms"].allowed == "> 0"
    assert rows["[kafka]", "sasl_plain_password"].type == "string (secret)"
    assert rows["[kafka]", "topics"].type == "table"


def test_an_undescribed_field_is_reported() -> None:
    class Inner(BaseModel):
        ok: int = Field(1, description="fine")
        bare: int = 2

    class Outer(BaseModel):
        inner: list[Inner] = Field([], description="tables")
        blank: str = Field("", description="  ")

    assert undocumented(Outer) == ["<top level> blank", "[[inner]] bare"]
    assert "| `bare` | integer | `2` |  |  |" in render_reference(Outer)
