"""Stopping and saving while an output cannot be delivered (the brokers are gone).

Found by review: with an output pending in an outage, each sink's flush waited its own
timeout (1.33 s, then again in the producer's close: 6.8 s against a 4 s stop budget), and
the checkpoint before a loop failure waited the full 15 s flush timeout to fail; a stop
signalled during that save then flushed every sink for 15 s more (61 s). The flushes now
share the stop's budget, and the save before a loop failure fails within 2 s.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from kafka.errors import KafkaTimeoutError
from kafka.structs import TopicPartition
from prometheus_client import CollectorRegistry

from consumers.kafka.runner import KafkaRunner
from consumers.kafka.sinks import KafkaOutputs
from tests.consumers.kafka.test_units import TOPIC, _records, _runner


class _Future:
    def add_errback(self, fn: Any) -> _Future:
        return self


class _DownProducer:
    """A producer whose brokers are unreachable: anything sent stays pending."""

    def __init__(self) -> None:
        self.pending = 0

    def send(self, *args: Any, **kwargs: Any) -> _Future:
        self.pending += 1
        return _Future()

    def flush(self, timeout: float | None = None) -> None:
        if self.pending:
            time.sleep(timeout or 0.0)
            raise KafkaTimeoutError("flush timed out")

    def close(self, timeout: float | None = None) -> None:
        time.sleep(min(timeout or 0.0, 0.1))


def _pending_output_runner(tmp_path: Path) -> KafkaRunner:
    runner, consumer, _ = _runner(tmp_path)
    runner.kafka = runner.kafka.model_copy(update={"checkpoint_store": "local"})
    out = KafkaOutputs(runner.kafka, CollectorRegistry(), producer=_DownProducer())
    runner._outputs = out
    runner._sinks = {"alerts": out.alerts, "requests": out.requests,
                     "dead_letters": out.dead_letters}
    tp0 = TopicPartition(TOPIC, 0)
    consumer.assigned = {tp0}
    consumer.close = lambda timeout_ms=None: None  # type: ignore[method-assign]
    runner._on_assigned([tp0])
    runner._process_batch({tp0: _records(0, 5)})
    out.requests.emit({"suite": "qa", "id": "r1"})  # a label request not yet acknowledged
    return runner


def test_the_stop_keeps_its_budget_with_an_output_pending(tmp_path: Path) -> None:
    runner = _pending_output_runner(tmp_path)
    t0 = time.monotonic()
    runner.begin_shutdown()
    runner._close_consumer(clean=True)
    runner._stop_stages()
    runner.close()
    took = time.monotonic() - t0
    assert took < runner.kafka.shutdown_timeout_seconds, (took, runner._steps)


def test_a_save_before_a_loop_failure_fails_fast_and_a_stop_meanwhile_keeps_its_budget(
        tmp_path: Path) -> None:
    runner = _pending_output_runner(tmp_path)
    signal = threading.Timer(1.0, runner.begin_shutdown)  # SIGTERM during the save
    t0 = time.monotonic()
    signal.start()
    runner._ready = False
    runner._save_before_drop()
    saved = time.monotonic() - t0
    runner._close_consumer(clean=False)
    runner._stop_stages()
    runner.close()
    signal.join()
    stop = time.monotonic() - t0 - 1.0
    assert saved < 5.0, saved  # was the full 15 s flush timeout
    assert stop < runner.kafka.shutdown_timeout_seconds, (stop, runner._steps)
    assert not runner.ready()
