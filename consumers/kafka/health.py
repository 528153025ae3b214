"""Health that tells the truth: an active broker check and a periodic progress line.

kafka-python retries silently while the brokers are down: ``poll()`` just returns nothing,
so an instance whose brokers were stopped kept ``certmon_up`` 1, ``certmon_kafka_connected`` 1
and ``/readyz`` 200 for as long as the outage lasted. :class:`BrokerCheck` asks the brokers a
question every ``[kafka] health_check_seconds`` (the end offset of partition 0 of the events
topic: a ListOffsets round trip to its leader, bounded by the same number of seconds); one
failed check marks the brokers unreachable until a check succeeds. :class:`ProgressLog`
writes one line every ``[kafka] progress_log_seconds``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

log = logging.getLogger("certmon.kafka")

__all__ = ["BrokerCheck", "ProgressLog"]


class BrokerCheck:
    """Periodic, bounded broker reachability check run from the consumer loop.

    Parameters
    ----------
    topic : str
        The events topic (its partition 0's end offset is asked for).
    every : float
        Seconds between checks; each is bounded by as many seconds.

    Examples
    --------
    >>> class Down:
    ...     def end_offsets(self, tps, timeout_ms):
    ...         raise TimeoutError("no broker")
    >>> check = BrokerCheck("events", 5.0)
    >>> check.run(Down(), now=0.0), check.reachable, check.run(Down(), now=1.0)
    (False, False, None)

    Notes
    -----
    Guarantee: after the brokers become unreachable, :attr:`reachable` turns False within
    ``2 * every`` seconds plus one loop iteration (a check starts at most ``every`` s after
    the loss and fails within ``every`` s), and the consumer loop is never held longer than
    ``every`` s by a check.
    """

    def __init__(self, topic: str, every: float) -> None:
        self.topic, self.every = topic, every
        self.reachable = True
        self._next = 0.0

    def run(self, consumer: Any, now: float | None = None) -> bool | None:
        """Check if due; return the new reachability when it changed, else None."""
        t = time.monotonic() if now is None else now
        if t < self._next:
            return None
        self._next = t + self.every
        try:
            from kafka.structs import TopicPartition

            consumer.end_offsets([TopicPartition(self.topic, 0)],
                                 timeout_ms=int(1000 * self.every))
            ok = True
        except Exception as exc:  # any failure of the round trip: not reachable
            ok = False
            if self.reachable:
                log.warning("kafka unreachable: broker check failed",
                            extra={"error": repr(exc)[:300], "check_every_s": self.every})
        if ok == self.reachable:
            return None
        self.reachable = ok
        if ok:
            log.info("kafka reachable again")
        return ok


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


def update_lag(metrics: Any, consumer: Any, workers: dict[int, Any], fetcher: Any) -> int:
    """Set each owned topic-partition's lag gauge; return the total lag (messages).

    The high watermark comes from the fetch process when there is one (the group member's
    own fetch positions are paused), else from the consumer.
    """
    total = 0
    for tp in consumer.assignment():
        worker = workers.get(tp.partition)
        high = (consumer.highwater(tp) if fetcher is None
                else fetcher.highwaters.get((tp.topic, tp.partition)))
        if worker is not None and high is not None and tp.topic in worker.offsets:
            lag = high - worker.offsets[tp.topic]
            metrics.lag(tp.topic, tp.partition, lag)
            total += max(0, lag)
    return total
