from __future__ import annotations

import json
import math

import numpy as np
import pytest

from monitor.stats.betting.autoeval import (
    advance_pair,
    check_round,
    effective_observations,
    method_rhos,
    one_sided_test,
    restore_test,
)
from monitor.stats.betting.bets import BetConfig
from monitor.stats.betting.eprocess import BettingEProcess


def _rounds(rng: np.random.Generator, n: int, p: float = 0.1, gamma: float = 0.9,
            empty: float = 0.1) -> list[tuple[float, float, float | None]]:
    out: list[tuple[float, float, float | None]] = []
    for _ in range(n):
        h = float(rng.random() < p)
        f = h if rng.random() < gamma else 1.0 - h
        b = None if rng.random() < empty else float(rng.binomial(10, 0.15) / 10)
        out.append((h, f, b))
    return out


def test_method_rhos() -> None:
    assert method_rhos("r_eval").tolist() == [0.0]
    assert method_rhos("r_autoeval").tolist() == [1.0]
    r = method_rhos("r_autoeval_plus")
    assert r.size == 10 and r[0] == 0.0 and r[-1] == 1.0
    assert np.allclose(np.diff(r), 1 / 9)
    with pytest.raises(ValueError):
        method_rhos("r_autoeval_plus", 1)
    with pytest.raises(ValueError):
        method_rhos("ppi")  # type: ignore[arg-type]


def test_effective_observations_values_and_range() -> None:
    rhos = method_rhos("r_autoeval_plus", 11)
    q = effective_observations(0.0, 1.0, 0.0, rhos)          # extreme low: -rho
    assert np.array_equal(q, -rhos)
    q = effective_observations(1.0, 0.0, 1.0, rhos)          # extreme high: 1 + rho
    assert np.array_equal(q, 1.0 + rhos)
    assert effective_observations(0.3, 0.9, None, rhos).tolist() == [0.3] * 11
    rng = np.random.default_rng(0)
    for _ in range(200):
        h, f, b = rng.random(3)
        q = effective_observations(h, f, b, rhos)
        assert np.all(q >= -rhos) and np.all(q <= 1 + rhos)
        assert q == pytest.approx(rhos * b + h - rhos * f, abs=1e-15)


@pytest.mark.parametrize("bad", [(1.5, 0.0, 0.0), (0.0, -0.1, 0.0), (0.0, 0.0, 2.0),
                                 (math.nan, 0.0, None), (0.0, math.inf, None)])
def test_out_of_range_inputs_raise(bad: tuple[float, float, float | None]) -> None:
    t = one_sided_test(0.1, 0.1, "certify", method_rhos("r_autoeval_plus"), BetConfig("wsr"))
    with pytest.raises(ValueError, match=r"must be a finite number in \[0, 1\]"):
        t.update(*bad)
    with pytest.raises(ValueError):
        check_round(*bad)
    assert t.rounds == 0


def test_constructor_validation() -> None:
    with pytest.raises(ValueError):
        one_sided_test(0.1, 0.1, "certify", [1.5], BetConfig("wsr"))
    with pytest.raises(ValueError):
        one_sided_test(0.0, 0.1, "certify", [0.0], BetConfig("wsr"))
    with pytest.raises(ValueError):
        one_sided_test(0.1, 0.1, "certify", [0.0, 1.0], BetConfig("wsr"),
                       initial_weights=[1.0, 0.0])


def test_mixture_equals_eq11_product_hand_example() -> None:
    # S = 2, rhos {0, 1}, three rounds; the product over rounds of sum_s w_{s,i} e_{s,i} with
    # w_{s,i} proportional to w_{s,0} E_{s,i-1} (eq. 11, 13) equals sum_s w_{s,0} E_{s,n} (eq. 25)
    w0 = [0.25, 0.75]
    t = one_sided_test(0.3, 0.1, "certify", [0.0, 1.0], BetConfig("wsr", horizon=10),
                     initial_weights=w0)
    rounds = [(0.0, 0.0, 0.2), (1.0, 1.0, 0.1), (0.0, 1.0, None)]
    prod = 1.0
    wealth = [1.0, 1.0]
    for h, f, b in rounds:
        lam = t.next_bets.tolist()
        q = [h, h + (0.0 if b is None else b - f)]
        e = [1 - lam[s] * (q[s] - 0.3) for s in range(2)]
        w = [w0[s] * wealth[s] / sum(w0[k] * wealth[k] for k in range(2)) for s in range(2)]
        assert t.rho_weights == pytest.approx(w, rel=1e-14)
        prod *= sum(w[s] * e[s] for s in range(2))
        wealth = [wealth[s] * e[s] for s in range(2)]
        t.update(h, f, b)
        assert math.exp(t.log_e) == pytest.approx(prod, rel=1e-13)
        assert math.exp(t.log_e) == pytest.approx(w0[0] * wealth[0] + w0[1] * wealth[1],
                                                  rel=1e-13)
        assert np.exp(t.log_e_per_rho) == pytest.approx(wealth, rel=1e-13)


def test_empty_block_is_human_loss_for_every_rho() -> None:
    rhos = method_rhos("r_autoeval_plus", 4)
    t = one_sided_test(0.2, 0.1, "certify", rhos, BetConfig("wsr"))
    ref = BettingEProcess(0.2, 0.1, "certify", -rhos, 1 + rhos, BetConfig("wsr"))
    for h in (0.0, 1.0, 0.25, 0.0):
        t.update(h, 1.0 - h, None)
        ref.update([h] * 4)
    assert np.array_equal(t.log_e_per_rho, ref.log_wealth)
    assert t.mean_per_rho.tolist() == [0.3125] * 4


def test_regret_bound_lemma1_and_weights() -> None:
    rng = np.random.default_rng(1)
    for rule in ("wsr", "up"):
        t = one_sided_test(0.15, 0.05, "certify", method_rhos("r_autoeval_plus"),
                         BetConfig(rule=rule, up_grid=16))
        for h, f, b in _rounds(rng, 400):
            t.update(h, f, b)
            assert t.rho_weights.sum() == pytest.approx(1.0)
            gap = float(t.log_e_per_rho.max()) - t.log_e
            assert -1e-12 <= gap <= math.log(10) + 1e-12
            assert t.max_log_e >= t.log_e


def test_crossing_round_and_max() -> None:
    t = one_sided_test(0.5, 0.1, "certify", method_rhos("r_autoeval_plus", 3), BetConfig("wsr"))
    history = []
    for _ in range(30):
        t.update(0.0, 0.0, 0.0)
        history.append(t.log_e)
    first = next(i for i, v in enumerate(history, 1) if v >= math.log(10))
    assert t.crossed_at_round == first
    assert t.max_log_e == max(history)
    assert t.log_threshold == -math.log(0.1)


def test_r_eval_ignores_the_judge() -> None:
    a = one_sided_test(0.2, 0.1, "violate", method_rhos("r_eval"), BetConfig("wsr"))
    b = one_sided_test(0.2, 0.1, "violate", method_rhos("r_eval"), BetConfig("wsr"))
    rng = np.random.default_rng(2)
    for h, f, bm in _rounds(rng, 100):
        a.update(h, f, bm)
        b.update(h, 1.0 - f, None)
    assert a.log_e == b.log_e and a.mean_human == b.mean_human


@pytest.mark.parametrize("rule", ["wsr", "up"])
def test_json_roundtrip_midstream_and_pair_identity(rule: str) -> None:
    rng = np.random.default_rng(3)
    rounds = _rounds(rng, 150)
    bet = BetConfig(rule=rule, up_grid=8)  # type: ignore[arg-type]
    rh = method_rhos("r_autoeval_plus")
    c1, v1, c2, v2 = (one_sided_test(0.12, 0.1, s, rh, bet)
                      for s in ("certify", "violate", "certify", "violate"))
    for h, f, b in rounds[:70]:
        advance_pair(c1, v1, h, f, b)
        c2.update(h, f, b)
        v2.update(h, f, b)
    c3 = restore_test(json.loads(json.dumps(c1.to_state())))
    v3 = restore_test(json.loads(json.dumps(v1.to_state())))
    for h, f, b in rounds[70:]:
        advance_pair(c1, v1, h, f, b)
        advance_pair(c3, v3, h, f, b)
        c2.update(h, f, b)
        v2.update(h, f, b)
        assert c1.log_e == c2.log_e == c3.log_e
        assert v1.log_e == v2.log_e == v3.log_e
    for a in (c2, c3):
        assert a.to_state() == c1.to_state()
        assert np.array_equal(a.rho_weights, c1.rho_weights)
    for a in (v2, v3):
        assert a.to_state() == v1.to_state()


def test_mean_per_rho_is_running_mean_of_q() -> None:
    rng = np.random.default_rng(4)
    rhos = method_rhos("r_autoeval_plus", 5)
    t = one_sided_test(0.2, 0.1, "certify", rhos, BetConfig("wsr"))
    qs = []
    for h, f, b in _rounds(rng, 50):
        t.update(h, f, b)
        qs.append(effective_observations(h, f, b, rhos))
    assert t.mean_per_rho == pytest.approx(np.mean(qs, axis=0), rel=1e-12)
