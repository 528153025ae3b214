"""benchmarks/fleet_scale.py: every row measures as many models as it names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "fleet_scale.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=300, check=False)


def test_fewer_labels_than_models_is_refused() -> None:
    # models are named round-robin by the labels: 2 labels would create 2 of 3 models
    proc = _run("--sizes", "1,3", "--labels", "2", "--budget-gb", "1.5")
    assert proc.returncode == 2, proc.stdout
    assert "--labels 2 is below the largest size 3" in proc.stderr
    assert "models |" not in proc.stdout  # nothing measured


def test_rows_and_ratios() -> None:
    proc = _run("--sizes", "1,3", "--labels", "3", "--budget-gb", "1.5")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "stream: 3 labels x (10 judge + 1 label) = 33 events per size" in out
    rows = [ln for ln in out.splitlines() if ln.strip().split(" |")[0] in ("1", "3")]
    assert len(rows) == 2 and "x)" in rows[1], out  # the 3-model row has its ratios
    assert "RSS per model (3 models)" in out


def test_events_per_second_include_the_buffered_rounds() -> None:
    """The confidence sequences apply up to 32 buffered rounds per model at the next read:
    events/s counts that first read (``settle_s``), or a fleet's rounds (fewer than 32 per
    model) would be applied in the untimed checkpoint and scrape."""
    proc = _run("--child", "3", "--labels", "3", "--budget-gb", "1.5")
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    assert row["status"] == "ok" and 0 <= row["settle_s"] <= row["seconds"]
    assert row["events_per_s"] == row["events"] / row["seconds"]
    assert "settle s" in _run("--sizes", "1", "--labels", "1", "--budget-gb", "1.5").stdout
