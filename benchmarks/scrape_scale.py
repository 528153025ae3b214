"""Scrape scale: time and series of one ``/metrics`` scrape, 1 to 10,000 models, both details.

Each size replays ``--labels-per-model`` labels per model (10 judge events each, models
round-robin, 50 per suite: ``fleet_scale.make_stream``) into an engine with the default
certificate (three methods, 10 rhos, ``plugin_up``), in a fresh subprocess, then scrapes it
the way ``certmon run`` serves it: a registry holding the operational metrics and a
:class:`monitor.metrics.StateCollector` wired as ``consumers/cli.py`` wires it
(``Engine.state_view(shown_only)``, ``[metrics] detail``), encoded by
``monitor.metrics.exposition.encode`` for an OpenMetrics ``Accept`` header (what Prometheus
asks for), then gzip level 1 (what the endpoint sends when gzip is accepted). Per size and
detail it prints:

- ``view s``: ``Engine.state_view`` alone (the part under the engine lock);
- ``scrape s``: view + rendering + encoding (what ``/metrics`` costs, without gzip), its
  CPU time (``time.process_time``: the machine may be shared), and ``gzip s``;
- series (sample lines) and their count per model, and the uncompressed / gzip bytes.

Times are the median of ``--repeat`` scrapes of an unchanged state; the first view after the
replay (which also folds the last rounds into the statistics) is reported apart as
``first view s``. ``cs_grid`` only changes the memory of a model, not what a scrape reads: the
default 20 keeps 10,000 models within about 1.5 GB (``--cs-grid 1000`` is the default
certificate's grid).

Usage: python benchmarks/scrape_scale.py [--sizes 1,100,1000,10000] [--labels-per-model 3]
       [--cs-grid 20] [--repeat 3] [--budget-gb 2.5]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet_scale import CONFIG, make_stream

OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def child(n_models: int, labels_per_model: int, cs_grid: int, repeat: int,
          budget_gb: float) -> dict[str, Any]:
    """Measure one size (run in a fresh process)."""
    limit = int(budget_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from prometheus_client import CollectorRegistry

    from monitor.config import parse_config
    from monitor.engine import Engine
    from monitor.metrics import OperationalMetrics, StateCollector
    from monitor.metrics.exposition import encode

    eng = Engine(parse_config(CONFIG + f"cs_grid = {cs_grid}\n"))
    lines = make_stream(n_models, max(1, n_models * labels_per_model))
    t0 = time.perf_counter()
    for start in range(0, len(lines), 4096):
        eng.process_batch(lines[start:start + 4096])
    out: dict[str, Any] = {"models": n_models, "events": len(lines),
                           "replay_s": time.perf_counter() - t0}
    del lines
    t0 = time.perf_counter()
    eng.state_view()
    out["first_view_s"] = time.perf_counter() - t0
    for detail in ("full", "shown"):
        shown = detail == "shown"
        registry = CollectorRegistry()
        OperationalMetrics(registry, version="bench").set_up(True)
        registry.register(StateCollector(lambda s=shown: eng.state_view(s), detail))  # type: ignore[misc]
        views, scrapes, cpus, zips = [], [], [], []
        body = b""
        for _ in range(repeat):
            t0 = time.perf_counter()
            eng.state_view(shown)
            views.append(time.perf_counter() - t0)
            t0, c0 = time.perf_counter(), time.process_time()
            body, _ = encode(registry, OPENMETRICS)
            scrapes.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
            t0 = time.perf_counter()
            zipped = gzip.compress(body, compresslevel=1)
            zips.append(time.perf_counter() - t0)
        state_lines = [ln for ln in body.splitlines()
                       if ln.startswith(b"certmon_") and not ln.startswith(
                           (b"certmon_up", b"certmon_build_info", b"certmon_events_",
                            b"certmon_alerts_", b"certmon_checkpoint", b"certmon_event_",
                            b"certmon_kafka_"))]
        out[detail] = {"view_s": statistics.median(views),
                       "scrape_s": statistics.median(scrapes),
                       "scrape_cpu_s": statistics.median(cpus),
                       "gzip_s": statistics.median(zips), "bytes": len(body),
                       "gzip_bytes": len(zipped), "series": len(state_lines)}
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1,100,1000,10000")
    ap.add_argument("--labels-per-model", type=int, default=3)
    ap.add_argument("--cs-grid", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--budget-gb", type=float, default=2.5,
                    help="address-space limit of each child process")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.labels_per_model, args.cs_grid, args.repeat,
                               args.budget_gb)))
        return
    print(f"default certificate (3 methods, 10 rhos), cs_grid {args.cs_grid}; "
          f"{args.labels_per_model} labels x 11 events per model; OpenMetrics encoding; "
          f"median of {args.repeat}; {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}")
    print(" models | detail | view s | scrape s (CPU s) | gzip s |    series | per model |   MB "
          "| gz MB | first view s | peak RSS MB")
    for n in (int(s) for s in args.sizes.split(",")):
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        proc = subprocess.run(
            [sys.executable, __file__, "--child", str(n), "--labels-per-model",
             str(args.labels_per_model), "--cs-grid", str(args.cs_grid), "--repeat",
             str(args.repeat), "--budget-gb", str(args.budget_gb)],
            capture_output=True, text=True, env=env, check=False)
        if proc.returncode != 0:
            print(f"{n:>7} | failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
            continue
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        for detail in ("full", "shown"):
            d = row[detail]
            print(f"{n:>7} | {detail:>6} | {d['view_s']:>6.3f} | {d['scrape_s']:>8.3f} "
                  f"({d['scrape_cpu_s']:>5.3f}) | "
                  f"{d['gzip_s']:>6.3f} | {d['series']:>9,} | {d['series'] / n:>9.1f} | "
                  f"{d['bytes'] / 1e6:>4.1f} | {d['gzip_bytes'] / 1e6:>5.2f} | "
                  f"{row['first_view_s']:>12.3f} | {row['peak_rss_mb']:>11,.0f}", flush=True)


if __name__ == "__main__":
    main()
