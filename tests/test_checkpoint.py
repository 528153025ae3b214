from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from monitor.checkpoint import (
    LocalDirectoryStore,
    atomic_write,
    canonical_json,
    decode_checkpoint,
    encode_checkpoint,
)
from monitor.errors import CheckpointError


def sample() -> bytes:
    return encode_checkpoint({"x": [0.1, 1e-300, 2.5e300, -0.0], "n": 3},
                             {"kind": "file", "offset": 12, "line": 2})


def test_roundtrip_exact_floats() -> None:
    snap, pos = decode_checkpoint(sample())
    assert snap["x"] == [0.1, 1e-300, 2.5e300, -0.0]
    assert pos == {"kind": "file", "offset": 12, "line": 2}
    doc = json.loads(sample())
    assert doc["format"] == "certmon.checkpoint" and doc["version"] == 1
    assert isinstance(doc["written_at"], float) and len(doc["sha256"]) == 64


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda b: b[: len(b) // 2], "not valid JSON"),
        (lambda b: b"", "not valid JSON"),
        (lambda b: b.replace(b'"n":3', b'"n":4'), "sha256 mismatch"),
        (lambda b: b.replace(b'"line":2', b'"line":3'), "sha256 mismatch"),
        (lambda b: b.replace(b'"version":1', b'"version":3'), "unknown checkpoint version 3"),
        (lambda b: b.replace(b'"version":1', b'"version":2'), "manifest of per-suite documents"),
        (lambda b: b.replace(b'"version":1', b'"version":"1"'), "unknown checkpoint version '1'"),
        (lambda b: b.replace(b"certmon.checkpoint", b"other"), "not a certmon checkpoint"),
        (lambda b: b"[1, 2]", "not a certmon checkpoint"),
    ],
)
def test_corrupt_refused(mutate, needle: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CheckpointError, match=needle):
        decode_checkpoint(mutate(sample()))


def test_bit_flip_anywhere_refused_or_harmless() -> None:
    data = sample()
    original = decode_checkpoint(data)
    for i in range(len(data)):
        flipped = data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1:]
        try:
            got = decode_checkpoint(flipped)
        except CheckpointError:
            continue
        # only flips that do not change the parsed content can pass (e.g. the last digit of
        # the written_at float, when both spellings parse to the same double)
        assert got == original, f"flip at {i} changed the content: {flipped[i - 5:i + 5]!r}"


def test_local_store_atomic(tmp_path: Path) -> None:
    store = LocalDirectoryStore(tmp_path / "ck")
    assert store.load("topic/0") is None
    store.save("topic/0", b"one")
    store.save("topic/0", b"two")
    assert store.load("topic/0") == b"two"
    assert store.file_for("topic/0").name == "topic%2F0.ckpt.json"
    assert [p.name for p in (tmp_path / "ck").iterdir()] == ["topic%2F0.ckpt.json"]


def test_atomic_write_leaves_no_temp_on_error(tmp_path: Path) -> None:
    target = tmp_path / "d" / "f.json"
    atomic_write(target, b"1")
    os.chmod(target.parent, 0o500)
    try:
        if os.geteuid() == 0:
            pytest.skip("root ignores directory permissions")
        with pytest.raises(OSError):
            atomic_write(target, b"2")
    finally:
        os.chmod(target.parent, 0o700)
    assert target.read_bytes() == b"1"


def test_canonical_json_sorted() -> None:
    assert canonical_json({"b": 1, "a": {"d": 2, "c": 3}}) == '{"a":{"c":3,"d":2},"b":1}'
