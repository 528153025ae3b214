"""Labels to certify, per bet rule, divided by the clairvoyant bettor's figure.

R-AutoEval+ Example 1 streams (risk 0.1, alpha 0.12, r = 10 unaudited judge events per label,
judge agreement gamma: the judge loss equals the human loss with probability gamma, else its
flip; block mean ``b = Binomial(10, p_f) / 10``), certify side. For each gamma in
{0.99, 0.9, 0.7} and delta in {0.1, 0.01, 0.001} it prints the median number of labels to
certify over ``--reps`` repetitions (default 200) divided by the clairvoyant figure
``log(1/delta) / max_rho g*(rho)``, where ``g*(rho) = max_lam E log(1 - lam (q_rho - alpha))``
is computed exactly for these discrete losses. Rules (R-AutoEval+, 10 rhos):

- ``old default``: anytime WSR, c = 1/2, wealth-weighted mixture over 10 rhos (before plugin_up);
- ``plugin_up`` (the default): plug-in reliance, universal portfolio over fixed bets, c = 0.95,
  with the judge prior while every human loss seen was 0 (``plugin_rho``) and the switch cell
  (``cap_switch``; without it: ``benchmarks/plugin_gap.py``, column ``no switch``);
- ``no prior``: the same without the judge prior (an earlier default had neither);
- ``start 1``: a study variant, not adopted: ``no prior`` with the reliance at rho = 1
  from the start and while the human losses have not varied;
- ``UP``: the paper's universal portfolio over the whole bet range (``--up-grid`` cells,
  default 100 here for speed; the config default is 1000), mixture over 10 rhos;
- ``paper fixed-n``: WSR with c = 3/4 and horizon = the clairvoyant figure (told the horizon).

and R-Eval (rho = 0) for the old and the new default, divided by R-Eval's own clairvoyant
figure; ``plus / best fixed`` divides plugin_up's median by the smaller of R-Eval's and
R-AutoEval's (rho fixed at 0 and 1, plugin_up bets). ``--low-risk`` adds streams of the same
form at lower risks (risk 0.05 and 0.01, alpha 0.1), also against the clairvoyant limited to the
cap c = 0.95 (where ``start 1`` loses). A last table uses Beta losses
(``l ~ Beta(1/2, 4.5)``, judge equal to ``l`` with probability gamma, else an independent draw;
clairvoyant by Monte Carlo over 200k draws).

Active audits (``audit_policy = "active"``; the streams, judges and bettors of
``benchmarks/active_audit.py``: budget 0.1, alpha 0.13, certify side, a ``calibrated`` judge with
85% of scores at 0.01, 5% at 0.95 and 10% at 0.5, and an ``uninformative`` one, every score
0.106): for delta 0.1, 0.01 and 0.001, the median labels to certify over ``--active-reps`` runs
(default 200) of

- ``active`` (:class:`~monitor.stats.betting.active.ActiveBatch`), divided by its clairvoyant:
  the best fixed policy (among the candidates), reliance (0.01 grid) and bet (whole range) in
  hindsight, ``mean_pi log(1/delta) / g*`` with ``g*`` the exact expected log growth per judged
  unit (a drift approximation: a ratio can fall below 1);
- uniform R-AutoEval+ (``plugin_up``, one round per label) on the same judge, divided by its own
  clairvoyant (``q_rho`` of its rounds by Monte Carlo over 200k rounds);
- ``active / uniform``, against issue 29's targets (calibrated at most 0.85, uninformative at
  most 1.05).

With matplotlib installed it writes ``deploy/img/labels_vs_oracle.png`` (top: Example 1; bottom:
active audits).

Run: ``python benchmarks/labels_vs_oracle.py`` (Example 1, 200 runs, the active audits, 200
runs, and the plot: 50 s to 2 minutes on 2 busy cores); ``--beta`` adds the
Beta table (several more minutes); ``--quick`` for a smoke run (40 runs each, no plot);
``--active-reps 0`` skips the active audits.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np

from monitor.stats.betting.active_growth import POLICIES, propensity_u, solve_scale, uncertainty
from monitor.stats.betting.bets import BetConfig, up_grid, wsr_scale

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.support
from benchmarks.active_audit import (
    BUDGET,
    JUDGES,
    ipw_labels,
    judge_bins,
    plugin_labels,
    plugin_round,
)
from tests.support.plugin_batch import PlugInBatch

ALPHA, RISK, R = 0.12, 0.1, 10
GAMMAS = (0.99, 0.9, 0.7)
DELTAS = (0.1, 0.01, 0.001)
RHOS = np.linspace(0.0, 1.0, 10)
Data = tuple[np.ndarray, np.ndarray]  # human (T, reps), shift d = b - f (T, reps)


# ---------------------------------------------------------------------- clairvoyant
def growth(x: np.ndarray, p: np.ndarray, lam_max: float) -> float:
    """``max_lam E log(1 + lam x)`` over ``0 <= lam < lam_max``.

    ``lam_max`` is the largest bet a bettor may place without knowing the data: ``1 / (M -
    alpha)`` for the range ``[m, M]`` of ``q`` (not the support of a sample of it).
    """
    if float(p @ x) <= 0.0:
        return 0.0
    a, b = 0.0, min(lam_max, 1.0 / max(1e-300, -float(x.min()))) * (1 - 1e-12)
    for _ in range(100):
        m = 0.5 * (a + b)
        if float(p @ (x / (1 + m * x))) > 0:
            a = m
        else:
            b = m
    return float(p @ np.log1p(0.5 * (a + b) * x))


def example1_q(gamma: float, rho: float, risk: float = RISK) -> tuple[np.ndarray, np.ndarray]:
    """Support and probabilities of ``q_rho`` for Example 1 (exact enumeration)."""
    p11, p10 = risk * gamma, risk * (1 - gamma)
    p01, p00 = (1 - risk) * (1 - gamma), (1 - risk) * gamma
    pf = p11 + p01
    k = np.arange(R + 1)
    pk = np.array([math.comb(R, int(i)) for i in k]) * pf**k * (1 - pf) ** (R - k)
    vals, probs = [], []
    for l_, f_, p in ((1, 1, p11), (1, 0, p10), (0, 1, p01), (0, 0, p00)):
        vals.append(l_ + rho * (k / R - f_))
        probs.append(p * pk)
    return np.concatenate(vals), np.concatenate(probs)


def clairvoyant_growth(q_of_rho: Callable[[float], tuple[np.ndarray, np.ndarray]],
                       alpha: float = ALPHA, c: float = 1.0) -> tuple[float, float]:
    """``(max_rho g*(rho), g*(0))`` on a 0.01 rho grid (certify side), bets below ``c / (M -
    alpha)`` (c = 1: the whole range)."""
    rhos = np.linspace(0, 1, 101)
    g = [growth(alpha - v, p, c / (1.0 + float(r) - alpha))
         for r, (v, p) in zip(rhos, (q_of_rho(float(r)) for r in rhos), strict=True)]
    return max(g), g[0]


# ---------------------------------------------------------------------- data
def example1_data(gamma: float, reps: int, horizon: int, seed: int, risk: float = RISK) -> Data:
    rng = np.random.default_rng(seed)
    h = (rng.random((horizon, reps)) < risk).astype(float)
    f = np.where(rng.random((horizon, reps)) < gamma, h, 1.0 - h)
    pf = risk * gamma + (1 - risk) * (1 - gamma)
    b = rng.binomial(R, pf, (horizon, reps)) / R
    return h, b - f


def beta_loss(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.beta(0.5, 4.5, shape)


def beta_judge(rng: np.random.Generator, gamma: float, h: np.ndarray) -> np.ndarray:
    return np.where(rng.random(h.shape) < gamma, h, beta_loss(rng, h.shape))


def beta_data(gamma: float, reps: int, horizon: int, seed: int) -> Data:
    rng = np.random.default_rng(seed)
    h = beta_loss(rng, (horizon, reps))
    f = beta_judge(rng, gamma, h)
    blk = beta_judge(rng, gamma, beta_loss(rng, (horizon, reps, R))).mean(axis=2)
    return h, blk - f


def beta_q(gamma: float, n: int = 200_000) -> Callable[[float], tuple[np.ndarray, np.ndarray]]:
    h, d = beta_data(gamma, n, 1, seed=99)
    p = np.full(n, 1.0 / n)
    return lambda rho: ((h + rho * d)[0], p)


# ---------------------------------------------------------------------- bettors
def first_cross(log_e: np.ndarray, thr: float, t: int, out: np.ndarray) -> None:
    out[(out == 0) & (log_e >= thr)] = t


def run_plugin(data: Data, rhos: list[float], thrs: list[float], alpha: float = ALPHA,
               variant: str = "") -> list[np.ndarray]:
    """Crossing rounds of plugin_up; ``variant`` "no prior" or "start 1" (see the module doc)."""
    h, d = data
    b = PlugInBatch(alpha, "certify", rhos, BetConfig(), h.shape[1],
                    judge_prior=False if variant else None,
                    start=1.0 if variant == "start 1" else None)
    out = [np.zeros(h.shape[1], dtype=int) for _ in thrs]
    for t in range(h.shape[0]):
        b.advance(h[t], d[t])
        lw = b.log_wealth
        for o, thr in zip(out, thrs, strict=True):
            first_cross(lw, thr, t + 1, o)
        if all((o > 0).mean() > 0.5 for o in out):
            break
    return out


def run_wsr(data: Data, delta: float, c: float, horizon: int | None) -> tuple[np.ndarray, ...]:
    """Mixture over RHOS and its rho = 0 row: crossing rounds (0 = not within the data)."""
    h, d = data
    reps = h.shape[1]
    lo, hi = -RHOS, 1 + RHOS
    cap = c / (hi - ALPHA)
    ms = np.tile(0.5 * (lo + hi), (reps, 1))
    vs = np.tile(0.25 * (hi - lo) ** 2, (reps, 1))
    lw = np.zeros((reps, RHOS.size))
    thr = math.log(1 / delta)
    lid = math.log(1 / delta)
    bet = np.minimum(cap, np.sqrt(wsr_scale(lid, 1, horizon) / vs))
    mix, row0 = np.zeros(reps, dtype=int), np.zeros(reps, dtype=int)
    for t in range(1, h.shape[0] + 1):
        q = h[t - 1][:, None] + RHOS[None, :] * d[t - 1][:, None]
        lw += np.log1p(bet * (ALPHA - q))
        ms += q
        e = q - ms / (t + 1)
        vs += e * e
        bet = np.minimum(cap, np.sqrt(wsr_scale(lid, t + 1, horizon) * (t + 1) / vs))
        m = lw.max(axis=1)
        first_cross(m + np.log(np.exp(lw - m[:, None]).mean(axis=1)), thr, t, mix)
        first_cross(lw[:, 0], thr, t, row0)
        if (mix > 0).mean() > 0.5 and (row0 > 0).mean() > 0.5:
            break
    return mix, row0


def run_up(data: Data, grid: int, thrs: list[float]) -> list[np.ndarray]:
    """The paper's UP over the whole range, per rho, mixed over RHOS (certify)."""
    h, d = data
    reps = h.shape[1]
    frac, logp = up_grid(grid)
    lam = (1.0 / (1 + RHOS - ALPHA))[:, None] * frac[None, :]            # (S, G)
    lw = np.zeros((reps, RHOS.size, grid))
    out = [np.zeros(reps, dtype=int) for _ in thrs]
    for t in range(1, h.shape[0] + 1):
        q = h[t - 1][:, None] + RHOS[None, :] * d[t - 1][:, None]
        lw += np.log1p(lam[None] * (ALPHA - q)[:, :, None])
        v = (lw + logp).reshape(reps, -1)
        m = v.max(axis=1)
        mix = m + np.log(np.exp(v - m[:, None]).sum(axis=1)) - math.log(RHOS.size)
        for o, thr in zip(out, thrs, strict=True):
            first_cross(mix, thr, t, o)
        if all((o > 0).mean() > 0.5 for o in out):
            break
    return out


def median(x: np.ndarray) -> float:
    """Median crossing round; inf when half the repetitions never crossed."""
    y = np.where(x > 0, x, np.inf).astype(float)
    return float(np.median(y))


# ---------------------------------------------------------------------- tables
def scenario(name: str, gamma: float, make: Callable[[int, int], Data], g_best: float,
             g_eval: float, reps: int, up_cells: int, with_up: bool) -> list[dict[str, object]]:
    thrs = [math.log(1 / dl) for dl in DELTAS]
    horizon = int(4.0 * math.log(1 / min(DELTAS)) / g_eval) + 200
    data = make(reps, horizon)
    plus = run_plugin(data, RHOS.tolist(), thrs)
    before = run_plugin(data, RHOS.tolist(), thrs, variant="no prior")
    start1 = run_plugin(data, RHOS.tolist(), thrs, variant="start 1")
    reval = run_plugin(data, [0.0], thrs)
    rauto = run_plugin(data, [1.0], thrs)
    up = run_up(data, up_cells, thrs) if with_up else [np.zeros(reps, dtype=int)] * 3
    rows = []
    for k, dl in enumerate(DELTAS):
        oracle, oracle0 = thrs[k] / g_best, thrs[k] / g_eval
        old, old0 = run_wsr(data, dl, 0.5, None)
        paper, _ = run_wsr(data, dl, 0.75, max(1, round(oracle)))
        rows.append({
            "scenario": name, "gamma": gamma, "delta": dl, "oracle": oracle, "oracle0": oracle0,
            "old": median(old) / oracle, "new": median(plus[k]) / oracle,
            "before": median(before[k]) / oracle, "start1": median(start1[k]) / oracle,
            "plus_vs_fixed": median(plus[k]) / min(median(reval[k]), median(rauto[k])),
            "before_vs_fixed": median(before[k]) / min(median(reval[k]), median(rauto[k])),
            "start1_vs_fixed": median(start1[k]) / min(median(reval[k]), median(rauto[k])),
            "up": median(up[k]) / oracle if with_up else math.nan,
            "paper": median(paper) / oracle,
            "reval_old": median(old0) / oracle0, "reval_new": median(reval[k]) / oracle0,
            "plus_vs_reval": median(plus[k]) / median(reval[k]),
            "new_vs_paper": median(plus[k]) / median(paper),
        })
    return rows


def fmt(v: object) -> str:
    return "-" if not isinstance(v, float) or math.isnan(v) else f"{v:.2f}x"


def print_table(title: str, rows: list[dict[str, object]]) -> None:
    print(f"\n### {title}\n")
    print("| gamma | delta | clairvoyant (R-Eval) | old default | **plugin_up** | no prior | "
          "start 1 | UP | paper fixed-n | R-Eval old | **R-Eval plugin_up** | plus / R-Eval | "
          "plus / paper | **plus / best fixed** | no prior / best fixed | start 1 / best fixed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['gamma']} | {r['delta']} | {r['oracle']:.0f} ({r['oracle0']:.0f}) | "
              f"{r['old']:.2f}x | **{r['new']:.2f}x** | {r['before']:.2f}x | "
              f"{r['start1']:.2f}x | {fmt(r['up'])} | "
              f"{r['paper']:.2f}x | {r['reval_old']:.2f}x | **{r['reval_new']:.2f}x** | "
              f"{r['plus_vs_reval']:.2f} | {r['new_vs_paper']:.2f} | "
              f"**{r['plus_vs_fixed']:.2f}** | {r['before_vs_fixed']:.2f} | "
              f"{r['start1_vs_fixed']:.2f} |")


LOW_RISK = ((0.05, 0.1, 0.99), (0.01, 0.1, 0.99), (0.01, 0.1, 0.7),
            (0.02, 0.3, 0.9))  # risk, alpha, gamma


def low_risk(reps: int, seed: int) -> None:
    """Labels / clairvoyant (whole range; capped at c = 0.95) and / the better fixed reliance."""
    thrs = [math.log(1 / dl) for dl in DELTAS]
    print(f"\n### Lower risks, certify side, {reps} repetitions (median labels / clairvoyant "
          "(/ clairvoyant with bets capped at c = 0.95); [/ the better of R-Eval and "
          "R-AutoEval])\n")
    print("| risk | alpha | gamma | delta | clairvoyant (capped) | **plugin_up** | no prior | "
          "start 1 | R-Eval | R-AutoEval |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for i, (risk, alpha, gamma) in enumerate(LOW_RISK):
        def q(rho: float, g: float = gamma, rk: float = risk) -> tuple[np.ndarray, np.ndarray]:
            return example1_q(g, rho, rk)

        gb, g0 = clairvoyant_growth(q, alpha)
        gc, _ = clairvoyant_growth(q, alpha, 0.95)
        data = example1_data(gamma, reps, int(4.0 * thrs[-1] / g0) + 200, seed + i, risk)
        runs = [run_plugin(data, RHOS.tolist(), thrs, alpha),
                run_plugin(data, RHOS.tolist(), thrs, alpha, "no prior"),
                run_plugin(data, RHOS.tolist(), thrs, alpha, "start 1"),
                run_plugin(data, [0.0], thrs, alpha), run_plugin(data, [1.0], thrs, alpha)]
        for k, dl in enumerate(DELTAS):
            o, oc = thrs[k] / gb, thrs[k] / gc
            fixed = min(median(runs[3][k]), median(runs[4][k]))
            cells = [f"{median(v[k]) / o:.2f}x ({median(v[k]) / oc:.2f}x) "
                     f"[{median(v[k]) / fixed:.2f}]" for v in runs]
            cells[0] = f"**{cells[0]}**"
            print(f"| {risk} | {alpha} | {gamma} | {dl} | {o:.0f} ({oc:.0f}) | "
                  + " | ".join(cells) + " |")


# ---------------------------------------------------------------------- active audits
ACTIVE_ALPHA = 0.13
ACTIVE_TARGETS = {"calibrated": 0.85, "uninformative": 1.05}
"""Issue 29's targets: active at most this many times the labels of uniform R-AutoEval+."""


def active_clairvoyant(judge: str, alpha: float) -> tuple[float, float]:
    """The best fixed (policy, reliance, bet) in hindsight under active audits, certify side.

    Returns ``(g*, mean_pi)``: the largest expected log growth per judged unit over the
    candidate policies (:data:`~monitor.stats.betting.active_growth.POLICIES`), reliances on a
    0.01 grid and every bet below ``1 / (1/pi_min - alpha)`` (the whole range of the IPW
    observation ``Y``, as the Example 1 clairvoyant), for the judge's true distribution, and
    that policy's mean propensity (labels per unit). Labels: ``mean_pi log(1/delta) / g*``.
    """
    w, fb, pbin = (a[0] for a in judge_bins(judge))
    u = uncertainty(fb)
    best = (0.0, BUDGET)
    for floor_b, m in POLICIES:
        floor = min(1.0, floor_b * BUDGET)
        k = solve_scale(w, u, BUDGET, np.array(floor), np.array(m))
        pi = propensity_u(u, BUDGET, floor, m, k)
        pi_min = min(1.0, max(floor, m * BUDGET))
        # per bin: not audited, audited with a failure, audited without one
        prob = np.concatenate([w * (1 - pi), w * pi * pbin, w * pi * (1 - pbin)])
        keep = prob > 0
        for rho in np.linspace(0.0, 1.0, 101):
            rf = rho * fb
            y = np.concatenate([rf, rf + (1 - rf) / pi, rf - rf / pi])
            g = growth((alpha - y)[keep], prob[keep], 1.0 / (1.0 / pi_min - alpha))
            if g > best[0]:
                best = (g, float(w @ pi))
    return best


def uniform_q(judge: str, n: int = 200_000) -> Callable[[float], tuple[np.ndarray, np.ndarray]]:
    """``q_rho`` of uniform R-AutoEval+ rounds on a judge stream (Monte Carlo, ``n`` rounds)."""
    hd, count = np.unique(np.stack(plugin_round(judge, np.random.default_rng(98), n)), axis=1,
                          return_counts=True)  # (2, distinct rounds): far fewer than n
    p = count / n
    return lambda rho: (hd[0] + rho * hd[1], p)


def active_rows(reps: int, seed: int, alpha: float = ACTIVE_ALPHA,
                units: int = 60_000) -> list[dict[str, object]]:
    """Active audits against their clairvoyant and uniform R-AutoEval+, per judge and delta."""
    rows: list[dict[str, object]] = []
    for i, judge in enumerate(JUDGES):
        # runs go on to the 0.7 quantile: the bootstrap resamples' medians are then exact
        act = ipw_labels(judge, alpha, DELTAS, reps, units, seed + i, POLICIES, share=0.7)
        uni = plugin_labels(judge, alpha, DELTAS, reps, int(units * BUDGET), seed + 10 + i,
                            share=0.7)
        g_act, mean_pi = active_clairvoyant(judge, alpha)
        g_uni, _ = clairvoyant_growth(uniform_q(judge), alpha)
        for k, dl in enumerate(DELTAS):
            o_act = mean_pi * math.log(1 / dl) / g_act
            o_uni = math.log(1 / dl) / g_uni
            a, un = median(act[k]), median(uni[k])
            rows.append({"judge": judge, "alpha": alpha, "delta": dl, "runs": reps, "active": a,
                         "uniform": un, "oracle_active": o_act, "oracle_uniform": o_uni,
                         "active_vs_oracle": a / o_act, "uniform_vs_oracle": un / o_uni,
                         "active_vs_uniform": a / un,
                         "interval": ratio_interval(act[k], uni[k], seed + k),
                         "target": a / un <= ACTIVE_TARGETS[judge]})
    return rows


def ratio_interval(a: np.ndarray, b: np.ndarray, seed: int, n: int = 2000) -> tuple[float, float]:
    """90% bootstrap interval of ``median(a) / median(b)`` (runs resampled independently)."""
    rng = np.random.default_rng(seed)
    ma = np.median(rng.choice(a, size=(n, a.size)), axis=1)
    mb = np.median(rng.choice(b, size=(n, b.size)), axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):  # tiny runs: inf / inf
        r = ma / mb
    r = r[~np.isnan(r)]
    if r.size == 0:
        return math.nan, math.nan
    return float(np.percentile(r, 5, method="lower")), float(np.percentile(r, 95, method="higher"))


def print_active(rows: list[dict[str, object]], reps: int) -> None:
    print(f"\n### Active audits (budget {BUDGET}, alpha {rows[0]['alpha']}, certify side, "
          f"{reps} runs; median labels; clairvoyant: best fixed policy, reliance and bet in "
          "hindsight)\n")
    print("| judge | delta | active | its clairvoyant | **active / clairvoyant** | "
          "uniform R-AutoEval+ | uniform / its clairvoyant | **active / uniform** (90% "
          "bootstrap) | target |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        lim = ACTIVE_TARGETS[str(r["judge"])]
        lo, hi = cast(tuple[float, float], r["interval"])
        print(f"| {r['judge']} | {r['delta']} | {r['active']:.0f} | {r['oracle_active']:.0f} | "
              f"**{r['active_vs_oracle']:.2f}x** | {r['uniform']:.0f} | "
              f"{r['uniform_vs_oracle']:.2f}x ({r['oracle_uniform']:.0f}) | "
              f"**{r['active_vs_uniform']:.2f}** ({lo:.2f}-{hi:.2f}) | "
              f"{'met' if r['target'] else 'MISSED'} "
              f"(<= {lim}) |")


def plot(rows: list[dict[str, object]], active: list[dict[str, object]], path: Path) -> bool:
    """Example 1 panels (one per gamma) and, with ``active`` rows, one panel per judge."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    ex = [r for r in rows if r["scenario"] == "Example 1"]
    fig, grid = plt.subplots(2 if active else 1, len(GAMMAS), squeeze=False, sharey=True,
                             figsize=(11, 6.8 if active else 3.4))
    axes = grid[0]
    styles = {"old": ("old default (anytime WSR, c=1/2)", "tab:gray", "o"),
              "before": ("plugin_up without judge prior", "tab:purple", "v"),
              "new": ("plugin_up (default)", "tab:blue", "s"),
              "up": ("UP, full range", "tab:green", "^"),
              "paper": ("paper WSR told the horizon", "tab:orange", "D")}
    for ax, g in zip(axes, GAMMAS, strict=True):
        sub = [r for r in ex if r["gamma"] == g]
        xs = [-math.log10(float(r["delta"])) for r in sub]  # type: ignore[arg-type]
        for key, (label, color, marker) in styles.items():
            ax.plot(xs, [r[key] for r in sub], marker=marker, color=color, label=label)
        ax.axhline(1.0, color="black", lw=0.8, ls=":")
        ax.set_title(f"Example 1, judge agreement gamma = {g}", fontsize=9)
        ax.set_xticks(xs, [str(r["delta"]) for r in sub])
        ax.set_xlabel("delta")
    axes[0].set_ylabel("median labels / clairvoyant")
    axes[0].legend(fontsize=7)
    title = ("R-AutoEval+ labels to certify (risk 0.1, alpha 0.12), relative to the "
             "clairvoyant bettor")
    if active:
        active_panels(grid[1], active)
        title = ("Labels to certify relative to the clairvoyant bettor (top: uniform audits, "
                 "Example 1, risk 0.1, alpha 0.12; bottom: active audits)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return True


def active_panels(axes: Any, active: list[dict[str, object]]) -> None:
    """One panel per judge: active and uniform R-AutoEval+ against their clairvoyants."""
    styles = {"active_vs_oracle": ("active / its clairvoyant", "tab:red", "o", "-"),
              "uniform_vs_oracle": ("uniform R-AutoEval+ (plugin_up) / its clairvoyant",
                                    "tab:blue", "s", "-"),
              "active_vs_uniform": ("active / uniform R-AutoEval+ (target: dotted red)",
                                    "tab:red", "x", "--")}
    for ax, judge in zip(axes, JUDGES, strict=False):
        sub = [r for r in active if r["judge"] == judge]
        xs = [-math.log10(float(r["delta"])) for r in sub]  # type: ignore[arg-type]
        for key, (label, color, marker, ls) in styles.items():
            ax.plot(xs, [r[key] for r in sub], marker=marker, color=color, ls=ls, label=label)
        ax.axhline(1.0, color="black", lw=0.8, ls=":")
        ax.axhline(ACTIVE_TARGETS[judge], color="tab:red", lw=0.8, ls=":")
        ax.set_title(f"active audits, {judge} judge", fontsize=9)
        ax.set_xticks(xs, [str(r["delta"]) for r in sub])
        ax.set_xlabel("delta")
    axes[0].set_ylabel("median labels / clairvoyant")
    axes[0].legend(fontsize=7)
    for ax in axes[len(JUDGES):]:
        ax.axis("off")
        ax.text(0.0, 0.5, f"Active audits: budget {BUDGET}, alpha {active[0]['alpha']},\n"
                f"certify side, {active[0]['runs']} runs.\n"
                "Active: labels where the judge is unsure,\n"
                "every judged unit a term (IPW).\nClairvoyant: best fixed policy,\n"
                "reliance and bet in hindsight.\nCalibrated judge: 85% of scores 0.01,\n"
                "5% 0.95, 10% 0.5; uninformative:\nevery score 0.106.", fontsize=8,
                va="center", transform=ax.transAxes)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--up-grid", type=int, default=100)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--quick", action="store_true", help="40 repetitions, no Beta table")
    ap.add_argument("--beta", action="store_true",
                    help="also the Beta table (minutes: not in the default run)")
    ap.add_argument("--no-beta", action="store_true", help="no Beta table (the default)")
    ap.add_argument("--active-reps", type=int, default=200,
                    help="runs of the active-audit table (0: skip it)")
    ap.add_argument("--low-risk", action="store_true",
                    help="also streams at risk 0.05 and 0.01 (alpha 0.1)")
    ap.add_argument("--png", type=Path,
                    default=Path(__file__).resolve().parents[1] / "deploy/img/labels_vs_oracle.png")
    args = ap.parse_args(argv)
    reps = 40 if args.quick else args.reps
    t0 = time.perf_counter()
    rows: list[dict[str, object]] = []
    for i, g in enumerate(GAMMAS):
        gb, g0 = clairvoyant_growth(lambda rho, g=g: example1_q(g, rho))
        rows += scenario("Example 1", g,
                         lambda n, T, g=g, i=i: example1_data(g, n, T, args.seed + i),
                         gb, g0, reps, args.up_grid, True)
    print_table(f"Example 1, Bernoulli losses, certify side, {reps} repetitions (median labels /"
                " clairvoyant)", rows)
    active: list[dict[str, object]] = []
    if args.active_reps > 0:
        active_reps = 40 if args.quick else args.active_reps
        active = active_rows(active_reps, args.seed + 30)
        print_active(active, active_reps)
    if args.low_risk:
        low_risk(reps, args.seed + 20)
    beta: list[dict[str, object]] = []
    if args.beta and not (args.quick or args.no_beta):
        for i, g in enumerate(GAMMAS):
            gb, g0 = clairvoyant_growth(beta_q(g))
            beta += scenario("Beta", g,
                             lambda n, T, g=g, i=i: beta_data(g, n, T, args.seed + 10 + i),
                             gb, g0, reps, args.up_grid, False)
        print_table(f"Beta(1/2, 4.5) losses, certify side, {reps} repetitions (clairvoyant by "
                    "Monte Carlo; UP not run)", beta)
    print(f"\n{time.perf_counter() - t0:.0f} s")
    if not args.quick and plot(rows, active, args.png):
        print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
