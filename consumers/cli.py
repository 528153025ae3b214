"""The ``certmon`` command: replay, run, simulate, demo, inspect, config.

Errors print one line (``certmon: error: ...``) and exit with status 2 (1 for an internal
error, 130 when interrupted); ``--debug`` shows the traceback instead.

Examples
--------
>>> main(["inspect", "/nonexistent/STATE.json"])
2
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time
import traceback
from typing import Any

from consumers.accounting import replay_summary
from consumers.alertmanager.wiring import open_alert_sink, take_over
from consumers.cli_argparse import HelpFormatter, OneLineErrorParser, VersionAction
from consumers.config_cli import register as register_config
from consumers.evaluation_worker.cli import register as register_selection
from consumers.files import FileSource
from consumers.gc_policy import paused
from consumers.progress import Ticker, run_demo
from consumers.runner import (
    Outputs,
    Runner,
    install_signal_handlers,
    write_engine_state,
    write_state,
)
from consumers.simulate_cli import cmd_simulate
from monitor.checkpoint import LocalDirectoryStore, checkpoint_key, secured_store
from monitor.config import CertmonConfig, load_config, parse_config
from monitor.errors import CertmonError, CheckpointError
from monitor.sinks import open_sink, resolve_requests_spec, warn_if_discarded

__all__ = ["DEMO_TOML", "build_parser", "console_main", "main", "replay_summary"]

DEMO_TOML = """\
# certmon demo: three simulated models in one suite, one certificate "risk <= 10%".
[[suites]]
name = "demo"
models = ["good", "bad", "borderline"]
audit_rate = 0.1

[[suites.certificates]]
name = "risk"
alpha = 0.1
delta = 0.05
methods = ["r_eval", "r_autoeval", "r_autoeval_plus"]
primary = "r_autoeval_plus"
betting = "plugin_up"
rhos = 10

[metrics]
host = "127.0.0.1"
port = 9108

[sinks]
alerts = "none"
"""


# ---------------------------------------------------------------------- helpers
def _sink_spec(flag: str | None, configured: str) -> str:
    if flag is None:
        return configured
    return "stdout" if flag == "-" else f"file:{flag}"


def _where(spec: str) -> str | None:
    """Where a sink's records go, for a summary line (None when they are discarded)."""
    return None if spec == "none" else spec.removeprefix("file:")


def _load(args: argparse.Namespace) -> CertmonConfig:
    return load_config(args.config, args.overrides)


# ---------------------------------------------------------------------- replay
def cmd_replay(args: argparse.Namespace) -> int:
    """Offline, deterministic replay of a JSONL file into STATE.json."""
    config = _load(args)
    store = (secured_store(LocalDirectoryStore(args.checkpoint_dir), os.environ)
             if args.checkpoint_dir else None)
    input_id = "-" if args.input == "-" else os.path.abspath(args.input)
    probe = Runner(config, Outputs(*(open_sink("none") for _ in range(3))), store=store)
    start = probe.restore()
    if start is not None and start.get("path") != input_id:
        raise CheckpointError(
            f"the checkpoint in {args.checkpoint_dir} is for input {start.get('path')}, not "
            f"{input_id}: use another --checkpoint-dir"
        )
    resume = start is not None
    alerts_flag = None if args.alerts_out is None else _sink_spec(args.alerts_out, "")
    # --requests-out auto: requests.jsonl next to --state-out (as its help says), not ./auto
    requests_spec = resolve_requests_spec("auto" if args.requests_out == "auto" else
                                          _sink_spec(args.requests_out, config.sinks.requests),
                                          beside=args.state_out)
    warn_if_discarded(requests_spec)
    outputs = Outputs(
        open_alert_sink(config.sinks, append=resume, override=alerts_flag),
        open_sink(requests_spec, append=resume),
        open_sink(_sink_spec(args.dead_letters_out, config.sinks.dead_letters), append=resume),
    )
    runner = Runner(config, outputs, store=store)
    runner.adopt(probe.engine, start, probe.checkpointer)
    take_over(outputs.alerts, runner.view())
    restore_signals = install_signal_handlers(runner.stop)
    source = FileSource(input_id, start=start, should_stop=lambda: runner.stopping)
    if resume and not args.quiet:
        print(f"certmon: resuming from checkpoint at line {start.get('line') if start else 0}",
              file=sys.stderr)
    t0 = time.monotonic()
    ticker = Ticker(runner, t0, enabled=not args.quiet, every=args.progress_every)
    try:
        runner.run(source)
    finally:
        source.close()
        restore_signals()
        ticker.stop()
        outputs.close()
    if runner.stopping:
        hint = "rerun the same command to resume" if store else "STATE.json not written"
        print(f"certmon: interrupted; {hint}", file=sys.stderr)
        return 130
    with paused():  # acyclic, freed by reference counting (consumers.gc_policy.paused)
        write_engine_state(args.state_out, runner.engine)
    if not args.quiet:
        where = _where(_sink_spec(args.dead_letters_out, config.sinks.dead_letters))
        for line in replay_summary(runner.engine.counters, time.monotonic() - t0,
                                   args.state_out, where, _where(requests_spec)):
            print(line, file=sys.stderr)
    return 0


# ---------------------------------------------------------------------- run
def cmd_run(args: argparse.Namespace) -> int:
    """Long-running service: source -> engine -> sinks, metrics, checkpoints."""
    from prometheus_client import CollectorRegistry

    config = _load(args)
    if config.source.kind == "kafka":
        from consumers.kafka.source import KafkaRunner, StopRequested, run_kafka

        stop_event = threading.Event()
        runners: list[KafkaRunner] = []

        def stop() -> None:
            stop_event.set()
            if runners:  # the shutdown budget counts from the signal, not the loop's end
                runners[0].begin_shutdown()
            if runners and runners[0].connecting:  # blocked in a bootstrap: leave it now
                raise StopRequested

        restore_signals = install_signal_handlers(stop)
        try:
            view = run_kafka(config, CollectorRegistry(), stop_event, started=runners.append)
        finally:
            restore_signals()
        if args.state_out:
            write_state(args.state_out, view if view is not None else {"suites": {}})
        return 0
    from monitor.metrics import (
        OperationalMetrics,
        StateCollector,
        limits_from_config,
        serve_metrics,
        stop_metrics,
    )

    store = (secured_store(LocalDirectoryStore(config.checkpoint.dir), os.environ)
             if config.checkpoint.dir else None)
    registry = CollectorRegistry()
    ops = OperationalMetrics(registry)
    probe = Runner(config, Outputs(*(open_sink("none") for _ in range(3))), store=store)
    start = probe.restore()
    resume = start is not None
    requests_spec = resolve_requests_spec(config.sinks.requests)
    warn_if_discarded(requests_spec)
    outputs = Outputs(
        open_alert_sink(config.sinks, append=True),
        open_sink(requests_spec, append=True),
        open_sink(config.sinks.dead_letters, append=True),
    )
    runner = Runner(config, outputs, store=store, metrics=ops)
    runner.adopt(probe.engine, start, probe.checkpointer)
    take_over(outputs.alerts, runner.view())
    shown = config.metrics.detail == "shown"
    registry.register(StateCollector(lambda: runner.view(shown), config.metrics.detail,
                                     version_fn=runner.state_version))
    server = None
    if config.metrics.enabled:
        try:
            server = serve_metrics(
                registry, config.metrics.host, config.metrics.port, lambda: runner.ready,
                limits_from_config(config.metrics, dict(os.environ)),
            )
        except CertmonError:  # one line naming host and port, the same for every source
            outputs.close()
            raise
        print(f"certmon: metrics on http://{config.metrics.host}:{server[0].server_port}/metrics",
              file=sys.stderr)
    path = "-" if config.source.kind == "stdin" else os.path.abspath(str(config.source.path))
    if start is not None and start.get("path") != path:
        outputs.close()
        if server is not None:
            stop_metrics(*server)
        raise CheckpointError(
            f"the checkpoint in {config.checkpoint.dir} is for input {start.get('path')}, not "
            f"{path}: use another checkpoint.dir"
        )
    restore_signals = install_signal_handlers(runner.stop)
    if resume:
        print(f"certmon: resumed from checkpoint at line {start.get('line') if start else 0}",
              file=sys.stderr)
    source = FileSource(path, start=start, follow=config.source.follow,
                        poll_seconds=config.source.poll_seconds,
                        should_stop=lambda: runner.stopping, on_idle=runner.idle)
    ticker = Ticker(runner, time.monotonic(), enabled=not args.quiet, every=args.progress_every)
    try:
        runner.run(source)
    finally:
        ticker.stop()
        source.close()
        restore_signals()
        outputs.close()
        if server is not None:
            stop_metrics(*server)
    if args.state_out:
        write_state(args.state_out, runner.engine.state_view())
    print(f"certmon: stopped after {runner.engine.events_in} events", file=sys.stderr)
    spec = config.sinks.dead_letters
    for line in replay_summary(runner.engine.counters, 0.0, "", _where(spec),
                               _where(requests_spec))[1:]:  # rejected, unrouted, requests
        print(line, file=sys.stderr)
    return 0


# ---------------------------------------------------------------------- demo
def cmd_demo(args: argparse.Namespace) -> int:
    """Simulate, monitor, serve metrics and show live progress until certificates settle."""
    if args.config:
        config = _load(args)
    else:
        config = parse_config(DEMO_TOML, args.overrides, source="<built-in demo config>")
    return run_demo(config, args)


# ---------------------------------------------------------------------- inspect
def cmd_inspect(args: argparse.Namespace) -> int:
    """Print a readable summary of a checkpoint or a STATE.json file (HMAC-verified with a key).

    With ``--kafka``: every partition's latest checkpoint on the Kafka checkpoint topic of
    ``--config``, combined (the whole consumer group's state).
    """
    if args.kafka:
        if args.path is not None or not args.config:
            raise CertmonError("inspect --kafka reads the checkpoint topic of --config FILE; "
                               "give --config and no path")
        from consumers.inspection import kafka_lines

        lines = kafka_lines(_load(args))
    elif args.path is None:
        raise CertmonError("inspect needs a PATH (or --kafka --config FILE)")
    else:
        from consumers.inspection import inspect_lines

        lines = inspect_lines(args.path, checkpoint_key(os.environ))
    for line in lines:
        print(line)
    return 0


# ---------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser of ``certmon``."""
    p = OneLineErrorParser(
        prog="certmon",
        description="Anytime-valid risk certificates for models in production.",
        formatter_class=HelpFormatter,
    )
    p.add_argument("--debug", action="store_true", default=False,
                   help="show tracebacks on errors")
    p.add_argument("--version", action=VersionAction,
                   help="print the certmon version and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND",
                           parser_class=OneLineErrorParser)
    add_parser = sub.add_parser

    def described(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        """Every subcommand: its one-line help as description, help with defaults."""
        kwargs.setdefault("description", kwargs.get("help"))
        kwargs.setdefault("formatter_class", HelpFormatter)
        return add_parser(name, **kwargs)

    setattr(sub, "add_parser", described)  # noqa: B010 (also for the registered commands)

    def common(sp: argparse.ArgumentParser, config_required: bool = True) -> None:
        sp.add_argument("--config", required=config_required, help="TOML configuration file")
        sp.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a config key (dotted path; TOML value)")
        sp.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                    help="show tracebacks on errors")

    def progress(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--progress-every", type=float, default=10.0, metavar="SECONDS",
                        help="when stderr is not a terminal, one progress line every SECONDS "
                             "(0: none); on a terminal the line is redrawn every second")

    r = sub.add_parser("replay", help="offline deterministic replay of a JSONL file")
    common(r)
    r.add_argument("--input", required=True, help="events JSONL file, or - for stdin")
    r.add_argument("--state-out", required=True, help="where to write STATE.json")
    r.add_argument("--alerts-out", help="alerts JSONL file (- for stdout)")
    r.add_argument("--requests-out",
                   help="label requests JSONL file (- for stdout; default: sinks.requests, "
                        "\"auto\": requests.jsonl next to --state-out)")
    r.add_argument("--dead-letters-out",
                   help="dead letters JSONL file (- for stdout): rejected lines, with reason and "
                        "raw bytes (default: sinks.dead_letters, stderr unless configured)")
    r.add_argument("--checkpoint-dir", help="checkpoint as it goes; a rerun resumes from it")
    r.add_argument("--quiet", action="store_true", help="no progress or summary on stderr")
    progress(r)
    r.set_defaults(func=cmd_replay)

    run = sub.add_parser("run", help="long-running service (file/stdin/Kafka source)")
    common(run)
    run.add_argument("--state-out", help="also write STATE.json when stopping")
    run.add_argument("--quiet", action="store_true",
                     help="no progress lines on stderr (file and stdin sources)")
    progress(run)
    run.set_defaults(func=cmd_run)

    s = sub.add_parser("simulate", help="write a synthetic event stream as JSONL")
    s.add_argument("--out", default="-", help="output file (default: stdout)")
    s.add_argument("--examples", type=int, help="examples (each answered by every model)")
    s.add_argument("--events", type=int, help="stop after this many events")
    s.add_argument("--seed", type=int, default=0, help="random seed (same seed, same stream)")
    s.add_argument("--suite", default="demo", help="suite name of the events")
    s.add_argument("--model", action="append", metavar="NAME:RISK[:GAMMA[:DRIFT_RISK]]",
                   help="a model with its true risk, judge accuracy and risk after drift "
                        "(repeatable; default: good, bad, borderline)")
    s.add_argument("--audit-rate", type=float, default=0.1,
                   help="fraction of units audited (sent for a human label)")
    s.add_argument("--audit-mode", choices=["flag", "hash"], default="flag",
                   help="flag: judge events carry audit true/false; hash: certmon decides")
    s.add_argument("--audit-salt", default="", help="salt of the hash audit mode")
    s.add_argument("--label-delay", type=float, default=30.0, help="mean label delay (events)")
    s.add_argument("--label-first", type=float, default=0.05,
                   help="fraction of labels arriving before their judge event")
    s.add_argument("--unsolicited", type=float, default=0.001,
                   help="rate of unsolicited labels on unaudited units")
    s.add_argument("--drift-at", type=int, help="example index where models switch to DRIFT_RISK")
    s.add_argument("--ts-format", choices=["epoch", "rfc3339"], default="epoch",
                   help="format of the events' ts field")
    s.add_argument("--strata", action="append", metavar="NAME:SHARE:RISK[:JUDGE_NOISE]",
                   help="heterogeneous strata (repeatable): judge events carry 'stratum'; the "
                        "stratum's risk and judge noise replace the models' (see [suites.strata])")
    s.add_argument("--label-all", action="store_true",
                   help="emit a label for every unit (certmon uses those it audits); use with "
                        "--audit-mode hash and steered per-stratum auditing")
    s.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                    help="show tracebacks on errors")
    s.set_defaults(func=cmd_simulate)

    d = sub.add_parser("demo", help="simulate + monitor + metrics + live table (start here)")
    common(d, config_required=False)
    d.add_argument("--port", type=int,
                   help="metrics port; fails if busy (default: 9108, or a free one if busy)")
    d.add_argument("--no-metrics", action="store_true", help="do not serve metrics")
    d.add_argument("--seed", type=int, default=0, help="random seed of the simulation")
    d.add_argument("--max-events", type=int, default=150_000, help="stop after this many events")
    d.add_argument("--max-seconds", type=float, default=50.0, help="stop after this long")
    d.add_argument("--rate", type=float, default=3000.0, help="events per second (0: no limit)")
    d.add_argument("--state-out", help="write STATE.json at the end")
    d.add_argument("--alerts-out", help="alerts JSONL file")
    d.set_defaults(func=cmd_demo)

    i = sub.add_parser("inspect", help="summarize a checkpoint or STATE.json")
    i.add_argument("path", nargs="?",
                   help="a checkpoint file, a checkpoint directory or a STATE.json "
                        "(not with --kafka)")
    i.add_argument("--kafka", action="store_true",
                   help="read the latest checkpoint of every partition from the Kafka "
                        "checkpoint topic of --config (the whole consumer group's state)")
    i.add_argument("--config", help="TOML configuration file (with --kafka: brokers, topics)")
    i.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="KEY=VALUE", help="override a config key (dotted path; TOML value)")
    i.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                    help="show tracebacks on errors")
    i.set_defaults(func=cmd_inspect)
    register_selection(sub)  # select-demo, evaluate-worker, selection-benchmark
    register_config(sub, DEMO_TOML)  # config: the effective configuration
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``certmon`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc: int = args.func(args)
        return rc
    except CertmonError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"certmon: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("certmon: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _broken_pipe(args.command)
    except Exception as exc:
        if args.debug:
            traceback.print_exc()
        print(f"certmon: internal error: {type(exc).__name__}: {exc} (rerun with --debug)",
              file=sys.stderr)
        return 1


# Commands whose only output is the stream the reader closed (``certmon simulate | head``):
# stopping quietly is what the reader asked for.
_GENERATORS = frozenset({"simulate"})


def _broken_pipe(command: str) -> int:
    """Exit status (and one stderr line) after an output pipe was closed by its reader.

    ``simulate`` stops quietly with 0. Any other command stops with 141 (128 + SIGPIPE, as a
    shell reports a process killed by a closed pipe) and says what was not written: a replay
    piped into ``head`` must not exit 0 without its STATE.json.
    """
    try:  # nothing more may reach the closed stdout, not even Python's flush at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    if command in _GENERATORS:
        return 0
    with contextlib.suppress(OSError):
        print(f"certmon: error: an output pipe was closed by its reader; {command} stopped "
              "there (later outputs and STATE.json were not written)", file=sys.stderr)
    return 141


def console_main() -> int:
    """Entry point of the ``certmon`` console script: :func:`main` in a fresh process.

    Turns off prometheus_client's ``*_created`` series process-wide first, and sets the
    garbage-collector policy (:func:`consumers.gc_policy.tune_gc`). certmon's own
    operational metrics already drop them per registry; this global switch (the library has
    no per-registry one) also covers counters defined by the Kafka modules. It is called here,
    once per process, and never by library code, so importing certmon changes nothing.
    """
    from consumers.gc_policy import freeze_for_exit, tune_gc

    if "prometheus_client" in sys.modules:
        from prometheus_client import disable_created_metrics

        disable_created_metrics()  # type: ignore[no-untyped-call]
    else:  # read by prometheus_client when (and if) a command imports it: a replay does not
        os.environ["PROMETHEUS_DISABLE_CREATED_SERIES"] = "true"
    tune_gc()  # a process-wide collector policy, set here once (see consumers.gc_policy)
    rc = main()
    freeze_for_exit()  # no last full collection at exit (see consumers.gc_policy)
    return rc


if __name__ == "__main__":
    raise SystemExit(console_main())
