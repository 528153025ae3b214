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
import functools
import hashlib
import json
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter

from monitor.config.kafka import DEAD_LETTER_MAX_RAW_BYTES, KafkaConfig
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


DEFAULT_DEAD_LETTER_RAW_BYTES = DEAD_LETTER_MAX_RAW_BYTES  # defined once, with [kafka]


def dead_letter_record(
    raw: bytes, reason: str, detail: str, *, topic: str, partition: int, offset: int,
    max_raw_bytes: int = DEFAULT_DEAD_LETTER_RAW_BYTES,
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
    max_raw_bytes : int
        At most this many leading bytes of ``raw`` are kept (base64 in ``raw``).

    Notes
    -----
    Guarantee: the document's size is bounded (about ``4/3 * max_raw_bytes`` plus the detail)
    whatever the record's size, so a dead letter always fits the producer's request size;
    ``raw_bytes`` and ``raw_sha256`` identify the original record exactly.

    Examples
    --------
    >>> d = dead_letter_record(b"\xff", "undecodable", "bad", topic="t", partition=0, offset=7)
    >>> d["raw"], d["raw_truncated"], d["source"]
    ('/w==', False, {'kind': 'kafka', 'topic': 't', 'partition': 0, 'offset': 7})
    >>> big = dead_letter_record(b"x" * 1000, "oversized", "", topic="t", partition=0, offset=8,
    ...                          max_raw_bytes=3)
    >>> big["raw"], big["raw_bytes"], big["raw_truncated"], big["raw_sha256"][:12]
    ('eHh4', 1000, True, '44f8354494a5')
    """
    return {
        "reason": reason,
        "detail": detail[:2000],
        "raw": base64.b64encode(raw[:max_raw_bytes]).decode("ascii"),
        "raw_bytes": len(raw),
        "raw_sha256": hashlib.sha256(raw).hexdigest(),
        "raw_truncated": len(raw) > max_raw_bytes,
        "source": {"kind": "kafka", "topic": topic, "partition": partition, "offset": offset},
    }


def _record_level(exc: BaseException) -> bool:
    """Whether ``exc`` rejects one record for good (its size or content), not the connection."""
    from kafka import errors

    return isinstance(exc, (errors.MessageSizeTooLargeError, errors.InvalidRecordError,
                            errors.CorruptRecordError, errors.RecordListTooLargeError))


def create_producer(config: KafkaConfig, **overrides: Any) -> KafkaProducer:
    """Create an idempotent, ``acks=all`` producer from the ``[kafka]`` settings.

    Raises
    ------
    kafka.errors.KafkaTimeoutError
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
    all in-sync replicas, exactly once per ``emit`` (idempotent producer), or -- when Kafka
    refuses that one record for good (too large, invalid) -- replaced by a small
    ``undeliverable_output`` dead letter (id, size, sha256, error) on ``fallback`` and counted
    in ``certmon_kafka_undeliverable_records_total``, so one record never blocks the stream.
    Any other failure raises :class:`ProduceError` from :meth:`flush` (the caller rewinds).
    """

    def __init__(
        self,
        producer: KafkaProducer,
        topic: str,
        *,
        key_field: str = "suite",
        failures: Counter | None = None,
        undeliverable: Counter | None = None,
        fallback: KafkaTopicSink | None = None,
        flush_timeout: float = 60.0,
    ) -> None:
        self.producer = producer
        self.topic = topic
        self.key_field = key_field
        self._failures_metric = failures
        self._undeliverable_metric = undeliverable
        self.fallback = fallback if fallback is not None else self
        self.flush_timeout = flush_timeout
        # while stopping: the seconds a flush may take given its own timeout (the budget's left)
        self.deadline: Callable[[float], float] | None = None
        self._lock = threading.Lock()
        self._failed: list[str] = []
        self._refused: list[dict[str, Any]] = []
        self.emitted = 0

    def emit(self, record: dict[str, Any]) -> None:
        """Send one record asynchronously (delivery is checked by :meth:`flush`)."""
        key = record.get(self.key_field)
        key_bytes = str(key).encode() if key is not None else None
        value = encode_record(record)
        future = self.producer.send(self.topic, value=value, key=key_bytes)
        stub = {
            "reason": "undeliverable_output",
            "topic": self.topic,
            "id": record.get("id"),
            "suite": record.get("suite"),
            "original_reason": record.get("reason"),
            "bytes": len(value),
            "sha256": hashlib.sha256(value).hexdigest(),
        }
        future.add_errback(functools.partial(self._on_error, stub))
        self.emitted += 1

    def _on_error(self, stub: dict[str, Any], exc: BaseException) -> None:
        refused = _record_level(exc) and stub["topic"] == self.topic
        with self._lock:
            if refused:  # replaced by a small dead letter at the next flush
                self._refused.append({**stub, "detail": repr(exc)[:500]})
            else:
                self._failed.append(repr(exc))
        if refused:
            if self._undeliverable_metric is not None:
                self._undeliverable_metric.labels(topic=self.topic).inc()
            log.error("record refused by Kafka; replaced by a dead letter",
                      extra={"topic": self.topic, "bytes": stub["bytes"], "error": repr(exc)})
            return
        if self._failures_metric is not None:
            self._failures_metric.labels(topic=self.topic).inc()
        log.warning("produce failed", extra={"topic": self.topic, "error": repr(exc)})

    def flush(self) -> None:
        """Wait for every outstanding record; raise :class:`ProduceError` if any failed."""
        from kafka.errors import KafkaError

        for attempt in range(2):  # a refused record's stand-in is produced, then flushed
            try:
                wait = (self.flush_timeout if self.deadline is None
                        else self.deadline(self.flush_timeout))
                self.producer.flush(timeout=wait)
            except KafkaError as exc:
                raise ProduceError(f"flush to {self.topic} failed: {exc!r}") from exc
            with self._lock:
                refused, self._refused = self._refused, []
            if not refused or attempt == 1:
                break
            for stub in refused:
                if stub["reason"] == stub.get("original_reason"):
                    # a stand-in refused in turn: nothing smaller to send; drop it, loudly
                    log.error("dead letter stand-in refused; dropped", extra=stub)
                    continue
                self.fallback.emit(stub)
            if self.fallback is not self:
                self.fallback.flush()
        with self._lock:
            failed, self._failed = self._failed, []
        if failed:
            raise ProduceError(f"{len(failed)} record(s) to {self.topic} failed: {failed[0]}")

    def close(self) -> None:
        """Flush (the shared producer is closed by its owner)."""
        self.flush()


# Longest a flush of the outputs waits for acknowledgements (it holds the consumer loop): past
# it the flush fails, nothing is checkpointed and the partitions rewind (outputs are
# at-least-once with deterministic ids, so a record still in flight may arrive twice).
FLUSH_TIMEOUT_S = 15.0


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
    bootstrap_timeout_ms : int, optional
        Overrides ``[kafka] bootstrap_timeout_ms`` for the producer created here.
    """

    def __init__(
        self,
        config: KafkaConfig,
        registry: CollectorRegistry,
        producer: KafkaProducer | None = None,
        *,
        bootstrap_timeout_ms: int | None = None,
    ) -> None:
        # the producer first: when its bootstrap fails, nothing is registered on ``registry``
        # yet, so the retry can register the counters again
        self.producer = producer if producer is not None else create_producer(
            config, **({} if bootstrap_timeout_ms is None
                       else {"bootstrap_timeout_ms": bootstrap_timeout_ms}))
        self.failures = Counter(
            "certmon_kafka_produce_failures",
            "Records that could not be delivered to Kafka.",
            ["topic"],
            registry=registry,
        )
        self.undeliverable = Counter(
            "certmon_kafka_undeliverable_records",
            "Output records Kafka refused for good, replaced by dead letters.",
            ["topic"],
            registry=registry,
        )
        topics = config.topics
        self.dead_letters = KafkaTopicSink(
            self.producer, topics.dead_letters, key_field="reason", failures=self.failures,
            undeliverable=self.undeliverable,
        )
        self.alerts = KafkaTopicSink(self.producer, topics.alerts, failures=self.failures,
                                     undeliverable=self.undeliverable, fallback=self.dead_letters)
        self.requests = KafkaTopicSink(self.producer, topics.requests, failures=self.failures,
                                       undeliverable=self.undeliverable,
                                       fallback=self.dead_letters)
        self.bound(FLUSH_TIMEOUT_S)

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

    def bound(self, seconds: float, deadline: Callable[[float], float] | None = None) -> None:
        """Make every later flush wait at most ``seconds`` (and what ``deadline`` allows).

        ``deadline`` maps a flush's timeout to the seconds it may take (a shutdown budget's
        ``left``), so the flushes of a stop share one budget instead of each taking
        ``seconds``.
        """
        for sink in (self.alerts, self.requests, self.dead_letters):
            sink.flush_timeout = seconds
            sink.deadline = deadline

    def close(self, timeout: float = 10.0) -> None:
        """Flush all sinks, then close the producer (waiting at most ``timeout`` s)."""
        try:
            for sink in (self.alerts, self.requests, self.dead_letters):
                sink.flush()
        finally:
            self.producer.close(timeout=timeout)
