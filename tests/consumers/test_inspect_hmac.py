"""``certmon inspect`` verifies authenticated checkpoints.

With ``CERTMON_CHECKPOINT_KEY`` (or ``..._KEY_FILE``) set, inspect refuses what ``certmon run``
would refuse: an unsigned checkpoint, or a signed one edited afterwards (sha256 recomputed).
Without a key it says what it could not check.
"""

from __future__ import annotations

import json
from hashlib import sha256
from pathlib import Path

import pytest

from consumers.cli import main
from monitor.checkpoint import canonical_json
from tests.consumers.test_cli import CONFIG, replay

KEY = "k" * 32


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG)
    ev = tmp_path / "ev.jsonl"
    assert main(["simulate", "--out", str(ev), "--examples", "300", "--seed", "3",
                 "--model", "a:0.03:0.95", "--model", "b:0.3:0.8"]) == 0
    return cfg, ev


def _checkpoint(tmp_path: Path, files: tuple[Path, Path], tag: str) -> Path:
    cfg, ev = files
    replay(tmp_path, cfg, ev, tag, "--checkpoint-dir", str(tmp_path / tag))
    return tmp_path / tag / "certmon.ckpt.json"


def _forge(path: Path) -> None:
    """Make a violated model show certified in its suite's document (checkpoints are a
    manifest plus one document per suite) and recompute its sha256 (keep the old hmac)."""
    current = {digest for _, _, digest in json.loads(path.read_bytes())["parts"]}
    (part,) = [p for p in path.parent.glob("*%23part%23*")
               if json.loads(p.read_bytes())["sha256"] in current]
    doc = json.loads(part.read_bytes())
    for m in doc["state"]["models"]:
        for e in m["effective"]:
            e[2][0] = "certified"
    doc["sha256"] = sha256(canonical_json(
        {k: v for k, v in doc.items() if k not in ("sha256", "hmac")}).encode()).hexdigest()
    part.write_text(json.dumps(doc))


def test_signed_checkpoint_verified_with_the_key(
        tmp_path: Path, files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CERTMON_CHECKPOINT_KEY", KEY)
    ck = _checkpoint(tmp_path, files, "signed")
    capsys.readouterr()
    assert main(["inspect", str(ck)]) == 0
    assert "sha256 ok, hmac ok" in capsys.readouterr().out
    monkeypatch.delenv("CERTMON_CHECKPOINT_KEY")
    keyfile = tmp_path / "key"
    keyfile.write_text(KEY + "\n")
    monkeypatch.setenv("CERTMON_CHECKPOINT_KEY_FILE", str(keyfile))
    assert main(["inspect", str(ck.parent)]) == 0
    assert "hmac ok" in capsys.readouterr().out


def test_forged_signed_checkpoint_is_refused(
        tmp_path: Path, files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CERTMON_CHECKPOINT_KEY", KEY)
    ck = _checkpoint(tmp_path, files, "signed")
    _forge(ck)
    capsys.readouterr()
    assert main(["inspect", str(ck)]) == 2
    captured = capsys.readouterr()
    assert "hmac mismatch" in captured.err and str(ck) in captured.err
    assert "demo/" not in captured.out  # nothing of the forged state is shown
    assert main(["inspect", str(ck.parent)]) == 2  # the directory form too


def test_unsigned_checkpoint_is_refused_with_a_key(
        tmp_path: Path, files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    ck = _checkpoint(tmp_path, files, "plain")
    monkeypatch.setenv("CERTMON_CHECKPOINT_KEY", KEY)
    capsys.readouterr()
    assert main(["inspect", str(ck)]) == 2
    err = capsys.readouterr().err
    assert "not authenticated (no hmac)" in err and KEY not in err


def test_without_a_key_inspect_says_what_it_did_not_check(
        tmp_path: Path, files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("CERTMON_CHECKPOINT_KEY", raising=False)
    monkeypatch.delenv("CERTMON_CHECKPOINT_KEY_FILE", raising=False)
    plain = _checkpoint(tmp_path, files, "plain")
    capsys.readouterr()
    assert main(["inspect", str(plain)]) == 0
    assert "sha256 ok, unauthenticated: no hmac" in capsys.readouterr().out
    monkeypatch.setenv("CERTMON_CHECKPOINT_KEY", KEY)
    signed = _checkpoint(tmp_path, files, "signed")
    monkeypatch.delenv("CERTMON_CHECKPOINT_KEY")
    capsys.readouterr()
    assert main(["inspect", str(signed)]) == 0
    assert "hmac not verified: CERTMON_CHECKPOINT_KEY(_FILE) not set" in capsys.readouterr().out
