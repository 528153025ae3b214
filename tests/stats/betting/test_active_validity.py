"""Monte Carlo validity of the active-audit e-process at the null boundary (risk == alpha).

Both sides at once (certify and violate at the same alpha), three judges: calibrated,
miscalibrated (confident scores, constant failure rate) and adversarial (the judge is sure of
a pass exactly on the units that fail, so they get the smallest propensity). The false
certified and false violated rates must stay below delta (Clopper-Pearson upper bound).
A deliberately wrong bettor (labels weighted 1/b instead of 1/pi) must fail the same check:
the test can fail.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from monitor.stats.betting.active import ActiveBatch
from monitor.stats.betting.active_growth import bet_cap, solve_scale, uncertainty
from tests.stats.binomial import clopper_pearson_lower

REPS, UNITS, DELTA, BUDGET = 400, 2000, 0.1, 0.1
ALPHA = 0.85 * 0.01 + 0.05 * 0.95 + 0.10 * 0.5  # the calibrated judge's risk: 0.106

Judge = Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]


def _scores(rng: np.random.Generator, n: int) -> np.ndarray:
    z = rng.random(n)
    return np.where(z < 0.85, 0.01, np.where(z < 0.90, 0.95, 0.5))


def calibrated(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    f = _scores(rng, n)
    return f, (rng.random(n) < f).astype(float)


def miscalibrated(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    return _scores(rng, n), (rng.random(n) < ALPHA).astype(float)


def adversarial(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    human = (rng.random(n) < ALPHA).astype(float)
    sure_fail = np.where(rng.random(n) < 0.5, 0.5, 0.95)
    return np.where(human == 1.0, 0.001, sure_fail), human


def _run(judge: Judge, seed: int, batch: type[ActiveBatch] = ActiveBatch) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ab = batch(BUDGET, [(ALPHA, "certify"), (ALPHA, "violate")], [DELTA, DELTA], reps=REPS)
    for _ in range(UNITS):
        f, human = judge(rng, REPS)
        ab.update(f, rng.random(REPS), human)
    return ab.crossed.sum(-1)


@pytest.mark.statistical
@pytest.mark.parametrize("judge", [calibrated, miscalibrated, adversarial])
def test_null_boundary_both_sides(judge: Judge) -> None:
    certified, violated = _run(judge, seed=2029)
    for count in (certified, violated):  # a one-sided 99.9% lower bound must not pass delta
        assert clopper_pearson_lower(int(count), REPS, 0.999) < DELTA, (certified, violated)


class _Aggressive(ActiveBatch):
    """The most active policy (floor b/4, no uniform share) and half the cap bet at rho = 1."""

    def refit(self) -> None:
        super().refit()
        self.floor[:], self.m[:] = 0.25 * self.budget, 0.0
        w, fb, _ = self.estimates()
        self.k = solve_scale(w, uncertainty(fb), self.budget, self.floor, self.m)
        for j, (alpha, side) in enumerate(self.tests):
            self.rho[j] = 1.0
            self.lam[j] = 0.5 * np.asarray(bet_cap(alpha, 1.0, self.pi_min, side, self.c))[:, None]


class _NoIPW(_Aggressive):
    """Wrong on purpose: labels weighted 1/b and bets capped as if the audit were uniform."""

    def refit(self) -> None:
        super().refit()
        for j, (alpha, side) in enumerate(self.tests):
            self.lam[j] = 0.5 * bet_cap(alpha, 1.0, self.budget, side, self.c)

    def factors(self, f: np.ndarray, pi: np.ndarray, xi: np.ndarray,
                human: np.ndarray) -> np.ndarray:
        return super().factors(f, np.full_like(pi, self.budget), xi, human)


@pytest.mark.statistical
def test_aggressive_bets_stay_valid() -> None:
    for count in _run(adversarial, seed=7, batch=_Aggressive):
        assert clopper_pearson_lower(int(count), REPS, 0.999) < DELTA


@pytest.mark.statistical
def test_wrong_weights_fail() -> None:
    certified, _ = _run(adversarial, seed=2029, batch=_NoIPW)
    assert clopper_pearson_lower(int(certified), REPS, 0.999) > DELTA, certified
