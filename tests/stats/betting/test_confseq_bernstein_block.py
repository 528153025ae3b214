"""SingleSequenceBlockSums (one sequence's bet block) is bit-identical to block_sums."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.stats.betting import confseq_bernstein_block
from monitor.stats.betting.bets import BetConfig
from monitor.stats.betting.confseq_bernstein import BernsteinSequences, block_sums
from monitor.stats.betting.confseq_bernstein_block import SingleSequenceBlockSums
from tests.ckernels import load


@pytest.mark.parametrize("seed", range(30))
def test_kernel_matches_block_sums(seed: int) -> None:
    rng = np.random.default_rng(seed)
    nr = int(rng.integers(1, 6))
    rhos = sorted(rng.random(nr).tolist())
    members = [[int(j) for j in rng.choice(nr, size=int(rng.integers(1, nr + 1)), replace=False)]
               for _ in range(int(rng.integers(1, 4)))]
    horizon = None if seed % 3 else int(rng.integers(5, 500))
    grid = int(rng.choice([10, 100, 1000]))
    s = BernsteinSequences(0.05, rhos, BetConfig(rule="wsr", c=0.6, horizon=horizon), grid,
                           members)
    for _ in range(int(rng.integers(0, 100))):  # some history: sums, WSR statistics, edges
        s.update(float(rng.random() < 0.3), float(rng.random() < 0.3), float(rng.random()))
    s.flush()
    edges = []
    for _ in s.members:  # arbitrary cap edges, not only the current bounds
        lo = int(rng.integers(0, grid))
        edges.append((lo, int(rng.integers(lo + 1, grid + 1))))
    s._cap_edges = edges
    k = int(rng.integers(1, 33))
    qs = rng.random((k, len(s.total))) * 1.5 - 0.25
    qs[rng.random(qs.shape) < 0.3] = 0.0
    up, low, tot, dev = (a[0] for a in block_sums([s], qs[None]))
    cum, tot2, dev2 = s._kernel.run(qs, s._applied, s.total, s.dev, s.sums, edges)
    assert np.array_equal(cum[:, 0], s.sums)
    for a, b in ((cum[0, 1:], up), (cum[1, 1:], low), (tot2, tot), (dev2, dev)):
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("seed", range(40))
def test_compiled_block_matches_numpy(seed: int) -> None:
    """cedges.block_prep / block_terms give run_py's bits (series and closed-form slopes)."""
    load("monitor.stats.betting.cedges")
    assert confseq_bernstein_block._compiled is not None
    rng = np.random.default_rng(100 + seed)
    n_rows = int(rng.integers(1, 25))
    rho = np.sort(rng.random(n_rows))
    members = int(rng.integers(1, 4))
    row_member = sorted(int(v) for v in rng.integers(0, members, n_rows))
    horizon = None if seed % 4 else int(rng.integers(5, 5000))
    grid = int(rng.choice([10, 100, 1000]))
    kern = SingleSequenceBlockSums(rho, row_member, [0.5] * n_rows,
                                   (0.25 * (1 + 2 * rho) ** 2).tolist(),
                       float(rng.uniform(0.3, 0.9)), float(rng.uniform(1.0, 8.0)), horizon,
                       grid, 32)
    edges = []
    for _ in range(members):
        lo = int(rng.integers(0, grid))
        edges.append((lo, int(rng.integers(lo + 1, grid + 1))))
    k = int(rng.integers(1, 33))
    # q near the edges gives |zmin| < 1e-3 (fan_slope's series) as well as the closed form
    qs = rng.random((k, n_rows)) * (1.0 + 2 * rho) - rho
    near = rng.random(qs.shape) < 0.3
    qs[near] = (np.array([edges[i][0] for i in row_member]) / grid
                + rng.normal(0.0, 1e-4, qs.shape))[near]
    t0 = int(rng.choice([0, 31, 4096, 10**7]))
    total = (rng.random(n_rows) * t0 * 0.3).tolist()
    dev = (rng.random(n_rows) * t0 * 0.2).tolist()
    sums = rng.normal(0.0, 10.0, (2, 5, n_rows))
    got = kern.run(qs, t0, total, dev, sums, edges)
    want = kern.run_py(qs, t0, total, dev, sums, edges)
    for a, b in zip(got, want, strict=True):
        assert a.shape == b.shape and a.tobytes() == b.tobytes()


def test_compiled_block_refuses_bad_shapes() -> None:
    ce = load("monitor.stats.betting.cedges")
    qs = np.zeros((3, 2))
    one = np.zeros(2)
    with pytest.raises(ValueError, match="inconsistent shapes"):
        ce.block_prep(qs, 0, [0.0, 0.0], [0.0, 0.0], one, one, 1.0, None, one, one,
                      np.zeros((2, 1, 2)), np.empty((2, 3, 2)), np.empty((3, 2, 3, 2)))
    with pytest.raises(ValueError, match="2 values"):
        ce.block_prep(qs, 0, [0.0], [0.0, 0.0], one, one, 1.0, None, one, one,
                      np.zeros((2, 1, 2)), np.empty((2, 4, 2)), np.empty((3, 2, 3, 2)))
    with pytest.raises(TypeError):
        ce.block_terms(np.zeros((2, 3, 2), dtype=np.float32), np.empty((3, 2, 3, 2)), qs,
                       np.zeros((2, 5, 2)), np.empty((2, 4, 5, 2)))
