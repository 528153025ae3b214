"""The fetch process's frame stream and its parent side (the Kafka paths run in tests/kafka)."""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
from collections.abc import Iterator

import pytest

from consumers.kafka.fetcher import FetchProcess, decode_frames, encode_frame, group_busy
from consumers.kafka.partitions import Columns
from consumers.kafka.read_positions import ReadPositions
from monitor.errors import CertmonError

Batch = tuple[int, str, int, "int | None", list[tuple[int, "bytes | None"]], "int | None"]


def _batches(rnd: random.Random) -> list[Batch]:
    out = []
    for _ in range(40):
        n = rnd.choice([0, 1, 2, 17, 300])
        start = rnd.randrange(10**12)
        recs: list[tuple[int, bytes | None]] = [
            (start + i, None if rnd.random() < 0.05 else rnd.randbytes(rnd.choice([0, 1, 150])))
            for i in range(n)
        ]
        out.append((rnd.randrange(5), rnd.choice(["t", "events.v1", "ü"]), rnd.randrange(64),
                    rnd.choice([None, 0, start + n]), recs, rnd.choice([None, start + n + 1])))
    return out


def test_frames_round_trip_through_any_chunking() -> None:
    rnd = random.Random(7)
    batches = _batches(rnd)
    stream = b"".join(encode_frame(*b) for b in batches)
    expected = [(e, t, p, -1 if h is None else h, -1 if at is None else at, [o for o, _ in r],
                 [v for _, v in r]) for e, t, p, h, r, at in batches]
    for _ in range(20):  # the pipe delivers arbitrary pieces: decode as they arrive
        buf = bytearray()
        got = []
        pos = 0
        while pos < len(stream):
            step = rnd.choice([1, 7, 100, 4096, 1 << 20])
            buf += stream[pos : pos + step]
            pos += step
            frames, used = decode_frames(buf)
            del buf[:used]
            got.extend(frames)
        assert got == expected and not buf


def test_corrupt_stream_is_an_error() -> None:
    with pytest.raises(CertmonError, match="corrupt"):
        decode_frames(bytearray(b'{"epoch": 1}\n' + b"x" * 40))


@pytest.fixture
def echo() -> Iterator[FetchProcess]:
    """A FetchProcess whose 'child' is ``cat``: frames written to it come back."""
    fp = FetchProcess.__new__(FetchProcess)
    fp._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by fp.close())
    fp._proc = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=fp._stderr)
    fp.epoch = 2
    fp._buf = bytearray()
    fp.highwaters = {}
    fp.read = ReadPositions()
    yield fp
    fp.close()


def test_poll_keeps_the_current_epoch_only(echo: FetchProcess) -> None:
    stdin = echo._proc.stdin
    assert stdin is not None
    stdin.write(encode_frame(1, "t", 0, 9, [(5, b"stale")]))  # before the last assignment
    stdin.write(encode_frame(2, "t", 0, 10, [(7, b"a"), (8, None)]))
    stdin.write(encode_frame(2, "t", 1, None, [(3, b"b")]))
    stdin.write(encode_frame(2, "t", 0, 11, [(9, b"c")]))
    stdin.flush()
    got: dict[tuple[str, int], Columns] = {}
    for _ in range(50):
        for tp, cols in echo.poll(0.1).items():
            got.setdefault(tp, Columns([], [])).offsets.extend(cols.offsets)
            got[tp].values.extend(cols.values)
        if sum(len(c.offsets) for c in got.values()) == 4:
            break
    assert got == {("t", 0): Columns([7, 8, 9], [b"a", None, b"c"]), ("t", 1): Columns([3], [b"b"])}
    assert echo.highwaters == {("t", 0): 11}
    assert echo.poll(0.05) == {}


def test_reading_reaches_the_position_past_markers_once_the_records_are_processed(
    echo: FetchProcess,
) -> None:
    """A transactional partition: records 5-6, a commit marker at 7, high watermark 8."""
    stdin = echo._proc.stdin
    assert stdin is not None
    stdin.write(encode_frame(1, "t", 0, 8, [(5, b"x")], position=9))  # stale epoch: ignored
    stdin.write(encode_frame(2, "t", 0, 7, [(5, b"a"), (6, b"b")], position=7))
    stdin.write(encode_frame(2, "t", 0, 8, [], position=8))  # the marker was skipped
    stdin.write(encode_frame(2, "t", 1, 4, [], position=4))  # only markers / aborted records
    stdin.flush()
    for _ in range(50):
        echo.poll(0.1)
        if echo.read.consumed_to("t", 0, 7) == 8 and echo.read.consumed_to("t", 1, 0) == 4:
            break
    assert echo.read.consumed_to("t", 0, 5) == 5  # records 5-6 not processed: not past them
    assert echo.read.consumed_to("t", 0, 7) == 8  # processed: the marker is read too (lag 0)
    assert echo.read.consumed_to("t", 1, 0) == 4
    assert echo.read.consumed_to("t", 2, 3) == 3  # nothing known
    echo.assign({})  # a new assignment: the positions restart
    assert echo.read.consumed_to("t", 0, 7) == 7


def test_a_dead_child_is_an_error(echo: FetchProcess) -> None:
    stdin = echo._proc.stdin
    assert stdin is not None
    stdin.close()  # cat exits: the record pipe ends
    with pytest.raises(CertmonError, match="exited"):
        for _ in range(50):
            echo.poll(0.1)


def test_a_dead_childs_reason_is_in_the_error() -> None:
    fp = FetchProcess.__new__(FetchProcess)
    fp._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by fp.close())
    fp._proc = subprocess.Popen(  # a child that fails as a missing codec library did
        [sys.executable, "-c", "import sys; print('noise', file=sys.stderr); "
         "sys.exit('certmon fetch process failed: UnsupportedCodecError: no lz4')"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=fp._stderr)
    fp.epoch, fp._buf, fp.highwaters = 1, bytearray(), {}
    try:
        with pytest.raises(CertmonError, match=r"exited \(code 1\): .*UnsupportedCodecError"):
            for _ in range(50):
                fp.poll(0.1)
    finally:
        fp.close()


def test_child_exits_when_its_parent_goes_away() -> None:
    # the parent's end of the command pipe closes (parent exited, even by kill -9)
    child = subprocess.Popen([sys.executable, "-m", "consumers.kafka.fetcher"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None
    child.stdin.close()
    assert child.wait(timeout=30) == 0


class _Coordinator:
    def __init__(self, unknown: bool, rejoin: bool, stable: bool) -> None:
        self.flags = (unknown, rejoin, stable)

    def coordinator_unknown(self) -> bool:
        return self.flags[0]

    def need_rejoin(self) -> bool:
        return self.flags[1]

    def stable(self) -> bool:
        return self.flags[2]


class _Consumer:
    def __init__(self, coordinator: object) -> None:
        self._coordinator = coordinator


def test_group_busy_until_the_member_is_stable() -> None:
    from kafka.coordinator.consumer import ConsumerCoordinator

    # the installed kafka-python has what group_busy reads (else it always blocks: slow)
    assert all(hasattr(ConsumerCoordinator, n)
               for n in ("coordinator_unknown", "need_rejoin", "stable"))
    assert not group_busy(_Consumer(_Coordinator(False, False, True)))
    # a join in flight after a metadata change: no rejoin flag, but not stable (a poll(0)
    # would re-send the JoinGroup forever: the member never got its partitions)
    assert group_busy(_Consumer(_Coordinator(False, False, False)))
    assert group_busy(_Consumer(_Coordinator(False, True, True)))
    assert group_busy(_Consumer(_Coordinator(True, False, True)))
    assert group_busy(_Consumer(object()))  # other internals: always block
