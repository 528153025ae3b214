"""Fetch process: read Kafka records in a child process, pipelined with processing.

kafka-python decodes every record in Python (about 10 us of CPU per record), as long as the
engine needs for one event. With ``[kafka] fetch_process = true`` the group member (the
parent, which owns the group membership, the engines, the checkpoints and the offset commits)
pauses its own fetching and a child process reads the assigned partitions with a manually
assigned consumer, from the offsets the parent gives it, and streams the records back through
a pipe: decoding and processing then run on two CPUs at once.

Protocol (parent -> child, JSON lines on the child's stdin; secrets never on the command line):

- first line: ``{"client": {...kafka-python client kwargs...}, "max_poll_records": N,
  "poll_timeout_ms": T, "client_id": ID}``;
- then ``{"epoch": E, "assign": [[topic, partition, offset or null], ...]}``: read exactly
  these partitions from these offsets (null: from the beginning), tagging frames with ``E``.

Child -> parent, binary frames on stdout (see :func:`encode_frame`), one per partition batch:
the epoch, the topic-partition, its high watermark, the child's position after the batch (the
offset it reads next: past transaction markers, aborted and expired records too), the offsets
and the values. The parent
drops frames of an older epoch (records fetched before a rebalance or a rewind). The child
exits when its stdin closes (the parent ended, even by ``kill -9``) or a write fails, and
only then: it ignores SIGTERM and SIGINT, so a signal sent to the whole process group
(systemd's default ``KillMode``, ``timeout``, Ctrl-C) stops the parent, which writes its final
checkpoint and state while the child still runs, then closes the child's stdin.

Correctness does not depend on the child: the parent skips offsets its state already reflects
(:func:`consumers.kafka.partitions.process_records`) and the checkpoint stays the source of
truth; a dead child is an error of the poll loop, which reconnects with backoff.

Examples
--------
>>> frame = encode_frame(3, "t", 1, 42, [(7, b"a"), (8, None)], position=10)
>>> decode_frames(bytearray(frame + frame[:9]))  # a complete frame, then part of one
([(3, 't', 1, 42, 10, [7, 8], [b'a', None])], 60)
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from consumers.kafka.partitions import Columns
from consumers.kafka.read_positions import ReadPositions
from monitor.errors import CertmonError

__all__ = ["FetchProcess", "child_command", "decode_frames", "encode_frame", "group_busy"]

# magic, epoch, partition, topic length, high watermark, position, n
_HEADER = struct.Struct("<4sIIHqqI")
_MAGIC = b"CMF2"
_F_SETPIPE_SZ = 1031


def encode_frame(
    epoch: int, topic: str, partition: int, highwater: int | None,
    records: Iterable[tuple[int, bytes | None]], position: int | None = None,
) -> bytes:
    """Encode one partition batch: header, topic, offsets, value lengths (-1: None), values.

    ``highwater`` and ``position`` (the offset the child reads next) are -1 when unknown.
    """
    recs = list(records)
    name = topic.encode()
    values = [v for _, v in recs]
    n = len(recs)
    return b"".join([
        _HEADER.pack(_MAGIC, epoch, partition, len(name), -1 if highwater is None else highwater,
                     -1 if position is None else position, n),
        name,
        struct.pack(f"<{n}q", *(o for o, _ in recs)),
        struct.pack(f"<{n}i", *(-1 if v is None else len(v) for v in values)),
        *(v for v in values if v is not None),
    ])


def decode_frames(
    buf: bytearray,
) -> tuple[list[tuple[int, str, int, int, int, list[int], list[bytes | None]]], int]:
    """Decode the complete frames at the start of ``buf``; return them and the bytes used.

    Raises
    ------
    CertmonError
        The stream is not a frame stream (a bad magic number).
    """
    out = []
    pos = 0
    size = len(buf)
    while size - pos >= _HEADER.size:
        magic, epoch, partition, tlen, high, position, n = _HEADER.unpack_from(buf, pos)
        if magic != _MAGIC:
            raise CertmonError("fetch process: corrupt frame stream")
        head = pos + _HEADER.size
        lengths_at = head + tlen + 8 * n
        body = lengths_at + 4 * n
        if size < body:
            break
        lengths = struct.unpack_from(f"<{n}i", buf, lengths_at)
        end = body + sum(length for length in lengths if length > 0)
        if size < end:
            break
        topic = bytes(buf[head : head + tlen]).decode()
        offsets = list(struct.unpack_from(f"<{n}q", buf, head + tlen))
        values: list[bytes | None] = []
        at = body
        for length in lengths:
            if length < 0:
                values.append(None)
            else:
                values.append(bytes(buf[at : at + length]))
                at += length
        out.append((epoch, topic, partition, high, position, offsets, values))
        pos = end
    return out, pos


def child_command() -> tuple[list[str], dict[str, str], str]:
    """Return ``(argv, env, cwd)`` that start the fetch child isolated from the working directory.

    Notes
    -----
    ``python -m`` puts the current directory first on ``sys.path``: a ``json.py`` or
    ``secrets.py`` planted there (in the image the working directory is the writable
    checkpoint volume) would run inside the child, which reads the SASL and SSL passwords.
    The child runs with ``-P`` (no unsafe path entry), from the root directory, with
    the directory certmon itself was imported from first on ``PYTHONPATH`` (so a source
    checkout without installation still works) and ``PYTHONSTARTUP``/``PYTHONINSPECT``
    removed. Relative ``PYTHONPATH`` entries resolve against ``/``, not the volume.

    Examples
    --------
    >>> argv, env, cwd = child_command()
    >>> argv[1:], cwd
    (['-P', '-m', 'consumers.kafka.fetcher'], '/')
    """
    code_root = str(Path(__file__).resolve().parents[2])  # holds consumers/ and monitor/
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONSTARTUP", "PYTHONINSPECT")}
    inherited = env.get("PYTHONPATH")  # the operator's own setting: trusted, kept after ours
    env["PYTHONPATH"] = code_root + (os.pathsep + inherited if inherited else "")
    return [sys.executable, "-P", "-m", "consumers.kafka.fetcher"], env, os.path.abspath(os.sep)


class FetchProcess:
    """Parent side: start the child, assign partitions, read their records.

    Parameters
    ----------
    client : dict
        kafka-python client keyword arguments (bootstrap servers, security settings).
    client_id : str
    max_poll_records, poll_timeout_ms : int
        The child's consumer settings.
    """

    def __init__(self, client: dict[str, object], client_id: str, max_poll_records: int,
                 poll_timeout_ms: int) -> None:
        # the child's stderr goes to a file (never a pipe that could fill and block it): its
        # last line is the reason reported when the child exits
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
        argv, env, cwd = child_command()
        self._proc = subprocess.Popen(  # our own module, no shell
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env,
            cwd=cwd,
        )
        if self._proc.stdout is not None:  # room for several batches in flight (Linux)
            with contextlib.suppress(OSError):
                fcntl.fcntl(self._proc.stdout.fileno(), _F_SETPIPE_SZ, 1 << 20)
        self.epoch = 0
        self._buf = bytearray()
        self.highwaters: dict[tuple[str, int], int] = {}
        self.read = ReadPositions()  # the child's positions, this epoch
        self._send({"client": client, "client_id": client_id,
                    "max_poll_records": max_poll_records, "poll_timeout_ms": poll_timeout_ms})

    def _send(self, doc: dict[str, Any]) -> None:
        stdin = self._proc.stdin
        if stdin is None:
            raise CertmonError("fetch process: no command pipe")
        try:
            stdin.write(json.dumps(doc).encode() + b"\n")
            stdin.flush()
        except OSError as exc:
            raise CertmonError(f"fetch process is gone ({exc})") from None

    def assign(self, offsets: dict[tuple[str, int], int | None]) -> None:
        """Read exactly these partitions from these offsets (None: the beginning) from now on."""
        self.epoch += 1
        self.highwaters = {}
        self.read.clear()
        self._send({"epoch": self.epoch,
                    "assign": [[t, p, o] for (t, p), o in sorted(offsets.items())]})

    def follow(self, consumer: Any, offsets: dict[int, dict[str, int]]) -> None:
        """Pause ``consumer`` (the group member) and read its partitions from ``offsets``.

        ``offsets`` maps each owned partition to its next offset per topic (a topic not in it
        is read from the beginning); assigned partitions not owned are not read.
        """
        owned = [tp for tp in consumer.assignment() if tp.partition in offsets]
        consumer.pause(*owned)
        self.assign({(tp.topic, tp.partition): offsets[tp.partition].get(tp.topic)
                     for tp in owned})

    def poll(self, timeout: float) -> dict[tuple[str, int], Columns]:
        """Return the records of the current epoch that arrive within ``timeout`` s, by partition.

        Raises
        ------
        CertmonError
            The child exited.
        """
        stdout = self._proc.stdout
        if stdout is None:
            raise CertmonError("fetch process: no record pipe")
        fd = stdout.fileno()
        out: dict[tuple[str, int], Columns] = {}
        while True:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                break
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                code = self._proc.wait()
                raise CertmonError(f"fetch process exited (code {code}): {self.last_error()}")
            self._buf += chunk
            frames, used = decode_frames(self._buf)
            del self._buf[:used]
            for epoch, topic, partition, high, position, offsets, values in frames:
                if epoch != self.epoch:
                    continue  # fetched before the last assignment: stale
                if high >= 0:
                    self.highwaters[(topic, partition)] = high
                self.read.note(topic, partition, offsets[-1] + 1 if offsets else None, position)
                if not offsets:  # a partition without records: its high watermark only
                    continue
                got = out.setdefault((topic, partition), Columns([], []))
                got.offsets.extend(offsets)
                got.values.extend(values)
            if out:  # one read's worth (at most 1 MiB): the caller processes it, then polls
                break
        return out

    def last_error(self) -> str:
        """Return the last line the child wrote to stderr (its exit reason), or ``"?"``."""
        try:
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - 4096))
            tail = self._stderr.read().decode(errors="replace")
        except (OSError, ValueError):
            return "?"
        lines = [line.strip() for line in tail.splitlines() if line.strip()]
        return lines[-1][:500] if lines else "?"

    # the child holds no state (it reads by assignment, no group, nothing to commit): it is
    # given this long to end by itself (stdin closed), then killed, so a stop never waits for
    # its poll and its consumer's close (about 1 s measured)
    CLOSE_GRACE_S = 0.1

    def close(self, timeout: float = 5.0) -> None:
        """Stop the child: close its stdin, kill it after ``min(timeout, CLOSE_GRACE_S)`` s.

        While stopping, ``timeout`` is what is left of the shutdown budget.
        """
        proc = self._proc
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(timeout=min(timeout, self.CLOSE_GRACE_S))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        self._stderr.close()


def group_busy(consumer: Any) -> bool:
    """Tell whether the group protocol needs a blocking ``poll()`` (joining, no coordinator).

    kafka-python completes a join only within one ``poll()`` that waits for the broker's
    answer: a ``poll(timeout_ms=0)`` re-sends it forever. A join in flight is not always a
    ``need_rejoin()`` (after a metadata change it is only a not-``stable()`` member), so
    all three are checked. There is no public API for this: other kafka-python internals
    mean "always block" (correct, just slower).
    """
    coordinator: Any = getattr(consumer, "_coordinator", None)
    try:
        return bool(coordinator.coordinator_unknown() or coordinator.need_rejoin()
                    or not coordinator.stable())
    except AttributeError:
        return True


def _child() -> int:
    """Child entry point: run :func:`_child_loop`; a failure ends it with one line on stderr."""
    import signal

    for sig in (signal.SIGTERM, signal.SIGINT):  # the parent ends it (see the module docs)
        signal.signal(sig, signal.SIG_IGN)
    try:
        return _child_loop()
    except Exception as exc:  # reported by the parent (FetchProcess.last_error)
        print(f"certmon fetch process failed: {type(exc).__name__}: {exc}", file=sys.stderr,
              flush=True)
        return 3


def _child_loop() -> int:
    """Child main loop (see the module docstring)."""
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    fd = sys.stdin.fileno()
    out = sys.stdout.buffer
    pending = b""

    def commands(block: float) -> list[dict[str, Any]] | None:
        nonlocal pending
        ready, _, _ = select.select([fd], [], [], block)
        if not ready:
            return []
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return None  # the parent is gone
        pending += chunk
        *lines, pending = pending.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]

    setup: list[dict[str, Any]] = []
    while not setup:
        got = commands(1.0)
        if got is None:
            return 0
        setup = got
    cfg = setup.pop(0)
    consumer = KafkaConsumer(**cfg["client"], client_id=f"{cfg['client_id']}-fetch",
                             group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest",  # as the group member's consumer
                             max_poll_records=cfg["max_poll_records"])
    epoch = 0
    assigned: list[Any] = []
    # partition -> (high watermark, position) last sent (this assignment)
    reported: dict[Any, tuple[int, int | None]] = {}
    try:
        while True:
            got = commands(0.0 if assigned else 0.5)
            if got is None:
                return 0
            for cmd in setup + got:
                epoch = int(cmd["epoch"])
                assigned = [TopicPartition(t, p) for t, p, _ in cmd["assign"]]
                consumer.assign(assigned)
                reported = {}
                for (_, _, off), tp in zip(cmd["assign"], assigned, strict=True):
                    if off is None:
                        consumer.seek_to_beginning(tp)
                    else:
                        consumer.seek(tp, int(off))
            setup = []
            if not assigned:
                continue
            batches = consumer.poll(timeout_ms=cfg["poll_timeout_ms"])
            for tp, recs in batches.items():
                high, at = consumer.highwater(tp), consumer.position(tp, timeout_ms=0)
                reported[tp] = (high, at)
                out.write(encode_frame(epoch, tp.topic, tp.partition, high,
                                       ((r.offset, r.value) for r in recs), at))
            # partitions without records (e.g. of no suite, or whose last records were a
            # transaction marker) report their high watermark and position when they change,
            # so their lag is known too: an empty frame
            quiet = [(tp, high, at) for tp in assigned if tp not in batches
                     and (high := consumer.highwater(tp)) is not None
                     and reported.get(tp) != (high, (at := consumer.position(tp, timeout_ms=0)))]
            for tp, high, at in quiet:
                reported[tp] = (high, at)
                out.write(encode_frame(epoch, tp.topic, tp.partition, high, (), at))
            if batches or quiet:
                out.flush()
    except BrokenPipeError:
        return 0
    finally:
        consumer.close()


if __name__ == "__main__":
    sys.exit(_child())
