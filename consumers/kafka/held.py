"""Input partitions held because their checkpoint cannot be restored; the others run.

A partition whose checkpoint is refused (a forgery, an unsigned document when a key is set,
a state for another configuration) or cannot be read (an unreadable record under its key on
the checkpoint topic, a timeout) is *held*: none of its records are read or processed, its
Kafka offsets do not move, and it is reported by one log line with the reason, the gauge
``certmon_kafka_partitions_held{partition}`` and the ``CertmonPartitionHeld`` alert. The other
partitions of the assignment are restored and processed as usual. A held partition is retried
every :attr:`HeldPartitions.RETRY_S` seconds and on every new assignment, so a transient cause
(the checkpoint topic was unreachable) clears by itself and a fixed checkpoint is picked up
without a restart.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from consumers.kafka.metrics import KafkaMetrics

log = logging.getLogger("certmon.kafka")

__all__ = ["HeldPartitions", "held_reason"]


def held_reason(exc: BaseException) -> str:
    r"""Return one line naming why a partition's checkpoint could not be restored.

    Examples
    --------
    >>> from monitor.errors import CheckpointError
    >>> held_reason(CheckpointError("checkpoint refused: alpha differs"))
    'CheckpointError: checkpoint refused: alpha differs'
    >>> held_reason(ValueError("two\nlines"))
    'ValueError: two lines'
    """
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:500]


@dataclass
class _Held:
    tps: list[Any]
    reason: str
    retry_at: float


class HeldPartitions:
    """The held input partitions of this process, with their reasons.

    Parameters
    ----------
    metrics : KafkaMetrics
        Where ``certmon_kafka_partitions_held`` is set.

    Examples
    --------
    >>> from prometheus_client import CollectorRegistry
    >>> from consumers.kafka.metrics import KafkaMetrics
    >>> registry = CollectorRegistry()
    >>> held = HeldPartitions(KafkaMetrics(registry))
    >>> held.hold(3, ["tp"], ValueError("bad manifest"))
    >>> held.reasons(), registry.get_sample_value("certmon_kafka_partitions_held",
    ...                                            {"partition": "3"})
    ({3: 'ValueError: bad manifest'}, 1.0)
    >>> held.due(now=0.0), len(held.due(now=time.monotonic() + HeldPartitions.RETRY_S))
    ([], 1)
    >>> held.release(3), held.reasons()
    (True, {})

    Notes
    -----
    Guarantee: a held partition's engine is never built, so nothing of it is processed,
    checkpointed or committed; its next owner restores the same checkpoint again.
    """

    RETRY_S = 30.0  # seconds between restore attempts of a held partition

    def __init__(self, metrics: KafkaMetrics) -> None:
        self._metrics = metrics
        self._held: dict[int, _Held] = {}

    def hold(self, partition: int, tps: list[Any], exc: BaseException) -> None:
        """Hold ``partition`` (its topic-partitions ``tps``) because restoring it raised ``exc``.

        Logs one warning line when the partition becomes held or its reason changes.
        """
        reason = held_reason(exc)
        old = self._held.get(partition)
        self._held[partition] = _Held(list(tps), reason, time.monotonic() + self.RETRY_S)
        self._metrics.held(partition, True)
        if old is None or old.reason != reason:
            log.warning("partition held: its checkpoint cannot be restored; the other "
                        "partitions run", extra={"partition": partition, "reason": reason})

    def release(self, partition: int) -> bool:
        """Stop holding ``partition`` (restored, or no longer assigned); return if it was held."""
        if self._held.pop(partition, None) is None:
            return False
        self._metrics.held(partition, False)
        return True

    def reasons(self) -> dict[int, str]:
        """Each held partition's reason."""
        return {p: h.reason for p, h in sorted(self._held.items())}

    def due(self, now: float | None = None) -> list[tuple[int, list[Any]]]:
        """Held partitions whose next restore attempt is due, with their topic-partitions."""
        t = time.monotonic() if now is None else now
        return [(p, list(h.tps)) for p, h in sorted(self._held.items()) if h.retry_at <= t]
