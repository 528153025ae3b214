"""benchmarks/replay_shapes.py: the streams are what they claim, and a tiny run works.

No timing assertions: the machine is shared. The smoke run replays a few hundred events per
shape in child processes, as the full benchmark does.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from monitor.audit import audit_uniform

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _shapes_module() -> ModuleType:
    if "stream_shapes" in sys.modules:
        return sys.modules["stream_shapes"]
    spec = importlib.util.spec_from_file_location("stream_shapes", BENCH / "stream_shapes.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["stream_shapes"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _events(shape: Any, tmp_path: Path) -> list[dict[str, Any]]:
    mod = _shapes_module()
    path = tmp_path / "s.jsonl"
    n = mod.write_stream(shape, path)
    lines = path.read_text().splitlines()
    assert n == len(lines)
    return [json.loads(line) for line in lines]


def test_heldout_shape(tmp_path: Path) -> None:
    mod = _shapes_module()
    ev = _events(mod.Shape("heldout", 5_000, suites=20), tmp_path)
    assert abs(len(ev) - 5_000) < 100
    ts = [e["ts"] for e in ev]
    assert ts == sorted(ts) and len(set(ts)) == len(ts)  # one event per second, distinct
    judges = [e for e in ev if e["type"] == "judge"]
    labels = [e for e in ev if e["type"] == "label"]
    flagged = {e["example_id"] for e in judges if e["audit"] is True}
    assert {e["example_id"] for e in labels} == flagged  # every audited unit gets its label
    assert 8.0 < len(judges) / len(labels) - 1 < 12.0  # about 10 unaudited per label
    assert len({e["suite"] for e in ev}) == 20
    assert [e["suite"] for e in judges[:3]] == ["s0", "s1", "s2"]  # interleaved
    assert 0.06 < sum(float(e["loss"]) for e in labels) / len(labels) < 0.13  # near alpha 0.1


def test_hash_beta_delays_and_outage(tmp_path: Path) -> None:
    mod = _shapes_module()
    base = mod.Shape("x", 3_000, suites=3)
    ev = _events(replace(base, audit="hash"), tmp_path)
    assert all("audit" not in e for e in ev)
    for e in ev:  # labels only for the units certmon's hash audits
        if e["type"] == "label":
            assert audit_uniform("", e["suite"], e["model"], e["example_id"]) < base.audit_rate
    ev = _events(replace(base, losses="beta"), tmp_path)
    assert len({e["loss"] for e in ev}) > 100  # not binary
    ev = _events(replace(base, delay_pass=1.0, delay_fail=500.0, missing_fail=0.5), tmp_path)
    late = [e for e in ev if e["type"] == "label"]
    assert any(e["loss"] == 1.0 for e in late)
    ev = _events(replace(base, audited_only=True), tmp_path)
    assert {e["type"] for e in ev} == {"judge"} and all(e["audit"] is True for e in ev)


@pytest.mark.integration
def test_smoke_run(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH / "replay_shapes.py"), "--scale", "0.0005",
         "--shapes", "heldout,hash", "--memory"],
        capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    rows = [ln for ln in out.splitlines() if ln.startswith(("| heldout", "| hash"))]
    assert len(rows) == 2, out
    assert "fleet: 50 models (1 suites x 50)" in out
    assert "judge events flagged for audit over 200 suites" in out
    assert "bytes per model" in out
    result = json.loads((BENCH / "out" / "replay_shapes_0.0005.json").read_text())
    assert set(result) == {"shapes", "fleet", "memory"}
    assert result["shapes"]["heldout"]["events"] > 0
