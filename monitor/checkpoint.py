"""Checkpoints: versioned, checksummed JSON of the engine state plus the input position.

Format (version 1)::

    {"format": "certmon.checkpoint", "version": 1, "position": {...},
     "engine": <Engine.snapshot()>, "written_at": <epoch seconds>,
     "sha256": <hex SHA-256 of the canonical JSON of all the other keys>}

Canonical JSON = ``json.dumps(obj, sort_keys=True, separators=(",", ":"),
ensure_ascii=True)``. Floats are written with ``repr`` precision, so they round-trip
exactly. :func:`decode_checkpoint` refuses anything corrupt or of another version with a
:class:`~monitor.errors.CheckpointError`; nothing is ever half-loaded.

Examples
--------
>>> data = encode_checkpoint({"x": 0.1}, {"offset": 10, "line": 1})
>>> decode_checkpoint(data)
({'x': 0.1}, {'line': 1, 'offset': 10})
>>> decode_checkpoint(data.replace(b"0.1", b"0.2"))
Traceback (most recent call last):
...
monitor.errors.CheckpointError: checkpoint is corrupt: sha256 mismatch (modified or truncated)
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from hashlib import sha256
from pathlib import Path
from typing import Any, Final, Protocol

from monitor.errors import CheckpointError

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_VERSION",
    "CheckpointStore",
    "LocalDirectoryStore",
    "Position",
    "atomic_write",
    "canonical_json",
    "decode_checkpoint",
    "encode_checkpoint",
]

CHECKPOINT_FORMAT: Final = "certmon.checkpoint"
CHECKPOINT_VERSION: Final = 1
Position = dict[str, Any]


def canonical_json(obj: Any) -> str:
    """Serialize deterministically (sorted keys, compact, ASCII).

    Examples
    --------
    >>> canonical_json({"b": 1, "a": [0.1, None]})
    '{"a":[0.1,null],"b":1}'
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _digest(doc: dict[str, Any]) -> str:
    rest = {k: v for k, v in doc.items() if k != "sha256"}
    return sha256(canonical_json(rest).encode("ascii")).hexdigest()


def encode_checkpoint(
    engine_snapshot: dict[str, Any], position: Position, written_at: float | None = None
) -> bytes:
    """Serialize a checkpoint document (see the module docstring for the format).

    Examples
    --------
    >>> encode_checkpoint({}, {}, written_at=0.0)[:41]
    b'{"engine":{},"format":"certmon.checkpoint'
    """
    doc: dict[str, Any] = {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "position": position,
        "engine": engine_snapshot,
        "written_at": time.time() if written_at is None else written_at,
    }
    doc["sha256"] = _digest(doc)
    return canonical_json(doc).encode("ascii")


def decode_checkpoint(data: bytes) -> tuple[dict[str, Any], Position]:
    """Verify and parse a checkpoint; return ``(engine_snapshot, position)``.

    Raises
    ------
    CheckpointError
        Not JSON, not a certmon checkpoint, unknown version, or checksum mismatch.

    Examples
    --------
    >>> decode_checkpoint(b'{"format": "certmon.checkpoint", "version": 9}')
    Traceback (most recent call last):
    ...
    monitor.errors.CheckpointError: unknown checkpoint version 9 (this certmon reads version 1)
    """
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise CheckpointError(f"checkpoint is corrupt: not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError("not a certmon checkpoint (missing format 'certmon.checkpoint')")
    version = doc.get("version")
    if version != CHECKPOINT_VERSION or isinstance(version, bool):
        raise CheckpointError(
            f"unknown checkpoint version {version!r} "
            f"(this certmon reads version {CHECKPOINT_VERSION})"
        )
    if not isinstance(doc.get("sha256"), str) or doc["sha256"] != _digest(doc):
        raise CheckpointError(
            "checkpoint is corrupt: sha256 mismatch (modified or truncated)"
        )
    engine, position = doc.get("engine"), doc.get("position")
    if not isinstance(engine, dict) or not isinstance(position, dict):
        raise CheckpointError("checkpoint is corrupt: 'engine' and 'position' must be objects")
    return engine, position


def atomic_write(path: str | Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (temp file, fsync, rename, fsync directory).

    After a crash at any moment ``path`` holds either its old or its new content.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.json"
    >>> atomic_write(p, b"{}"); p.read_bytes()
    b'{}'
    """
    target = Path(path)
    directory = target.parent
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class CheckpointStore(Protocol):
    """Where checkpoints live, by key (one key per engine: a file, a Kafka partition ...)."""

    def load(self, key: str) -> bytes | None:
        """Return the latest checkpoint bytes for ``key``, or None if there is none."""

    def save(self, key: str, data: bytes) -> None:
        """Durably replace the checkpoint of ``key`` (all or nothing)."""


_SAFE = re.compile(r"[^A-Za-z0-9._-]")


class LocalDirectoryStore:
    """Checkpoints as files ``<dir>/<key>.ckpt.json``, replaced atomically.

    ``save`` writes a temporary file in the same directory, fsyncs it, renames it over
    the old file and fsyncs the directory: after a crash at any moment the file holds
    either the old or the new checkpoint, never a mixture.

    Examples
    --------
    >>> import tempfile
    >>> store = LocalDirectoryStore(tempfile.mkdtemp())
    >>> store.load("replay") is None
    True
    >>> store.save("replay", b"abc"); store.load("replay")
    b'abc'
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def file_for(self, key: str) -> Path:
        """Return the file that holds ``key`` (unsafe characters are escaped)."""
        safe = _SAFE.sub(lambda m: f"%{ord(m.group()):02X}", key) or "default"
        return self.path / f"{safe}.ckpt.json"

    def load(self, key: str) -> bytes | None:
        """Read the checkpoint of ``key`` if it exists."""
        try:
            return self.file_for(key).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CheckpointError(f"cannot read checkpoint {self.file_for(key)}: {exc}") from None

    def save(self, key: str, data: bytes) -> None:
        """Atomically replace the checkpoint of ``key``."""
        target = self.file_for(key)
        try:
            atomic_write(target, data)
        except OSError as exc:
            raise CheckpointError(f"cannot write checkpoint {target}: {exc}") from None
