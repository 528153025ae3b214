from __future__ import annotations

import json
import math

import numpy as np
import pytest

from monitor.stats.betting.bets import BetConfig, bet_cap, up_grid, wsr_bet, wsr_prior, wsr_scale


def test_betconfig_defaults_and_roundtrip() -> None:
    assert BetConfig() == BetConfig("plugin_up", c=0.95, up_grid=1000)
    cfg = BetConfig("wsr")
    assert (cfg.rule, cfg.c, cfg.horizon, cfg.up_grid) == ("wsr", 0.5, None, 1000)
    assert BetConfig("up").c == 0.5 and BetConfig("plugin_up", c=0.8).c == 0.8
    for c in (BetConfig(), BetConfig("wsr"), BetConfig(rule="up", c=0.75, up_grid=8),
              BetConfig("wsr", horizon=200)):
        assert BetConfig.from_dict(json.loads(json.dumps(c.to_dict()))) == c
    assert BetConfig.from_dict({"rule": "wsr", "c": None}) == BetConfig("wsr")
    assert BetConfig().confseq_config() == BetConfig("wsr")
    assert BetConfig("up").confseq_config() == BetConfig("up")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rule": "kelly"},
        {"c": 0.0},
        {"c": 1.0},
        {"c": 1.5},
        {"horizon": 0},
        {"horizon": 100},  # horizon is a WSR knob: the default rule refuses it
        {"rule": "up", "horizon": 100},
        {"horizon": 2.5},
        {"up_grid": 0},
        {"up_grid": True},
    ],
)
def test_betconfig_rejects_bad_values(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        BetConfig(**kwargs)  # type: ignore[arg-type]


def test_betconfig_from_dict_rejects_unknown_keys() -> None:
    with pytest.raises(ValueError, match="unknown"):
        BetConfig.from_dict({"rule": "wsr", "cap": 0.5})


def test_bet_cap_both_sides() -> None:
    assert bet_cap(0.12, 0.0, 1.0, "certify", 0.5) == 0.5 / 0.88
    assert bet_cap(0.12, 0.0, 1.0, "violate", 0.5) == 0.5 / 0.12
    assert bet_cap(0.12, -1.0, 2.0, "certify", 0.75) == 0.75 / 1.88
    assert bet_cap(0.12, -1.0, 2.0, "violate", 0.75) == 0.75 / 1.12
    with pytest.raises(ValueError):
        bet_cap(1.0, 0.0, 1.0, "certify", 0.5)


def test_wsr_prior_is_affine_equivariant() -> None:
    assert wsr_prior(0.0, 1.0) == (0.5, 0.25)
    # [-rho, 1 + rho]: midpoint 1/2, variance (1 + 2 rho)^2 / 4
    mu0, v0 = wsr_prior(-0.5, 1.5)
    assert (mu0, v0) == (0.5, 1.0)


def test_wsr_scale_forms() -> None:
    lid = math.log(20.0)
    assert wsr_scale(lid, 1, None) == 2 * lid / (1 * math.log(2.0))
    assert wsr_scale(lid, 7, None) == 2 * lid / (7 * math.log(8.0))
    assert wsr_scale(lid, 7, 50) == 2 * lid / 50
    assert wsr_scale(lid, 5000, 50) == 2 * lid / 50


def test_wsr_bet_hand_values() -> None:
    cfg = BetConfig("wsr", horizon=100)
    k = 2 * math.log(10.0) / 100
    # round 1: sigma_0^2 = 1/4
    assert wsr_bet([], 0.5, 0.1, 0.0, 1.0, "certify", cfg) == pytest.approx(math.sqrt(k / 0.25))
    # after q_1 = 1: mu_1 = (1/2 + 1) / 2 = 3/4, sigma_1^2 = (1/4 + 1/16) / 2 = 5/32
    assert wsr_bet([1.0], 0.5, 0.1, 0.0, 1.0, "certify", cfg) == pytest.approx(
        math.sqrt(k / (5 / 32)))
    # anytime form at round 1 is capped: sqrt(2 log 10 / (1/4 log 2)) > 1 = c / (1 - 1/2)
    assert wsr_bet([], 0.5, 0.1, 0.0, 1.0, "violate", BetConfig("wsr")) == 1.0


def test_up_grid_masses() -> None:
    u, logw = up_grid(2)
    assert u.tolist() == [0.25, 0.75]
    assert np.exp(logw) == pytest.approx([0.5, 0.5])
    u, logw = up_grid(64)
    w = np.exp(logw)
    assert w.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(np.diff(u) > 0) and u[0] > 0 and u[-1] < 1
    # arcsine law is symmetric and heavier at the ends
    assert w == pytest.approx(w[::-1], rel=1e-9)
    assert w[0] > w[len(w) // 2]
    with pytest.raises(ValueError):
        up_grid(0)
