from __future__ import annotations

import json
import math

import numpy as np
import pytest

from monitor.stats.betting.autoeval import method_rhos, one_sided_test
from monitor.stats.betting.bets import BetConfig
from monitor.stats.betting.risk import RiskMonitor

Round = tuple[float, float, float | None]


def _stream(seed: int, n: int, p: float, gamma: float = 0.9) -> list[Round]:
    rng = np.random.default_rng(seed)
    out: list[Round] = []
    for _ in range(n):
        h = float(rng.random() < p)
        f = h if rng.random() < gamma else 1.0 - h
        b = None if rng.random() < 0.05 else float(rng.binomial(10, 0.18) / 10)
        out.append((h, f, b))
    return out


@pytest.mark.parametrize("method", ["r_eval", "r_autoeval", "r_autoeval_plus"])
@pytest.mark.parametrize("rule", ["wsr", "up"])
def test_matches_two_autoeval_tests(method: str, rule: str) -> None:
    bet = BetConfig(rule=rule, up_grid=8)  # type: ignore[arg-type]
    m = RiskMonitor(0.15, 0.1, method, bet, n_rhos=6, cs_grid=None, threshold_delta=0.05)
    rh = method_rhos(method, 6)  # type: ignore[arg-type]
    c = one_sided_test(0.15, 0.05, "certify", rh, bet)
    v = one_sided_test(0.15, 0.05, "violate", rh, bet)
    for h, f, b in _stream(0, 300, 0.1):
        m.update(h, f, b)
        c.update(h, f, b)
        v.update(h, f, b)
        assert m.log_e_certify == c.log_e and m.log_e_violate == v.log_e
    assert m.certified_at_round == c.crossed_at_round
    assert m.log_threshold == -math.log(0.05)
    assert np.array_equal(m.rho_weights, c.rho_weights)
    assert np.array_equal(m.rhos, rh)


def test_defaults_and_status_pending() -> None:
    m = RiskMonitor(0.2, 0.1, "r_eval", BetConfig("wsr"), cs_grid=None)
    assert m.threshold_delta == 0.1 and m.log_threshold == -math.log(0.1)
    assert m.status == "pending" and m.rounds == 0
    assert math.isnan(m.risk_estimate) and math.isnan(m.judge_bias)
    assert (m.cs_lower, m.cs_upper, m.cs_valid) == (0.0, 1.0, True)
    assert m.rho_weights.tolist() == [1.0]


def status_of(m: RiskMonitor) -> str:  # defeats mypy's narrowing of the property
    return m.status


def test_certified_then_violated_wins() -> None:
    m = RiskMonitor(0.5, 0.1, "r_eval", BetConfig("wsr"), cs_grid=None)
    for _ in range(40):
        m.update(0.0, 0.0, None)
    assert m.status == "certified"
    cert = m.certified_at_round
    assert cert is not None and m.violated_at_round is None
    for _ in range(400):
        m.update(1.0, 1.0, None)
    assert status_of(m) == "violated"
    assert m.certified_at_round == cert                      # sticky
    assert m.violated_at_round is not None and m.violated_at_round > cert


def test_risk_estimate_and_judge_bias() -> None:
    rounds = _stream(1, 500, 0.1)
    hum = np.array([r[0] for r in rounds])
    jud = np.array([r[1] for r in rounds])
    m = RiskMonitor(0.2, 0.1, "r_eval", BetConfig("wsr"), cs_grid=None)
    p = RiskMonitor(0.2, 0.1, "r_autoeval_plus", BetConfig("wsr"), cs_grid=None)
    for h, f, b in rounds:
        m.update(h, f, b)
        p.update(h, f, b)
    assert m.risk_estimate == pytest.approx(hum.mean(), rel=1e-12)
    assert m.judge_bias == pytest.approx((jud - hum).mean(), abs=1e-12)
    ct = p.certify_test
    assert p.risk_estimate == pytest.approx(float(ct.rho_weights @ ct.mean_per_rho), rel=1e-12)
    assert abs(p.risk_estimate - 0.1) < 0.05


def test_invalid_arguments_and_inputs() -> None:
    for kwargs in ({"alpha": 0.0}, {"delta": 1.0}, {"threshold_delta": 0.0},
                   {"method": "eval"}):
        args = {"alpha": 0.1, "delta": 0.1, "method": "r_eval", "bet": BetConfig("wsr"),
                "cs_grid": None} | kwargs
        with pytest.raises(ValueError):
            RiskMonitor(**args)  # type: ignore[arg-type]
    m = RiskMonitor(0.1, 0.1, "r_autoeval", BetConfig("wsr"), cs_grid=None)
    with pytest.raises(ValueError, match="human_loss"):
        m.update(1.2, 0.0, 0.0)
    with pytest.raises(ValueError, match="block_mean"):
        m.update(0.2, 0.0, -0.5)
    assert m.rounds == 0


@pytest.mark.parametrize("rule", ["wsr", "up"])
@pytest.mark.parametrize("cs_grid", [None, 50])
def test_json_roundtrip_midstream_bit_identical(rule: str, cs_grid: int | None) -> None:
    bet = BetConfig(rule=rule, up_grid=8)  # type: ignore[arg-type]
    rounds = _stream(2, 200, 0.1)
    a = RiskMonitor(0.12, 0.1, "r_autoeval_plus", bet, n_rhos=5, cs_grid=cs_grid)
    ref = RiskMonitor(0.12, 0.1, "r_autoeval_plus", bet, n_rhos=5, cs_grid=cs_grid)
    for h, f, b in rounds[:90]:
        a.update(h, f, b)
        ref.update(h, f, b)
    blob = json.dumps(a.to_state(), allow_nan=False)
    b_ = RiskMonitor.from_state(json.loads(blob))
    for h, f, b in rounds[90:]:
        ref.update(h, f, b)
        b_.update(h, f, b)
    assert b_.to_state() == ref.to_state()
    for attr in ("log_e_certify", "log_e_violate", "risk_estimate", "judge_bias", "cs_lower",
                 "cs_upper", "cs_valid", "status", "certified_at_round", "violated_at_round"):
        assert getattr(b_, attr) == getattr(ref, attr), attr


def test_with_confidence_sequence_smoke() -> None:
    m = RiskMonitor(0.12, 0.1, "r_autoeval_plus", BetConfig("wsr"), cs_grid=200)
    for h, f, b in _stream(3, 400, 0.1, gamma=0.95):
        m.update(h, f, b)
    assert m.cs_valid and 0.0 <= m.cs_lower < m.cs_upper <= 1.0
    assert m.cs_upper - m.cs_lower < 1.0


def test_from_state_rejects_foreign_dict() -> None:
    with pytest.raises(ValueError):
        RiskMonitor.from_state({"kind": "x", "version": 1})
