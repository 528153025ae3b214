from __future__ import annotations

import base64
import json
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.kafka.conftest import BrokerInfo
from tests.kafka.kafka_harness import (
    KafkaSetup,
    comparable,
    make_events,
    replay_reference,
    sample,
    scrape,
)

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize("fetch_process", [True, False], ids=["fetch-process", "one-process"])
def test_end_to_end_equals_replay(
    kafka_broker: BrokerInfo, topic_prefix: str, tmp_path: Path, fetch_process: bool
) -> None:
    kafka_bootstrap = kafka_broker.bootstrap_servers
    # Periodic checkpoints are off (60 s, 100k records): only SIGTERM's final checkpoint
    # can make the store reach the end offsets. The direct path (repartition = false): the
    # checkpoints' offsets are the input's end offsets and the lag gauge is exactly 0 (the
    # repartition topic's markers: test_kafka_repartition's no-lag test).
    setup = KafkaSetup(kafka_bootstrap, topic_prefix, tmp_path, every=100_000,
                       every_seconds=60.0, metrics=True, repartition=False,
                       fetch_process=fetch_process)  # fmt: skip
    records = make_events(2500, seed=1)
    ref = replay_reference(setup, records)
    assert ref["via"] == "certmon replay"
    assert ref["alerts"], "the stream should reach some certificates"
    setup.produce(records)
    consumer = setup.start("c1")
    port = consumer.metrics_port()
    deadline = time.monotonic() + 60
    text = ""
    while time.monotonic() < deadline:
        text = scrape(port)[1]
        if sample(text, "certmon_kafka_records_consumed_total") >= len(records):
            break
        time.sleep(0.2)
    assert sample(text, "certmon_kafka_records_consumed_total") == len(records)
    assert sample(text, "certmon_kafka_partitions_assigned") == 3
    assert sample(text, "certmon_kafka_consumer_lag_messages") == 0
    assert sample(text, "certmon_events_received_total") == len(records)
    assert "certmon_risk_estimate{" in text and "certmon_log_e_value{" in text
    assert scrape(port, "/readyz")[0] == 200 and scrape(port, "/healthz")[0] == 200
    assert setup.checkpoint_offsets() == {}  # nothing checkpointed yet
    assert consumer.terminate() == 0  # SIGTERM: final checkpoint, then exit 0
    ends = setup.end_offsets()
    if kafka_broker.kind != "tansu":  # Tansu's ListOffsets(latest) lags its record offsets
        assert setup.checkpoint_offsets() == {tp: off for tp, off in ends.items() if off > 0}

    assert comparable(setup.final_state()) == comparable(ref["state"])
    alerts = setup.read_topic(setup.kafka.topics.alerts)
    assert Counter(a["id"] for a in alerts) == Counter(a["id"] for a in ref["alerts"])
    assert sorted(json.dumps(a, sort_keys=True) for a in alerts) == sorted(
        json.dumps(a, sort_keys=True) for a in ref["alerts"]
    )
    requests = setup.read_topic(setup.kafka.topics.requests)
    assert len(requests) == len(ref["requests"])
    assert setup.read_topic(setup.kafka.topics.dead_letters) == []
    assert '"level":"INFO"' in consumer.log_path.read_text()  # structured JSON logs


def test_separate_judge_and_label_topics(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    """Judge and label events on two co-partitioned topics, two group members."""
    setup = KafkaSetup(kafka_bootstrap, topic_prefix, tmp_path, split=True)
    records = make_events(1500, seed=6)
    ref = replay_reference(setup, records)
    setup.produce(records)
    assert {t for t, _ in setup.end_offsets() if setup.end_offsets()[(t, _)] > 0} == {
        setup.kafka.topics.judge, setup.kafka.topics.labels}  # fmt: skip
    a, b = setup.start("a"), setup.start("b")
    setup.wait_caught_up(procs=[a, b])
    assert a.terminate() == 0 and b.terminate() == 0
    state = setup.final_state()
    assert state["counters"]["events_in"] == len(records)
    # The interleaving of the two topics is not the file order, so certificate numbers may
    # differ; every unit must still be joined: the same counts per model.
    for suite, sv in ref["state"]["suites"].items():
        for model, mv in sv["models"].items():
            assert state["suites"][suite]["models"][model]["counts"] == mv["counts"]


def test_malformed_records_land_in_dead_letters(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    setup = KafkaSetup(kafka_bootstrap, topic_prefix, tmp_path)
    good = make_events(300, seed=2)
    ok = json.loads(good[0][1])
    bad: list[tuple[str | None, bytes, str]] = []
    rng_bytes = [bytes((i * 37 + j * 11) % 256 for j in range(20 + i)) for i in range(15)]
    bad += [(None, b"\xff\xfe" + b, "undecodable") for b in rng_bytes[:5]]
    bad += [(None, b"{not json" + bytes([65 + i]), "invalid_json") for i in range(5)]
    for i in range(5):
        d = {k: v for k, v in ok.items() if k != "loss"} | {"event_id": f"bad-m{i}"}
        bad.append((ok["suite"], json.dumps(d).encode(), "missing_field"))
    for i in range(5):
        d = ok | {"event_id": f"bad-u{i}", "colour": "blue"}
        bad.append((ok["suite"], json.dumps(d).encode(), "unknown_field"))
    for i in range(5):
        d = ok | {"event_id": f"bad-t{i}", "loss": "high"}
        bad.append((ok["suite"], json.dumps(d).encode(), "wrong_type"))
    for i in range(5):
        d = ok | {"event_id": f"bad-r{i}", "loss": 1.5 + i}
        bad.append((ok["suite"], json.dumps(d).encode(), "out_of_range"))
    for i in range(5):
        d = ok | {"event_id": f"bad-o{i}", "example_id": "x" * 5000}
        bad.append((ok["suite"], json.dumps(d).encode(), "oversized"))
    records: list[tuple[str | None, bytes]] = list(good[:150])
    records += [(k, v) for k, v, _ in bad]
    records += good[150:]
    ref = replay_reference(setup, records)
    setup.produce(records)
    consumer = setup.start("c1")
    setup.wait_caught_up(procs=[consumer])
    assert consumer.terminate() == 0

    letters = setup.read_topic(setup.kafka.topics.dead_letters)
    assert len(letters) == len(bad)
    assert Counter(d["reason"] for d in letters) == Counter(r for _, _, r in bad)
    raws = sorted(base64.b64decode(d["raw"]) for d in letters)
    assert raws == sorted(v for _, v, _ in bad)
    for d in letters:
        src = d["source"]
        # the topic the engines read: the repartition topic by default
        assert src["topic"] == setup.engine_topic and src["offset"] >= 0 and "partition" in src
        assert d["detail"]
    state = setup.final_state()
    assert sum(state["counters"]["rejected"].values()) == len(bad)
    assert state["counters"]["events_in"] == len(records)
    assert comparable(state) == comparable(ref["state"])
