"""Output sinks for alerts, label requests and dead letters (one JSON object per record).

Label requests go somewhere visible by default (``sinks.requests = "auto"``, see
:func:`resolve_requests_spec`); discarding them takes an explicit ``"none"``, which is
warned about.

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
import logging
import os
import stat
import sys
from pathlib import Path
from typing import IO, Any, Protocol, runtime_checkable

from monitor.errors import SinkError

__all__ = [
    "AUTO",
    "JsonlFileSink",
    "MemorySink",
    "NullSink",
    "Sink",
    "StdoutSink",
    "open_sink",
    "resolve_requests_spec",
    "warn_if_discarded",
]

AUTO = "auto"  # sinks.requests default: resolved by resolve_requests_spec
_log = logging.getLogger("certmon.sinks")


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

    Notes
    -----
    ``path`` may also be a character device or a FIFO (``/dev/null``, a named pipe,
    ``/dev/stdout``): those are flushed but not fsynced (fsync is meaningless there and fails
    with EINVAL). When appending to a regular file whose last line is incomplete (a write cut
    short by a crash or a full disk), that torn line is cut off first: its record was not
    covered by a checkpoint, so the resumed run emits it again, whole.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "a.jsonl"
    >>> s = JsonlFileSink(p); s.emit({"a": 1}); s.close()
    >>> p.read_text()
    '{"a":1}\n'
    >>> _ = p.open("a").write('{"b":')  # torn by ENOSPC
    >>> s = JsonlFileSink(p, append=True); s.emit({"b": 2}); s.close()
    >>> p.read_text()
    '{"a":1}\n{"b":2}\n'
    >>> s = JsonlFileSink("/dev/null"); s.emit({"c": 3}); s.close()
    """

    def __init__(self, path: str | Path, append: bool = False) -> None:
        self.path = Path(path)
        try:
            if not self.path.parent.exists():
                self.path.parent.mkdir(parents=True, exist_ok=True)
            if append:
                _cut_torn_line(self.path)
            self._fh: IO[str] = open(self.path, "a" if append else "w", encoding="utf-8")  # noqa: SIM115
            self._regular = stat.S_ISREG(os.fstat(self._fh.fileno()).st_mode)
        except OSError as exc:
            raise SinkError(f"cannot open {self.path} for writing: {exc.strerror}") from None

    def emit(self, record: dict[str, Any]) -> None:
        """Write one record as a line."""
        self._fh.write(_dumps(record) + "\n")

    def flush(self) -> None:
        """Flush, and fsync when the file is a regular file."""
        self._fh.flush()
        if self._regular:
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        """Flush, fsync and close."""
        if not self._fh.closed:
            self.flush()
            self._fh.close()


def _cut_torn_line(path: Path) -> None:
    """Truncate a regular file after its last newline (drop an incomplete last line)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
        return
    with open(path, "r+b") as fh:
        size = st.st_size
        block = 65536
        pos = size
        while pos > 0:
            start = max(0, pos - block)
            fh.seek(start)
            chunk = fh.read(pos - start)
            if pos == size and chunk.endswith(b"\n"):
                return
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                fh.truncate(start + cut + 1)
                return
            pos = start
        fh.truncate(0)


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
    shown = spec if "://" not in spec else spec.partition("://")[0] + "://..."  # may hold a token
    raise SinkError(
        f"unknown sink {shown!r} (expected stdout, stderr, file:PATH, memory or none)"
    )


def resolve_requests_spec(spec: str, *, kafka: bool = False, beside: str | None = None) -> str:
    """Resolve the requests sink ``"auto"`` (the default of ``sinks.requests``).

    Parameters
    ----------
    spec : str
        The configured specification; anything but ``"auto"`` is returned unchanged.
    kafka : bool
        The source is Kafka: requests go to the requests topic (``"kafka"``).
    beside : str, optional
        A file the run writes (``certmon replay``'s STATE.json): requests go to
        ``requests.jsonl`` in its directory.

    Returns
    -------
    str
        ``"kafka"``, ``"file:DIR/requests.jsonl"`` or ``"stdout"`` (otherwise).

    Notes
    -----
    Label requests are how certmon asks for the labels its certificates need: by default they
    go where an operator looks, never nowhere. ``"none"`` must be configured explicitly (and
    :func:`warn_if_discarded` says so when a run starts).

    Examples
    --------
    >>> resolve_requests_spec("auto", kafka=True)
    'kafka'
    >>> resolve_requests_spec("auto", beside="out/STATE.json")
    'file:out/requests.jsonl'
    >>> resolve_requests_spec("auto"), resolve_requests_spec("none", kafka=True)
    ('stdout', 'none')
    """
    if spec != AUTO:
        return spec
    if kafka:
        return "kafka"
    if beside is not None and beside != "-":
        return "file:" + os.path.join(os.path.dirname(beside), "requests.jsonl")
    return "stdout"


def warn_if_discarded(spec: str) -> bool:
    """Log a warning when label requests are configured to be discarded; return whether.

    Examples
    --------
    >>> warn_if_discarded("stdout")
    False
    """
    if spec != "none":
        return False
    _log.warning("certmon: sinks.requests = \"none\": label requests are counted "
                 "(certmon_label_requests_total) but discarded; no labeller will see them "
                 "(see docs/label-loop.md)")
    return True
