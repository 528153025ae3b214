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

from monitor.stats.betting.active import ActiveBatch, mix
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
    return np.asarray(ab.crossed.sum(-1))


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


class _Delayed(ActiveBatch):
    """Labels of failures arrive ``DELAY`` units late (passes at once): value-dependent delays.

    The bets learn only from arrived labels; every claim counts the pending failures at each
    test's worst label (``ActiveAudit``'s rule, vectorized with a ring of pending factors).
    """

    DELAY = 300

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.ring_worst = np.zeros((self.DELAY, *self.logw.shape))
        self.ring_true = np.zeros_like(self.ring_worst)
        self.ring_f = np.zeros((self.DELAY, self.reps))
        self.ring_on = np.zeros((self.DELAY, self.reps))
        self.pend = np.zeros_like(self.logw)

    def update(self, f: np.ndarray, coin: np.ndarray, human: np.ndarray) -> np.ndarray:
        slot = self.n % self.DELAY
        on = self.ring_on[slot]  # a delayed label arrives now: its true factor replaces
        self.logw += on[None, :, None] * self.ring_true[slot]  # its worst in the claim
        self.pend -= on[None, :, None] * self.ring_worst[slot]
        self.learn(self.ring_f[slot], np.ones(self.reps), on)
        pi = self.propensities(f)
        xi = (coin < pi).astype(float)
        true = self.factors(f, pi, xi, human)
        worst = np.stack([self.factors(f, pi, xi, np.full(self.reps, 1.0 if s == "certify"
                                                          else 0.0))[j]
                          for j, (_, s) in enumerate(self.tests)])
        late = xi * (human == 1.0)
        self.logw += np.where(late[None, :, None] == 1.0, 0.0, true)
        self.pend += late[None, :, None] * worst
        self.ring_true[slot], self.ring_worst[slot] = true, worst
        self.ring_f[slot], self.ring_on[slot] = f, late
        self.learn(f, human, xi * (1.0 - late))
        self.observe(f)
        new = (mix(self.logw + self.pend) >= self.log_threshold[:, None]) & ~self.crossed
        self.crossed |= new
        return xi


@pytest.mark.statistical
def test_value_dependent_delays_stay_valid() -> None:
    for count in _run(adversarial, seed=11, batch=_Delayed):
        assert clopper_pearson_lower(int(count), REPS, 0.999) < DELTA


class _DelayedIgnored(_Delayed):
    """Wrong on purpose: claims leave the pending units out (as if their factor were 1)."""

    def update(self, f: np.ndarray, coin: np.ndarray, human: np.ndarray) -> np.ndarray:
        xi = super().update(f, coin, human)
        self.crossed |= mix(self.logw) >= self.log_threshold[:, None]
        return xi


@pytest.mark.statistical
def test_ignoring_pending_labels_fails() -> None:
    certified, _ = _run(adversarial, seed=11, batch=_DelayedIgnored)
    assert clopper_pearson_lower(int(certified), REPS, 0.999) > DELTA, certified
