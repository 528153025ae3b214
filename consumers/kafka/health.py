"""Health that tells the truth: an active broker check and a periodic progress line.

kafka-python retries silently while the brokers are down: ``poll()`` just returns nothing,
so an instance whose brokers were stopped kept ``certmon_up`` 1, ``certmon_kafka_connected`` 1
and ``/readyz`` 200 for as long as the outage lasted. :class:`BrokerCheck` asks the brokers a
question every ``[kafka] health_check_seconds`` from a thread and a client of its own (the end
offset of partition 0 of the events topic: a ListOffsets round trip to its leader, bounded by
the same number of seconds); one failed check marks the brokers unreachable until a check
succeeds. :class:`ProgressLog`
writes one line every ``[kafka] progress_log_seconds``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from consumers.kafka.read_positions import ReadPositions

log = logging.getLogger("certmon.kafka")

__all__ = ["BrokerCheck", "EndOffsetProbe", "ProgressLog", "update_lag"]


class BrokerCheck:
    """Periodic, bounded broker reachability check, run by a thread of its own.

    Parameters
    ----------
    probe : callable
        ``probe(timeout_s)`` asks the brokers one question and raises if no answer came
        within ``timeout_s`` (:class:`EndOffsetProbe` in production; its ``close()``, if
        any, is called when the thread stops).
    every : float
        Seconds between checks; each is bounded by as many seconds.

    Examples
    --------
    >>> def down(timeout_s):
    ...     raise TimeoutError("no broker")
    >>> check = BrokerCheck(down, 5.0)
    >>> check.check_once(), check.reachable, check.changed(), check.changed()
    (False, False, False, None)

    Notes
    -----
    Guarantee: after the brokers become unreachable, :attr:`reachable` turns False within
    ``2 * every`` seconds (a check starts at most ``every`` s after the loss and fails
    within ``every`` s). The check never runs on the consumer loop's thread, so neither the
    loop nor a shutdown waits for it.
    """

    def __init__(self, probe: Callable[[float], Any], every: float) -> None:
        self._probe, self.every = probe, every
        self.reachable = True
        self._reported = True
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def check_once(self) -> bool:
        """Run one check now; return whether the brokers answered."""
        try:
            self._probe(self.every)
            ok = True
        except Exception as exc:  # any failure of the round trip: not reachable
            ok = False
            if self.reachable:
                log.warning("kafka unreachable: broker check failed",
                            extra={"error": repr(exc)[:300], "check_every_s": self.every})
        if ok and not self.reachable:
            log.info("kafka reachable again")
        self.reachable = ok
        return ok

    def changed(self) -> bool | None:
        """Return the reachability if it changed since the last call, else None."""
        now = self.reachable
        if now == self._reported:
            return None
        self._reported = now
        return now

    def start(self) -> None:
        """Start checking every :attr:`every` seconds from a daemon thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="certmon-broker-check",
                                            daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.check_once()
        close = getattr(self._probe, "close", None)
        if close is not None:
            close()

    def report(self) -> bool:
        """Return the reachability and count it as reported (see :meth:`changed`)."""
        self._reported = self.reachable
        return self._reported

    def stop(self) -> None:
        """Stop the thread (not waited for: a check in flight ends within :attr:`every`)."""
        self._stop.set()


class EndOffsetProbe:
    """The production probe: the end offset of ``topic``'s partition 0.

    A ListOffsets round trip to the partition's leader, asked with a client of its own
    (created at the first call, in the checking thread).
    """

    def __init__(self, client: dict[str, Any], client_id: str, topic: str) -> None:
        self._client, self._client_id, self._topic = client, client_id, topic
        self._consumer: Any = None

    def __call__(self, timeout_s: float) -> None:
        """Ask once; raise if no answer came within ``timeout_s``."""
        from kafka import KafkaConsumer
        from kafka.structs import TopicPartition

        if self._consumer is None:
            self._consumer = KafkaConsumer(
                **{**self._client, "request_timeout_ms": max(1000, int(1000 * timeout_s))},
                client_id=f"{self._client_id}-health", group_id=None, enable_auto_commit=False)
        self._consumer.end_offsets([TopicPartition(self._topic, 0)],
                                   timeout_ms=int(1000 * timeout_s))

    def close(self) -> None:
        """Close the client (if one was created)."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close(timeout_ms=1000)
            except Exception as exc:  # closing during an outage: nothing left to do
                log.info("health-check client close failed", extra={"error": repr(exc)})


class ProgressLog:
    """One log line every ``every`` seconds (0: never) with what the loop did since.

    Examples
    --------
    >>> p = ProgressLog(60.0, now=0.0)
    >>> p.add(5); p.due(now=30.0), p.due(now=61.0)
    (False, True)
    """

    def __init__(self, every: float, now: float | None = None) -> None:
        self.every = every
        self._records = 0
        self._last = time.monotonic() if now is None else now

    def add(self, records: int) -> None:
        """Count records processed."""
        self._records += records

    def due(self, now: float | None = None) -> bool:
        """Whether a line is due."""
        t = time.monotonic() if now is None else now
        return self.every > 0 and t - self._last >= self.every

    def emit(self, **fields: Any) -> None:
        """Write the line (records processed since the last one, plus ``fields``)."""
        now = time.monotonic()
        elapsed = max(now - self._last, 1e-9)
        log.info("progress", extra={"records": self._records,
                                    "records_per_s": round(self._records / elapsed, 1),
                                    **fields})
        self._records, self._last = 0, now


def update_lag(metrics: Any, consumer: Any, workers: dict[int, Any], fetcher: Any,
               read: ReadPositions) -> int:
    """Set each owned topic-partition's lag gauge; return the total lag (messages).

    The high watermark and the reading positions come from the fetch process when there is
    one (the group member's own fetch positions are paused), else from the consumer and
    ``read`` (the ends of the records its polls returned). A partition none of whose records
    was read yet (e.g. one no suite's events went to) is read from its beginning: its lag
    counts from offset 0, so an empty partition shows 0, not nothing. Offsets that hold no
    record (transaction markers: the repartition topic is written in transactions; aborted
    or expired records) count as read once the records before them are processed
    (:class:`~consumers.kafka.read_positions.ReadPositions`), so a caught-up partition shows 0.
    """
    total = 0
    for tp in consumer.assignment():
        worker = workers.get(tp.partition)
        if fetcher is None:
            high = consumer.highwater(tp)
            if worker is not None:
                read.note(tp.topic, tp.partition, None, consumer.position(tp, timeout_ms=0))
        else:
            high = fetcher.highwaters.get((tp.topic, tp.partition))
            read = fetcher.read
        if worker is not None and high is not None:
            done = read.consumed_to(tp.topic, tp.partition, worker.offsets.get(tp.topic, 0))
            lag = high - done
            metrics.lag(tp.topic, tp.partition, lag)
            total += max(0, lag)
    return total
