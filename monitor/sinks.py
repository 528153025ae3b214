"""Output sinks for alerts, label requests and dead letters (one JSON object per record).

Sinks are *at-least-once*: after a crash, the records emitted since the last checkpoint
are emitted again, with the same alert ids. The runner flushes every sink before it
writes a checkpoint, so nothing covered by a checkpoint is ever lost.

Examples
--------
>>> sink = open_sink("memory")
>>> sink.emit({"kind": "label"})
>>> sink.records
[{'kind': 'label'}]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import IO, Any, Protocol, runtime_checkable

from monitor.errors import SinkError

__all__ = [
    "JsonlFileSink",
    "MemorySink",
    "NullSink",
    "Sink",
    "StdoutSink",
    "open_sink",
]


@runtime_checkable
class Sink(Protocol):
    """Where records go."""

    def emit(self, record: dict[str, Any]) -> None:
        """Send one record."""

    def flush(self) -> None:
        """Make every record emitted so far durable (or delivered)."""

    def close(self) -> None:
        """Flush and release resources."""


def _dumps(record: dict[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


class JsonlFileSink:
    r"""Append JSON lines to a file; ``flush`` also fsyncs.

    Parameters
    ----------
    path : str or Path
        Output file (parent directories are created).
    append : bool
        Append to an existing file (resume) instead of truncating it.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "a.jsonl"
    >>> s = JsonlFileSink(p); s.emit({"a": 1}); s.close()
    >>> p.read_text()
    '{"a":1}\n'
    """

    def __init__(self, path: str | Path, append: bool = False) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh: IO[str] = open(self.path, "a" if append else "w", encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            raise SinkError(f"cannot open {self.path} for writing: {exc.strerror}") from None

    def emit(self, record: dict[str, Any]) -> None:
        """Write one record as a line."""
        self._fh.write(_dumps(record) + "\n")

    def flush(self) -> None:
        """Flush and fsync."""
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        """Flush, fsync and close."""
        if not self._fh.closed:
            self.flush()
            self._fh.close()


class StdoutSink:
    """Print JSON lines to standard output (or another text stream).

    Examples
    --------
    >>> StdoutSink().emit({"b": 2})
    {"b":2}
    """

    def __init__(self, stream: IO[str] | None = None) -> None:
        self._stream = stream

    def _out(self) -> IO[str]:
        return self._stream if self._stream is not None else sys.stdout

    def emit(self, record: dict[str, Any]) -> None:
        """Print one record (flushed at once: a pipe reader sees it immediately)."""
        out = self._out()
        out.write(_dumps(record) + "\n")
        out.flush()

    def flush(self) -> None:
        """Flush the stream."""
        self._out().flush()

    def close(self) -> None:
        """Flush (standard streams are not closed)."""
        self.flush()


class MemorySink:
    """Keep records in a list (tests, demo)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def emit(self, record: dict[str, Any]) -> None:
        """Append one record."""
        self.records.append(record)

    def flush(self) -> None:
        """Nothing to do."""

    def close(self) -> None:
        """Nothing to do."""


class NullSink:
    """Drop every record."""

    def emit(self, record: dict[str, Any]) -> None:
        """Drop the record."""

    def flush(self) -> None:
        """Nothing to do."""

    def close(self) -> None:
        """Nothing to do."""


def open_sink(spec: str, append: bool = False) -> Sink:
    """Open a sink from its configuration string.

    Parameters
    ----------
    spec : str
        ``"stdout"``, ``"stderr"``, ``"file:PATH"``, ``"memory"`` or ``"none"``.
    append : bool
        For files: append (resume) instead of truncate.

    Raises
    ------
    SinkError
        Unknown specification or unwritable file.

    Examples
    --------
    >>> type(open_sink("none")).__name__
    'NullSink'
    >>> open_sink("x")
    Traceback (most recent call last):
    ...
    monitor.errors.SinkError: unknown sink 'x' (expected stdout, stderr, file:PATH, memory or none)
    """
    if spec == "stdout":
        return StdoutSink()
    if spec == "stderr":
        return StdoutSink(sys.stderr)
    if spec == "none":
        return NullSink()
    if spec == "memory":
        return MemorySink()
    if spec.startswith("file:") and len(spec) > 5:
        return JsonlFileSink(spec[5:], append=append)
    raise SinkError(
        f"unknown sink {spec!r} (expected stdout, stderr, file:PATH, memory or none)"
    )
