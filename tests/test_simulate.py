from __future__ import annotations

import json

import numpy as np

from monitor.events import Event, decode_event
from monitor.simulate import SimModel, SimulationSpec, generate, iter_jsonl


def test_deterministic_and_valid() -> None:
    spec = SimulationSpec(examples=300, ts_format="rfc3339")
    a = list(iter_jsonl(spec, np.random.default_rng(5)))
    b = list(iter_jsonl(spec, np.random.default_rng(5)))
    c = list(iter_jsonl(spec, np.random.default_rng(6)))
    assert a == b and a != c
    assert all(isinstance(decode_event(x), Event) for x in a)
    ids = [json.loads(x)["event_id"] for x in a]
    assert len(ids) == len(set(ids))


def test_rates_and_judge_quality() -> None:
    spec = SimulationSpec(
        models=(SimModel("m", risk=0.2, judge_accuracy=0.7),), examples=20000,
        audit_rate=0.1, unsolicited_rate=0.0, label_first_fraction=0.2)
    evs = list(generate(spec, np.random.default_rng(1)))
    judges = {e["example_id"]: e for e in evs if e["type"] == "judge"}
    labels = {e["example_id"]: e for e in evs if e["type"] == "label"}
    assert abs(len(labels) / len(judges) - 0.1) < 0.01
    assert all(judges[k]["audit"] for k in labels)
    agree = np.mean([judges[k]["loss"] == labels[k]["loss"] for k in labels])
    assert abs(agree - 0.7) < 0.04
    human = np.mean([labels[k]["loss"] for k in labels])
    assert abs(human - 0.2) < 0.03
    pos = {(e["type"], e["example_id"]): i for i, e in enumerate(evs)}
    first = np.mean([pos[("label", k)] < pos[("judge", k)] for k in labels])
    assert 0.12 < first < 0.28


def test_drift_and_hash_mode_and_max_events() -> None:
    spec = SimulationSpec(models=(SimModel("m", 0.0, 1.0, drift_risk=1.0),), examples=100,
                          drift_at=50, audit_mode="hash", audit_rate=1.0, max_events=150,
                          unsolicited_rate=0.0)
    evs = list(generate(spec, np.random.default_rng(0)))
    assert len(evs) == 150
    assert all("audit" not in e for e in evs)
    j = [e for e in evs if e["type"] == "judge"]
    assert all(e["loss"] == (int(e["example_id"][3:]) >= 50) for e in j)
