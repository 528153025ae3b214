"""Update throughput of RiskMonitor (both sides) and CertificateGroup in rounds/s, one core.

Prints rounds/s for R-AutoEval+ (S = 10) with WSR and UP bets, with and without the hedged
confidence sequence (grid 1000), next to a baseline measured in the same process on the same
data: a plain-Python running mean updated once per round (the cheapest possible "monitor").
Then a certificate's three methods: three RiskMonitors vs one CertificateGroup, with the ratio.

    python benchmarks/stats_throughput.py [--rounds 200000] [--seed 0]

Last run (2026-11-21, 2-core VM shared with CI, load average 3.3-3.5; rounds per CPU-second,
before -> after the confidence-sequence fast path of monitor/stats/betting/confseq.py):

    R-AutoEval+ S=10 WSR, no CS             151,416 ->   158,985   (unchanged code)
    R-AutoEval+ S=10 UP(64), no CS           28,074 ->    26,976   (unchanged code)
    R-AutoEval+ S=10 WSR, CS grid 1000       17,281 ->    40,343
    R-AutoEval+ S=10 UP(64), CS grid 1000     1,390 ->     1,524
    R-Eval WSR, no CS                       284,171 ->   481,415   (unchanged code; noise)
    R-Eval WSR, CS grid 1000                 31,052 ->    87,107

A certificate's three methods (r_eval, r_autoeval, r_autoeval_plus S=10): three independent
RiskMonitors vs one CertificateGroup (monitor/stats/betting/risk_group.py; bit-identical results),
same run, rounds per CPU-second (2026-11-21 09:41 UTC, load average 1.9-2.2 on 2 CPUs):

    WSR, no CS                               86,652 ->   108,027   (x1.25)
    WSR, CS grid 1000                        15,257 ->    25,135   (x1.65)
    UP(64), no CS                            10,803 ->    22,240   (x2.06)

Measured (2026-11-23, load average 1.9-2.0 on 2 CPUs, rounds per CPU-second, same run): the
new default ``plugin_up`` against the old default WSR (per-round cost ratio in brackets):

    RiskMonitor R-AutoEval+ S=10, no CS       WSR 141,877   plugin_up 130,668   (x1.09)
    RiskMonitor R-Eval, no CS                 WSR 368,527   plugin_up 282,009   (x1.31)
    CertificateGroup, 3 methods, no CS        WSR 107,031   plugin_up  68,992   (x1.55)
    CertificateGroup, 3 methods, CS 1000      WSR  31,506   plugin_up  26,891   (x1.17)

(the config default has ``cs_grid = 1000``; plugin_up tests share no rows, so the group runs
six one-row tests where WSR shares one 10-row e-process per side).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np

from monitor.stats.betting.bets import BetConfig
from monitor.stats.betting.risk import RiskMonitor
from monitor.stats.betting.risk_group import CertificateGroup

Round = tuple[float, float, float | None]


def make_rounds(n: int, seed: int) -> list[Round]:
    rng = np.random.default_rng(seed)
    h = (rng.random(n) < 0.1).astype(float)
    f = np.where(rng.random(n) < 0.9, h, 1.0 - h)
    b = rng.binomial(10, 0.18, n) / 10
    empty = rng.random(n) < 0.02
    return [(hh, ff, None if e else bb)
            for hh, ff, bb, e in zip(h.tolist(), f.tolist(), b.tolist(), empty.tolist(),
                                     strict=True)]


METHODS = ("r_eval", "r_autoeval", "r_autoeval_plus")


class ThreeMonitors:
    """One RiskMonitor per method, updated one after the other (the pre-group engine)."""

    def __init__(self, bet: BetConfig, grid: int | None) -> None:
        self.mons = [RiskMonitor(0.12, 0.1, m, bet, cs_grid=grid) for m in METHODS]

    def update(self, human: float, judge: float, block: float | None) -> None:
        for m in self.mons:
            m.update(human, judge, block)


class RunningMean:
    def __init__(self) -> None:
        self.n = 0
        self.total = 0.0

    def update(self, human: float, judge: float, block: float | None) -> None:
        self.n += 1
        self.total += human


def rate(make: Callable[[], object], rounds: list[Round], repeat: int = 3) -> tuple[float, float]:
    """Best of ``repeat`` runs: (rounds per CPU second, rounds per wall second).

    CPU time (``time.process_time``) is the primary figure: the machine is shared, and a
    single-threaded loop's CPU time is what one core delivers regardless of other load.
    """
    best_cpu = best_wall = 0.0
    for _ in range(repeat):
        m = make()
        upd = m.update  # type: ignore[attr-defined]
        w0, c0 = time.perf_counter(), time.process_time()
        for h, f, b in rounds:
            upd(h, f, b)
        c1, w1 = time.process_time(), time.perf_counter()
        best_cpu = max(best_cpu, len(rounds) / max(c1 - c0, 1e-9))
        best_wall = max(best_wall, len(rounds) / (w1 - w0))
    return best_cpu, best_wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200_000, help="rounds for the fast cases")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rounds = make_rounds(args.rounds, args.seed)
    base, base_wall = rate(RunningMean, rounds)
    wsr, up = BetConfig(rule="wsr"), BetConfig(rule="up", up_grid=64)
    plug = BetConfig()  # the default: plugin_up
    cases = [
        ("R-AutoEval+ S=10 plugin_up, no CS", plug, None, args.rounds // 2),
        ("R-AutoEval+ S=10 plugin_up, CS 1000", plug, 1000, args.rounds // 20),
        ("R-Eval plugin_up, no CS", plug, None, args.rounds // 2),
        ("R-AutoEval+ S=10 WSR, no CS", wsr, None, args.rounds),
        ("R-AutoEval+ S=10 UP(64), no CS", up, None, args.rounds // 5),
        ("R-AutoEval+ S=10 WSR, CS grid 1000", wsr, 1000, args.rounds // 20),
        ("R-AutoEval+ S=10 UP(64), CS grid 1000", up, 1000, args.rounds // 100),
        ("R-Eval WSR, no CS", wsr, None, args.rounds),
        ("R-Eval WSR, CS grid 1000", wsr, 1000, args.rounds // 20),
    ]
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"baseline (plain-Python running mean): {base:,.0f} rounds/CPU-s "
          f"({base_wall:,.0f} rounds/wall-s)\n")
    print(f"{'case (RiskMonitor, both sides)':40s} {'rounds':>8s} {'rounds/CPU-s':>13s} "
          f"{'rounds/wall-s':>14s} {'baseline/case':>14s}")
    for name, bet, grid, n in cases:
        method = "r_eval" if name.startswith("R-Eval") else "r_autoeval_plus"
        def make(b: BetConfig = bet, g: int | None = grid, m: str = method) -> RiskMonitor:
            return RiskMonitor(0.12, 0.1, m, b, cs_grid=g)

        r, rw = rate(make, rounds[:n], repeat=3 if n >= 10_000 else 1)
        print(f"{name:40s} {n:8d} {r:13,.0f} {rw:14,.0f} {base / r:14.1f}")
    print(f"\n{'certificate, 3 methods (S=10)':40s} {'rounds':>8s} {'3 monitors/s':>13s} "
          f"{'group/s':>14s} {'group/3 mon.':>14s}")
    for name, bet, grid, n in [
        ("plugin_up (default), no CS", plug, None, args.rounds // 2),
        ("plugin_up (default), CS grid 1000", plug, 1000, args.rounds // 20),
        ("WSR, no CS", wsr, None, args.rounds),
        ("WSR, CS grid 1000", wsr, 1000, args.rounds // 20),
        ("UP(64), no CS", up, None, args.rounds // 5),
    ]:
        def three(b: BetConfig = bet, g: int | None = grid) -> ThreeMonitors:
            return ThreeMonitors(b, g)

        def group(b: BetConfig = bet, g: int | None = grid) -> CertificateGroup:
            return CertificateGroup(0.12, 0.1, METHODS, b, cs_grid=g)

        r3, _ = rate(three, rounds[:n])
        rg, _ = rate(group, rounds[:n])
        print(f"{name:40s} {n:8d} {r3:13,.0f} {rg:14,.0f} {rg / r3:14.2f}")
    print(f"load average: {os.getloadavg()[0]:.2f}")
    print("\ntargets: WSR no CS >= 100,000 rounds/s; WSR with CS grid 1000 >= 5,000")


if __name__ == "__main__":
    main()
