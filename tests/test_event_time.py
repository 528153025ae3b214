"""Event-time plausibility (issue 16): one far-future ts cannot expire in-flight joins."""

from __future__ import annotations

import json

import numpy as np

from monitor.config import parse_config
from monitor.engine import Engine
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
    tight = Engine(parse_config(TOML, ["events.max_ts_jump_seconds=0.001"]))
    tight.process_batch(events)
    assert tight.counters["rejected"]["implausible_ts"] > 0
    # the bound is not part of the state's fingerprint: it can change across a restart
    Engine.restore(parse_config(TOML, ["events.max_ts_jump_seconds=60"]), a.snapshot())


def test_old_snapshots_without_the_reason_restore() -> None:
    eng = Engine(parse_config(TOML))
    eng.process_batch(_events()[:200])
    snap = eng.snapshot()
    del snap["counters"]["rejected"]["implausible_ts"]
    assert Engine.restore(parse_config(TOML), snap).counters["rejected"]["implausible_ts"] == 0
