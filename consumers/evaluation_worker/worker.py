"""Evaluation worker and embedded loop of best-model selection (no command-line parsing).

:class:`EvaluationWorker` answers certmon's evaluation requests from score matrices (synthetic by
default, see :func:`synthetic_worker`); :func:`run_embedded` runs an engine and a worker in one
process, and :func:`run_kafka_worker` answers the Kafka requests topic onto the events topic.
:func:`demo_config` is the built-in selection configuration. The ``certmon`` subcommands using
them are in :mod:`consumers.evaluation_worker.cli`.

Answers are judge events with ``loss = 1 - score`` (see :mod:`monitor.selection_settings`).

Examples
--------
>>> run = run_embedded(demo_config(4, 60, gap=0.2, out_dir=None), synthetic_worker(
...     demo_config(4, 60, gap=0.2, out_dir=None), gap=0.2))
>>> run.alerts[0]["kind"], run.alerts[0]["model"] == run.truth["bench"]["best"]
('best_model', True)
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from monitor.config import CertmonConfig, parse_config
from monitor.engine import Engine
from monitor.errors import ConfigError
from monitor.selection_settings import (
    KICKOFF_EXAMPLE_ID,
    SelectionSettings,
    load_matrix,
    synthetic_benchmark,
)

__all__ = ["EvaluationWorker", "SelectionRun", "demo_config", "run_embedded", "run_kafka_worker",
           "synthetic_worker"]

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
        """Return the kickoff event of ``suite`` (see :mod:`monitor.state.selection_suites`)."""
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
        Path(out_dir).mkdir(parents=True, exist_ok=True)  # as selection-benchmark's --out-dir
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

    from consumers.kafka.sinks import create_producer
    from consumers.kafka.source import kafka_config_of

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
