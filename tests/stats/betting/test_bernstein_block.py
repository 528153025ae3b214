"""BlockKernel (one sequence's bet block) is bit-identical to block_sums."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.stats.betting.bets import BetConfig
from monitor.stats.betting.confseq_bernstein import BernsteinSequences, block_sums


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
