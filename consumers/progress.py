r"""Human-readable views of the state: the live demo table and summaries.

Everything here reads the STATE.json document (``Engine.state_view()``) and returns text.
Suite, model and certificate names are shown through :func:`printable`: a name carrying
terminal escape codes cannot drive the terminal (``certmon inspect`` is in
``consumers.inspection``).

Examples
--------
>>> view = {"suites": {"qa": {"models": {"m": {
...     "counts": {"judge": 10, "labels": 2, "rounds": 2},
...     "certificates": {"risk": {"alpha": 0.1, "delta": 0.05, "methods": {"r_eval": {
...         "rounds": 2, "status": "pending", "certified_at_round": None,
...         "violated_at_round": None, "cs_lower": 0.0, "cs_upper": 0.9,
...         "risk_estimate": 0.5}}}}}}}}}
>>> print("\n".join(render_table(view)))
suite/model  cert  alpha  rounds  labels  judge  risk   CS              r_eval
qa/m         risk  0.1         2       2     10  0.500  [0.000, 0.900]  pending
>>> status_cell({"status": "certified", "certified_at_round": 7})
'certified@7'
>>> printable("evil\x1b[2Jname")
'evil\\x1b[2Jname'
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any, TextIO

import numpy as np

from consumers.alertmanager.wiring import PREFIX, FanOutSink, open_alert_sink, take_over
from consumers.runner import IterSource, Outputs, Runner
from monitor.checkpoint import atomic_write
from monitor.config import CertmonConfig
from monitor.errors import CertmonError
from monitor.simulate import DEFAULT_MODELS, SimulationSpec, iter_jsonl
from monitor.sinks import MemorySink, NullSink, Sink, open_sink

__all__ = [
    "METHOD_LABELS",
    "Ticker",
    "iter_rows",
    "one_line",
    "printable",
    "render_table",
    "run_demo",
    "status_cell",
    "summary_lines",
]

METHOD_LABELS = {"r_eval": "R-Eval", "r_autoeval": "R-AutoEval", "r_autoeval_plus": "R-AutoEval+"}


def status_cell(m: dict[str, Any]) -> str:
    """``certified@ROUND``, ``violated@ROUND`` or ``pending``."""
    status = str(m.get("status", "pending"))
    if status == "certified":
        return f"certified@{m.get('certified_at_round')}"
    if status == "violated":
        return f"violated@{m.get('violated_at_round')}"
    return status


def _fmt(x: Any, spec: str = ".3f") -> str:
    return "-" if x is None else format(float(x), spec)


_Row = tuple[str, str, str, dict[str, Any], dict[str, Any]]


def printable(text: str) -> str:
    r"""``text`` with every non-printable character (escape codes, newlines...) as ``\xNN``."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)


def iter_rows(view: dict[str, Any]) -> Iterator[_Row]:
    """Yield ``(suite, model, certificate, model_view, certificate_view)`` in sorted order.

    The three names are made :func:`printable` (they come from the input events).
    """
    for suite in sorted(view.get("suites", {})):
        models = view["suites"][suite].get("models", {})
        for model in sorted(models):
            mv = models[model]
            for cert in sorted(mv.get("certificates", {})):
                yield (printable(suite), printable(model), printable(cert), mv,
                       mv["certificates"][cert])


def _primary(cv: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    methods = cv.get("methods", {})
    name = "r_autoeval_plus" if "r_autoeval_plus" in methods else sorted(methods)[0]
    return name, methods[name]


def render_table(view: dict[str, Any]) -> list[str]:
    """Render a table: one row per suite/model/certificate, one status column per method."""
    methods: list[str] = []
    for *_, cv in iter_rows(view):
        for meth in cv.get("methods", {}):
            if meth not in methods:
                methods.append(meth)
    order: list[str] = [m for m in ("r_eval", "r_autoeval", "r_autoeval_plus") if m in methods]
    order += [m for m in methods if m not in order]
    header = ["suite/model", "cert", "alpha", "rounds", "labels", "judge", "risk", "CS", *order]
    rows = [header]
    for suite, model, cert, mv, cv in iter_rows(view):
        _, pm = _primary(cv)
        counts = mv.get("counts", {})
        rows.append(
            [
                f"{suite}/{model}",
                cert,
                f"{cv.get('alpha')}",
                str(counts.get("rounds", 0)),
                str(counts.get("labels", 0)),
                str(counts.get("judge", 0)),
                _fmt(pm.get("risk_estimate")),
                f"[{_fmt(pm.get('cs_lower'))}, {_fmt(pm.get('cs_upper'))}]",
                *[status_cell(cv["methods"][m]) if m in cv["methods"] else "" for m in order],
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    right = {3, 4, 5}
    lines = []
    for r in rows:
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


def one_line(view: dict[str, Any], elapsed: float) -> str:
    """Render a compact single-line progress report (for non-TTY output).

    Examples
    --------
    >>> one_line({"suites": {}, "counters": {"events_in": 5}}, 1.0)
    '[1s] events=5'
    """
    parts = [f"[{elapsed:.0f}s] events={view.get('counters', {}).get('events_in', 0)}"]
    for _, model, cert, mv, cv in iter_rows(view):
        _, pm = _primary(cv)
        parts.append(
            f"{model}/{cert}: {status_cell(pm)} rounds={mv.get('counts', {}).get('rounds', 0)} "
            f"CS=[{_fmt(pm.get('cs_lower'))}, {_fmt(pm.get('cs_upper'))}]"
        )
    return " | ".join(parts)


def summary_lines(view: dict[str, Any]) -> list[str]:
    r"""Table plus, per certificate decided, how many labels each method needed.

    The labels are counted from the start of the certificate's current epoch (a regression or
    an improvement restarts the certificate; its decision rounds are the model's rounds).

    Examples
    --------
    >>> cv = {"alpha": 0.1, "epoch": {"epoch": 2, "started_round": 647, "reason": "regression"},
    ...       "methods": {"r_eval": {"status": "violated", "violated_at_round": 655}}}
    >>> view = {"suites": {"s": {"models": {"m": {"certificates": {"risk": cv}}}}}}
    >>> print(summary_lines(view)[-1].replace(": ", ":\n"))
      s/m/risk:
    labels needed to decide in epoch 2 (from round 647, after a regression):
    R-Eval 8 (at round 655)
    """
    lines = render_table(view)
    notes: list[str] = []
    for suite, model, cert, _, cv in iter_rows(view):
        ep = cv.get("epoch") or {}
        start = int(ep.get("started_round") or 0)
        decided = []
        for meth, mv in cv.get("methods", {}).items():
            r = mv.get("certified_at_round") or mv.get("violated_at_round")
            if r is not None:
                used = f"{int(r) - start} (at round {r})" if start and int(r) >= start else f"{r}"
                decided.append(f"{METHOD_LABELS.get(meth, meth)} {used}")
        if decided:
            where = ""
            if int(ep.get("epoch") or 1) > 1:
                where = (f" in epoch {ep['epoch']} (from round {start}, after a "
                         f"{ep.get('reason')})")
            notes.append(f"  {suite}/{model}/{cert}: labels needed to decide{where}: "
                         + ", ".join(decided))
    if notes:
        lines += ["", *notes]
    c = view.get("counters")
    if c:
        rej = sum(c.get("rejected", {}).values())
        dup = sum(c.get("duplicates", {}).values())
        alerts = ", ".join(f"{k} {v}" for k, v in c.get("alerts", {}).items() if v)
        lines += [
            "",
            f"events {c.get('events_in', 0)}, rejected {rej}, duplicates {dup}, "
            f"unrouted {c.get('unrouted', 0)}, "
            f"label requests {c.get('label_requests', 0)}, alerts {alerts or 0}",
        ]
    return lines


# ---------------------------------------------------------------------- demo
def _primary_statuses(view: dict[str, Any]) -> list[str]:
    return [str(_primary(cv)[1].get("status")) for *_, cv in iter_rows(view)]


def run_demo(config: CertmonConfig, args: argparse.Namespace) -> int:
    """``certmon demo``: simulate, monitor, serve metrics, live table, summary.

    Stops when every certificate's primary method has settled (certified or violated),
    after ``args.max_events`` events, or on Ctrl-C; then prints a summary.
    """
    from prometheus_client import CollectorRegistry

    from monitor.metrics import OperationalMetrics, StateCollector, serve_metrics, stop_metrics

    suite = config.suites[0]
    name = suite.name if not any(ch in suite.name for ch in "*?[") else "demo"
    rate = args.rate if args.rate and args.rate > 0 else None
    config = config.model_copy(
        update={"source": config.source.model_copy(update={"max_events_per_second": rate})}
    )
    spec = SimulationSpec(
        suite=name,
        models=DEFAULT_MODELS,
        examples=args.max_events,
        audit_rate=suite.audit_rate,
        max_events=args.max_events,
    )
    alerts: list[dict[str, Any]] = []
    sink: Sink = open_sink(f"file:{args.alerts_out}") if args.alerts_out else MemorySink()
    pushed = [s for s in config.sinks.alert_specs if s.startswith(PREFIX)]
    if pushed:  # also push to the configured Alertmanager(s)
        sink = FanOutSink([sink, *(open_alert_sink(config.sinks, override=s) for s in pushed)])
    outputs = Outputs(sink, NullSink(), NullSink())
    registry = CollectorRegistry()
    ops = OperationalMetrics(registry)
    runner = Runner(config, outputs, metrics=ops, on_alert=alerts.append)
    take_over(outputs.alerts, runner.view())
    shown = config.metrics.detail == "shown"
    registry.register(StateCollector(lambda: runner.view(shown), config.metrics.detail,
                                     version_fn=runner.state_version))
    out = sys.stdout
    server = None
    if not args.no_metrics:
        host = config.metrics.host
        port = args.port if args.port is not None else config.metrics.port
        try:
            server = serve_metrics(registry, host, port, lambda: runner.ready)
        except CertmonError as exc:
            if args.port is not None:  # asked for explicitly: never move silently
                outputs.close()
                raise CertmonError(f"{exc} (choose another --port, or --no-metrics)") from None
            server = serve_metrics(registry, host, 0, lambda: runner.ready)
            print(f"port {port} is busy; using port {server[0].server_port} instead", file=out)
        print(f"metrics: http://{host}:{server[0].server_port}/metrics", file=out)
    truth = ", ".join(f"{m.name} (risk {m.risk}, judge accuracy {m.judge_accuracy})"
                      for m in spec.models)
    cert = suite.certificates[0]
    print(f"simulating suite {name!r}: {truth}", file=out)
    print(f"certificate {cert.name!r}: risk <= {cert.alpha} at confidence {1 - cert.delta:g}, "
          f"audit rate {suite.audit_rate}", file=out)
    print("", file=out, flush=True)

    def stop(signum: int, frame: FrameType | None) -> None:
        runner.stop()

    old_handlers = {}
    if threading.current_thread() is threading.main_thread():
        old_handlers = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    display = _LiveDisplay(runner, alerts, out)
    source = IterSource(iter_jsonl(spec, np.random.default_rng(args.seed)))
    thread = threading.Thread(target=runner.run, args=(source,), daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(1.0)
            view = display.refresh()
            statuses = _primary_statuses(view)
            if statuses and all(s in ("certified", "violated") for s in statuses):
                runner.stop()
            if time.monotonic() - display.t0 > args.max_seconds:
                runner.stop()
        thread.join()
        view = runner.view()
        display.refresh(final=True)
    finally:
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)
        outputs.close()
        if server is not None:
            stop_metrics(*server)
    settled = all(s in ("certified", "violated") for s in _primary_statuses(view))
    print("", file=out)
    why = "certificates settled" if settled else "stopped before every certificate settled"
    print(f"summary ({why}, {time.monotonic() - display.t0:.0f}s):", file=out)
    for line in summary_lines(view):
        print(line, file=out)
    if args.state_out:
        data = json.dumps(view, sort_keys=True, indent=2, allow_nan=False) + "\n"
        atomic_write(args.state_out, data.encode())
        print(f"state written to {args.state_out}", file=out)
    return 0


class _LiveDisplay:
    """Redraw the table about once per second (plain lines when not a terminal)."""

    def __init__(self, runner: Runner, alerts: list[dict[str, Any]], out: TextIO) -> None:
        self.runner = runner
        self.alerts = alerts
        self.out = out
        self.tty = out.isatty()
        self.t0 = time.monotonic()
        self._shown_alerts = 0
        self._height = 0

    def refresh(self, final: bool = False) -> dict[str, Any]:
        view = self.runner.view()
        elapsed = time.monotonic() - self.t0
        new = self.alerts[self._shown_alerts:]
        self._shown_alerts += len(new)
        lines = [f"alert: {a['kind']} {a['suite']}/{a['model']} {a['certificate']} "
                 f"({a['method']}) after {a['round']} labels" for a in new]
        if self.tty:
            if self._height:
                self.out.write(f"\x1b[{self._height}F\x1b[J")
            table = [f"{view['counters']['events_in']} events, {elapsed:.0f}s", *render_table(view)]
            self.out.write("\n".join([*lines, *table]) + "\n")
            self._height = len(table)
        else:
            for line in lines:
                self.out.write(line + "\n")
            if not final:
                self.out.write(one_line(view, elapsed) + "\n")
        self.out.flush()
        return view


class Ticker:
    """Progress on stderr while a long replay or run goes on.

    On a terminal the line is redrawn once per second; otherwise (a log file, a pipe,
    ``kubectl logs``) one plain line is printed every ``every`` seconds, so a long run is
    never silent.

    Examples
    --------
    >>> import io, types
    >>> runner = types.SimpleNamespace(engine=types.SimpleNamespace(events_in=7))
    >>> out = io.StringIO()
    >>> t = Ticker(runner, time.monotonic(), enabled=True, every=0.01, out=out)
    >>> time.sleep(0.1); t.stop()
    >>> out.getvalue().splitlines()[0].startswith("certmon: progress: 7 events")
    True
    """

    def __init__(self, runner: Runner, t0: float, enabled: bool, every: float = 10.0,
                 out: TextIO | None = None) -> None:
        self._done = threading.Event()
        self._runner = runner
        self._t0 = t0
        self._out = sys.stderr if out is None else out
        self._tty = self._out.isatty()
        self._every = 1.0 if self._tty else every
        self._thread: threading.Thread | None = None
        if enabled and self._every > 0:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        last = 0
        while not self._done.wait(self._every):
            n = self._runner.engine.events_in
            elapsed = time.monotonic() - self._t0
            if self._tty:
                print(f"\r{n} events, {elapsed:.0f}s", end="", file=self._out)
            else:
                rate = (n - last) / self._every
                print(f"certmon: progress: {n} events, {elapsed:.0f}s, {rate:.0f} events/s",
                      file=self._out, flush=True)
            last = n

    def stop(self) -> None:
        """Stop printing (ends the progress line on a terminal)."""
        self._done.set()
        if self._thread is not None:
            self._thread.join()
            if self._tty:
                print(file=self._out)
