"""Create certmon's Kafka topics when they are missing (idempotent).

The checkpoint topic is compacted (``cleanup.policy=compact``) so the latest checkpoint of
every partition is kept forever while older ones are cleaned up.

``python -m consumers.kafka.topics [--config certmon.toml] [--bootstrap-servers HOST:PORT]
[--events-partitions N] [--replication-factor N]`` creates them from the command line with
what certmon installs (kafka-python), no Kafka distribution needed
(``deploy/kafka/create-topics.sh`` falls back to it).
"""

from __future__ import annotations

import contextlib
import logging

from monitor.config.kafka import KafkaConfig

log = logging.getLogger("certmon.kafka")

__all__ = ["ensure_topics", "main", "topic_specs"]

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
    if config.repartition:
        specs[t.repartition] = (config.events_partitions, {})
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


def main(argv: list[str] | None = None) -> int:
    """Create the topics of ``--config``'s ``[kafka]`` section (or of the defaults).

    Returns the exit status: 0 (created or already there), 2 (bad configuration or no
    broker; one line on stderr).
    """
    import argparse
    import sys

    from monitor.config import load_config
    from monitor.config.kafka import kafka_config_of
    from monitor.errors import CertmonError

    ap = argparse.ArgumentParser(prog="python -m consumers.kafka.topics",
                                 description="create certmon's Kafka topics (idempotent)")
    ap.add_argument("--config", help="certmon.toml whose [kafka] section names the topics")
    ap.add_argument("--bootstrap-servers", help="overrides [kafka] bootstrap_servers")
    ap.add_argument("--events-partitions", type=int, help="overrides [kafka] events_partitions")
    ap.add_argument("--replication-factor", type=int, default=1)
    args = ap.parse_args(argv)
    try:
        config = kafka_config_of(load_config(args.config)) if args.config else KafkaConfig()
        updates = {k: v for k, v in (("bootstrap_servers", args.bootstrap_servers),
                                     ("events_partitions", args.events_partitions))
                   if v is not None}
        config = KafkaConfig.model_validate({**config.model_dump(), **updates})
        created = ensure_topics(config, replication_factor=args.replication_factor)
    except (CertmonError, ValueError) as exc:
        print(f"certmon: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # kafka-python: no broker, authorization, ...
        print(f"certmon: error: cannot create topics at {config.bootstrap_servers}: {exc!r}",
              file=sys.stderr)
        return 2
    for name, (parts, cfg) in topic_specs(config).items():
        if name not in created:
            print(f"{name}\texists (left as it is)")
            continue
        extra = "".join(f"\t{k}={v}" for k, v in cfg.items())
        print(f"{name}\tcreated\tpartitions={parts}{extra}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
