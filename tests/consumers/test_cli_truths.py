"""What a new user meets on the command line: special output files, honest summaries, --version,
help on every option, a busy --port, inspect on a checkpoint directory, escape codes in names,
an output pipe closed by its reader and a resume after a torn last line."""

from __future__ import annotations

import argparse
import json
import os
import threading
from pathlib import Path

import pytest

from consumers.cli import build_parser, main
from monitor.metrics.operational import package_version
from tests.consumers.test_cli import CONFIG
from tests.support.processes import listening_port

OTHER_SUITE = CONFIG.replace('name = "*"', 'name = "other"', 1)


@pytest.fixture
def events(tmp_path: Path) -> Path:
    ev = tmp_path / "ev.jsonl"
    assert main(["simulate", "--out", str(ev), "--examples", "700", "--seed", "3",
                 "--audit-mode", "hash", "--audit-rate", "0.2", "--audit-salt", "s",
                 "--model", "a:0.03:0.95", "--model", "b:0.3:0.8"]) == 0
    with open(ev, "ab") as fh:
        fh.write(b'{"type": "judge", "loss": 3}\n{not json\n')
    return ev


def write_config(tmp_path: Path, text: str = CONFIG) -> Path:
    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    return cfg


def test_alerts_out_dev_null(tmp_path: Path, events: Path) -> None:
    state = tmp_path / "STATE.json"
    rc = main(["replay", "--config", str(write_config(tmp_path)), "--input", str(events),
               "--state-out", str(state), "--alerts-out", os.devnull,
               "--dead-letters-out", os.devnull, "--quiet"])
    assert rc == 0
    assert json.loads(state.read_text())["counters"]["events_in"] > 700


def test_alerts_out_fifo(tmp_path: Path, events: Path) -> None:
    fifo = tmp_path / "alerts.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as fh:
            received.append(fh.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    state = tmp_path / "STATE.json"
    rc = main(["replay", "--config", str(write_config(tmp_path)), "--input", str(events),
               "--state-out", str(state), "--alerts-out", str(fifo), "--quiet"])
    reader.join(10)
    assert rc == 0 and state.is_file()
    assert b'"kind":"certified"' in received[0]


def test_replay_summary_reports_rejected_and_unrouted(
        tmp_path: Path, events: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["replay", "--config", str(write_config(tmp_path, OTHER_SUITE)), "--input",
               str(events), "--state-out", str(tmp_path / "s.json")])
    assert rc == 0
    err = capsys.readouterr().err
    total = json.loads((tmp_path / "s.json").read_text())["counters"]["events_in"]
    assert f"{total} events" in err
    assert f"(2 rejected, 0 duplicate, {total - 2} unrouted)" in err
    # nothing is lost by default: the dead letters (reason, raw bytes) went to stderr
    assert "raw lines and reasons written to stderr" in err
    dead_lines = [json.loads(line) for line in err.splitlines() if line.startswith('{"reason"')]
    assert len(dead_lines) == 2 and all(d["raw"] and d["reason"] for d in dead_lines)
    assert "no configured suite/model" in err and "not dead-lettered" in err

    # dropping them is an explicit choice, and the summary says so
    assert main(["replay", "--config", str(write_config(tmp_path, OTHER_SUITE + """
[sinks]
dead_letters = "none"
""")), "--input", str(events), "--state-out", str(tmp_path / "s0.json")]) == 0
    err = capsys.readouterr().err
    assert "rerun with --dead-letters-out FILE" in err and '{"reason"' not in err

    dead = tmp_path / "dead.jsonl"
    assert main(["replay", "--config", str(write_config(tmp_path, OTHER_SUITE)), "--input",
                 str(events), "--state-out", str(tmp_path / "s2.json"),
                 "--dead-letters-out", str(dead)]) == 0
    err = capsys.readouterr().err
    assert f"raw lines and reasons written to {dead}" in err
    assert len(dead.read_text().splitlines()) == 2


def test_run_stop_summary_reports_rejected_and_unrouted(
        tmp_path: Path, events: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`certmon run` (file source) ends with the same accounting as replay."""
    dead = tmp_path / "dead.jsonl"
    cfg = write_config(tmp_path, OTHER_SUITE + f"""
[source]
kind = "file"
path = "{events}"

[sinks]
alerts = "none"
requests = "none"
dead_letters = "file:{dead}"
""")
    assert main(["run", "--config", str(cfg)]) == 0
    err = capsys.readouterr().err
    assert "stopped after" in err
    assert f"2 rejected: invalid_json 1, missing_field 1; raw lines and reasons written to {dead}" \
        in err, err
    assert "no configured suite/model" in err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"certmon {package_version()}"


def test_every_option_has_help() -> None:
    missing = []

    def walk(parser: argparse.ArgumentParser, where: str) -> None:
        for action in parser._actions:  # argparse exposes no public list of actions
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{where} {name}")
                summarised = {c.dest for c in action._choices_actions if (c.help or "").strip()}
                missing.extend(f"{where} {name} (summary)" for name in action.choices
                               if name not in summarised)
            elif not (action.help or "").strip():
                missing.append(f"{where} {'/'.join(action.option_strings) or action.dest}")

    walk(build_parser(), "certmon")
    assert not missing, missing


def test_demo_busy_port_fails_clearly(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    with listening_port() as port:
        rc = main(["demo", "--port", str(port), "--rate", "0", "--max-events", "2000"])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith(f"certmon: error: cannot serve metrics on 127.0.0.1:{port}")
    assert "--port" in err


def test_inspect_checkpoint_directory_and_escape_codes(
        tmp_path: Path, events: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path)
    assert main(["replay", "--config", str(cfg), "--input", str(events), "--state-out",
                 str(tmp_path / "s.json"), "--checkpoint-dir", str(tmp_path / "ck"),
                 "--quiet"]) == 0
    capsys.readouterr()
    assert main(["inspect", str(tmp_path / "ck")]) == 0
    out = capsys.readouterr().out
    assert "sha256 ok" in out and "demo/a" in out
    (tmp_path / "empty").mkdir()
    assert main(["inspect", str(tmp_path / "empty")]) == 2
    assert "holds no checkpoint" in capsys.readouterr().err
    # a model name carrying terminal escape codes (clear screen, set title) is shown escaped
    doc = json.loads((tmp_path / "s.json").read_text())
    models = doc["suites"]["demo"]["models"]
    models["\x1b[2J\x1b]0;pwned\x07evil"] = models.pop("a")
    (tmp_path / "evil.json").write_text(json.dumps(doc))
    assert main(["inspect", str(tmp_path / "evil.json")]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[2J\\x1b]0;pwned\\x07evil" in out


def test_resume_cuts_a_torn_last_line(tmp_path: Path, events: Path) -> None:
    cfg = write_config(tmp_path)
    alerts = tmp_path / "alerts.jsonl"
    argv = ["replay", "--config", str(cfg), "--input", str(events), "--state-out",
            str(tmp_path / "s.json"), "--checkpoint-dir", str(tmp_path / "ck"),
            "--alerts-out", str(alerts), "--quiet"]
    assert main(argv) == 0
    whole = alerts.read_bytes()
    assert whole.endswith(b"\n") and whole.count(b"\n") >= 1
    with open(alerts, "ab") as fh:  # a write cut short by ENOSPC before the crash
        fh.write(b'{"kind":"violated","suite":"de')
    assert main(argv) == 0  # resumes (at the end: nothing new to emit)
    assert alerts.read_bytes() == whole
    for line in alerts.read_bytes().splitlines():
        json.loads(line)


def test_replay_into_a_closed_pipe_fails_loudly(tmp_path: Path, events: Path) -> None:
    """``certmon replay ... --alerts-out - | head -1``: the reader leaves early; replay must not
    exit 0 without its STATE.json (it used to, silently)."""
    import shutil
    import subprocess

    state = tmp_path / "STATE.json"
    exe = shutil.which("certmon")
    assert exe, "certmon is not on PATH (pip install -e .)"
    proc = subprocess.Popen([exe, "replay", "--config", str(write_config(tmp_path)), "--input",
                             str(events), "--state-out", str(state), "--alerts-out", "-"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first alert is written
    err = proc.stderr.read().decode()
    assert proc.wait(60) == 141, err
    assert "output pipe was closed by its reader" in err and "STATE.json" in err
    assert "Traceback" not in err and not state.exists()

    # a pure generator stops quietly, as `certmon simulate | head` should
    sim = subprocess.Popen([exe, "simulate", "--events", "100000"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    assert sim.stdout is not None and sim.stderr is not None
    sim.stdout.close()
    assert sim.wait(60) == 0 and sim.stderr.read() == b""
