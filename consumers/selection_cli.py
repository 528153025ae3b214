r"""Best-model selection commands: an evaluation worker, an embedded loop, a synthetic benchmark.

- ``certmon select-demo``: engine and evaluation worker in one process (the embedded default):
  the engine requests evaluations, the worker answers from a score matrix (synthetic by
  default), until the best model is certified or the budget is spent.
- ``certmon evaluate-worker``: answers evaluation requests (JSONL file/stdin, or the Kafka
  requests topic with ``--kafka``) with score events (JSONL file/stdout, or the Kafka events
  topic), backed by a synthetic or user-given matrix; ``--kickoff`` first sends one kickoff
  event per suite so certmon starts its loop.
- ``certmon selection-benchmark``: writes a synthetic benchmark (``scores.npy``,
  ``history.npy``, ``truth.json`` and a config snippet).

Answers are judge events with ``loss = 1 - score`` (see :mod:`monitor.selection`).

Examples
--------
>>> run = run_embedded(demo_config(4, 60, gap=0.2, out_dir=None), synthetic_worker(
...     demo_config(4, 60, gap=0.2, out_dir=None), gap=0.2))
>>> run.alerts[0]["kind"], run.alerts[0]["model"] == run.truth["bench"]["best"]
('best_model', True)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from monitor.config import CertmonConfig, load_config, parse_config
from monitor.engine import Engine
from monitor.errors import CertmonError, ConfigError
from monitor.selection import (
    KICKOFF_EXAMPLE_ID,
    SelectionSettings,
    load_matrix,
    synthetic_benchmark,
)

__all__ = ["EvaluationWorker", "SelectionRun", "demo_config", "register", "run_embedded",
           "run_kafka_worker", "synthetic_worker"]

_START_TS = 1_700_000_000.0


def _selection_suites(config: CertmonConfig) -> dict[str, SelectionSettings]:
    return {sc.name: sc.selection for sc in config.suites
            if sc.mode == "selection" and sc.selection is not None
            and not any(ch in sc.name for ch in "*?[")}  # fmt: skip


class EvaluationWorker:
    """Answer evaluation requests from score matrices (one per suite).

    Parameters
    ----------
    suites : dict
        ``suite -> (settings, scores)`` with ``scores`` of shape ``(len(models), N)``.
    truth : dict, optional
        ``suite -> {"means", "best", "gap"}`` (synthetic benchmarks), for reports.

    Notes
    -----
    Each request id is answered once (re-emitted requests are skipped); event ids are
    ``"<request_id>/<example_id>"``, so a re-sent answer is a duplicate certmon drops.
    """

    def __init__(self, suites: dict[str, tuple[SelectionSettings, np.ndarray]],
                 truth: dict[str, dict[str, Any]] | None = None) -> None:
        self._suites = {}
        for name, (settings, scores) in suites.items():
            shape = (len(settings.models), len(settings.example_ids))
            if scores.shape != shape:
                raise ConfigError(f"suite {name!r}: score matrix has shape {scores.shape}, "
                                  f"expected {shape} (models x examples)")
            if np.isnan(scores).any():
                raise ConfigError(f"suite {name!r}: the score matrix must be fully observed")
            mi = {m: i for i, m in enumerate(settings.models)}
            ei = {e: j for j, e in enumerate(settings.example_ids)}
            self._suites[name] = (mi, ei, scores)
        self.truth = truth or {}
        self.answered: set[str] = set()
        self.requests = 0
        self.evaluations = 0

    @property
    def suites(self) -> list[str]:
        """Suites this worker answers for."""
        return list(self._suites)

    def kickoff(self, suite: str, ts: float) -> bytes:
        """Return the kickoff event starting ``suite`` (see :mod:`monitor.state.selection`)."""
        mi = self._suites[suite][0]
        return json.dumps({"type": "judge", "event_id": f"kickoff/{suite}/{ts!r}",
                           "suite": suite, "model": next(iter(mi)),
                           "example_id": KICKOFF_EXAMPLE_ID, "loss": 0.0, "ts": ts}).encode()

    def answer(self, request: dict[str, Any], ts: float) -> list[bytes]:
        """Score events answering one request ([] for other kinds, suites or repeats)."""
        suite = request.get("suite")
        rid = str(request.get("request_id"))
        if request.get("kind") != "evaluate" or suite not in self._suites or rid in self.answered:
            return []
        mi, ei, scores = self._suites[str(suite)]
        i = mi.get(str(request.get("model")))
        if i is None:
            return []
        self.answered.add(rid)
        self.requests += 1
        out = []
        for ex in request.get("example_ids", []):
            j = ei.get(str(ex))
            if j is None:
                continue
            self.evaluations += 1
            out.append(json.dumps({
                "type": "judge", "event_id": f"{rid}/{ex}", "suite": suite,
                "model": request["model"], "example_id": ex,
                "loss": 1.0 - float(scores[i, j]), "ts": ts}).encode())
        return out


def synthetic_worker(config: CertmonConfig, *, seed: int = 0, gap: float = 0.05,
                     n_history: int = 40, matrix: str | None = None) -> EvaluationWorker:
    """Build a worker for every plain-named selection suite (synthetic by seed, or a file)."""
    suites: dict[str, tuple[SelectionSettings, np.ndarray]] = {}
    truth: dict[str, dict[str, Any]] = {}
    for name, s in _selection_suites(config).items():
        if matrix is None or matrix == "synthetic":
            b = synthetic_benchmark(len(s.models), len(s.example_ids), n_history=n_history,
                                    gap=gap, seed=seed)
            suites[name] = (s, b.scores)
            truth[name] = b.truth(list(s.models))
        else:
            try:
                suites[name] = (s, load_matrix(matrix))
            except ValueError as exc:
                raise ConfigError(f"--matrix: {exc}") from None
    if not suites:
        raise ConfigError("the configuration has no selection suite with a plain name")
    return EvaluationWorker(suites, truth)


def demo_config(n_models: int, n_examples: int, *, gap: float = 0.05, seed: int = 0,
                n_history: int = 40, out_dir: str | None = None,
                overrides: Iterable[str] = ()) -> CertmonConfig:
    """Return the built-in selection config (with ``out_dir``: history warm-starts PULSE)."""
    hist = ""
    if out_dir is not None:
        b = synthetic_benchmark(n_models, n_examples, n_history=n_history, gap=gap, seed=seed)
        path = Path(out_dir) / "history.npy"
        np.save(path, b.history)
        hist = f'history = "{path}"\n'
    models = ", ".join(f'"m{i}"' for i in range(n_models))
    text = (f'[[suites]]\nname = "bench"\nmode = "selection"\n[suites.selection]\n'
            f"models = [{models}]\nexamples = {n_examples}\n{hist}"
            f"batch_size = 16\nmax_outstanding = 4\nrefit_every = 5\nseed = {seed}\n"
            f'[metrics]\nenabled = false\n[sinks]\nalerts = "none"\n')
    return parse_config(text, list(overrides), source="<built-in selection demo config>")


@dataclass
class SelectionRun:
    """What :func:`run_embedded` produced."""

    engine: Engine
    alerts: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    events: list[bytes] = field(default_factory=list)
    truth: dict[str, dict[str, Any]] = field(default_factory=dict)


def run_embedded(config: CertmonConfig, worker: EvaluationWorker, *,
                 engine: Engine | None = None, max_events: int | None = None,
                 max_seconds: float | None = None) -> SelectionRun:
    """Engine + worker in one process until no request is left (certified or budget spent).

    Deterministic: requests are answered in emission order, each answer stamped with its
    request's ``ts + 1``; ``run.events`` replayed through ``certmon replay`` gives the same state.
    """
    eng = engine or Engine(config)
    run = SelectionRun(eng, truth=dict(worker.truth))
    queue = deque(eng.start(_START_TS).requests)
    run.requests.extend(queue)
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    while queue:
        req = queue.popleft()
        for raw in worker.answer(req, float(req["ts"]) + 1.0):
            res = eng.process(raw)
            run.events.append(raw)
            run.alerts.extend(res.alerts)
            run.requests.extend(res.requests)
            queue.extend(res.requests)
        if max_events is not None and len(run.events) >= max_events:
            break
        if deadline is not None and time.monotonic() > deadline:
            break
    return run


def run_kafka_worker(config: CertmonConfig, worker: EvaluationWorker, stop: threading.Event, *,
                     kickoff: bool = True, group_id: str | None = None,
                     poll_ms: int = 100) -> None:
    """Answer requests from the Kafka requests topic onto the events topic until ``stop``.

    The consumer group is ``<kafka.group_id>-evaluator`` unless given; answers and kickoff
    events are keyed by suite (the partitioning certmon relies on).
    """
    from kafka import KafkaConsumer

    from consumers.kafka_sinks import create_producer
    from consumers.kafka_source import kafka_config_of

    k = kafka_config_of(config)
    producer = create_producer(k)
    consumer = KafkaConsumer(
        k.topics.requests, **k.client_kwargs(), client_id=f"{k.client_id}-evaluator",
        group_id=group_id or f"{k.group_id}-evaluator", auto_offset_reset="earliest",
        enable_auto_commit=True)  # fmt: skip
    try:
        if kickoff:
            for suite in worker.suites:
                producer.send(k.topics.events, key=suite.encode(),
                              value=worker.kickoff(suite, time.time()))
            producer.flush()
        while not stop.is_set():
            sent = False
            for recs in consumer.poll(timeout_ms=poll_ms).values():
                for rec in recs:
                    try:
                        req = json.loads(rec.value)
                    except (TypeError, ValueError):
                        continue
                    if not isinstance(req, dict):
                        continue
                    for raw in worker.answer(req, time.time()):
                        producer.send(k.topics.events, key=str(req["suite"]).encode(), value=raw)
                        sent = True
            if sent:
                producer.flush()
    finally:
        consumer.close()
        producer.close()


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
    d.add_argument("--models", type=int, default=8)
    d.add_argument("--examples", type=int, default=400)
    d.add_argument("--out-dir", help="where the built-in config's history.npy goes")
    d.add_argument("--max-seconds", type=float, default=120.0)
    d.add_argument("--state-out")
    d.add_argument("--alerts-out")
    d.add_argument("--requests-out")
    d.add_argument("--events-out", help="the score events (replayable with certmon replay)")
    d.add_argument("--quiet", action="store_true")
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
    b.add_argument("--out-dir", required=True)
    b.add_argument("--models", type=int, default=8)
    b.add_argument("--examples", type=int, default=400)
    b.add_argument("--history-models", type=int, default=40)
    b.add_argument("--gap", type=float, default=0.08)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show tracebacks on errors")
    b.set_defaults(func=cmd_selection_benchmark)
