from __future__ import annotations

import json

import numpy as np
import pytest

from monitor.stats.pulse.aipw import AIPWEstimator
from monitor.stats.pulse.aipw_plan import step3_lambda

N = 40
B = 4
PULLS = 6  # per model; 24 of 40 examples


def _scores() -> np.ndarray:
    rng = np.random.default_rng(123)
    return np.stack([(rng.random(N) < 0.7).astype(float), (rng.random(N) < 0.4).astype(float)])


def _predictions(s: np.ndarray, est: AIPWEstimator, rng: np.random.Generator) -> np.ndarray:
    """Informative, biased and data-dependent 'refit': changes after every completed pull, and
    systematically (less shrinkage as data accumulate), as a real refit does."""
    drift = np.nan_to_num(est.observed_means, nan=0.5)[:, None] - 0.5
    growth = 0.4 * est.n_observed.sum() / (2 * N)
    noise = 0.1 * rng.standard_normal(s.shape)
    return np.clip(0.6 * s + 0.05 + growth + 0.8 * drift + noise, 0.01, 0.99)


def _simulate(rule: str, reps: int, seed: int):
    """Adaptive selection + refit after every pull. Returns per-(rep, model, k) errors of three
    estimators: the correct one and two deliberately broken ones (power checks)."""
    s = _scores()
    mu = s.mean(axis=1)
    err = np.full((3, reps, 2, PULLS), np.nan)
    for r in range(reps):
        rng = np.random.default_rng([seed, r])
        est = AIPWEstimator(2, N, lambda_rule=rule)  # type: ignore[arg-type]
        pred = _predictions(s, est, rng)
        old_pred = pred.copy()
        while True:
            pulls = est.pulls
            open_ = np.flatnonzero(pulls < PULLS)
            if open_.size == 0:
                break
            # data-dependent selection: higher current AIPW estimate + noise
            score = np.nan_to_num(est.estimates, nan=1.0)[open_] + 0.2 * rng.random(open_.size)
            i = int(open_[np.argmax(score)])
            k = int(pulls[i])
            unobs = ~est.mask[i]
            plan = est.plan(i, B, rng, predictions=pred[i], step=r)
            batch = s[i, list(plan.examples)]
            theta = est.complete(plan, batch)
            err[0, r, i, k] = theta - mu[i]
            # broken 1 ("stale sums"): F from the predictions before the latest refit
            f_old = float(old_pred[i][unobs].sum())
            resid = batch - plan.lam * np.asarray(plan.pred_batch)
            z = plan.n_unobserved / B * float(resid.sum())
            err[1, r, i, k] = (plan.observed_sum + plan.lam * f_old + z) / N - mu[i]
            # broken 2 ("peeking"): predictions refit on the batch itself (memorized)
            z2 = plan.n_unobserved / B * float((batch - plan.lam * batch).sum())
            err[2, r, i, k] = (plan.observed_sum + plan.lam * plan.pred_sum + z2) / N - mu[i]
            old_pred = pred
            pred = _predictions(s, est, rng)
    return err


def _zscores(e: np.ndarray) -> np.ndarray:
    out = []
    for i in range(e.shape[1]):
        for k in range(e.shape[2]):
            x = e[:, i, k]
            x = x[np.isfinite(x)]
            if x.size > 50:
                out.append(x.mean() / (x.std(ddof=1) / np.sqrt(x.size) + 1e-15))
    return np.asarray(out)


@pytest.mark.statistical
@pytest.mark.parametrize("rule", ["paper", "regression"])
def test_unbiased_across_refits_and_adaptive_selection(rule):
    err = _simulate(rule, reps=1000, seed=11)
    z = _zscores(err[0])
    assert z.size >= 10
    # 12 cells, each |z| < 4 has P ~ 6e-5 under the null: family error < 1e-3.
    assert np.abs(z).max() < 4.0, z
    # the running estimate of a fixed schedule position is unbiased too
    pooled = err[0][np.isfinite(err[0])]
    assert abs(pooled.mean()) < 4 * pooled.std() / np.sqrt(pooled.size)


@pytest.mark.statistical
def test_broken_variants_are_detected():
    """Power check: the same test flags stale prediction sums and non-predictable refits."""
    err = _simulate("one", reps=400, seed=12)
    assert np.abs(_zscores(err[1])).max() > 6.0  # stale sums across refits drift
    assert np.abs(_zscores(err[2])).max() > 6.0  # peeking biases
    assert np.abs(_zscores(err[0])).max() < 4.0


def test_without_replacement_bookkeeping():
    s = _scores()
    est = AIPWEstimator(2, N, lambda_rule="regression")
    rng = np.random.default_rng(0)
    seen: list[set[int]] = [set(), set()]
    while (est.n_observed < N).any():
        i = int(np.argmin(est.n_observed))
        plan = est.plan(i, 7, rng, predictions=np.full(N, 0.5))
        assert len(set(plan.examples)) == len(plan.examples)
        assert not seen[i] & set(plan.examples)
        assert plan.n_unobserved == N - len(seen[i])
        with pytest.raises(ValueError):
            est.plan(i, 7, rng)  # one outstanding pull per model
        est.complete(plan, s[i, list(plan.examples)])
        seen[i] |= set(plan.examples)
        assert est.n_observed[i] == len(seen[i]) == int(est.mask[i].sum())
        assert est.observed_sum[i] == pytest.approx(s[i, sorted(seen[i])].sum())
        assert sorted(est.examples(i)) == sorted(seen[i])
    with pytest.raises(ValueError):
        est.plan(0, 1, rng)
    assert est.pulls.sum() == 2 * int(np.ceil(N / 7))
    # last pull of each model observes the remainder: its theta is exact
    for i in range(2):
        assert est.thetas(i)[-1] == pytest.approx(s[i].mean(), abs=1e-12)
        assert est.estimates[i] == pytest.approx(s[i].mean(), abs=1e-12)  # exact when full
        assert est.observed_means[i] == pytest.approx(s[i].mean())


def test_predictability_plan_frozen_and_lambda_from_past_only():
    s = _scores()
    a = AIPWEstimator(2, N, lambda_rule="paper")
    b = AIPWEstimator(2, N, lambda_rule="paper")
    p = np.linspace(0.2, 0.8, N)
    for est in (a, b):
        plan = est.plan(0, B, np.random.default_rng(1), predictions=p)
        est.complete(plan, s[0, list(plan.examples)])
    pa = a.plan(0, B, np.random.default_rng(2), predictions=p)
    pb = b.plan(0, B, np.random.default_rng(2), predictions=p)
    assert pa == pb  # same past -> same plan, whatever the coming scores are
    assert pa.pred_batch == tuple(p[list(pa.examples)])
    zbar = float(a.to_state()["z_sum"][0])  # one completed pull
    assert pa.lam == step3_lambda(p[~a.mask[0]], zbar)
    # completing with different scores cannot change what was frozen
    ta = a.complete(pa, np.ones(B))
    tb = b.complete(pb, np.zeros(B))
    assert ta - tb == pytest.approx(pa.n_unobserved / B * B / N)
    with pytest.raises(ValueError):
        a.complete(pa, np.ones(B))  # already completed


def test_state_roundtrip_and_validation():
    s = _scores()
    est = AIPWEstimator(2, N, lambda_rule="regression")
    rng = np.random.default_rng(3)
    for i in (0, 1, 0):
        plan = est.plan(i, B, rng, predictions=np.full(N, 0.6))
        est.complete(plan, s[i, list(plan.examples)])
    pending = est.plan(1, B, rng, predictions=np.full(N, 0.6))
    back = AIPWEstimator.from_state(json.loads(json.dumps(est.to_state())))
    assert back.to_state() == est.to_state()
    assert back.pending(1) == pending
    assert back.complete(pending, s[1, list(pending.examples)]) == est.complete(
        pending, s[1, list(pending.examples)])
    with pytest.raises(ValueError):
        AIPWEstimator(2, N, lambda_rule="nope")  # type: ignore[arg-type]
    plan = est.plan(0, B, rng)
    with pytest.raises(ValueError):
        est.complete(plan, np.full(B, 1.5))
    with pytest.raises(ValueError):
        est.complete(plan, np.ones(B + 1))


@pytest.mark.statistical
def test_unbiased_inside_the_bandit_with_real_lowrank_refits():
    """PULSE end to end: UCB-E selection, logistic low-rank refit after every pull."""
    from monitor.stats.pulse.bandit import SelectionBandit, SelectionConfig

    s = _scores()
    s = np.vstack([s, 1.0 - s[0]])
    mu = s.mean(axis=1)
    v = np.random.default_rng(0).standard_normal((N, 2))
    reps, kmax = 600, 5
    err = np.full((reps, 3, kmax), np.nan)
    for r in range(reps):
        cfg = SelectionConfig(batch_size=B, budget=3 * B * kmax, refit_every=1, certify=False,
                              seed=r, lambda_rule="one")  # full weight on the refit predictions
        bandit = SelectionBandit(cfg, 3, N, example_factors=v)
        while reqs := bandit.next_requests(1):
            for i, ids in reqs:
                bandit.update_many(i, ids, s[i, ids])
        assert bandit.refits > 3
        for i in range(3):
            th = bandit._aipw.thetas(i)[:kmax]
            err[r, i, : len(th)] = np.asarray(th) - mu[i]
    z = _zscores(err)
    assert z.size >= 9
    assert np.abs(z).max() < 4.0, z
