"""Does scraping /metrics slow processing down? `certmon run` with and without scrapers.

Four clients scraping /metrics in a loop slowed processing 3.4x
(3 models) to 15x (300 models) with the old server (a thread per connection, every scrape
rendered). This re-measures it with the hardened server: `certmon run` (file source, no
follow) replays N events of M models in a subprocess with the metrics server on, once
alone and once while four client threads (in this process) GET /metrics in a loop.

Reported per row: events/s (events / time from the "metrics on" line to exit), scrapes
answered, the slowdown ratio (events/s alone / events/s scraped) and the CPU seconds of the
certmon process (user + system): on a machine with few cores the scraping clients also
compete for the CPU, so the CPU column separates the server's own cost from contention.
``--interval`` and ``--pace`` run rows with other ``metrics.min_scrape_interval`` (0
renders every scrape, i.e. no sharing) and ``metrics.max_scrapes_per_second`` (0: no
pacing, the server before pacing) values, to show what each buys. Timings on a shared
machine are noisy: the median of ``--repeat`` runs is shown.

Usage: python benchmarks/metrics_scrape_load.py [--events 200000] [--models 3 300]
       [--clients 4] [--repeat 3] [--interval 1.0 0] [--pace 10 0]
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

from monitor.simulate import SimModel, SimulationSpec, iter_jsonl

ROOT = Path(__file__).resolve().parents[1]

CONFIG = """
[source]
kind = "file"
path = "{path}"
follow = false

[metrics]
port = {port}
min_scrape_interval = {interval}
max_scrapes_per_second = {pace}

[[suites]]
name = "*"
models = ["*"]
audit_rate = 0.05

[[suites.certificates]]
name = "risk"
alpha = 0.1
delta = 0.05
methods = ["r_eval", "r_autoeval", "r_autoeval_plus"]
primary = "r_autoeval_plus"
rhos = 10
"""


def make_file(tmp: Path, n_models: int, n_events: int) -> Path:
    rng = np.random.default_rng(0)
    models = tuple(SimModel(f"m{i}", float(rng.uniform(0.02, 0.2)), 0.9)
                   for i in range(n_models))
    per_example = n_models * 1.06
    spec = SimulationSpec(models=models, examples=int(n_events / per_example) + 10,
                          audit_rate=0.05, audit_mode="hash", max_events=n_events)
    path = tmp / f"events_{n_models}.jsonl"
    with open(path, "wb") as fh:
        fh.writelines(iter_jsonl(spec, np.random.default_rng(1)))
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape_loop(url: str, stop: threading.Event, counts: list[int], i: int) -> None:
    while not stop.is_set():
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                resp.read()
            counts[i] += 1
        except (OSError, http.client.HTTPException):
            time.sleep(0.01)  # not up yet, closed at the cap, or stopping: try again


def run_once(tmp: Path, events: Path, n_events: int, interval: float, pace: float,
             clients: int) -> tuple[float, int, float]:
    port = free_port()
    cfg = tmp / "certmon.toml"
    cfg.write_text(CONFIG.format(path=events, port=port, interval=interval, pace=pace))
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "consumers.cli", "run", "--config", str(cfg)],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env,
                            cwd=ROOT, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if "metrics on" in line:
            break
    t0 = time.perf_counter()
    stop = threading.Event()
    counts = [0] * clients
    threads = [threading.Thread(target=scrape_loop, daemon=True,
                                args=(f"http://127.0.0.1:{port}/metrics", stop, counts, i))
               for i in range(clients)]
    for t in threads:
        t.start()
    rest = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)  # the child's own CPU time (user + system)
    seconds = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    stop.set()
    for t in threads:
        t.join()
    if proc.returncode != 0 or f"stopped after {n_events} events" not in rest:
        raise RuntimeError(f"certmon run failed ({proc.returncode}): {rest[-2000:]}")
    return n_events / seconds, sum(counts), usage.ru_utime + usage.ru_stime


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=200_000)
    p.add_argument("--models", type=int, nargs="+", default=[3, 300])
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--interval", type=float, nargs="+", default=[1.0],
                   help="metrics.min_scrape_interval values (1.0 = the default)")
    p.add_argument("--pace", type=float, nargs="+", default=[10.0, 0.0],
                   help="metrics.max_scrapes_per_second values (10 = the default, 0 = off)")
    a = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for m in a.models:
            path = make_file(tmp, m, a.events)
            with open(path, "rb") as fh:
                n = sum(1 for _ in fh)
            for interval, pace in [(i, q) for i in a.interval for q in a.pace]:
                alone, loaded, scrapes, cpu0, cpu1 = [], [], [], [], []
                for _ in range(a.repeat):  # interleaved, so drift hits both alike
                    eps, _, cpu = run_once(tmp, path, n, interval, pace, 0)
                    alone.append(eps)
                    cpu0.append(cpu)
                    eps, k, cpu = run_once(tmp, path, n, interval, pace, a.clients)
                    loaded.append(eps)
                    scrapes.append(k)
                    cpu1.append(cpu)
                med = statistics.median
                rows.append((m, n, interval, pace, med(alone), med(loaded), med(scrapes),
                             med(cpu0), med(cpu1)))
                print(f"  done: {m} models, interval {interval}, pace {pace}: "
                      f"{[round(x) for x in alone]} vs {[round(x) for x in loaded]}",
                      file=sys.stderr)
    print(f"\n`certmon run` replay, {a.clients} clients scraping /metrics in a loop, "
          f"median of {a.repeat}")
    print("| models | events | min_scrape_interval | max_scrapes_per_second | events/s alone "
          "| events/s scraped | scrapes | slowdown | certmon CPU s alone / scraped |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for m, n, interval, pace, alone_eps, loaded_eps, k, c0, c1 in rows:
        print(f"| {m} | {n:,} | {interval:g} s | {pace:g} | {alone_eps:,.0f} | "
              f"{loaded_eps:,.0f} | {k:,.0f} | {alone_eps / loaded_eps:.2f}x | "
              f"{c0:.1f} / {c1:.1f} |")


if __name__ == "__main__":
    main()
