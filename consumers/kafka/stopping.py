"""The stop sequence of the Kafka runner (a mixin of ``KafkaRunner``).

On stop (SIGTERM, SIGINT) the consumer loop ends, then, within one budget
(``[kafka] shutdown_timeout_seconds``, :class:`consumers.kafka.deadlines.ShutdownBudget`):
the fetch child is closed, a final checkpoint of every owned partition is written (unless
the member is fenced) and the final state kept for ``--state-out``, the group member leaves,
the broker check and the repartition stage stop, and the sinks, the producer and the
checkpoint store are flushed and closed.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from consumers.kafka.deadlines import close_outputs

if TYPE_CHECKING:
    from collections.abc import Iterator

    from kafka import KafkaConsumer

    from consumers.kafka.deadlines import ShutdownBudget
    from consumers.kafka.fetcher import FetchProcess
    from consumers.kafka.health import BrokerCheck
    from consumers.kafka.metrics import KafkaMetrics
    from consumers.kafka.partitions import PartitionWorker
    from consumers.kafka.repartition import Repartitioner
    from consumers.kafka.sinks import KafkaOutputs
    from monitor.checkpoint import CheckpointStore
    from monitor.config.kafka import KafkaConfig
    from monitor.sinks import Sink

log = logging.getLogger("certmon.kafka")

__all__ = ["EXIT_RESERVE_S", "StopSequence"]

# Seconds of ``shutdown_timeout_seconds`` kept for the process's own exit after the runner
# stops (writing ``--state-out``, the interpreter's teardown: about 0.3 s measured).
EXIT_RESERVE_S = 0.6


class StopSequence:
    """How the Kafka runner stops; the attributes are those of ``KafkaRunner``."""

    kafka: KafkaConfig
    metrics: KafkaMetrics
    final_view: dict[str, Any] | None
    _consumer: KafkaConsumer | None
    _fetcher: FetchProcess | None
    _budget: ShutdownBudget
    _lock: threading.RLock
    _workers: dict[int, PartitionWorker]
    _discard_on_revoke: bool
    _outputs: KafkaOutputs | None
    _store: CheckpointStore | None
    _sinks: dict[str, Sink]
    _broker: BrokerCheck
    _repartitioner: Repartitioner | None
    _steps: dict[str, float]  # seconds taken by each step of the stop (logged by close)
    _stop_began: float  # monotonic time the stop began (the signal, or the loop's end)

    @contextlib.contextmanager
    def _timed(self, step: str) -> Iterator[None]:
        t0 = time.monotonic()
        try:
            yield
        finally:
            took = time.monotonic() - t0
            self._steps[step] = round(self._steps.get(step, 0.0) + took, 3)

    def state_view(self, shown_only: bool = False) -> dict[str, Any]:
        """Return the merged state view (implemented by ``KafkaRunner``)."""
        raise NotImplementedError

    def _maybe_checkpoint(self, consumer: KafkaConsumer, force: bool = False) -> None:
        raise NotImplementedError  # KafkaRunner._maybe_checkpoint

    def _stop_stages(self) -> None:
        """Stop the broker check and the repartition stage (its batch in flight ends)."""
        with self._timed("broker_check"):
            self._broker.stop()
        if self._repartitioner is not None:
            with self._timed("repartition_stage"):
                self._repartitioner.stop(timeout=self._budget.left(2.0))

    def _close_consumer(self, clean: bool) -> None:
        consumer, self._consumer = self._consumer, None
        fetcher, self._fetcher = self._fetcher, None
        if fetcher is not None:
            with self._timed("fetch_child"):
                fetcher.close(timeout=self._budget.left(5.0))
        if consumer is None:
            return
        try:
            if clean:
                with self._timed("final_checkpoint"):
                    self._maybe_checkpoint(consumer, force=True)
                with self._timed("state_view"):
                    self.final_view = self.state_view()
            self._discard_on_revoke = True
            with self._lock:
                self._workers.clear()
                self.metrics.assigned(0)
        finally:
            try:
                wait = self._budget.left(self.kafka.request_timeout_ms / 1e3)
                with self._timed("consumer_close"):
                    consumer.close(timeout_ms=int(1000 * wait))
            except Exception as exc:
                log.info("consumer close failed", extra={"error": repr(exc)})

    def begin_shutdown(self) -> None:
        """Start the shutdown budget: later flushes, saves and closes share it."""
        budget = self.kafka.shutdown_timeout_seconds
        # what the process does after the runner (--state-out, the interpreter's exit) comes
        # out of the same budget: the runner's steps get the rest
        if not self._budget.begin(budget - min(EXIT_RESERVE_S, budget / 4)):
            return
        self._stop_began = time.monotonic()
        if self._repartitioner is not None:  # its last batch ends while the engines save
            self._repartitioner.request_stop()
        if self._outputs is not None:
            self._outputs.bound(budget / 3, self._budget.left)
        store = getattr(self._store, "inner", self._store)  # under an AuthenticatedStore
        if store is not None and hasattr(store, "timeout"):
            store.timeout = budget / 3

    def close(self) -> None:
        """Flush and close sinks, the producer and the checkpoint store."""
        self.begin_shutdown()
        with self._timed("outputs_close"):
            close_outputs(self._sinks.values(), self._outputs, self._store, self._budget)
        total = time.monotonic() - self._stop_began
        log.info("stopped", extra={"stop_s": round(total, 3), "steps_s": self._steps})
