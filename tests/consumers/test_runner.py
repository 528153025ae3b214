from __future__ import annotations

import json
from pathlib import Path

from consumers.files import FileSource
from consumers.runner import IterSource, Outputs, Runner
from monitor.checkpoint import LocalDirectoryStore
from monitor.config import CertmonConfig
from monitor.engine import Engine
from monitor.incremental import load_checkpoint
from monitor.sinks import MemorySink


def config(tmp_path: Path, every: int = 7) -> CertmonConfig:
    return CertmonConfig.model_validate({
        "suites": [{"name": "*", "audit_rate": 0.3, "certificates": [
            {"name": "risk", "alpha": 0.5, "delta": 0.1, "methods": ["r_eval"], "cs_grid": 30}]}],
        "checkpoint": {"dir": str(tmp_path / "ck"), "every_events": every},
    })


def events(n: int) -> list[bytes]:
    out = []
    for i in range(n):
        out.append(json.dumps({"type": "judge", "event_id": f"j{i}", "suite": "s", "model": "m",
                               "example_id": f"x{i}", "loss": 0.0, "ts": i}).encode())
        out.append(json.dumps({"type": "label", "event_id": f"l{i}", "suite": "s", "model": "m",
                               "example_id": f"x{i}", "loss": 0.0, "ts": i}).encode())
    out.insert(5, b"garbage")
    return out


def outputs() -> Outputs:
    return Outputs(MemorySink(), MemorySink(), MemorySink())


def test_checkpoints_and_resume_equal_uninterrupted(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    lines = events(60)
    p = tmp_path / "ev.jsonl"
    p.write_bytes(b"\n".join(lines) + b"\n")
    ref = Engine(cfg)
    for raw in lines:
        ref.process(raw)
    # interrupted run: stop after 50 events; the final checkpoint covers exactly those
    store = LocalDirectoryStore(cfg.checkpoint.dir or "")
    out1 = outputs()
    r1 = Runner(cfg, out1, store=store)
    assert r1.restore() is None
    src = FileSource(str(p))

    count = 0

    class Limited:
        """The file source, stopping the runner after exactly 50 events."""

        def read(self, limit: int) -> list[bytes]:
            nonlocal count
            raws = src.read(max(1, min(limit, 50 - count)))
            count += len(raws)
            if count >= 50:
                r1.stop()
            return raws

        def position(self):  # type: ignore[no-untyped-def]
            return src.position()

        def event_source(self, index: int):  # type: ignore[no-untyped-def]
            return src.event_source(index)

    r1.run(Limited())
    assert r1.engine.events_in == 50 and r1.checkpoints >= 7
    ckpt = load_checkpoint(store, "certmon")
    assert ckpt is not None and ckpt.position["line"] == 50
    out2 = outputs()
    r2 = Runner(cfg, out2, store=store)
    start = r2.restore()
    r2.run(FileSource(str(p), start=start))
    assert json.dumps(r2.engine.state_view(), sort_keys=True) == json.dumps(
        ref.state_view(), sort_keys=True)
    # outputs: the dead letter came before the checkpoint, requests are split between runs
    dl = out1.dead_letters.records  # type: ignore[attr-defined]
    assert [d["reason"] for d in dl] == ["invalid_json"] and dl[0]["source"]["line"] == 6
    n_req = len(out1.requests.records) + len(out2.requests.records)  # type: ignore[attr-defined]
    assert n_req == ref.label_requests


def test_no_store_no_checkpoint() -> None:
    cfg = CertmonConfig.model_validate({"suites": [{"certificates": [
        {"name": "r", "alpha": 0.5, "delta": 0.1, "methods": ["r_eval"], "cs_grid": 30}]}]})
    r = Runner(cfg, outputs())
    assert r.restore() is None
    r.run(IterSource(events(3)))
    assert r.checkpoints == 0 and r.engine.events_in == 7
    assert r.view()["counters"]["events_in"] == 7


def test_iter_source_resume() -> None:
    src = IterSource([b"a", b"b", b"c"], start={"kind": "iter", "count": 2})
    assert src.read(10) == [b"c"] and src.position() == {"kind": "iter", "count": 3}
    assert src.event_source(0) == {"kind": "iter", "index": 3}
    assert src.read(10) == [] and src.position() == {"kind": "iter", "count": 3}


def test_pending_events_gauge_and_unrouted_counter(tmp_path: Path) -> None:
    """certmon_checkpoint_pending_events is what a crash would replay: 0 after the final
    checkpoint (an idle instance must not look stale); events of unconfigured suites count in
    one unlabelled counter; counters export no _created series."""
    from prometheus_client import CollectorRegistry, generate_latest

    from monitor.metrics import OperationalMetrics

    cfg = CertmonConfig.model_validate({
        "suites": [{"name": "s", "audit_rate": 0.3, "certificates": [
            {"name": "risk", "alpha": 0.5, "delta": 0.1, "methods": ["r_eval"],
             "cs_grid": 30}]}],
        "checkpoint": {"dir": str(tmp_path / "ck"), "every_events": 1000},
    })
    lines = events(20) + [line.replace(b'"suite": "s"', b'"suite": "typo"')
                          for line in events(5)[:5]]
    registry = CollectorRegistry()
    ops = OperationalMetrics(registry)
    runner = Runner(cfg, outputs(), store=LocalDirectoryStore(str(tmp_path / "ck")),
                    metrics=ops)
    runner.SYNC_EVERY = 5  # sync the metrics every 5 events, so the run shows pending ones
    seen: list[float | None] = []

    class Watched:
        """Records the pending gauge before each read."""

        def __init__(self) -> None:
            self.src = IterSource(iter(lines))

        def read(self, limit: int) -> list[bytes]:
            seen.append(registry.get_sample_value("certmon_checkpoint_pending_events"))
            return self.src.read(limit)

        def __getattr__(self, name: str) -> object:
            return getattr(self.src, name)

    runner.run(Watched())  # type: ignore[arg-type]
    assert max(v or 0 for v in seen) > 0  # events waited for a checkpoint during the run
    assert registry.get_sample_value("certmon_checkpoint_pending_events") == 0
    assert registry.get_sample_value("certmon_events_received_total") == len(lines)
    assert registry.get_sample_value("certmon_events_unrouted_total") == 5
    text = generate_latest(registry).decode()
    assert "_created" not in text
