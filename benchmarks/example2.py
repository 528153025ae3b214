"""R-AutoEval+ Example 2: mean number of human labels needed to certify R <= alpha.

Setting (paper Examples 1-2): binary human loss with risk R = 0.1, target alpha = 0.12, a judge
that reports the same loss with probability gamma (else the flipped loss), r = 10 unaudited
judge losses per round, S = 10 reliance factors, universal-portfolio bets with c = 3/4 (the
paper's Example 2 uses UP). Runs the real :func:`monitor.stats.betting.autoeval.one_sided_test` for
R-Eval, R-AutoEval and R-AutoEval+ on the same paths; a run that has not certified by the
horizon counts as the horizon (reported as censored). UP bets do not depend on delta, so one
run per path gives the first crossing of every 1/delta; with ``--bet wsr`` the bets do, and each
delta gets its own run.

    python benchmarks/example2.py [--reps 100] [--horizon 30000] [--bet up|wsr] [--seed 0]

Prints the table and writes benchmarks/out/example2.png.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

from monitor.stats.betting.autoeval import method_rhos, one_sided_test
from monitor.stats.betting.bets import BetConfig

R, ALPHA, R_SYN = 0.1, 0.12, 10
GAMMAS = (0.99, 0.9, 0.7)
DELTAS = (0.1, 0.01, 0.001)
METHODS = ("r_eval", "r_autoeval", "r_autoeval_plus")
LABEL = {"r_eval": "R-Eval", "r_autoeval": "R-AutoEval", "r_autoeval_plus": "R-AutoEval+"}


def path(rng: np.random.Generator, gamma: float, n: int) -> tuple[list[float], list[float],
                                                                   list[float]]:
    h = (rng.random(n) < R).astype(float)
    f = np.where(rng.random(n) < gamma, h, 1.0 - h)
    hb = rng.random((n, R_SYN)) < R
    fb = np.where(rng.random((n, R_SYN)) < gamma, hb, ~hb)
    return h.tolist(), f.tolist(), fb.mean(axis=1).tolist()


def first_crossings(gamma: float, deltas: tuple[float, ...], bet: BetConfig, horizon: int,
                    rng: np.random.Generator) -> dict[str, list[int]]:
    """Labels to certify for each method and delta on one path (horizon if never)."""
    chunk = 2000
    bet_delta = min(deltas)
    tests = {m: one_sided_test(ALPHA,
                               bet_delta, "certify", method_rhos(m), bet)  # type: ignore[arg-type]
             for m in METHODS}
    thr = [math.log(1 / d) for d in deltas]
    out = {m: [horizon] * len(deltas) for m in METHODS}
    active = set(METHODS)
    done = 0
    while active and done < horizon:
        h, f, b = path(rng, gamma, min(chunk, horizon - done))
        for hh, ff, bb in zip(h, f, b, strict=True):
            done += 1
            for m in list(active):
                t = tests[m]
                t.advance(hh, ff, bb)
                le = t.log_e
                for k, th in enumerate(thr):
                    if out[m][k] == horizon and le >= th:
                        out[m][k] = done
                if le >= thr[-1] or out[m][-1] < horizon:
                    active.discard(m)
            if not active:
                break
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description="R-AutoEval+ Example 2 table and plot")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--horizon", type=int, default=30_000)
    ap.add_argument("--bet", choices=("up", "wsr"), default="up")
    ap.add_argument("--up-grid", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "example2.png")
    args = ap.parse_args()
    if args.reps < 2:
        ap.error("--reps must be >= 2 (standard errors)")
    bet = BetConfig(rule=args.bet, c=0.75, up_grid=args.up_grid)
    t0 = time.perf_counter()
    # res[gamma][method] -> array (reps, len(DELTAS))
    res: dict[float, dict[str, np.ndarray]] = {}
    for gi, gamma in enumerate(GAMMAS):
        per: dict[str, list[list[int]]] = {m: [] for m in METHODS}
        for rep in range(args.reps):
            if args.bet == "up":
                rng = np.random.default_rng([args.seed, gi, rep])
                o = first_crossings(gamma, DELTAS, bet, args.horizon, rng)
            else:  # WSR bets depend on delta: one run per delta on the same path (same seed)
                runs = [first_crossings(gamma, (d,), bet, args.horizon,
                                        np.random.default_rng([args.seed, gi, rep]))
                        for d in DELTAS]
                o = {m: [r[m][0] for r in runs] for m in METHODS}
            for m in METHODS:
                per[m].append(o[m])
        res[gamma] = {m: np.array(v, dtype=float) for m, v in per.items()}
    elapsed = time.perf_counter() - t0

    print(f"Example 2: mean human labels to certify R <= {ALPHA} (R = {R}, r = {R_SYN}, S = 10, "
          f"{args.bet.upper()} bets c = 0.75, reps = {args.reps}, horizon = {args.horizon})")
    head = f"{'gamma':>6s} {'delta':>6s} " + " ".join(f"{LABEL[m]:>18s}" for m in METHODS)
    print(head)
    print("-" * len(head))
    for gamma in GAMMAS:
        for k, d in enumerate(DELTAS):
            cells = []
            for m in METHODS:
                x = res[gamma][m][:, k]
                cens = int((x >= args.horizon).sum())
                cell = f"{x.mean():7.0f} ± {x.std(ddof=1) / math.sqrt(x.size):4.0f}"
                cells.append(f"{cell}{'*' if cens else ' ':1s}".rjust(18))
            print(f"{gamma:6.2f} {d:6.3f} " + " ".join(cells))
    print("(mean ± standard error; * = some runs censored at the horizon)")
    print(f"elapsed {elapsed:.0f} s")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8), sharey=False)
    xs = [math.log(1 / d) for d in DELTAS]
    for ax, gamma in zip(axes, GAMMAS, strict=True):
        for m in METHODS:
            v = res[gamma][m]
            ax.errorbar(xs, v.mean(axis=0), yerr=v.std(axis=0, ddof=1) / math.sqrt(len(v)),
                        marker="o", capsize=3, label=LABEL[m])
        ax.set_title(f"gamma = {gamma}")
        ax.set_xlabel("log(1/delta)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("mean human labels to certify")
    axes[0].legend()
    fig.suptitle(f"R-AutoEval+ Example 2 (R={R}, alpha={ALPHA}, r={R_SYN}, S=10, "
                 f"{args.bet.upper()}, {args.reps} reps)")
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
