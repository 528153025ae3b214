"""The engine's memory budget over all suites (monitor.state.budget)."""

from __future__ import annotations

import heapq
import json

import numpy as np
import pytest

import monitor.state.budget as budget_module
from monitor.config import parse_config
from monitor.engine import Engine
from monitor.simulate_delays import delayed_stream
from monitor.state.budget import dedupe, waiting

CONFIG = """
[[suites]]
name = "*"
models = ["*"]
audit_rate = 1.0
{suite}
[[suites.certificates]]
name = "risk"
alpha = 0.3
delta = 0.1
methods = ["r_eval", "r_autoeval"]
"""


def _cfg(events: str = "", suite: str = "") -> object:
    return parse_config(events + CONFIG.format(suite=suite))


def _judge(suite: str, i: int, ts: float, loss: int = 0) -> bytes:
    return json.dumps({"type": "judge", "event_id": f"{suite}-j{i}", "suite": suite,
                       "model": "m", "example_id": f"x{i}", "loss": loss, "ts": ts}).encode()


def _label(suite: str, i: int, ts: float, loss: int = 0) -> bytes:
    return json.dumps({"type": "label", "event_id": f"{suite}-l{i}", "suite": suite,
                       "model": "m", "example_id": f"x{i}", "loss": loss, "ts": ts}).encode()


def _totals(eng: Engine) -> tuple[int, int]:
    return (sum(waiting(s.join) for s in eng.suites.values()),
            sum(dedupe(s.join) for s in eng.suites.values()))


def test_budget_bounds_waiting_units_over_suites_and_counts_evictions() -> None:
    """Never-labelled audited units of 5 suites (an outage): the total stays within the bound.

    Without the budget the 5 x 60 units all stay (the per-suite bound is 100,000).
    """
    eng = Engine(_cfg("[events]\nmax_waiting_units = 64\n"))  # type: ignore[arg-type]
    for i in range(60):
        for k in range(5):
            eng.process(_judge(f"s{k}", i, 1000.0 + i + k / 10))
            assert _totals(eng)[0] <= 64
    models = [s.models["m"] for s in eng.suites.values()]
    pending = sum(m.pending_units for m in models)
    expired = sum(m.counts["expired_pending"] for m in models)
    assert pending == _totals(eng)[0] and pending + expired == 300
    assert eng.counters["budget_evictions"]["pending"] == expired > 200
    # the largest suite loses its oldest: the suites stay within one batch of each other
    sizes = [len(s.join.pending) for s in eng.suites.values()]
    assert max(sizes) - min(sizes) <= 64 // 64 + 1


def test_evicted_pending_unit_is_missing_not_dropped() -> None:
    """A unit evicted by the budget takes the path of one evicted by the per-suite bound.

    Budget 2 (batches down to 1) and ``max_pending = 1`` evict the same units: after the third
    judge both have taken units 0 and 1 as missing (applied at the worst value); the suite
    states are identical, and the late label of an evicted unit is counted late, never used.
    """
    budget = Engine(_cfg("[events]\nmax_waiting_units = 2\n"))  # type: ignore[arg-type]
    per_suite = Engine(_cfg(suite="max_pending = 1"))  # type: ignore[arg-type]
    for eng in (budget, per_suite):
        for i in range(3):
            eng.process(_judge("s", i, 10.0 + i, loss=i % 2))
    a, b = budget.suites["s"], per_suite.suites["s"]
    assert a.models["m"].counts["expired_pending"] == 2
    assert a.models["m"].order.applied == 2  # both taken as missing rounds, in audit order
    assert json.dumps(a.to_dict()["models"]) == json.dumps(b.to_dict()["models"])
    assert budget.counters["budget_evictions"]["pending"] == 2
    budget.process(_label("s", 0, 20.0))  # the label of an evicted unit comes after all
    m = a.models["m"]
    assert m.counts["late_labels"] == 1 and m.counts["rounds"] == 0


def test_budget_bounds_dedupe_entries() -> None:
    eng = Engine(_cfg("[events]\nmax_dedupe_entries = 100\n"))  # type: ignore[arg-type]
    for i in range(80):
        for k in range(3):
            eng.process(_judge(f"s{k}", i, 1000.0 + i))
            eng.process(_label(f"s{k}", i, 1000.0 + i))
            assert _totals(eng)[1] <= 100
    ev = eng.counters["budget_evictions"]
    assert ev["ids"] + ev["rounded"] > 0 and ev["pending"] == 0
    assert sum(s.models["m"].counts["rounds"] for s in eng.suites.values()) == 240


def test_restore_anywhere_reproduces_budget_evictions() -> None:
    """Evictions depend only on the engine's state and event order: a restored engine
    evicts exactly what the uninterrupted one did."""
    cfg = parse_config("[events]\nmax_waiting_units = 8\nmax_dedupe_entries = 300\n"
                       + CONFIG.format(suite=""))
    rng = np.random.default_rng(7)
    streams = [delayed_stream(f"s{i}", rng, units=150, risk=0.2, delay_pass=10.0,
                              delay_fail=60.0, missing_fail=0.3, unaudited_per_audit=1.0)
               for i in range(3)]
    lines = [line for _, line in heapq.merge(*streams)]
    full = Engine(cfg)
    full_alerts = [a for line in lines for a in full.process(line).alerts]
    expected = json.dumps(full.snapshot(), sort_keys=True)
    ev = full.counters["budget_evictions"]
    assert ev["pending"] > 0 and ev["ids"] + ev["rounded"] > 0
    for k in range(0, len(lines) + 1, 97):
        eng = Engine(cfg)
        alerts = [a for line in lines[:k] for a in eng.process(line).alerts]
        restored = Engine.restore(cfg, json.loads(json.dumps(eng.snapshot())))
        alerts += [a for line in lines[k:] for a in restored.process(line).alerts]
        assert alerts == full_alerts, k
        assert json.dumps(restored.snapshot(), sort_keys=True) == expected, k


def test_skipped_accounting_evicts_at_the_same_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine skips the budget's accounting while no total can reach its bound (the
    slack of ``JoinBudget.account``): with every possible run skipped, the evictions, alerts
    and state are those of accounting after every event, and the totals stay within bounds.
    """
    cfg = parse_config("[events]\nmax_waiting_units = 40\nmax_dedupe_entries = 400\n"
                       + CONFIG.format(suite="pending_ttl_seconds = 400"))
    rng = np.random.default_rng(11)
    streams = [delayed_stream(f"s{i}", rng, units=300, risk=0.2, delay_pass=10.0,
                              delay_fail=80.0, missing_fail=0.3, unaudited_per_audit=2.0)
               for i in range(4)]
    lines = [line for _, line in heapq.merge(*streams)]
    runs = []
    for min_slack in (10**9, 0):  # never skip; skip every run the slack allows
        monkeypatch.setattr(budget_module, "MIN_SLACK", min_slack)
        eng = Engine(cfg)
        alerts, skipped = [], 0
        for line in lines:
            alerts += eng.process(line).alerts
            skipped += eng.budget.slack > 0
            w, d = _totals(eng)
            assert w <= 40 and d <= 400
        runs.append((alerts, json.dumps(eng.snapshot(), sort_keys=True), skipped))
    assert runs[0][2] == 0 and runs[1][2] > len(lines) // 10  # the second run did skip
    assert runs[0][:2] == runs[1][:2]
    ev = json.loads(runs[1][1])["counters"]["budget_evictions"]
    assert ev["pending"] > 0 and ev["ids"] + ev["rounded"] > 0


_LATE_CONFIG = """
[events]
max_waiting_units = 100000
max_dedupe_entries = 6000
[[suites]]
name = "s"
models = ["m"]
audit_rate = 1.0
pending_ttl_seconds = 10
[[suites.certificates]]
name = "risk"
alpha = 0.3
delta = 0.1
methods = ["r_eval"]
"""


def _ev(kind: str, event_id: str, example: str, ts: float) -> bytes:
    return json.dumps({"type": kind, "event_id": event_id, "suite": "s", "model": "m",
                       "example_id": example, "loss": 0, "ts": ts}).encode()


def test_a_late_label_that_moves_event_time_expires_what_is_due(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A late label (its unit already taken as missing) moves the watermark and expires
    pending units: they were left unhandled (a checkpoint then refused to restore: "2
    waiting audit positions, 0 units"), and the next event's expiry grew the dedupe total by
    all of them at once, past the budget when its accounting was skipped."""
    cfg = parse_config(_LATE_CONFIG)
    n = 3000
    lines = [_ev("judge", "jB", "B", 0.0), _ev("judge", "jX", "X", 11.0)]
    lines += [_ev("judge", f"jA{i}", f"A{i}", 12.0 + i * 1e-4) for i in range(n)]
    lines += [_ev("label", "lB", "B", 100.0)]  # late: B expired at ts 12; expires X and A*
    tail = [_ev("judge", f"jZ{i}", f"Z{i}", 101.0 + i) for i in range(20)]
    eng = Engine(cfg)
    for line in lines:
        eng.process(line)
    model = eng.suites["s"].models["m"]
    assert model.counts["expired_pending"] == n + 2 and model.pending_units == 0
    restored = Engine.restore(cfg, json.loads(json.dumps(eng.snapshot())))
    for line in tail:
        eng.process(line)
        restored.process(line)
    assert restored.state_view() == eng.state_view()
    snapshots = []
    for min_slack in (10**9, 0):  # never skip the budget's accounting; skip all it allows
        monkeypatch.setattr(budget_module, "MIN_SLACK", min_slack)
        e = Engine(cfg)
        for line in lines + tail:
            e.process(line)
            assert sum(dedupe(s.join) for s in e.suites.values()) <= 6000
        snapshots.append(json.dumps(e.snapshot(), sort_keys=True))
    assert snapshots[0] == snapshots[1]
