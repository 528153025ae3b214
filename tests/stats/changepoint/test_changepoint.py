"""Tests of :mod:`changepoint`: exactness (online = batch, state round trips), validation, and
Monte Carlo checks of the guarantees and target delays with fixed seeds and Clopper-Pearson
bounds (each test well under a minute; vectorized over replications)."""

from __future__ import annotations

import json
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import pytest

from monitor.stats.changepoint import (
    DriftDetector,
    PPIRiskDetector,
    RiskIncreaseDetector,
    eb_band,
    ppi_views_batch,
    run_batch,
    run_drift_batch,
    threshold_from,
)
from tests.stats.binomial import clopper_pearson_lower, clopper_pearson_upper

ALPHA = 0.1
CONF = 0.999  # confidence of the Clopper-Pearson bounds used in assertions


def cp_upper(k: int, n: int, conf: float = CONF) -> float:
    return clopper_pearson_upper(k, n, conf)


def cp_lower(k: int, n: int, conf: float = CONF) -> float:
    return clopper_pearson_lower(k, n, conf)


# ------------------------------------------------------------------ stream generators
def judge_streams(seed: int, s: int, t: int, risk: np.ndarray, gamma: np.ndarray, r: int = 5):
    """Human loss hum, judge loss f (flipped w.p. 1 - gamma), mean b of r unaudited judge losses.

    ``risk`` and ``gamma`` have shape (t,) (per round).
    """
    rng = np.random.default_rng(seed)
    hum = (rng.random((s, t)) < risk[None, :]).astype(float)
    f = np.where(rng.random((s, t)) >= gamma[None, :], 1.0 - hum, hum)
    pf = risk * gamma + (1.0 - risk) * (1.0 - gamma)
    b = rng.binomial(r, np.broadcast_to(pf, (s, t))) / r
    return hum, f, b


def step(t: int, nu: int, before: float, after: float) -> np.ndarray:
    return np.where(np.arange(t) < nu, before, after)


def delays(alarm: np.ndarray, nu: int) -> np.ndarray:
    return np.where(alarm > nu, alarm - nu, np.inf)


# ------------------------------------------------------------------ configuration, exactness
def test_threshold_from():
    assert threshold_from() == 225000.0
    assert threshold_from(arl=4e5) == 4e5
    assert threshold_from(p=0.05, horizon=2000) == pytest.approx(40000.0)
    for bad in (dict(arl=1.0), dict(arl=float("nan")), dict(p=0.0), dict(p=1.5),
                dict(horizon=0), dict(arl=10.0, p=0.1)):
        with pytest.raises(ValueError):
            threshold_from(**bad)


@pytest.mark.parametrize("kind", ["sr", "cusum"])
def test_online_equals_batch_and_state_round_trip(kind):
    rng = np.random.default_rng(1)
    x = (rng.random((4, 700)) < step(700, 400, 0.05, 0.35)).astype(float)
    out = run_batch(x, ALPHA, kind=kind, arl=2e4)
    for s in range(4):
        det = RiskIncreaseDetector(ALPHA, kind=kind, arl=2e4)
        for t, v in enumerate(x[s]):
            if t == 350:  # checkpoint through JSON mid-stream
                det = RiskIncreaseDetector.from_state(json.loads(json.dumps(det.to_state())))
            det.update(float(v))
            if det.alarm:
                break
        assert (det.alarm_round or 0) == out["alarm_round"][s]
        assert (det.change_round or 0) == out["change_round"][s]
        if det.alarm and det.risk_after is not None:
            assert det.risk_after == pytest.approx(out["risk_after"][s])
            assert det.risk_before == pytest.approx(out["risk_before"][s])
    assert np.all(out["alarm_round"] > 400)


def test_ppi_online_equals_batch_and_state_round_trip():
    t_max, nu = 900, 500
    hum, f, b = judge_streams(2, 3, t_max, step(t_max, nu, 0.05, 0.3), np.full(t_max, 0.95))
    x, lo, rho = ppi_views_batch(hum, f, b)
    out = run_batch(x, ALPHA, lo, arl=1e4)
    for s in range(3):
        det = PPIRiskDetector(ALPHA, arl=1e4)
        for t in range(t_max):
            assert det.next_rho == rho[s, t]
            if t == 450:
                det = PPIRiskDetector.from_state(json.loads(json.dumps(det.to_state())))
            det.update(float(hum[s, t]), float(f[s, t]), float(b[s, t]))
        assert (det.alarm_round or 0) == out["alarm_round"][s]
        assert det.alarm_round is not None and det.alarm_round > nu


def test_missing_judge_values_use_labels_only():
    det = PPIRiskDetector(ALPHA, rho=0.5, arl=1e3)
    det.update(1.0)  # no f, b: q = hum
    ref = RiskIncreaseDetector(ALPHA, arl=1e3, views=2)
    ref.update([1.0, 1.0], [0.0, -0.5])
    assert det.statistic == pytest.approx(ref.statistic)


def test_validation_of_inputs_and_states():
    det = RiskIncreaseDetector(ALPHA)
    for bad in (float("nan"), -0.1):
        with pytest.raises(ValueError):
            det.update(bad)
    with pytest.raises(ValueError):
        det.update(0.5, lo=0.2)  # lo >= alpha
    for _ in range(5):
        det.update(0.3)
    good = det.to_state()
    RiskIncreaseDetector.from_state(good)
    corruptions = [
        ("kind", "other"), ("threshold", 0.5), ("rounds", -1), ("alarm_round", 99),
        ("log_sr", [float("nan")] * 8), ("log_cu", [50.0] * 8),  # CUSUM above SR
        ("log_sr", [-5.0] * 8), ("start", [0] * 8), ("start", [9] * 8),
        ("seg_sum", [float("inf")] * 8), ("fractions", [0.5, 1.2]), ("views", 0),
    ]
    for key, val in corruptions:
        bad = json.loads(json.dumps(good))
        bad[key] = val
        with pytest.raises(ValueError):
            RiskIncreaseDetector.from_state(bad)
    ppi = PPIRiskDetector(ALPHA)
    ppi.update(1.0, 1.0, 0.4)
    st = ppi.to_state()
    PPIRiskDetector.from_state(st)
    for key, val in (("moments", [1.0, 2.0, 0, 0, 0, 0, 0]), ("moments", [float("nan")] * 7),
                     ("rho", 1.5), ("halflife", -1.0)):
        bad = json.loads(json.dumps(st))
        bad[key] = val
        with pytest.raises(ValueError):
            PPIRiskDetector.from_state(bad)
    with pytest.raises(ValueError):
        ppi.update(1.2, 0.0, 0.0)
    drift = DriftDetector(warmup=10)
    for v in [0.0, -1.0, 1.0] * 5:
        drift.update(v)
    st = drift.to_state()
    assert DriftDetector.from_state(json.loads(json.dumps(st))).to_state() == st
    for key, val in (("band", [0.5, -0.5]), ("band", [-2.0, 0.0]), ("band", None),
                     ("warm_sums", [3.0] * 6), ("delta_ref", 0.0)):
        bad = json.loads(json.dumps(st))
        bad[key] = val
        with pytest.raises(ValueError):
            DriftDetector.from_state(bad)
    with pytest.raises(ValueError):
        drift.update(1.5)


# ------------------------------------------------------------------ false alarms (guarantee)
@pytest.mark.statistical
@pytest.mark.parametrize("kind", ["sr", "cusum"])
def test_false_alarm_at_null_boundary_labels_only(kind):
    """Risk exactly alpha, non-identical pre-change distributions: P(alarm by T) <= T / A."""
    s, t_max, p = 2000, 2000, 0.05
    rng = np.random.default_rng(3)
    bern = (rng.random((s, t_max)) < ALPHA).astype(float)  # mean alpha
    two_pt = 0.5 * (rng.random((s, t_max)) < 2 * ALPHA)  # values {0, 0.5}, mean alpha
    x = np.where(np.arange(t_max)[None, :] < t_max // 2, bern, two_pt)
    out = run_batch(x, ALPHA, kind=kind, p=p, horizon=t_max)
    k = int(np.sum(out["alarm_round"] > 0))
    assert cp_lower(k, s) <= p


@pytest.mark.statistical
def test_false_alarm_at_null_boundary_ppi_with_judge_drift():
    """Default PPI detector at risk = alpha while the judge degrades 0.99 -> 0.6."""
    s, t_max, p = 1000, 2000, 0.05
    hum, f, b = judge_streams(4, s, t_max, np.full(t_max, ALPHA), step(t_max, 1000, 0.99, 0.6))
    x, lo, _ = ppi_views_batch(hum, f, b)
    out = run_batch(x, ALPHA, lo, p=p, horizon=t_max)
    k = int(np.sum(out["alarm_round"] > 0))
    assert cp_lower(k, s) <= p


@pytest.mark.statistical
def test_healthy_models_rarely_alarm_default():
    """Target: at most 2% of healthy models (risk 0.05) alarm within 4500 labels."""
    s, t_max = 500, 4500
    hum, f, b = judge_streams(5, s, t_max, np.full(t_max, 0.05), np.full(t_max, 0.9))
    x, lo, _ = ppi_views_batch(hum, f, b)
    k = int(np.sum(run_batch(x, ALPHA, lo)["alarm_round"] > 0))
    assert cp_upper(k, s, 0.99) <= 0.02


# ------------------------------------------------------------------ detection (targets)
def _ppi_alarms(seed, s, nu, r1, gamma, post=1500, **kw):
    t_max = nu + post
    hum, f, b = judge_streams(seed, s, t_max, step(t_max, nu, 0.05, r1), np.full(t_max, gamma))
    x, lo, _ = ppi_views_batch(hum, f, b)
    return run_batch(x, ALPHA, lo, **kw), hum


@pytest.mark.statistical
def test_regression_detected_within_targets():
    """0.05 -> 0.20 after 3000 healthy labels, judge agreement 0.9 (defaults, no tuning)."""
    s, nu = 400, 3000
    out, _ = _ppi_alarms(6, s, nu, 0.20, 0.9)
    d = delays(out["alarm_round"], nu)
    assert np.sum(out["alarm_round"] == 0) + np.sum((out["alarm_round"] > 0)
                                                    & (out["alarm_round"] <= nu)) <= 2
    assert cp_lower(int(np.sum(d <= 300)), s) >= 0.5  # median <= 300
    assert cp_lower(int(np.sum(d <= 600)), s) >= 0.9  # p90 <= 600
    assert cp_upper(int(np.sum(d > 1500)), s) <= 0.05  # <= 5% undetected after 1500
    # change estimate near the true change round nu + 1
    ok = out["alarm_round"] > nu
    err = out["change_round"][ok] - (nu + 1)
    assert abs(float(np.median(err))) <= 50
    assert float(np.nanmedian(out["risk_before"][ok])) == pytest.approx(0.05, abs=0.01)


@pytest.mark.statistical
def test_delay_does_not_grow_with_healthy_period():
    meds = []
    for i, nu in enumerate((0, 3000)):
        out, _ = _ppi_alarms(7 + i, 300, nu, 0.20, 0.9)
        meds.append(float(np.median(delays(out["alarm_round"], nu))))
    assert abs(meds[0] - meds[1]) <= 40


def _labels_reference(hum, nu):
    """Labels-only e-CUSUM mixture at ARL 4e5: the reference (median ~290)."""
    return delays(run_batch(hum, ALPHA, kind="cusum", arl=4e5)["alarm_round"], nu)


@pytest.mark.statistical
def test_good_judge_beats_labels_only_reference():
    nu = 300
    out, hum = _ppi_alarms(8, 300, nu, 0.20, 0.99)
    ours = float(np.median(delays(out["alarm_round"], nu)))
    ref = float(np.median(_labels_reference(hum, nu)))
    assert 230 <= ref <= 350
    assert ours <= 0.6 * ref


@pytest.mark.statistical
@pytest.mark.parametrize("gamma", [0.6, 0.5])
def test_bad_judge_not_slower_than_labels_alone(gamma):
    nu, s = 300, 300
    out, hum = _ppi_alarms(9, s, nu, 0.20, gamma)
    ours = delays(out["alarm_round"], nu)
    labels_sr = delays(run_batch(hum, ALPHA)["alarm_round"], nu)  # same threshold, labels only
    assert float(np.median(ours)) <= float(np.median(labels_sr)) + 15
    assert float(np.median(ours)) <= float(np.median(_labels_reference(hum, nu)))


# ------------------------------------------------------------------ judge drift
@pytest.mark.statistical
@pytest.mark.parametrize("gamma", [0.99, 0.6])
def test_eb_band_coverage(gamma):
    s, w, delta = 4000, 500, 0.05
    hum, f, _ = judge_streams(10, s, w, np.full(w, 0.05), np.full(w, gamma))
    mu = 0.05 - (0.05 * gamma + 0.95 * (1 - gamma))  # E[hum - f]
    m_lo, m_hi = eb_band(hum - f, delta)
    miss = int(np.sum((mu < m_lo) | (mu > m_hi)))
    assert cp_lower(miss, s) <= delta


def test_drift_online_equals_batch():
    t_max = 1200
    hum, f, _ = judge_streams(11, 3, t_max, np.full(t_max, 0.05), step(t_max, 800, 0.99, 0.6))
    out = run_drift_batch(hum - f, warmup=300)
    for s in range(3):
        det = DriftDetector(warmup=300)
        for t in range(t_max):
            if t == 600:
                det = DriftDetector.from_state(json.loads(json.dumps(det.to_state())))
            det.update(float(hum[s, t] - f[s, t]))
        assert (det.alarm_round or 0) == out["alarm_round"][s]
        assert (det.change_round or 0) == out["change_round"][s]
        assert det.band == pytest.approx((out["m_lo"][s], out["m_hi"][s]))


@pytest.mark.statistical
@pytest.mark.parametrize(("g0", "g1", "sign"), [(0.99, 0.6, -1), (0.6, 0.99, 1)])
def test_judge_drift_detected(g0, g1, sign):
    s, tc, t_max = 300, 1500, 3000
    hum, f, _ = judge_streams(12, s, t_max, np.full(t_max, 0.05), step(t_max, tc, g0, g1))
    out = run_drift_batch(hum - f)  # defaults: W = 500, delta_ref = 0.01, A = 450000
    a = out["alarm_round"]
    assert int(np.sum((a > 0) & (a <= tc))) <= 1
    d = delays(a, tc)
    assert cp_lower(int(np.sum(d <= 150)), s) >= 0.9
    assert np.mean(out["direction"][a > tc] == sign) >= 0.95
    assert abs(float(np.median(out["change_round"][a > tc] - (tc + 1)))) <= 10
    # the disagreement rate |d| is the sharper signal for a quality change
    out_abs = run_drift_batch(np.abs(hum - f), 0.0, 1.0)
    assert np.median(delays(out_abs["alarm_round"], tc)) <= np.median(d)


@pytest.mark.statistical
def test_judge_drift_false_alarms():
    """Stable judge: P(false alarm within T post-warm-up rounds) <= delta_ref + T / A."""
    s, w, t_post = 600, 500, 4500
    for seed, gamma in ((13, 0.99), (14, 0.6)):
        t_max = w + t_post
        hum, f, _ = judge_streams(seed, s, t_max, np.full(t_max, 0.2), np.full(t_max, gamma))
        for x, lo, hi in ((hum - f, -1.0, 1.0), (np.abs(hum - f), 0.0, 1.0)):
            a = run_drift_batch(x, lo, hi, warmup=w, delta_ref=0.05, p=0.05,
                                horizon=t_post)["alarm_round"]
            assert cp_lower(int(np.sum(a > 0)), s) <= 0.10


def test_spawned_detectors_run_like_new_ones() -> None:
    """A detector spawned from a used one equals a new one, round after round."""
    import json

    from monitor.state.epochs import CertificateEpochs
    from monitor.state.judge_drift import JudgeDrift

    rng = np.random.default_rng(41)
    rounds = [(float(rng.random() < (0.05 if t < 300 else 0.4)), float(rng.random() < 0.1),
               float(rng.random() * 0.2)) for t in range(600)]
    used_e, used_j = CertificateEpochs.new(0.1, 2000.0), JudgeDrift.new(warmup=50)
    for h, f, b in rounds[:100]:
        used_e.update(h, f, b)
        used_j.update(h, f)
    e_s, e_f = used_e.spawn(), CertificateEpochs.new(0.1, 2000.0)
    j_s, j_f = used_j.spawn(), JudgeDrift.new(warmup=50)
    for h, f, b in rounds:
        e_s.update(h, f, b)
        e_f.update(h, f, b)
        j_s.update(h, f)
        j_f.update(h, f)
    assert json.dumps(e_s.to_dict()) == json.dumps(e_f.to_dict())
    assert json.dumps(j_s.to_dict()) == json.dumps(j_f.to_dict())
    assert e_s.regression is not None and e_s.regression.alarm  # the stream did something
    assert j_s.bias.band is not None
