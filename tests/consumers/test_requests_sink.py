"""Label requests go somewhere visible by default (``sinks.requests = "auto"``); discarding
them takes an explicit ``"none"``, which is warned about and said in the summary."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from consumers.cli import main
from consumers.kafka.clients import kafka_outputs_wanted
from monitor.config import parse_config
from monitor.events import Event, decode_event
from monitor.sinks import resolve_requests_spec

CONFIG = """
[[suites]]
name = "*"
models = ["*"]
audit_rate = 0.2
audit_salt = "s"

[[suites.certificates]]
name = "risk"
alpha = 0.2
delta = 0.1
methods = ["r_eval"]
cs_grid = 40

[metrics]
enabled = false
"""


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG)
    ev = tmp_path / "ev.jsonl"
    assert main(["simulate", "--out", str(ev), "--examples", "300", "--seed", "1",
                 "--audit-mode", "hash", "--audit-rate", "0.2", "--audit-salt", "s",
                 "--model", "a:0.05:0.9"]) == 0
    return cfg, ev


def test_default_is_auto_and_resolves_somewhere_visible() -> None:
    cfg = parse_config("[[suites]]\n[[suites.certificates]]\nname='r'\nalpha=0.1\ndelta=0.1")
    assert cfg.sinks.requests == "auto"
    assert resolve_requests_spec(cfg.sinks.requests, kafka=True) == "kafka"
    assert kafka_outputs_wanted(cfg)  # a Kafka run opens the producer for the requests topic
    assert resolve_requests_spec(cfg.sinks.requests) == "stdout"
    assert resolve_requests_spec("auto", beside="/x/y/STATE.json") == "file:/x/y/requests.jsonl"
    assert resolve_requests_spec("file:/r.jsonl", kafka=True) == "file:/r.jsonl"


def test_replay_writes_requests_next_to_state(tmp_path: Path, setup: tuple[Path, Path],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    cfg, ev = setup
    out = tmp_path / "out"
    out.mkdir()
    assert main(["replay", "--config", str(cfg), "--input", str(ev), "--state-out",
                 str(out / "STATE.json"), "--alerts-out", str(out / "alerts.jsonl")]) == 0
    state = json.loads((out / "STATE.json").read_text())
    lines = (out / "requests.jsonl").read_text().splitlines()
    assert len(lines) == state["counters"]["label_requests"] > 0
    req = json.loads(lines[0])
    assert req["kind"] == "label" and req["request_id"].startswith("lbl1.")
    # each request, copied with a loss, is a valid label event
    label = decode_event(json.dumps({**req, "loss": 0}).encode())
    assert isinstance(label, Event) and label.event_id == "label:" + req["request_id"]
    err = capsys.readouterr().err
    assert f"{len(lines)} label requests written to {out / 'requests.jsonl'}" in err


def test_none_discards_with_a_warning(tmp_path: Path, setup: tuple[Path, Path],
                                      capsys: pytest.CaptureFixture[str],
                                      caplog: pytest.LogCaptureFixture) -> None:
    cfg, ev = setup
    with caplog.at_level(logging.WARNING, logger="certmon.sinks"):
        assert main(["replay", "--config", str(cfg), "--input", str(ev), "--state-out",
                     str(tmp_path / "STATE.json"), "--alerts-out", str(tmp_path / "a.jsonl"),
                     "--set", "sinks.requests='none'"]) == 0
    assert any("label requests are counted" in r.getMessage() and "discarded" in r.getMessage()
               for r in caplog.records)
    assert not (tmp_path / "requests.jsonl").exists()
    assert "label requests discarded (sinks.requests = \"none\")" in capsys.readouterr().err
