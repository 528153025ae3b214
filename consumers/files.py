r"""JSONL file / stdin source with resumable positions.

A position is ``{"kind": "file", "path": PATH, "offset": BYTES, "line": N, "tail_len": K,
"tail_sha256": H}``: the byte offset of the next line to read, the number of lines consumed
so far, and the hash of the ``K <= 64`` bytes just before the offset, checked on resume so a
replaced or rewritten input is refused instead of misread (appending is fine). A checkpoint
stores it; :class:`FileSource` resumes there (a file by seeking; stdin by reading and
discarding ``offset`` bytes, which assumes the same stream is piped in again).

:meth:`FileSource.read` returns the events in batches (the runner's fast path); iterating
yields them one at a time. Blank lines are skipped (they still advance the position).
Trailing ``\r\n`` / ``\n`` are stripped. Without ``follow`` a final line without newline
is an event; with ``follow`` (``tail -f``) it is held back until its newline arrives.

Examples
--------
>>> import tempfile, pathlib
>>> p = pathlib.Path(tempfile.mkdtemp()) / "ev.jsonl"
>>> _ = p.write_bytes(b'{"a": 1}\n\n{"b": 2}\n')
>>> src = FileSource(str(p))
>>> src.read(10), src.event_source(1)["offset"], src.event_source(1)["line"]
([b'{"a": 1}', b'{"b": 2}'], 10, 3)
>>> pos = src.position(); pos["offset"], pos["line"], pos["tail_len"]
(19, 3, 19)
>>> [raw for raw in FileSource(str(p))]  # one at a time
[b'{"a": 1}', b'{"b": 2}']
>>> list(FileSource(str(p), start={"offset": 10, "line": 2}))
[b'{"b": 2}']
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from hashlib import sha256
from itertools import islice
from pathlib import Path
from typing import IO, Any

from monitor.checkpoint import Position
from monitor.errors import SourceError

__all__ = ["FileSource"]

_TAIL_BYTES = 64  # bytes before a checkpoint's offset whose hash is checked on resume


class FileSource:
    """Read the raw lines of a JSONL file (or ``"-"`` for stdin), in batches.

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
        Checked between reads and while waiting; True ends the input.
    on_idle : callable, optional
        Called before each sleep while following (the runner flushes and checkpoints).

    Notes
    -----
    After each :meth:`read` (or each event iterated), :meth:`position` is the position
    *after* the events returned, so a checkpoint taken right after processing them resumes
    with the next line.
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
        self._start_tail: tuple[int, str] | None = None
        if start:
            try:
                self.offset = int(start["offset"])
                self.line = int(start["line"])
            except (KeyError, TypeError, ValueError):
                raise SourceError(f"invalid file position in checkpoint: {start!r}") from None
            if self.offset < 0 or self.line < 0:
                raise SourceError(f"invalid file position in checkpoint: {start!r}")
            if "tail_sha256" in start:  # absent in positions written before the check existed
                self._start_tail = (int(start["tail_len"]), str(start["tail_sha256"]))
        self.follow = follow
        self.poll_seconds = poll_seconds
        self._stop = should_stop or (lambda: False)
        self.on_idle = on_idle
        self._fh: IO[bytes] | None = None
        self._done = False
        # the last read: its raw lines, its events, and the position before it
        self._lines: list[bytes] = []
        self._events: list[bytes] = []
        self._batch_offset = self.offset
        self._batch_line = self.line

    def position(self) -> Position:
        """Position after the last line read (what a checkpoint stores)."""
        pos: Position = {"kind": "file", "path": self.path, "offset": self.offset,
                         "line": self.line}
        if self._lines:
            tail = b"".join(self._lines[-4:])[-_TAIL_BYTES:]
            pos["tail_len"], pos["tail_sha256"] = len(tail), sha256(tail).hexdigest()
        elif self._start_tail is not None:
            pos["tail_len"], pos["tail_sha256"] = self._start_tail
        return pos

    def _check_tail(self, tail: bytes) -> None:
        """Refuse to resume when the bytes before the checkpoint's offset are not the same."""
        if self._start_tail is None:
            return
        n, expected = self._start_tail
        if len(tail) != n or sha256(tail).hexdigest() != expected:
            raise SourceError(
                f"input {self.path} changed since the checkpoint: the {n} bytes before offset "
                f"{self.offset} differ (replaced or rewritten, not appended to); start from an "
                "empty checkpoint directory to read it as new input"
            )

    def event_source(self, index: int) -> dict[str, Any]:
        """Where event ``index`` of the last :meth:`read` came from (byte offset and line).

        See the module's example (blank lines count in offsets and line numbers).
        """
        if not 0 <= index < len(self._events):
            raise IndexError(f"no event {index} in the last read ({len(self._events)} events)")
        offset, line = self._batch_offset, self._batch_line
        seen = -1
        for raw in self._lines:  # only for dead letters: a walk over the batch is cheap
            line += 1
            if _is_event(raw.rstrip(b"\r\n")):
                seen += 1
                if seen == index:
                    break
            offset += len(raw)
        return {"kind": "file", "path": self.path, "offset": offset, "line": line}

    def read(self, limit: int) -> list[bytes]:
        """Return up to ``limit`` raw events; ``[]`` once the input ended or a stop was asked.

        Without ``follow`` the lines are read in one call (the fast path of ``certmon
        replay``); with ``follow`` the complete lines available now are returned, waiting
        (and calling ``on_idle``) while there are none.
        """
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        while True:
            if self._fh is None:
                if self._done:
                    return []
                self._fh = self._open()
            if self.follow and self.path != "-":
                lines = self._follow_lines(self._fh, limit)
            else:
                lines = list(islice(self._fh, limit))
            self._events = []
            if not lines:
                self.close()
                return []
            self._batch_offset, self._batch_line = self.offset, self.line
            self.offset += sum(map(len, lines))
            self.line += len(lines)
            self._lines = lines
            events = [ln.rstrip(b"\r\n") for ln in lines]
            if not all(events) or any(map(bytes.isspace, events)):  # blank lines: rare
                events = [raw for raw in events if _is_event(raw)]
            self._events = events
            if events:
                return events

    def close(self) -> None:
        """Close the input (reading again returns ``[]``)."""
        fh, self._fh = self._fh, None
        self._done = True
        if fh is not None and fh is not sys.stdin.buffer:
            fh.close()

    def __iter__(self) -> Iterator[bytes]:
        """Yield events one at a time (:meth:`position` is exact after each)."""
        try:
            while not self._stop():
                events = self.read(1)
                if not events:
                    return
                yield events[0]
        finally:
            self.close()

    def _open(self) -> IO[bytes]:
        if self.path == "-":
            fh = sys.stdin.buffer
            remaining = self.offset
            tail = b""
            while remaining > 0:
                chunk = fh.read(min(remaining, 1 << 20))
                if not chunk:
                    raise SourceError(
                        f"stdin ended after {self.offset - remaining} bytes but the checkpoint "
                        f"position is {self.offset}: pipe the same stream again to resume"
                    )
                remaining -= len(chunk)
                tail = (tail + chunk)[-_TAIL_BYTES:]
            self._check_tail(tail[len(tail) - self._start_tail[0]:] if self._start_tail else b"")
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
        if self._start_tail is not None:
            n = self._start_tail[0]
            self._check_tail(os.pread(fh.fileno(), n, self.offset - n) if n <= self.offset
                             else b"")
        fh.seek(self.offset)
        return fh

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

    def _follow_lines(self, fh: IO[bytes], limit: int) -> list[bytes]:
        """Return the complete lines available now (up to ``limit``), waiting for some."""
        while not self._stop():
            lines: list[bytes] = []
            end = self.offset
            while len(lines) < limit:
                line = fh.readline()
                if not line.endswith(b"\n"):  # nothing more, or a line still being written
                    if line:
                        fh.seek(end)
                    break
                lines.append(line)
                end += len(line)
            if lines:
                return lines
            self._check_not_replaced(fh)
            if self.on_idle is not None:
                self.on_idle()
            time.sleep(self.poll_seconds)
        return []


def _is_event(raw: bytes) -> bool:
    """Tell whether a line (newline stripped) is an event, i.e. not blank."""
    return bool(raw) and not raw.isspace()
