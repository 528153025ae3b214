"""One forged record on the Kafka checkpoint topic, against a real broker.

The attack: any client with write access to the checkpoint topic produced one record
that made a violated model show ``certified`` with 999,999 rounds. Here an honest checkpoint
is stored on the topic, the attacker overwrites it through the topic with a forged one (sha256
recomputed), and a fresh reader -- what a restarted or rebalanced certmon does -- must refuse
it: by the range checks without a key, and by the HMAC with ``CERTMON_CHECKPOINT_KEY`` (where
even an internally consistent forgery is refused).
"""

from __future__ import annotations

import json
from hashlib import sha256

import numpy as np
import pytest

from consumers.kafka.checkpoints import KafkaTopicStore
from consumers.kafka.partitions import PartitionWorker
from consumers.kafka.topics import ensure_topics
from monitor.checkpoint import AuthenticatedStore, canonical_json, encode_checkpoint
from monitor.config import parse_config
from monitor.config.kafka import KafkaConfig, KafkaTopics
from monitor.engine import Engine
from monitor.errors import CheckpointError
from monitor.simulate import SimModel, SimulationSpec, iter_jsonl

pytestmark = pytest.mark.kafka

TOML = """
[[suites]]
name = "demo"
models = ["good", "bad"]
audit_rate = 0.3
[[suites.certificates]]
name = "risk"
alpha = 0.1
delta = 0.05
methods = ["r_eval"]
cs_grid = 20
"""
KEY = b"k" * 32


def _kafka(bs: str, prefix: str) -> KafkaConfig:
    topics = KafkaTopics(events=f"{prefix}.events", alerts=f"{prefix}.alerts",
                         requests=f"{prefix}.requests", dead_letters=f"{prefix}.dead-letters",
                         checkpoints=f"{prefix}.checkpoints")
    return KafkaConfig(bootstrap_servers=bs, topics=topics, events_partitions=1)


def _honest() -> bytes:
    eng = Engine(parse_config(TOML))
    spec = SimulationSpec(models=(SimModel("good", 0.02, 0.95), SimModel("bad", 0.4, 0.9)),
                          examples=1500, audit_rate=0.3)
    eng.process_batch(list(iter_jsonl(spec, np.random.default_rng(1))))
    return encode_checkpoint(eng.snapshot(), {"kind": "kafka", "partition": 0,
                                              "offsets": {"events": 5000}})


def _forge(data: bytes, *, violate_range: bool) -> bytes:
    doc = json.loads(data)
    doc.pop("hmac", None)
    for m in doc["engine"]["suites"][0]["models"]:
        if m["name"] == "bad":
            for e in m["effective"]:
                e[2][0], e[2][1], e[2][2] = "certified", 5, None
            if violate_range:
                m["counts"]["rounds"] = 999_999
    doc["sha256"] = sha256(canonical_json(
        {k: v for k, v in doc.items() if k != "sha256"}).encode()).hexdigest()
    return json.dumps(doc).encode()


def test_a_forged_checkpoint_record_is_refused(kafka_bootstrap: str, topic_prefix: str) -> None:
    cfg = _kafka(kafka_bootstrap, topic_prefix)
    ensure_topics(cfg)
    config = parse_config(TOML)
    honest = _honest()
    # without a key: the attacker's record is read back, and the range checks refuse it
    store = KafkaTopicStore(cfg)
    store.save("events/0", honest)
    attacker = KafkaTopicStore(cfg)
    attacker.save("events/0", _forge(honest, violate_range=True))
    attacker.close()
    store.close()
    reader = KafkaTopicStore(cfg)
    data = reader.load("events/0")
    reader.close()
    assert data is not None and b"999999" in data
    with pytest.raises(CheckpointError, match="checkpoint refused"):
        PartitionWorker.start(config, 0, data)


def test_with_a_key_even_a_consistent_forgery_is_refused(kafka_bootstrap: str,
                                                         topic_prefix: str) -> None:
    cfg = _kafka(kafka_bootstrap, topic_prefix)
    ensure_topics(cfg)
    config = parse_config(TOML)
    inner = KafkaTopicStore(cfg)
    certmon = AuthenticatedStore(inner, KEY)
    certmon.save("events/0", _honest())
    restored = certmon.load("events/0")
    inner.close()
    assert restored is not None
    PartitionWorker.start(config, 0, restored)
    attacker = KafkaTopicStore(cfg)  # write ACL on the topic, no key
    attacker.save("events/0", _forge(restored, violate_range=False))
    attacker.close()
    fresh = KafkaTopicStore(cfg)
    try:
        with pytest.raises(CheckpointError, match="not authenticated"):
            AuthenticatedStore(fresh, KEY).load("events/0")
    finally:
        fresh.close()
