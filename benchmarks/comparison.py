"""Audited examples a comparison needs to decide, against the clairvoyant constant bettor and a
fixed-size two-proportion test.

Streams of :mod:`tests.support.comparison_rounds` (judge agreement 0.9, 3 unaudited examples
per audited one per arm, margin 0.02, delta 0.05). For each scenario it prints, over ``--reps``
runs, the median number of audited examples (rounds; two labels each) until the right verdict of
the default comparison (:class:`~monitor.stats.comparison.PairedComparison`: the certificates'
``plugin_up`` rule on the unit-scale rounds with the comparison's bet grid, run here through its
vectorized twin :class:`~tests.support.comparison_batch.DifferenceBatch`; column ``cert grid``: the
same with the certificates' own grid), and divides it by

- the clairvoyant constant bettor: the best fixed bet and reliance for the true distribution,
  ``labels = log(1/delta) / max_rho max_lam E log(1 + lam x_rho)`` (``x`` the unit-scale edge),
  as in ``benchmarks/labels_vs_oracle.py`` (column ``clairv``), and the median crossing of that
  same constant bettor run on the same streams (``clairv sim``);
- the fixed-size one-sided two-proportion z-test (labels only) with the same error rates: type I
  ``delta`` and power 0.9, compared with the comparison's 90th percentile (``fixed n``).

Run: ``python benchmarks/comparison.py`` (about a minute); ``--quick`` for a smoke run.
"""

from __future__ import annotations

import argparse
import math
import time
from statistics import NormalDist

import numpy as np

from monitor.stats.betting.bets import Side
from monitor.stats.comparison.eprocess import Grid
from monitor.stats.comparison.observation import unit_margin
from tests.support.comparison_batch import DifferenceBatch
from tests.support.comparison_rounds import UnitRounds, paired_rounds

MARGIN, DELTA = 0.02, 0.05
RHOS = np.linspace(0.0, 1.0, 11).tolist()
# name, candidate risk, baseline risk, correlation of failures, right verdict's side
SCENARIOS: list[tuple[str, float, float, float, Side]] = [
    ("inferior 0.12 vs 0.05", 0.12, 0.05, 0.0, "violate"),
    ("equal 0.05", 0.05, 0.05, 0.0, "certify"),
    ("equal 0.05, corr 0.3", 0.05, 0.05, 0.3, "certify"),
    ("better 0.02 vs 0.05", 0.02, 0.05, 0.0, "certify"),
    ("inferior 0.30 vs 0.20", 0.30, 0.20, 0.0, "violate"),
    ("equal 0.20, corr 0.5", 0.20, 0.20, 0.5, "certify"),
]


def growth(x: np.ndarray, lam_max: float) -> tuple[float, float]:
    """``(max_lam mean log(1 + lam x), lam*)`` over ``0 <= lam < lam_max`` (sample ``x``)."""
    if float(x.mean()) <= 0.0:
        return 0.0, 0.0
    a, b = 0.0, min(lam_max, 1.0 / max(1e-300, -float(x.min()))) * (1 - 1e-9)
    for _ in range(60):
        m = 0.5 * (a + b)
        if float((x / (1 + m * x)).mean()) > 0:
            a = m
        else:
            b = m
    lam = 0.5 * (a + b)
    return float(np.log1p(lam * x).mean()), lam


def clairvoyant(r: UnitRounds, side: Side) -> tuple[float, float, float]:
    """``(g*, lam*, rho*)`` of the constant bettor from a large sample of rounds."""
    alpha = unit_margin(MARGIN)
    h, s = r.human.ravel(), r.shift.ravel()
    best = (0.0, 0.0, 0.0)
    for rho in np.linspace(0.0, 1.0, 51):
        q = h + rho * s
        x = alpha - q if side == "certify" else q - alpha
        lam_max = 1.0 / (1.0 + rho - alpha) if side == "certify" else 1.0 / (alpha + rho)
        g, lam = growth(x, lam_max)
        if g > best[0]:
            best = (g, lam, float(rho))
    return best


def crossings(r: UnitRounds, side: Side, grid: Grid) -> tuple[np.ndarray, float]:
    """First crossing of ``1/delta`` of the comparison's e-process (``inf``: none)."""
    reps, horizon = r.human.shape
    b = DifferenceBatch(unit_margin(MARGIN), side, RHOS, reps, grid)
    hit = np.full(reps, np.inf)
    thr = math.log(1.0 / DELTA)
    for t in range(horizon):
        b.advance(r.human[:, t], r.shift[:, t])
        hit[np.isinf(hit) & (b.log_wealth >= thr)] = t + 1
    return hit, thr


def fixed_n(pc: float, pb: float, power: float = 0.9) -> float:
    """Examples per arm of the one-sided two-proportion z-test at level delta and ``power``."""
    z = NormalDist().inv_cdf(1 - DELTA) + NormalDist().inv_cdf(power)
    gap = abs((pc - pb) - MARGIN)
    return z * z * (pc * (1 - pc) + pb * (1 - pb)) / gap ** 2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--horizon", type=int, default=5000)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    reps, horizon = (60, 3000) if args.quick else (args.reps, args.horizon)
    t0 = time.time()
    print(f"margin {MARGIN}, delta {DELTA}, judge agreement 0.9, 3 unaudited per audited, "
          f"{reps} runs of at most {horizon} audited examples; medians in audited examples")
    head = (f"{'scenario':24s} {'median':>7s} {'prev grid':>9s} {'cert grid':>9s} "
            f"{'clairv':>7s} {'ratio':>6s} "
            f"{'clairv sim':>10s} "
            f"{'ratio':>6s} {'p90':>6s} {'fixed n':>7s} {'ratio':>6s} {'<=2000':>6s} {'prev':>6s}")
    print(head)
    for i, (name, pc, pb, corr, side) in enumerate(SCENARIOS):
        big = paired_rounds(np.random.default_rng(100 + i), 1, 200_000, pc, pb, corr=corr)
        g, lam, rho = clairvoyant(big, side)
        r = paired_rounds(np.random.default_rng(i), reps, horizon, pc, pb, corr=corr)
        hit, thr = crossings(r, side, "lognormal")
        prev, _ = crossings(r, side, "comparison")
        cert, _ = crossings(r, side, "certificate")
        alpha = unit_margin(MARGIN)
        q = r.human + rho * r.shift
        x = alpha - q if side == "certify" else q - alpha
        lw = np.cumsum(np.log1p(lam * x), axis=1)
        crossed = (lw >= thr).any(axis=1)
        csim = np.where(crossed, (lw >= thr).argmax(axis=1) + 1, np.inf)
        med, p90 = float(np.median(hit)), float(np.quantile(hit, 0.9))
        cl = thr / g
        fx = fixed_n(pc, pb)
        print(f"{name:24s} {med:7.0f} {float(np.median(prev)):9.0f} "
              f"{float(np.median(cert)):9.0f} {cl:7.0f} {med / cl:6.2f} "
              f"{np.median(csim):10.0f} "
              f"{med / float(np.median(csim)):6.2f} {p90:6.0f} {fx:7.0f} {p90 / fx:6.2f} "
              f"{float(np.mean(hit <= 2000)):6.2f} {float(np.mean(prev <= 2000)):6.2f}")
    print(f"(clairv: log(1/delta)/g*, the best fixed bet and rho for the true distribution; "
          f"clairv sim: that bettor's median on the same streams; fixed n: two-proportion "
          f"z-test, type I {DELTA}, power 0.9, labels only; {time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
