"""Event-time plausibility: one far-future ts cannot expire in-flight joins."""

from __future__ import annotations

import json

import numpy as np
import pytest

from monitor.config import parse_config
from monitor.engine import Engine
from monitor.errors import CheckpointError
from monitor.simulate import SimulationSpec, iter_jsonl

TOML = """
[[suites]]
audit_rate = 0.2
[[suites.certificates]]
name = "risk"
alpha = 0.1
delta = 0.05
methods = ["r_eval"]
"""


def _events() -> list[bytes]:
    return list(iter_jsonl(SimulationSpec(examples=3000, audit_rate=0.2),
                           np.random.default_rng(5)))


def test_far_future_event_is_dead_lettered_and_joins_survive() -> None:
    cfg = parse_config(TOML)
    events = _events()
    honest = Engine(cfg)
    honest.process_batch(events)
    attacked = Engine(cfg)
    half = len(events) // 2
    first = json.loads(events[0])
    bomb = json.dumps(first | {"event_id": "bomb", "example_id": "bomb",
                                "ts": 253402300799.0}).encode()  # 9999-12-31
    attacked.process_batch(events[:half])
    res = attacked.process(bomb, {"offset": 1})
    assert res.rejection is not None and res.rejection.reason == "implausible_ts"
    assert res.dead_letter is not None and res.dead_letter["reason"] == "implausible_ts"
    attacked.process_batch(events[half:])
    assert attacked.counters["rejected"]["implausible_ts"] == 1
    rounds = {n: m.counts["rounds"] for n, m in attacked.suites["demo"].models.items()}
    assert rounds == {n: m.counts["rounds"] for n, m in honest.suites["demo"].models.items()}
    assert all(m.counts["expired_pending"] == 0 for m in attacked.suites["demo"].models.values())


def test_honest_replay_is_unaffected_and_the_bound_is_configurable() -> None:
    events = _events()
    a = Engine(parse_config(TOML))
    a.process_batch(events)
    assert a.counters["rejected"]["implausible_ts"] == 0
    # a bound below the stream's own steps refuses its events only while they are in the
    # future of the clock (here a clock stopped at the stream's first event)
    start = json.loads(events[0])["ts"]
    tight_cfg = parse_config(TOML, ["events.max_ts_jump_seconds=0.001"])
    tight = Engine(tight_cfg, clock=lambda: start)
    tight.process_batch(events)
    assert tight.counters["rejected"]["implausible_ts"] > 0
    later = Engine(tight_cfg)  # the real clock: these events are years old
    later.process_batch(events)
    assert later.counters["rejected"]["implausible_ts"] == 0
    # the bound is not part of the state's fingerprint: it can change across a restart
    Engine.restore(parse_config(TOML, ["events.max_ts_jump_seconds=60"]), a.snapshot())


def test_old_snapshots_without_the_reason_restore() -> None:
    eng = Engine(parse_config(TOML))
    eng.process_batch(_events()[:200])
    snap = eng.snapshot()
    del snap["counters"]["rejected"]["implausible_ts"]
    assert Engine.restore(parse_config(TOML), snap).counters["rejected"]["implausible_ts"] == 0


def _shifted(events: list[bytes], seconds: float) -> list[bytes]:
    return [json.dumps(json.loads(e) | {"ts": json.loads(e)["ts"] + seconds}).encode()
            for e in events]


def test_an_honest_suite_silent_for_longer_than_the_bound_is_not_frozen() -> None:
    # the second half of the stream arrives 31 days after the first (bound: 30 days)
    events = _events()
    half = len(events) // 2
    paused = events[:half] + _shifted(events[half:], 31 * 86400.0)
    start = json.loads(events[0])["ts"]
    for clock in (lambda: start + 62 * 86400.0, lambda: start + 31 * 86400.0):  # live, replay
        eng = Engine(parse_config(TOML), clock=clock)
        eng.process_batch(paused)
        assert eng.counters["rejected"]["implausible_ts"] == 0
        assert sum(m.counts["rounds"] for m in eng.suites["demo"].models.values()) > 0
        assert eng.suites["demo"].watermark == max(json.loads(e)["ts"] for e in paused)


def test_an_old_first_event_does_not_freeze_the_suite() -> None:
    events = _events()
    honest = Engine(parse_config(TOML))
    honest.process_batch(events)
    first = json.loads(events[0])
    for ts in (0.0, -1e300):
        old = json.dumps(first | {"event_id": "old", "example_id": "old", "ts": ts}).encode()
        eng = Engine(parse_config(TOML))
        eng.process_batch([old, *events])
        assert eng.counters["rejected"]["implausible_ts"] == 0
        assert {n: m.counts["rounds"] for n, m in eng.suites["demo"].models.items()} == {
            n: m.counts["rounds"] for n, m in honest.suites["demo"].models.items()}


def test_a_far_future_first_event_creates_nothing() -> None:
    events = _events()
    first = json.loads(events[0])
    bomb = json.dumps(first | {"suite": "fresh", "ts": 253402300799.0}).encode()
    eng = Engine(parse_config(TOML))
    res = eng.process(bomb)
    assert res.rejection is not None and res.rejection.reason == "implausible_ts"
    assert "fresh" not in eng.suites
    # and in an existing suite, a far-future first event of a new model creates no model
    eng.process_batch(events[:50])
    new_model = json.dumps(first | {"model": "newcomer", "event_id": "nm",
                                    "ts": 253402300799.0}).encode()
    assert eng.process(new_model).rejection is not None
    assert "newcomer" not in eng.suites["demo"].models


def test_a_restored_engine_keeps_the_clock() -> None:
    events = _events()
    start = json.loads(events[0])["ts"]
    cfg = parse_config(TOML, ["events.max_ts_jump_seconds=60"])
    eng = Engine(cfg, clock=lambda: start)
    eng.process_batch(events[:100])
    back = Engine.restore(cfg, eng.snapshot(), clock=lambda: start)
    jump = json.dumps(json.loads(events[100]) | {"ts": start + 3600.0}).encode()
    assert back.process(jump).rejection is not None


def test_a_checkpoint_with_a_far_future_event_time_is_refused() -> None:
    events = _events()
    eng = Engine(parse_config(TOML))
    eng.process_batch(events[:100])
    snap = eng.snapshot()
    (suite,) = snap["suites"]
    suite["watermark"] = 253402300799.0  # forged: year 9999
    with pytest.raises(CheckpointError, match="ahead of the clock"):
        Engine.restore(parse_config(TOML), snap)
    suite["watermark"] = -1e300  # forged into the past: harmless, events still flow
    back = Engine.restore(parse_config(TOML), snap)
    back.process_batch(events[100:])
    assert back.counters["rejected"]["implausible_ts"] == 0
