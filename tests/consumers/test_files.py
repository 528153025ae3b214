from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from consumers.files import FileSource
from monitor.errors import SourceError


def test_positions_and_resume(tmp_path: Path) -> None:
    p = tmp_path / "e.jsonl"
    lines = [b'{"i": 0}', b"", b'{"i": 2}\r', b'{"i": 3}']
    p.write_bytes(b"\n".join(lines) + b"\n")
    src = FileSource(str(p))
    got = []
    positions = []
    for raw in src:
        got.append(raw)
        positions.append(src.position())
        assert src.event_source(0)["line"] == positions[-1]["line"]  # the event just read
    assert got == [b'{"i": 0}', b'{"i": 2}', b'{"i": 3}']
    assert positions[-1]["offset"] == p.stat().st_size and positions[-1]["line"] == 4
    for k, pos in enumerate(positions):
        rest = list(FileSource(str(p), start=pos))
        assert rest == got[k + 1:]


def test_final_line_without_newline(tmp_path: Path) -> None:
    p = tmp_path / "e.jsonl"
    p.write_bytes(b'{"a": 1}\n{"b": 2}')
    assert list(FileSource(str(p))) == [b'{"a": 1}', b'{"b": 2}']


def test_errors(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="cannot open input"):
        list(FileSource(str(tmp_path / "missing.jsonl")))
    p = tmp_path / "e.jsonl"
    p.write_bytes(b"{}\n")
    with pytest.raises(SourceError, match="beyond the end"):
        list(FileSource(str(p), start={"offset": 100, "line": 5}))
    with pytest.raises(SourceError, match="invalid file position"):
        FileSource(str(p), start={"offset": "x", "line": 1})


def test_follow_waits_for_complete_lines(tmp_path: Path) -> None:
    p = tmp_path / "e.jsonl"
    p.write_bytes(b'{"a": 1}\n{"b"')
    stop = threading.Event()
    src = FileSource(str(p), follow=True, poll_seconds=0.01, should_stop=stop.is_set)
    got: list[bytes] = []

    def consume() -> None:
        for raw in src:
            got.append(raw)

    t = threading.Thread(target=consume)
    t.start()
    time.sleep(0.1)
    assert got == [b'{"a": 1}']
    with open(p, "ab") as fh:
        fh.write(b': 2}\n{"c": 3}\n')
    deadline = time.monotonic() + 5
    while len(got) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    t.join(5)
    assert got == [b'{"a": 1}', b'{"b": 2}', b'{"c": 3}']
    assert src.position()["offset"] == p.stat().st_size


@pytest.mark.parametrize("change", ["truncate", "replace"])
def test_follow_refuses_a_truncated_or_replaced_file(tmp_path: Path, change: str) -> None:
    p = tmp_path / "e.jsonl"
    p.write_bytes(b'{"n": 1}\n{"n": 2}\n{"n": 3}\n')
    stop = threading.Event()
    src = FileSource(str(p), follow=True, poll_seconds=0.01, should_stop=stop.is_set)
    got: list[bytes] = []
    errors: list[BaseException] = []

    def consume() -> None:
        try:
            for raw in src:
                got.append(raw)
        except SourceError as exc:
            errors.append(exc)

    t = threading.Thread(target=consume)
    t.start()
    deadline = time.monotonic() + 5
    while len(got) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    if change == "truncate":
        p.write_bytes(b'{"n": 4}\n')  # in place: same inode, smaller than what was read
    else:
        (tmp_path / "new.jsonl").write_bytes(b'{"n": 4}\n{"n": 5}\n{"n": 6}\n{"n": 7}\n')
        (tmp_path / "new.jsonl").replace(p)  # rotation: a new inode at the same path
    t.join(5)
    stop.set()
    t.join(5)
    assert got == [b'{"n": 1}', b'{"n": 2}', b'{"n": 3}']  # nothing from the new file slipped in
    assert errors and "truncated or replaced" in str(errors[0])


def test_resume_checks_the_bytes_before_the_offset(tmp_path: Path) -> None:
    p = tmp_path / "e.jsonl"
    p.write_bytes(b"".join(b'{"i": %d, "pad": "%s"}\n' % (i, b"x" * i) for i in range(30)))
    src = FileSource(str(p))
    first = src.read(10)
    pos = src.position()
    assert pos["tail_len"] == 64 and len(first) == 10
    # appended to: resumes after the 10 events
    with p.open("ab") as fh:
        fh.write(b'{"i": 30}\n')
    rest = list(FileSource(str(p), start=pos))
    assert len(rest) == 21 and rest[-1] == b'{"i": 30}'
    # a position taken before any read carries the start's check over
    assert FileSource(str(p), start=pos).position() == pos
    # rewritten (same size, one byte changed just before the offset), or replaced: refused
    data = bytearray(p.read_bytes())
    data[pos["offset"] - 3] ^= 1
    p.write_bytes(bytes(data))
    with pytest.raises(SourceError, match="changed since the checkpoint"):
        list(FileSource(str(p), start=pos))
    p.write_bytes(b'{"other": 1}\n' * 50)
    with pytest.raises(SourceError, match="changed since the checkpoint"):
        list(FileSource(str(p), start=pos))
    # positions written before the check existed still resume
    old = {k: v for k, v in pos.items() if not k.startswith("tail")}
    assert len(list(FileSource(str(p), start=old))) > 0


def test_stdin_resume_checks_the_skipped_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import sys

    data = b"".join(b'{"i": %d}\n' % i for i in range(40))
    p = tmp_path / "e.jsonl"
    p.write_bytes(data)
    src = FileSource(str(p))
    src.read(25)
    pos = {**src.position(), "path": "-"}

    class Stdin:
        def __init__(self, raw: bytes) -> None:
            self.buffer = io.BufferedReader(io.BytesIO(raw))

    monkeypatch.setattr(sys, "stdin", Stdin(data))
    assert len(list(FileSource("-", start=pos))) == 15
    monkeypatch.setattr(sys, "stdin", Stdin(data.replace(b'"i": 24', b'"i": 99')))
    with pytest.raises(SourceError, match="changed since the checkpoint"):
        list(FileSource("-", start=pos))
