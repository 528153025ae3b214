"""Per-partition consumer metrics (registered on a caller-provided registry).

- ``certmon_kafka_consumer_lag_messages{topic,partition}``: high watermark minus the offset
  reading has reached (past transaction markers and aborted records once the records before
  them are processed, with the fetch process), for every assigned partition whose high
  watermark is known (a partition not read yet counts from offset 0); no series while the
  brokers are unreachable (the lag is unknown then);
- ``certmon_kafka_records_consumed_total{topic,partition}``;
- ``certmon_kafka_partitions_assigned``: partitions this process owns now;
- ``certmon_kafka_connected``: 1 while the consumer loop runs against the broker, else 0;
- ``certmon_kafka_loop_failures_total{error}``: consumer-loop failures (each followed by a
  reconnect with backoff), by exception type;
- ``certmon_kafka_suite_partition_conflicts_total{suite}``: records of a suite read from a
  partition other than the suite's owner (dead-lettered);
- ``certmon_kafka_record_failures_total{error}``: processing attempts that raised, by exception
  type (each rewinds the partition to its checkpoint; a record given up after
  ``[kafka] max_record_attempts`` is counted in ``certmon_events_rejected_total{reason=
  "processing_failed"}``);
- ``certmon_kafka_partitions_held{partition}``: 1 while an assigned input partition is held
  (its checkpoint was refused or unreadable: nothing of it is processed, the others run).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["KafkaMetrics"]


class KafkaMetrics:
    """Consumer-side Kafka metrics.

    Examples
    --------
    >>> registry = CollectorRegistry()
    >>> m = KafkaMetrics(registry)
    >>> m.consumed("t", 0, 5); m.lag("t", 0, 7); m.assigned(2)
    >>> registry.get_sample_value("certmon_kafka_records_consumed_total",
    ...                           {"topic": "t", "partition": "0"})
    5.0
    >>> registry.get_sample_value("certmon_kafka_consumer_lag_messages",
    ...                           {"topic": "t", "partition": "0"})
    7.0
    >>> m.forget("t", 0)
    >>> registry.get_sample_value("certmon_kafka_consumer_lag_messages",
    ...                           {"topic": "t", "partition": "0"}) is None
    True
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self._lag = Gauge(
            "certmon_kafka_consumer_lag_messages",
            "Messages between this consumer's position and the partition's high watermark, for "
            "every assigned partition (counted from offset 0 until one of its records is read); "
            "absent while the brokers are unreachable (unknown then).",
            ["topic", "partition"],
            registry=registry,
        )
        self._consumed = Counter(
            "certmon_kafka_records_consumed",
            "Records consumed from Kafka and processed.",
            ["topic", "partition"],
            registry=registry,
        )
        self._assigned = Gauge(
            "certmon_kafka_partitions_assigned",
            "Input partitions currently assigned to this process.",
            registry=registry,
        )

        self._connected = Gauge(
            "certmon_kafka_connected",
            "1 while the consumer loop runs against the broker, 0 while it reconnects.",
            registry=registry,
        )
        self._failures = Counter(
            "certmon_kafka_loop_failures",
            "Consumer-loop failures, each followed by a reconnect with backoff.",
            ["error"],
            registry=registry,
        )
        self._conflicts = Counter(
            "certmon_kafka_suite_partition_conflicts",
            "Records of a suite read from a partition other than the suite's owner.",
            ["suite"],
            registry=registry,
        )

        self._record_failures = Counter(
            "certmon_kafka_record_failures",
            "Record processing attempts that raised (each rewinds the partition to its "
            "checkpoint), by exception type.",
            ["error"],
            registry=registry,
        )

        self._held = Gauge(
            "certmon_kafka_partitions_held",
            "1 while an assigned input partition is held: its checkpoint was refused or "
            "could not be read, so none of its records are processed (the reason is logged).",
            ["partition"],
            registry=registry,
        )

    def held(self, partition: int, on: bool) -> None:
        """Mark an input partition held (its checkpoint refused) or no longer held."""
        if on:
            self._held.labels(partition=str(partition)).set(1)
        else:
            with contextlib.suppress(KeyError):
                self._held.remove(str(partition))

    def connected(self, up: bool) -> None:
        """Set whether the consumer loop runs against the broker."""
        self._connected.set(1 if up else 0)

    def loop_failed(self, error: str) -> None:
        """Count one consumer-loop failure of type ``error``."""
        self._failures.labels(error=error).inc()

    def suites_seen(self, suites: Iterable[str]) -> None:
        """Start the conflict counter of each of ``suites`` at 0 (a suite's first sight).

        So the counter exists before its first conflict and ``increase()`` sees that one too.

        Examples
        --------
        >>> registry = CollectorRegistry()
        >>> KafkaMetrics(registry).suites_seen(["qa"])
        >>> registry.get_sample_value("certmon_kafka_suite_partition_conflicts_total",
        ...                           {"suite": "qa"})
        0.0
        """
        for suite in suites:
            self._conflicts.labels(suite=suite)

    def suite_conflict(self, suite: str, count: int = 1) -> None:
        """Count ``count`` records of ``suite`` read from a partition that does not own it."""
        self._conflicts.labels(suite=suite).inc(count)

    def record_failed(self, error: str) -> None:
        """Count one processing attempt that raised an exception of type ``error``."""
        self._record_failures.labels(error=error).inc()

    def consumed(self, topic: str, partition: int, count: int) -> None:
        """Count ``count`` records processed from one partition."""
        self._consumed.labels(topic=topic, partition=str(partition)).inc(count)

    def lag(self, topic: str, partition: int, messages: int) -> None:
        """Set the lag of one partition."""
        self._lag.labels(topic=topic, partition=str(partition)).set(max(0, messages))

    def assigned(self, count: int) -> None:
        """Set the number of assigned partitions."""
        self._assigned.set(count)

    def lag_unknown(self) -> None:
        """Drop every lag series: while the brokers are unreachable the lag is unknown.

        Examples
        --------
        >>> registry = CollectorRegistry()
        >>> m = KafkaMetrics(registry)
        >>> m.lag("t", 0, 7); m.lag_unknown()
        >>> registry.get_sample_value("certmon_kafka_consumer_lag_messages",
        ...                           {"topic": "t", "partition": "0"}) is None
        True
        """
        self._lag.clear()

    def forget(self, topic: str, partition: int) -> None:
        """Drop the lag series of a partition this process no longer owns."""
        with contextlib.suppress(KeyError):
            self._lag.remove(topic, str(partition))
