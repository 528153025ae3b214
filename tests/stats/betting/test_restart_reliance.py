"""Restarting the reliance on the judge (after a judge-drift alarm) keeps the e-process valid.

The restart happens at a time fixed by past rounds only; the wealth reached so far is kept and a
fresh reliance is learned from the next round. Monte Carlo at the null boundary (risk = alpha),
with the restart at a random round, asserted with a Clopper-Pearson bound; plus exact checks of
the state round trip.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from monitor.stats.betting.bets import BetConfig
from monitor.stats.betting.risk_group import CertificateGroup
from tests.stats.binomial import clopper_pearson_lower

METHODS = ["r_eval", "r_autoeval", "r_autoeval_plus"]


@pytest.mark.parametrize("rule", ["plugin_up", "wsr"])
def test_restart_round_trips_and_keeps_the_e_value(rule: str) -> None:
    rng = np.random.default_rng(3)
    g = CertificateGroup(0.2, 0.1, METHODS, BetConfig(rule), n_rhos=5, cs_grid=None)
    for _ in range(150):
        h = float(rng.random() < 0.1)
        g.update(h, h if rng.random() < 0.9 else 1 - h, float(rng.random() < 0.1))
    before = {m: g[m].log_e_certify for m in METHODS}
    g.restart_reliance()
    after = {m: g[m].log_e_certify for m in METHODS}
    for m in METHODS:
        assert after[m] == pytest.approx(before[m], abs=1e-9)
    twin = CertificateGroup.from_state(json.loads(json.dumps(g.to_state())))
    for _ in range(100):
        h = float(rng.random() < 0.1)
        f, b = h if rng.random() < 0.9 else 1 - h, float(rng.random() < 0.1)
        g.update(h, f, b)
        twin.update(h, f, b)
    assert twin.to_state() == g.to_state()


@pytest.mark.statistical
def test_no_false_certification_with_restarts_at_the_null_boundary() -> None:
    alpha, delta, reps, rounds = 0.2, 0.1, 300, 400
    rng = np.random.default_rng(17)
    false_claims = 0
    for _ in range(reps):
        g = CertificateGroup(alpha, delta, ["r_autoeval_plus"], BetConfig(), cs_grid=None)
        restart_at = int(rng.integers(20, rounds))
        h = (rng.random(rounds) < alpha).astype(float)
        # the judge changes at the restart: agreement 0.95 -> 0.6
        agree = np.where(np.arange(rounds) < restart_at, 0.95, 0.6)
        f = np.where(rng.random(rounds) < agree, h, 1 - h)
        b = rng.binomial(5, np.where(np.arange(rounds) < restart_at, alpha * 0.95 + 0.8 * 0.05,
                                     alpha * 0.6 + 0.8 * 0.4)) / 5
        for i in range(rounds):
            if i == restart_at:
                g.restart_reliance()
            g.update(float(h[i]), float(f[i]), float(b[i]))
        false_claims += g["r_autoeval_plus"].certified_at_round is not None
    assert clopper_pearson_lower(false_claims, reps, 0.999) <= delta, false_claims
