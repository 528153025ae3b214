"""Kafka producers for certmon's outputs: alerts, label requests and dead letters.

One idempotent producer (``enable_idempotence=True``, ``acks="all"``) is shared by the three
sinks; each sink writes JSON records to its own topic, keyed by suite so a suite's outputs
stay in order. Delivery is checked at :meth:`KafkaTopicSink.flush`: the runner flushes every
sink before it writes a checkpoint, and a failed delivery raises :class:`ProduceError`, so a
checkpoint never covers an output that did not reach Kafka (the runner then rewinds to the
last checkpoint and produces again; alert ids are deterministic, so receivers deduplicate).
"""

from __future__ import annotations

import base64
import json
import logging
import threading
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter

from monitor.config.kafka import KafkaConfig
from monitor.errors import SinkError

if TYPE_CHECKING:
    from kafka import KafkaProducer

log = logging.getLogger("certmon.kafka")

__all__ = [
    "KafkaOutputs",
    "KafkaTopicSink",
    "ProduceError",
    "create_producer",
    "dead_letter_record",
    "encode_record",
]


class ProduceError(SinkError):
    """Records could not be delivered to Kafka (after the producer's own retries)."""


def encode_record(record: dict[str, Any]) -> bytes:
    """Encode an output record as compact UTF-8 JSON (key order kept).

    Examples
    --------
    >>> encode_record({"id": "a1", "n": 2})
    b'{"id":"a1","n":2}'
    """
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode()


def dead_letter_record(
    raw: bytes, reason: str, detail: str, *, topic: str, partition: int, offset: int
) -> dict[str, Any]:
    r"""Build the dead-letter document for a rejected Kafka record.

    Parameters
    ----------
    raw : bytes
        The record value exactly as consumed.
    reason, detail : str
        Rejection reason code (see :mod:`monitor.events`) and a human-readable detail.
    topic, partition, offset : str, int, int
        Where the record was read.

    Examples
    --------
    >>> d = dead_letter_record(b"\xff", "undecodable", "bad", topic="t", partition=0, offset=7)
    >>> d["raw"], d["source"]
    ('/w==', {'kind': 'kafka', 'topic': 't', 'partition': 0, 'offset': 7})
    """
    return {
        "reason": reason,
        "detail": detail,
        "raw": base64.b64encode(raw).decode("ascii"),
        "source": {"kind": "kafka", "topic": topic, "partition": partition, "offset": offset},
    }


def create_producer(config: KafkaConfig, **overrides: Any) -> KafkaProducer:
    """Create an idempotent, ``acks=all`` producer from the ``[kafka]`` settings.

    Raises
    ------
    kafka.errors.NoBrokersAvailable
        No bootstrap server answers (callers retry with backoff).
    """
    from kafka import KafkaProducer

    kwargs: dict[str, Any] = {
        **config.client_kwargs(),
        "client_id": f"{config.client_id}-producer",
        "enable_idempotence": True,
        "acks": "all",
        "linger_ms": 5,
        "max_in_flight_requests_per_connection": 5,
        "delivery_timeout_ms": config.delivery_timeout_ms,
        "max_request_size": max(1_048_576, config.checkpoint_chunk_bytes + 65_536),
    }
    kwargs.update(overrides)
    return KafkaProducer(**kwargs)


class KafkaTopicSink:
    """A :class:`monitor.sinks.Sink` writing JSON records to one Kafka topic.

    Parameters
    ----------
    producer : KafkaProducer
        Shared producer (owned by the caller, not closed by :meth:`close`).
    topic : str
        Destination topic.
    key_field : str
        Record field used as the message key (``"suite"``); records without it are unkeyed.
    failures : Counter, optional
        ``certmon_kafka_produce_failures_total`` (label ``topic``).
    flush_timeout : float
        Seconds :meth:`flush` waits for outstanding deliveries.

    Notes
    -----
    Guarantee: when :meth:`flush` returns, every record emitted before it is acknowledged by
    all in-sync replicas, exactly once per ``emit`` (idempotent producer). A failure raises
    :class:`ProduceError` from :meth:`flush` and the failed records are *not* retried here.
    """

    def __init__(
        self,
        producer: KafkaProducer,
        topic: str,
        *,
        key_field: str = "suite",
        failures: Counter | None = None,
        flush_timeout: float = 60.0,
    ) -> None:
        self.producer = producer
        self.topic = topic
        self.key_field = key_field
        self._failures_metric = failures
        self._flush_timeout = flush_timeout
        self._lock = threading.Lock()
        self._failed: list[str] = []
        self.emitted = 0

    def emit(self, record: dict[str, Any]) -> None:
        """Send one record asynchronously (delivery is checked by :meth:`flush`)."""
        key = record.get(self.key_field)
        key_bytes = str(key).encode() if key is not None else None
        future = self.producer.send(self.topic, value=encode_record(record), key=key_bytes)
        future.add_errback(self._on_error)
        self.emitted += 1

    def _on_error(self, exc: BaseException) -> None:
        with self._lock:
            self._failed.append(repr(exc))
        if self._failures_metric is not None:
            self._failures_metric.labels(topic=self.topic).inc()
        log.warning("produce failed", extra={"topic": self.topic, "error": repr(exc)})

    def flush(self) -> None:
        """Wait for every outstanding record; raise :class:`ProduceError` if any failed."""
        from kafka.errors import KafkaError

        try:
            self.producer.flush(timeout=self._flush_timeout)
        except KafkaError as exc:
            raise ProduceError(f"flush to {self.topic} failed: {exc!r}") from exc
        with self._lock:
            failed, self._failed = self._failed, []
        if failed:
            raise ProduceError(f"{len(failed)} record(s) to {self.topic} failed: {failed[0]}")

    def close(self) -> None:
        """Flush (the shared producer is closed by its owner)."""
        self.flush()


class KafkaOutputs:
    """The shared producer plus the alerts / requests / dead-letters sinks.

    Parameters
    ----------
    config : KafkaConfig
        Topics and connection settings.
    registry : CollectorRegistry
        Where ``certmon_kafka_produce_failures_total`` is registered.
    producer : KafkaProducer, optional
        Use this producer instead of creating one.
    """

    def __init__(
        self,
        config: KafkaConfig,
        registry: CollectorRegistry,
        producer: KafkaProducer | None = None,
    ) -> None:
        self.failures = Counter(
            "certmon_kafka_produce_failures",
            "Records that could not be delivered to Kafka.",
            ["topic"],
            registry=registry,
        )
        self.producer = producer if producer is not None else create_producer(config)
        topics = config.topics
        self.alerts = KafkaTopicSink(self.producer, topics.alerts, failures=self.failures)
        self.requests = KafkaTopicSink(self.producer, topics.requests, failures=self.failures)
        self.dead_letters = KafkaTopicSink(
            self.producer, topics.dead_letters, key_field="reason", failures=self.failures
        )

    def sink_for(self, name: str) -> KafkaTopicSink:
        """Return the sink for ``"alerts"``, ``"requests"`` or ``"dead_letters"``."""
        sinks = {
            "alerts": self.alerts,
            "requests": self.requests,
            "dead_letters": self.dead_letters,
        }
        if name not in sinks:
            raise SinkError(f"no Kafka sink named {name!r}")
        return sinks[name]

    def close(self) -> None:
        """Flush all sinks, then close the producer."""
        try:
            for sink in (self.alerts, self.requests, self.dead_letters):
                sink.flush()
        finally:
            self.producer.close(timeout=10)
