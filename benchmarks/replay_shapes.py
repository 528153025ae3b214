"""Whole-process `certmon replay` on several stream shapes, each against JSON decoding.

Every figure is one child process timed end to end (interpreter start, reading, validating,
rounds, settling, STATE.json writing), its peak RSS read from ``os.wait4``. The baseline, in
the same run and also a child process, reads the same file line by line and ``json.loads``
every line. Each row gives both the wall-clock ratio and the CPU-time ratio (CPU seconds of
the baseline over the replay's, from the same ``os.wait4``: less sensitive to a loaded machine),
and the share of models whose primary certificate settled. Shapes (:mod:`stream_shapes`):
``current`` is the stream of ``benchmarks/replay_throughput.py`` (``monitor.simulate``,
models far from alpha, hash audits);
``heldout`` a held-out shape (20 suites interleaved, distinct timestamps, audits
flagged upstream, models near alpha, 10 unaudited judge events per label); then one change
each: ``hash`` audits, ``suites1`` / ``suites1000``, ``beta`` losses, ``delays``
(label-dependent delays: failures come back 10x later, 10% never). The fleet row replays
5,000 models (100 suites x 50, 5 labels each) against a one-model stream of the same length
and shape. ``--memory`` measures peak RSS for never-labelled audited units over 200 suites (a
labelling outage) and for 10,000 / 30,000 models in one suite (bytes per model: the RSS
difference over the model difference).

Targets: >= 0.5x of the baseline on every shape, 0.7x on ``current``; the fleet
at >= 0.7x of the one-model rate; <= 400 MB for the outage; 10,000 models within 1 GiB.

Usage: python benchmarks/replay_shapes.py [--scale 1.0] [--shapes heldout,hash] [--no-fleet]
       [--memory] [--repeat 1] [--config examples/minimal.toml]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from stream_shapes import Shape, cached

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out"
BASELINE = ("import json, sys\n"
            "with open(sys.argv[1], 'rb') as fh:\n"
            "    for line in fh:\n"
            "        json.loads(line)\n")


def shapes(scale: float) -> dict[str, Shape]:
    n = max(100, round(960_000 * scale))
    held = Shape("heldout", n)
    return {
        "heldout": held,
        "hash": replace(held, name="hash", audit="hash"),
        "suites1": replace(held, name="suites1", suites=1),
        "suites1000": replace(held, name="suites1000", suites=1000),
        "beta": replace(held, name="beta", losses="beta"),
        "delays": replace(held, name="delays", delay_pass=20.0, delay_fail=200.0,
                          missing_fail=0.1),
    }


def run(cmd: list[str]) -> tuple[float, float, float]:
    """Run ``cmd``; return (wall seconds, peak RSS in MB, CPU seconds) of that child alone."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stderr.close()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {err.decode()[-2000:]}")
    cpu = usage.ru_utime + usage.ru_stime
    return wall, usage.ru_maxrss / 1024.0, cpu  # ru_maxrss is in KiB on Linux


def replay_cmd(config: str, path: Path, sets: list[str]) -> list[str]:
    state = OUT / f"{path.stem}.STATE.json"
    return [sys.executable, "-m", "consumers.cli", "replay", "--config", config,
            *(f"--set={s}" for s in sets), "--input", str(path), "--state-out", str(state),
            "--alerts-out", os.devnull, "--requests-out", os.devnull,
            "--dead-letters-out", str(OUT / f"{path.stem}.dead.jsonl"), "--quiet"]


def state_summary(path: Path) -> tuple[int, float, int]:
    """(pending audited units, share of models whose primary certificate has settled,
    expired pending units)."""
    state = json.loads((OUT / f"{path.stem}.STATE.json").read_text())
    models = [m for s in state["suites"].values() for m in s["models"].values()]
    pending = sum(int(m.get("pending_units", 0)) for m in models)
    settled = sum(any(meth["primary"] and meth["status"] != "pending"
                      for c in m["certificates"].values() for meth in c["methods"].values())
                  for m in models)
    expired = sum(int(m["counts"]["expired_pending"]) for m in models)
    return pending, settled / max(1, len(models)), expired


def count(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(1 for _ in fh)


def measure(config: str, path: Path, sets: list[str], repeat: int) -> dict[str, float]:
    """Best of ``repeat`` for the replay and for the baseline, interleaved."""
    n = count(path)
    t_rep = t_base = rss = c_rep = c_base = float("inf")
    for _ in range(repeat):
        t_b, _, c_b = run([sys.executable, "-c", BASELINE, str(path)])
        t_r, rss_r, c_r = run(replay_cmd(config, path, sets))
        t_base, t_rep, rss = min(t_base, t_b), min(t_rep, t_r), min(rss, rss_r)
        c_base, c_rep = min(c_base, c_b), min(c_rep, c_r)
    _, settled, _ = state_summary(path)
    return {"events": n, "rate": n / t_rep, "base": n / t_base, "ratio": t_base / t_rep,
            "cpu_ratio": c_base / c_rep, "cpu_rate": n / c_rep, "rss_mb": rss,
            "load": os.getloadavg()[0], "settled": settled}


def current_stream(n: int, audit_rate: float) -> Path:
    """The stream of replay_throughput.py (same file, same cache), written by a child."""
    path = OUT / f"replay_{n}_{audit_rate}.jsonl"
    if not path.exists():
        code = ("import sys; sys.path.insert(0, 'benchmarks'); "
                f"from replay_throughput import make_file; make_file({n}, {audit_rate!r})")
        subprocess.run([sys.executable, "-c", code], check=True)
    return path


def hash_sets(shape: Shape) -> list[str]:
    return [f"suites.0.audit_rate={shape.audit_rate!r}"] if shape.audit == "hash" else []


def row(name: str, r: dict[str, float], target: float) -> str:
    ok = "yes" if min(r["ratio"], r["cpu_ratio"]) >= target else "NO"
    return (f"| {name} | {r['events']:,.0f} | {r['rate']:,.0f} | {r['base']:,.0f} | "
            f"{r['ratio']:.2f}x | {r['cpu_ratio']:.2f}x | {target}x {ok} | "
            f"{r['rss_mb']:,.0f} MB | {r['settled']:.0%} | {r['load']:.1f} |")


def table(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    print("| shape | events | events/s | JSON baseline events/s | ratio | CPU ratio | target | "
          "peak RSS | settled | load |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    wanted = args.shapes.split(",")
    tiny = OUT / "startup.jsonl"
    tiny.write_text('{"type":"judge","event_id":"j","suite":"s","model":"m","example_id":"x",'
                    '"loss":0.0,"ts":1700000000,"audit":false}\n')
    t_start, rss_start, _ = run(replay_cmd(args.config, tiny, []))
    t_base0, _, _ = run([sys.executable, "-c", BASELINE, str(tiny)])
    results["startup"] = {"replay_s": t_start, "baseline_s": t_base0, "rss_mb": rss_start}
    print(f"| (startup: one-event file) | 1 | {t_start:.2f} s | {t_base0:.2f} s | | | "
          f"{rss_start:,.0f} MB | | |", flush=True)
    if "current" in wanted:
        path = current_stream(max(100, round(1_000_000 * args.scale)), 0.05)
        results["current"] = measure(args.config, path, [], args.repeat)
        print(row("current (replay_throughput.py)", results["current"], 0.7), flush=True)
    for name, shape in shapes(args.scale).items():
        if name in wanted:
            path = cached(shape, OUT)
            results[name] = measure(args.config, path, hash_sets(shape), args.repeat)
            print(row(name, results[name], 0.5), flush=True)
    return results


def fleet(args: argparse.Namespace) -> dict[str, float]:
    suites = max(1, round(100 * args.scale))
    models = 50
    labels = 5
    one_label = 1 + 10  # 10 unaudited judge events per label
    n = suites * models * labels * (one_label + 1)
    big = Shape("fleet", n, suites=suites, models=models, seed=1)
    one = Shape("one", n, suites=1, models=1, seed=1)
    r_big = measure(args.config, cached(big, OUT), [], args.repeat)
    r_one = measure(args.config, cached(one, OUT), [], args.repeat)
    ratio = r_big["rate"] / r_one["rate"]
    cpu_ratio = r_big["cpu_rate"] / r_one["cpu_rate"]
    print(f"\nfleet: {suites * models:,} models ({suites} suites x {models}), {labels} labels "
          f"each, {n:,} events: {r_big['rate']:,.0f} events/s, peak RSS "
          f"{r_big['rss_mb']:,.0f} MB; one model, same length: {r_one['rate']:,.0f} events/s, "
          f"{r_one['rss_mb']:,.0f} MB; ratio {ratio:.2f}x, per CPU-second {cpu_ratio:.2f}x "
          f"(target 0.7x: {'met' if min(ratio, cpu_ratio) >= 0.7 else 'NOT met'}); settled: "
          f"{r_big['settled']:.0%} of the fleet, {r_one['settled']:.0%} of the one model",
          flush=True)
    return {"models": suites * models, "events": n, "fleet_rate": r_big["rate"],
            "one_rate": r_one["rate"], "ratio": ratio, "cpu_ratio": cpu_ratio,
            "fleet_rss_mb": r_big["rss_mb"]}


def memory(args: argparse.Namespace) -> dict[str, float]:
    n = max(100, round(1_000_000 * args.scale))
    # 0.5 s apart: 1,000,000 events span 5.8 days, within the 7-day pending TTL (all kept)
    outage = Shape("outage", n, suites=200, audited_only=True, seconds_per_event=0.5, seed=2)
    path = cached(outage, OUT)
    _, rss_out, _ = run(replay_cmd(args.config, path, []))
    pending, _, expired = state_summary(path)
    print(f"\nmemory: {n:,} judge events flagged for audit over 200 suites, no label: peak RSS "
          f"{rss_out:,.0f} MB (target 400 MB: {'met' if rss_out <= 400 else 'NOT met'}); "
          f"pending in STATE.json: {pending:,}, expired_pending: {expired:,}", flush=True)
    res: dict[str, float] = {"outage_events": n, "outage_rss_mb": rss_out}
    sizes = [max(10, round(10_000 * args.scale)), max(30, round(30_000 * args.scale))]
    for m in sizes:  # 10 judge events and 1 label per model (one round each)
        sh = Shape(f"models{m}", m * 12, suites=1, models=m, seed=3, unaudited_per_label=10.0)
        _, res[f"rss_{m}"], _ = run(replay_cmd(args.config, cached(sh, OUT),
                                               [f"events.max_models={m}"]))
        print(f"memory: {m:,} models in one suite, {m * 12:,} events: peak RSS "
              f"{res[f'rss_{m}']:,.0f} MB", flush=True)
    per = (res[f"rss_{sizes[1]}"] - res[f"rss_{sizes[0]}"]) * 2**20 / (sizes[1] - sizes[0])
    res["bytes_per_model"] = per
    print(f"memory: {per:,.0f} bytes per model (RSS difference / model difference); 10,000 "
          f"models at that rate: {res[f'rss_{sizes[0]}'] + per * (10_000 - sizes[0]) / 2**20:,.0f}"
          f" MB (target: within 1 GiB)", flush=True)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every stream length")
    ap.add_argument("--shapes", default="current,heldout,hash,suites1,suites1000,beta,delays")
    ap.add_argument("--no-fleet", action="store_true")
    ap.add_argument("--memory", action="store_true", help="also the memory mode")
    ap.add_argument("--repeat", type=int, default=1, help="best of N for each figure")
    ap.add_argument("--config", default=str(ROOT / "examples" / "minimal.toml"))
    args = ap.parse_args(argv)
    os.chdir(ROOT)
    OUT.mkdir(parents=True, exist_ok=True)
    print(f"{time.strftime('%Y-%m-%d %H:%M')} scale {args.scale}, {os.cpu_count()} CPUs, load "
          f"{os.getloadavg()[0]:.2f} at start; config {Path(args.config).name}", flush=True)
    results: dict[str, object] = {"shapes": table(args) if args.shapes else {}}
    if not args.no_fleet:
        results["fleet"] = fleet(args)
    if args.memory:
        results["memory"] = memory(args)
    (OUT / f"replay_shapes_{args.scale}.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
