"""docs/label-loop.md: its examples are what the code emits and accepts, and its file-mode
walk-through runs as written (``certmon`` run as ``python -m consumers.cli`` from this
checkout) with the figures it states."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from monitor.events import Event, decode_event
from monitor.label_requests import label_request

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "label-loop.md").read_text()


def blocks(lang: str, after: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC[DOC.index(after):], re.S)


def test_request_example_is_what_certmon_emits() -> None:
    (block,) = blocks("json", "## Label requests")[:1]
    req = json.loads(block)
    assert req == label_request(req["suite"], req["model"], req["example_id"],
                                req["judge_event_id"], req["ts"], req["stratum"],
                                propensity=req["propensity"], reason=req["reason"],
                                position=req["audit_position"])


def test_label_examples_are_the_same_label() -> None:
    (block,) = blocks("json", "## Label events")[:1]
    events = [decode_event(line.encode()) for line in block.strip().splitlines()]
    assert len(events) == 3 and all(isinstance(e, Event) for e in events)
    units = {(e.suite, e.model, e.example_id, e.loss) for e in events if isinstance(e, Event)}
    assert len(units) == 1


def test_file_walkthrough_runs_as_written(tmp_path: Path) -> None:
    (toml,) = blocks("toml", "### Files")[:1]
    (script,) = blocks("bash", "### Files")[:1]
    (tmp_path / "loop.toml").write_text(toml)
    py = sys.executable
    script = script.replace("python -m ", f"{py} -m ").replace(
        "certmon ", f"{py} -m consumers.cli ")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    n_req = len((tmp_path / "out" / "requests.jsonl").read_text().splitlines())
    n_lab = len((tmp_path / "labels.jsonl").read_text().splitlines())
    assert f"The first replay writes {n_req} requests" in DOC
    assert f"the labeller answers all {n_lab}" in DOC and n_lab == n_req
    state = json.loads((tmp_path / "closed" / "STATE.json").read_text())
    models = state["suites"]["demo"]["models"]
    assert sum(m["counts"]["rounds"] for m in models.values()) == n_req
    for m in models.values():
        assert m["counts"]["rounds"] == m["counts"]["labels"]
        assert m["counts"]["duplicates"] == 0 and m["counts"]["rejected"] == 0
    status = {name: m["certificates"]["risk"]["methods"]["r_autoeval_plus"]["status"]
              for name, m in models.items()}
    assert status["good"] == "certified" and status["bad"] == "violated"
    assert sum(state["counters"]["rejected"].values()) == 0
