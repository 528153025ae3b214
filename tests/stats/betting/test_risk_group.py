"""CertificateGroup must be bit-identical to independent RiskMonitors, one per method."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from monitor.stats.betting.bets import BetConfig
from monitor.stats.betting.risk import RiskMonitor
from monitor.stats.betting.risk_group import CertificateGroup, GroupedRiskMonitor

ALL = ["r_eval", "r_autoeval", "r_autoeval_plus"]


def stream(n: int, seed: int, risk: float = 0.1, quality: float = 0.85,
           empty: float = 0.05) -> list[tuple[float, float, float | None]]:
    rng = np.random.default_rng(seed)
    h = (rng.random(n) < risk).astype(float)
    f = np.where(rng.random(n) < quality, h, 1.0 - h)
    if seed % 2:  # non-Bernoulli losses too
        h = np.clip(h * 0.7 + rng.random(n) * 0.3, 0.0, 1.0)
        f = np.clip(f * 0.6 + rng.random(n) * 0.4, 0.0, 1.0)
    b = rng.binomial(8, risk + 0.05, n) / 8
    e = rng.random(n) < empty
    return [(hh, ff, None if ee else bb) for hh, ff, bb, ee in
            zip(h.tolist(), f.tolist(), b.tolist(), e.tolist(), strict=True)]


def same_float(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) ==
                                                  math.copysign(1, b))


def assert_same(g: CertificateGroup, refs: dict[str, RiskMonitor], full: bool) -> None:
    for meth, ref in refs.items():
        m = g[meth]
        assert m.rounds == ref.rounds
        for name in ("log_e_certify", "log_e_violate", "log_threshold", "cs_lower", "cs_upper",
                     "risk_estimate", "judge_bias"):
            assert same_float(getattr(m, name), getattr(ref, name)), (meth, name)
        assert m.certified_at_round == ref.certified_at_round
        assert m.violated_at_round == ref.violated_at_round
        assert m.status == ref.status
        assert m.cs_valid == ref.cs_valid
        assert m.rho_weights.tolist() == ref.rho_weights.tolist()
        assert m.rhos.tolist() == ref.rhos.tolist()
        assert m.certify_test.next_bets.tolist() == ref.certify_test.next_bets.tolist()
        assert m.violate_test.log_e_per_rho.tolist() == ref.violate_test.log_e_per_rho.tolist()
        if full:
            s, r = m.to_state(), ref.to_state()
            assert s == r, meth
            assert json.dumps(s) == json.dumps(r), meth  # same bytes (e.g. -0.0 vs 0.0)


CONFIGS = [
    # (methods, bet, n_rhos, cs_grid, alpha, delta, threshold_delta, stream kwargs)
    (ALL, BetConfig("wsr"), 10, 1000, 0.12, 0.05, None, {"risk": 0.1}),
    (ALL, BetConfig("wsr"), 10, 200, 0.1, 0.05, 0.025, {"risk": 0.1, "quality": 0.6}),
    (ALL, BetConfig("wsr"), 6, None, 0.3, 0.1, None, {"risk": 0.2}),
    (ALL, BetConfig("wsr", horizon=300, c=0.75), 10, 200, 0.15, 0.1, None, {"risk": 0.1}),
    (ALL, BetConfig("wsr", horizon=50), 4, 1000, 0.1, 0.1, None, {"risk": 0.3, "empty": 0.3}),
    (["r_eval", "r_autoeval"], BetConfig("wsr"), 10, 200, 0.12, 0.05, None, {"risk": 0.05}),
    (["r_autoeval_plus", "r_eval"], BetConfig("wsr"), 5, 200, 0.2, 0.05, None, {"risk": 0.3}),
    (["r_autoeval"], BetConfig("wsr"), 10, 1000, 0.12, 0.05, None, {"risk": 0.1}),
    (["r_eval"], BetConfig("wsr", c=0.75), 10, None, 0.12, 0.05, None, {"risk": 0.1}),
    (ALL, BetConfig(rule="up", up_grid=8), 4, 200, 0.12, 0.1, None, {"risk": 0.05}),
    (ALL, BetConfig(rule="up", up_grid=16), 5, None, 0.3, 0.05, 0.01, {"risk": 0.5}),
    (["r_autoeval", "r_autoeval_plus"], BetConfig(rule="up", up_grid=4), 3, 100, 0.4, 0.2,
     None, {"risk": 0.2}),
]


@pytest.mark.parametrize("case", range(len(CONFIGS)))
def test_group_equals_independent_monitors(case: int) -> None:
    methods, bet, n_rhos, grid, alpha, delta, tdelta, kw = CONFIGS[case]
    up = bet.rule == "up"
    n = 400 if up else 1500
    g = CertificateGroup(alpha, delta, methods, bet, n_rhos=n_rhos, cs_grid=grid,
                         threshold_delta=tdelta)
    refs = {m: RiskMonitor(alpha, delta, m, bet, n_rhos=n_rhos, cs_grid=grid,
                           threshold_delta=tdelta) for m in methods}
    assert list(g.members) == list(methods)
    assert all(isinstance(m, GroupedRiskMonitor) for m in g.members.values())
    assert_same(g, refs, full=True)  # round 0
    for i, (h, f, b) in enumerate(stream(n, seed=case, **kw)):  # type: ignore[arg-type]
        g.update(h, f, b)
        for r in refs.values():
            r.update(h, f, b)
        assert_same(g, refs, full=i % 97 == 0)
    assert_same(g, refs, full=True)
    # a member state is a plain RiskMonitor state
    for m in methods:
        back = RiskMonitor.from_state(json.loads(json.dumps(g[m].to_state())))
        assert back.to_state() == refs[m].to_state()


def test_crossings_and_cs_shrink_are_exercised() -> None:
    # the equality above is only meaningful if bounds move and certificates fire
    g = CertificateGroup(0.12, 0.05, ALL, BetConfig("wsr"), n_rhos=10, cs_grid=200)
    for h, f, b in stream(1500, seed=0, risk=0.05, quality=0.95):
        g.update(h, f, b)
    assert all(m.cs_upper < 0.5 and m.cs_lower >= 0.0 for m in g.members.values())
    assert g["r_autoeval_plus"].status == "certified"
    assert len({g[m].cs_upper for m in ALL}) > 1 or len({g[m].cs_lower for m in ALL}) > 1


def test_invalid_interval_freezes_like_standalone() -> None:
    # a drifting stream empties some running intersections (forced with a large delta)
    methods, bet = ALL, BetConfig("wsr")
    g = CertificateGroup(0.5, 0.9, methods, bet, n_rhos=4, cs_grid=50)
    refs = {m: RiskMonitor(0.5, 0.9, m, bet, n_rhos=4, cs_grid=50) for m in methods}
    rounds = stream(300, seed=4, risk=0.05) + stream(600, seed=6, risk=0.95)
    for h, f, b in rounds:
        g.update(h, f, b)
        for r in refs.values():
            r.update(h, f, b)
        assert_same(g, refs, full=False)
    assert any(not r.cs_valid for r in refs.values())
    assert_same(g, refs, full=True)
    assert_same(CertificateGroup.from_state(g.to_state()), refs, full=True)


@pytest.mark.parametrize("bet", [BetConfig("wsr"), BetConfig(rule="up", up_grid=8)])
def test_restore_mid_stream(bet: BetConfig) -> None:
    rounds = stream(700 if bet.rule == "wsr" else 250, seed=3, risk=0.08)
    cut = len(rounds) // 3
    g = CertificateGroup(0.12, 0.05, ALL, bet, n_rhos=5, cs_grid=200)
    refs = {m: RiskMonitor(0.12, 0.05, m, bet, n_rhos=5, cs_grid=200) for m in ALL}
    for i, (h, f, b) in enumerate(rounds):
        if i == cut:
            g = CertificateGroup.from_state(json.loads(json.dumps(g.to_state())))
        g.update(h, f, b)
        for r in refs.values():
            r.update(h, f, b)
    assert_same(g, refs, full=True)
    g2 = CertificateGroup.from_state(json.loads(json.dumps(g.to_state())))
    assert g2.to_state() == g.to_state()


def test_bad_input_changes_nothing_and_members_refuse_updates() -> None:
    g = CertificateGroup(0.1, 0.05, ALL, BetConfig("wsr"), n_rhos=3, cs_grid=20)
    g.update(0.0, 0.0, 0.5)
    before = g.to_state()
    with pytest.raises(ValueError, match="judge_loss"):
        g.update(0.0, 1.5, 0.5)
    with pytest.raises(ValueError, match="block_mean"):
        g.update(0.0, 0.5, float("nan"))
    assert g.to_state() == before
    with pytest.raises(TypeError):
        g["r_eval"].update(0.0, 0.0, None)
    with pytest.raises(ValueError, match="methods"):
        CertificateGroup(0.1, 0.05, ["r_eval", "r_eval"], BetConfig("wsr"))
    with pytest.raises(ValueError, match="CertificateGroup"):
        CertificateGroup.from_state({"kind": "x"})


def sparse_reads(n: int, seed: int) -> set[int]:
    """Rounds after which the group is read: gaps from 1 to several chunks (128 rounds)."""
    rng = np.random.default_rng(seed)
    gaps = rng.choice([1, 2, 7, 60, 127, 128, 129, 300], size=n)
    return set(np.cumsum(gaps).tolist())


@pytest.mark.parametrize("case", [c for c in range(len(CONFIGS))
                                  if CONFIGS[c][1].rule == "wsr" and CONFIGS[c][3]])
def test_buffered_rounds_equal_round_by_round(case: int) -> None:
    # WSR confidence-sequence rounds are buffered until a read: reading rarely must give
    # exactly what reading after every round gives (the test above reads every round)
    methods, bet, n_rhos, grid, alpha, delta, tdelta, kw = CONFIGS[case]
    g = CertificateGroup(alpha, delta, methods, bet, n_rhos=n_rhos, cs_grid=grid,
                         threshold_delta=tdelta)
    refs = {m: RiskMonitor(alpha, delta, m, bet, n_rhos=n_rhos, cs_grid=grid,
                           threshold_delta=tdelta) for m in methods}
    reads = sparse_reads(100, case)
    for i, (h, f, b) in enumerate(stream(2500, seed=case + 10, **kw)):  # type: ignore[arg-type]
        g.update(h, f, b)
        for r in refs.values():
            r.update(h, f, b)
        if i in reads:
            assert_same(g, refs, full=i % 3 == 0)
    assert_same(g, refs, full=True)


@pytest.mark.parametrize("seed", range(6))
def test_buffered_rounds_through_invalid_intervals(seed: int) -> None:
    # drifting streams empty the running intersections at different rounds, inside buffers;
    # a checkpoint (to_state) taken between reads restores to the same continuation
    methods, bet = ALL, BetConfig("wsr")
    g = CertificateGroup(0.5, 0.9, methods, bet, n_rhos=4, cs_grid=50)
    refs = {m: RiskMonitor(0.5, 0.9, m, bet, n_rhos=4, cs_grid=50) for m in methods}
    cut = 150 + 40 * seed
    rounds = (stream(cut, seed=seed, risk=0.05) + stream(700, seed=seed + 6, risk=0.95)
              + stream(300, seed=seed + 12, risk=0.05))
    eager = CertificateGroup(0.5, 0.9, methods, bet, n_rhos=4, cs_grid=50)
    reads = sparse_reads(50, seed)
    for i, (h, f, b) in enumerate(rounds):
        g.update(h, f, b)
        eager.update(h, f, b)
        assert eager["r_eval"].cs_valid in (True, False)  # a read: applies every round now
        for r in refs.values():
            r.update(h, f, b)
        if i in reads:
            assert_same(g, refs, full=False)
            assert g.to_state() == eager.to_state()  # the shared wealth too
        if i == cut + 200:
            g = CertificateGroup.from_state(json.loads(json.dumps(g.to_state())))
    assert sum(not r.cs_valid for r in refs.values()) >= 2
    assert_same(g, refs, full=True)
    assert json.dumps(g.to_state()) == json.dumps(eager.to_state())
