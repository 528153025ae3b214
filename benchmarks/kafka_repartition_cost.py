"""Cost of the repartition path (``[kafka] repartition``, the default) against the direct path.

One ``certmon run`` instance (a subprocess, the harness configuration: fetch process,
checkpoints on the Kafka topic, alerts / requests / dead letters to Kafka) reads a topic
that already holds every record, keyed by suite (kafka-python's partitioner, so the direct
path fences nothing). Timed from the process start until the checkpoints cover every record
(the harness's ``wait_caught_up``: with repartition, the stage has forwarded the whole input
in transactions and the engines' checkpoints reach the last committed record of every
repartition partition). The two paths alternate ``--repeat`` times on fresh topics; the
table gives each run and the medians. Process start and the group join are in both times.

The broker is ``KAFKA_BOOTSTRAP_SERVERS`` or a real Apache Kafka started from the cached jars.

Usage: python benchmarks/kafka_repartition_cost.py [--units 8000] [--partitions 6] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: tests.*
from tests.kafka.kafka_harness import KafkaSetup, make_events
from tests.support.kafka_broker import KafkaBroker, fetch_kafka


def one_run(bootstrap: str, tmp: Path, repartition: bool, units: int, partitions: int,
            seed: int) -> tuple[int, float, int]:  # fmt: skip
    """Records, seconds from process start to every record checkpointed, and how many
    times the consume loop failed and reconnected meanwhile (a stalled rebalance costs 20 s:
    such runs are shown but left out of the medians when others are clean)."""
    prefix = f"b{uuid.uuid4().hex[:8]}"
    work = tmp / prefix
    work.mkdir()
    setup = KafkaSetup(bootstrap, prefix, work, partitions=partitions, every=2000,
                       every_seconds=1.0, repartition=repartition)  # fmt: skip
    records = make_events(units, seed=seed)
    keyed: list[tuple[str | None, bytes]] = list(records)
    setup.produce(keyed)
    t0 = time.monotonic()
    proc = setup.start("c")
    try:
        setup.wait_caught_up(timeout=300, procs=[proc])
        took = time.monotonic() - t0
    finally:
        proc.terminate()
    return len(records), took, proc.count_in_log("kafka loop failed")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--units", type=int, default=8000, help="judge events (labels ~+30%%)")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="certmon-repartition-"))
    broker = None
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not bootstrap:
        broker = KafkaBroker(tmp / "broker", fetch_kafka(), heap="512m")
        broker.start()
        bootstrap = broker.bootstrap_servers
    rows: list[tuple[str, int, int, float]] = []
    stalled: set[tuple[str, int]] = set()
    try:
        for r in range(args.repeat):
            for rep in (False, True):
                n, took, fails = one_run(bootstrap, tmp, rep, args.units, args.partitions, r)
                path = "repartition" if rep else "direct"
                rows.append((path, r, n, took))
                if fails:
                    stalled.add((path, r))
                print(f"  run {r} {path:<12} {n} records in {took:.2f} s"
                      + (f" ({fails} loop failure(s): rebalance stall)" if fails else ""),
                      flush=True)
    finally:
        if broker is not None:
            broker.stop()
    print(f"\n{args.partitions} partitions, one instance, start -> all checkpointed")
    print(f"{'path':<12} {'records':>8} {'median s':>9} {'records/s':>10}  runs (s)")
    medians = {}
    for path in ("direct", "repartition"):
        mine = [row for row in rows if row[0] == path]
        clean = [row for row in mine if (row[0], row[1]) not in stalled]
        runs = ", ".join(f"{t:.2f}" + ("*" if (p, r) in stalled else "") for p, r, _, t in mine)
        mine = clean or mine
        med = statistics.median(t for *_, t in mine)
        rate = statistics.median(n / t for _, _, n, t in mine)
        medians[path] = med
        n = round(statistics.median(n for _, _, n, _ in mine))
        print(f"{path:<12} {n:>8} {med:>9.2f} {rate:>10.0f}  {runs}")
    if stalled:
        print("* a stalled rebalance (loop failed, rejoined): left out of the medians")
    print(f"repartition / direct time: {medians['repartition'] / medians['direct']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
