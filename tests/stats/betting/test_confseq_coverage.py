"""Monte Carlo coverage of the hedged confidence sequence (monitor/stats/betting/confseq.py).

An independent vectorized implementation (reps x S x grid) of the same confidence sequence is
cross-checked against the class on a few paths, then used to estimate the probability that the
true risk ever leaves the interval up to a horizon.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from monitor.stats.betting.bets import BetConfig
from monitor.stats.betting.confseq import HedgedConfidenceSequence
from tests.stats.binomial import clopper_pearson_lower

DELTA = 0.1
RHOS = {"r_eval": np.array([0.0]), "r_autoeval": np.array([1.0]),
        "r_autoeval_plus": np.linspace(0.0, 1.0, 10)}


@dataclass
class Paths:
    human: np.ndarray  # (T, reps)
    judge: np.ndarray  # (T, reps)
    block: np.ndarray  # (T, reps); nan = empty block
    risk: float


def make_paths(rng: np.random.Generator, t: int, reps: int, risk: float, gamma: float,
               r: int, variable_blocks: bool, beta_losses: bool = False) -> Paths:
    """Example 1 of the paper (binary losses, judge right w.p. gamma, r synthetic per round);
    optionally variable/empty blocks and non-Bernoulli (Beta) losses with a noisy judge."""
    shape = (t, reps)
    sizes = rng.integers(0, r + 1, size=shape) if variable_blocks else np.full(shape, r)
    if beta_losses:  # Beta(a, b) mean risk; judge = clip(loss + N(0, 0.3)) (same law off-audit)
        a = 1.0
        bpar = a * (1 - risk) / risk
        human = rng.beta(a, bpar, size=shape)
        judge = np.clip(human + rng.normal(0, 0.3, size=shape), 0, 1)
        syn = np.clip(rng.beta(a, bpar, size=(*shape, r)) + rng.normal(0, 0.3, (*shape, r)), 0, 1)
        mask = np.arange(r) < sizes[..., None]
        with np.errstate(invalid="ignore"):
            block = (syn * mask).sum(-1) / sizes
    else:
        human = (rng.random(shape) < risk).astype(float)
        judge = np.where(rng.random(shape) < gamma, human, 1.0 - human)
        pf = risk * gamma + (1 - risk) * (1 - gamma)
        with np.errstate(invalid="ignore"):
            block = rng.binomial(sizes, pf) / sizes
    block = np.where(sizes == 0, np.nan, block)
    return Paths(human, judge, block, risk)


def simulate(paths: Paths, rhos: np.ndarray, delta: float, c: float, g: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorized CS over reps: returns lower/upper edges (T, reps) and valid (T, reps).

    Written independently of monitor.stats.betting.grid_wealth: WSR anytime bets from eq. (21) with
    the range-equivariant prior, caps c/(1+rho-m) and c/(m+rho), rho mixture with uniform weights,
    delta/2 per side, hull rounding outward, running intersection, full grid every round.
    """
    t_max, reps = paths.human.shape
    s = rhos.size
    m = np.arange(1, g) / g  # (P,)
    caps = np.stack([c / (1.0 + rhos[:, None] - m), c / (m + rhos[:, None])])  # (2, S, P)
    var0 = 0.25 * (1.0 + 2.0 * rhos) ** 2
    thr = math.log(2.0 / delta)
    lw = np.zeros((2, reps, s, g - 1))
    buf = np.empty_like(lw)
    total = np.zeros((reps, s))
    dev = np.zeros((reps, s))
    lo = np.zeros(reps, dtype=np.int64)
    hi = np.full(reps, g, dtype=np.int64)
    valid = np.ones(reps, dtype=bool)
    los = np.empty((t_max, reps), dtype=np.int64)
    his = np.empty((t_max, reps), dtype=np.int64)
    vals = np.empty((t_max, reps), dtype=bool)
    idx = np.arange(g - 1)
    for t in range(1, t_max + 1):
        h, f, b = paths.human[t - 1], paths.judge[t - 1], paths.block[t - 1]
        q = np.where(np.isnan(b)[:, None], h[:, None],
                     rhos * np.nan_to_num(b)[:, None] + h[:, None] - rhos * f[:, None])
        lam = np.sqrt(2.0 * thr / (t * math.log1p(t)) / ((var0 + dev) / t))  # (reps, S)
        x = q[:, :, None] - m  # (reps, S, P)
        for side, sign in ((0, -1.0), (1, 1.0)):
            np.minimum(lam[:, :, None], caps[side], out=buf[side])
            buf[side] *= x
            buf[side] *= sign
        np.log1p(buf, out=buf)
        lw += buf
        total += q
        dev += (q - (0.5 + total) / (t + 1)) ** 2
        if s > 1:  # log of the uniform rho mixture of the wealths
            mx = lw.max(axis=2)  # (2, reps, P)
            np.subtract(lw, mx[:, :, None, :], out=buf)
            np.exp(buf, out=buf)
            mix = np.log(buf.mean(axis=2)) + mx
        else:
            mix = lw[:, :, 0, :]
        rej = mix >= thr  # (2, reps, P)
        acc_lo = ~rej[1]
        first_acc = np.where(acc_lo.any(axis=1), np.argmax(acc_lo, axis=1), g - 1)
        acc_up = ~rej[0]
        last_acc = np.where(acc_up.any(axis=1), (idx * acc_up).max(axis=1) + 2, 1)
        lo = np.where(valid, np.maximum(lo, first_acc), lo)  # frozen once invalid
        hi = np.where(valid, np.minimum(hi, last_acc), hi)
        valid &= lo < hi
        los[t - 1], his[t - 1], vals[t - 1] = lo, hi, valid
    return los, his, vals


@pytest.mark.parametrize("method", list(RHOS))
def test_simulation_matches_class(method: str) -> None:
    rng = np.random.default_rng(7)
    g = 20
    paths = make_paths(rng, 250, 3, 0.3, 0.8, 5, variable_blocks=True)
    los, his, vals = simulate(paths, RHOS[method], DELTA, 0.5, g)
    for rep in range(3):
        cs = HedgedConfidenceSequence(DELTA, RHOS[method], BetConfig("wsr", c=0.5), grid_size=g)
        for t in range(250):
            b = paths.block[t, rep]
            cs.update(float(paths.human[t, rep]), float(paths.judge[t, rep]),
                      None if np.isnan(b) else float(b))
            assert cs.valid == vals[t, rep]
            if cs.valid:
                assert (round(cs.lower * g), round(cs.upper * g)) == (los[t, rep], his[t, rep])
        assert 0 < cs.lower < cs.upper < 1  # informative after 250 rounds


# (method, gamma, variable blocks, beta losses, grid, horizon)
CASES = [
    ("r_eval", 0.99, False, False, 100, 600),
    ("r_autoeval", 0.99, False, False, 100, 600),
    ("r_autoeval", 0.7, True, False, 100, 600),
    ("r_autoeval_plus", 0.99, False, False, 20, 300),
    ("r_autoeval_plus", 0.7, True, False, 20, 300),
    ("r_autoeval_plus", 0.0, True, True, 20, 300),  # Beta losses, noisy judge (gamma unused)
]


@pytest.mark.statistical
@pytest.mark.parametrize(("method", "gamma", "variable", "beta", "g", "horizon"), CASES)
def test_coverage_at_all_times(method: str, gamma: float, variable: bool, beta: bool, g: int,
                               horizon: int) -> None:
    reps = 2000
    rng = np.random.default_rng(20261121 + CASES.index((method, gamma, variable, beta, g,
                                                        horizon)))
    risk = 0.1  # a grid point for both grids: the sharpest case (the null boundary is tested)
    paths = make_paths(rng, horizon, reps, risk, gamma, 10, variable, beta)
    los, his, vals = simulate(paths, RHOS[method], DELTA, 0.5, g)
    r_edge = round(risk * g)
    covered_always = (vals & (los < r_edge) & (his > r_edge)).all(axis=0)
    misses = int(reps - covered_always.sum())
    # miscoverage (risk ever outside the open interval) not significantly above delta
    assert clopper_pearson_lower(misses, reps, 0.99) <= DELTA, (method, gamma, misses)
    # and the interval is informative: it shrank around the risk in most runs
    width = (his[-1] - los[-1]) / g
    assert np.median(width) < 0.3
