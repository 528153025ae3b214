"""Time and labels to certify when labels come back late, out of order or never.

Whole engine, default certificate (R-AutoEval+ primary, ``plugin_up``), alpha = 0.1, delta =
0.05; each suite is one good model (risk 0.05, judge agreement 0.9, 5 unaudited units per
audited one, audits flagged upstream) over UNITS units of traffic, one unit per second of event
time. For each label-delay mechanism, over SUITES suites (fixed seeds, the same human losses in
every row):

- ``certified``: share of suites certified within the stream;
- ``time``: median units of traffic until ``certified`` (of those certified) and its ratio to
  the no-delay row plus the mean delay (target: <= 1.15 for delays that do not depend on the
  label);
- ``labels``: median labels that had arrived when ``certified`` was claimed, and ``rounds`` the
  audited units applied in audit order by then.

Usage: python benchmarks/label_delay.py [--suites 60] [--units 12000]
"""

from __future__ import annotations

import argparse
import heapq
import json
import statistics
import time

import numpy as np

from monitor.config import parse_config
from monitor.engine import Engine
from monitor.simulate_delays import delayed_stream

CONFIG = """
[[suites]]
name = "*"
models = ["m"]
[[suites.certificates]]
name = "risk"
alpha = 0.1
delta = 0.05
"""

START = 1_000_000.0
ROWS: list[tuple[str, dict[str, float]]] = [
    ("no delay", dict(delay_pass=0.0, delay_fail=0.0)),
    ("mean 20", dict(delay_pass=20.0, delay_fail=20.0)),
    ("mean 60", dict(delay_pass=60.0, delay_fail=60.0)),
    ("mean 200", dict(delay_pass=200.0, delay_fail=200.0)),
    ("mean 60, 2% missing", dict(delay_pass=60.0, delay_fail=60.0, missing_pass=0.02,
                                  missing_fail=0.02)),
    ("mean 60, 10% missing", dict(delay_pass=60.0, delay_fail=60.0, missing_pass=0.1,
                                   missing_fail=0.1)),
    ("failures 1500, passes 20", dict(delay_pass=20.0, delay_fail=1500.0)),
    ("passes 1500, failures 20", dict(delay_pass=1500.0, delay_fail=20.0)),
    ("30% of failures missing", dict(delay_pass=20.0, delay_fail=20.0, missing_fail=0.3)),
]


def run(kw: dict[str, float], suites: int, units: int) -> tuple[list[float], list[int],
                                                                  list[int], float]:
    eng = Engine(parse_config(CONFIG))
    rng = np.random.default_rng(7)
    streams = [delayed_stream(f"s{i}", rng, units=units, risk=0.05, start_ts=START, **kw)
               for i in range(suites)]
    arrived: dict[str, int] = {}
    times, labels, rounds = [], [], []
    t0 = time.perf_counter()
    n = 0
    for _, line in heapq.merge(*streams):
        n += 1
        res = eng.process(line)
        if b'"label"' in line:
            suite = json.loads(line)["suite"]
            arrived[suite] = arrived.get(suite, 0) + 1
        for a in res.alerts:
            if a["kind"] == "certified":
                times.append(a["ts"] - START)
                labels.append(arrived.get(a["suite"], 0))
                rounds.append(int(a["round"]))
    return times, labels, rounds, n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suites", type=int, default=60)
    ap.add_argument("--units", type=int, default=12000)
    args = ap.parse_args()
    print(f"{args.suites} suites x {args.units} units; good model (risk 0.05, alpha 0.1)")
    print(f"{'label delays':<28}{'certified':>10}{'time':>8}{'ratio':>7}{'labels':>8}"
          f"{'rounds':>8}{'ev/s':>9}")
    base = None
    for name, kw in ROWS:
        times, labels, rounds, rate = run(kw, args.suites, args.units)
        med = statistics.median(times) if times else float("nan")
        if base is None:
            base = med
        mean_delay = kw.get("delay_pass", 0.0) if kw.get("delay_pass") == kw.get(
            "delay_fail") else float("nan")
        ratio = med / (base + mean_delay) if mean_delay == mean_delay else float("nan")
        print(f"{name:<28}{len(times) / args.suites:>10.2f}{med:>8.0f}{ratio:>7.2f}"
              f"{statistics.median(labels) if labels else 0:>8.0f}"
              f"{statistics.median(rounds) if rounds else 0:>8.0f}{rate:>9.0f}", flush=True)


if __name__ == "__main__":
    main()
