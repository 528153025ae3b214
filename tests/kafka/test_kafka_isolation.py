"""One input cannot stop an instance (issue 25, finding 3), against the broker.

- One partition's checkpoint that cannot be restored (a non-JSON record under the manifest
  header on the checkpoint topic; an unsigned document while ``CERTMON_CHECKPOINT_KEY`` is
  set) holds that partition only: one log line with the reason, the gauge
  ``certmon_kafka_partitions_held{partition}``, and the other partitions are processed.
  Before: the whole assignment failed and no partition was processed.
- SIGTERM to the whole process group (systemd's default, ``timeout``) ends with a final
  checkpoint and a full ``--state-out``. Before: the fetch child died first, the parent's
  loop failed on it, and ``--state-out`` was ``{"suites": {}}``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka import KafkaProducer

from consumers.kafka.checkpoints import HEADER, KafkaTopicStore
from consumers.kafka.state import partition_key
from monitor.checkpoint import encode_checkpoint
from monitor.engine import Engine
from tests.kafka.kafka_harness import (
    _CLI,
    REPO,
    KafkaSetup,
    comparable,
    make_events,
    replay_reference,
    sample,
    scrape,
)

pytestmark = pytest.mark.kafka


def test_an_unrestorable_checkpoint_holds_only_its_partition(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    setup = KafkaSetup(kafka_bootstrap, topic_prefix, tmp_path, partitions=3, every=100,
                       metrics=True)  # fmt: skip
    records = make_events(600, seed=7)
    setup.produce(records)
    end = setup.end_offsets()
    events = setup.events_topic
    # partition 1: a non-JSON record under the manifest header on the checkpoint topic
    store = KafkaTopicStore(setup.kafka)
    key1 = partition_key(events, 1)
    producer = KafkaProducer(bootstrap_servers=setup.bootstrap, acks="all")
    producer.send(setup.kafka.topics.checkpoints, key=key1.encode(), value=b"[" * 2000,
                  headers=[(HEADER, b"manifest")], partition=store._partition_for(key1))
    producer.flush()
    producer.close()
    # partition 2: an unsigned checkpoint, while the instance has a key
    store.save(partition_key(events, 2), encode_checkpoint(
        Engine(setup.config).snapshot(),
        {"kind": "kafka", "partition": 2, "offsets": {events: 0}}))
    store.close()

    c1 = setup.start("c1", env={"CERTMON_CHECKPOINT_KEY": "k" * 32})
    port = c1.metrics_port()
    c1.wait_log("partition held", timeout=60, count=2)
    deadline = time.monotonic() + 60
    text = scrape(port)[1]
    while (sample(text, "certmon_kafka_records_consumed_total", partition="0")
           < end[(events, 0)] and time.monotonic() < deadline):
        assert c1.alive(), c1.log_tail()
        time.sleep(0.3)
        text = scrape(port)[1]
    assert sample(text, "certmon_kafka_records_consumed_total", partition="0") == end[
        (events, 0)], c1.log_tail()
    for p in (1, 2):
        assert sample(text, "certmon_kafka_partitions_held", partition=str(p)) == 1.0, text
        assert sample(text, "certmon_kafka_records_consumed_total", partition=str(p)) == 0
    assert sample(text, "certmon_kafka_partitions_held", partition="0") == 0
    held = [json.loads(line) for line in c1.log_path.read_text().splitlines()
            if '"partition held' in line]
    reasons = {h["partition"]: h["reason"] for h in held}
    assert set(reasons) == {1, 2}, held
    assert "manifest record" in reasons[1] and "unreadable" in reasons[1], reasons
    assert "not authenticated" in reasons[2] or "unsigned" in reasons[2], reasons
    assert all("\n" not in r for r in reasons.values())
    assert c1.alive()
    assert c1.terminate() == 0


def test_sigterm_to_the_process_group_writes_the_final_checkpoint_and_state(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    # periodic checkpoints off: only the final one (on SIGTERM) covers the records
    setup = KafkaSetup(kafka_bootstrap, topic_prefix, tmp_path, partitions=2, every=100_000,
                       every_seconds=3600.0, metrics=True)  # fmt: skip
    records = make_events(800, seed=41)
    ref = replay_reference(setup, records)
    setup.produce(records)
    out = tmp_path / "STATE.json"
    log_path = tmp_path / "c.log"
    log = log_path.open("wb")
    proc = subprocess.Popen(  # its own process group, as under systemd or `timeout`
        [sys.executable, "-c", _CLI, "run", "--config", str(setup.config_path),
         "--state-out", str(out)], cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True)
    try:
        port = _metrics_port(proc, log_path)
        deadline = time.monotonic() + 90
        while (sample(scrape(port)[1], "certmon_kafka_records_consumed_total") < len(records)
               and time.monotonic() < deadline):
            assert proc.poll() is None, log_path.read_text()[-3000:]
            time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGTERM)  # the parent and its fetch child at once
        rc = proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    tail = log_path.read_text()[-3000:]
    assert rc == 0, tail
    state = json.loads(out.read_text())
    assert state.get("counters", {}).get("events_in") == len(records), tail
    assert comparable(state) == comparable(ref["state"])
    assert setup.checkpoint_offsets() == setup.end_offsets(), tail


def _metrics_port(proc: subprocess.Popen[bytes], log_path: Path) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in log_path.read_text().splitlines():
            if '"metrics served"' in line:
                return int(json.loads(line)["port"])
        assert proc.poll() is None, log_path.read_text()[-3000:]
        time.sleep(0.1)
    raise AssertionError("no metrics port")
