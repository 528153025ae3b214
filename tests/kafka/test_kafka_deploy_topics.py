"""``deploy/kafka/create-topics.sh`` works with what certmon installs.

Before, it needed ``/opt/kafka/bin/kafka-topics.sh`` (only in the apache/kafka image) and
failed anywhere else; it also gave the events topic 3 partitions against
``[kafka] events_partitions = 6``. Now, without a Kafka distribution, it falls back to
``python -m consumers.kafka.topics`` (kafka-python) and uses 6 partitions by default.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from kafka import KafkaConsumer

from tests.kafka.kafka_harness import REPO

pytestmark = pytest.mark.kafka

SCRIPT = REPO / "deploy" / "kafka" / "create-topics.sh"


def test_create_topics_script_without_a_kafka_distribution(kafka_bootstrap: str,
                                                            tmp_path: Path) -> None:
    if Path("/opt/kafka/bin/kafka-topics.sh").exists() or shutil.which("kafka-topics.sh"):
        pytest.skip("a Kafka distribution is installed: the fallback is not exercised")
    env = {**os.environ, "BOOTSTRAP": kafka_bootstrap, "KAFKA_HOME": str(tmp_path)}
    for _ in range(2):  # idempotent
        proc = subprocess.run(["bash", str(SCRIPT)], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "certmon.checkpoints.v1" in proc.stdout, proc.stdout
    c = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=None)
    try:
        assert len(c.partitions_for_topic("certmon.eval-events.v1") or ()) == 6
        assert len(c.partitions_for_topic("certmon.checkpoints.v1") or ()) == 1
    finally:
        c.close()
