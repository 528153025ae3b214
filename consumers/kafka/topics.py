"""Create certmon's Kafka topics when they are missing (idempotent).

The checkpoint topic is compacted (``cleanup.policy=compact``) so the latest checkpoint of
every partition is kept forever while older ones are cleaned up.
"""

from __future__ import annotations

import contextlib
import logging

from monitor.config.kafka import KafkaConfig

log = logging.getLogger("certmon.kafka")

__all__ = ["ensure_topics", "topic_specs"]

COMPACTED = {
    "cleanup.policy": "compact",
    "min.cleanable.dirty.ratio": "0.1",
    "segment.ms": "600000",
}


def topic_specs(config: KafkaConfig) -> dict[str, tuple[int, dict[str, str]]]:
    """Return ``{topic: (partitions, topic_configs)}`` for every certmon topic.

    Examples
    --------
    >>> specs = topic_specs(KafkaConfig(events_partitions=3))
    >>> specs["certmon.eval-events.v1"][0], specs["certmon.checkpoints.v1"][1]["cleanup.policy"]
    (3, 'compact')
    """
    t = config.topics
    specs: dict[str, tuple[int, dict[str, str]]] = {}
    for name in t.input_topics():
        specs[name] = (config.events_partitions, {})
    for name in (t.alerts, t.requests, t.dead_letters):
        specs.setdefault(name, (1, {}))
    specs[t.checkpoints] = (config.checkpoint_topic_partitions, dict(COMPACTED))
    return specs


def ensure_topics(config: KafkaConfig, *, replication_factor: int = 1,
                  bootstrap_timeout_ms: int | None = None) -> list[str]:  # fmt: skip
    """Create every missing certmon topic; return the names created.

    Existing topics are left alone (their partition counts are not changed).
    ``bootstrap_timeout_ms`` overrides ``[kafka] bootstrap_timeout_ms`` for the admin client.
    """
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(**config.client_kwargs(bootstrap_timeout_ms),
                             client_id=f"{config.client_id}-admin")
    try:
        existing = set(admin.list_topics())
        new = [
            NewTopic(name, parts, replication_factor, topic_configs=cfg)
            for name, (parts, cfg) in topic_specs(config).items()
            if name not in existing
        ]
        if not new:
            return []
        with contextlib.suppress(TopicAlreadyExistsError):  # another instance won the race
            admin.create_topics(new)
        names = [n.name for n in new]
        log.info("created topics", extra={"topics": names})
        return names
    finally:
        admin.close()
