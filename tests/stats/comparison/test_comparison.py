"""Comparisons: agreement with the batch twin, state round trips, verdict/bound
agreement, the unpaired pairing, multiplicity, the change detector and bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from monitor.stats.betting.bets import BetConfig
from monitor.stats.betting.plugin import PlugInEProcess
from monitor.stats.comparison import (
    CandidateGroup,
    DifferenceEProcess,
    PairedComparison,
    UnpairedComparison,
    difference_observation,
    to_unit,
)
from tests.support.comparison_batch import DifferenceBatch
from tests.support.comparison_rounds import arm_rounds, outcomes


def stream(seed: int, n: int, risk_c: float, risk_b: float) -> list[tuple[float, ...]]:
    """Paired rounds (l_c, l_b, f_c, f_b, b_c, b_b) with judge agreement 0.9, blocks of 3."""
    rng = np.random.default_rng(seed)
    c = arm_rounds(rng, *outcomes(rng, 1, n, risk_c, 3))
    b = arm_rounds(rng, *outcomes(rng, 1, n, risk_b, 3))
    return [tuple(float(v[0, i]) for v in (c.human, b.human, c.judge, b.judge, c.block,
                                              b.block)) for i in range(n)]


def test_unit_scale_is_the_difference_observation() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        lc, lb, fc, fb, bc, bb = rng.random(6).tolist()
        rho = float(rng.random())
        h, s = to_unit(lc, lb, fc, fb, bc, bb)
        d = difference_observation(lc, lb, fc, fb, bc, bb, rho)
        assert 0.0 <= h <= 1.0 and -1.0 <= s <= 1.0 and -1 - 2 * rho <= d <= 1 + 2 * rho
        assert math.isclose(2 * (h + rho * s) - 1, d, abs_tol=1e-12)


RHOS = np.linspace(0, 1, 11).tolist()


@pytest.mark.parametrize("grid", ["lognormal", "comparison", "certificate"])
def test_comparison_equals_the_batch_twin(grid: str) -> None:
    rounds = stream(1, 600, 0.12, 0.05)
    cmp = PairedComparison(0.02, 0.05, grid=grid)  # type: ignore[arg-type]
    ni = DifferenceBatch(0.51, "certify", RHOS, 1, grid)  # type: ignore[arg-type]
    inf = DifferenceBatch(0.51, "violate", RHOS, 1, grid)  # type: ignore[arg-type]
    for r in rounds:
        cmp.update(*r)
        h, s = to_unit(*r)
        ni.advance(np.array([h]), np.array([s]))
        inf.advance(np.array([h]), np.array([s]))
        assert math.isclose(cmp.log_e_non_inferior, float(ni.log_wealth[0]), abs_tol=1e-9)
        assert math.isclose(cmp.log_e_inferior, float(inf.log_wealth[0]), abs_tol=1e-9)
    assert cmp.status == "inferior" and cmp.decided_at_round is not None


@pytest.mark.parametrize("side", ["certify", "violate"])
def test_certificate_grid_is_the_certificates_e_process(side: str) -> None:
    # the comparison's e-process reuses the certificates' per-round functions: with their grid
    # it is their e-process (its fixed cells: comparisons keep no switch cell), bit for bit
    mine = DifferenceEProcess(0.51, side, RHOS, "certificate")  # type: ignore[arg-type]
    theirs = PlugInEProcess(0.51, 0.05, side, RHOS,  # type: ignore[arg-type]
                            BetConfig(cap_switch=False))
    for r in stream(12, 500, 0.08, 0.05):
        h, s = to_unit(*r)
        assert mine.advance(h, s) == theirs.advance(h, s)
        assert mine.rho == theirs.rho
    back = DifferenceEProcess.from_state(json.loads(json.dumps(mine.to_state())))
    for r in stream(13, 100, 0.08, 0.05):
        h, s = to_unit(*r)
        assert back.advance(h, s) == mine.advance(h, s)


@pytest.mark.parametrize("risks", [(0.12, 0.05), (0.05, 0.05), (0.02, 0.08)])
def test_state_round_trip_continues_bit_identically(risks: tuple[float, float]) -> None:
    rounds = stream(2, 900, *risks)
    a = PairedComparison(0.02, 0.05)
    for r in rounds[:450]:
        a.update(*r)
    state = json.loads(json.dumps(a.to_state()))
    b = PairedComparison.from_state(state)
    assert b.to_state() == a.to_state()
    for r in rounds[450:]:
        a.update(*r)
        b.update(*r)
    assert b.to_state() == a.to_state()
    assert (a.status, a.bound, a.estimate) == (b.status, b.bound, b.estimate)


def test_verdicts_agree_with_their_bounds() -> None:
    seen = set()
    for seed, risks in enumerate([(0.12, 0.05), (0.0, 0.05), (0.3, 0.1), (0.05, 0.2)]):
        cmp = PairedComparison(0.02, 0.05)
        for r in stream(seed + 20, 1500, *risks):
            cmp.update(*r)
            if cmp.status == "non_inferior":
                assert cmp.bound is not None and cmp.bound <= 0.02
                assert cmp.upper_bound >= -1.0 and cmp.bound == min(cmp.upper_bound, 0.02)
            elif cmp.status == "inferior":
                assert cmp.bound is not None and cmp.bound >= 0.02
            else:
                assert cmp.bound is None
        seen.add(cmp.status)
        true = risks[0] - risks[1]
        assert cmp.lower_bound < true < cmp.upper_bound  # fixed seeds: the bounds cover
        assert abs(cmp.estimate - true) < 0.05
    assert seen == {"non_inferior", "inferior"}


def test_unpaired_pairs_in_audit_order_and_round_trips() -> None:
    rounds = stream(3, 400, 0.1, 0.1)
    ref = PairedComparison(0.02, 0.05)
    un = UnpairedComparison(0.02, 0.05)
    # the baseline's units arrive in bursts, the candidate's one by one: the i-th of each pair
    base = [(r[1], r[3], r[5]) for r in rounds]
    for i, r in enumerate(rounds):
        if i < 399:
            ref.update(*r)
        un.update_candidate(r[0], r[2], r[4])
        if i % 7 == 6:
            for u in base[i - 6: i + 1]:
                un.update_baseline(*u)
            assert un.backlog == (0, 0)
            state = json.loads(json.dumps(un.to_state()))
            un = UnpairedComparison.from_state(state)
    assert un.backlog == (400 - 399, 0)
    assert un.rounds == 399 and un.labels_used == 798
    # the same pairs as the paired design's rounds, so the same bits
    assert un.paired.to_state() == ref.to_state()


def test_empty_blocks_use_the_labels_only() -> None:
    a = PairedComparison(0.02, 0.05)
    b = PairedComparison(0.02, 0.05, n_rhos=1)
    for r in stream(4, 300, 0.1, 0.1):
        a.update(r[0], r[1], r[2], r[3], None, None)
        b.update(r[0], r[1], r[2], r[3], None, None)
    assert a.estimate == b.estimate


def test_group_shares_the_budget() -> None:
    g = CandidateGroup("paired", ["v2", "v3", "v4"], margin=0.02, delta=0.06)
    assert [g.member(n).threshold_delta for n in g.candidates] == [0.02] * 3
    for r in stream(5, 300, 0.3, 0.05):
        g.update("v3", *r)
    assert g.member("v3").status == "inferior" and g.member("v2").status == "pending"
    assert g.member("v3").log_threshold == pytest.approx(math.log(50))
    back = CandidateGroup.from_state(json.loads(json.dumps(g.to_state())))
    assert back.to_state() == g.to_state()
    u = CandidateGroup("unpaired", ["v2", "v3"], margin=0.02, delta=0.05)
    u.update_baseline(0.0, 0.0, None)
    u.update_candidate("v2", 1.0, 1.0, None)
    assert u.member("v2").rounds == 1 and u.member("v3").backlog == (0, 1)
    with pytest.raises(ValueError, match="paired design"):
        u.update("v2", 0.0, 0.0, 0.0, 0.0, None, None)
    with pytest.raises(ValueError, match="distinct"):
        CandidateGroup("paired", ["v2", "v2"])
    with pytest.raises(KeyError):
        g.member("nope")


def test_change_detector_sees_a_candidate_that_got_worse() -> None:
    cmp = PairedComparison(0.02, 0.05)
    good, bad = stream(6, 1500, 0.05, 0.05), stream(7, 1500, 0.25, 0.05)
    for r in good:
        cmp.update(*r)
    assert not cmp.change_alarm and cmp.status == "non_inferior"
    n = 0
    for r in bad:
        cmp.update(*r)
        n += 1
        if cmp.change_alarm:
            break
    assert cmp.change_alarm and n < 300 and cmp.change_round is not None
    assert cmp.change_round > 1300  # the estimated start of the change is near round 1501
    cmp.restart()
    assert cmp.status == "pending" and cmp.rounds == 0 and cmp.epoch == 1


@pytest.mark.parametrize("bad", [(1.5, 0.0, 0.0, 0.0, None, None),
                                 (0.0, math.nan, 0.0, 0.0, None, None),
                                 (0.0, 0.0, True, 0.0, None, None),
                                 (0.0, 0.0, 0.0, 0.0, -0.1, None),
                                 (0.0, 0.0, 0.0, 0.0, None, "0.5")])
def test_bad_input_is_rejected_and_changes_nothing(bad: tuple[object, ...]) -> None:
    cmp = PairedComparison()
    before = cmp.to_state()
    with pytest.raises(ValueError, match="must be a finite number in"):
        cmp.update(*bad)  # type: ignore[arg-type]
    assert cmp.to_state() == before


def test_bad_config_and_state() -> None:
    for kw in (dict(margin=1.0), dict(delta=0.0), dict(threshold_delta=1.5),
               dict(n_rhos=0)):
        with pytest.raises(ValueError):
            PairedComparison(**kw)
    st = PairedComparison().to_state()
    with pytest.raises(ValueError, match="not a PairedComparison"):
        PairedComparison.from_state({**st, "version": 2})
    with pytest.raises(ValueError, match="not an UnpairedComparison"):
        UnpairedComparison.from_state(st)
    un = UnpairedComparison().to_state()
    with pytest.raises(ValueError, match="both queues"):
        UnpairedComparison.from_state({**un, "candidate_queue": [[0.5, 0.0]],
                                       "baseline_queue": [[0.5, 0.0]]})
