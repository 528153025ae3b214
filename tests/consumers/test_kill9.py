"""kill -9 of real certmon processes at several points, then restart: same STATE.json."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from monitor.config import load_config
from monitor.engine import Engine
from monitor.simulate import SimModel, SimulationSpec, iter_jsonl
from tests.support.processes import certmon_command

pytestmark = pytest.mark.integration

CONFIG = """
[[suites]]
name = "*"
models = ["*"]
audit_rate = 0.15
max_pending = 40
pending_ttl_seconds = 3.0

[[suites.certificates]]
name = "risk"
alpha = 0.12
delta = 0.1
methods = ["r_eval", "r_autoeval_plus"]
rhos = 4
cs_grid = 100

[checkpoint]
dir = "{ck}"
every_events = 150
every_seconds = 0.2

[metrics]
host = "127.0.0.1"
port = 0

[source]
kind = "file"
path = "{ev}"
max_events_per_second = 2500

[sinks]
alerts = "file:{alerts}"
requests = "none"
dead_letters = "none"
"""


def make_inputs(tmp: Path) -> tuple[Path, Path, list[bytes]]:
    spec = SimulationSpec(models=(SimModel("a", 0.03, 0.95), SimModel("b", 0.3, 0.8)),
                          examples=1500, audit_rate=0.15, audit_mode="hash",
                          seconds_per_example=0.01)
    lines = list(iter_jsonl(spec, np.random.default_rng(11)))
    lines[100:100] = [b"not json\n", lines[50]]  # a rejection and a duplicate
    ev = tmp / "ev.jsonl"
    ev.write_bytes(b"".join(lines))
    cfg = tmp / "c.toml"
    cfg.write_text(CONFIG.format(ck=tmp / "ck", ev=ev, alerts=tmp / "alerts.jsonl"))
    return cfg, ev, lines


def reference(cfg: Path, lines: list[bytes]) -> tuple[bytes, list[dict[str, object]]]:
    eng = Engine(load_config(cfg))
    alerts = [a for line in lines for a in eng.process(line.rstrip(b"\n")).alerts]
    view = eng.state_view()
    return (json.dumps(view, sort_keys=True, indent=2, allow_nan=False) + "\n").encode(), alerts


def run_with_kills(cmd: list[str], ckpt: Path, kills: int, seed: int) -> int:
    rng = np.random.default_rng(seed)
    killed = 0
    for _ in range(kills):
        before = ckpt.stat().st_mtime_ns if ckpt.exists() else 0
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < deadline:
            if ckpt.exists() and ckpt.stat().st_mtime_ns != before:
                break
            time.sleep(0.01)
        time.sleep(float(rng.uniform(0.0, 0.35)))
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            killed += 1
        proc.wait(10)
        assert proc.stderr is not None
        proc.stderr.close()
    final = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert final.returncode == 0, final.stderr
    return killed


def check_outputs(tmp: Path, expected_alerts: list[dict[str, object]]) -> None:
    emitted = [json.loads(x) for x in (tmp / "alerts.jsonl").read_text().splitlines()]
    by_id = {a["id"]: a for a in expected_alerts}
    assert {a["id"] for a in emitted} == set(by_id)  # nothing lost, at-least-once
    for a in emitted:
        assert a == by_id[a["id"]]  # re-emissions are identical


def test_kill9_certmon_run(tmp_path: Path) -> None:
    cfg, _, lines = make_inputs(tmp_path)
    expected, alerts = reference(cfg, lines)
    state = tmp_path / "STATE.json"
    killed = run_with_kills([*certmon_command(), "run", "--config", str(cfg), "--state-out",
                             str(state)], tmp_path / "ck" / "certmon.ckpt.json", kills=3, seed=1)
    assert killed >= 2
    assert state.read_bytes() == expected
    assert json.loads(expected)["counters"]["events_in"] == len(lines)
    check_outputs(tmp_path, alerts)


def test_kill9_certmon_replay_checkpoint_dir(tmp_path: Path) -> None:
    cfg, ev, lines = make_inputs(tmp_path)
    expected, alerts = reference(cfg, lines)
    state = tmp_path / "STATE.json"
    cmd = [*certmon_command(), "replay", "--config", str(cfg), "--input", str(ev), "--state-out",
           str(state), "--checkpoint-dir", str(tmp_path / "ck"), "--quiet"]
    killed = run_with_kills(cmd, tmp_path / "ck" / "certmon.ckpt.json", kills=3, seed=2)
    assert killed >= 2
    assert state.read_bytes() == expected
    check_outputs(tmp_path, alerts)


def test_sigterm_stops_cleanly(tmp_path: Path) -> None:
    cfg, _, lines = make_inputs(tmp_path)
    state = tmp_path / "STATE.json"
    proc = subprocess.Popen([*certmon_command(), "run", "--config", str(cfg), "--state-out",
                             str(state), "--set", "source.follow=true", "--set",
                             "source.max_events_per_second=1e9"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ckpt = tmp_path / "ck" / "certmon.ckpt.json"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if ckpt.exists() and json.loads(ckpt.read_bytes())["position"]["line"] == len(lines):
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    view = json.loads(state.read_text())
    assert view["counters"]["events_in"] == len(lines)
