"""Deterministic tests of the hedged two-sided confidence sequence (betting/confseq.py)."""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import numpy as np
import pytest

from monitor.stats.betting.bets import BetConfig, up_grid, wsr_bet
from monitor.stats.betting.confseq import HedgedConfidenceSequence
from monitor.stats.betting.grid_wealth import (
    bet_caps,
    grid_points,
    hull_edges,
    log_mixture,
    update_log_wealth,
)

RHOS10 = np.linspace(0.0, 1.0, 10)


def _rounds(n: int, seed: int, risk: float = 0.3, gamma: float = 0.8, r: int = 5,
            empty: float = 0.2) -> list[tuple[float, float, float | None]]:
    """Bernoulli human losses, judge = human flipped w.p. 1-gamma, variable (maybe empty) blocks."""
    rng = np.random.default_rng(seed)
    out: list[tuple[float, float, float | None]] = []
    pf = risk * gamma + (1 - risk) * (1 - gamma)
    for _ in range(n):
        h = float(rng.random() < risk)
        j = h if rng.random() < gamma else 1.0 - h
        k = int(rng.integers(1, r + 1)) if rng.random() >= empty else 0
        b = float(rng.binomial(k, pf) / k) if k else None
        out.append((h, j, b))
    return out


def _q(rho: float, h: float, j: float, b: float | None) -> float:
    return h if b is None else rho * b + h - rho * j


# --------------------------------------------------------------------- scalar reference
def _reference(rounds: list[tuple[float, float, float | None]], delta: float, rhos: list[float],
               c: float, g: int) -> list[tuple[int, int, bool]]:
    """Plain-Python full-grid reference: bets from bets.wsr_bet (batch form) at every m."""
    cfg = BetConfig("wsr", c=c)
    thr = math.log(2 / delta)
    grid = [j / g for j in range(1, g)]
    logw = {(side, s, j): 0.0 for side in (0, 1) for s in range(len(rhos)) for j in range(g - 1)}
    past: list[list[float]] = [[] for _ in rhos]
    lo, hi, valid = 0, g, True
    out = []
    for h, jl, b in rounds:
        for s, rho in enumerate(rhos):
            q = _q(rho, h, jl, b)
            for j, m in enumerate(grid):
                lam_u = wsr_bet(past[s], m, delta / 2, -rho, 1.0 + rho, "certify", cfg)
                lam_l = wsr_bet(past[s], m, delta / 2, -rho, 1.0 + rho, "violate", cfg)
                logw[0, s, j] += math.log1p(-lam_u * (q - m))
                logw[1, s, j] += math.log1p(lam_l * (q - m))
            past[s].append(q)
        rej = np.zeros((2, g - 1), dtype=bool)
        for side in (0, 1):
            for j in range(g - 1):
                mix = sum(math.exp(logw[side, s, j]) for s in range(len(rhos))) / len(rhos)
                rej[side, j] = math.log(mix) >= thr
        if valid:
            lo_c, hi_c = hull_edges(rej, 1)
            lo, hi = max(lo, lo_c), min(hi, hi_c)
            valid = lo < hi
        out.append((lo, hi, valid))
    return out


def test_tiny_grid_hand_computed() -> None:
    # G = 2: one grid point m = 1/2; delta = 1/2 -> reject when wealth >= 4. R-Eval, c = 1/2.
    # Bet cap at m = 1/2 is c / (1 - 1/2) = c / (1/2 - 0) = 1. Uncapped WSR bet for round 1:
    # sqrt(2 log 4 / (1 * log 2) / (1/4)) = 4 -> capped to 1; it stays >= 1 for rounds 2..4.
    cs = HedgedConfidenceSequence(0.5, np.array([0.0]), BetConfig("wsr", c=0.5), grid_size=2)
    assert cs.next_bets is not None
    assert cs.next_bets[0] == pytest.approx(4.0, rel=1e-12)
    assert cs.effective_bets("upper").tolist() == [[1.0]]
    assert cs.effective_bets("lower").tolist() == [[1.0]]
    for t in range(1, 5):
        assert cs.next_bets[0] >= 1.0
        cs.update(0.0, 0.0, None)
        # upper-test wealth 1.5^t (1.5, 2.25, 3.375, 5.06), lower-test wealth 0.5^t
        assert (cs.lower, cs.upper, cs.valid) == ((0.0, 1.0, True) if t < 4 else (0.0, 0.5, True))
    assert cs.rounds == 4
    # round 2 uncapped bet by hand: mu_1 = 1/4, sigma^2_1 = (1/4 + 1/16) / 2 = 5/32
    cs2 = HedgedConfidenceSequence(0.5, np.array([0.0]), BetConfig("wsr", c=0.5), grid_size=2)
    cs2.update(0.0, 0.0, None)
    assert cs2.next_bets is not None
    expected = math.sqrt(2 * math.log(4) / (2 * math.log(3)) / (5 / 32))
    assert cs2.next_bets[0] == pytest.approx(expected, rel=1e-12)


def test_matches_scalar_reference_full_grid() -> None:
    rounds = _rounds(80, seed=3)
    rhos = [0.0, 0.5, 1.0]
    ref = _reference(rounds, 0.2, rhos, 0.5, 10)
    cs = HedgedConfidenceSequence(0.2, np.array(rhos), BetConfig("wsr", c=0.5), grid_size=10)
    got = []
    for h, j, b in rounds:
        cs.update(h, j, b)
        got.append((round(cs.lower * 10), round(cs.upper * 10), cs.valid))
    assert got == ref
    assert ref[-1][0] > 0 and ref[-1][1] < 10  # the interval did shrink on both sides


def test_shrinks_around_mean_on_long_sequence() -> None:
    cs = HedgedConfidenceSequence(0.05, RHOS10, BetConfig("wsr"), grid_size=1000)
    widths = []
    for t in range(3000):
        h = 0.3 + 0.05 * math.sin(t)  # constant-ish, mean ~0.3
        cs.update(h, h, 0.3)
        assert cs.valid and cs.lower <= 0.3 <= cs.upper
        widths.append(cs.upper - cs.lower)
    assert all(a >= b for a, b in itertools.pairwise(widths))  # running intersection
    assert widths[-1] < 0.02 and widths[-1] >= 1 / 1000
    assert widths[100] < 0.5


@pytest.mark.parametrize("rhos", [np.array([0.0]), np.array([1.0]), RHOS10])
def test_bets_independent_of_m_except_caps_and_predictable(rhos: np.ndarray) -> None:
    delta, c, g = 0.1, 0.5, 50
    rounds = _rounds(40, seed=5)
    cs = HedgedConfidenceSequence(delta, rhos, BetConfig("wsr", c=c), grid_size=g)
    caps = bet_caps(rhos, grid_points(g), c)
    past: list[list[float]] = [[] for _ in rhos]
    for t, (h, j, b) in enumerate(rounds):
        lam = cs.next_bets
        assert lam is not None and lam.shape == rhos.shape
        up, lo = cs.effective_bets("upper"), cs.effective_bets("lower")
        np.testing.assert_array_equal(up, np.minimum(lam[:, None], caps[0]))
        np.testing.assert_array_equal(lo, np.minimum(lam[:, None], caps[1]))
        if t in (0, 7, 39):  # equals the batch reference at every grid point, bit for bit
            for s, rho in enumerate(rhos.tolist()):
                for k in (0, 13, 24, 48):
                    m = (k + 1) / g
                    assert up[s, k] == wsr_bet(past[s], m, delta / 2, -rho, 1 + rho, "certify",
                                               BetConfig("wsr", c=c))
                    assert lo[s, k] == wsr_bet(past[s], m, delta / 2, -rho, 1 + rho, "violate",
                                               BetConfig("wsr", c=c))
        # predictable: the bet the update actually used is the one announced before it
        first, _ = cs.tracked
        old_lw = cs._log_wealth.copy()
        cs.update(h, j, b)
        new_first, new_last = cs.tracked
        qs = np.array([_q(r, h, j, b) for r in rhos.tolist()])
        for e in range(new_first, new_last + 1):
            x = qs - e / g
            ok = np.abs(x) > 1e-9
            for side, sign, eff in ((0, -1.0, up), (1, 1.0, lo)):
                factor = np.exp(cs._log_wealth[side, :, e - new_first]
                                - old_lw[side, :, e - first])
                with np.errstate(divide="ignore", invalid="ignore"):
                    used = (factor - 1.0) / (sign * x)
                np.testing.assert_allclose(used[ok], eff[ok, e - 1], rtol=1e-7, atol=1e-9)
        for s, rho in enumerate(rhos.tolist()):
            past[s].append(_q(rho, h, j, b))


def _full_grid_mixture(rounds: list[tuple[float, float, float | None]], rhos: np.ndarray,
                       bet: BetConfig, g: int, delta: float) -> list[np.ndarray]:
    """Log mixture wealth on the FULL grid (no window) after every round, shape (2, G-1)."""
    grid = grid_points(g)
    caps = bet_caps(rhos, grid, bet.c)
    u, logw = up_grid(bet.up_grid)
    shape = (2, rhos.size, g - 1) + ((u.size,) if bet.rule == "up" else ())
    lw = np.zeros(shape)
    total, dev = np.zeros(rhos.size), np.zeros(rhos.size)
    var0 = 0.25 * (1 + 2 * rhos) ** 2
    out = []
    for t, (h, j, b) in enumerate(rounds, start=1):
        q = np.array([_q(r, h, j, b) for r in rhos.tolist()])
        lam = np.sqrt(2 * math.log(2 / delta) / (t * math.log1p(t)) / ((var0 + dev) / t))
        if bet.rule == "up":
            update_log_wealth(lw, q, grid, caps, None, u)
        else:
            update_log_wealth(lw, q, grid, caps, lam, None)
        total = total + q
        dev = dev + (q - (0.5 + total) / (t + 1)) ** 2
        out.append(log_mixture(lw, logw if bet.rule == "up" else None))
    return out


@pytest.mark.parametrize("rule", ["wsr", "up"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_accepted_set_is_interval_and_window_is_exact(rule: str, seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    rhos = np.sort(rng.random(4))
    bet = BetConfig(rule=rule, c=float(rng.uniform(0.3, 0.9)), up_grid=8)  # type: ignore[arg-type]
    g, delta = 40, 0.2
    rounds = _rounds(150, seed=seed, risk=float(rng.uniform(0.1, 0.7)))
    mixes = _full_grid_mixture(rounds, rhos, bet, g, delta)
    cs = HedgedConfidenceSequence(delta, rhos, bet, grid_size=g)
    lo, hi = 0, g
    for (h, j, b), mix in zip(rounds, mixes, strict=True):
        # wealth is monotone in m: upper test non-decreasing, lower test non-increasing
        assert np.all(np.diff(mix[0]) >= -1e-9) and np.all(np.diff(mix[1]) <= 1e-9)
        rej = mix >= math.log(2 / delta)
        acc_up, acc_lo = np.flatnonzero(~rej[0]), np.flatnonzero(~rej[1])
        assert acc_up.size == 0 or acc_up[-1] == acc_up.size - 1  # rejected = a suffix
        assert acc_lo.size == 0 or acc_lo[0] == g - 1 - acc_lo.size  # rejected = a prefix
        accepted = np.flatnonzero(~rej[0] & ~rej[1])
        assert accepted.size == 0 or np.all(np.diff(accepted) == 1)  # an interval
        lo_c, hi_c = hull_edges(rej, 1)
        lo, hi = max(lo, lo_c), min(hi, hi_c)
        cs.update(h, j, b)
        # the windowed class reports exactly the full-grid running intersection
        assert (round(cs.lower * g), round(cs.upper * g)) == (lo, hi)
        assert cs.valid == (lo < hi)
        if cs.valid:
            assert cs.upper - cs.lower >= 1 / g - 1e-15


def _run(cs: HedgedConfidenceSequence, rounds: list[tuple[float, float, float | None]]) -> None:
    for h, j, b in rounds:
        cs.update(h, j, b)


@pytest.mark.parametrize("bet", [BetConfig("wsr"), BetConfig(rule="up", c=0.75, up_grid=6),
                                 BetConfig("wsr", horizon=200)])
def test_json_round_trip_mid_stream(bet: BetConfig) -> None:
    rounds = _rounds(300, seed=11)
    a = HedgedConfidenceSequence(0.1, RHOS10[::3], bet, grid_size=60)
    _run(a, rounds[:120])
    state = a.to_state()
    text = json.dumps(state, allow_nan=False)
    b = HedgedConfidenceSequence.from_state(json.loads(text))
    assert b.to_state() == state
    np.testing.assert_array_equal(b._log_wealth, a._log_wealth)
    for h, j, bm in rounds[120:]:
        a.update(h, j, bm)
        b.update(h, j, bm)
        assert (a.lower, a.upper, a.valid, a.rounds) == (b.lower, b.upper, b.valid, b.rounds)
    assert a.to_state() == b.to_state()
    assert 0 < a.lower < a.upper < 1


def test_empty_intersection_is_invalid_and_frozen() -> None:
    # non-stationary stream (the guarantee's assumption fails): zeros, then ones
    cs = HedgedConfidenceSequence(0.5, np.array([0.0]), BetConfig("wsr"), grid_size=100)
    seen_invalid = False
    for t in range(600):
        cs.update(0.0 if t < 300 else 1.0, 0.5, None)
        if cs.valid:
            assert cs.upper - cs.lower >= 1 / 100 - 1e-15
        else:
            if not seen_invalid:
                frozen = (cs.lower, cs.upper)
                seen_invalid = True
            assert cs.lower >= cs.upper and (cs.lower, cs.upper) == frozen
    assert seen_invalid and cs.rounds == 600
    back = HedgedConfidenceSequence.from_state(json.loads(json.dumps(cs.to_state())))
    assert back.to_state() == cs.to_state() and not back.valid
    back.update(0.0, 0.0, None)
    assert back.rounds == 601 and (back.lower, back.upper) == frozen


@pytest.mark.parametrize("args", [(1.5, 0.0, None), (-0.1, 0.0, None), (0.0, 1.01, None),
                                  (0.0, 0.0, 2.0), (math.nan, 0.0, None), (0.0, math.inf, 0.5),
                                  (0.0, 0.0, -math.inf), ("0.5", 0.0, None), (True, 0.0, None)])
def test_out_of_range_inputs_raise(args: tuple[Any, Any, Any]) -> None:
    cs = HedgedConfidenceSequence(0.1, RHOS10, BetConfig("wsr"), grid_size=20)
    cs.update(0.2, 0.1, 0.3)
    before = cs.to_state()
    with pytest.raises(ValueError):
        cs.update(*args)
    assert cs.to_state() == before


@pytest.mark.parametrize("kwargs", [
    {"delta": 0.0}, {"delta": 1.0}, {"delta": math.nan}, {"rhos": np.array([])},
    {"rhos": np.array([-0.1, 0.5])}, {"rhos": np.array([0.5, 1.2])}, {"rhos": np.ones((2, 2))},
    {"grid_size": 1}, {"grid_size": 10.0}, {"bet": "wsr"},
])
def test_bad_constructor_arguments_raise(kwargs: dict[str, Any]) -> None:
    args: dict[str, Any] = {"delta": 0.1, "rhos": RHOS10, "bet": BetConfig("wsr"), "grid_size": 20}
    args.update(kwargs)
    with pytest.raises(ValueError):
        HedgedConfidenceSequence(**args)


def test_malformed_state_raises() -> None:
    cs = HedgedConfidenceSequence(0.1, RHOS10, BetConfig("wsr"), grid_size=20)
    _run(cs, _rounds(30, seed=2))
    good = cs.to_state()
    bad_states: list[Any] = [None, {}, {**good, "version": 2}, {**good, "lower_edge": 25},
                             {**good, "log_wealth": good["log_wealth"][:1]},
                             {**good, "wsr_dev": [0.0]}, {**good, "rounds": -1},
                             {**good, "upper_edge": good["lower_edge"]},
                             {k: v for k, v in good.items() if k != "wsr_total"}]
    for bad in bad_states:
        with pytest.raises(ValueError):
            HedgedConfidenceSequence.from_state(bad)


def test_initial_state_and_methods() -> None:
    for rhos in (np.array([0.0]), np.array([1.0]), RHOS10):
        cs = HedgedConfidenceSequence(0.1, rhos, BetConfig("wsr"))
        assert (cs.lower, cs.upper, cs.valid, cs.rounds) == (0.0, 1.0, True, 0)
        assert cs.tracked == (1, 999)
        cs.update(0.0, 1.0, 0.0)
        assert cs.rounds == 1 and cs.valid


@pytest.mark.parametrize(("rhos", "bet"), [
    (np.array([0.0]), BetConfig("wsr")), (RHOS10, BetConfig("wsr")),
    (RHOS10[::3], BetConfig("wsr", horizon=300)),
    (np.array([0.0, 1.0]), BetConfig(rule="up", up_grid=6)),
])
def test_bound_filter_is_exact(rhos: np.ndarray, bet: BetConfig,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    # the cheap per-round filter (_may_reject) skips only rounds in which the full-window
    # computation would not move a bound: states equal those of never skipping, bit for bit
    rounds = _rounds(700, seed=21, risk=0.25) + [(1.0, 1.0, None)] * 100  # drift at the end
    fast = HedgedConfidenceSequence(0.1, rhos, bet, grid_size=120)
    full = HedgedConfidenceSequence(0.1, rhos, bet, grid_size=120)
    monkeypatch.setattr(full, "_may_reject", lambda lw: True)
    skipped = 0
    for h, j, b in rounds:
        skipped += not fast._may_reject(fast._log_wealth)
        fast.update(h, j, b)
        full.update(h, j, b)
        assert (fast.lower, fast.upper, fast.valid) == (full.lower, full.upper, full.valid)
    assert fast.to_state() == full.to_state()
    assert skipped > (100 if bet.rule == "wsr" else 0)  # UP: a loose max bound
