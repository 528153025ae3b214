from __future__ import annotations

import json
import math

import numpy as np
import pytest

from monitor.stats.cereval.partition import (
    JudgeLossBins,
    LabelStrata,
    NearestNeighbourPartition,
    fit_knn_partition,
    nearest_indices,
)


def test_label_strata_overflow_and_roundtrip() -> None:
    s = LabelStrata(2)
    assert [s.index(x) for x in ["a", "b", "a", None]] == [0, 1, 0, 1]
    t = LabelStrata.from_state(json.loads(json.dumps(s.to_state())))
    assert t.index("a") == 0 and t.index("zzz") == 1
    assert LabelStrata(1).index("x") == 0
    with pytest.raises(ValueError):
        LabelStrata(0)


def test_judge_bins_warmup_then_frozen() -> None:
    rng = np.random.default_rng(0)
    b = JudgeLossBins(4, warmup=1000)
    xs = rng.random(1000)
    for x in xs[:999]:
        b.update(float(x))
        assert b.assign(0.5) is None
    mid = JudgeLossBins.from_state(json.loads(json.dumps(b.to_state())))
    b.update(float(xs[999]))
    mid.update(float(xs[999]))
    assert b.frozen and mid.edges == b.edges and len(b.edges) == 3
    edges = b.edges
    b.update(0.99)  # ignored after freezing
    assert b.edges == edges
    counts = np.bincount([b.assign(float(x)) or 0 for x in rng.random(20000)], minlength=4)
    assert np.all(np.abs(counts / 20000 - 0.25) < 0.03)  # equal mass on fresh data


def test_judge_bins_ties_keep_point_masses_apart() -> None:
    b = JudgeLossBins(4, warmup=100)
    for i in range(100):
        b.update(1.0 if i % 10 == 0 else 0.0)
    assert b.edges == [0.0]
    assert b.assign(0.0) == 0 and b.assign(1.0) == 1
    with pytest.raises(ValueError):
        JudgeLossBins(2, 5).update(1.2)


def test_nearest_indices_matches_brute_force() -> None:
    rng = np.random.default_rng(1)
    q, r = rng.normal(size=(300, 5)), rng.normal(size=(40, 5))
    brute = np.argmin(((q[:, None, :] - r[None, :, :]) ** 2).sum(-1), axis=1)
    np.testing.assert_array_equal(nearest_indices(q, r, chunk=64), brute)


def test_nn_partition_validation_and_state() -> None:
    with pytest.raises(ValueError):
        NearestNeighbourPartition([[0.0]], [2], 2)
    p = NearestNeighbourPartition([[0.0], [1.0]], [1, 0], 2)
    q = NearestNeighbourPartition.from_state(json.loads(json.dumps(p.to_state())))
    assert q.assign_many([[0.1], [0.9]]).tolist() == [1, 0]


def test_fit_knn_candidates_and_homogeneous_choice() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(600, 3))
    z = rng.random(600)  # no structure: one stratum is best
    fit = fit_knn_partition(x, x, z, 0.05, rng)
    assert len(fit.candidate_radii) == math.ceil(math.log(600)) + 1
    assert fit.partition.n_strata == 1 and fit.radius == fit.candidate_radii[0]
    assert fit.pool_strata.shape == (600,) and fit.labelled_strata.shape == (600,)


def test_fit_knn_separates_groups_and_assigns_pool() -> None:
    rng = np.random.default_rng(3)
    pool = np.r_[rng.normal(0, 1, (5000, 2)), rng.normal(10, 1, (5000, 2))]
    lab_idx = rng.choice(10000, 6000, replace=False)
    z = np.where(lab_idx < 5000, 0.05, 0.95) + rng.uniform(-0.04, 0.04, 6000)
    fit = fit_knn_partition(pool, pool[lab_idx], z, 0.05, rng)
    assert fit.partition.n_strata >= 2
    # the two clusters end up in different strata
    assert fit.pool_strata[:5000].max() < fit.pool_strata[5000:].min()
    np.testing.assert_array_equal(fit.partition.assign_many(pool[:50]), fit.pool_strata[:50])


def test_fit_knn_labelled_rows_shortcut_is_equivalent() -> None:
    rng = np.random.default_rng(4)
    pool = rng.normal(size=(400, 3))
    rows = rng.choice(400, 150, replace=False)
    z = rng.random(150)
    a = fit_knn_partition(pool, pool[rows], z, 0.1, np.random.default_rng(9))
    b = fit_knn_partition(pool, pool[rows], z, 0.1, np.random.default_rng(9), labelled_rows=rows)
    np.testing.assert_array_equal(a.labelled_strata, b.labelled_strata)
    assert a.candidate_radii == b.candidate_radii
