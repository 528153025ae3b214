"""Confidence-sequence width and state size: Bernstein sums against the hedged wealth grid.

Same rounds for both designs (paper Example 1: binary losses with risk ``--risk``, a judge
right with probability ``--gamma``, a synthetic block of 9 judged units per round), each
method's sequence at level ``delta = 0.05`` with anytime WSR bets (``c = 1/2``, what a
``plugin_up`` certificate's sequence uses) and ``cs_grid = 1000``. Prints the median width at
several round counts, the ratio Bernstein / grid, and the state (JSON bytes) of one
certificate's three sequences.

Usage: python benchmarks/confseq_width.py [--reps 20] [--rounds 100,1000,5000]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from monitor.stats.betting.bets import BetConfig
from monitor.stats.betting.confseq_bernstein import BernsteinSequences
from monitor.stats.betting.confseq_group import SharedGridWealth

UNION = np.linspace(0.0, 1.0, 10).tolist()
MEMBERS = {"r_eval": [0], "r_autoeval": [9], "r_autoeval_plus": list(range(10))}


def run(rounds: list[int], reps: int, risk: float, gamma: float) -> None:
    horizon = max(rounds)
    widths = {(d, m, t): [] for d in ("grid", "bernstein") for m in MEMBERS for t in rounds}
    secs = {"grid": 0.0, "bernstein": 0.0}
    sizes = {}
    for rep in range(reps):
        rng = np.random.default_rng(rep)
        h = (rng.random(horizon) < risk).astype(float)
        f = np.where(rng.random(horizon) < gamma, h, 1.0 - h)
        unl = rng.random((horizon, 9)) < risk
        b = np.where(rng.random((horizon, 9)) < gamma, unl, ~unl).mean(axis=1)
        designs = {
            "grid": SharedGridWealth(0.05, UNION, BetConfig("wsr"), 1000, list(MEMBERS.values())),
            "bernstein": BernsteinSequences(0.05, UNION, BetConfig("wsr"), 1000,
                                            list(MEMBERS.values())),
        }
        for name, cs in designs.items():
            t0 = time.perf_counter()
            for i in range(horizon):
                cs.update(float(h[i]), float(f[i]), float(b[i]))
                if i + 1 in rounds:
                    for meth, mem in zip(MEMBERS, cs.members, strict=True):
                        widths[(name, meth, i + 1)].append(mem.upper - mem.lower)
            secs[name] += time.perf_counter() - t0
            sizes[name] = len(json.dumps(cs.to_state()))
    print(f"risk {risk}, judge right w.p. {gamma}, {reps} runs, delta 0.05, cs_grid 1000")
    print(f"{'method':16} {'rounds':>7} | {'grid':>7} | {'bernstein':>9} | ratio")
    for meth in MEMBERS:
        for t in rounds:
            g = float(np.median(widths[("grid", meth, t)]))
            s = float(np.median(widths[("bernstein", meth, t)]))
            print(f"{meth:16} {t:>7} | {g:7.4f} | {s:9.4f} | {s / g:5.3f}")
    per_round = {k: v / (reps * horizon) * 1e6 for k, v in secs.items()}
    print(f"state of the three sequences after {horizon} rounds (JSON): grid "
          f"{sizes['grid']:,} B, bernstein {sizes['bernstein']:,} B "
          f"({sizes['grid'] / sizes['bernstein']:.0f}x smaller)")
    print(f"time per round (three methods): grid {per_round['grid']:.1f} us, bernstein "
          f"{per_round['bernstein']:.1f} us")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=20, help="independent runs")
    ap.add_argument("--rounds", default="100,1000,5000", help="round counts to report")
    ap.add_argument("--risk", type=float, default=0.1, help="true risk")
    ap.add_argument("--gamma", type=float, default=0.9, help="judge accuracy")
    args = ap.parse_args()
    run(sorted(int(v) for v in args.rounds.split(",")), args.reps, args.risk, args.gamma)


if __name__ == "__main__":
    main()
