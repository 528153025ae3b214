"""Reproduce PULSE's main comparison on a synthetic low-rank benchmark with a historical split.

Usage::

    python benchmarks/pulse_reproduction.py                 # default (<= ~8 min on 2 cores)
    python benchmarks/pulse_reproduction.py --reps 20 --models 100 --examples 1000   # quick

For each top-2 gap (default 0.02 and 0.03) a fixed binary score matrix is drawn from a logistic
low-rank model; ``--hist`` models are a fully observed historical split used to learn frozen
example factors; the test pool keeps the best model, the model whose gap to it is closest to the
target, and the next best models below that. PULSE, UCB-E (observations only) and naive pooling
(predictions as truth) run ``--reps`` times each with different seeds; we record the leader after
every pull, and report Accuracy@budget (P(leader == true best)) with standard errors and the budget
needed for 95% accuracy (first grid budget where the mean accuracy reaches 0.95; bootstrap SE).
Ratios are against UCB-E measured in the same process. A PNG goes to benchmarks/out/.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

# One BLAS thread: the refits are many small GEMMs; threading only thrashes on a shared machine.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

from monitor.stats.pulse.bandit import SelectionBandit, SelectionConfig
from monitor.stats.pulse.lowrank import LogisticLowRank, fit_logistic_factors, sigmoid

# label -> (method, lambda rule)
METHODS = {
    "PULSE (lambda: calibration slope)": ("pulse", "regression"),
    "PULSE (lambda: Step 3, eq. 27)": ("pulse", "paper"),
    "UCB-E (observations only)": ("ucbe", "zero"),
    "Naive pooling": ("naive", "regression"),
}


def make_benchmark(n_examples: int, n_hist: int, n_pool: int, n_models: int, gap: float,
                   true_rank: int, seed: int, easiness_sd: float = 2.5, skill_sd: float = 1.0,
                   ability_sd: float = 0.4) -> tuple[np.ndarray, np.ndarray]:
    """Return (historical scores (n_hist, n), test scores (n_models, n)); row 0 is the best.

    ``logit P(S_ij = 1) = a_i + b_j + u_i . v_j`` with ability ``a_i``, easiness ``b_j`` and a
    rank-``true_rank`` skill interaction; scores are one Bernoulli draw (fixed thereafter).
    """
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n_examples, true_rank)) / np.sqrt(true_rank)
    b = rng.normal(0.5, easiness_sd, n_examples)

    def models(k: int) -> np.ndarray:
        u = skill_sd * rng.standard_normal((k, true_rank))
        a = rng.normal(0.5, ability_sd, k)
        p = sigmoid(a[:, None] + b[None, :] + u @ v.T)
        return (rng.random(p.shape) < p).astype(np.float64)

    hist = models(n_hist)
    pool = models(n_pool)
    mu = pool.mean(axis=1)
    order = np.argsort(-mu, kind="stable")
    top = order[0]
    rest = order[1:]
    second = rest[np.argmin(np.abs(mu[top] - mu[rest] - gap))]
    below = [i for i in order if mu[i] <= mu[second] and i not in (top, second)]
    chosen = [top, second, *below[: n_models - 2]]
    return hist, pool[np.asarray(chosen)]


def run_once(method: str, scores: np.ndarray, v: np.ndarray, budget: int, batch: int,
             tau: int, l2: float, seed: int, grid: np.ndarray,
             lambda_rule: str = "regression") -> tuple[np.ndarray, float, int]:
    """Return (correct-at-grid bool array, refit flops per refit, refits).

    ``correct[g]`` is whether the leader is the true best right after the first completed pull
    with ``calls >= grid[g]`` (so up to ``batch - 1`` calls late).
    """
    m, n = scores.shape
    cfg = SelectionConfig.from_dict({
        "method": method, "batch_size": batch, "budget": budget, "refit_every": tau, "l2": l2,
        "certify": False, "seed": seed, "lambda_rule": lambda_rule})
    bandit = SelectionBandit(cfg, m, n, example_factors=None if method == "ucbe" else v)
    correct = np.zeros(grid.size, dtype=bool)
    g = 0
    while g < grid.size:
        reqs = bandit.next_requests(1)
        if not reqs:
            break
        for model, ids in reqs:
            bandit.update_many(model, ids, scores[model, ids])
        done = bandit.calls_completed
        lead_ok = bandit.leader == 0
        while g < grid.size and grid[g] <= done:
            correct[g] = lead_ok
            g += 1
    if g < grid.size:
        correct[g:] = bandit.leader == 0
    per = bandit.refit_cost.flops / max(bandit.refits, 1)
    return correct, per, bandit.refits


def budget_for(acc: np.ndarray, grid: np.ndarray, target: float = 0.95) -> float:
    ok = np.flatnonzero(acc >= target)
    return float(grid[ok[0]]) if ok.size else float("nan")


def refit_wall_time(v: np.ndarray, scores: np.ndarray, rows: int, obs_per_model: int,
                    l2: float, seed: int = 0) -> float:
    """Median seconds of one frozen-V refit of ``rows`` models (warm-started, as in the loop)."""
    rng = np.random.default_rng(seed)
    m, n = scores.shape
    mask = np.zeros((m, n), dtype=bool)
    for i in range(m):
        mask[i, rng.choice(n, obs_per_model, replace=False)] = True
    lr = LogisticLowRank(m, v, l2=l2)
    lr.refit(scores, mask)
    times = []
    for _ in range(5):
        sel = rng.choice(m, rows, replace=False)
        for i in sel:
            mask[i, rng.choice(np.flatnonzero(~mask[i]), 32, replace=False)] = True
        t0 = time.perf_counter()
        lr.refit(scores, mask, rows=sel)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--models", type=int, default=200)
    ap.add_argument("--examples", type=int, default=2000)
    ap.add_argument("--hist", type=int, default=200)
    ap.add_argument("--pool", type=int, default=600)
    ap.add_argument("--gaps", type=float, nargs="+", default=[0.02, 0.03])
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--true-rank", type=int, default=6)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--tau", type=int, default=25)
    ap.add_argument("--l2", type=float, default=1.0)
    ap.add_argument("--hist-l2", type=float, default=0.01)
    ap.add_argument("--budget-frac", type=float, default=0.16)
    ap.add_argument("--grid", type=int, default=40)
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", default="benchmarks/out/pulse_reproduction.png")
    args = ap.parse_args()

    m, n = args.models, args.examples
    budget = int(args.budget_frac * m * n)
    grid = np.unique(np.linspace(m * args.batch, budget, args.grid).astype(int))
    results: dict[float, dict[str, np.ndarray]] = {}
    rows = []
    t_start = time.perf_counter()
    for gi, gap in enumerate(args.gaps):
        hist, test = make_benchmark(n, args.hist, args.pool, m, gap, args.true_rank,
                                    args.seed + gi)
        mu = test.mean(axis=1)
        t0 = time.perf_counter()
        _, v, hcost = fit_logistic_factors(hist, np.ones_like(hist, dtype=bool), args.rank,
                                           args.hist_l2, seed=args.seed, sweeps=6, max_newton=8)
        t_hist = time.perf_counter() - t0
        t_refit = refit_wall_time(v, test, args.tau, 150, args.l2)
        print(f"gap target {gap}: realized top-2 gap {mu[0] - mu[1]:.4f}, best mu {mu[0]:.4f}, "
              f"models within 0.05 of best: {int((mu[0] - mu < 0.05).sum()) - 1}; historical "
              f"fit {t_hist:.1f}s ({hcost.flops / 1e9:.1f} GFLOP); one refit of tau={args.tau} "
              f"models {1e3 * t_refit:.1f} ms", flush=True)
        results[gap] = {}
        for label in args.methods:
            method, rule = METHODS[label]
            t0 = time.perf_counter()
            acc = np.zeros((args.reps, grid.size), dtype=bool)
            flops, refits = [], []
            for r in range(args.reps):
                acc[r], f, k = run_once(method, test, v, budget, args.batch, args.tau, args.l2,
                                        seed=1000 * gi + r, grid=grid, lambda_rule=rule)
                flops.append(f)
                refits.append(k)
            dt = time.perf_counter() - t0
            results[gap][label] = acc
            mean = acc.mean(axis=0)
            boot = np.random.default_rng(0)
            bs = np.array([budget_for(acc[boot.integers(0, args.reps, args.reps)].mean(axis=0),
                                      grid) for _ in range(300)])
            b95 = budget_for(mean, grid)
            bse = float(np.nanstd(bs)) if np.isfinite(bs).sum() > 1 else float("nan")
            rows.append((gap, label, mean, b95, bse, float(np.mean(flops)),
                         float(np.mean(refits)), dt / args.reps))
            print(f"  {label}: {dt / args.reps:.2f} s/run", flush=True)

    checkpoints = [grid[len(grid) // 8], grid[len(grid) // 4], grid[len(grid) // 2], grid[-1]]
    print(f"\nm={m} models, n={n} examples, batch={args.batch}, tau={args.tau}, "
          f"rank={args.rank}, reps={args.reps}, budget={budget} ({args.budget_frac:.0%} of m*n), "
          f"a=1, T0=1")
    hdr = " | ".join(f"acc@{c}" for c in checkpoints)
    print(f"| gap | method | {hdr} | calls for 95% (boot SE) | vs UCB-E | MFLOP/refit | "
          "refits | s/run |")
    print("|---|---|" + "---|" * (len(checkpoints) + 5))
    base = {gap: b for gap, meth, _, b, *_ in rows if meth.startswith("UCB-E")}
    for gap, meth, mean, b95, bse, fl, rf, spr in rows:
        se = np.sqrt(mean * (1 - mean) / args.reps)
        ix = [int(np.searchsorted(grid, c)) for c in checkpoints]
        cells = " | ".join(f"{mean[i]:.2f}±{se[i]:.2f}" for i in ix)
        ub = base.get(gap, float("nan"))
        ratio = f"{b95 / ub:.2f}" if np.isfinite(b95) and np.isfinite(ub) else "n/a"
        b95s = f"{b95:.0f} ({bse:.0f})" if np.isfinite(b95) else f"> {budget}"
        print(f"| {gap} | {meth} | {cells} | {b95s} | {ratio} | {fl / 1e6:.1f} | {rf:.0f} | "
              f"{spr:.2f} |")
    print(f"total {time.perf_counter() - t_start:.0f}s")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(args.gaps), figsize=(5.5 * len(args.gaps), 4), squeeze=False)
    for ax, gap in zip(axes[0], args.gaps, strict=True):
        for meth in args.methods:
            acc = results[gap][meth]
            mean = acc.mean(axis=0)
            se = np.sqrt(mean * (1 - mean) / args.reps)
            ax.plot(grid, mean, label=meth)
            ax.fill_between(grid, mean - se, mean + se, alpha=0.2)
        ax.axhline(0.95, color="gray", lw=0.5)
        ax.set_title(f"top-2 gap {gap} (m={m}, n={n}, {args.reps} reps)")
        ax.set_xlabel("LLM calls")
        ax.set_ylabel("P(identify best)")
        ax.legend(fontsize=7)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"saved {out}")


if __name__ == "__main__":
    main()
