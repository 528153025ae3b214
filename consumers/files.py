r"""JSONL file / stdin source with resumable positions.

A position is ``{"kind": "file", "path": PATH, "offset": BYTES, "line": N}``: the byte
offset of the next line to read and the number of lines consumed so far. A checkpoint
stores it; :class:`FileSource` resumes there (a file by seeking; stdin by reading and
discarding ``offset`` bytes, which assumes the same stream is piped in again).

Blank lines are skipped (they still advance the position). Trailing ``\r\n`` / ``\n``
are stripped. Without ``follow`` a final line without newline is an event; with
``follow`` (``tail -f``) it is held back until its newline arrives.

Examples
--------
>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "ev.jsonl"
>>> _ = p.write_bytes(b'{"a": 1}\n\n{"b": 2}\n')
>>> src = FileSource(str(p))
>>> [raw for raw in src]
[b'{"a": 1}', b'{"b": 2}']
>>> src.position()  # doctest: +ELLIPSIS
{'kind': 'file', 'path': '...ev.jsonl', 'offset': 19, 'line': 3}
>>> list(FileSource(str(p), start={"offset": 10, "line": 2}))
[b'{"b": 2}']
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from monitor.checkpoint import Position
from monitor.errors import SourceError

__all__ = ["FileSource"]


class FileSource:
    """Iterate over the raw lines of a JSONL file (or ``"-"`` for stdin).

    Parameters
    ----------
    path : str
        File path, or ``"-"`` for standard input.
    start : dict, optional
        A position from :meth:`position` (only ``offset`` and ``line`` are used).
    follow : bool
        Keep waiting for new lines at end of file until ``should_stop()`` is true.
    poll_seconds : float
        Sleep between polls when following.
    should_stop : callable, optional
        Checked between lines and while waiting; True ends the iteration.
    on_idle : callable, optional
        Called before each sleep while following (the runner flushes and checkpoints).

    Notes
    -----
    After each yielded line, :meth:`position` is the position *after* that line, so a
    checkpoint taken right after processing it resumes with the next line.
    """

    def __init__(
        self,
        path: str,
        start: Position | None = None,
        follow: bool = False,
        poll_seconds: float = 0.2,
        should_stop: Callable[[], bool] | None = None,
        on_idle: Callable[[], None] | None = None,
    ) -> None:
        self.path = path
        self.offset = 0
        self.line = 0
        self.last_offset = 0
        if start:
            try:
                self.offset = int(start["offset"])
                self.line = int(start["line"])
            except (KeyError, TypeError, ValueError):
                raise SourceError(f"invalid file position in checkpoint: {start!r}") from None
            if self.offset < 0 or self.line < 0:
                raise SourceError(f"invalid file position in checkpoint: {start!r}")
        self.follow = follow
        self.poll_seconds = poll_seconds
        self._stop = should_stop or (lambda: False)
        self.on_idle = on_idle

    def position(self) -> Position:
        """Position after the last line read (what a checkpoint stores)."""
        return {"kind": "file", "path": self.path, "offset": self.offset, "line": self.line}

    def last_event_source(self) -> dict[str, Any]:
        """Where the last yielded line came from (for dead-letter records)."""
        return {"kind": "file", "path": self.path, "offset": self.last_offset, "line": self.line}

    def _open(self) -> IO[bytes]:
        if self.path == "-":
            fh = sys.stdin.buffer
            remaining = self.offset
            while remaining > 0:
                chunk = fh.read(min(remaining, 1 << 20))
                if not chunk:
                    raise SourceError(
                        f"stdin ended after {self.offset - remaining} bytes but the checkpoint "
                        f"position is {self.offset}: pipe the same stream again to resume"
                    )
                remaining -= len(chunk)
            return fh
        try:
            fh = open(self.path, "rb")  # noqa: SIM115
        except OSError as exc:
            raise SourceError(f"cannot open input {self.path}: {exc.strerror}") from None
        size = Path(self.path).stat().st_size
        if self.offset > size:
            fh.close()
            raise SourceError(
                f"checkpoint position {self.offset} is beyond the end of {self.path} ({size} "
                "bytes): the input changed since the checkpoint was written"
            )
        fh.seek(self.offset)
        return fh

    def __iter__(self) -> Iterator[bytes]:
        fh = self._open()
        try:
            if self.follow and self.path != "-":
                yield from self._follow(fh)
            else:
                yield from self._read(fh)
        finally:
            if fh is not sys.stdin.buffer:
                fh.close()

    def _read(self, fh: IO[bytes]) -> Iterator[bytes]:
        stop = self._stop
        for line in fh:
            start = self.offset
            self.offset = start + len(line)
            self.line += 1
            raw = line.rstrip(b"\r\n")
            if not raw.strip():
                continue
            self.last_offset = start
            yield raw
            if stop():
                return

    def _check_not_replaced(self, fh: IO[bytes]) -> None:
        """Refuse to go on when the followed file was truncated or replaced (e.g. rotated).

        Reading on would skip or misframe the new file's first bytes: stop with a clear error
        instead, so nothing is silently lost (restart on the new file with a fresh checkpoint
        directory, or give each rotated file its own run).
        """
        if fh is sys.stdin.buffer:
            return
        held = os.fstat(fh.fileno())
        try:
            now = os.stat(self.path)
        except OSError:
            now = None
        if held.st_size < self.offset or now is None or (now.st_dev, now.st_ino) != (
            held.st_dev,
            held.st_ino,
        ):
            raise SourceError(
                f"input {self.path} was truncated or replaced while being followed (read up to "
                f"byte {self.offset}): refusing to skip or misread the new content"
            )

    def _follow(self, fh: IO[bytes]) -> Iterator[bytes]:
        stop = self._stop
        while not stop():
            line = fh.readline()
            if not line or not line.endswith(b"\n"):
                if line:
                    fh.seek(self.offset)
                self._check_not_replaced(fh)
                if self.on_idle is not None:
                    self.on_idle()
                time.sleep(self.poll_seconds)
                continue
            start = self.offset
            self.offset = start + len(line)
            self.line += 1
            raw = line.rstrip(b"\r\n")
            if not raw.strip():
                continue
            self.last_offset = start
            yield raw
