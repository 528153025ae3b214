"""Developer commands for the test broker: ``start``, ``stop``, ``status``.

``scripts/kafka-broker.sh`` runs ``python -m tests.support.kafka_broker_cli``; the broker
itself is :class:`tests.support.kafka_broker.KafkaBroker`.

Examples
--------
>>> import contextlib, io
>>> with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.suppress(SystemExit):
...     main(["--help"])
>>> "start" in out.getvalue() and "status" in out.getvalue()
True
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

from tests.support.kafka_broker import (
    KAFKA_VERSION,
    KafkaBroker,
    KafkaBrokerError,
    default_cache_dir,
    fetch_kafka,
)
from tests.support.processes import tcp_open


def _state_file(state_dir: Path) -> Path:
    return state_dir / "state.json"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _cmd_start(args: argparse.Namespace) -> int:
    state_dir: Path = args.state_dir
    state_path = _state_file(state_dir)
    if state_path.exists():
        state = json.loads(state_path.read_text())
        if _pid_alive(int(state["pid"])):
            print(state["bootstrap_servers"])
            return 0
    t0 = time.monotonic()
    libs = fetch_kafka(args.version)
    t1 = time.monotonic()
    old = json.loads(state_path.read_text()) if state_path.exists() else {}
    broker = KafkaBroker(
        state_dir / "broker",
        libs,
        port=old.get("port"),
        controller_port=old.get("controller_port"),
        detach=True,
    )
    broker.start()
    state = {
        "pid": broker.pid,
        "port": broker.port,
        "controller_port": broker.controller_port,
        "bootstrap_servers": broker.bootstrap_servers,
        "version": args.version,
        "work_dir": str(broker.work_dir),
    }
    state_path.write_text(json.dumps(state, indent=2) + "\n")
    print(
        f"apache-kafka {args.version} (jars) pid {broker.pid}: fetch {t1 - t0:.1f}s, "
        f"start {time.monotonic() - t1:.1f}s",
        file=sys.stderr,
    )
    print(broker.bootstrap_servers)
    return 0


def _cmd_stop(args: argparse.Namespace) -> int:
    state_path = _state_file(args.state_dir)
    if not state_path.exists():
        print("not running", file=sys.stderr)
        return 0
    pid = int(json.loads(state_path.read_text())["pid"])
    if _pid_alive(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while _pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
    print(f"stopped pid {pid}", file=sys.stderr)
    if args.purge:
        shutil.rmtree(args.state_dir, ignore_errors=True)
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    state_path = _state_file(args.state_dir)
    if not state_path.exists():
        print("not running")
        return 1
    state = json.loads(state_path.read_text())
    alive = _pid_alive(int(state["pid"])) and tcp_open("127.0.0.1", int(state["port"]))
    print(
        f"{'running' if alive else 'not running'} {state['bootstrap_servers']} pid {state['pid']}"
    )
    return 0 if alive else 1


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``start`` / ``stop`` / ``status`` a detached developer broker."""
    parser = argparse.ArgumentParser(prog="kafka-broker", description=__doc__)
    parser.add_argument("command", choices=["start", "stop", "status"])
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=Path(os.environ.get("CERTMON_KAFKA_STATE", default_cache_dir() / "dev-broker")),
    )
    parser.add_argument("--version", default=KAFKA_VERSION)
    parser.add_argument("--purge", action="store_true", help="stop: also delete the data")
    args = parser.parse_args(argv)
    args.state_dir.mkdir(parents=True, exist_ok=True)
    try:
        handler = {"start": _cmd_start, "stop": _cmd_stop, "status": _cmd_status}[args.command]
        return handler(args)
    except KafkaBrokerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
