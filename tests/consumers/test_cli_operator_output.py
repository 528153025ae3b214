"""What an operator reads on the command line: ``inspect`` shows epochs,
their history and labels in flight, names suite/model/certificate, and combines the
checkpoints of every partition; help with descriptions and defaults; progress lines when
stderr is not a terminal; config errors naming the key, the allowed values and a likely fix."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from consumers.cli import build_parser, main
from consumers.inspection import fleet_lines
from monitor.checkpoint import LocalDirectoryStore

CONFIG = """\
[[suites]]
name = "demo"
models = ["a"]
audit_rate = 0.3

[[suites.certificates]]
name = "risk"
alpha = 0.15
delta = 0.05

[sinks]
alerts = "none"
"""


@pytest.fixture(scope="module")
def regressed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A stream whose model is certified, then regresses (risk 0.05 -> 0.4): config, events."""
    d = tmp_path_factory.mktemp("regressed")
    ev, cfg = d / "ev.jsonl", d / "c.toml"
    cfg.write_text(CONFIG)
    assert main(["simulate", "--out", str(ev), "--examples", "4000", "--audit-rate", "0.3",
                 "--model", "a:0.05:0.9:0.4", "--drift-at", "2000"]) == 0
    return cfg, ev


def _replay(cfg: Path, ev: Path, out: Path, *extra: str) -> None:
    assert main(["replay", "--config", str(cfg), "--input", str(ev), "--state-out", str(out),
                 "--quiet", *extra]) == 0


def test_inspect_regressed_model_shows_epochs_and_labels(
    regressed: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, ev = regressed
    _replay(cfg, ev, tmp_path / "STATE.json", "--checkpoint-dir", str(tmp_path / "ck"))
    cv = json.loads((tmp_path / "STATE.json").read_text())["suites"]["demo"]["models"]["a"][
        "certificates"]["risk"]
    start = cv["epoch"]["started_round"]
    assert cv["epoch"]["epoch"] == 2 and start > 0  # the stream did regress
    decided = cv["methods"]["r_autoeval_plus"]["violated_at_round"]
    capsys.readouterr()
    for path in (tmp_path / "STATE.json", tmp_path / "ck"):  # STATE.json and a checkpoint
        assert main(["inspect", str(path)]) == 0
        out = capsys.readouterr().out
        assert "demo/a/risk: epoch 2 since round" in out
        assert f"epoch 1: rounds 0-{start}, started by start, ended by regression, was certified" \
            in out
        assert "regression detector:" in out
        assert "demo/a: audited" in out and "pending 0" in out and "missing 0" in out
        # labels needed are counted in the epoch, not the model's round of the decision
        assert (f"demo/a/risk: labels needed to decide in epoch 2 (from round {start}, after a "
                "regression)") in out
        assert f"R-AutoEval+ {decided - start} (at round {decided})" in out
        assert f"R-AutoEval+ {decided}," not in out


def test_every_subcommand_help_has_description_and_defaults() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sp in sub.choices.items():
        assert (sp.description or "").strip(), name
        text = sp.format_help()
        for action in sp._actions:
            if action.default in (None, False, [], argparse.SUPPRESS) or not action.option_strings:
                continue
            assert "default" in (action.help or "") or f"(default: {action.default})" in text, \
                (name, action.dest)
    replay_help = sub.choices["replay"].format_help()
    assert "--progress-every SECONDS" in replay_help and "(default: 10.0)" in replay_help


def test_progress_lines_when_stderr_is_not_a_terminal(
    regressed: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, ev = regressed
    assert main(["replay", "--config", str(cfg), "--input", str(ev), "--state-out",
                 str(tmp_path / "S.json"), "--progress-every", "0.01"]) == 0
    err = capsys.readouterr().err
    assert "certmon: progress: " in err and " events/s" in err
    assert main(["replay", "--config", str(cfg), "--input", str(ev), "--state-out",
                 str(tmp_path / "S.json"), "--progress-every", "0.01", "--quiet"]) == 0
    assert "progress" not in capsys.readouterr().err


@pytest.mark.parametrize(("override", "needles"), [
    ("metrics.prot=1", ["metrics.prot: unknown key", "did you mean metrics.port?",
                        "allowed keys: ", "port"]),
    ("suites.0.audit_rat=0.2", ["did you mean suites.0.audit_rate?"]),
    ("suites.0.certificates.0.betting='wrs'", [
        "betting: 'wrs' is not allowed", "did you mean 'wsr'?",
        "allowed values: 'plugin_up', 'wsr', 'up'"]),
    ("metrix.port=1", ["metrix: unknown key; did you mean metrics?"]),
])
def test_config_errors_name_key_allowed_values_and_a_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], override: str, needles: list[str]
) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG)
    assert main(["config", "--config", str(cfg), "--set", override]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Extra inputs" not in err, err
    for needle in needles:
        assert needle in err, err


def test_fleet_view_combines_partitions(
    regressed: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, ev = regressed
    other, ev2 = tmp_path / "other.toml", tmp_path / "ev2.jsonl"
    other.write_text(CONFIG.replace('name = "demo"', 'name = "qa"'))
    assert main(["simulate", "--out", str(ev2), "--examples", "300", "--suite", "qa",
                 "--model", "a:0.05"]) == 0
    ck = tmp_path / "ck"
    for i, (c, e) in enumerate(((cfg, ev), (other, ev2))):  # two engines, two keys
        _replay(c, e, tmp_path / f"S{i}.json", "--checkpoint-dir", str(ck),
                "--set", f"checkpoint.key='events/{i}'")
    lines = fleet_lines(LocalDirectoryStore(ck), ["events/0", "events/1", "events/9"],
                        "test store")
    text = "\n".join(lines)
    assert lines[0] == "checkpoints in test store: 2 partitions"
    assert "events/0: 1 suites" in text and "events/1: 1 suites" in text
    assert "demo/a/risk: epoch 2" in text and "qa/a/risk: epoch 1" in text
    single = [json.loads((tmp_path / f"S{i}.json").read_text())["counters"]["events_in"]
              for i in range(2)]
    assert f"events {sum(single)}," in text
    assert main(["inspect", "--kafka"]) == 2
    assert "--config" in capsys.readouterr().err
