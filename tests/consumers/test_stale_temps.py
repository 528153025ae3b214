"""Temporary files of a writer killed mid-write are removed on the next start.

A ``kill -9`` between the temporary file's creation and its rename left
``.<name>.<random>`` files in the checkpoint directory (and beside ``--state-out``) for good.
Now the temporary file names its process, and the next start removes those whose process is
gone: here a real process is SIGKILLed inside ``atomic_write`` (its fsync never returns),
then ``certmon replay --checkpoint-dir`` runs on the same directory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from consumers.cli import main
from tests.consumers.test_cli import CONFIG

_WRITER = """
import os, sys, time
from monitor import checkpoint
os.fsync = lambda fd: (print("writing", flush=True), time.sleep(600))
checkpoint.atomic_write(sys.argv[1], b"x" * 4096)
"""


def _killed_mid_write(target: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(target)],
                            stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert proc.stdout is not None and proc.stdout.readline() == b"writing\n"
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)


def test_temp_files_of_a_killed_writer_are_removed_on_the_next_start(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    ck.mkdir()
    _killed_mid_write(ck / "certmon.ckpt.json")
    _killed_mid_write(tmp_path / "STATE.json")
    left = sorted(p.name for p in [*ck.iterdir(), *tmp_path.glob(".STATE*")])
    assert len(left) == 2 and all(n.startswith(".") for n in left), left
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG)
    ev = tmp_path / "ev.jsonl"
    assert main(["simulate", "--out", str(ev), "--examples", "50", "--seed", "1"]) == 0
    t0 = time.time()
    assert main(["replay", "--config", str(cfg), "--input", str(ev), "--quiet",
                 "--checkpoint-dir", str(ck), "--state-out", str(tmp_path / "STATE.json")]) == 0
    assert [p.name for p in ck.iterdir() if p.name.startswith(".")] == []
    assert list(tmp_path.glob(".STATE*")) == []
    assert (tmp_path / "STATE.json").stat().st_mtime >= t0 - 1
