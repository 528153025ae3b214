"""Reproduce StratPPI Section 5.1 (K = 2 mean estimation): coverage and mean CI width.

Y ~ N(0, 1); judge f = Y + mu_k + sigma_k * eps in stratum k; equal masses; N = 10,000 judge-only
units (5,000 per stratum); alpha = 0.1; n labelled units. The paper gives no numeric mu / sigma, so
the scenarios use: homogeneous mu = (0, 0), sigma = (0.5, 0.5); different bias mu = (-1.5, 1.5),
sigma = (0.5, 0.5); different noise mu = (0, 0), sigma = (0.1, 2.0). A fourth scenario is certmon's
setting (binary human loss, judge loss = a probability; confident judge in stratum 1, unsure in
stratum 2), where the confidence heuristic of eq. 21-22 applies.

Methods: classical (labelled mean), PPI++ (one stratum, plug-in lambda), StratPPI proportional,
StratPPI optimal (oracle rho* of eq. 19 from the true Var(Y - lambda* f)), StratPPI heuristic
(eq. 19 with sigma_hat of eq. 21-22 from unlabelled judge losses; binary scenario only) and
StratPPI plug-in (two-stage: half the labels proportional, the rest to reach eq. 19 with the
labelled residual sd).

    python benchmarks/stratppi_simulation.py                # 1000 reps (the paper's)
    python benchmarks/stratppi_simulation.py --reps 200     # quick
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from statistics import NormalDist

import numpy as np

from monitor.stats.stratppi.allocation import heuristic_sd, optimal_allocation
from monitor.stats.stratppi.estimator import stratified_ppi

GAUSS = {
    "homogeneous": ((0.0, 0.0), (0.5, 0.5)),
    "different bias": ((-1.5, 1.5), (0.5, 0.5)),
    "different noise": ((0.0, 0.0), (0.1, 2.0)),
}
BINARY = "binary judge (confident / unsure)"
W = np.array([0.5, 0.5])


def draw(rng: np.random.Generator, scen: str, k: np.ndarray | int, shape: tuple[int, ...]
         ) -> tuple[np.ndarray, np.ndarray]:
    """Human loss y and judge f for units of stratum k (array broadcast to shape)."""
    if scen == BINARY:
        spread = np.where(np.asarray(k) == 0, 0.45, 0.15)  # stratum 0: p near 0.05 / 0.95
        p = 0.5 + spread * np.sign(rng.random(shape) - 0.5) + 0.05 * (rng.random(shape) - 0.5)
        p = np.clip(p, 0, 1)
        y = (rng.random(shape) < p).astype(float)
        return y, p
    mu, sig = (np.asarray(v)[k] for v in GAUSS[scen])
    y = rng.standard_normal(shape)
    return y, y + mu + sig * rng.standard_normal(shape)


def masked(y: np.ndarray, f: np.ndarray, count: np.ndarray) -> list[np.ndarray]:
    """Labelled moments of the first count[r] columns of row r."""
    m = np.arange(y.shape[1])[None, :] < count[:, None]
    n = count.astype(float)
    my = np.where(m, y, 0).sum(1) / n
    mf = np.where(m, f, 0).sum(1) / n
    dy, df = np.where(m, y - my[:, None], 0), np.where(m, f - mf[:, None], 0)
    return [n, my, mf, (dy**2).sum(1) / (n - 1), (df**2).sum(1) / (n - 1),
            (dy * df).sum(1) / (n - 1)]


def stack(per: list[list[np.ndarray]]) -> list[np.ndarray]:
    return [np.stack([p[i] for p in per], -1) for i in range(len(per[0]))]


def oracle_sd(rng: np.random.Generator, scen: str, big_n: int) -> np.ndarray:
    sds = []
    for k in range(2):
        y, f = draw(rng, scen, k, (400_000,))
        c = np.cov(y, f)
        lam = c[0, 1] / ((1 + 0.0 / big_n) * c[1, 1])
        sds.append(float(np.std(y - lam * f)))
    return np.array(sds)


def run(rng: np.random.Generator, scen: str, n: int, reps: int, big_n: int, alpha: float
        ) -> dict[str, tuple[float, float]]:
    z = NormalDist().inv_cdf(1 - alpha / 2)
    theta = 0.5 if scen == BINARY else 0.0
    nk_u = big_n // 2
    unl = [draw(rng, scen, k, (reps, nk_u)) for k in range(2)]
    u_mom = [[np.full(reps, float(nk_u)), f.mean(1), f.var(1, ddof=1)] for _, f in unl]
    out: dict[str, tuple[float, float]] = {}

    def record(name: str, est: np.ndarray, se: np.ndarray) -> None:
        out[name] = (float(np.mean(np.abs(est - theta) <= z * se)), float(np.mean(2 * z * se)))

    # classical and PPI++: n i.i.d. labelled units from the mixture
    s = (rng.random((reps, n)) < W[1]).astype(int)
    y, f = draw(rng, scen, s, (reps, n))
    record("classical", y.mean(1), y.std(1, ddof=1) / np.sqrt(n))
    fu_all = np.concatenate([unl[0][1], unl[1][1]], axis=1)
    lab = masked(y, f, np.full(reps, n))
    cols = [v[:, None] for v in lab] + [np.full((reps, 1), float(big_n)),
                                        fu_all.mean(1)[:, None], fu_all.var(1, ddof=1)[:, None]]
    est, se, _ = stratified_ppi(np.ones((reps, 1)), *cols)
    record("PPI++", est, se)

    def strat(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        per = []
        for k in range(2):
            yk, fk = draw(rng, scen, k, (reps, int(counts[:, k].max())))
            per.append(masked(yk, fk, counts[:, k]) + u_mom[k])
        e, s_, _ = stratified_ppi(np.broadcast_to(W, (reps, 2)), *stack(per))
        return e, s_

    def fixed(alloc: np.ndarray) -> np.ndarray:
        c = np.maximum(np.round(alloc * n).astype(int), 2)
        return np.broadcast_to(c, (reps, 2)).copy()

    record("Strat prop", *strat(fixed(W)))
    record("Strat opt (oracle)", *strat(fixed(optimal_allocation(W, oracle_sd(rng, scen, big_n)))))
    if scen == BINARY:
        mf = np.stack([m[1] for m in u_mom], -1)
        ef2 = np.stack([(f**2).mean(1) for _, f in unl], -1)
        sd_h = heuristic_sd(mf, ef2, 1.0)
        alloc = (W * sd_h) / (W * sd_h).sum(-1, keepdims=True)
        record("Strat heuristic", *strat(np.maximum(np.round(alloc * n).astype(int), 2)))
    # two-stage plug-in: half proportional, then top up towards eq. 19 with labelled residual sd
    half = n // 4
    per1, res_sd = [], []
    pilot = []
    for k in range(2):
        yk, fk = draw(rng, scen, k, (reps, half))
        pilot.append((yk, fk))
        m = masked(yk, fk, np.full(reps, half))
        lam = m[5] / m[4]
        res_sd.append(np.std(yk - lam[:, None] * fk, axis=1, ddof=1))
        per1.append(m)
    sd = np.stack(res_sd, -1)
    target = n * (W * sd) / (W * sd).sum(-1, keepdims=True)
    extra = np.maximum(target - half, 0)
    extra = np.round(extra * (n - 2 * half) / np.maximum(extra.sum(-1, keepdims=True), 1e-12))
    counts = (half + extra).astype(int)
    per = []
    for k in range(2):
        more = int(counts[:, k].max()) - half
        yk2, fk2 = draw(rng, scen, k, (reps, max(more, 1)))
        yk = np.concatenate([pilot[k][0], yk2], axis=1)
        fk = np.concatenate([pilot[k][1], fk2], axis=1)
        per.append(masked(yk, fk, counts[:, k]) + u_mom[k])
    e, s_, _ = stratified_ppi(np.broadcast_to(W, (reps, 2)), *stack(per))
    record("Strat plug-in", e, s_)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--big-n", type=int, default=10_000)
    ap.add_argument("--alpha", type=float, default=0.1)
    ap.add_argument("--ns", default="100,200,400,800")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", default="benchmarks/out")
    args = ap.parse_args()
    ns = [int(x) for x in args.ns.split(",")]
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    res: dict[str, dict[int, dict[str, tuple[float, float]]]] = {}
    for scen in [*GAUSS, BINARY]:
        res[scen] = {n: run(rng, scen, n, args.reps, args.big_n, args.alpha) for n in ns}
        methods = list(res[scen][ns[0]])
        print(f"\n{scen}: K=2, N={args.big_n}, alpha={args.alpha}, reps={args.reps} "
              f"(coverage / mean CI width; width ratio vs classical in brackets)")
        print("    n " + "".join(f"{m:>26}" for m in methods))
        for n in ns:
            base = res[scen][n]["classical"][1]
            cells = "".join(f"{c:>10.3f} / {w:.3f} [{w / base:.2f}]" for c, w in
                            (res[scen][n][m] for m in methods))
            print(f"{n:5d} {cells}")
    print(f"\ntotal time {time.perf_counter() - t0:.0f}s")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(2, len(res), figsize=(4.5 * len(res), 7), squeeze=False)
    for j, (scen, by_n) in enumerate(res.items()):
        for m in by_n[ns[0]]:
            axes[0, j].plot(ns, [by_n[n][m][0] for n in ns], marker="o", label=m)
            axes[1, j].plot(ns, [by_n[n][m][1] for n in ns], marker="o", label=m)
        axes[0, j].axhline(1 - args.alpha, color="k", lw=0.8, ls="--")
        axes[0, j].set_title(scen)
        axes[0, j].set_ylabel("coverage")
        axes[1, j].set_ylabel("mean CI width")
        axes[1, j].set_xlabel("n labelled")
        axes[1, j].set_xscale("log")
        axes[0, j].set_xscale("log")
    axes[1, 0].legend(fontsize=7)
    axes[1, -1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "stratppi_simulation.png", dpi=120)
    print(f"saved {out / 'stratppi_simulation.png'}")


if __name__ == "__main__":
    main()
