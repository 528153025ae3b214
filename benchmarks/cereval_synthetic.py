"""Reproduce Cer-Eval Section 6.1 (synthetic S1-S3): saving ratio vs the static baseline.

Base evaluates all n points (CI radius eps* = sqrt(log(1/delta) / (2n))). For each target
epsilon in [eps*, 0.1] an online method stops at the first label count whose certified radius is
<= epsilon; saving = 1 - labels / n (0 if the radius never reaches epsilon within n labels).
Failure = the true risk R is outside [R_hat - eps_hat, R_hat + eps_hat] at that stopping time.

Methods: Seq (Algorithm 3), Cer-Eval (Algorithm 1 with the Algorithm 2 1-NN partition, re-fitted
whenever the labelled set grew by --refit-growth; the paper re-fits every step), Oracle (Algorithm 1
with the true groups), and Oracle-tight (same with log factor 5 pi^2 / 6 instead of 16).

    python benchmarks/cereval_synthetic.py                      # 5 reps, band truncation, <= 5 min
    python benchmarks/cereval_synthetic.py --reps 20            # the paper's 20 reps
    python benchmarks/cereval_synthetic.py --truncation unit    # losses truncated to [0, 1]
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from statistics import NormalDist

import numpy as np

from monitor.stats.cereval.partition import fit_knn_partition
from monitor.stats.cereval.stitched_radii import MIN_LOG_FACTOR, bernstein_radius, hoeffding_radius

SCENARIOS = {"S1": (1, 5.0), "S2": (3, 5.0), "S3": (3, 1.0)}  # K, lambda


def truncnorm_mean(mu: float, sd: float, lo: float = 0.0, hi: float = 1.0) -> float:
    nd = NormalDist()
    a, b = (lo - mu) / sd, (hi - mu) / sd
    return mu + sd * (nd.pdf(a) - nd.pdf(b)) / (nd.cdf(b) - nd.cdf(a))


def bounds(j: int, k: int, truncation: str) -> tuple[float, float]:
    return (j / k, (j + 1) / k) if truncation == "band" else (0.0, 1.0)


def make_data(rng: np.random.Generator, k: int, lam: float, n: int, truncation: str,
              d: int = 10) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    sizes = [n // k + (1 if j < n % k else 0) for j in range(k)]
    groups = np.repeat(np.arange(k), sizes)
    x = rng.standard_normal((n, d))
    x[:, 0] += lam * (groups + 1)
    z = np.empty(n)
    for j in range(k):
        mu, sd = (j + 0.5) / k, 1.0 / k
        idx = np.flatnonzero(groups == j)
        out = np.empty(0)
        while out.size < idx.size:
            lo, hi = bounds(j, k, truncation)
            c = rng.normal(mu, sd, 4 * idx.size)
            out = np.r_[out, c[(c >= lo) & (c <= hi)]]
        z[idx] = out[: idx.size]
    r_true = sum(s * truncnorm_mean((j + 0.5) / k, 1.0 / k, *bounds(j, k, truncation))
                 for j, s in enumerate(sizes)) / n
    return x, z, groups, r_true


def first_crossing(radii: np.ndarray, est: np.ndarray, eps_grid: np.ndarray, r_true: float,
                   n: int) -> tuple[np.ndarray, np.ndarray]:
    """Labels used and failure flag per epsilon, from the radius / estimate paths."""
    used = np.full(eps_grid.size, n, dtype=float)
    fail = np.zeros(eps_grid.size, dtype=bool)
    for i, e in enumerate(eps_grid):
        hit = np.flatnonzero(radii <= e)
        t = hit[0] if hit.size else radii.size - 1
        used[i] = (t + 1) if hit.size else n
        fail[i] = abs(est[t] - r_true) > radii[t]
    return used, fail


def run_partitioned(rng: np.random.Generator, z: np.ndarray, strata: np.ndarray | None,
                    x: np.ndarray | None, delta: float, c: float, warm: int, growth: float,
                    stop_radius: float) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 1. strata given -> Oracle; else 1-NN partition (Algorithm 2) re-fitted."""
    n = z.size
    labelled = np.zeros(n, dtype=bool)
    order: list[int] = []
    radii = np.full(n, np.inf)
    ests = np.full(n, 0.5)
    first = rng.choice(n, warm, replace=False)
    for i in first:
        labelled[i] = True
        order.append(int(i))
    st = strata
    last_fit = 0
    while True:
        if strata is None and (len(order) >= last_fit * (1 + growth)):
            assert x is not None
            lab = np.array(order)
            fit = fit_knn_partition(x, x[lab], z[lab], delta, rng, log_factor=c,
                                    labelled_rows=lab)
            st = fit.pool_strata
            last_fit = len(order)
        assert st is not None
        k = int(st.max()) + 1
        lab = np.array(order)
        cnt = np.bincount(st[lab], minlength=k).astype(float)
        sm = np.bincount(st[lab], weights=z[lab], minlength=k)
        sq = np.bincount(st[lab], weights=z[lab] ** 2, minlength=k)
        big = np.bincount(st, minlength=k).astype(float)
        w = big / n
        pools = [list(rng.permutation(np.flatnonzero((st == j) & ~labelled))) for j in range(k)]
        left = np.array([len(p) for p in pools])
        stop_at = n if strata is not None else max(last_fit * (1 + growth), last_fit + 1)
        occ = w > 0
        while len(order) < n and len(order) < stop_at:
            with np.errstate(divide="ignore", invalid="ignore"):
                mean = np.where(cnt > 0, sm / cnt, 0.5)
                var = np.where(cnt > 0, np.maximum(sq / cnt - mean**2, 0.0), 0.0)
            both = bernstein_radius(np.r_[cnt, cnt + 1], np.r_[var, var], delta, k, c)
            eps, nxt = both[:k], both[k:]
            t = len(order) - 1
            radii[t] = float(np.sum(w[occ] * eps[occ]))
            ests[t] = float(np.sum(w * mean))
            if radii[t] <= stop_radius:  # Algorithm 1 step 4 at the smallest epsilon
                return radii, ests
            with np.errstate(invalid="ignore"):
                gain = np.where(cnt > 0, w * (eps - nxt), np.where(occ, np.inf, -1.0))
            gain = np.where(left > 0, gain, -np.inf)
            j = int(np.argmax(gain))
            i = int(pools[j].pop())
            left[j] -= 1
            labelled[i] = True
            order.append(i)
            cnt[j] += 1
            sm[j] += z[i]
            sq[j] += z[i] ** 2
        if len(order) >= n:
            t = n - 1
            with np.errstate(divide="ignore", invalid="ignore"):
                mean = np.where(cnt > 0, sm / cnt, 0.5)
                var = np.where(cnt > 0, np.maximum(sq / cnt - mean**2, 0.0), 0.0)
            eps = bernstein_radius(cnt, var, delta, k, c)
            radii[t] = float(np.sum(w[w > 0] * eps[w > 0]))
            ests[t] = float(np.sum(w * mean))
            return radii, ests


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=5, help="paper: 20")
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--delta", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--warm", type=int, default=100)
    ap.add_argument("--refit-growth", type=float, default=0.2,
                    help="re-fit the 1-NN partition when the labelled set grew by this fraction")
    ap.add_argument("--scenarios", default="S1,S2,S3")
    ap.add_argument("--truncation", choices=["band", "unit"], default="band",
                    help="loss of group k truncated to [(k-1)/K, k/K] (band, as in Example 5.4) "
                         "or to [0, 1] (unit)")
    ap.add_argument("--out", default="benchmarks/out")
    args = ap.parse_args()
    n, delta = args.n, args.delta
    eps_star = math.sqrt(math.log(1 / delta) / (2 * n))
    grid = np.array([eps_star, 0.02, 0.025, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.1])
    methods = ["Seq", "Cer-Eval", "Oracle", "Oracle-tight"]
    results: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    t0 = time.perf_counter()
    for name in args.scenarios.split(","):
        k, lam = SCENARIOS[name]
        rng = np.random.default_rng([args.seed, int(name[1])])
        used = {m: np.zeros((args.reps, grid.size)) for m in methods}
        fail = {m: np.zeros((args.reps, grid.size), dtype=bool) for m in methods}
        for r in range(args.reps):
            x, z, groups, r_true = make_data(rng, k, lam, n, args.truncation)
            perm = rng.permutation(n)
            seq_rad = hoeffding_radius(np.arange(1, n + 1), delta)
            seq_est = np.cumsum(z[perm]) / np.arange(1, n + 1)
            used["Seq"][r], fail["Seq"][r] = first_crossing(seq_rad, seq_est, grid, r_true, n)
            for m, st, c in (("Cer-Eval", None, 16.0), ("Oracle", groups, 16.0),
                             ("Oracle-tight", groups, MIN_LOG_FACTOR)):
                rad, est = run_partitioned(rng, z, st, x, delta, c, args.warm,
                                           args.refit_growth, float(grid.min()))
                used[m][r], fail[m][r] = first_crossing(rad, est, grid, r_true, n)
        results[name] = {m: (used[m], fail[m]) for m in methods}
        print(f"\n{name}: K={k}, lambda={lam}, n={n}, delta={delta}, reps={args.reps}, "
              f"truncation={args.truncation} "
              f"(eps*={eps_star:.4f}; elapsed {time.perf_counter() - t0:.0f}s)")
        print("saving ratio % (mean over reps; 0 = radius not reached within n labels)")
        print("  eps   " + "".join(f"{m:>14}" for m in methods))
        for i, e in enumerate(grid):
            row = "".join(f"{100 * (1 - used[m][:, i].mean() / n):14.1f}" for m in methods)
            print(f" {e:.4f}{row}")
        print("empirical failure probability (R outside the interval at stopping, any eps): "
              + ", ".join(f"{m} {fail[m].any(axis=1).mean():.3f}" for m in methods))
    print(f"\ntotal time {time.perf_counter() - t0:.0f}s")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 4), squeeze=False)
    for ax, (name, res) in zip(axes[0], results.items(), strict=True):
        for m in methods:
            ax.plot(grid, 100 * (1 - res[m][0].mean(axis=0) / n), marker="o", label=m)
        ax.set_title(f"{name}")
        ax.set_xlabel("epsilon")
        ax.set_ylabel("saving vs Base (%)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    png = out / f"cereval_synthetic_{args.truncation}.png"
    fig.savefig(png, dpi=120)
    print(f"saved {png}")


if __name__ == "__main__":
    main()
