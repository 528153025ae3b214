"""The fetch child never imports code from the working directory."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from consumers.kafka.fetcher import FetchProcess, child_command

HOSTILE = "import pathlib; pathlib.Path({marker!r}).write_text('ran')\n"


def _plant(cwd: Path, marker: Path) -> None:
    # modules the child imports (json for the protocol, secrets/selectors via kafka-python)
    for name in ("json", "secrets", "selectors", "struct", "kafka"):
        (cwd / f"{name}.py").write_text(HOSTILE.format(marker=str(marker)))


def test_plain_python_m_would_run_the_planted_module(tmp_path: Path) -> None:
    """The attack is real: the old command line imports json.py from the working directory."""
    marker = tmp_path / "pwned"
    _plant(tmp_path, marker)
    subprocess.run([sys.executable, "-m", "consumers.kafka.fetcher"], cwd=tmp_path,
                   input=b"", capture_output=True, timeout=60, check=False)
    assert marker.exists()


def test_fetch_child_ignores_modules_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "pwned"
    _plant(tmp_path, marker)
    monkeypatch.chdir(tmp_path)
    fp = FetchProcess({"bootstrap_servers": "127.0.0.1:9"}, "t", 10, 10)
    time.sleep(1.5)  # the child has started and imported its modules (or failed to connect)
    fp.close()
    assert not marker.exists()


def test_child_command_is_isolated() -> None:
    argv, env, cwd = child_command()
    assert argv[1] == "-P" and cwd == "/"
    assert Path(env["PYTHONPATH"].split(":")[0], "consumers", "kafka", "fetcher.py").exists()
