from __future__ import annotations

import json

import numpy as np

import monitor.stats.pulse.aipw as aipw
from monitor.stats.pulse.aipw_plan import PullPlan, pull_theta, sequential_increments, step3_lambda


def test_sequential_increments_match_batch_and_ranges():
    rng = np.random.default_rng(5)
    for _ in range(200):
        n_u = int(rng.integers(3, 30))
        bsz = int(rng.integers(1, n_u + 1))
        preds = rng.random(n_u)
        sel = rng.choice(n_u, bsz, replace=False)
        plan = PullPlan(0, 0, tuple(range(bsz)), n_u, float(rng.random() * 5), float(rng.random()),
                        float(preds.sum()), float(preds.max()), float(preds.min()),
                        tuple(preds[sel].tolist()))
        sc = rng.random(bsz)
        inc = sequential_increments(plan, sc, n_examples=n_u + 6)
        assert np.all(inc["lo"] <= inc["theta"] + 1e-12)
        assert np.all(inc["theta"] <= inc["hi"] + 1e-12)
        assert np.all(inc["lo"] <= inc["l0"] + 1e-12)
        assert np.all(inc["u0"] <= inc["hi"] + 1e-12)
        assert np.all(np.diff(inc["u0"]) <= 1e-12) and np.all(np.diff(inc["l0"]) >= -1e-12)
        theta, _ = pull_theta(plan, sc, n_u + 6)
        assert np.isfinite(theta)


def test_pull_plan_dict_roundtrip_is_exact_and_json():
    plan = PullPlan(2, 7, (5, 1, 3), 9, 0.1 + 0.2, 1 / 3, 2.5, 0.9, 0.05, (0.1, 0.7, 1 / 7))
    d = json.loads(json.dumps(plan.to_dict()))
    assert PullPlan.from_dict(d) == plan


def test_step3_lambda_edge_cases():
    assert step3_lambda([], 0.3) == 0.0
    assert step3_lambda([0.0, 0.0], 0.3) == 0.0
    assert 0.0 <= step3_lambda([0.2, 0.9, 0.4], 5.0) <= 1.0
    assert step3_lambda([0.2, 0.9, 0.4], -5.0) == 1.0


def test_aipw_module_reexports_the_moved_names():
    assert aipw.PullPlan is PullPlan
    assert aipw.pull_theta is pull_theta
    assert aipw.sequential_increments is sequential_increments
    assert aipw.step3_lambda is step3_lambda
