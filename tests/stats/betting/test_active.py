"""Active audits: propensities, observation range, online pending labels, state round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest

from monitor.stats.betting.active import ActiveBatch, Test
from monitor.stats.betting.active_growth import (
    bet_cap,
    observation_range,
    propensity,
    solve_scale,
    uncertainty,
)
from monitor.stats.betting.active_online import ActiveAudit
from monitor.stats.betting.bets import Side

TESTS: list[Test] = [(0.13, "certify"), (0.13, "violate")]


def _stream(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.random(n)
    f = np.where(z < 0.85, 0.01, np.where(z < 0.9, 0.95, 0.5))
    return f, rng.random(n), (rng.random(n) < f).astype(float)


def test_scale_matches_the_budget() -> None:
    w = np.array([0.85, 0.05, 0.10])
    u = uncertainty(np.array([0.01, 0.95, 0.5]))
    for floor, m in [(0.025, 0.0), (0.05, 0.5), (0.075, 0.25)]:
        k = solve_scale(w, u, 0.1, np.array(floor), np.array(m))
        pi = propensity(np.array([0.01, 0.95, 0.5]), 0.1, floor, m, k)
        assert abs(float((w * pi).sum()) - 0.1) < 1e-9
        assert pi.min() >= floor and pi[2] > pi[0]  # more labels where the judge is unsure


def test_observation_stays_in_its_range_and_factors_above_one_minus_c() -> None:
    rng = np.random.default_rng(0)
    for rho in (0.0, 0.5, 1.0):
        pi_min = 0.02
        lo, hi = observation_range(rho, pi_min)
        f, human = rng.random(10_000), rng.random(10_000)
        pi = rng.uniform(pi_min, 1.0, 10_000)
        y = rho * f + (human - rho * f) / pi
        assert y.min() >= lo - 1e-12 and y.max() <= hi + 1e-12
        sides: tuple[tuple[Side, np.ndarray], ...] = (("certify", 0.1 - y), ("violate", y - 0.1))
        for side, x in sides:
            lam = bet_cap(0.1, rho, pi_min, side, 0.95)
            assert (1.0 + lam * x).min() >= 0.05 - 1e-9


def test_online_equals_batch_with_immediate_labels() -> None:
    f, coin, human = _stream(3000, 1)
    batch = ActiveBatch(0.1, TESTS, [0.01, 0.01], reps=1)
    online = ActiveAudit(0.1, TESTS, [0.01, 0.01])
    for t in range(len(f)):
        xi = batch.update(f[t:t + 1], coin[t:t + 1], human[t:t + 1])
        audited, _pi, ticket = online.judge(float(f[t]), float(coin[t]))
        assert audited == bool(xi[0])
        if ticket is not None:
            online.label(ticket, float(human[t]))
    assert online.labels == int(batch.labels[0])
    np.testing.assert_allclose(online.log_e(0), batch.log_e()[0, 0], rtol=1e-9)
    assert online.status(0) == ("certified" if batch.crossed[0, 0] else "pending")
    assert online.policy()["uniform_share"] < 1.0  # an informative judge: the policy is active


def test_pending_labels_count_at_their_worst_and_order_does_not_matter() -> None:
    f, coin, _ = _stream(3000, 2)
    fast = ActiveAudit(0.1, TESTS, [0.01, 0.01])
    slow = ActiveAudit(0.1, TESTS, [0.01, 0.01])
    held: list[tuple[list[object], float]] = []
    for t in range(len(f)):
        _, _, ticket = fast.judge(float(f[t]), float(coin[t]))
        if ticket is not None:
            fast.label(ticket, 0.0)  # learn the same labels as slow below, but at once
        _, _, ticket2 = slow.judge(float(f[t]), float(coin[t]))
        if ticket2 is not None:
            held.append((ticket2, 0.0))
            assert slow.log_e(0) <= fast.log_e(0) + 1e-9  # a pending label claims less
    assert slow.pending == len(held) and slow.labels == 0
    for ticket, h in reversed(held):  # labels arrive last and in reverse order
        slow.label(ticket, h)
    # the bets of slow were fixed without the labels, so the wealths differ, but every
    # pending unit is now settled and the claim can only have risen
    assert slow.pending == 0 and slow.labels == len(held)


def test_missing_label_stays_worst() -> None:
    aa = ActiveAudit(0.5, [(0.3, "certify")], [0.05])
    tickets = [t for i in range(300) if (t := aa.judge(0.3, (i * 0.618) % 1.0)[2]) is not None]
    before = aa.log_e(0)
    for t in tickets:
        aa.missing(t)
    assert aa.pending == 0 and aa.labels == 0
    assert aa.log_e(0) == pytest.approx(before)  # the worst value, now for good
    assert aa.status(0) == "pending"


def test_state_round_trip_is_json_and_continues_identically() -> None:
    f, coin, human = _stream(1500, 3)
    a = ActiveAudit(0.1, TESTS, [0.01, 0.01])
    tickets = []
    for t in range(1000):
        tk = a.judge(float(f[t]), float(coin[t]))[2]
        if tk is not None:
            tickets.append((tk, float(human[t])))
    b = ActiveAudit.from_state(json.loads(json.dumps(a.to_state())))
    for x in (a, b):
        for tk, h in tickets:
            x.label(json.loads(json.dumps(tk)), h)
        for t in range(1000, 1500):
            x.judge(float(f[t]), float(coin[t]))
    assert a.to_state() == b.to_state()
    with pytest.raises(ValueError):
        ActiveAudit.from_state({"kind": "other"})


def test_prefix_claim_sees_a_crossing_that_the_late_labels_hide() -> None:
    """Every label held to the end: the wealth peaks (passes), then falls (failures).

    The bound with pending labels at their worst never crosses, but once the labels arrive
    the wealth just before each still-waiting unit is known, and it passed the threshold.
    """
    aa = ActiveAudit(0.2, [(0.3, "certify")], [0.05])
    held: list[tuple[list[object], float]] = []
    best_now = -np.inf
    for i in range(4000):
        human = 0.0 if i < 2000 else 1.0
        _, _, ticket = aa.judge(0.3, (i * 0.618) % 1.0)
        if ticket is not None:
            held.append((ticket, human))
        best_now = max(best_now, aa.log_e(0))
    assert best_now < np.log(1 / 0.05) and aa.status(0) == "pending"
    for ticket, human in held:
        aa.label(ticket, human)
    assert aa.log_e(0) < np.log(1 / 0.05)  # the wealth now has fallen back
    assert aa.status(0) == "certified" and aa.max_log_e(0) >= np.log(1 / 0.05)
    assert aa.to_state()["queue"] == []


def test_restart_leaves_earlier_units_out() -> None:
    """After a restart (a new epoch) a test's wealth is of later units only: a unit judged
    before it, whose label arrives after, does not enter it (but still does in other tests)."""
    from monitor.stats.betting.active_online import ActiveAudit

    aa = ActiveAudit(0.2, [(0.3, "certify"), (0.3, "violate")], [0.05, 0.05])
    tickets = []
    for i in range(300):
        _, _, t = aa.judge(0.02, (i * 0.618) % 1.0)
        if t is not None:
            tickets.append(t)
    aa.restart([0])
    assert aa.log_e(0) == 0.0 and aa.status(0) == "pending" and aa.log_e(1) != 0.0
    for t in tickets:
        aa.label(t, 0.0)
    assert aa.log_e(0) == 0.0 and aa.status(0) == "pending"
    restored = ActiveAudit.from_state(aa.to_state())
    assert restored.to_state() == aa.to_state()
    for i in range(300, 700):
        _, _, t = aa.judge(0.02, (i * 0.618) % 1.0)
        if t is not None:
            aa.label(t, 0.0)
    assert aa.status(0) == "certified"
