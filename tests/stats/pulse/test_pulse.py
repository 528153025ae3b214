from __future__ import annotations

import json

import numpy as np
import pytest

from monitor.stats.pulse.bandit import SelectionBandit, SelectionConfig
from monitor.stats.pulse.lowrank import fit_logistic_factors, sigmoid


def _problem(seed: int = 0, m: int = 8, n: int = 120, hist: int = 30):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, 3))
    b = rng.normal(0.3, 1.5, n)

    def draw(k: int) -> np.ndarray:
        u = rng.standard_normal((k, 3))
        a = rng.normal(0.0, 0.5, k)
        return (rng.random((k, n)) < sigmoid(a[:, None] + b + u @ v.T)).astype(float)

    h = draw(hist)
    s = draw(m)
    _, vh, _ = fit_logistic_factors(h, np.ones_like(h, bool), rank=4, l2=0.05, seed=1, sweeps=4)
    return s, vh


def _drive(bandit: SelectionBandit, s: np.ndarray, k: int = 1, reverse: bool = False,
           stop_after: int | None = None) -> list[tuple[int, list[int]]]:
    log: list[tuple[int, list[int]]] = []
    while (stop_after is None or len(log) < stop_after) and (reqs := bandit.next_requests(k)):
        log.extend(reqs)
        for model, ids in reqs:
            order = ids[::-1] if reverse else ids
            for j in order:
                bandit.update(model, j, float(s[model, j]))
    return log


@pytest.mark.parametrize("method", ["pulse", "ucbe", "naive"])
def test_end_to_end_identifies_best(method):
    s, v = _problem()
    best = int(np.argmax(s.mean(axis=1)))
    cfg = SelectionConfig(method=method, batch_size=8, budget=s.size, refit_every=3,
                          lambda_rule="regression", seed=4)
    bandit = SelectionBandit(cfg, *s.shape, example_factors=None if method == "ucbe" else v)
    _drive(bandit, s, k=2)
    assert bandit.calls_completed == bandit.calls_issued == s.size
    assert bandit.leader == best or method == "naive"
    np.testing.assert_allclose(bandit.lower, s.mean(axis=1), atol=1e-12)  # exhausted: exact
    assert bandit.best_model == best
    assert bandit.ranks[best] == 0 or method == "naive"
    if method != "ucbe":
        assert bandit.refits >= 1 and bandit.refit_cost.flops > 0


def test_requests_budget_init_and_bookkeeping():
    s, v = _problem(seed=1)
    m, n = s.shape
    cfg = SelectionConfig(batch_size=7, budget=200, init_pulls=2, refit_every=2, seed=0)
    bandit = SelectionBandit(cfg, m, n, example_factors=v)
    first = bandit.next_requests(100)
    assert [i for i, _ in first] == list(range(m))  # init: every model, distinct
    assert bandit.stage == "init"
    assert bandit.next_requests(5) == []  # all models waiting
    for i, ids in first:
        bandit.update_many(i, ids, s[i, ids])
    second = bandit.next_requests(100)
    assert sorted(i for i, _ in second) == list(range(m))  # second init round
    for i, ids in second:
        bandit.update_many(i, ids, s[i, ids])
    assert bandit.stage == "bandit" and bandit.refits == 1
    seen = {i: set() for i in range(m)}
    for i, ids in first + second:
        seen[i] |= set(ids)
    log = _drive(bandit, s, k=3)
    for i, ids in log:
        assert not seen[i] & set(ids)
        seen[i] |= set(ids)
    assert bandit.calls_issued == bandit.calls_completed == 200  # last batch truncated
    assert sum(len(x) for x in seen.values()) == 200
    np.testing.assert_array_equal(bandit.n_observed, [len(seen[i]) for i in range(m)])
    assert bandit.budget_used_ratio == 1.0
    assert bandit.next_requests(3) == []


def test_update_validation():
    s, v = _problem(seed=2)
    bandit = SelectionBandit(SelectionConfig(batch_size=4, seed=1), *s.shape, example_factors=v)
    (i, ids), = bandit.next_requests(1)
    other = next(j for j in range(s.shape[1]) if j not in ids)
    with pytest.raises(ValueError):
        bandit.update(i, other, 1.0)  # not requested
    with pytest.raises(ValueError):
        bandit.update(i, ids[0], 1.5)
    bandit.update(i, ids[0], 1.0)
    with pytest.raises(ValueError):
        bandit.update(i, ids[0], 1.0)  # duplicate
    with pytest.raises(ValueError):
        SelectionBandit(SelectionConfig(method="pulse"), 2, 3)  # needs example factors
    with pytest.raises(ValueError):
        SelectionConfig(method="nope")  # type: ignore[arg-type]


def test_arrival_order_does_not_matter():
    s, v = _problem(seed=3)
    cfg = SelectionConfig(batch_size=6, budget=400, refit_every=2, seed=9)
    a = SelectionBandit(cfg, *s.shape, example_factors=v)
    b = SelectionBandit(cfg, *s.shape, example_factors=v)
    assert _drive(a, s, k=3) == _drive(b, s, k=3, reverse=True)
    assert a.to_state() == b.to_state()


def test_restore_mid_run_is_bit_identical():
    s, v = _problem(seed=4)
    cfg = SelectionConfig(batch_size=5, budget=500, refit_every=3, seed=5, delta=0.2)
    ref = SelectionBandit(cfg, *s.shape, example_factors=v)
    log_ref = _drive(ref, s, k=1)

    run = SelectionBandit(cfg, *s.shape, example_factors=v)
    log = _drive(run, s, k=1, stop_after=40)
    # leave a pull in flight with a partial answer
    (i, ids), = run.next_requests(1)
    log.append((i, ids))
    run.update(i, ids[0], float(s[i, ids[0]]))
    state = json.loads(json.dumps(run.to_state()))
    back = SelectionBandit.from_state(state)
    assert back.to_state() == run.to_state()
    for j in ids[1:]:
        back.update(i, j, float(s[i, j]))
    log += _drive(back, s, k=1)
    assert log == log_ref
    assert back.to_state() == ref.to_state()
    np.testing.assert_array_equal(back.estimates, ref.estimates)
    np.testing.assert_array_equal(back.lower, ref.lower)
    np.testing.assert_array_equal(back.upper, ref.upper)


def test_pending_plan_unaffected_by_refit_triggered_elsewhere():
    s, v = _problem(seed=5)
    cfg = SelectionConfig(batch_size=4, refit_every=1, seed=2)
    bandit = SelectionBandit(cfg, *s.shape, example_factors=v)
    _drive(bandit, s, k=100, stop_after=s.shape[0])  # init done
    reqs = bandit.next_requests(2)
    (i, ids_i), (k, ids_k) = reqs
    plan_before = bandit._aipw.pending(i)
    refits = bandit.refits
    bandit.update_many(k, ids_k, s[k, ids_k])  # completes k -> refit
    assert bandit.refits == refits + 1
    assert bandit._aipw.pending(i) == plan_before  # frozen before its draw
    bandit.update_many(i, ids_i, s[i, ids_i])


def test_without_history_joint_refit():
    s, _ = _problem(seed=6)
    v0 = 0.1 * np.random.default_rng(0).standard_normal((s.shape[1], 3))
    cfg = SelectionConfig(batch_size=10, refit_every=4, freeze_examples=False, seed=3)
    bandit = SelectionBandit(cfg, *s.shape, example_factors=v0)
    _drive(bandit, s, k=2)
    assert bandit.leader == int(np.argmax(s.mean(axis=1)))
    assert bandit.refit_cost.rows > bandit.refits * s.shape[0]  # U and V rows solved
    back = SelectionBandit.from_state(json.loads(json.dumps(bandit.to_state())))
    assert back.to_state() == bandit.to_state()


def test_tiny_benchmark_smaller_than_initialization():
    s = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    cfg = SelectionConfig(method="ucbe", batch_size=8, init_pulls=2, seed=0)
    bandit = SelectionBandit(cfg, 2, 3)
    _drive(bandit, s, k=2)
    assert bandit.calls_completed == 6 and bandit.best_model == 0 and bandit.stage == "bandit"
