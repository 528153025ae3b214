r"""A runnable labeller: answers certmon's label requests with label events.

File mode reads requests (JSONL: a ``requests.jsonl`` written by ``certmon replay`` or
``sinks.requests = "file:..."``) and writes label events (JSONL) that ``certmon replay`` /
``certmon run`` read back::

    python -m consumers.labelling.labeller --requests requests.jsonl --out labels.jsonl \
        --answer mypackage.labels:ask_a_human

Kafka mode answers the requests topic (``[kafka.topics] requests``, default
``certmon.requests.v1``) onto the events topic (``certmon.eval-events.v1``), keyed by suite,
in its own consumer group ``<kafka.group_id>-labeller``::

    python -m consumers.labelling.labeller --kafka --config certmon.toml --answer mod:func

The answer function is pluggable: ``--answer MODULE:FUNCTION`` names a callable taking the
request (a dict, see ``docs/label-loop.md``) and returning a loss in [0, 1], or None when it
has no answer (yet): the request is then counted as unanswered and skipped. ``--truth FILE``
answers from a JSONL file of events carrying losses (keyed by suite, model and example_id;
e.g. a file of human labels), ``--constant LOSS`` answers every request the same (smoke
tests).

Each label answers by request id (``{"type": "label", "request_id", "suite", "model",
"example_id", "loss", "ts"}``, no ``event_id``: certmon derives ``"label:" + request_id``), so
answering a re-emitted request again is an exact duplicate that certmon counts and drops.

Examples
--------
>>> req = {"kind": "label", "request_id": "lbl1.WyJxYSIsIm0xIiwieDEiXQ", "suite": "qa",
...        "model": "m1", "example_id": "x1", "judge_event_id": "e1", "ts": 5.0}
>>> label_for(req, 1.0)
{'type': 'label', 'request_id': 'lbl1.WyJxYSIsIm0xIiwieDEiXQ', 'suite': 'qa', 'model': 'm1', 'example_id': 'x1', 'loss': 1.0, 'ts': 5.0}
"""  # noqa: E501

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from monitor.errors import CertmonError, ConfigError

__all__ = ["Answer", "Labeller", "constant_answer", "label_for", "load_answer", "main",
           "run_kafka_labeller", "truth_answer"]

Answer = Callable[[dict[str, Any]], float | None]


def label_for(request: dict[str, Any], loss: float, ts: float | None = None) -> dict[str, Any]:
    """Return the label event answering ``request`` with ``loss``.

    Parameters
    ----------
    request : dict
        A label request (``kind`` "label").
    loss : float
        The human loss, in [0, 1].
    ts : float, optional
        The label's time (default: the request's ``ts``, the judge event's time, which never
        moves certmon's event time; pass the labelling time in a live deployment).

    Raises
    ------
    ValueError
        ``loss`` is not a finite number in [0, 1].
    """
    if not (isinstance(loss, (int, float)) and math.isfinite(loss) and 0.0 <= loss <= 1.0):
        raise ValueError(f"the answer for {request.get('request_id')!r} is {loss!r}, "
                         "not a loss in [0, 1]")
    return {"type": "label", "request_id": request["request_id"], "suite": request["suite"],
            "model": request["model"], "example_id": request["example_id"],
            "loss": float(loss), "ts": request["ts"] if ts is None else ts}


def constant_answer(loss: float) -> Answer:
    """Answer every request with ``loss`` (smoke tests).

    Examples
    --------
    >>> constant_answer(0.0)({"request_id": "r"})
    0.0
    """
    return lambda request: loss


def truth_answer(lines: Iterable[str]) -> Answer:
    """Answer from events carrying losses (JSONL), keyed by ``(suite, model, example_id)``.

    Lines without the three ids and a numeric ``loss`` are ignored; a later line for the same
    unit wins. A unit with no line has no answer (None).

    Examples
    --------
    >>> ans = truth_answer(['{"suite": "qa", "model": "m", "example_id": "x", "loss": 1}'])
    >>> ans({"suite": "qa", "model": "m", "example_id": "x"}), ans({"suite": "qa"})
    (1.0, None)
    """
    table: dict[tuple[str, str, str], float] = {}
    for line in lines:
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if not isinstance(d, dict):
            continue
        key = (d.get("suite"), d.get("model"), d.get("example_id"))
        loss = d.get("loss")
        if all(isinstance(k, str) for k in key) and isinstance(loss, (int, float)):
            table[key] = float(loss)  # type: ignore[index]

    def answer(request: dict[str, Any]) -> float | None:
        return table.get((request.get("suite"), request.get("model"),  # type: ignore[arg-type]
                          request.get("example_id")))

    return answer


def load_answer(spec: str) -> Answer:
    """Import ``MODULE:FUNCTION`` (the answer function).

    Raises
    ------
    ConfigError
        The module or the function cannot be found, or is not callable.

    Examples
    --------
    >>> load_answer("consumers.labelling.labeller:nope")
    Traceback (most recent call last):
    ...
    monitor.errors.ConfigError: --answer consumers.labelling.labeller:nope: no callable 'nope'
    """
    module_name, _, func_name = spec.partition(":")
    if not module_name or not func_name:
        raise ConfigError(f"--answer {spec}: expected MODULE:FUNCTION")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"--answer {spec}: cannot import {module_name}: {exc}") from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise ConfigError(f"--answer {spec}: no callable {func_name!r}")
    answer: Answer = func
    return answer


@dataclass
class Labeller:
    """Turn label requests into label events with an answer function (no I/O).

    Notes
    -----
    Every input is accounted for: ``answered`` + ``unanswered`` (no answer yet) + ``repeats``
    (a request id already answered: certmon re-emits requests after a restart) + ``other``
    (not a label request, e.g. an evaluation request) + ``bad`` (not a request, or an
    answer that is not a loss in [0, 1]; each with a line in ``problems``).
    """

    answer: Answer
    clock: Callable[[], float] | None = None  # label time (None: the request's ts)
    answered: int = 0
    unanswered: int = 0
    repeats: int = 0
    other: int = 0
    bad: int = 0
    problems: list[str] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)

    def handle(self, raw: str | bytes) -> dict[str, Any] | None:
        """Return the label event answering one raw request, or None (counted why)."""
        try:
            req = json.loads(raw)
        except ValueError as exc:
            return self._bad(f"not JSON: {exc}")
        if not isinstance(req, dict) or "kind" not in req:
            return self._bad("not a request (no kind)")
        if req.get("kind") != "label":
            self.other += 1
            return None
        rid = req.get("request_id")
        if not isinstance(rid, str) or not all(
                isinstance(req.get(k), str) for k in ("suite", "model", "example_id")):
            return self._bad(f"label request without request_id or ids: {str(req)[:200]}")
        if rid in self._seen:
            self.repeats += 1
            return None
        loss = self.answer(req)
        if loss is None:
            self.unanswered += 1
            return None
        try:
            label = label_for(req, loss, None if self.clock is None else self.clock())
        except ValueError as exc:
            return self._bad(str(exc))
        self._seen.add(rid)
        self.answered += 1
        return label

    def _bad(self, why: str) -> dict[str, Any] | None:
        """Count a bad input and keep why; return None (no label)."""
        self.bad += 1
        self.problems.append(why)
        return None

    def summary(self) -> str:
        """One line: what was done with every input."""
        return (f"labeller: {self.answered} answered, {self.unanswered} without an answer, "
                f"{self.repeats} repeated requests, {self.other} other requests, "
                f"{self.bad} bad lines")


def run_files(labeller: Labeller, requests: Iterable[str], out: IO[str]) -> None:
    """Answer every request line, writing label events as JSON lines (flushed each)."""
    for line in requests:
        if not line.strip():
            continue
        label = labeller.handle(line)
        if label is not None:
            out.write(json.dumps(label, separators=(",", ":"), ensure_ascii=False) + "\n")
            out.flush()


def _follow(fh: IO[str], stop: threading.Event, poll: float = 0.2) -> Iterator[str]:
    """Lines of ``fh``, then lines appended later, until ``stop``."""
    buf = ""
    while not stop.is_set():
        chunk = fh.readline()
        if chunk:
            buf += chunk
            if buf.endswith("\n"):
                yield buf
                buf = ""
        else:
            time.sleep(poll)


def run_kafka_labeller(config: Any, labeller: Labeller, stop: threading.Event,
                       group_id: str | None = None, poll_ms: int = 200) -> None:
    """Answer the Kafka requests topic onto the events topic until ``stop``.

    Uses the project's Kafka client (kafka-python) and producer settings (idempotent,
    ``acks=all``); labels are keyed by suite, as certmon expects. Offsets are committed
    only after the labels of a poll were flushed (at-least-once: a crash may answer a request
    again, which certmon counts as an exact duplicate).
    """
    from kafka import KafkaConsumer

    from consumers.kafka.sinks import create_producer
    from monitor.config.kafka import kafka_config_of

    k = kafka_config_of(config)
    producer = create_producer(k)
    consumer = KafkaConsumer(
        k.topics.requests, **k.client_kwargs(), client_id=f"{k.client_id}-labeller",
        group_id=group_id or f"{k.group_id}-labeller", auto_offset_reset="earliest",
        enable_auto_commit=False)  # fmt: skip
    try:
        while not stop.is_set():
            polled = consumer.poll(timeout_ms=poll_ms)
            for recs in polled.values():
                for rec in recs:
                    label = labeller.handle(rec.value)
                    if label is not None:
                        producer.send(k.topics.events, key=str(label["suite"]).encode(),
                                      value=json.dumps(label).encode())
            if polled:
                producer.flush()
                consumer.commit()
    finally:
        consumer.close()
        producer.close()


def build_parser() -> argparse.ArgumentParser:
    """Build the labeller's command line."""
    p = argparse.ArgumentParser(
        prog="python -m consumers.labelling.labeller",
        description="Answer certmon label requests with label events (docs/label-loop.md).")
    p.add_argument("--requests", default="-", help="requests JSONL file (- for stdin)")
    p.add_argument("--out", default="-", help="label events JSONL file (- for stdout)")
    p.add_argument("--follow", action="store_true",
                   help="keep reading requests appended to --requests (Ctrl-C stops)")
    p.add_argument("--kafka", action="store_true",
                   help="answer the Kafka requests topic onto the events topic (needs --config)")
    p.add_argument("--config", help="certmon TOML configuration (its [kafka] section)")
    a = p.add_mutually_exclusive_group(required=True)
    a.add_argument("--answer", metavar="MODULE:FUNCTION",
                   help="callable(request) -> loss in [0, 1] or None (no answer yet)")
    a.add_argument("--truth", metavar="FILE",
                   help="answer from a JSONL file of events with suite, model, example_id, loss")
    a.add_argument("--constant", type=float, metavar="LOSS", help="answer every request so")
    p.add_argument("--ts", choices=["request", "now"], default="request",
                   help="label time: the request's (judge) time, or the wall clock")
    return p


def _answer_of(args: argparse.Namespace) -> Answer:
    if args.answer:
        return load_answer(args.answer)
    if args.truth:
        try:
            with open(args.truth, encoding="utf-8") as fh:
                return truth_answer(fh)
        except OSError as exc:
            raise ConfigError(f"--truth {args.truth}: {exc.strerror}") from None
    return constant_answer(args.constant)


def main(argv: list[str] | None = None) -> int:
    """Run the labeller; return the exit status (1 when some input was bad)."""
    args = build_parser().parse_args(argv)
    try:
        labeller = Labeller(_answer_of(args), clock=time.time if args.ts == "now" else None)
        stop = threading.Event()
        if args.kafka:
            if not args.config:
                raise ConfigError("--kafka needs --config (its [kafka] section)")
            from monitor.config import load_config

            try:
                run_kafka_labeller(load_config(args.config, []), labeller, stop)
            except KeyboardInterrupt:
                stop.set()
        else:
            src = sys.stdin if args.requests == "-" else open(args.requests, encoding="utf-8")  # noqa: SIM115
            out = sys.stdout if args.out == "-" else open(args.out, "a", encoding="utf-8")  # noqa: SIM115
            try:
                run_files(labeller, _follow(src, stop) if args.follow else src, out)
            except KeyboardInterrupt:
                pass
            finally:
                for fh in (src, out):
                    if fh not in (sys.stdin, sys.stdout):
                        fh.close()
    except (CertmonError, OSError) as exc:
        print(f"labeller: error: {exc}", file=sys.stderr)
        return 2
    for why in labeller.problems[:20]:
        print(f"labeller: bad input: {why}", file=sys.stderr)
    print(labeller.summary(), file=sys.stderr)
    return 1 if labeller.bad else 0


if __name__ == "__main__":
    sys.exit(main())
