"""The clients and outputs a Kafka runner opens from the configuration.

- :func:`make_consumer`: the consumer-group member (manual commits, range assignor so the
  judge/label topics stay co-partitioned with the events topic);
- :func:`open_sinks`: the alerts, requests and dead-letters sinks (Kafka topics through one
  shared producer, or files);
- :func:`open_store`: the checkpoint store (``[kafka] checkpoint_store``: a compacted topic or
  a local directory), secured by the checkpoint key when one is configured.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from consumers.alertmanager.wiring import open_alert_sink
from monitor.checkpoint import CheckpointStore, LocalDirectoryStore, secured_store
from monitor.errors import ConfigError
from monitor.sinks import Sink, open_sink, resolve_requests_spec, warn_if_discarded

if TYPE_CHECKING:
    from collections.abc import Callable

    from kafka import KafkaConsumer

    from consumers.kafka.sinks import KafkaOutputs
    from monitor.config import CertmonConfig
    from monitor.config.kafka import KafkaConfig

__all__ = ["engine_read_kwargs", "ignored_settings", "kafka_outputs_wanted", "make_consumer",
           "open_sinks", "open_store"]


def ignored_settings(config: CertmonConfig) -> list[str]:
    """Return the ``[checkpoint]`` settings set that a Kafka source does not use.

    The Kafka source checkpoints per partition with ``[kafka] checkpoint_every_records`` /
    ``checkpoint_every_seconds``, to ``[kafka] checkpoint_store`` (a compacted topic by
    default, or ``[checkpoint] dir`` with ``checkpoint_store = "local"``); the runner logs
    one warning naming each setting given here, since it does nothing.

    Examples
    --------
    >>> from monitor.config import parse_config
    >>> toml = ["[[suites]]", "[[suites.certificates]]", "name='r'", "alpha=0.1", "delta=0.1",
    ...         "[source]", "kind='kafka'", "[checkpoint]", "dir='/var/lib/c'", "every_seconds=5"]
    >>> [s.split(" ")[0] for s in ignored_settings(parse_config(chr(10).join(toml)))]
    ['checkpoint.dir', 'checkpoint.every_seconds']
    """
    from monitor.config.kafka import kafka_config_of

    given = config.checkpoint.model_fields_set
    out = []
    if "dir" in given and kafka_config_of(config).checkpoint_store == "kafka":
        out.append('checkpoint.dir (kafka.checkpoint_store = "kafka")')
    for name, why in (("every_events", "use kafka.checkpoint_every_records"),
                      ("every_seconds", "use kafka.checkpoint_every_seconds"),
                      ("key", "checkpoints are keyed by input partition")):
        if name in given:
            out.append(f"checkpoint.{name} ({why})")
    return out


def kafka_outputs_wanted(config: CertmonConfig) -> bool:
    """Whether any output sink is ``"kafka"`` (then one shared producer is opened).

    Examples
    --------
    >>> from monitor.config import parse_config
    >>> toml = ["[[suites]]", "[[suites.certificates]]", "name='r'", "alpha=0.1", "delta=0.1"]
    >>> kafka_outputs_wanted(parse_config(chr(10).join([*toml, "[sinks]", "requests='none'"])))
    False
    >>> kafka_outputs_wanted(parse_config(chr(10).join(toml)))  # requests "auto": the topic
    True
    >>> kafka_outputs_wanted(parse_config(chr(10).join([*toml, "[sinks]", "alerts='kafka'"])))
    True
    """
    specs = (resolve_requests_spec(config.sinks.requests, kafka=True), config.sinks.dead_letters)
    return "kafka" in specs or "kafka" in config.sinks.alert_specs


def open_sinks(config: CertmonConfig, outputs: KafkaOutputs | None) -> dict[str, Sink]:
    """Open the ``alerts``, ``requests`` and ``dead_letters`` sinks (files are appended to)."""
    sinks: dict[str, Sink] = {"alerts": open_alert_sink(
        config.sinks, append=True,
        kafka=None if outputs is None else (lambda: outputs.sink_for("alerts")),
    )}  # fmt: skip
    requests = resolve_requests_spec(config.sinks.requests, kafka=True)  # "auto": the topic
    warn_if_discarded(requests)
    for name, spec in (("requests", requests), ("dead_letters", config.sinks.dead_letters)):
        sinks[name] = (outputs.sink_for(name) if spec == "kafka" and outputs is not None
                       else open_sink(spec, append=True))  # fmt: skip
    return sinks


def open_store(config: CertmonConfig, kafka: KafkaConfig,
               bootstrap_timeout_ms: int | None = None) -> CheckpointStore:  # fmt: skip
    """Open the checkpoint store chosen by ``[kafka] checkpoint_store``.

    ``bootstrap_timeout_ms`` overrides ``[kafka] bootstrap_timeout_ms`` for the producer of
    a Kafka topic store.

    Raises
    ------
    ConfigError
        ``checkpoint_store = "local"`` without ``[checkpoint] dir``.
    """
    if kafka.checkpoint_store == "kafka":
        from consumers.kafka.checkpoints import KafkaTopicStore

        return secured_store(KafkaTopicStore(kafka, bootstrap_timeout_ms=bootstrap_timeout_ms),
                             os.environ)
    if not config.checkpoint.dir:
        raise ConfigError("kafka.checkpoint_store = 'local' needs checkpoint.dir")
    return secured_store(LocalDirectoryStore(config.checkpoint.dir), os.environ)


def engine_read_kwargs(kafka: KafkaConfig) -> dict[str, object]:
    """Consumer settings of whatever reads the engines' topics (group member, fetch child).

    With ``[kafka] repartition`` (the default) only committed transactions are read, so a record the
    repartition stage wrote in an aborted transaction is never counted.

    Examples
    --------
    >>> from monitor.config.kafka import KafkaConfig
    >>> engine_read_kwargs(KafkaConfig()), engine_read_kwargs(KafkaConfig(repartition=False))
    ({'isolation_level': 'read_committed'}, {})
    """
    return {"isolation_level": "read_committed"} if kafka.repartition else {}


def make_consumer(kafka: KafkaConfig, on_assigned: Callable[[Any], None],
                  on_revoked: Callable[[Any], None],
                  on_lost: Callable[[Any], None],
                  bootstrap_timeout_ms: int | None = None) -> KafkaConsumer:  # fmt: skip
    """Create the group member and subscribe it to the input topics.

    The callbacks get the topic-partitions assigned, revoked (before a rebalance) and lost
    (evicted from the group). Offsets are never committed automatically: the runner commits
    them after each durable checkpoint.

    Raises
    ------
    kafka.errors.KafkaTimeoutError
        No bootstrap server answers within ``bootstrap_timeout_ms`` (the argument when given,
        else ``[kafka] bootstrap_timeout_ms``).
    """
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            on_revoked(revoked)

        def on_partitions_assigned(self, assigned: Any) -> None:
            on_assigned(assigned)

        def on_partitions_lost(self, lost: Any) -> None:
            on_lost(lost)

    consumer = KafkaConsumer(
        **kafka.client_kwargs(bootstrap_timeout_ms),
        client_id=f"{kafka.client_id}-consumer",
        group_id=kafka.group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        partition_assignment_strategy=[RangePartitionAssignor],
        max_poll_records=kafka.batch_size,
        session_timeout_ms=kafka.session_timeout_ms,
        heartbeat_interval_ms=kafka.heartbeat_interval_ms,
        max_poll_interval_ms=kafka.max_poll_interval_ms,
        **engine_read_kwargs(kafka),
    )
    consumer.subscribe(topics=kafka.engine_topics(), listener=_Listener())
    return consumer
