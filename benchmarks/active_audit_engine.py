"""Labels to certify through the engine: ``audit_policy = "active"`` against ``"uniform"``.

The calibrated-judge stream of ``tests/test_active_audit_engine.py`` (scores 0.01 / 0.95 / 0.5,
every unit labelled ``--delay`` units after its judge event; certmon uses the labels of the
units it audits), ``--units`` judged units per stream, alpha 0.13, delta 0.01, budget 0.1.
Prints each policy's median labels to certify (evidence ``labels`` of the ``certified`` alert;
inf when not certified) and their ratio. Pending labels count at their worst value (a pending
unit with a confident score has ``Y = 1/pi`` at worst), so delays cost the active policy more,
unless claims also look at the wealth before the oldest waiting unit.

Measured (12 streams of 12000 units): ratio 0.82 with ``--delay 1``; with ``--delay 40`` 0.92
on the worst-value bound alone, 0.84 with the prefix claim (``ActiveAudit``, the default);
0.84 again with the change detectors running on the uniform-share rounds (no false alarm
restarted a test in these streams).

Run: ``python benchmarks/active_audit_engine.py --delay 40`` (about 40 s).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests
from monitor.config import parse_config
from monitor.engine import Engine
from tests.test_active_audit_engine import CONFIG, run, stream


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--delay", type=int, default=40)
    ap.add_argument("--streams", type=int, default=12)
    ap.add_argument("--units", type=int, default=12_000)
    a = ap.parse_args()
    text = CONFIG.replace("alpha = 0.2", "alpha = 0.13").replace("delta = 0.05", "delta = 0.01")
    t0 = time.time()
    labels: dict[str, list[float]] = {"active": [], "uniform": []}
    for seed in range(a.streams):
        lines = stream(a.units, seed=100 + seed, delay=a.delay)
        for policy, out in labels.items():
            alerts, _ = run(Engine(parse_config(text.format(policy=policy))), lines)
            done = [x for x in alerts if x["kind"] == "certified"]
            out.append(float(done[0]["evidence"]["labels"]) if done else np.inf)
    med = {p: float(np.median(v)) for p, v in labels.items()}
    print(f"delay {a.delay}, {a.streams} streams: median labels active {med['active']:.0f}, "
          f"uniform {med['uniform']:.0f}, ratio {med['active'] / med['uniform']:.2f} "
          f"({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
