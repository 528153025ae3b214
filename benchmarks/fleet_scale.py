"""Fleet scale: the cost of monitored models, 1 to 50,000 models on streams of one shape.

Every size replays the same stream length and shape: ``--labels`` labels in all, spread
round-robin over the models (so rounds of all models interleave), each label preceded by
10 judge events of its model (one audited, nine not); suites hold up to 50 models. The
certificate is the default one (all three methods, 10 rhos, ``cs_grid`` 1000 with
``cs_kind = "bernstein"``, ``plugin_up``), the process runs with certmon's garbage-collector
policy (:func:`consumers.gc_policy.tune_gc`). A size needs at least as many labels as
models: ``--labels`` defaults to the largest size (at least 20,000) and a smaller value is
refused, so no row reports more models than its stream names. Each size runs in a fresh
subprocess (so peak RSS is that size's own) and reports:

- events/s of ``Engine.process_batch`` over the pre-generated lines (in-process, no I/O),
  including the rounds the confidence sequences still buffer after them (``settle s``: up to
  32 per model, applied by ``Engine.settle``, which every read does first);
- peak RSS (``resource.getrusage(RUSAGE_SELF).ru_maxrss``) and RSS before the engine;
- checkpoint bytes and time of a full checkpoint (``monitor.incremental``: one document per
  suite plus the manifest, into a ``LocalDirectoryStore`` in a temporary directory, fsync
  included), and of the incremental one after 11 more events of one model (one suite);
- scrape time and series of a :class:`monitor.metrics.StateCollector` over the state, with
  the default ``[metrics] detail = "shown"`` (``benchmarks/scrape_scale.py`` compares it
  with ``"full"``);
- each figure's ratio to the one-model run.

A size whose address space would exceed ``--budget-gb`` stops with a MemoryError
(``RLIMIT_AS`` in the child): the row then says how many models and events it reached, and
the per-model memory of the largest completed run says what the full size would need. The
machine is shared: the budget keeps this benchmark from taking it over.

Usage: python benchmarks/fleet_scale.py [--labels N] [--sizes 1,100,1000,10000,50000] [--repeat 3]
       [--budget-gb 4]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

CONFIG = """
[events]
max_models = 1000000

[[suites]]
name = "*"
models = ["*"]
audit_rate = 0.1

[[suites.certificates]]
name = "risk"
alpha = 0.1
delta = 0.05
"""
JUDGES_PER_LABEL = 10
MODELS_PER_SUITE = 50


def make_stream(n_models: int, n_labels: int, seed: int = 0) -> list[bytes]:
    """Return the JSONL lines: ``n_labels`` x (10 judge events + 1 label), models round-robin."""
    rng = np.random.default_rng(seed)
    human = rng.random(n_labels) < 0.05
    flip = rng.random((n_labels, JUDGES_PER_LABEL)) < 0.1
    lines: list[bytes] = []
    for i in range(n_labels):
        m = i % n_models
        head = f'"suite": "s{m // MODELS_PER_SUITE}", "model": "m{m}"'
        for k in range(JUDGES_PER_LABEL):
            loss = float(human[i] != flip[i, k]) if k == 0 else float(flip[i, k])
            ex = f"x{i}" if k == 0 else f"u{i}_{k}"
            lines.append((f'{{"type": "judge", "event_id": "j{i}_{k}", {head}, '
                          f'"example_id": "{ex}", "loss": {loss}, "ts": {i}, '
                          f'"audit": {"true" if k == 0 else "false"}}}').encode())
        lines.append((f'{{"type": "label", "event_id": "l{i}", {head}, "example_id": "x{i}", '
                      f'"loss": {float(human[i])}, "ts": {i}}}').encode())
    return lines


def make_round(suite: str, model: str, ts: int) -> list[bytes]:
    """10 judge events and a label of one new unit of ``model`` (one more round)."""
    head = f'"suite": "{suite}", "model": "{model}", "ts": {ts}'
    return [*(f'{{"type": "judge", "event_id": "jx_{k}", {head}, "example_id": '
              f'"{"xx" if k == 0 else f"ux_{k}"}", "loss": 0.0, "audit": {str(k == 0).lower()}}}'
              .encode() for k in range(JUDGES_PER_LABEL)),
            f'{{"type": "label", "event_id": "lx", {head}, "example_id": "xx", "loss": 0.0}}'
            .encode()]


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def child(n_models: int, n_labels: int, budget_gb: float) -> dict[str, Any]:
    """Measure one size (run in a fresh process)."""
    limit = int(budget_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from prometheus_client import CollectorRegistry

    from consumers.gc_policy import tune_gc
    from monitor.checkpoint import LocalDirectoryStore
    from monitor.config import parse_config
    from monitor.engine import Engine
    from monitor.incremental import IncrementalCheckpointer

    tune_gc()  # the collector policy of the certmon process (what users get)
    from monitor.metrics import StateCollector
    from monitor.metrics.exposition import encode

    lines = make_stream(n_models, n_labels)
    out: dict[str, Any] = {"models": n_models, "events": len(lines),
                           "rss_before_mb": _rss_mb()}
    eng = Engine(parse_config(CONFIG))
    done = 0
    t0 = time.perf_counter()
    try:
        for start in range(0, len(lines), 4096):
            batch = lines[start:start + 4096]
            eng.process_batch(batch)
            done += len(batch)
        replay_s = time.perf_counter() - t0
        # The confidence sequences buffer up to 32 rounds per model and apply them at the
        # next read: with fewer rounds per model than that, a fleet's rounds would otherwise
        # be applied in the checkpoint or the scrape below, outside the timed replay. Timed
        # here on their own (Engine.settle, what every read does first), not the view.
        eng.settle()
        out["seconds"] = time.perf_counter() - t0
        out["settle_s"] = out["seconds"] - replay_s
        out["events_per_s"] = len(lines) / out["seconds"]
        out["replay_rss_mb"] = out["peak_rss_mb"] = _rss_mb()
        with tempfile.TemporaryDirectory(prefix="certmon-bench-") as ckdir:
            writer = IncrementalCheckpointer(LocalDirectoryStore(ckdir), "bench")
            t0 = time.perf_counter()
            full = writer.save(eng, {"offset": len(lines)})
            out["checkpoint_s"] = time.perf_counter() - t0
            out["checkpoint_bytes"] = full.bytes_written
            out["checkpoint_parts"] = full.parts_written
            eng.process_batch(make_round("s0", "m0", n_labels))  # one more round of one model
            t0 = time.perf_counter()
            incr = writer.save(eng, {"offset": len(lines) + JUDGES_PER_LABEL + 1})
            out["incremental_s"] = time.perf_counter() - t0
            out["incremental_bytes"] = incr.bytes_written
            out["incremental_parts"] = incr.parts_written
            out["manifest_bytes"] = incr.manifest_bytes
        reg = CollectorRegistry()  # the default [metrics] detail = "shown"
        reg.register(StateCollector(lambda: eng.state_view(True), "shown"))
        t0 = time.perf_counter()  # (benchmarks/scrape_scale.py compares it with "full")
        text = encode(reg, "")[0]  # what /metrics sends (generate_latest parses the text back)
        out["scrape_s"] = time.perf_counter() - t0
        out["series"] = sum(1 for ln in text.splitlines() if ln and not ln.startswith(b"#"))
        out["peak_rss_mb"] = _rss_mb()
        out["status"] = "ok"
    except MemoryError:
        out["status"] = "memory_error"
        out["events_done"] = done
        out["models_created"] = sum(len(s.models) for s in eng.suites.values())
        out["seconds"] = time.perf_counter() - t0
        out["peak_rss_mb"] = _rss_mb()
    out["rejected"] = sum(eng.counters["rejected"].values())
    return out


def _fmt(row: dict[str, Any], base: dict[str, Any] | None) -> str:
    def ratio(key: str) -> str:
        if base is None or key not in row or not base.get(key):
            return ""
        x = row[key] / base[key]
        return f" ({x:.0f}x)" if x >= 100 else f" ({x:.2g}x)"

    if row["status"] != "ok":
        return (f"{row['models']:>7} | budget exceeded after {row['events_done']:,} of "
                f"{row['events']:,} events, {row['models_created']:,} models created, "
                f"{row['seconds']:.1f} s, peak RSS {row['peak_rss_mb']:,.0f} MB (the limit "
                f"is on address space: allocated grids not yet touched count there)")
    return (f"{row['models']:>7} | {row['events_per_s']:>9,.0f}{ratio('events_per_s'):9} | "
            f"{row['settle_s']:>8.2f} | "
            f"{row['peak_rss_mb']:>7,.0f}{ratio('peak_rss_mb'):8} | "
            f"{row['checkpoint_bytes'] / 1e6:>8.1f}{ratio('checkpoint_bytes'):9} | "
            f"{row['checkpoint_s']:>6.2f}{ratio('checkpoint_s'):8} | "
            f"{row['incremental_bytes'] / 1e3:>8.0f} {row['incremental_s'] * 1e3:>7.1f} "
            f"({row['incremental_parts']}/{row['checkpoint_parts']}) | "
            f"{row['scrape_s']:>6.2f}{ratio('scrape_s'):8} | {row['series']:>9,}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--labels", type=int, default=None,
                    help="labels in each stream (x11 events); default: the largest size, "
                    "at least 20,000")
    ap.add_argument("--sizes", default="1,100,1000,10000,50000")
    ap.add_argument("--budget-gb", type=float, default=4.0,
                    help="address-space limit of each child process")
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs per size, the fastest kept (the machine is shared: load varies)")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.labels, args.budget_gb)))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.labels is None:
        args.labels = max(20_000, *sizes)
    if args.labels < max(sizes):  # round-robin: models beyond the labels never appear
        ap.error(f"--labels {args.labels:,} is below the largest size {max(sizes):,}: every "
                 "model needs at least one label")
    print(f"stream: {args.labels:,} labels x ({JUDGES_PER_LABEL} judge + 1 label) = "
          f"{args.labels * (JUDGES_PER_LABEL + 1):,} events per size; models round-robin, "
          f"{MODELS_PER_SUITE} per suite; default certificate (3 methods, 10 rhos, Bernstein "
          f"CS, cs_grid 1000, plugin_up); budget {args.budget_gb:g} GB address space per size; "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print(" models |  events/s (ratio) | settle s | RSS MB (ratio) | ckpt MB (ratio) "
          "| ckpt s (ratio) | incr kB  incr ms (suites) | scrape s (ratio) | series")
    base: dict[str, Any] | None = None
    rows = []
    for n in sizes:
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        runs = []
        for _ in range(max(1, args.repeat)):
            proc = subprocess.run([sys.executable, __file__, "--child", str(n), "--labels",
                                   str(args.labels), "--budget-gb", str(args.budget_gb)],
                                  capture_output=True, text=True, env=env, check=False)
            if proc.returncode != 0:
                print(f"{n:>7} | failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
                break
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        if not runs:
            continue
        row = max(runs, key=lambda r: float(r.get("events_per_s", 0.0)))
        rows.append(row)
        if base is None and row["status"] == "ok":
            base = row
        print(_fmt(row, base if row is not base else None), flush=True)
    ok = [r for r in rows if r["status"] == "ok"]
    if ok:
        big = max(ok, key=lambda r: r["models"])
        per = (big["replay_rss_mb"] - big["rss_before_mb"]) / big["models"]
        print(f"RSS per model ({big['models']:,} models): {per:.2f} MB (peak RSS after the "
              f"replay, before checkpoint and scrape, above the pre-engine RSS of "
              f"{big['rss_before_mb']:.0f} MB); checkpoint "
              f"{big['checkpoint_bytes'] / big['models'] / 1e3:.0f} kB per model")
        for r in rows:
            if r["status"] != "ok":
                print(f"{r['models']:,} models would need about "
                      f"{per * r['models'] / 1024:.1f} GB at that rate")


if __name__ == "__main__":
    main()
