"""A repartition stage that cannot run shows in readiness (found by review).

With the repartition topic missing (``create_topics = false`` and a topic script that did not
create it) the stage failed and restarted forever while ``/readyz`` said ready and the engines
received nothing.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import kafka
import pytest

from consumers.kafka.repartition import Repartitioner
from monitor.config.kafka import KafkaConfig
from tests.consumers.kafka.test_units import _runner


class _NoTopicConsumer:
    """A consumer of a cluster without the repartition topic."""

    def __init__(self, **kwargs: Any) -> None:
        pass

    def subscribe(self, **kwargs: Any) -> None:
        pass

    def partitions_for_topic(self, topic: str) -> None:
        return None

    def close(self, **kwargs: Any) -> None:
        pass


def test_a_failing_stage_makes_the_instance_unready(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka, "KafkaConsumer", _NoTopicConsumer)
    logging.disable(logging.CRITICAL)
    try:
        stage = Repartitioner(KafkaConfig(retry_backoff_max_seconds=1))
        runner, _, _ = _runner(tmp_path)
        runner._ready = True
        runner._repartitioner = stage
        assert runner.ready()
        stage.start(wait_s=0)
        deadline = time.monotonic() + 10
        while stage.failures == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        stage.stop(1)
    finally:
        logging.disable(logging.NOTSET)
    assert stage.failures >= 1 and not stage.healthy
    assert not runner.ready()
