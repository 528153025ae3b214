from __future__ import annotations

from pathlib import Path

import pytest

from monitor.config import apply_override, load_config, parse_config
from monitor.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
MINIMAL = (ROOT / "examples" / "minimal.toml").read_text()


def test_minimal_file_accepted_as_is() -> None:
    cfg = load_config(ROOT / "examples" / "minimal.toml")
    s = cfg.suites[0]
    assert s.name == "*" and s.models == ["*"] and s.audit_rate == 0.05
    c = s.certificates[0]
    assert (c.name, c.alpha, c.delta, c.primary, c.betting, c.rhos) == (
        "risk", 0.1, 0.05, "r_autoeval_plus", "plugin_up", 10)
    assert c.methods == ["r_eval", "r_autoeval", "r_autoeval_plus"]
    assert cfg.metrics.port == 9108 and cfg.checkpoint.dir is None


def test_demo_file_matches_builtin() -> None:
    from consumers.cli import DEMO_TOML

    assert (ROOT / "examples" / "demo.toml").read_text() == DEMO_TOML
    cfg = parse_config(DEMO_TOML)
    assert cfg.suites[0].models == ["good", "bad", "borderline"]


@pytest.mark.parametrize(
    ("override", "check"),
    [
        ("suites.0.audit_rate=0.1", lambda c: c.suites[0].audit_rate == 0.1),
        ("metrics.port=9100", lambda c: c.metrics.port == 9100),
        ("metrics.enabled=false", lambda c: c.metrics.enabled is False),
        ("suites.0.models=['a', 'b']", lambda c: c.suites[0].models == ["a", "b"]),
        ("suites.0.certificates.0.primary=\"r_eval\"",
         lambda c: c.suites[0].certificates[0].primary == "r_eval"),
        ("sinks.alerts=file:/tmp/x.jsonl", lambda c: c.sinks.alerts == "file:/tmp/x.jsonl"),
        ("checkpoint.dir=\"/tmp/ck\"", lambda c: c.checkpoint.dir == "/tmp/ck"),
        ("source.path=/data/ev.jsonl", lambda c: c.source.path == "/data/ev.jsonl"),
    ],
)
def test_overrides(override: str, check) -> None:  # type: ignore[no-untyped-def]
    assert check(parse_config(MINIMAL, [override]))


@pytest.mark.parametrize(
    ("text", "overrides", "needle"),
    [
        (MINIMAL, ["suites.0.audit_rate=1.5"], "suites.0.audit_rate: Input should be less"),
        (MINIMAL, ["suites.3.audit_rate=0.1"], "not an index of a list of 1"),
        (MINIMAL, ["metrics.port=x"], "metrics.port"),
        (MINIMAL, ["nonsense"], "expected key=value"),
        (MINIMAL, ["suites.0.audit_rate.x=1"], "is a value, not a table"),
        (MINIMAL, ["suites.0.certificates.0.methods=['r_eval']"], "primary 'r_autoeval_plus'"),
        (MINIMAL, ["suites.0.typo=1"], "suites.0.typo: unknown key"),
        (MINIMAL, ["suites.0.certificates.0.alpha=0"], "alpha: Input should be greater than 0"),
        (MINIMAL, ["suites.0.certificates.0.primary='up'"], "primary"),
        (MINIMAL, ["suites.0.certificates.0.betting='kelly'"], "betting"),
        (MINIMAL, ["suites.0.multiplicity='bonferroni'"], "family_size is required"),
        (MINIMAL, ["suites.0.certificates=[]"], "certificates"),
        (MINIMAL, ["source.kind='file'"], "path is required"),
        ("[[suites]\n", [], "invalid TOML"),
        ("", [], "suites: Field required"),
        (MINIMAL + "\n[[suites.certificates]]\nname='risk'\nalpha=0.2\ndelta=0.1\n", [],
         "certificate names must be unique"),
    ],
)
def test_errors_are_one_line(text: str, overrides: list[str], needle: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config(text, overrides, source="c.toml")
    msg = str(exc.value)
    assert needle in msg, msg
    assert "\n" not in msg


def test_bonferroni_family_size() -> None:
    cfg = parse_config(MINIMAL, ["suites.0.models=['a','b','c']",
                                 "suites.0.multiplicity='bonferroni'"])
    assert cfg.suites[0].effective_family_size == 3
    cfg = parse_config(MINIMAL, ["suites.0.multiplicity='bonferroni'", "suites.0.family_size=7"])
    assert cfg.suites[0].effective_family_size == 7


def test_apply_override_creates_tables() -> None:
    d: dict[str, object] = {}
    apply_override(d, "a.b.c=1")
    assert d == {"a": {"b": {"c": 1}}}


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config("/no/such/file.toml")
