"""Monte Carlo: the change detectors under ``audit_policy = "active"`` (uniform-share rounds).

Under an active audit the regression / improvement detectors take the units whose coin is below
the policy's smallest propensity ``pi_min`` (fixed from earlier units): those are audited
whatever their score, so they are a uniform random sample of the stream and the detectors keep
the uniform path's guarantee (false alarm within ``T`` rounds at most ``T / A``). Checked at
the null boundary with a judge that steers the active audits towards the failures; feeding the
detectors every audited unit instead fails the same check (the test can fail); and a jump of
the risk is detected (power).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from monitor.stats.betting.active import ActiveBatch
from monitor.stats.changepoint import PPIRiskDetector
from tests.stats.binomial import clopper_pearson_lower

REPS, UNITS, BUDGET, ARL = 300, 3000, 0.1, 1000.0
ALPHA = 0.106

Judge = Callable[[np.random.Generator, int, int], tuple[np.ndarray, np.ndarray]]


def steering(rng: np.random.Generator, n: int, t: int) -> tuple[np.ndarray, np.ndarray]:
    """Risk ALPHA; the judge is unsure (0.5: a large propensity) exactly on the failures."""
    human = (rng.random(n) < ALPHA).astype(float)
    return np.where(human == 1.0, 0.5, np.where(rng.random(n) < 0.9, 0.01, 0.95)), human


def calibrated(rng: np.random.Generator, n: int, t: int) -> tuple[np.ndarray, np.ndarray]:
    z = rng.random(n)
    f = np.where(z < 0.85, 0.01, np.where(z < 0.90, 0.95, 0.5))
    return f, (rng.random(n) < f).astype(float)


def regressing(rng: np.random.Generator, n: int, t: int) -> tuple[np.ndarray, np.ndarray]:
    """The calibrated judge's stream (risk 0.106); from unit 1000 on every unit fails w.p. 0.5+."""
    f, human = calibrated(rng, n, t)
    if t >= 1000:
        human = (rng.random(n) < np.maximum(f, 0.5)).astype(float)
    return f, human


def _simulate(judge: Judge, seed: int, units: int = UNITS) -> tuple[np.ndarray, ...]:
    """Run the active policy; per unit and copy: score, label, audited, in the uniform share."""
    rng = np.random.default_rng(seed)
    ab = ActiveBatch(BUDGET, [(ALPHA, "certify"), (ALPHA, "violate")], [0.05, 0.05], reps=REPS)
    f_all, h_all, aud, base = (np.zeros((units, REPS)) for _ in range(4))
    for t in range(units):
        pi_min = ab.pi_min.copy()  # the policy's, fixed before the unit
        f, human = judge(rng, REPS, t)
        coin = rng.random(REPS)
        aud[t] = ab.update(f, coin, human)
        base[t] = coin < pi_min
        f_all[t], h_all[t] = f, human
    return f_all, h_all, aud.astype(bool), base.astype(bool)


def _alarms(f: np.ndarray, h: np.ndarray, rounds: np.ndarray, alpha: float,
            flip: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """Feed each copy's rounds (mask ``rounds``) to a detector as the suite does.

    Returns the alarm unit per copy (-1: none), the rounds per copy and the most rounds.
    """
    at = np.full(REPS, -1)
    n = rounds.sum(0)
    for r in range(REPS):
        det = PPIRiskDetector(alpha, arl=ARL)
        block = [0.0, 0]
        for t in range(f.shape[0]):
            if not rounds[t, r]:
                block[0] += f[t, r]
                block[1] += 1
                continue
            b = block[0] / block[1] if block[1] else None
            hv, fv = float(h[t, r]), float(f[t, r])
            if flip:
                det.update(1.0 - hv, 1.0 - fv, None if b is None else 1.0 - b)
            else:
                det.update(hv, fv, b)
            block = [0.0, 0]
            if det.alarm:
                at[r] = t
                break
    return at, n, int(n.max())


@pytest.mark.statistical
@pytest.mark.parametrize("judge", [steering, calibrated])
def test_no_change_false_alarms_within_bound(judge: Judge) -> None:
    f, h, _, base = _simulate(judge, seed=29)
    for flip in (False, True):  # regression (risk above alpha), improvement (below)
        at, _, most = _alarms(f, h, base, 1.0 - ALPHA if flip else ALPHA, flip)
        k = int((at >= 0).sum())
        bound = most / ARL  # P(alarm within T rounds) <= T / A
        assert clopper_pearson_lower(k, REPS, 0.999) <= bound, (judge.__name__, flip, k, bound)


@pytest.mark.statistical
def test_every_audited_unit_would_raise_false_alarms() -> None:
    """The failures get the largest propensities: all audited units are not a uniform sample."""
    f, h, aud, _ = _simulate(steering, seed=29, units=1500)
    at, _, most = _alarms(f, h, aud, ALPHA, False)
    k = int((at >= 0).sum())
    assert clopper_pearson_lower(k, REPS, 0.999) > most / ARL, (k, most)


@pytest.mark.statistical
def test_a_regression_is_detected() -> None:
    f, h, _, base = _simulate(regressing, seed=30)
    at, _, _ = _alarms(f, h, base, 0.2, False)
    detected = (at >= 1000).sum()
    assert int(((at >= 0) & (at < 1000)).sum()) <= REPS // 20  # few alarms before the change
    assert clopper_pearson_lower(int(detected), REPS, 0.999) >= 0.9, int(detected)
