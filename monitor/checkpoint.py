"""Checkpoints: versioned, checksummed JSON of the engine state plus the input position.

This module holds the stores, the signing and the single-document format (version 1) that
older certmon versions wrote; certmon now writes one document per suite and a manifest
(version 2, :mod:`monitor.incremental`), with the same canonical JSON, sha256 and HMAC.

Format (version 1)::

    {"format": "certmon.checkpoint", "version": 1, "position": {...},
     "engine": <Engine.snapshot()>, "written_at": <epoch seconds>,
     "sha256": <hex SHA-256 of the canonical JSON of all the other keys>,
     "hmac": <optional: hex HMAC-SHA256 of the same canonical JSON>}

Canonical JSON = ``json.dumps(obj, sort_keys=True, separators=(",", ":"),
ensure_ascii=True)``. Floats are written with ``repr`` precision, so they round-trip
exactly. :func:`decode_checkpoint` refuses anything corrupt or of another version with a
:class:`~monitor.errors.CheckpointError`; nothing is ever half-loaded. ``NaN`` and
``Infinity`` are never written and refused on reading.

The sha256 detects accidents, not forgery: anyone who can write the store can recompute
it. With ``CERTMON_CHECKPOINT_KEY`` (or ``CERTMON_CHECKPOINT_KEY_FILE``) set,
:func:`secured_store` signs every checkpoint with HMAC-SHA256 and refuses any checkpoint
without a valid MAC (recommended for the Kafka checkpoint topic; see ``SECURITY.md``).
Whatever the store holds, :meth:`monitor.engine.Engine.restore` takes the certificate
parameters from the configuration and range-checks every value.

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

import hmac
import json
import os
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from hashlib import sha256
from pathlib import Path
from typing import Any, Final, Protocol

from monitor.errors import CheckpointError

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_VERSION",
    "KEY_ENV",
    "KEY_FILE_ENV",
    "AuthenticatedStore",
    "CheckpointStore",
    "LocalDirectoryStore",
    "Position",
    "atomic_write",
    "canonical_json",
    "checkpoint_key",
    "decode_checkpoint",
    "encode_checkpoint",
    "remove_stale_temps",
    "secured_store",
    "sign_checkpoint",
    "verify_checkpoint",
]

CHECKPOINT_FORMAT: Final = "certmon.checkpoint"
CHECKPOINT_VERSION: Final = 1
Position = dict[str, Any]
KEY_ENV: Final = "CERTMON_CHECKPOINT_KEY"
KEY_FILE_ENV: Final = "CERTMON_CHECKPOINT_KEY_FILE"


def canonical_json(obj: Any) -> str:
    """Serialize deterministically (sorted keys, compact, ASCII).

    Examples
    --------
    >>> canonical_json({"b": 1, "a": [0.1, None]})
    '{"a":[0.1,null],"b":1}'
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _signed_part(doc: dict[str, Any]) -> bytes:
    rest = {k: v for k, v in doc.items() if k not in ("sha256", "hmac")}
    return canonical_json(rest).encode("ascii")


def _digest(doc: dict[str, Any]) -> str:
    return sha256(_signed_part(doc)).hexdigest()


def _no_constant(name: str) -> Any:
    raise CheckpointError(f"checkpoint refused: non-finite number {name} (never written)")


def _parse(data: bytes) -> Any:
    try:
        return json.loads(data, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise CheckpointError(f"checkpoint is corrupt: not valid JSON ({exc})") from None


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
    try:  # a non-finite number would make a checkpoint that cannot be restored
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                          allow_nan=False)
    except ValueError as exc:
        raise CheckpointError(f"cannot write checkpoint: {exc}") from None
    return text.encode("ascii")


def decode_checkpoint(data: bytes) -> tuple[dict[str, Any], Position]:
    """Verify and parse a checkpoint; return ``(engine_snapshot, position)``.

    Raises
    ------
    CheckpointError
        Not JSON, not a certmon checkpoint, unknown version, checksum mismatch, or a
        non-finite number (``NaN``, ``Infinity``: certmon never writes them).

    Examples
    --------
    >>> decode_checkpoint(b'{"format": "certmon.checkpoint", "version": 9}')
    Traceback (most recent call last):
    ...
    monitor.errors.CheckpointError: unknown checkpoint version 9 (this certmon reads version 1)
    """
    doc = _parse(data)
    if not isinstance(doc, dict) or doc.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError("not a certmon checkpoint (missing format 'certmon.checkpoint')")
    version = doc.get("version")
    if version == 2:
        raise CheckpointError("checkpoint version 2 is a manifest of per-suite documents: "
                              "read it with monitor.incremental.load_checkpoint")
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


def _fsync_directory(directory: Path) -> None:
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write(path: str | Path, data: bytes | Sequence[bytes], *,
                 sync_directory: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically (temp file, fsync, rename, fsync directory).

    ``data`` is the content or its chunks in order (a large file written without joining
    them first).

    After a crash at any moment ``path`` holds either its old or its new content
    (``sync_directory=False``: the caller fsyncs the directory before relying on it).

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
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=_TMP_SUFFIX,
                               dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            if isinstance(data, bytes):
                fh.write(data)
            else:
                fh.writelines(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if sync_directory:
        _fsync_directory(directory)


_TMP_SUFFIX: Final = ".tmp"
# .<target>.<pid>.<random>.tmp (atomic_write); .<name>.ckpt.json.<random> (before the pid)
_TMP_NAME: Final = re.compile(r"^\..+\.(\d+)\.[A-Za-z0-9_]+\.tmp$")
_OLD_TMP_NAME: Final = re.compile(r"^\..+\.ckpt\.json\.[A-Za-z0-9_]{8}$")
_STARTED: Final = time.time()  # this process's start (a constant, not state)
_OLD_TMP_AGE_S: Final = 3600.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by another user
        return True
    return True


def remove_stale_temps(directory: str | Path) -> int:
    """Delete the temporary files a killed writer left in ``directory``; return how many.

    :func:`atomic_write` names its temporary file after the writing process; one whose
    process is gone, or that this process (same pid after a container restart) wrote before
    it started, can only be the remains of a ``kill -9``. Temporary checkpoint files of the
    older naming (no pid) are removed once an hour old. Other files are never touched.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> (d / ".state.json.999999999.abc.tmp").write_bytes(b"partial")
    7
    >>> (d / "state.json").write_bytes(b"{}")
    2
    >>> remove_stale_temps(d), sorted(p.name for p in d.iterdir())
    (1, ['state.json'])
    """
    removed = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        m = _TMP_NAME.match(entry.name)
        try:
            if m is not None:
                pid = int(m.group(1))
                stale = not _alive(pid) or (
                    pid == os.getpid() and entry.stat().st_mtime < _STARTED)
            elif _OLD_TMP_NAME.match(entry.name):
                stale = time.time() - entry.stat().st_mtime > _OLD_TMP_AGE_S
            else:
                continue
            if stale and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
                removed += 1
        except OSError:  # gone meanwhile, or not ours to remove
            continue
    return removed


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
        remove_stale_temps(self.path)  # left by a writer killed mid-write

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

    def save_many(self, items: list[tuple[str, bytes]]) -> None:
        """Atomically replace each ``(key, data)``; the directory is fsynced once, at the end."""
        for key, data in items:
            target = self.file_for(key)
            try:
                atomic_write(target, data, sync_directory=False)
            except OSError as exc:
                raise CheckpointError(f"cannot write checkpoint {target}: {exc}") from None
        if items:
            _fsync_directory(self.path)


def sign_checkpoint(data: bytes, key: bytes) -> bytes:
    """Add an ``"hmac"`` (HMAC-SHA256 under ``key``) to an encoded checkpoint.

    The MAC covers the same canonical JSON as the sha256 (every key but those two), so
    :func:`decode_checkpoint` still reads the result.

    Examples
    --------
    >>> signed = sign_checkpoint(encode_checkpoint({}, {}, written_at=0.0), b"k")
    >>> verify_checkpoint(signed, b"k") == signed
    True
    >>> decode_checkpoint(signed)
    ({}, {})
    """
    doc = _parse(data)
    if not isinstance(doc, dict):
        raise CheckpointError("not a certmon checkpoint")
    doc["hmac"] = hmac.new(key, _signed_part(doc), "sha256").hexdigest()
    return canonical_json(doc).encode("ascii")


def verify_checkpoint(data: bytes, key: bytes) -> bytes:
    """Return ``data`` if its ``"hmac"`` is valid under ``key``; raise otherwise.

    Raises
    ------
    CheckpointError
        Unsigned, or signed with another key, or modified after signing.

    Examples
    --------
    >>> verify_checkpoint(encode_checkpoint({}, {}, written_at=0.0), b"k")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    monitor.errors.CheckpointError: checkpoint refused: not authenticated (no hmac) ...
    """
    doc = _parse(data)
    mac = doc.get("hmac") if isinstance(doc, dict) else None
    if not isinstance(mac, str):
        raise CheckpointError(
            f"checkpoint refused: not authenticated (no hmac) while {KEY_ENV}(_FILE) is set")
    want = hmac.new(key, _signed_part(doc), "sha256").hexdigest()
    if not hmac.compare_digest(mac, want):
        raise CheckpointError(
            "checkpoint refused: hmac mismatch (forged, modified, or written with another key)")
    return data


def checkpoint_key(environ: Mapping[str, str]) -> bytes | None:
    """Return the checkpoint key from ``CERTMON_CHECKPOINT_KEY`` or ``..._KEY_FILE``.

    The file's content is used with surrounding whitespace stripped. None when neither is
    set (checkpoints are then only checksummed).

    Raises
    ------
    CheckpointError
        Both set, the file unreadable, or the key empty (the key itself is never printed).

    Examples
    --------
    >>> checkpoint_key({}) is None, checkpoint_key({"CERTMON_CHECKPOINT_KEY": "s3cret"})
    (True, b's3cret')
    """
    value, path = environ.get(KEY_ENV), environ.get(KEY_FILE_ENV)
    if value is not None and path is not None:
        raise CheckpointError(f"set {KEY_ENV} or {KEY_FILE_ENV}, not both")
    if path is not None:
        try:
            value = Path(path).read_text().strip()
        except OSError as exc:
            raise CheckpointError(f"cannot read {KEY_FILE_ENV} ({exc.strerror})") from None
    if value is None:
        return None
    if not value:
        raise CheckpointError(f"the checkpoint key ({KEY_ENV}/{KEY_FILE_ENV}) is empty")
    return value.encode()


class AuthenticatedStore:
    """A :class:`CheckpointStore` that signs what it saves and refuses unsigned loads.

    Examples
    --------
    >>> import tempfile
    >>> inner = LocalDirectoryStore(tempfile.mkdtemp())
    >>> store = AuthenticatedStore(inner, b"key")
    >>> store.save("k", encode_checkpoint({}, {}, written_at=0.0))
    >>> decode_checkpoint(store.load("k"))
    ({}, {})
    >>> AuthenticatedStore(inner, b"other").load("k")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    monitor.errors.CheckpointError: checkpoint refused: hmac mismatch ...

    Notes
    -----
    Guarantee: without the key nobody who can write the store (the checkpoint directory,
    the checkpoint topic) can make certmon load a state it did not write itself.
    """

    def __init__(self, inner: CheckpointStore, key: bytes) -> None:
        self.inner = inner
        self._key = key

    def load(self, key: str) -> bytes | None:
        """Load and verify the checkpoint of ``key``."""
        data = self.inner.load(key)
        return None if data is None else verify_checkpoint(data, self._key)

    def save(self, key: str, data: bytes) -> None:
        """Sign and save the checkpoint of ``key``."""
        self.inner.save(key, sign_checkpoint(data, self._key))

    def save_many(self, items: list[tuple[str, bytes]]) -> None:
        """Sign and save each ``(key, data)`` (one batch when the inner store batches)."""
        signed = [(k, sign_checkpoint(d, self._key)) for k, d in items]
        batch = getattr(self.inner, "save_many", None)
        if batch is not None:
            batch(signed)
        else:
            for key, data in signed:
                self.inner.save(key, data)

    def load_many(self, keys: list[str]) -> list[bytes | None]:
        """Load and verify each key (one batch when the inner store batches)."""
        batch = getattr(self.inner, "load_many", None)
        got = list(batch(keys)) if batch is not None else [self.inner.load(k) for k in keys]
        return [None if d is None else verify_checkpoint(d, self._key) for d in got]


def secured_store(store: CheckpointStore, environ: Mapping[str, str]) -> CheckpointStore:
    """``store`` wrapped in :class:`AuthenticatedStore` when a checkpoint key is configured.

    Examples
    --------
    >>> import tempfile
    >>> inner = LocalDirectoryStore(tempfile.mkdtemp())
    >>> secured_store(inner, {}) is inner
    True
    >>> type(secured_store(inner, {"CERTMON_CHECKPOINT_KEY": "k"})).__name__
    'AuthenticatedStore'
    """
    key = checkpoint_key(environ)
    return store if key is None else AuthenticatedStore(store, key)
