from __future__ import annotations

import json
import random
import time
from collections import defaultdict
from pathlib import Path

import pytest

from tests.kafka.conftest import BrokerInfo
from tests.kafka.kafka_harness import KafkaSetup, comparable, make_events, replay_reference

pytestmark = pytest.mark.kafka


def _check_alerts(setup: KafkaSetup, ref_alerts: list[dict[str, object]]) -> int:
    """Alert ids: same set as the replay, one body per id; returns the re-emitted count."""
    alerts = setup.read_topic(setup.kafka.topics.alerts)
    bodies: dict[str, set[str]] = defaultdict(set)
    for a in alerts:
        bodies[str(a["id"])].add(json.dumps(a, sort_keys=True))
    assert set(bodies) == {str(a["id"]) for a in ref_alerts}
    assert all(len(b) == 1 for b in bodies.values()), "one id, two different alerts"
    return len(alerts) - len(bodies)


def test_kill9_at_random_points_then_restart(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    setup = KafkaSetup(kafka_bootstrap, topic_prefix, tmp_path, every=300)
    records = make_events(6000, seed=3)
    ref = replay_reference(setup, records)
    n = len(records)
    rnd = random.Random(20261121)
    stream = setup.trickle(records)  # a live stream: kills land mid-batch, mid-checkpoint
    kills = 0
    for i in range(3):
        consumer = setup.start(f"run{i}")
        consumer.wait_log("partitions assigned", timeout=60)
        time.sleep(rnd.uniform(0.1, 1.2))
        consumer.kill9()
        kills += 1
    stream.join(120)
    consumer = setup.start("final")
    # running (signal handlers installed) before it may be stopped: the killed runs may
    # already have checkpointed everything
    consumer.wait_log("partitions assigned", timeout=60)
    setup.wait_caught_up(procs=[consumer])
    rc = consumer.terminate()
    assert rc == 0, consumer.log_tail()
    assert kills >= 3

    state = setup.final_state()
    assert state["counters"]["events_in"] == n  # every event counted exactly once
    assert comparable(state) == comparable(ref["state"])
    _check_alerts(setup, ref["alerts"])


def test_group_rebalance_join_and_leave(
    kafka_broker: BrokerInfo, topic_prefix: str, tmp_path: Path
) -> None:
    kafka_bootstrap = kafka_broker.bootstrap_servers
    setup = KafkaSetup(kafka_bootstrap, topic_prefix, tmp_path, partitions=4, every=300)
    records = make_events(6000, n_suites=8, seed=4)
    ref = replay_reference(setup, records)
    n = len(records)
    a, b = setup.start("a"), setup.start("b")
    a.wait_log("partitions assigned", timeout=60)
    b.wait_log("partitions assigned", timeout=60)
    # Membership changes while the stream flows, paced by the changes themselves (not by a
    # sleep a loaded machine can outlast): each change starts while a third of the stream is
    # being produced, and waits for the group before the next third.
    third = n // 3
    stream = setup.trickle(records[:third])
    c = setup.start("c")  # a third member joins mid-stream
    c.wait_log("partitions assigned", timeout=90)
    stream.join(120)
    assert not stream.is_alive()
    stream = setup.trickle(records[third:2 * third])
    before = b.count_in_log("partitions assigned")
    assert a.terminate() == 0  # one leaves mid-stream
    b.wait_log("partitions assigned", timeout=90, count=before + 1)  # a's partitions move
    stream.join(120)
    assert not stream.is_alive()
    stream = setup.trickle(records[2 * third:])
    stream.join(120)
    assert not stream.is_alive()
    setup.wait_caught_up(procs=[b, c])
    assert b.terminate() == 0 and c.terminate() == 0
    assert sum(p.count_in_log("partitions assigned") for p in (a, b, c)) >= 4

    state = setup.final_state()
    assert state["counters"]["events_in"] == n
    assert comparable(state) == comparable(ref["state"])
    _check_alerts(setup, ref["alerts"])


def test_broker_restart_mid_stream(kafka_broker, topic_prefix: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    if not kafka_broker.can_restart:
        pytest.skip(f"broker {kafka_broker.kind} is not controlled by the tests")
    setup = KafkaSetup(kafka_broker.bootstrap_servers, topic_prefix, tmp_path, every=300)
    records = make_events(4000, seed=5)
    ref = replay_reference(setup, records)
    half = len(records) // 2
    broker = kafka_broker.broker
    setup.produce(records[:half])
    broker.stop()  # the consumer starts while Kafka is down: it must retry, not exit
    consumer = setup.start("c1")
    consumer.wait_log("retrying", timeout=60)
    assert consumer.alive()
    broker.start()
    consumer.wait_log("partitions assigned", timeout=60)
    broker.stop()  # and Kafka goes away again mid-stream (graceful stop keeps the data)
    time.sleep(2.0)
    assert consumer.alive()
    broker.start()
    setup.produce(records[half:])
    setup.wait_caught_up(timeout=120, procs=[consumer])
    assert consumer.alive()
    assert consumer.terminate() == 0

    state = setup.final_state()
    assert state["counters"]["events_in"] == len(records)
    assert comparable(state) == comparable(ref["state"])
    _check_alerts(setup, ref["alerts"])
