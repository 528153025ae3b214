"""certmon's Kafka consume-and-process throughput against a bare kafka-python consumer.

Same broker, same topic, same run:

- warm-up: one untimed bare read of the whole topic (the broker's JVM and page cache are
  cold right after producing: a first timed read would flatter certmon's ratio);
- baseline: a bare ``KafkaConsumer`` (manual assignment, from the beginning) reading every
  record of the topic, and the same plus ``json.loads`` of every value;
- engine only: one ``Engine`` per partition over the same values in memory (no Kafka);
- certmon: the real ``KafkaRunner`` (consumer group, range assignor, one engine per partition,
  alerts/requests produced to Kafka, checkpoints on the compacted Kafka topic, offsets
  committed after each durable checkpoint), timed from its first to its last record;
- baseline and certmon alternate ``--repeat`` times (a fresh consumer group and checkpoint
  topic per certmon run), certmon both with its default fetch process (records decoded in a
  child process, pipelined with processing) and with ``fetch_process = false`` (one
  process); the ratio is the median certmon rate over the median bare rate, next to every
  round's own ratios (the machine is shared: rates drift between runs);
- catch-up after a restart: the runner is stopped (final checkpoints), more events are
  produced, a new runner starts; wall time from start (restore + group join) until it has
  processed them all.

The broker is ``KAFKA_BOOTSTRAP_SERVERS`` or a real Apache Kafka started from the cached jars.

Usage: python benchmarks/kafka_throughput.py [--events 200000] [--partitions 3] [--suites 6]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from prometheus_client import CollectorRegistry

from consumers.kafka.source import KafkaRunner
from consumers.kafka.topics import ensure_topics
from monitor.config import parse_config
from monitor.engine import Engine
from monitor.metrics import OperationalMetrics
from monitor.simulate import SimModel, SimulationSpec, iter_jsonl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.support
from tests.support.kafka_broker import KAFKA_VERSION, KafkaBroker, fetch_kafka

ROOT = Path(__file__).resolve().parents[1]

CONFIG = (ROOT / "examples" / "minimal.toml").read_text() + """
[metrics]
enabled = false
[sinks]
alerts = "kafka"
requests = "kafka"
dead_letters = "kafka"
[source]
kind = "kafka"
[kafka]
bootstrap_servers = "{bs}"
group_id = "{p}-bench-{run}"
{every}
batch_size = 2000
poll_timeout_ms = 100
session_timeout_ms = 10000
heartbeat_interval_ms = 1000
events_partitions = {partitions}
fetch_process = {fetch}
[kafka.topics]
events = "{p}.eval-events.v1"
alerts = "{p}.alerts.v1"
requests = "{p}.requests.v1"
dead_letters = "{p}.dead-letters.v1"
checkpoints = "{p}.checkpoints-{run}.v1"
"""


def make_events(n_events: int, n_suites: int, seed: int) -> list[tuple[bytes, bytes]]:
    """``(suite key, JSON value)`` records: ``n_suites`` simulated suites, interleaved."""
    models = (SimModel("good", 0.04, 0.95), SimModel("bad", 0.2, 0.9),
              SimModel("borderline", 0.09, 0.8))  # fmt: skip
    per_suite = n_events // n_suites + 1
    streams = []
    for k in range(n_suites):
        spec = SimulationSpec(suite=f"suite-{k}", models=models, examples=per_suite // 3 + 10,
                              audit_rate=0.05, max_events=per_suite)  # fmt: skip
        key = f"suite-{k}".encode()
        streams.append([(key, line.rstrip(b"\n")) for line in
                        iter_jsonl(spec, np.random.default_rng(seed + k))])  # fmt: skip
    out = [rec for group in zip(*streams, strict=False) for rec in group]
    return out[:n_events]


def produce(bs: str, topic: str, records: list[tuple[bytes, bytes]]) -> float:
    producer = KafkaProducer(bootstrap_servers=bs, enable_idempotence=True, acks="all",
                             linger_ms=10, batch_size=256 * 1024)  # fmt: skip
    t0 = time.perf_counter()
    for key, value in records:
        producer.send(topic, key=key, value=value)
    producer.flush()
    dt = time.perf_counter() - t0
    producer.close()
    return dt


def bare_consume(bs: str, topic: str, partitions: int, n: int, decode: bool) -> float:
    c = KafkaConsumer(bootstrap_servers=bs, group_id=None, enable_auto_commit=False,
                      max_poll_records=2000)  # fmt: skip
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    got = 0
    t0 = time.perf_counter()
    while got < n:
        for recs in c.poll(timeout_ms=100).values():
            got += len(recs)
            if decode:
                for r in recs:
                    json.loads(r.value)
    dt = time.perf_counter() - t0
    c.close()
    return dt


def engine_only(config_text: str, records: list[tuple[bytes, bytes]], partitions: int) -> float:
    cfg = parse_config(config_text)
    by_part: dict[int, list[bytes]] = {}
    for i, (key, value) in enumerate(records):
        by_part.setdefault(hash(key) % partitions if key else i % partitions, []).append(value)
    t0 = time.perf_counter()
    for values in by_part.values():
        eng = Engine(cfg)
        for v in values:
            eng.process(v)
    return time.perf_counter() - t0


def load() -> str:
    """The 1-minute load average now (the machine is shared: read figures next to it)."""
    return f"load {os.getloadavg()[0]:.2f}/{os.cpu_count()} CPUs"


def consumed(registry: CollectorRegistry) -> float:
    total = 0.0
    for metric in registry.collect():
        if metric.name == "certmon_kafka_records_consumed":
            total += sum(s.value for s in metric.samples if s.name.endswith("_total"))
    return total


def run_certmon(config_text: str, target: int) -> tuple[float, float, float]:
    """Run a KafkaRunner until ``target`` records are processed.

    Returns (seconds from start to first record, seconds first->last record, records at first).
    """
    registry = CollectorRegistry()
    ops = OperationalMetrics(registry, version="bench")
    runner = KafkaRunner(parse_config(config_text), registry, ops=ops)
    stop = threading.Event()
    thread = threading.Thread(target=runner.run, args=(stop,), daemon=True)
    t_start = time.perf_counter()
    thread.start()
    t_first = None
    at_first = 0.0
    while True:
        got = consumed(registry)
        now = time.perf_counter()
        if t_first is None and got > 0:
            t_first, at_first = now, got
        if got >= target:
            break
        if now - t_start > 900:
            raise RuntimeError(f"only {got} of {target} records processed")
        time.sleep(0.05)  # a light observer: polling competes for the GIL
    t_end = time.perf_counter()
    stop.set()
    thread.join(120)
    n_ckpt = registry.get_sample_value("certmon_checkpoints_total") or 0.0
    t_ckpt = registry.get_sample_value("certmon_checkpoint_duration_seconds_sum") or 0.0
    print(f"  (runner: {n_ckpt:.0f} checkpoints written, {t_ckpt:.2f}s in total)")
    assert t_first is not None
    return t_first - t_start, t_end - t_first, at_first


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--suites", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=3, help="bare/certmon pairs (medians)")
    ap.add_argument("--checkpoint-every", type=int, default=None,
                    help="kafka.checkpoint_every_records (default: the config default)")
    args = ap.parse_args()

    broker = None
    bs = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not bs:
        t0 = time.perf_counter()
        workdir = tempfile.TemporaryDirectory(prefix="certmon-bench-")
        broker = KafkaBroker(Path(workdir.name), fetch_kafka())
        broker.start()
        bs = broker.bootstrap_servers
        print(f"broker: apache-kafka {KAFKA_VERSION} (jars) at {bs}, "
              f"fetch+start {time.perf_counter() - t0:.1f}s")  # fmt: skip
    else:
        print(f"broker: KAFKA_BOOTSTRAP_SERVERS={bs}")
    try:
        prefix = f"bench{uuid.uuid4().hex[:6]}"
        every = (f"checkpoint_every_records = {args.checkpoint_every}"
                 if args.checkpoint_every else "")  # fmt: skip
        def config_text(run: int, fetch: bool = True) -> str:
            return CONFIG.format(bs=bs, p=prefix, every=every, partitions=args.partitions,
                                 run=run, fetch=str(fetch).lower())

        text = config_text(0)
        cfg = parse_config(text)
        from consumers.kafka.source import kafka_config_of

        kcfg = kafka_config_of(cfg)
        ensure_topics(kcfg)
        topic = kcfg.topics.events
        n_main = args.events
        n_more = args.events // 4
        records = make_events(n_main + n_more, args.suites, seed=7)
        main_recs, more_recs = records[:n_main], records[n_main:]
        t_prod = produce(bs, topic, main_recs)
        print(f"produced {n_main:,} events ({args.suites} suites, {args.partitions} partitions) "
              f"at {n_main / t_prod:,.0f}/s")  # fmt: skip

        t_warm = bare_consume(bs, topic, args.partitions, n_main, False)
        print(f"warm-up bare read (untimed in the results): {n_main / t_warm:,.0f} records/s")
        bare_rates: list[float] = []
        certmon_rates: list[float] = []
        single_rates: list[float] = []
        t_join = 0.0
        for run in range(args.repeat):
            bare_rates.append(n_main / bare_consume(bs, topic, args.partitions, n_main, False))
            for fetch, rates in ((True, certmon_rates), (False, single_rates)):
                text_run = config_text(2 * run + (not fetch), fetch)
                ensure_topics(kafka_config_of(parse_config(text_run)))
                t_join_run, t_run, at_first = run_certmon(text_run, n_main)
                rates.append((n_main - at_first) / t_run)
                if fetch:
                    t_join, last = t_join_run, text_run
            print(f"  round {run + 1}: bare {bare_rates[-1]:,.0f}/s, certmon "
                  f"{certmon_rates[-1]:,.0f}/s (ratio {certmon_rates[-1] / bare_rates[-1]:.3f}), "
                  f"single process {single_rates[-1]:,.0f}/s "
                  f"(ratio {single_rates[-1] / bare_rates[-1]:.3f}; {load()})")  # fmt: skip
        t_bare_json = bare_consume(bs, topic, args.partitions, n_main, True)
        t_engine = engine_only(text, main_recs, args.partitions)

        produce(bs, topic, more_recs)
        t_join2, t_run2, _ = run_certmon(last, n_more)  # restart: restore + seek + catch up
        catch_up = t_join2 + t_run2

        rate_bare = statistics.median(bare_rates)
        rate_certmon = statistics.median(certmon_rates)
        rate_single = statistics.median(single_rates)
        rate_json = n_main / t_bare_json
        ratio = rate_certmon / rate_bare
        print(f"bare kafka-python consumer        : {rate_bare:12,.0f} records/s "
              f"(median of {args.repeat})")  # fmt: skip
        print(f"bare consumer + json.loads        : {rate_json:12,.0f} records/s")
        print(f"engine only (no Kafka, in memory) : {n_main / t_engine:12,.0f} events/s")
        print(f"certmon consume + process         : {rate_certmon:12,.0f} events/s "
              f"(median of {args.repeat}; group join {t_join:.1f}s)")  # fmt: skip
        pairs = ", ".join(f"{c / b:.3f}" for c, b in zip(certmon_rates, bare_rates, strict=True))
        print(f"  ratio certmon / bare consumer          : {ratio:.3f}  (target >= 0.7: "
              f"{'met' if ratio >= 0.7 else 'NOT met'}; rounds {pairs})")  # fmt: skip
        print(f"  ratio certmon / bare consumer + json   : {rate_certmon / rate_json:.3f}")
        print(f"  ratio certmon / engine only (overhead) : {rate_certmon * t_engine / n_main:.3f}")
        print(f"certmon, fetch_process = false    : {rate_single:12,.0f} events/s (median; "
              f"ratio {rate_single / rate_bare:.3f}: decoding and processing on one CPU)")
        print(f"catch-up after restart: {n_more:,} new events in {catch_up:.1f}s "
              f"(restore + group join {t_join2:.1f}s, processing {t_run2:.1f}s)")  # fmt: skip
    finally:
        if broker is not None:
            broker.stop()
            workdir.cleanup()


if __name__ == "__main__":
    main()
