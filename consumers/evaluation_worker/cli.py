r"""Best-model selection commands of ``certmon``: select-demo, evaluate-worker, selection-benchmark.

- ``certmon select-demo``: engine and evaluation worker in one process (the embedded default):
  the engine requests evaluations, the worker answers from a score matrix (synthetic by
  default), until the best model is certified or the budget is spent.
- ``certmon evaluate-worker``: answers evaluation requests (JSONL file/stdin, or the Kafka
  requests topic with ``--kafka``) with score events (JSONL file/stdout, or the Kafka events
  topic), backed by a synthetic or user-given matrix; ``--kickoff`` first sends one kickoff
  event per suite so certmon starts its loop.
- ``certmon selection-benchmark``: writes a synthetic benchmark (``scores.npy``,
  ``history.npy``, ``truth.json`` and a config snippet).

The worker and the embedded loop are in :mod:`consumers.evaluation_worker.worker` (re-exported
here).

Examples
--------
>>> parser = argparse.ArgumentParser(prog="certmon")
>>> register(parser.add_subparsers(dest="command"))
>>> args = parser.parse_args(["select-demo", "--models", "4", "--quiet"])
>>> args.func is cmd_select_demo, args.models, args.examples, args.quiet
(True, 4, 400, True)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from consumers.evaluation_worker.worker import (
    EvaluationWorker,
    SelectionRun,
    demo_config,
    run_embedded,
    run_kafka_worker,
    synthetic_worker,
)
from monitor.config import load_config
from monitor.errors import CertmonError, ConfigError
from monitor.selection_settings import synthetic_benchmark

__all__ = ["EvaluationWorker", "SelectionRun", "demo_config", "register", "run_embedded",
           "run_kafka_worker", "synthetic_worker"]


# ---------------------------------------------------------------------- commands
def _summary(run: SelectionRun, out: Any) -> None:
    for suite, view in sorted(run.engine.state_view()["suites"].items()):
        sel = view.get("selection")
        if sel is None:
            continue
        means = run.truth.get(suite, {}).get("means", {})
        print(f"suite {suite!r} ({sel['method']}): {sel['calls_completed']} of "
              f"{sel['n_examples'] * len(sel['models'])} evaluations "
              f"(budget used {sel['budget_used']:.1%})", file=out)
        print(f"  {'model':<12}{'true':>7}{'estimate':>10}{'lower':>8}{'upper':>8}"
              f"{'pulls':>7}{'evals':>7}", file=out)
        for m, mv in sel["models"].items():
            true = f"{means[m]:.3f}" if m in means else "-"
            est = "-" if mv["estimate"] is None else f"{mv['estimate']:.3f}"
            print(f"  {m:<12}{true:>7}{est:>10}{mv['lower']:>8.3f}{mv['upper']:>8.3f}"
                  f"{mv['pulls']:>7}{mv['evaluations']:>7}", file=out)
        best = sel["best_model"]
        verdict = (f"certified best model: {best} (delta {sel['delta']})" if best
                   else f"not certified; leader {sel['leader']}")
        true_best = run.truth.get(suite, {}).get("best")
        print(f"  {verdict}" + (f"; true best: {true_best}" if true_best else ""), file=out)


def _write_jsonl(path: str | None, records: Iterable[Any]) -> None:
    if not path:
        return
    with open(path, "wb") as f:
        for r in records:
            f.write((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n")


def cmd_select_demo(args: argparse.Namespace) -> int:
    """Embedded engine + worker until the best model is certified."""
    from consumers.runner import write_state

    with tempfile.TemporaryDirectory() as tmp:
        if args.config:
            config = load_config(args.config, args.overrides)
        else:
            config = demo_config(args.models, args.examples, gap=args.gap, seed=args.seed,
                                 n_history=args.history_models, out_dir=args.out_dir or tmp,
                                 overrides=args.overrides)
        worker = synthetic_worker(config, seed=args.seed, gap=args.gap,
                                  n_history=args.history_models, matrix=args.matrix)
        t0 = time.monotonic()
        run = run_embedded(config, worker, max_seconds=args.max_seconds)
    dt = time.monotonic() - t0
    _write_jsonl(args.alerts_out, run.alerts)
    _write_jsonl(args.requests_out, run.requests)
    _write_jsonl(args.events_out, run.events)
    if args.state_out:
        write_state(args.state_out, run.engine.state_view())
    if not args.quiet:
        _summary(run, sys.stdout)
        print(f"{len(run.events)} score events, {len(run.requests)} requests in {dt:.1f}s",
              file=sys.stdout)
    return 0


def cmd_evaluate_worker(args: argparse.Namespace) -> int:
    """Answer evaluation requests with score events."""
    config = load_config(args.config, args.overrides)
    worker = synthetic_worker(config, seed=args.seed, gap=args.gap,
                              n_history=args.history_models, matrix=args.matrix)
    if args.kafka:
        from consumers.runner import install_signal_handlers

        stop = threading.Event()
        restore = install_signal_handlers(stop.set)
        timer = threading.Timer(args.max_seconds or 0.0, stop.set)
        timer.daemon = True
        if args.max_seconds:
            timer.start()
        try:
            run_kafka_worker(config, worker, stop, kickoff=args.kickoff)
        finally:
            timer.cancel()
            restore()
        return 0
    try:
        src = sys.stdin if args.requests == "-" else open(args.requests, encoding="utf-8")  # noqa: SIM115
        dst = sys.stdout.buffer if args.out == "-" else open(args.out, "ab")  # noqa: SIM115
    except OSError as exc:
        raise CertmonError(f"cannot open {exc.filename}: {exc.strerror}") from None
    try:
        if args.kickoff:
            for suite in worker.suites:
                dst.write(worker.kickoff(suite, time.time()) + b"\n")
            dst.flush()
        for line in src:
            try:
                req = json.loads(line)
            except ValueError:
                continue
            if isinstance(req, dict):
                for raw in worker.answer(req, time.time()):
                    dst.write(raw + b"\n")
                dst.flush()
    finally:
        if src is not sys.stdin:
            src.close()
        if dst is not sys.stdout.buffer:
            dst.close()
    print(f"certmon: answered {worker.requests} requests ({worker.evaluations} evaluations)",
          file=sys.stderr)
    return 0


def cmd_selection_benchmark(args: argparse.Namespace) -> int:
    """Write a synthetic benchmark: scores.npy, history.npy, truth.json, selection.toml."""
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    try:
        b = synthetic_benchmark(args.models, args.examples, n_history=args.history_models,
                                gap=args.gap, seed=args.seed)
    except ValueError as exc:
        raise ConfigError(f"selection-benchmark: {exc}") from None
    names = [f"m{i}" for i in range(args.models)]
    np.save(out / "scores.npy", b.scores)
    np.save(out / "history.npy", b.history)
    (out / "truth.json").write_text(json.dumps(b.truth(names), indent=2) + "\n")
    (out / "selection.toml").write_text(
        f'[[suites]]\nname = "bench"\nmode = "selection"\n[suites.selection]\n'
        f"models = {json.dumps(names)}\nexamples = {args.examples}\n"
        f'history = "{(out / "history.npy").resolve()}"\nbatch_size = 16\n'
        f"max_outstanding = 4\nseed = {args.seed}\n")  # fmt: skip
    print(f"certmon: wrote {out}/scores.npy, history.npy, truth.json, selection.toml "
          f"(best {names[b.best]}, gap {b.gap:.3f})", file=sys.stderr)
    return 0


def register(sub: Any) -> None:
    """Add the selection commands to ``certmon``'s subparsers."""

    def common(sp: argparse.ArgumentParser, config_required: bool) -> None:
        sp.add_argument("--config", required=config_required, help="TOML configuration file")
        sp.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a config key (dotted path; TOML value)")
        sp.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show tracebacks on errors")

    def matrix(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--matrix", default="synthetic",
                        help="'synthetic' or a .npy/.json score matrix (models x examples)")
        sp.add_argument("--seed", type=int, default=0, help="synthetic benchmark seed")
        sp.add_argument("--gap", type=float, default=0.08, help="synthetic top-2 gap")
        sp.add_argument("--history-models", type=int, default=40,
                        help="synthetic historical models")

    d = sub.add_parser("select-demo", help="best-model selection: engine + worker in-process")
    common(d, config_required=False)
    matrix(d)
    d.add_argument("--models", type=int, default=8, help="simulated candidate models")
    d.add_argument("--examples", type=int, default=400, help="simulated examples")
    d.add_argument("--out-dir", help="where the built-in config's history.npy goes")
    d.add_argument("--max-seconds", type=float, default=120.0, help="stop after this long")
    d.add_argument("--state-out", help="write STATE.json at the end")
    d.add_argument("--alerts-out", help="alerts JSONL file")
    d.add_argument("--requests-out", help="evaluation requests JSONL file")
    d.add_argument("--events-out", help="the score events (replayable with certmon replay)")
    d.add_argument("--quiet", action="store_true", help="no progress on stdout")
    d.set_defaults(func=cmd_select_demo)

    w = sub.add_parser("evaluate-worker", help="answer evaluation requests with score events")
    common(w, config_required=True)
    matrix(w)
    w.add_argument("--requests", default="-", help="requests JSONL file or - (stdin)")
    w.add_argument("--out", default="-", help="events JSONL file (appended) or - (stdout)")
    w.add_argument("--kafka", action="store_true",
                   help="read the [kafka] requests topic, write to the events topic")
    w.add_argument("--kickoff", action="store_true", help="first send one kickoff event per suite")
    w.add_argument("--max-seconds", type=float, help="--kafka: stop after this long")
    w.set_defaults(func=cmd_evaluate_worker)

    b = sub.add_parser("selection-benchmark", help="write a synthetic selection benchmark")
    b.add_argument("--out-dir", required=True, help="where the results are written")
    b.add_argument("--models", type=int, default=8, help="candidate models")
    b.add_argument("--examples", type=int, default=400, help="examples per model")
    b.add_argument("--history-models", type=int, default=40,
                   help="models in the synthetic history matrix")
    b.add_argument("--gap", type=float, default=0.08, help="synthetic top-2 gap")
    b.add_argument("--seed", type=int, default=0, help="random seed")
    b.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show tracebacks on errors")
    b.set_defaults(func=cmd_selection_benchmark)
