"""``certmon inspect --kafka``: every partition's checkpoint on the topic, in one view."""

from __future__ import annotations

from pathlib import Path

import pytest

from consumers.cli import main
from consumers.files import FileSource
from consumers.kafka.checkpoints import KafkaTopicStore
from consumers.kafka.topics import ensure_topics
from consumers.runner import Outputs, Runner
from monitor.config import load_config
from monitor.sinks import open_sink

pytestmark = pytest.mark.kafka

CONFIG = """\
[[suites]]
name = "{suite}"
models = ["a"]
audit_rate = 0.3

[[suites.certificates]]
name = "risk"
alpha = 0.15
delta = 0.05

[sinks]
alerts = "none"

[kafka]
bootstrap_servers = "{bs}"
topics.events = "{p}.events"
topics.alerts = "{p}.alerts"
topics.requests = "{p}.requests"
topics.dead_letters = "{p}.dead-letters"
topics.checkpoints = "{p}.checkpoints"
"""


def test_inspect_kafka_combines_every_partition(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfgs = []
    engine_topic = ""
    # two partitions' engines, one suite each, and a stale checkpoint of s0 under the input
    # topic (the direct path's key, from before [kafka] repartition): not the fleet's state
    for i, suite in enumerate(("s0", "s1", "s0")):
        cfg = tmp_path / f"{suite}-{i}.toml"
        cfg.write_text(CONFIG.format(suite=suite, bs=kafka_bootstrap, p=topic_prefix))
        ev = tmp_path / f"{suite}.jsonl"
        assert main(["simulate", "--out", str(ev), "--examples", "300", "--suite", suite,
                     "--model", "a:0.05", "--seed", str(i)]) == 0
        config = load_config(cfg)
        if i == 0:
            ensure_topics(config.kafka)
        store = KafkaTopicStore(config.kafka)
        engine_topic = config.kafka.engine_topics()[0]
        key = f"{engine_topic}/{i}" if i < 2 else f"{topic_prefix}.events/0"
        runner = Runner(config, Outputs(*(open_sink("none") for _ in range(3))), store=store,
                        key=key)
        source = FileSource(str(ev))
        try:
            runner.run(source)
        finally:
            source.close()
            store.close()
        cfgs.append(cfg)
    capsys.readouterr()
    assert main(["inspect", "--kafka", "--config", str(cfgs[0])]) == 0
    out = capsys.readouterr().out
    assert f"checkpoints in topic {topic_prefix}.checkpoints" in out
    assert ": 2 partitions" in out
    for i in range(2):
        assert f"{engine_topic}/{i}: 1 suites" in out
    assert f"{topic_prefix}.events/0" not in out and "two checkpoints" not in out
    assert "s0/a " in out and "s1/a " in out
    assert "s0/a/risk: epoch 1" in out and "s1/a/risk: epoch 1" in out
