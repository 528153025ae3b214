"""Monte Carlo validity: at the null boundary (risk exactly alpha) no method crosses 1/delta
with probability significantly above delta, for both sides, both bet rules, Bernoulli and
Beta losses, good and bad judges.

The simulation is vectorized over (repetitions, rhos). With ``rhos = linspace(0, 1, S)`` the
row ``rho = 0`` is exactly the R-Eval e-process and the row ``rho = 1`` exactly the R-AutoEval
one (each row's bets depend only on its own past), so one pass checks all three methods; the
simulator is cross-checked against the real classes on a few paths.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

from monitor.stats.betting.autoeval import method_rhos, one_sided_test
from monitor.stats.betting.bets import BetConfig, bet_cap, up_grid, wsr_scale
from tests.stats.binomial import clopper_pearson_lower

Draw = Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray]]
SIDES = ("certify", "violate")


@dataclass
class SimResult:
    # side -> first crossing round (1-based, 0 = never), shape (reps,) / (reps, S)
    cross_mix: dict[str, np.ndarray]
    cross_rows: dict[str, np.ndarray]
    log_e: dict[str, list[np.ndarray]] = field(default_factory=dict)       # side -> T x (reps,)
    log_rows: dict[str, list[np.ndarray]] = field(default_factory=dict)    # side -> T x (reps, S)
    # side -> (reps, S): first round with log E_s >= log(1/delta) + log(S) (Lemma 1 bound)
    cross_rows_regret: dict[str, np.ndarray] = field(default_factory=dict)


def simulate(draw: Draw, horizon: int, reps: int, rhos: np.ndarray, alpha: float, delta: float,
             bet: BetConfig, record: bool = False, stop_when_all_crossed: bool = False,
             sides: tuple[str, ...] = SIDES) -> SimResult:
    """Vectorized R-Eval/R-AutoEval/R-AutoEval+ e-processes, shape (reps, S), both sides.

    ``draw()`` returns (human, judge, block_mean) arrays of shape (reps,); NaN block = empty.
    Crossing rounds are 1-based, 0 = never. With ``stop_when_all_crossed`` the loop ends once
    every repetition has crossed on the certify side for the mixture and rows 0 and S-1.
    Final log wealths are left in ``res.log_rows`` when ``record`` is False (last round only).
    """
    s = rhos.size
    rh = rhos[None, :]
    lo, hi = -rhos, 1.0 + rhos
    thr = np.log(1.0 / delta)
    logw0 = np.log(np.full(s, 1.0 / s))
    caps = {side: np.array([bet_cap(alpha, a, b, side, bet.c)  # type: ignore[arg-type]
                            for a, b in zip(lo, hi, strict=True)]) for side in SIDES}
    cross_mix = {side: np.zeros(reps, dtype=int) for side in SIDES}
    cross_rows = {side: np.zeros((reps, s), dtype=int) for side in SIDES}
    res = SimResult(cross_mix, cross_rows)
    res.cross_rows_regret = {side: np.zeros((reps, s), dtype=int) for side in SIDES}
    thr_regret = thr + np.log(s)
    logw = {side: np.zeros((reps, s)) for side in SIDES}
    if bet.rule == "wsr":
        msum = np.broadcast_to(0.5 * (lo + hi), (reps, s)).copy()
        vsum = np.broadcast_to(0.25 * (hi - lo) ** 2, (reps, s)).copy()
        k1 = wsr_scale(np.log(1 / delta), 1, bet.horizon)
        bets = {side: np.minimum(caps[side], np.sqrt(k1 / vsum)) for side in SIDES}
    else:
        frac, logp = up_grid(bet.up_grid)
        prior = np.exp(logp)
        full = {side: np.array([bet_cap(alpha, a, b, side, 1.0)  # type: ignore[arg-type]
                                for a, b in zip(lo, hi, strict=True)]) for side in SIDES}
        lamg = {side: full[side][None, :, None] * frac[None, None, :] for side in SIDES}
        wealth = {side: np.ones((reps, s, bet.up_grid)) for side in SIDES}
    for t in range(1, horizon + 1):
        h, f, b = draw()
        d = np.where(np.isnan(b), 0.0, b - f)
        q = h[:, None] + rh * d[:, None]
        for side in sides:
            g = alpha - q if side == "certify" else q - alpha
            if bet.rule == "wsr":
                logw[side] += np.log1p(bets[side] * g)
            else:
                w = wealth[side]
                w *= 1.0 + lamg[side] * g[:, :, None]
                logw[side] = np.log(w @ prior)
            v = logw[side] + logw0
            m = v.max(axis=1)
            mix = m + np.log(np.exp(v - m[:, None]).sum(axis=1))
            new = (cross_mix[side] == 0) & (mix >= thr)
            cross_mix[side][new] = t
            newr = (cross_rows[side] == 0) & (logw[side] >= thr)
            cross_rows[side][newr] = t
            newr = (res.cross_rows_regret[side] == 0) & (logw[side] >= thr_regret)
            res.cross_rows_regret[side][newr] = t
            if record:
                res.log_e.setdefault(side, []).append(mix.copy())
                res.log_rows.setdefault(side, []).append(logw[side].copy())
        if bet.rule == "wsr":
            inv = 1.0 / (t + 1)
            msum += q
            e = q - msum * inv
            vsum += e * e
            k = wsr_scale(np.log(1 / delta), t + 1, bet.horizon) * (t + 1)
            root = np.sqrt(k / vsum)
            bets = {side: np.minimum(root, caps[side]) for side in SIDES}
        if stop_when_all_crossed and np.all(cross_mix["certify"] > 0) and np.all(
                cross_rows["certify"][:, [0, -1]] > 0):
            break
    if not record:
        res.log_rows = {side: [logw[side]] for side in sides}
    return res


def make_draw(rng: np.random.Generator, reps: int, loss: str, risk: float, gamma: float,
              r: int = 10, empty: float = 0.0) -> Draw:
    """Human loss with mean ``risk``; judge agrees w.p. gamma, else reports 1 - loss.

    ``loss="bernoulli"``: Bernoulli(risk). ``loss="beta"``: Beta(risk / (1 - risk), 1), a
    continuous loss with mean ``risk`` piled up near 0, sampled cheaply as U^((1 - risk) / risk).
    """
    power = (1 - risk) / risk

    def losses(shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        if loss == "bernoulli":
            h = (rng.random(shape) < risk).astype(float)
        else:
            h = rng.random(shape) ** power
        f = np.where(rng.random(shape) < gamma, h, 1.0 - h)
        return h, f

    def draw() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        h, f = losses((reps,))
        _, fb = losses((reps, r))
        bm = fb.mean(axis=1)
        if empty:
            bm[rng.random(reps) < empty] = np.nan
        return h, f, bm

    return draw


BETS = {"wsr": BetConfig("wsr"), "up": BetConfig(rule="up", c=0.75, up_grid=16)}


@pytest.mark.parametrize("rule", ["wsr", "up"])
def test_simulator_matches_real_classes(rule: str) -> None:
    bet = BETS[rule]
    reps, horizon, alpha, delta = 3, 120, 0.12, 0.1
    rng = np.random.default_rng(11)
    draw = make_draw(rng, reps, "beta", 0.1, 0.9, empty=0.2)
    data = [draw() for _ in range(horizon)]
    it = iter(data)
    rhos = method_rhos("r_autoeval_plus")
    sim = simulate(lambda: next(it), horizon, reps, rhos, alpha, delta, bet, record=True)
    for side in SIDES:
        for method, col in (("r_eval", 0), ("r_autoeval", -1), ("r_autoeval_plus", None)):
            for rep in range(reps):
                t = one_sided_test(alpha,
                                   delta, side, method_rhos(method), bet)  # type: ignore[arg-type]
                for i, (h, f, b) in enumerate(data):
                    bm = None if np.isnan(b[rep]) else float(b[rep])
                    t.update(float(h[rep]), float(f[rep]), bm)
                    want = (sim.log_e[side][i][rep] if col is None
                            else sim.log_rows[side][i][rep, col])
                    assert t.log_e == pytest.approx(want, rel=1e-9, abs=1e-9)
                crossed = (sim.cross_mix[side][rep] if col is None
                           else sim.cross_rows[side][rep, col])
                assert (t.crossed_at_round or 0) == crossed


CASES = [(rule, loss, gamma) for rule in ("wsr", "up") for loss in ("bernoulli", "beta")
         for gamma in (0.99, 0.7)]


@pytest.mark.statistical
@pytest.mark.parametrize(("rule", "loss", "gamma"), CASES)
def test_type_one_error_at_null_boundary(rule: str, loss: str, gamma: float) -> None:
    reps, horizon, alpha, delta = 2000, 500, 0.12, 0.1
    seed = 1000 + CASES.index((rule, loss, gamma))
    draw = make_draw(np.random.default_rng(seed), reps, loss, alpha, gamma)
    sim = simulate(draw, horizon, reps, method_rhos("r_autoeval_plus"), alpha, delta, BETS[rule])
    for side in SIDES:
        for method, crossed in (("r_eval", sim.cross_rows[side][:, 0]),
                                ("r_autoeval", sim.cross_rows[side][:, -1]),
                                ("r_autoeval_plus", sim.cross_mix[side])):
            k = int((crossed > 0).sum())
            # 48 checks in this family: one-sided 99.9% lower bound must not exceed delta
            lower = clopper_pearson_lower(k, reps, 0.999)
            assert lower < delta, (side, method, k / reps, lower)


@pytest.mark.statistical
def test_power_sanity_alternative() -> None:
    # the same simulator does detect a risk clearly below alpha (guards a vacuous simulator)
    reps, alpha, delta = 200, 0.12, 0.1
    draw = make_draw(np.random.default_rng(5), reps, "bernoulli", 0.04, 0.99)
    sim = simulate(draw, 300, reps, method_rhos("r_autoeval_plus"), alpha, delta, BETS["up"])
    assert (sim.cross_mix["certify"] > 0).mean() > 0.9
    assert (sim.cross_mix["violate"] > 0).mean() < 0.05
