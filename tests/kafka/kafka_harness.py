"""Shared helpers for the Kafka integration tests (events, config, processes, reading topics)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from consumers.kafka.checkpoints import KafkaTopicStore
from consumers.kafka.source import kafka_config_of
from consumers.kafka.state import load_partition_states, partition_key
from consumers.kafka.topics import ensure_topics
from monitor.config import CertmonConfig, load_config
from monitor.incremental import load_checkpoint
from tests.support.processes import die_with_parent, kill9

REPO = Path(__file__).resolve().parents[2]

BASE_CONFIG = """
[[suites]]
name = "*"
models = ["*"]
audit_rate = 0.3

[[suites.certificates]]
name = "risk"
alpha = 0.25
delta = 0.05
methods = ["r_eval", "r_autoeval", "r_autoeval_plus"]
primary = "r_autoeval_plus"
betting = "wsr"
rhos = 5
cs_grid = 200

[events]
max_bytes = 4096
"""

# The Kafka-source sections of a certmon config (metrics, sinks, source, kafka), shared by
# every Kafka integration test.
KAFKA_SECTIONS = """
[metrics]
enabled = {metrics}
host = "127.0.0.1"
port = 0

[sinks]
alerts = "kafka"
requests = "kafka"
dead_letters = "kafka"

[source]
kind = "kafka"

[kafka]
bootstrap_servers = "{bs}"
group_id = "{prefix}-group"
checkpoint_store = "kafka"
checkpoint_every_records = {every}
checkpoint_every_seconds = {every_seconds}
batch_size = 500
poll_timeout_ms = {poll_ms}
fetch_process = {fetch}
session_timeout_ms = 6000
heartbeat_interval_ms = 500
events_partitions = {partitions}
retry_backoff_max_seconds = 2.0
bootstrap_timeout_ms = 3000
{repartition}
[kafka.topics]
events = "{prefix}.eval-events.v1"
alerts = "{prefix}.alerts.v1"
requests = "{prefix}.requests.v1"
dead_letters = "{prefix}.dead-letters.v1"
checkpoints = "{prefix}.checkpoints.v1"
repartition = "{prefix}.eval-events-by-suite.v1"
{extra_topics}
"""

CONFIG_TEMPLATE = BASE_CONFIG + KAFKA_SECTIONS


def make_events(n_units: int, n_suites: int = 6, seed: int = 0) -> list[tuple[str, bytes]]:
    """(key, value) records: judge events for ``n_units`` units, labels for audited ones.

    Labels arrive a few events after their judge event; each suite has two models with
    different risks so some certificates are reached (alerts) and some are not.
    """
    rng = np.random.default_rng(seed)
    out: list[tuple[str, bytes]] = []
    pending: list[tuple[int, dict[str, Any]]] = []
    for i in range(n_units):
        suite = f"suite-{i % n_suites}"
        model = f"m{(i // n_suites) % 2}"
        risk = 0.05 if model == "m0" else 0.45
        human = float(rng.random() < risk)
        judge = human if rng.random() < 0.8 else float(rng.random() < risk)
        audit = bool(rng.random() < 0.3)
        ts = 1_700_000_000 + i
        base = {"suite": suite, "model": model, "example_id": f"x{i}", "ts": ts}
        out.append(
            (suite, json.dumps({"type": "judge", "event_id": f"j{i}", **base, "loss": judge,
                                "audit": audit}).encode())
        )  # fmt: skip
        if audit:
            label = {"type": "label", "event_id": f"l{i}", **base, "loss": human}
            pending.append((i + int(rng.integers(1, 20)), label))
        due = [p for p in pending if p[0] <= i]
        pending = [p for p in pending if p[0] > i]
        out.extend((d["suite"], json.dumps(d).encode()) for _, d in due)
    out.extend((d["suite"], json.dumps(d).encode()) for _, d in pending)
    return out


@dataclass
class KafkaSetup:
    bootstrap: str
    prefix: str
    tmp: Path
    partitions: int = 3
    every: int = 400
    every_seconds: float = 0.5
    metrics: bool = False
    split: bool = False  # judge and label events on their own co-partitioned topics
    fetch_process: bool = True  # records decoded by a child process (the default)
    # [kafka] repartition: None leaves the default (on: input regrouped by suite through the
    # internal topic); False pins the direct path, for tests of per-input-partition behaviour
    repartition: bool | None = None
    config_path: Path = field(init=False)
    config: CertmonConfig = field(init=False)

    def __post_init__(self) -> None:
        self.config_path = self.tmp / "certmon.toml"
        self.config_path.write_text(
            CONFIG_TEMPLATE.format(
                bs=self.bootstrap, prefix=self.prefix, every=self.every,
                every_seconds=self.every_seconds, partitions=self.partitions, poll_ms=200,
                metrics="true" if self.metrics else "false",
                fetch="true" if self.fetch_process else "false",
                repartition="" if self.repartition is None
                else f"repartition = {str(self.repartition).lower()}",
                extra_topics=(
                    f'judge = "{self.prefix}.judge-scores.v1"\n'
                    f'labels = "{self.prefix}.human-labels.v1"'
                ) if self.split else "",
            )
        )  # fmt: skip
        self.config = load_config(self.config_path)
        self.kafka = kafka_config_of(self.config)
        ensure_topics(self.kafka)

    @property
    def events_topic(self) -> str:
        return self.kafka.topics.events

    def topic_for(self, value: bytes) -> str:
        """Events topic, or (``split``) the judge / labels topic by event type."""
        t = self.kafka.topics
        if self.split and t.judge and t.labels:
            if b'"type": "label"' in value:
                return t.labels
            if b'"type": "judge"' in value:
                return t.judge
        return t.events

    def _send_all(self, producer: KafkaProducer, records: list[tuple[str | None, bytes]]) -> None:
        for key, value in records:
            producer.send(self.topic_for(value), key=key.encode() if key else None, value=value)

    def produce(self, records: list[tuple[str | None, bytes]]) -> None:
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, enable_idempotence=True,
                                 acks="all", linger_ms=5)  # fmt: skip
        self._send_all(producer, records)
        producer.flush()
        producer.close()

    def trickle(
        self, records: list[tuple[str | None, bytes]], batch: int = 40, pause: float = 0.025
    ) -> threading.Thread:
        """Produce ``records`` in small batches from a background thread (a live stream)."""

        def run() -> None:
            producer = KafkaProducer(bootstrap_servers=self.bootstrap, enable_idempotence=True,
                                     acks="all", linger_ms=5)  # fmt: skip
            for i in range(0, len(records), batch):
                self._send_all(producer, records[i : i + batch])
                producer.flush()
                time.sleep(pause)
            producer.close()

        thread = threading.Thread(target=run, name="trickle", daemon=True)
        thread.start()
        return thread

    @property
    def engine_topic(self) -> str:
        """The topic the engines read, which names the checkpoint keys."""
        return self.kafka.engine_topics()[0]

    def end_offsets(self) -> dict[tuple[str, int], int]:
        """End offsets of the input topics (what producers wrote)."""
        c = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None)
        tps = [TopicPartition(t, p) for t in self.kafka.topics.input_topics()
               for p in range(self.partitions)]  # fmt: skip
        end = c.end_offsets(tps)
        c.close()
        return {(tp.topic, tp.partition): off for tp, off in end.items()}

    def forwarded_offsets(self) -> dict[tuple[str, int], int]:
        """The repartition stage's committed input offsets (what it wrote, transactionally)."""
        c = KafkaConsumer(bootstrap_servers=self.bootstrap,  # committed() only: never joins
                          group_id=f"{self.kafka.group_id}.repartition", enable_auto_commit=False)
        try:
            out = {}
            for t in self.kafka.topics.input_topics():
                for p in range(self.partitions):
                    off = c.committed(TopicPartition(t, p))
                    out[(t, p)] = int(off) if off is not None else 0
            return out
        finally:
            c.close()

    def engine_end_offsets(self) -> dict[tuple[str, int], int]:
        """Where the engines are caught up: the input's end offsets on the direct path; with
        repartition, one past the last committed record of each repartition partition (a
        transaction's commit marker also takes an offset, so the end offset is not it)."""
        if not self.kafka.repartition:
            return {tp: off for tp, off in self.end_offsets().items() if off > 0}
        topic = self.engine_topic
        c = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None,
                          isolation_level="read_committed")  # fmt: skip
        tps = [TopicPartition(topic, p) for p in range(self.partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)
        last: dict[tuple[str, int], int] = {}
        deadline = time.monotonic() + 60
        while any(c.position(tp) < end[tp] for tp in tps) and time.monotonic() < deadline:
            for tp, recs in c.poll(300).items():
                if recs:
                    last[(topic, tp.partition)] = recs[-1].offset + 1
        c.close()
        return last

    def checkpoint_offsets(self) -> dict[tuple[str, int], int]:
        store = KafkaTopicStore(self.kafka)
        try:
            out = {}
            for p in range(self.partitions):
                ckpt = load_checkpoint(store, partition_key(self.engine_topic, p))
                if ckpt is not None:
                    for topic, offset in ckpt.position["offsets"].items():
                        out[(topic, p)] = int(offset)
            return out
        finally:
            store.close()

    def wait_forwarded(self, deadline: float, procs: list[Consumer]) -> None:
        """With repartition: wait until the stage has forwarded every input record."""
        end = {tp: off for tp, off in self.end_offsets().items() if off > 0}
        got: dict[tuple[str, int], int] = {}
        while time.monotonic() < deadline:
            got = self.forwarded_offsets()
            if all(got.get(tp, 0) >= off for tp, off in end.items()):
                return
            for proc in procs:
                assert proc.alive(), f"consumer died:\n{proc.log_tail()}"
            time.sleep(0.3)
        logs = "\n".join(p.log_tail() for p in procs)
        raise AssertionError(f"not forwarded: stage offsets {got} vs end {end}\n{logs}")

    def wait_caught_up(self, timeout: float = 90.0, procs: list[Consumer] | None = None) -> None:
        deadline = time.monotonic() + timeout
        if self.kafka.repartition:
            self.wait_forwarded(deadline, procs or [])
        end = self.engine_end_offsets()
        got: dict[tuple[str, int], int] = {}
        while time.monotonic() < deadline:
            got = self.checkpoint_offsets()
            if all(got.get(tp, 0) >= off for tp, off in end.items()):
                return
            for proc in procs or []:
                assert proc.alive(), f"consumer died:\n{proc.log_tail()}"
            time.sleep(0.3)
        logs = "\n".join(p.log_tail() for p in procs or [])
        raise AssertionError(f"not caught up: checkpoints {got} vs end {end}\n{logs}")

    def final_state(self) -> dict[str, Any]:
        store = KafkaTopicStore(self.kafka)
        try:
            state, _ = load_partition_states(self.config, store, self.engine_topic,
                                             range(self.partitions))  # fmt: skip
        except Exception:
            for p in range(self.partitions):  # keep the evidence for the failure report
                data = store.load(partition_key(self.engine_topic, p))
                if data is not None:
                    (self.tmp / f"checkpoint-{p}.json").write_bytes(data)
            raise
        finally:
            store.close()
        return state

    def read_topic(self, topic: str) -> list[dict[str, Any]]:
        c = KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None)
        parts = sorted(c.partitions_for_topic(topic) or [])
        tps = [TopicPartition(topic, p) for p in parts]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)
        out: list[dict[str, Any]] = []
        deadline = time.monotonic() + 60
        while any(c.position(tp) < end[tp] for tp in tps) and time.monotonic() < deadline:
            for recs in c.poll(300).values():
                out.extend(json.loads(r.value) for r in recs if r.value is not None)
        c.close()
        return out

    def start(self, name: str, cli: str | None = None,
              env: dict[str, str] | None = None) -> Consumer:  # fmt: skip
        return Consumer(self.config_path, self.tmp / f"{name}.log", cli=cli, env=env)


_CLI = "import sys; from consumers.cli import main; sys.exit(main(sys.argv[1:]))"


_LIVE: set[Consumer] = set()  # processes still running; reaped after each test


def reap_consumers() -> int:
    """Kill (SIGKILL) every consumer a test left running; return how many."""
    live = [c for c in _LIVE if c.alive()]
    for c in live:
        c.kill9()
    _LIVE.clear()
    return len(live)


class Consumer:
    """One ``certmon run --config C`` process with ``[source] kind = "kafka"``."""

    def __init__(self, config_path: Path, log_path: Path, cli: str | None = None,
                 env: dict[str, str] | None = None) -> None:  # fmt: skip
        self.log_path = log_path
        self._log = log_path.open("ab")
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", cli or _CLI, "run", "--config", str(config_path)],
            cwd=REPO, stdout=self._log, stderr=subprocess.STDOUT, env=full_env,
            preexec_fn=die_with_parent,
        )  # fmt: skip
        _LIVE.add(self)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, n: int = 30) -> str:
        lines = self.log_path.read_text(errors="replace").splitlines()
        return f"--- {self.log_path.name} (rc={self.proc.poll()})\n" + "\n".join(lines[-n:])

    def count_in_log(self, text: str) -> int:
        return self.log_path.read_text(errors="replace").count(text)

    def wait_log(self, text: str, timeout: float = 30.0, count: int = 1) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.count_in_log(text) >= count:
                return
            assert self.alive(), self.log_tail()
            time.sleep(0.05)
        raise AssertionError(f"{text!r} not seen in time\n{self.log_tail()}")

    def metrics_port(self) -> int:
        """The port of ``/metrics`` (from the "metrics served" log line)."""
        self.wait_log("metrics served", timeout=60)
        for line in self.log_path.read_text().splitlines():
            if '"metrics served"' in line:
                return int(json.loads(line)["port"])
        raise AssertionError("no metrics port")

    def kill9(self) -> None:
        _LIVE.discard(self)
        kill9(self.proc)
        self._log.close()

    def terminate(self, timeout: float = 30.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise
        _LIVE.discard(self)
        self._log.close()
        return rc


def scrape(port: int, path: str = "/metrics") -> tuple[int, str]:
    """HTTP status and body of ``path`` on the metrics server."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""


def sample(text: str, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` in a scrape whose labels include ``labels``."""
    want = [f'{k}="{v}"' for k, v in labels.items()]
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if (line.startswith(name + "{") or line.startswith(name + " "))
               and all(w in line for w in want))  # fmt: skip


def scrape_until(port: int, name: str, value: float, timeout: float = 30.0,
                 **labels: str) -> str:
    """Scrape until ``sample(name, **labels) == value`` (``/metrics`` is cached up to
    ``[metrics] min_scrape_interval``); return the last body, whatever it holds."""
    deadline = time.monotonic() + timeout
    text = scrape(port)[1]
    while sample(text, name, **labels) != value and time.monotonic() < deadline:
        time.sleep(0.2)
        text = scrape(port)[1]
    return text


def replay_reference(setup: KafkaSetup, records: list[tuple[str | None, bytes]]) -> dict[str, Any]:
    """STATE.json, alerts and requests of ``certmon replay`` on the same events (file order)."""
    events = setup.tmp / "events.jsonl"
    events.write_bytes(b"".join(v + b"\n" for _, v in records))
    cli = REPO / "consumers" / "cli.py"
    if cli.exists():
        state_out, alerts_out, req_out = (
            setup.tmp / n for n in ("STATE.json", "alerts.jsonl", "requests.jsonl")
        )
        ref_cfg = setup.tmp / "replay.toml"
        ref_cfg.write_text(BASE_CONFIG + "\n[metrics]\nenabled = false\n")
        proc = subprocess.run(
            [sys.executable, "-c", _CLI, "replay", "--config", str(ref_cfg), "--input",
             str(events), "--state-out", str(state_out), "--alerts-out", str(alerts_out),
             "--requests-out", str(req_out), "--quiet"],
            capture_output=True, text=True, cwd=REPO, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return {
            "state": json.loads(state_out.read_text()),
            "alerts": [json.loads(line) for line in alerts_out.read_text().splitlines()],
            "requests": [json.loads(line) for line in req_out.read_text().splitlines()],
            "via": "certmon replay",
        }
    from monitor.engine import Engine

    engine = Engine(setup.config)
    alerts: list[dict[str, Any]] = []
    requests: list[dict[str, Any]] = []
    for _, value in records:
        result = engine.process(value)
        alerts.extend(result.alerts)
        requests.extend(result.requests)
    return {"state": engine.state_view(), "alerts": alerts, "requests": requests, "via": "engine"}


def comparable(state: dict[str, Any]) -> dict[str, Any]:
    """The state through a JSON round trip (as STATE.json is read back)."""
    return json.loads(json.dumps(state, sort_keys=True))
