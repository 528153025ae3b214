"""What the engine accepted can always be restored.

One event-time rule for input and restore: an event stamped more than
``events.max_ts_jump_seconds`` ahead of the wall clock is dead-lettered as ``implausible_ts``,
whatever its suite's event time. Before, the rule on input was "ahead of both the suite's
event time and the clock": events at now+29 days then now+31 days were both accepted (the
second is only 2 days past the suite's event time), and the checkpoint written afterwards
was refused on every restart ("event time ... ahead of the clock", exit status 2).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from consumers.cli import main
from tests.consumers.test_cli import CONFIG

DAY = 86400.0


def _event(i: int, ts: float) -> str:
    return json.dumps({"type": "judge", "event_id": f"j-{i}", "suite": "demo", "model": "a",
                       "example_id": f"ex-{i}", "loss": 0.0, "audit": False, "ts": ts})


def test_a_walking_future_event_time_is_refused_on_input_so_resume_works(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG)
    now = time.time()
    ev = tmp_path / "ev.jsonl"
    ev.write_text("\n".join([_event(0, now), _event(1, now + 29 * DAY),
                             _event(2, now + 31 * DAY), _event(3, now + 29.5 * DAY)]) + "\n")
    args = ["replay", "--config", str(cfg), "--input", str(ev), "--quiet",
            "--checkpoint-dir", str(tmp_path / "ck")]
    assert main([*args, "--state-out", str(tmp_path / "first.json")]) == 0
    with ev.open("a") as f:  # more input, then a resume from the checkpoint
        f.write(_event(4, now + 1.0) + "\n")
    capsys.readouterr()
    assert main([*args, "--state-out", str(tmp_path / "second.json")]) == 0, \
        capsys.readouterr().err
    first = json.loads((tmp_path / "first.json").read_text())
    assert first["counters"]["rejected"]["implausible_ts"] == 1  # only now+31 days
    second = json.loads((tmp_path / "second.json").read_text())
    assert second["counters"]["rejected"]["implausible_ts"] == 1
    assert second["counters"]["events_in"] == 5
