"""Incremental checkpoints (monitor/incremental.py): format, crash points, forgeries, cost."""

from __future__ import annotations

import json
from hashlib import sha256
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor.checkpoint import (
    AuthenticatedStore,
    LocalDirectoryStore,
    canonical_json,
    encode_checkpoint,
)
from monitor.config import CertmonConfig, parse_config
from monitor.engine import Engine
from monitor.errors import CheckpointError
from monitor.incremental import (
    IncrementalCheckpointer,
    PartTooLargeError,
    load_checkpoint,
    part_key,
)

CONFIG = """
[[suites]]
name = "*"
models = ["*"]
audit_rate = 0.5
pending_ttl_seconds = 30
orphan_ttl_seconds = 30
dedupe_ttl_seconds = 60

[[suites.certificates]]
name = "risk"
alpha = 0.3
delta = 0.1
methods = ["r_eval", "r_autoeval_plus"]
cs_grid = 50
"""


@pytest.fixture
def config() -> CertmonConfig:
    return parse_config(CONFIG)


def stream(n: int, n_suites: int, seed: int = 0) -> list[bytes]:
    """Judges, labels (some late, some never), duplicates and bad lines over many suites."""
    rng = np.random.default_rng(seed)
    out: list[bytes] = []
    for i in range(n):
        s = f"s{int(rng.integers(n_suites))}"
        m = f"m{int(rng.integers(2))}"
        base = {"suite": s, "model": m, "example_id": f"x{i}", "ts": i}
        out.append(json.dumps({"type": "judge", "event_id": f"j{i}", "loss": float(
            rng.random() < 0.2), **base}).encode())
        if rng.random() < 0.6:
            out.append(json.dumps({"type": "label", "event_id": f"l{i}", "loss": float(
                rng.random() < 0.2), **base}).encode())
        if rng.random() < 0.05:
            out.append(out[-1])  # duplicate
        if rng.random() < 0.03:  # rejected, counted on an existing model
            out.append(json.dumps({**base, "type": "judge", "event_id": f"b{i}",
                                   "loss": "bad"}).encode())
    return out


def dump(snapshot: dict[str, Any]) -> str:
    return json.dumps(snapshot, sort_keys=True)


def test_chain_of_incremental_checkpoints_restores_bit_identically(
        config: CertmonConfig, tmp_path: Path) -> None:
    lines = stream(1500, 12, seed=1)
    eng = Engine(config)
    store = LocalDirectoryStore(tmp_path)
    writer = IncrementalCheckpointer(store, "k")
    step = 97
    for k in range(0, len(lines), step):
        eng.process_batch(lines[k:k + step])
        writer.save(eng, {"line": k + step})
        ckpt = load_checkpoint(store, "k")
        assert ckpt is not None
        assert dump(ckpt.snapshot) == dump(eng.snapshot()), k  # no change was missed
        restored = Engine.restore(config, ckpt.snapshot)
        assert restored.state_view() == eng.state_view()
    # the restored engine continues exactly as the original
    tail = stream(300, 12, seed=2)
    a = [(i, r.alerts, r.requests, r.duplicate) for i, r in eng.process_batch(tail)]
    b = [(i, r.alerts, r.requests, r.duplicate) for i, r in restored.process_batch(tail)]
    assert a == b and dump(eng.snapshot()) == dump(restored.snapshot())


def test_unchanged_suites_are_not_encoded_again(config: CertmonConfig, tmp_path: Path) -> None:
    eng = Engine(config)
    eng.process_batch(stream(400, 20))
    writer = IncrementalCheckpointer(LocalDirectoryStore(tmp_path), "k")
    full = writer.save(eng, {"line": 1})
    assert full.parts_written == full.parts_total == len(eng.suites) == 20
    assert writer.encoded_parts == 20
    nothing = writer.save(eng, {"line": 1})
    assert nothing.parts_written == 0 and writer.encoded_parts == 20
    eng.process(json.dumps({"type": "judge", "event_id": "new", "suite": "s3", "model": "m0",
                            "example_id": "new", "loss": 0.0, "ts": 500}).encode())
    one = writer.save(eng, {"line": 2})
    assert one.parts_written == 1 and writer.encoded_parts == 21
    assert one.bytes_written < full.bytes_written / 5
    # a rejection counted on an existing model changes its suite too
    eng.process(json.dumps({"type": "label", "suite": "s4", "model": "m1"}).encode())
    assert writer.save(eng, {"line": 3}).parts_written == 1
    ckpt = load_checkpoint(LocalDirectoryStore(tmp_path), "k")
    assert ckpt is not None and dump(ckpt.snapshot) == dump(eng.snapshot())
    # a writer started from the stored checkpoint continues incrementally
    again = IncrementalCheckpointer(LocalDirectoryStore(tmp_path), "k")
    eng2 = Engine.restore(config, again.load().snapshot)  # type: ignore[union-attr]
    assert again.save(eng2, {"line": 3}).parts_written == 0


class CrashingStore(LocalDirectoryStore):
    """Dies (raises) on the n-th write: a crash at that point of a checkpoint."""

    def __init__(self, path: Path, crash_at: int) -> None:
        super().__init__(path)
        self.crash_at = crash_at
        self.writes = 0

    def save(self, key: str, data: bytes) -> None:
        self.writes += 1
        if self.writes == self.crash_at:
            raise OSError("killed")
        super().save(key, data)

    def save_many(self, items: list[tuple[str, bytes]]) -> None:
        for key, data in items:
            self.save(key, data)


@pytest.mark.parametrize("crash_at", [1, 2, 3, 4])  # 3 part documents, then the manifest
def test_crash_at_any_write_leaves_the_previous_checkpoint(
        config: CertmonConfig, tmp_path: Path, crash_at: int) -> None:
    eng = Engine(config)
    eng.process_batch(stream(200, 3))
    IncrementalCheckpointer(LocalDirectoryStore(tmp_path), "k").save(eng, {"line": 1})
    before = dump(eng.snapshot())
    eng.process_batch(stream(200, 3, seed=5))
    assert len(eng.changed) == 3
    crashing = CrashingStore(tmp_path, crash_at)
    writer = IncrementalCheckpointer(crashing, "k")  # a new process: not loaded, unseeded
    with pytest.raises(OSError, match="killed"):
        writer.save(eng, {"line": 2})
    ckpt = load_checkpoint(LocalDirectoryStore(tmp_path), "k")
    assert ckpt is not None and ckpt.position == {"line": 1}
    assert dump(ckpt.snapshot) == before
    # the same writer retries: complete, and the next load sees it
    writer.save(eng, {"line": 2})
    ckpt = load_checkpoint(LocalDirectoryStore(tmp_path), "k")
    assert ckpt is not None and ckpt.position == {"line": 2}
    assert dump(ckpt.snapshot) == dump(eng.snapshot())


def _forge(path: Path, edit: Any) -> None:
    doc = json.loads(path.read_bytes())
    edit(doc)
    doc.pop("hmac", None)
    doc["sha256"] = sha256(canonical_json({k: v for k, v in doc.items() if k != "sha256"})
                           .encode()).hexdigest()
    path.write_bytes(canonical_json(doc).encode())


def _saved(config: CertmonConfig, store: Any) -> tuple[Engine, Path]:
    eng = Engine(config)
    eng.process_batch(stream(200, 3))
    IncrementalCheckpointer(store, "k").save(eng, {"line": 1})
    return eng, LocalDirectoryStore(store.path if hasattr(store, "path") else
                                    store.inner.path).file_for(part_key("k", "s1", 0))


def test_forged_suite_document_refused(config: CertmonConfig, tmp_path: Path) -> None:
    _, part = _saved(config, LocalDirectoryStore(tmp_path))

    def more_rounds(doc: dict[str, Any]) -> None:
        doc["state"]["models"][0]["counts"]["judge"] += 1

    _forge(part, more_rounds)  # consistent sha256, but not the one the manifest references
    with pytest.raises(CheckpointError, match=r"suite 's1' \(generation 0\) does not match "
                                              "the manifest"):
        load_checkpoint(LocalDirectoryStore(tmp_path), "k")
    part.write_bytes(part.read_bytes().replace(b'"key":"k"', b'"key":"j"'))  # no re-hash
    with pytest.raises(CheckpointError, match="sha256 mismatch"):
        load_checkpoint(LocalDirectoryStore(tmp_path), "k")
    part.unlink()
    with pytest.raises(CheckpointError, match=r"suite 's1' \(generation 0\) is missing"):
        load_checkpoint(LocalDirectoryStore(tmp_path), "k")


def test_every_document_is_signed(config: CertmonConfig, tmp_path: Path) -> None:
    store = AuthenticatedStore(LocalDirectoryStore(tmp_path), b"k" * 32)
    eng, part = _saved(config, store)
    files = sorted(tmp_path.iterdir())
    assert len(files) == 4 and all(b'"hmac":"' in f.read_bytes() for f in files)
    ckpt = load_checkpoint(store, "k")
    assert ckpt is not None and dump(ckpt.snapshot) == dump(eng.snapshot())
    _forge(part, lambda doc: None)  # the same content, re-encoded without the key
    with pytest.raises(CheckpointError, match="not authenticated"):
        load_checkpoint(store, "k")
    # an older signed document of the same suite, replayed into the slot, does not fit
    old = LocalDirectoryStore(tmp_path).file_for(part_key("k", "s2", 0)).read_bytes()
    eng.process_batch(stream(50, 3, seed=9))
    writer = IncrementalCheckpointer(store, "k")
    writer.save(eng, {"line": 2})  # s2 now at generation 1 (slot 1), slot 0 unused
    assert (tmp_path / LocalDirectoryStore(tmp_path).file_for(part_key("k", "s2", 1)).name
            ).exists()
    LocalDirectoryStore(tmp_path).file_for(part_key("k", "s2", 1)).write_bytes(old)
    with pytest.raises(CheckpointError, match="does not match the manifest"):
        load_checkpoint(store, "k")


def test_single_document_checkpoints_still_load_and_migrate(
        config: CertmonConfig, tmp_path: Path) -> None:
    eng = Engine(config)
    eng.process_batch(stream(300, 4))
    store = LocalDirectoryStore(tmp_path)
    store.save("k", encode_checkpoint(eng.snapshot(), {"line": 7}))
    writer = IncrementalCheckpointer(store, "k")
    ckpt = writer.load()
    assert ckpt is not None and ckpt.version == 1 and ckpt.position == {"line": 7}
    restored = Engine.restore(config, ckpt.snapshot)
    assert writer.save(restored, {"line": 7}).parts_written == 4  # rewritten in parts
    again = load_checkpoint(store, "k")
    assert again is not None and again.version == 2
    assert dump(again.snapshot) == dump(eng.snapshot())


def test_a_suite_too_large_is_named(config: CertmonConfig, tmp_path: Path) -> None:
    eng = Engine(config)
    eng.process_batch(stream(300, 2))
    writer = IncrementalCheckpointer(LocalDirectoryStore(tmp_path), "k", max_part_bytes=2000)
    with pytest.raises(PartTooLargeError,
                       match=r"suite 's[01]': its document is \d+ bytes, above the per-suite "
                             r"limit of 1920 bytes"):
        writer.save(eng, {"line": 1})
    assert load_checkpoint(LocalDirectoryStore(tmp_path), "k") is None  # nothing written


def test_kept_documents_rewind_without_the_store(config: CertmonConfig, tmp_path: Path) -> None:
    eng = Engine(config)
    eng.process_batch(stream(300, 5))
    writer = IncrementalCheckpointer(LocalDirectoryStore(tmp_path), "k", keep_documents=True)
    writer.save(eng, {"line": 1})
    eng.process_batch(stream(100, 5, seed=3))
    writer.save(eng, {"line": 2})
    durable = writer.durable()
    assert durable is not None and durable.position == {"line": 2}
    assert dump(durable.snapshot) == dump(eng.snapshot())


def test_selection_suites_are_one_part(tmp_path: Path) -> None:
    sel = """
[[suites]]
name = "bench"
mode = "selection"
[suites.selection]
models = ["a", "b", "c"]
examples = 30
batch_size = 4
max_outstanding = 2
seed = 3
""" + CONFIG
    config = parse_config(sel)
    eng = Engine(config)
    requests = eng.start(0.0).requests
    eng.process_batch(stream(100, 2))
    writer = IncrementalCheckpointer(LocalDirectoryStore(tmp_path), "k")
    assert writer.save(eng, {"line": 1}).parts_written == 3  # s0, s1, the selection suites
    req = requests[0]
    eng.process(json.dumps({"type": "judge", "event_id": "sel1", "suite": "bench",
                            "model": req["model"], "example_id": req["example_ids"][0],
                            "loss": 0.5, "ts": 1.0}).encode())
    assert eng.changed == {""}
    assert writer.save(eng, {"line": 2}).parts_written == 1
    ckpt = load_checkpoint(LocalDirectoryStore(tmp_path), "k")
    assert ckpt is not None and dump(ckpt.snapshot) == dump(eng.snapshot())
    assert Engine.restore(config, ckpt.snapshot).state_view() == eng.state_view()


class FlakyStore(LocalDirectoryStore):
    """Write n: ``"lose"`` writes then raises (the ack was lost), ``"crash"`` raises first."""

    def __init__(self, path: Path, plan: dict[int, str]) -> None:
        super().__init__(path)
        self.plan = plan
        self.writes = 0

    def save(self, key: str, data: bytes) -> None:
        self.writes += 1
        what = self.plan.get(self.writes)
        if what == "crash":
            raise OSError("killed")
        super().save(key, data)
        if what == "lose":
            raise OSError("ack lost")

    def save_many(self, items: list[tuple[str, bytes]]) -> None:
        for key, data in items:
            self.save(key, data)


def test_a_manifest_that_landed_despite_an_error_is_never_corrupted(
        config: CertmonConfig, tmp_path: Path) -> None:
    eng = Engine(config)
    eng.process_batch(stream(100, 1))
    # write 1: s0 generation 0; write 2: its manifest
    # write 3: s0 generation 1 (slot 1); write 4: the manifest lands, but the writer sees an error
    # write 5: s0 again - it must go to slot 0 (the landed manifest references slot 1): crash
    store = FlakyStore(tmp_path, {4: "lose", 6: "crash"})
    writer = IncrementalCheckpointer(store, "k")
    writer.save(eng, {"line": 1})
    eng.process_batch(stream(50, 1, seed=1))
    landed = dump(eng.snapshot())
    with pytest.raises(OSError, match="ack lost"):
        writer.save(eng, {"line": 2})
    eng.process_batch(stream(50, 1, seed=2))
    with pytest.raises(OSError, match="killed"):
        writer.save(eng, {"line": 3})
    assert store.writes == 6
    ckpt = load_checkpoint(LocalDirectoryStore(tmp_path), "k")
    assert ckpt is not None and ckpt.position == {"line": 2} and dump(ckpt.snapshot) == landed
    writer.save(eng, {"line": 3})
    ckpt = load_checkpoint(LocalDirectoryStore(tmp_path), "k")
    assert ckpt is not None and dump(ckpt.snapshot) == dump(eng.snapshot())


def test_a_manifest_under_another_key_is_refused(config: CertmonConfig, tmp_path: Path) -> None:
    eng = Engine(config)
    eng.process_batch(stream(50, 2))
    store = LocalDirectoryStore(tmp_path)
    IncrementalCheckpointer(store, "a").save(eng, {"line": 1})
    store.save("b", store.load("a") or b"")
    with pytest.raises(CheckpointError, match="it is the manifest of key 'a'"):
        load_checkpoint(store, "b")
