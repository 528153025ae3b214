"""A forged checkpoint in the checkpoint directory stops certmon with one line.

Before, at the command level: a checkpoint with NaN / Infinity crashed certmon
on every start (a crash loop with a traceback), loosened thresholds were used silently. Now
``certmon replay --checkpoint-dir`` (the same restore as ``certmon run``) exits with status
2 and one line naming the refused field, writes no STATE.json, and leaves the checkpoint as
it was for the operator to inspect.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from hashlib import sha256
from pathlib import Path
from typing import Any

import pytest

from consumers.cli import main
from monitor.checkpoint import LocalDirectoryStore
from monitor.incremental import load_checkpoint
from tests.consumers.test_cli import CONFIG


def _model(doc: dict[str, Any], name: str) -> dict[str, Any]:
    m: dict[str, Any] = next(m for m in doc["engine"]["suites"][0]["models"]
                             if m["name"] == name)
    return m


def _nan(doc: dict[str, Any]) -> None:
    _model(doc, "a")["bias_sum"] = float("nan")


def _infinite_statistic(doc: dict[str, Any]) -> None:
    det = _model(doc, "a")["epochs"][0][1]["regression"]["detector"]
    det["log_sr"] = [float("inf")] * len(det["log_sr"])


def _alpha(doc: dict[str, Any]) -> None:
    for m in doc["engine"]["suites"][0]["models"]:
        m["groups"][0][1]["config"]["alpha"] = 0.6


def _certified(doc: dict[str, Any]) -> None:
    for e in _model(doc, "b")["effective"]:
        e[2][0], e[2][1], e[2][2] = "certified", 5, None


def _as_single_document(ck: Path) -> dict[str, Any]:
    """The checkpoint (a manifest and one document per suite) as one version-1 document,
    which certmon still reads: the forger's simplest route. The per-suite files go."""
    manifest = json.loads(ck.read_bytes())
    ckpt = load_checkpoint(LocalDirectoryStore(ck.parent), manifest["key"])
    assert ckpt is not None
    for part in ck.parent.glob("*%23part%23*"):
        part.unlink()
    return {"format": "certmon.checkpoint", "version": 1, "position": ckpt.position,
            "engine": ckpt.snapshot, "written_at": manifest["written_at"]}


@pytest.mark.parametrize(("edit", "needle"), [
    (_nan, "non-finite"),
    (_infinite_statistic, "non-finite"),
    (_alpha, "checkpoint refused: .*alpha: checkpoint 0.6, configuration 0.12"),
    (_certified, "checkpoint refused: .*status 'certified' but its test did not cross"),
])
def test_forged_checkpoint_is_one_line_and_exit_2(
        tmp_path: Path, edit: Callable[[dict[str, Any]], None], needle: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG)
    ev = tmp_path / "ev.jsonl"
    assert main(["simulate", "--out", str(ev), "--examples", "400", "--seed", "3",
                 "--model", "a:0.03:0.95", "--model", "b:0.3:0.8"]) == 0
    args = ["replay", "--config", str(cfg), "--input", str(ev), "--quiet",
            "--checkpoint-dir", str(tmp_path / "ck")]
    assert main([*args, "--state-out", str(tmp_path / "first.json")]) == 0
    ck = tmp_path / "ck" / "certmon.ckpt.json"
    doc = _as_single_document(ck)
    edit(doc)
    doc["sha256"] = sha256(json.dumps({k: v for k, v in doc.items() if k != "sha256"},
                                      sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    forged = json.dumps(doc).encode()
    ck.write_bytes(forged)
    capsys.readouterr()
    for _ in range(2):  # every restart: the same line, no traceback, nothing written
        assert main([*args, "--state-out", str(tmp_path / "second.json")]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert re.search(needle, err), err
        assert not (tmp_path / "second.json").exists()
        assert ck.read_bytes() == forged
