"""Labels needed to reach a certified precision goal: steered per-stratum auditing vs uniform.

A simulated stream with heterogeneous strata (monitor.simulate, hash audit) goes through the
engine; a labelling team answers every label request. For each allocation rule the script prints
the number of labels used by the stratified Cer-Eval certificate when ``precision_reached``
fires, per stratum, and the ratio to uniform auditing at the same label budget.

    python benchmarks/strata_labels.py --seeds 1 2 3 4 --eps 0.06 --budget 0.15
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from monitor.config import parse_config
from monitor.engine import Engine
from monitor.simulate import SimModel, SimStratum, SimulationSpec, generate

CONFIG = """
[[suites]]
name = "demo"
models = ["m"]
audit_rate = {budget}
[suites.strata]
by = "stratum"
count = {count}
names = {names}
allocation = "{allocation}"
floor = {floor}
[[suites.certificates]]
name = "risk"
alpha = 0.2
delta = 0.05
methods = ["r_eval"]
cs_grid = 100
precision = {eps}
"""


def run(allocation: str, seed: int, args: argparse.Namespace,
        strata: tuple[SimStratum, ...]) -> tuple[int | None, dict[str, int], int]:
    names = json.dumps([s.name for s in strata])
    eng = Engine(parse_config(CONFIG.format(
        budget=args.budget, count=len(strata) + 1, names=names, allocation=allocation,
        floor=args.floor, eps=args.eps)))
    spec = SimulationSpec(models=(SimModel("m", 0.1),), examples=args.examples,
                          audit_mode="hash", audit_salt=f"seed{seed}", label_all=True,
                          unsolicited_rate=0.0, label_first_fraction=0.0, strata=strata)
    requested: set[str] = set()
    for ev in generate(spec, np.random.default_rng(seed)):
        if ev["type"] == "label":
            if ev["example_id"] not in requested:
                continue
            requested.discard(ev["example_id"])
        res = eng.process(json.dumps(ev).encode())
        requested.update(r["example_id"] for r in res.requests)
        for a in res.alerts:
            if a["kind"] == "precision_reached":
                return (int(a["round"]), a["evidence"]["labels_per_stratum"],
                        eng.suites["demo"].models["m"].counts["rounds"])
    return None, {}, eng.suites["demo"].models["m"].counts["rounds"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--eps", type=float, default=0.06)
    p.add_argument("--budget", type=float, default=0.15)
    p.add_argument("--floor", type=float, default=0.01)
    p.add_argument("--examples", type=int, default=100_000)
    p.add_argument("--allocations", nargs="+", default=["cereval", "heuristic"])
    p.add_argument("--strata", action="append", metavar="NAME:SHARE:RISK:NOISE",
                   help="default: easy:0.7:0.0:0.05, mid:0.2:0.05:0.1, hard:0.1:0.5:0.3")
    args = p.parse_args()
    strata = tuple(SimStratum.parse(s) for s in args.strata or [
        "easy:0.7:0.0:0.05", "mid:0.2:0.05:0.1", "hard:0.1:0.5:0.3"])
    print(f"strata {[(s.name, s.share, s.risk, s.judge_noise) for s in strata]}, "
          f"eps {args.eps}, budget {args.budget}, floor {args.floor}")
    ratios: dict[str, list[float]] = {a: [] for a in args.allocations}
    t0 = time.perf_counter()
    for seed in args.seeds:
        base, per_u, _ = run("uniform", seed, args, strata)
        print(f"seed {seed} uniform:   labels {base} {per_u}")
        for alloc in args.allocations:
            n, per, rounds = run(alloc, seed, args, strata)
            ratio = n / base if n and base else float("nan")
            ratios[alloc].append(ratio)
            print(f"seed {seed} {alloc:10s} labels {n} {per} betting rounds {rounds} "
                  f"ratio {ratio:.3f}")
    for alloc, r in ratios.items():
        print(f"{alloc}: labels to precision / uniform = {np.round(r, 3).tolist()}, "
              f"mean {np.mean(r):.3f}")
    print(f"({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
