"""The default bet rule ``plugin_up``: math, online/batch agreement, state, views and Monte Carlo
validity at the null boundary (both sides, Bernoulli and Beta losses, good, useless and biased
judges, all three methods) and power against the clairvoyant bettor."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import numpy as np
import pytest

from monitor.stats.betting.autoeval import method_rhos, one_sided_test, restore_test
from monitor.stats.betting.bets import BetConfig, Side
from monitor.stats.betting.plugin import PlugInEProcess, bet_grid, plugin_rho
from monitor.stats.betting.risk import RiskMonitor
from monitor.stats.betting.risk_group import CertificateGroup
from tests.stats.binomial import clopper_pearson_lower
from tests.support.plugin_batch import PlugInBatch

SIDES: tuple[Side, ...] = ("certify", "violate")
METHODS = ("r_eval", "r_autoeval", "r_autoeval_plus")
Draw = Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray, np.ndarray]]


def make_draw(risk: float, gamma: float, losses: str = "bernoulli", bias: float = 0.0,
              block: int = 10, empty: float = 0.1) -> Draw:
    """Rounds of a stream with risk ``risk``: (human, judge, block mean; NaN = empty block).

    The judge equals the human loss with probability ``gamma``, else an independent draw;
    ``bias`` moves a zero judge loss to 1 with that probability. Each block is ``block`` fresh
    units of the same stream, so ``E[b - f] = 0`` exactly, whatever the judge.
    """
    beta_b = 0.5 * (1.0 - risk) / risk

    def loss(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        if losses == "bernoulli":
            return (rng.random(shape) < risk).astype(float)
        return rng.beta(0.5, beta_b, shape)

    def judge(rng: np.random.Generator, lo: np.ndarray) -> np.ndarray:
        f = np.where(rng.random(lo.shape) < gamma, lo, loss(rng, lo.shape))
        if bias:
            f = np.where((f == 0.0) & (rng.random(lo.shape) < bias), 1.0, f)
        return f

    def draw(rng: np.random.Generator, reps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        h = loss(rng, (reps,))
        f = judge(rng, h)
        b = judge(rng, loss(rng, (reps, block))).mean(axis=1)
        b = np.where(rng.random(reps) < empty, np.nan, b)
        return h, f, b

    return draw


def run_batch(draw: Draw, alpha: float, reps: int, horizon: int, seed: int
              ) -> dict[tuple[str, str], np.ndarray]:
    """Running maximum of log E per (method, side) after ``horizon`` rounds, shape (reps,)."""
    rng = np.random.default_rng(seed)
    bet = BetConfig()
    runs = {(m, s): PlugInBatch(alpha, s, method_rhos(m).tolist(), bet, reps)  # type: ignore[arg-type]
            for m in METHODS for s in SIDES}
    best = {k: np.zeros(reps) for k in runs}
    for _ in range(horizon):
        h, f, b = draw(rng, reps)
        d = np.where(np.isnan(b), 0.0, b - f)
        for k, r in runs.items():
            r.advance(h, d)
            np.maximum(best[k], r.log_wealth, out=best[k])
    return best


# ---------------------------------------------------------------- math


def test_bet_grid_prior_and_caps() -> None:
    for alpha in (0.05, 0.12, 0.5, 0.9):
        for side in SIDES:
            lam, w = bet_grid(alpha, side, 0.95)
            assert math.isclose(sum(w), 1.0) and all(v > 0 for v in w)
            assert all(v > 0 for v in lam) and lam == sorted(lam)
            top = 0.95 / (1 - alpha) if side == "certify" else 0.95 / alpha
            assert lam[7] <= top * (1 + 1e-12) and lam[-1] >= lam[7]


def test_plugin_rho_prefers_the_judge_when_it_agrees() -> None:
    grid = method_rhos("r_autoeval_plus").tolist()
    rng = np.random.default_rng(0)
    draw = make_draw(0.1, 0.99)  # Example 1: the clairvoyant reliance is about 0.78
    h, f, b = draw(rng, 4000)
    d = np.where(np.isnan(b), 0.0, b - f)
    sums = [h.sum(), d.sum(), (h * h).sum(), (h * d).sum(), (d * d).sum()]
    assert plugin_rho(4000, sums, 0.12, 0.95, "certify", grid) >= 0.5
    # a useless judge: the plug-in keeps (close to) R-Eval
    h, f, b = make_draw(0.1, 0.0)(rng, 4000)
    d = np.where(np.isnan(b), 0.0, b - f)
    sums = [h.sum(), d.sum(), (h * h).sum(), (h * d).sum(), (d * d).sum()]
    assert plugin_rho(4000, sums, 0.12, 0.95, "certify", grid) <= 0.2
    # a large edge makes the cap bind: less reliance buys a larger cap 0.95 / (0.88 + rho)
    h, f, b = make_draw(0.05, 0.99)(rng, 4000)
    d = np.where(np.isnan(b), 0.0, b - f)
    sums = [h.sum(), d.sum(), (h * h).sum(), (h * d).sum(), (d * d).sum()]
    assert plugin_rho(4000, sums, 0.12, 0.95, "certify", grid) <= 0.5


# ---------------------------------------------------------------- online == batch, state


@pytest.mark.parametrize("side", SIDES)
def test_batch_equals_online_and_state_round_trips(side: Side) -> None:
    reps, horizon, alpha = 3, 150, 0.12
    rng = np.random.default_rng(1)
    draw = make_draw(0.1, 0.9, "beta", empty=0.2)
    data = [draw(rng, reps) for _ in range(horizon)]
    for m in METHODS:
        rh = method_rhos(m).tolist()  # type: ignore[arg-type]
        batch = PlugInBatch(alpha, side, rh, BetConfig(), reps)
        tests = [one_sided_test(alpha, 0.05, side, rh, BetConfig()) for _ in range(reps)]
        for i, (h, f, b) in enumerate(data):
            batch.advance(h, np.where(np.isnan(b), 0.0, b - f))
            for j, t in enumerate(tests):
                t.update(float(h[j]), float(f[j]), None if np.isnan(b[j]) else float(b[j]))
            if i == 70:  # JSON round trip mid-stream, then bit-identical continuation
                tests = [restore_test(json.loads(json.dumps(t.to_state())))
                         for t in tests]
            np.testing.assert_allclose([t.log_e for t in tests], batch.log_wealth,
                                       rtol=1e-10, atol=1e-10)
            np.testing.assert_allclose([t.rho for t in tests], batch.rho, rtol=1e-9, atol=1e-9)


def test_restore_is_bit_identical() -> None:
    rng = np.random.default_rng(2)
    draw = make_draw(0.2, 0.8)
    a = RiskMonitor(0.2, 0.05, "r_autoeval_plus", BetConfig(), cs_grid=50)
    b = None
    for i in range(300):
        h, f, bm = (float(v[0]) for v in draw(rng, 1))
        block = None if math.isnan(bm) else bm
        a.update(h, f, block)
        if b is not None:
            b.update(h, f, block)
        if i == 120:
            b = RiskMonitor.from_state(json.loads(json.dumps(a.to_state())))
    assert b is not None and b.to_state() == a.to_state()
    assert a.certify_test.plugin and a.certify_test.plugin_e_process is not None


def test_group_members_equal_standalone_monitors_and_restore() -> None:
    rng = np.random.default_rng(3)
    draw = make_draw(0.1, 0.9)
    g = CertificateGroup(0.15, 0.05, list(METHODS), BetConfig(), cs_grid=100)
    ref = {m: RiskMonitor(0.15, 0.05, m, BetConfig(), cs_grid=100) for m in METHODS}
    for i in range(400):
        h, f, bm = (float(v[0]) for v in draw(rng, 1))
        block = None if math.isnan(bm) else bm
        g.update(h, f, block)
        for r in ref.values():
            r.update(h, f, block)
        if i == 200:
            g = CertificateGroup.from_state(json.loads(json.dumps(g.to_state())))
    for m in METHODS:
        assert g[m].to_state() == ref[m].to_state()
    assert g["r_autoeval_plus"].status == "certified"


def test_views_rho_weights_interpolate_the_chosen_rho() -> None:
    rng = np.random.default_rng(4)
    draw = make_draw(0.05, 0.95)
    m = RiskMonitor(0.12, 0.05, "r_autoeval_plus", BetConfig(), cs_grid=None)
    for _ in range(500):
        h, f, bm = (float(v[0]) for v in draw(rng, 1))
        m.update(h, f, None if math.isnan(bm) else bm)
    w, rhos = m.rho_weights, m.rhos
    assert w.shape == rhos.shape == (10,) and math.isclose(w.sum(), 1.0)
    assert np.count_nonzero(w) <= 2
    assert float(w @ rhos) == pytest.approx(m.certify_test.rho, abs=1e-12)
    t = m.certify_test
    assert t.log_e_per_rho.tolist() == [t.log_e] and t.next_bets.shape == (1,)
    assert 0.0 <= m.risk_estimate <= 0.2


def test_predictable_rho_and_bets() -> None:
    # changing round j must not change the reliance or the bet used in rounds <= j
    rng = np.random.default_rng(5)
    draw = make_draw(0.1, 0.9)
    data = [tuple(float(v[0]) for v in draw(rng, 1)) for _ in range(60)]
    data = [(h, f, 0.0 if math.isnan(b) else b) for h, f, b in data]

    def trace(rows: list[tuple[float, float, float]]) -> list[tuple[float, float]]:
        ep = PlugInEProcess(0.12, 0.1, "certify", method_rhos("r_autoeval_plus").tolist(),
                            BetConfig())
        out = []
        for h, f, b in rows:
            out.append((ep.rho, ep.next_bet))
            _ = ep.advance(h, b - f)
        return out

    base = trace(data)
    for j in (5, 30, 59):
        alt = list(data)
        h, f, b = alt[j]
        alt[j] = (1.0 - h, 1.0 - f, 1.0 - b)
        assert trace(alt)[: j + 1] == base[: j + 1]


@pytest.mark.parametrize("side", SIDES)
def test_linear_scale_cells_renormalise_over_long_runs(side: Side) -> None:
    # strong evidence for 3000 rounds: the cells' linear scale is renormalised many times (the
    # mixture passes 1e150 = e^345 repeatedly) and must agree with the log-space batch form
    rng = np.random.default_rng(8)
    alpha = 0.5
    h = (rng.random(3000) < (0.05 if side == "certify" else 0.95)).astype(float)
    d = rng.uniform(-0.1, 0.1, 3000)
    ep = PlugInEProcess(alpha, 0.1, side, [0.0, 0.5, 1.0], BetConfig())
    batch = PlugInBatch(alpha, side, [0.0, 0.5, 1.0], BetConfig(), 1)
    for i in range(3000):
        _ = ep.advance(float(h[i]), float(d[i]))
        batch.advance(h[i : i + 1], d[i : i + 1])
        if i == 1500:
            ep = PlugInEProcess.from_state(json.loads(json.dumps(ep.to_state())))
    assert ep.log_wealth > 1000
    assert ep.log_wealth == pytest.approx(float(batch.log_wealth[0]), rel=1e-10)


def test_factors_stay_positive_at_extreme_inputs() -> None:
    for side in SIDES:
        for alpha in (0.01, 0.5, 0.99):
            ep = PlugInEProcess(alpha, 0.1, side, [0.0, 0.5, 1.0], BetConfig())
            for h, f, b in [(1, 0, 1), (0, 1, 0), (1, 1, 0), (0, 0, 1)] * 50:
                _ = ep.advance(float(h), float(b - f))
                assert math.isfinite(ep.log_wealth)
            assert min(ep.log_wealth_cells) > 200 * math.log(0.05) - 1e-9


def test_rejects_bad_config_and_state() -> None:
    with pytest.raises(ValueError):
        PlugInEProcess(0.1, 0.1, "certify", [0.0], BetConfig("wsr"))
    with pytest.raises(ValueError):
        PlugInEProcess(0.1, 0.1, "certify", [1.5], BetConfig())
    with pytest.raises(ValueError):
        one_sided_test(0.1, 0.1, "certify", [0.0], BetConfig(), initial_weights=None,
                     e_process=object())  # type: ignore[arg-type]
    st = PlugInEProcess(0.1, 0.1, "certify", [0.0], BetConfig()).to_state()
    st["cells"] = [1.0]
    with pytest.raises(ValueError, match="cells"):
        PlugInEProcess.from_state(st)
    with pytest.raises(ValueError, match=r"losses|human"):
        one_sided_test(0.1, 0.1, "certify", [0.0], BetConfig()).update(1.5, 0.0, None)


# ---------------------------------------------------------------- validity at the null boundary

CASES = {
    "bernoulli-good": make_draw(0.12, 0.9),
    "bernoulli-useless": make_draw(0.12, 0.0),
    "bernoulli-biased": make_draw(0.12, 0.9, bias=0.15),
    "beta-good": make_draw(0.12, 0.9, "beta"),
    "beta-biased": make_draw(0.12, 0.7, "beta", bias=0.3),
}


@pytest.mark.statistical
@pytest.mark.parametrize("case", sorted(CASES))
def test_null_boundary_validity(case: str) -> None:
    # risk = alpha exactly: the hardest null of both sides; the bets do not depend on delta,
    # so the running maximum checks every delta at once
    reps, horizon = 1000, 800
    best = run_batch(CASES[case], 0.12, reps, horizon, seed=sorted(CASES).index(case) + 10)
    for (m, s), mx in best.items():
        for delta in (0.2, 0.1, 0.05):
            k = int((mx >= math.log(1 / delta)).sum())
            lower = clopper_pearson_lower(k, reps, 0.999)
            assert lower <= delta, (case, m, s, delta, k / reps)


# ---------------------------------------------------------------- power


@pytest.mark.statistical
def test_power_near_the_clairvoyant_bettor() -> None:
    # Example 1 of R-AutoEval+ (risk 0.1, alpha 0.12, r = 10, gamma 0.9): the clairvoyant
    # bettor needs 1412 labels at delta 0.01 (benchmarks/labels_vs_oracle.py); target <= 1.4x
    rng = np.random.default_rng(6)
    reps, alpha = 200, 0.12
    p_f = 0.1 * 0.9 + 0.9 * 0.1

    runs = PlugInBatch(alpha, "certify", method_rhos("r_autoeval_plus").tolist(), BetConfig(),
                       reps)
    crossed = np.zeros(reps, dtype=int)
    for t in range(1, 2001):
        h = (rng.random(reps) < 0.1).astype(float)
        f = np.where(rng.random(reps) < 0.9, h, 1.0 - h)
        b = rng.binomial(10, p_f, reps) / 10.0
        runs.advance(h, b - f)
        crossed[(crossed == 0) & (runs.log_wealth >= math.log(100))] = t
    crossed[crossed == 0] = 10**9
    assert np.median(crossed) <= 1.4 * 1412
