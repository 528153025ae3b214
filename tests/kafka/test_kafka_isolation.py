"""One input cannot stop an instance, against the broker.

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
    # the direct path: records per engine partition are the input's (counted below)
    setup = KafkaSetup(kafka_bootstrap, topic_prefix, tmp_path, partitions=3, every=100,
                       metrics=True, repartition=False)  # fmt: skip
    records = make_events(600, seed=7)
    setup.produce(records)
    end = setup.end_offsets()
    events = setup.engine_topic  # names the checkpoint keys (the repartition topic)
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
    assert setup.checkpoint_offsets() == setup.engine_end_offsets(), tail


def _metrics_port(proc: subprocess.Popen[bytes], log_path: Path) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in log_path.read_text().splitlines():
            if '"metrics served"' in line:
                return int(json.loads(line)["port"])
        assert proc.poll() is None, log_path.read_text()[-3000:]
        time.sleep(0.1)
    raise AssertionError("no metrics port")


def test_an_evicted_member_does_not_overwrite_the_new_owners_checkpoints(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    """A member stopped longer than its session timeout (a GC pause, a stopped container) is
    evicted and its partitions go to another member; when it runs again, the records its
    fetch child buffered meanwhile are processed, but it must not write a checkpoint (before:
    it did, and the new owner's next write found "overwritten by another writer")."""
    setup = KafkaSetup(kafka_bootstrap, topic_prefix, tmp_path, partitions=2, every=50,
                       every_seconds=0.3)  # fmt: skip
    records = make_events(1200, n_suites=4, seed=43)
    ref = replay_reference(setup, records)
    q = len(records) // 4
    setup.produce(records[:q])
    a = setup.start("a")
    setup.wait_caught_up(timeout=60, procs=[a])
    os.kill(a.proc.pid, signal.SIGSTOP)  # the group member only: its fetch child runs on
    try:
        setup.produce(records[q:2 * q])  # buffered by a's fetch child
        b = setup.start("b")
        b.wait_log("partitions assigned", timeout=60)  # after a's session (6 s) expired
        setup.wait_caught_up(timeout=90, procs=[b])
    finally:
        os.kill(a.proc.pid, signal.SIGCONT)
    setup.produce(records[2 * q:3 * q])
    time.sleep(3.0)  # a runs again: processes what it buffered, learns it was evicted
    setup.produce(records[3 * q:])
    setup.wait_caught_up(timeout=90, procs=[a, b])
    assert a.terminate() == 0 and b.terminate() == 0
    for proc in (a, b):
        assert proc.count_in_log("overwritten by another writer") == 0, proc.log_tail()
    # a commit is tried only after a durable checkpoint: an evicted member tried none
    assert a.count_in_log("UnknownMemberId") == 0, a.log_tail()
    assert a.count_in_log("no longer a member") >= 1, a.log_tail()
    state = setup.final_state()
    assert state["counters"]["events_in"] == len(records)
    assert comparable(state) == comparable(ref["state"])
