"""Checkpoint store on a compacted Kafka topic (``certmon.checkpoints.v1``).

Any instance of a consumer group can restore any partition: a checkpoint is stored under a
key such as ``"certmon.eval-events.v1/3"`` and :meth:`KafkaTopicStore.load` reads the topic to
its end offsets and returns the latest complete value for the key. A partition's checkpoint
is its manifest under that key plus one value per suite and slot under
``"certmon.eval-events.v1/3#part#<id>#<slot>"`` (:mod:`monitor.incremental`); every key of a
checkpoint goes to the checkpoint-topic partition of its manifest, and :meth:`save_many` /
:meth:`load_many` write or read many values with one wait for acknowledgements / one catch-up.

Record layout (all records of one key go to the same partition, so they stay ordered):

- a value up to ``chunk_bytes`` is one record, key ``KEY``, header ``certmon-ckpt: whole``;
- a larger value is split into chunk records, key ``KEY#chunk#SAVE_ID#I``, written first, then
  a manifest record under ``KEY`` (``{"save_id", "chunks", "size", "sha256"}``). A manifest is
  only written after all its chunks are acknowledged, so the latest record under ``KEY`` is
  always complete; chunks of older saves are deleted with tombstones after the new manifest.
- values above ``max_bytes`` are refused with :class:`CheckpointTooLargeError` and a config hint.

If partitions are added to the topic, a key's newer records land in another partition than its
older ones; reading, a record of a key from another partition than the key's previous record
only replaces it if it is newer (record timestamps), so an old checkpoint never comes back.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from monitor.config.kafka import KafkaConfig
from monitor.errors import CheckpointError

if TYPE_CHECKING:
    from kafka import KafkaConsumer, KafkaProducer

log = logging.getLogger("certmon.kafka")

HEADER = "certmon-ckpt"
_CHUNK_SEP = "#chunk#"

__all__ = ["CheckpointTooLargeError", "KafkaTopicStore", "chunk_key", "split_chunks"]


class CheckpointTooLargeError(CheckpointError):
    """A checkpoint exceeds ``kafka.checkpoint_max_bytes``."""


def chunk_key(key: str, save_id: str, index: int) -> str:
    """Return the record key of chunk ``index`` of save ``save_id``.

    Examples
    --------
    >>> chunk_key("events/0", "ab12", 3)
    'events/0#chunk#ab12#3'
    """
    return f"{key}{_CHUNK_SEP}{save_id}#{index}"


def split_chunks(data: bytes, chunk_bytes: int) -> list[bytes]:
    """Split ``data`` into pieces of at most ``chunk_bytes`` (at least one piece).

    Examples
    --------
    >>> [len(c) for c in split_chunks(b"x" * 10, 4)]
    [4, 4, 2]
    >>> split_chunks(b"", 4)
    [b'']
    """
    if chunk_bytes <= 0:
        raise ValueError("chunk_bytes must be positive")
    return [data[i : i + chunk_bytes] for i in range(0, len(data), chunk_bytes)] or [b""]


def _owner(key: str) -> str:
    """Return the checkpoint key a record key belongs to (topic names never hold ``#``)."""
    return key.split("#", 1)[0]


@dataclass(frozen=True)
class _Broken:
    """A record under a checkpoint key that cannot be read: loading that key fails."""

    reason: str


@dataclass(frozen=True)
class _Manifest:
    save_id: str
    chunks: int
    size: int
    sha256: str


def _manifest(key: str, value: bytes, partition: int) -> _Manifest | _Broken:
    """Parse a chunk manifest; an unreadable one fails only the loads of its own key.

    Examples
    --------
    >>> _manifest("e/0", b"not json", 0).reason.split(": ", 1)[1]
    'its manifest record (checkpoint topic partition 0) is unreadable: JSONDecodeError'
    >>> _manifest("e/0", b'{"save_id": "a", "chunks": 2, "size": 9, "sha256": "f"}', 0).chunks
    2
    """
    try:
        d = json.loads(value)
        return _Manifest(str(d["save_id"]), int(d["chunks"]), int(d["size"]), str(d["sha256"]))
    except Exception as exc:  # any malformed record: that key only
        return _Broken(f"checkpoint {key!r}: its manifest record (checkpoint topic partition "
                       f"{partition}) is unreadable: {type(exc).__name__}")


class KafkaTopicStore:
    """A :class:`monitor.checkpoint.CheckpointStore` on a compacted Kafka topic.

    Parameters
    ----------
    config : KafkaConfig
        Connection settings, ``topics.checkpoints``, ``checkpoint_chunk_bytes`` and
        ``checkpoint_max_bytes``.
    producer : KafkaProducer, optional
        An idempotent ``acks=all`` producer; one is created (and owned) when omitted.
    timeout : float
        Seconds to wait for a write to be acknowledged or for the end offsets.
    bootstrap_timeout_ms : int, optional
        Overrides ``[kafka] bootstrap_timeout_ms`` for the producer created here.

    Notes
    -----
    Guarantee: :meth:`save` returns only after every record of the checkpoint is acknowledged
    by all in-sync replicas; :meth:`load` returns the value of the last :meth:`save` for the key
    that returned (by any instance) before :meth:`load` started, or a later one. It assumes the
    topic is compacted, not deleted by time (``cleanup.policy=compact``), which
    :func:`consumers.kafka.topics.ensure_topics` sets up.
    """

    def __init__(
        self,
        config: KafkaConfig,
        producer: KafkaProducer | None = None,
        *,
        timeout: float = 30.0,
        bootstrap_timeout_ms: int | None = None,
    ) -> None:
        from consumers.kafka.sinks import create_producer

        self.config = config
        self.topic = config.topics.checkpoints
        self.chunk_bytes = config.checkpoint_chunk_bytes
        self.max_bytes = config.checkpoint_max_bytes
        self.timeout = timeout
        self._owns_producer = producer is None
        self._producer = producer if producer is not None else create_producer(
            config, **({} if bootstrap_timeout_ms is None
                       else {"bootstrap_timeout_ms": bootstrap_timeout_ms}))
        self._reader: KafkaConsumer | None = None
        self._partitions: list[int] = []
        self._latest: dict[str, bytes | _Manifest | _Broken] = {}
        # key -> (partition, timestamp ms) of the record behind _latest[key]
        self._origin: dict[str, tuple[int, int]] = {}
        self._chunks: dict[str, bytes] = {}

    # ------------------------------------------------------------------ writing

    def _partition_for(self, key: str) -> int:
        if not self._partitions:
            if self._owns_producer:
                # kafka-python waits max_block_ms (60 s) for a topic's metadata; a write waits
                # at most ``timeout`` (shortened at shutdown: a final checkpoint while the
                # brokers are unreachable must not hold SIGTERM for a minute)
                self._producer.config["max_block_ms"] = int(self.timeout * 1000)
            parts = self._producer.partitions_for(self.topic)
            if not parts:
                raise CheckpointError(f"checkpoint topic {self.topic!r} has no partitions")
            self._partitions = sorted(parts)
        return self._partitions[zlib.crc32(key.encode()) % len(self._partitions)]

    def _send(self, key: str, value: bytes | None, kind: str) -> Any:
        # chunks and part documents ("KEY#part#...") go to their checkpoint's partition
        return self._producer.send(
            self.topic,
            key=key.encode(),
            value=value,
            headers=[(HEADER, kind.encode())],
            partition=self._partition_for(_owner(key)),
        )

    def save(self, key: str, data: bytes) -> None:
        """Write ``data`` under ``key`` durably (chunked when large).

        Raises
        ------
        CheckpointTooLargeError
            ``len(data)`` exceeds ``checkpoint_max_bytes``.
        CheckpointError
            The write was not acknowledged within the timeout.
        """
        self.save_many([(key, data)])

    def save_many(self, items: list[tuple[str, bytes]]) -> None:
        """Write every ``(key, data)`` durably, waiting for the acknowledgements once.

        Raises
        ------
        CheckpointTooLargeError
            A value exceeds ``checkpoint_max_bytes`` (then nothing is written).
        CheckpointError
            A write was not acknowledged within the timeout.
        """
        for key, data in items:
            if _CHUNK_SEP in key:
                raise CheckpointError(f"checkpoint key must not contain {_CHUNK_SEP!r}: {key!r}")
            if len(data) > self.max_bytes:
                raise CheckpointTooLargeError(
                    f"checkpoint {key!r} is {len(data)} bytes, above kafka.checkpoint_max_bytes="
                    f"{self.max_bytes}; raise kafka.checkpoint_max_bytes or use "
                    'kafka.checkpoint_store = "local"'
                )
        from kafka.errors import KafkaError

        done: dict[str, bytes | _Manifest] = {}
        new_chunks: dict[str, bytes] = {}
        try:
            heads = []  # (key, value, kind): sent once every chunk is acknowledged
            chunk_futures = []
            for key, data in items:
                if len(data) <= self.chunk_bytes:
                    heads.append((key, data, "whole"))
                    done[key] = data
                    continue
                save_id = uuid.uuid4().hex[:12]
                pieces = split_chunks(data, self.chunk_bytes)
                for i, piece in enumerate(pieces):
                    ck = chunk_key(key, save_id, i)
                    chunk_futures.append(self._send(ck, piece, "chunk"))
                    new_chunks[ck] = piece
                manifest = _Manifest(
                    save_id, len(pieces), len(data), hashlib.sha256(data).hexdigest()
                )
                heads.append((key, json.dumps(manifest.__dict__, sort_keys=True).encode(),
                              "manifest"))
                done[key] = manifest
            if chunk_futures:
                self._producer.flush(timeout=self.timeout)
                for f in chunk_futures:
                    f.get(timeout=self.timeout)
            futures = [self._send(key, value, kind) for key, value, kind in heads]
            self._producer.flush(timeout=self.timeout)
            for f in futures:
                f.get(timeout=self.timeout)
        except KafkaError as exc:
            raise CheckpointError(f"checkpoint write to {self.topic!r} failed: {exc!r}") from exc
        now = int(time.time() * 1000)
        stale = [ck for ck in self._chunks
                 if ck.split(_CHUNK_SEP, 1)[0] in done and ck not in new_chunks]
        self._chunks.update(new_chunks)
        for key, entry in done.items():
            self._latest[key] = entry
            self._origin[key] = (self._partition_for(_owner(key)), now)
        for ck in stale:  # chunks of older saves: tombstones (best effort)
            self._chunks.pop(ck, None)
            self._send(ck, None, "chunk")

    # ------------------------------------------------------------------ reading

    def _ensure_reader(self) -> KafkaConsumer:
        if self._reader is not None:
            return self._reader
        from kafka import KafkaConsumer, TopicPartition

        reader = KafkaConsumer(
            **self.config.client_kwargs(),
            client_id=f"{self.config.client_id}-checkpoints",
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_bytes=max(52_428_800, 2 * self.chunk_bytes),
            max_partition_fetch_bytes=max(1_048_576, 2 * self.chunk_bytes),
        )
        parts = reader.partitions_for_topic(self.topic)
        if not parts:
            reader.close()
            raise CheckpointError(f"checkpoint topic {self.topic!r} does not exist")
        tps = [TopicPartition(self.topic, p) for p in sorted(parts)]
        reader.assign(tps)
        reader.seek_to_beginning(*tps)
        self._reader = reader
        return reader

    def _apply(
        self, key: str, value: bytes | None, kind: str, partition: int = 0, timestamp: int = 0
    ) -> None:
        if kind == "chunk":
            if value is None:
                self._chunks.pop(key, None)
            else:
                self._chunks[key] = value
            return
        origin = self._origin.get(key)
        if origin is not None and origin[0] != partition and timestamp < origin[1]:
            # written before partitions were added to the topic: stale
            log.warning("older checkpoint record in another partition ignored",
                        extra={"key": key, "partition": partition})
            return
        self._origin[key] = (partition, timestamp)
        if value is None:
            self._latest.pop(key, None)
        elif kind == "manifest":
            self._latest[key] = _manifest(key, value, partition)
        else:
            self._latest[key] = value

    def _catch_up(self) -> None:
        from kafka.errors import KafkaError

        reader = self._ensure_reader()
        deadline = time.monotonic() + self.timeout

        def left_ms() -> int:  # every broker wait is bounded: kafka-python's default is none
            return max(1, int((deadline - time.monotonic()) * 1000))

        try:
            tps = list(reader.assignment())
            end = reader.end_offsets(tps, timeout_ms=left_ms())
            while True:
                positions = [reader.position(tp, timeout_ms=min(left_ms(), 5000)) for tp in tps]
                if all(at is not None and at >= end[tp]
                       for at, tp in zip(positions, tps, strict=True)):
                    break
                if time.monotonic() > deadline:
                    raise CheckpointError(f"timed out reading checkpoint topic {self.topic!r}")
                for records in reader.poll(timeout_ms=500).values():
                    for rec in records:
                        self._read(rec)
        except KafkaError as exc:
            raise CheckpointError(
                f"reading checkpoint topic {self.topic!r} failed: {exc!r}"
            ) from exc

    def _read(self, rec: Any) -> None:
        """Apply one record of the topic; a record without a readable key is skipped."""
        try:
            key = rec.key.decode()
            kind = dict(rec.headers or []).get(HEADER, b"whole").decode()
        except (AttributeError, UnicodeDecodeError):  # not ours: no key, or not UTF-8
            log.warning("checkpoint topic record without a readable key or header ignored",
                        extra={"partition": rec.partition, "offset": rec.offset})
            return
        self._apply(key, rec.value, kind, rec.partition, rec.timestamp)

    def load(self, key: str) -> bytes | None:
        """Return the latest complete checkpoint stored under ``key``, or ``None``.

        Raises
        ------
        CheckpointError
            The topic cannot be read, or a manifest's chunks are missing or corrupt.
        """
        self._catch_up()
        return self._assemble(key)

    def load_many(self, keys: list[str]) -> list[bytes | None]:
        """:meth:`load` every key, reading the topic to its end once."""
        self._catch_up()
        return [self._assemble(key) for key in keys]

    def _assemble(self, key: str) -> bytes | None:
        entry = self._latest.get(key)
        if entry is None or isinstance(entry, bytes):
            return entry
        if isinstance(entry, _Broken):
            raise CheckpointError(entry.reason)
        pieces = []
        for i in range(entry.chunks):
            piece = self._chunks.get(chunk_key(key, entry.save_id, i))
            if piece is None:
                raise CheckpointError(f"checkpoint {key!r}: chunk {i}/{entry.chunks} is missing")
            pieces.append(piece)
        data = b"".join(pieces)
        if len(data) != entry.size or hashlib.sha256(data).hexdigest() != entry.sha256:
            raise CheckpointError(f"checkpoint {key!r}: chunks do not match their manifest")
        return data

    def keys(self) -> list[str]:
        """Return every key with a stored checkpoint (after reading to the end)."""
        self._catch_up()
        return sorted(self._latest)

    def close(self, timeout: float = 10.0) -> None:
        """Close the reader and, if owned, the producer (waiting at most ``timeout`` s)."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._owns_producer:
            self._producer.close(timeout=timeout)
