from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from monitor.stats.betting.bets import BetConfig, Side, bet_cap, up_grid
from monitor.stats.betting.eprocess import BettingEProcess

# ---------------------------------------------------------------- batch references (cumsum)


def wsr_batch(q: np.ndarray, alpha: float, delta: float, lo: float, hi: float, side: Side,
              bet: BetConfig) -> tuple[np.ndarray, np.ndarray]:
    """Bets lam_1..lam_{n+1} and log wealth after rounds 1..n, paper eq. (20)-(21)."""
    n = q.size
    mu0, v0 = 0.5 * (lo + hi), 0.25 * (hi - lo) ** 2
    j = np.arange(1, n + 1)
    mu = (mu0 + np.cumsum(q)) / (j + 1)                        # mu_j, includes q_j
    dev = np.concatenate([[0.0], np.cumsum((q - mu) ** 2)])    # sum_{j < i}, i = 1..n+1
    i = np.arange(1, n + 2)
    sig2 = (v0 + dev) / i                                      # sigma^2_{i-1}
    lid = math.log(1 / delta)
    if bet.horizon is None:
        k = 2 * lid / (i * np.log1p(i))
    else:
        k = np.full(n + 1, 2 * lid / bet.horizon)
    lam = np.minimum(bet_cap(alpha, lo, hi, side, bet.c), np.sqrt(k / sig2))
    g = alpha - q if side == "certify" else q - alpha
    return lam, np.cumsum(np.log1p(lam[:n] * g))


def up_batch(q: np.ndarray, alpha: float, lo: float, hi: float, side: Side,
             bet: BetConfig) -> tuple[np.ndarray, np.ndarray]:
    """Effective bets for rounds 1..n+1 and mixture log wealth after rounds 1..n."""
    frac, logp = up_grid(bet.up_grid)
    lam = bet_cap(alpha, lo, hi, side, 1.0) * frac  # UP spans the whole range [0, 1/(M-alpha))
    g = alpha - q if side == "certify" else q - alpha
    logw = np.vstack([np.zeros(lam.size), np.cumsum(np.log1p(np.outer(g, lam)), axis=0)])
    v = logw + logp
    m = v.max(axis=1, keepdims=True)
    e = np.exp(v - m)
    log_e = (m[:, 0] + np.log(e.sum(axis=1)))
    eff = (e * lam).sum(axis=1) / e.sum(axis=1)
    return eff, log_e[1:]


def run(ep: BettingEProcess, qs: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    bets, logw = [ep.next_bets], []
    for row in qs:
        ep.update(row)
        bets.append(ep.next_bets)
        logw.append(ep.log_wealth)
    return bets, logw


RANGES = [(0.0, 1.0), (-0.5, 1.5), (-1.0, 2.0)]


def _obs(rng: np.random.Generator, n: int) -> np.ndarray:
    cols = [rng.uniform(lo, hi, n) if k % 2 else np.clip(rng.binomial(1, 0.1, n) + 0.0, lo, hi)
            for k, (lo, hi) in enumerate(RANGES)]
    return np.column_stack(cols)


# ---------------------------------------------------------------- hand-computed values


def test_hand_values_wsr_fixed_horizon() -> None:
    k = 2 * math.log(10.0) / 100
    ep = BettingEProcess(0.5, 0.1, "certify", [0.0], [1.0], BetConfig("wsr", horizon=100))
    lam1 = math.sqrt(k / 0.25)                              # = 0.42919...
    assert ep.next_bets[0] == pytest.approx(lam1, rel=1e-15)
    assert lam1 == pytest.approx(0.4291932, abs=1e-7)
    ep.update([1.0])                                        # factor 1 - lam1 * (1 - 1/2)
    assert ep.log_wealth[0] == pytest.approx(math.log(1 - lam1 / 2), rel=1e-15)
    lam2 = math.sqrt(k / (5 / 32))                          # mu_1 = 3/4, sigma_1^2 = 5/32
    assert ep.next_bets[0] == pytest.approx(lam2, rel=1e-15)
    ep.update([0.0])                                        # factor 1 + lam2 / 2
    assert ep.log_wealth[0] == pytest.approx(
        math.log(1 - lam1 / 2) + math.log(1 + lam2 / 2), rel=1e-14)
    assert ep.rounds == 2


def test_hand_values_violate_capped() -> None:
    # anytime WSR bets start capped: c / (alpha - m) = 0.5 / 0.5 = 1
    ep = BettingEProcess(0.5, 0.1, "violate", [0.0], [1.0], BetConfig("wsr"))
    assert ep.next_bets[0] == 1.0
    ep.update([1.0])                                        # factor 1 + 1 * (1 - 1/2)
    assert ep.log_wealth[0] == math.log(1.5)


def test_hand_values_up() -> None:
    # grid {1/4, 3/4} x full range 1/(1 - 1/2) = {1/2, 3/2}, arcsine masses 1/2 each
    ep = BettingEProcess(0.5, 0.1, "certify", [0.0], [1.0], BetConfig(rule="up", up_grid=2))
    assert ep.next_bets[0] == pytest.approx(1.0)
    ep.update([0.0])                                        # wealths 1.25, 1.75 -> 1.5
    assert ep.log_wealth[0] == pytest.approx(math.log(1.5), rel=1e-14)
    # effective bet = (1.25 * 1/2 + 1.75 * 3/2) / 3 = 13/12
    assert ep.next_bets[0] == pytest.approx(13 / 12, rel=1e-14)


# ---------------------------------------------------------------- streaming == batch


@pytest.mark.parametrize("side", ["certify", "violate"])
@pytest.mark.parametrize("horizon", [None, 60])
def test_wsr_streaming_equals_batch_every_prefix(side: Side, horizon: int | None) -> None:
    rng = np.random.default_rng(1)
    qs = _obs(rng, 120)
    alpha, delta = 0.3, 0.05
    bet = BetConfig("wsr", horizon=horizon)
    lo, hi = [r[0] for r in RANGES], [r[1] for r in RANGES]
    bets, logw = run(BettingEProcess(alpha, delta, side, lo, hi, bet), qs)
    for s, (a, b) in enumerate(RANGES):
        lam, lw = wsr_batch(qs[:, s], alpha, delta, a, b, side, bet)
        np.testing.assert_allclose([x[s] for x in bets], lam, rtol=1e-12)
        np.testing.assert_allclose([x[s] for x in logw], lw, rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("side", ["certify", "violate"])
def test_up_streaming_equals_batch_every_prefix(side: Side) -> None:
    rng = np.random.default_rng(2)
    qs = _obs(rng, 120)
    alpha = 0.3
    bet = BetConfig(rule="up", up_grid=16, c=0.75)
    lo, hi = [r[0] for r in RANGES], [r[1] for r in RANGES]
    bets, logw = run(BettingEProcess(alpha, 0.1, side, lo, hi, bet), qs)
    for s, (a, b) in enumerate(RANGES):
        eff, lw = up_batch(qs[:, s], alpha, a, b, side, bet)
        np.testing.assert_allclose([x[s] for x in bets], eff, rtol=1e-12)
        np.testing.assert_allclose([x[s] for x in logw], lw, rtol=1e-11, atol=1e-13)


def test_up_effective_bet_reproduces_mixture_wealth() -> None:
    # E_{t+1} = E_t (1 - lam_eff (q - alpha)): UP is a betting strategy with bet lam_eff
    rng = np.random.default_rng(3)
    ep = BettingEProcess(0.2, 0.1, "certify", [0.0], [1.0], BetConfig(rule="up", up_grid=32))
    manual = 0.0
    for q in rng.uniform(0, 1, 200):
        manual += math.log1p(-ep.next_bets[0] * (q - 0.2))
        ep.update([q])
    assert ep.log_wealth[0] == pytest.approx(manual, rel=1e-10)


# ---------------------------------------------------------------- predictability


@pytest.mark.parametrize("rule", ["wsr", "up"])
@pytest.mark.parametrize("side", ["certify", "violate"])
def test_bets_do_not_depend_on_future_observations(rule: str, side: Side) -> None:
    rng = np.random.default_rng(4)
    qs = _obs(rng, 60)
    lo, hi = [r[0] for r in RANGES], [r[1] for r in RANGES]
    bet = BetConfig(rule=rule, up_grid=8)  # type: ignore[arg-type]
    base_bets, base_logw = run(BettingEProcess(0.3, 0.1, side, lo, hi, bet), qs)
    for j in (0, 17, 59):
        alt = qs.copy()
        alt[j] = [hi_ - (x - lo_) for x, lo_, hi_ in zip(alt[j], lo, hi, strict=True)]
        bets, logw = run(BettingEProcess(0.3, 0.1, side, lo, hi, bet), alt)
        # bets for rounds 1..j+1 only use q_1..q_j: unchanged, bit for bit
        for i in range(j + 1):
            assert np.array_equal(bets[i], base_bets[i])
        for i in range(j):
            assert np.array_equal(logw[i], base_logw[i])
        assert not np.array_equal(logw[j], base_logw[j])


@pytest.mark.parametrize("rule", ["wsr", "up"])
def test_bets_nonnegative_and_capped(rule: str) -> None:
    rng = np.random.default_rng(5)
    qs = _obs(rng, 300)
    lo, hi = [r[0] for r in RANGES], [r[1] for r in RANGES]
    for side in ("certify", "violate"):
        ep = BettingEProcess(0.3, 0.01, side, lo, hi, BetConfig(rule=rule, c=0.75))  # type: ignore[arg-type]
        # WSR: capped at c; UP: below the whole range 1/(M - alpha) (grid midpoints)
        caps = np.array([bet_cap(0.3, a, b, side, 0.75 if rule == "wsr" else 1.0)
                         for a, b in RANGES])
        for row in qs:
            assert np.all(ep.next_bets >= 0) and np.all(ep.next_bets <= caps)
            assert rule == "wsr" or np.all(ep.next_bets < caps)
            ep.update(row)


# ---------------------------------------------------------------- state


def _json(d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(d, allow_nan=False))
    return out


@pytest.mark.parametrize("rule", ["wsr", "up"])
@pytest.mark.parametrize("side", ["certify", "violate"])
def test_json_roundtrip_midstream_continues_identically(rule: str, side: Side) -> None:
    rng = np.random.default_rng(6)
    qs = _obs(rng, 80)
    lo, hi = [r[0] for r in RANGES], [r[1] for r in RANGES]
    a = BettingEProcess(0.3, 0.1, side, lo, hi, BetConfig(rule=rule, up_grid=8))  # type: ignore[arg-type]
    for row in qs[:37]:
        a.update(row)
    b = BettingEProcess.from_state(_json(a.to_state()))
    assert b.to_state() == a.to_state()
    for row in qs[37:]:
        a.update(row)
        b.update(row)
        assert np.array_equal(a.log_wealth, b.log_wealth)
        assert np.array_equal(a.next_bets, b.next_bets)
    assert a.to_state() == b.to_state()


def test_from_state_rejects_foreign_dict() -> None:
    with pytest.raises(ValueError):
        BettingEProcess.from_state({"kind": "something else"})


# ---------------------------------------------------------------- errors


def test_out_of_range_and_bad_inputs_raise() -> None:
    ep = BettingEProcess(0.3, 0.1, "certify", [0.0, -1.0], [1.0, 2.0], BetConfig("wsr"))
    with pytest.raises(ValueError, match=r"q\[0\]=1.5 outside its range \[0.0, 1.0\]"):
        ep.update([1.5, 1.5])
    with pytest.raises(ValueError, match="outside"):
        ep.update([0.5, -1.01])
    with pytest.raises(ValueError, match="finite"):
        ep.update([math.nan, 0.0])
    with pytest.raises(ValueError, match="shape"):
        ep.update([0.5])
    assert ep.rounds == 0 and np.array_equal(ep.log_wealth, [0.0, 0.0])
    with pytest.raises(ValueError, match="strictly inside"):
        BettingEProcess(1.0, 0.1, "certify", [0.0], [1.0], BetConfig("wsr"))
    with pytest.raises(ValueError, match="delta"):
        BettingEProcess(0.5, 1.0, "certify", [0.0], [1.0], BetConfig("wsr"))
    with pytest.raises(ValueError, match="side"):
        BettingEProcess(0.5, 0.1, "up", [0.0], [1.0], BetConfig("wsr"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="same length"):
        BettingEProcess(0.5, 0.1, "certify", [0.0, 0.0], [1.0], BetConfig("wsr"))


def test_twins_bit_identical_to_separate_updates() -> None:
    rng = np.random.default_rng(7)
    qs = _obs(rng, 100)
    lo, hi = [r[0] for r in RANGES], [r[1] for r in RANGES]
    c1, v1, c2, v2 = (BettingEProcess(0.3, 0.1, s, lo, hi, BetConfig("wsr"))
                      for s in ("certify", "violate", "certify", "violate"))
    assert c1.is_twin_of(v1) and not c1.is_twin_of(c2)
    for row in qs:
        c1.advance_twins(v1, row.tolist())
        c2.update(row)
        v2.update(row)
    assert c1.to_state() == c2.to_state() and v1.to_state() == v2.to_state()
