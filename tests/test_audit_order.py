"""Rounds in audit order (monitor.state.audit_order) through the engine: restore and snapshots."""

from __future__ import annotations

import heapq
import json

import numpy as np
import pytest

from monitor.checkpoint import CheckpointError
from monitor.config import parse_config
from monitor.engine import Engine
from monitor.simulate_delays import delayed_stream

CONFIG = """
[[suites]]
name = "*"
models = ["m"]
pending_ttl_seconds = 40
[[suites.certificates]]
name = "risk"
alpha = 0.3
delta = 0.1
methods = ["r_eval", "r_autoeval", "r_autoeval_plus"]
"""


def _lines() -> list[bytes]:
    rng = np.random.default_rng(5)
    streams = [delayed_stream(f"s{i}", rng, units=300, risk=0.15, delay_pass=5.0,
                              delay_fail=60.0, missing_fail=0.2) for i in range(2)]
    return [line for _, line in heapq.merge(*streams)]


def _run(eng: Engine, lines: list[bytes]) -> list[str]:
    return [json.dumps(a, sort_keys=True) for line in lines for a in eng.process(line).alerts]


def test_restore_anywhere_continues_bit_identically() -> None:
    cfg = parse_config(CONFIG)
    lines = _lines()
    full = Engine(cfg)
    full_alerts = _run(full, lines)
    expected = json.dumps(full.snapshot(), sort_keys=True)
    models = [s.models["m"] for s in full.suites.values()]
    assert sum(m.counts["expired_pending"] for m in models) > 0  # missing labels happened
    assert any(a for a in full_alerts)
    waited = 0
    for k in range(0, len(lines) + 1, 37):
        eng = Engine(cfg)
        alerts = _run(eng, lines[:k])
        snap = json.loads(json.dumps(eng.snapshot()))
        waited += sum(s["models"][0]["audit_order"][2] for s in snap["suites"])
        restored = Engine.restore(cfg, snap)
        alerts += _run(restored, lines[k:])
        assert alerts == full_alerts, k
        assert json.dumps(restored.snapshot(), sort_keys=True) == expected, k
    assert waited > 0  # some snapshots were taken with units waiting for earlier labels


def test_restore_refuses_altered_bounds() -> None:
    cfg = parse_config(CONFIG)
    eng = Engine(cfg)
    lines = _lines()
    for line in lines[: len(lines) // 2]:
        eng.process(line)
    snap = json.loads(json.dumps(eng.snapshot()))
    order = next(s["models"][0]["audit_order"] for s in snap["suites"]
                 if s["models"][0]["audit_order"][4])
    order[4][0][1][0][0] += 5.0  # a forged bound: a claim could cross on it
    with pytest.raises(CheckpointError, match="saved bounds"):
        Engine.restore(cfg, snap)


@pytest.mark.parametrize("forge", ["positions", "label", "waiting"])
def test_restore_refuses_inconsistent_audit_order(forge: str) -> None:
    cfg = parse_config(CONFIG)
    eng = Engine(cfg)
    lines = _lines()
    for line in lines[: len(lines) // 2]:
        eng.process(line)
    snap = json.loads(json.dumps(eng.snapshot()))
    order = next(s["models"][0]["audit_order"] for s in snap["suites"]
                 if s["models"][0]["audit_order"][3])
    if forge == "positions":
        order[3][0][0] = order[0] + 5  # a waiting unit beyond the positions given
    elif forge == "label":
        order[3][0][1] = 7.0
    else:
        order[2] += 1
    with pytest.raises(CheckpointError, match=r"audit order|waiting"):
        Engine.restore(cfg, snap)


def test_restore_bounds_confidence_sequence_rounds_by_missing_labels() -> None:
    """A missing label is a round of the default confidence sequences, not of the epoch:
    restore accepts rounds up to the model's rounds + missing labels, and no more."""
    cfg = parse_config(CONFIG)
    eng = Engine(cfg)
    _run(eng, _lines())
    snap = json.loads(json.dumps(eng.snapshot()))
    md = next(s["models"][0] for s in snap["suites"]
              if s["models"][0]["counts"]["expired_pending"])
    cs = md["groups"][0][1]["cs"]
    assert md["counts"]["rounds"] < cs["rounds"] <= (md["counts"]["rounds"]
                                                     + md["counts"]["expired_pending"])
    Engine.restore(cfg, json.loads(json.dumps(snap)))
    cs["rounds"] = md["counts"]["rounds"] + md["counts"]["expired_pending"] + 1
    with pytest.raises(CheckpointError, match="confidence sequence has"):
        Engine.restore(cfg, snap)
