"""The labeller's Kafka mode: label requests on the requests topic -> label events on the
events topic (keyed by suite), each a valid label answering its request; a re-emitted request
is answered once."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from consumers.kafka.topics import ensure_topics
from consumers.labelling.labeller import Labeller, constant_answer, run_kafka_labeller
from monitor.config import CertmonConfig
from monitor.config.kafka import kafka_config_of
from monitor.events import Event, decode_event
from monitor.label_requests import label_request
from tests.kafka.conftest import BrokerInfo

pytestmark = pytest.mark.kafka


def test_kafka_labeller_answers_the_requests_topic(kafka_broker: BrokerInfo) -> None:
    prefix = f"lbl-{uuid.uuid4().hex[:8]}"
    config = CertmonConfig.model_validate({
        "suites": [{"name": "*", "certificates": [{"name": "r", "alpha": 0.1, "delta": 0.1}]}],
        "kafka": {"bootstrap_servers": str(kafka_broker), "group_id": f"{prefix}-group",
                  "topics": {"events": f"{prefix}.eval-events.v1",
                             "requests": f"{prefix}.requests.v1",
                             "alerts": f"{prefix}.alerts.v1",
                             "dead_letters": f"{prefix}.dead-letters.v1",
                             "checkpoints": f"{prefix}.checkpoints.v1"}}})
    k = kafka_config_of(config)
    ensure_topics(k)
    requests = [label_request(f"s{i % 3}", "m", f"x{i}", f"j{i}", 1.7e9 + i) for i in range(30)]
    producer = KafkaProducer(bootstrap_servers=str(kafka_broker), acks="all")
    for req in [*requests, requests[0], {"kind": "evaluate", "suite": "s0"}]:
        producer.send(k.topics.requests, key=str(req["suite"]).encode(),
                      value=json.dumps(req).encode())
    producer.flush()
    producer.close()

    labeller = Labeller(constant_answer(1.0))
    stop = threading.Event()
    worker = threading.Thread(target=run_kafka_labeller, args=(config, labeller, stop))
    worker.start()
    try:
        deadline = time.monotonic() + 60
        while labeller.answered + labeller.repeats + labeller.other < 32:
            assert worker.is_alive() and time.monotonic() < deadline, labeller.summary()
            time.sleep(0.1)
    finally:
        stop.set()
        worker.join(30)
    assert (labeller.answered, labeller.repeats, labeller.other) == (30, 1, 1)

    c = KafkaConsumer(bootstrap_servers=str(kafka_broker), group_id=None)
    tps = [TopicPartition(k.topics.events, p)
           for p in sorted(c.partitions_for_topic(k.topics.events) or [])]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    end = c.end_offsets(tps)
    records = []
    deadline = time.monotonic() + 30
    while any(c.position(tp) < end[tp] for tp in tps) and time.monotonic() < deadline:
        for recs in c.poll(200).values():
            records.extend(recs)
    c.close()
    assert len(records) == 30
    seen = set()
    for rec in records:
        ev = decode_event(rec.value)
        assert isinstance(ev, Event) and ev.type == "label" and ev.loss == 1.0
        assert rec.key == ev.suite.encode()
        seen.add(ev.event_id)
    assert seen == {"label:" + r["request_id"] for r in requests}
