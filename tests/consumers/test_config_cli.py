"""``certmon config``: the effective configuration, defaults filled in, as TOML or JSON."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from consumers.cli import DEMO_TOML, main
from monitor.config import load_config, parse_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.toml"))
SELECTION = """\
[[suites]]
name = "pick"
mode = "selection"
[suites.selection]
models = ["a", "b", "c"]
examples = 50
"""


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["config", *argv]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_toml_parses_back_to_the_same_config(path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    text = _run(capsys, "--config", str(path))
    assert parse_config(text) == load_config(path)
    doc = tomllib.loads(text)  # every default is written out
    assert doc["suites"][0]["dedupe_max_ids"] == 100_000
    assert doc["kafka"]["poll_timeout_ms"] == 500
    assert "# family_size = (unset)" in text


def test_json_is_the_full_dump(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg_file = tmp_path / "sel.toml"
    cfg_file.write_text(SELECTION)
    doc = json.loads(_run(capsys, "--config", str(cfg_file), "--json", "--set",
                          "suites.0.selection.seed=7"))
    cfg = load_config(cfg_file, ["suites.0.selection.seed=7"])
    assert doc == cfg.model_dump(mode="json")
    assert doc["suites"][0]["selection"]["batch_size"] == 32
    assert doc["suites"][0]["selection"]["seed"] == 7
    assert doc["checkpoint"]["dir"] is None
    assert parse_config(_run(capsys, "--config", str(cfg_file))) == load_config(cfg_file)


def test_without_config_shows_the_demo(capsys: pytest.CaptureFixture[str]) -> None:
    text = _run(capsys)
    assert text.startswith("# certmon effective configuration of <built-in demo config>")
    assert parse_config(text) == parse_config(DEMO_TOML)


def test_secrets_are_masked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg_file = tmp_path / "k.toml"
    cfg_file.write_text(DEMO_TOML + '\n[kafka]\nsecurity_protocol = "SASL_SSL"\n'
                        'sasl_mechanism = "PLAIN"\nsasl_plain_username = "u"\n'
                        'sasl_plain_password = "hunter2-secret"\n')
    for argv in ([], ["--json"]):
        out = _run(capsys, "--config", str(cfg_file), *argv)
        assert "hunter2-secret" not in out
        assert "**********" in out


def test_url_credentials_are_masked(capsys: pytest.CaptureFixture[str]) -> None:
    """An Alertmanager URL's user information and token are credentials
    too; the endpoint (scheme, host, port, path, query keys) stays readable."""
    alerts = ('sinks.alerts=["file:alerts.jsonl", '
              '"alertmanager:https://ops:pw-s3cret@am.example:9093/am?token=t0ken"]')
    for argv in ([], ["--json"]):
        out = _run(capsys, "--set", alerts, *argv)
        assert "pw-s3cret" not in out and "t0ken" not in out and "ops:" not in out, out
        assert "alertmanager:https://***@am.example:9093/am?token=***" in out


def test_bad_config_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "--set", "suites.0.audit_rate=3"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and "suites.0.audit_rate" in err


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["config", "--help"])
    assert exc.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "defaults filled in" in out and "--json" in out and "docs/configuration.md" in out
