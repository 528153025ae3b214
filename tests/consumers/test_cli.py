from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from consumers.cli import main
from tests.support.processes import listening_port

CONFIG = """
[[suites]]
name = "*"
models = ["*"]
audit_rate = 0.2
audit_salt = "s"
max_pending = 50

[[suites.certificates]]
name = "risk"
alpha = 0.12
delta = 0.1
methods = ["r_eval", "r_autoeval", "r_autoeval_plus"]
rhos = 4
cs_grid = 100

[metrics]
enabled = false
"""


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG)
    ev = tmp_path / "ev.jsonl"
    assert main(["simulate", "--out", str(ev), "--examples", "700", "--seed", "3",
                 "--audit-mode", "hash", "--audit-rate", "0.2", "--audit-salt", "s",
                 "--model", "a:0.03:0.95", "--model", "b:0.3:0.8"]) == 0
    with open(ev, "ab") as fh:
        fh.write(b'{"type": "judge", "loss": 3}\n\xff\xfe\n')
    return cfg, ev


def replay(tmp_path: Path, cfg: Path, ev: Path, tag: str, *extra: str) -> tuple[bytes, bytes]:
    state = tmp_path / f"{tag}.state.json"
    alerts = tmp_path / f"{tag}.alerts.jsonl"
    rc = main(["replay", "--config", str(cfg), "--input", str(ev), "--state-out", str(state),
               "--alerts-out", str(alerts), "--requests-out", str(tmp_path / f"{tag}.req.jsonl"),
               "--dead-letters-out", str(tmp_path / f"{tag}.dl.jsonl"), "--quiet", *extra])
    assert rc == 0
    return state.read_bytes(), alerts.read_bytes()


def test_replay_end_to_end_deterministic(tmp_path: Path, setup: tuple[Path, Path]) -> None:
    cfg, ev = setup
    s1, a1 = replay(tmp_path, cfg, ev, "one")
    s2, a2 = replay(tmp_path, cfg, ev, "two")
    assert s1 == s2 and a1 == a2
    state = json.loads(s1)
    models = state["suites"]["demo"]["models"]
    assert models["a"]["certificates"]["risk"]["methods"]["r_autoeval_plus"]["status"] == (
        "certified")
    assert models["b"]["certificates"]["risk"]["methods"]["r_autoeval_plus"]["status"] == (
        "violated")
    alerts = [json.loads(x) for x in a1.splitlines()]
    assert {a["kind"] for a in alerts} == {"certified", "violated"}
    dl = [json.loads(x) for x in (tmp_path / "one.dl.jsonl").read_text().splitlines()]
    assert [d["reason"] for d in dl] == ["missing_field", "undecodable"]
    assert dl[0]["source"]["line"] == state["counters"]["events_in"] - 1
    reqs = (tmp_path / "one.req.jsonl").read_text().splitlines()
    assert len(reqs) == state["counters"]["label_requests"] > 0
    # checkpointed replay gives the same state, and a rerun resumes at the end
    s3, a3 = replay(tmp_path, cfg, ev, "ck", "--checkpoint-dir", str(tmp_path / "ck"),
                    "--set", "checkpoint.every_events=100")
    assert s3 == s1 and a3 == a1
    s4, a4 = replay(tmp_path, cfg, ev, "ck", "--checkpoint-dir", str(tmp_path / "ck"),
                    "--set", "checkpoint.every_events=100")
    assert s4 == s1 and a4 == a1  # resumed at EOF: nothing re-emitted


def test_replay_stdin(tmp_path: Path, setup: tuple[Path, Path],
                      monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, ev = setup
    s1, _ = replay(tmp_path, cfg, ev, "file")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(ev.read_bytes())))
    s2, _ = replay(tmp_path, cfg, Path("-"), "stdin")
    assert s1 == s2


def test_inspect(tmp_path: Path, setup: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
                 ) -> None:
    cfg, ev = setup
    replay(tmp_path, cfg, ev, "x", "--checkpoint-dir", str(tmp_path / "ck"))
    capsys.readouterr()
    assert main(["inspect", str(tmp_path / "x.state.json")]) == 0
    out = capsys.readouterr().out
    assert "demo/a" in out and "certified@" in out
    assert main(["inspect", str(tmp_path / "ck" / "certmon.ckpt.json")]) == 0
    out = capsys.readouterr().out
    assert "sha256 ok" in out and "demo/b" in out and "violated@" in out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["replay", "--config", "{cfg}", "--input", "/nope.jsonl", "--state-out", "{tmp}/s"],
         "cannot open input /nope.jsonl"),
        (["replay", "--config", "{tmp}/missing.toml", "--input", "x", "--state-out", "s"],
         "cannot read config"),
        (["replay", "--config", "{cfg}", "--input", "{ev}", "--state-out", "{tmp}/s",
          "--set", "suites.0.audit_rate=7"], "suites.0.audit_rate"),
        (["replay", "--config", "{cfg}", "--input", "{ev}", "--state-out", "{tmp}/s",
          "--alerts-out", "{tmp}"], "cannot open"),
        (["replay", "--config", "{cfg}", "--input", "{ev}", "--state-out", "{tmp}/s",
          "--checkpoint-dir", "{tmp}/bad"], "corrupt"),
        (["replay", "--config", "{cfg}", "--input", "{ev}", "--state-out", "{tmp}/s",
          "--checkpoint-dir", "{tmp}/v9"], "unknown checkpoint version 9"),
        (["inspect", "{cfg}"], "neither a checkpoint nor a STATE.json"),
        (["simulate", "--model", "x:2"], "--model"),
        (["run", "--config", "{cfg}", "--set", "source.kind='file'"], "path is required"),
    ],
)
def test_errors_one_line_exit_2(tmp_path: Path, setup: tuple[Path, Path], args: list[str],
                                needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    cfg, ev = setup
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "certmon.ckpt.json").write_text('{"format": "certmon.checkpoint"')
    (tmp_path / "v9").mkdir()
    (tmp_path / "v9" / "certmon.ckpt.json").write_text(
        '{"format": "certmon.checkpoint", "version": 9}')
    argv = [a.format(cfg=cfg, ev=ev, tmp=tmp_path) for a in args]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err, err
    assert err.startswith("certmon: error: ") and err.count("\n") == 1
    assert "Traceback" not in err


def test_demo_quick(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with listening_port() as port:
        # the configured port is busy: the demo moves (and says so); an explicit --port that
        # is busy fails instead (tests/consumers/test_cli_truths.py)
        rc = main(["demo", "--set", f"metrics.port={port}", "--rate", "0", "--max-events",
                   "4000", "--state-out", str(tmp_path / "s.json")])
    assert rc == 0
    out = capsys.readouterr().out
    assert f"port {port} is busy; using port" in out
    assert "summary (" in out and "demo/good" in out and "demo/bad" in out
    state = json.loads((tmp_path / "s.json").read_text())
    assert state["counters"]["events_in"] <= 4000


def test_requests_out_auto_writes_beside_the_state(tmp_path: Path,
                                                   setup: tuple[Path, Path],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``--requests-out auto`` means requests.jsonl next to --state-out (as its help says),
    not a file named ``auto`` in the working directory."""
    cfg, ev = setup
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["replay", "--config", str(cfg), "--input", str(ev), "--state-out",
                 str(out / "STATE.json"), "--requests-out", "auto", "--dead-letters-out",
                 str(tmp_path / "dl.jsonl"), "--quiet"]) == 0
    assert not (tmp_path / "auto").exists()
    lines = (out / "requests.jsonl").read_text().splitlines()
    assert lines and all(json.loads(x)["suite"] == "demo" for x in lines)
