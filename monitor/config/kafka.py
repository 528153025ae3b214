"""The ``[kafka]`` configuration section (pydantic; no Kafka client import).

The main configuration (:mod:`monitor.config`) holds it as ``kafka: KafkaConfig | None``.
Secrets (SASL password, SSL key password) are :class:`pydantic.SecretStr`: they print as
``**********`` in ``repr``, ``str`` and :meth:`KafkaConfig.redacted`, and only
:meth:`KafkaConfig.client_kwargs` reveals them, to hand to the Kafka client. Each can
instead come from a file (``sasl_plain_password_file``, ``ssl_password_file``: the
recommended form, e.g. a mounted secret) or from an environment variable
(``CERTMON_KAFKA_SASL_PASSWORD``, ``CERTMON_KAFKA_SSL_PASSWORD``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from monitor.errors import ConfigError

_TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]{1,249}$")

SECRET_ENV: Final = {
    "sasl_plain_password": "CERTMON_KAFKA_SASL_PASSWORD",
    "ssl_password": "CERTMON_KAFKA_SSL_PASSWORD",
}
"""Each secret setting and the environment variable it is read from when not set."""

DEAD_LETTER_MAX_RAW_BYTES: Final = 64 * 1024
"""Default bytes of a rejected record kept in its dead letter."""


class KafkaTopics(BaseModel):
    """Topic names (dots between parts, hyphens inside; letters, digits, ``.``, ``_``, ``-``).

    Examples
    --------
    >>> KafkaTopics().events
    'certmon.eval-events.v1'
    >>> KafkaTopics(judge="certmon.judge-scores.v1").input_topics()
    ['certmon.eval-events.v1', 'certmon.judge-scores.v1']
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    events: str = Field(
        "certmon.eval-events.v1",
        description="Input topic of judge and label events: any key or none with [kafka] "
        "repartition (the default); keyed by suite with one partitioner with repartition = "
        "false (a suite read from a second partition is fenced off it).")
    judge: str | None = Field(
        None,
        description="Optional second input topic of judge events, co-partitioned with `events`. "
        "Unset: none.")
    labels: str | None = Field(
        None,
        description="Optional input topic of label events, co-partitioned with `events`. "
        "Unset: none.")
    alerts: str = Field(
        "certmon.alerts.v1", description="Output topic of alerts (`sinks.alerts = \"kafka\"`).")
    requests: str = Field(
        "certmon.requests.v1",
        description="Output topic of label and evaluation requests (`sinks.requests = "
        "\"kafka\"`).")
    dead_letters: str = Field(
        "certmon.dead-letters.v1",
        description="Output topic of rejected records (`sinks.dead_letters = \"kafka\"`).")
    checkpoints: str = Field(
        "certmon.checkpoints.v1",
        description="Compacted topic of the checkpoints (`checkpoint_store = \"kafka\"`).")
    repartition: str = Field(
        default="certmon.eval-events-by-suite.v1",
        description="Internal topic of [kafka] repartition (on by default): every input record "
                    "re-keyed by suite, on the partition certmon's own partitioner gives the "
                    "suite (events_partitions partitions, created with the other topics).")

    @field_validator("*")
    @classmethod
    def _valid_topic(cls, value: str | None) -> str | None:
        if value is not None and not _TOPIC_RE.match(value):
            raise ValueError(f"invalid Kafka topic name {value!r}")
        return value

    def input_topics(self) -> list[str]:
        """Return the topics the consumer reads (events, then judge and labels if set)."""
        return [t for t in (self.events, self.judge, self.labels) if t is not None]


class KafkaConfig(BaseModel):
    """Connection, consumer-group, checkpoint and security settings for Kafka.

    Examples
    --------
    >>> cfg = KafkaConfig(bootstrap_servers="127.0.0.1:9092", sasl_plain_password="s3cret")
    >>> cfg.group_id, cfg.checkpoint_store
    ('certmon', 'kafka')
    >>> "s3cret" in repr(cfg) or "s3cret" in str(cfg.redacted())
    False
    >>> cfg.client_kwargs()["sasl_plain_password"]
    's3cret'
    >>> KafkaConfig(bootstrap_servers=["a:1", "b:2"]).bootstrap_list()
    ['a:1', 'b:2']
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    bootstrap_servers: str | list[str] = Field(
        "127.0.0.1:9092",
        description="Brokers to bootstrap from: `\"host:port,host:port\"` or a list of "
        "`host:port`.")
    group_id: str = Field(
        "certmon",
        description="Consumer group: the instances of one group share the input partitions.")
    client_id: str = Field(
        "certmon", description="Client id reported to the brokers (logs and quotas).")
    topics: KafkaTopics = Field(
        default_factory=KafkaTopics, description="Topic names (`[kafka.topics]`).")

    checkpoint_store: Literal["local", "kafka"] = Field(
        "kafka",
        description="Where each partition's checkpoint goes: `kafka` (the compacted "
        "`topics.checkpoints` topic) or `local` (the `[checkpoint] dir` directory).")
    # A checkpoint costs ~0.1-0.5 s per few MB of engine state (snapshot + JSON + acks=all):
    # 100k records per partition keeps that below ~10% and bounds the replay after a crash.
    checkpoint_every_records: int = Field(
        default=100_000, gt=0,
        description="Checkpoint a partition after this many records (> 0). Larger: less "
        "checkpoint work, more records to re-read after a crash.")
    checkpoint_every_seconds: float = Field(
        default=30.0, gt=0,
        description="Checkpoint each partition at least this often, in seconds (> 0).")
    checkpoint_chunk_bytes: int = Field(
        default=512 * 1024, ge=1024, le=8 * 1024 * 1024,
        description="A checkpoint (one document per suite plus a manifest) is written as "
        "records of at most this many bytes (1 KiB to 8 MiB).")
    checkpoint_max_bytes: int = Field(
        default=256 * 1024 * 1024, gt=0,
        description="Largest checkpoint document of ONE suite, in bytes: a larger one is "
        "refused with an error naming the suite and its size (the partition as a whole has "
        "no cap).")
    checkpoint_topic_partitions: int = Field(
        default=1, gt=0,
        description="Partitions of the checkpoint topic when certmon creates it (> 0).")

    dead_letter_max_raw_bytes: int = Field(
        default=DEAD_LETTER_MAX_RAW_BYTES, ge=0, le=512 * 1024,
        description="Bytes of the rejected record kept in a dead letter (plus its length and "
        "sha256), so a dead letter always fits the producer's 1 MiB request size (0 to "
        "512 KiB).")
    max_record_attempts: int = Field(
        default=3, ge=1, le=100,
        description="A record whose processing raises (a bug, not bad input: that is rejected "
        "with a reason) is retried from the partition's checkpoint at most this many times, "
        "then dead-lettered as `processing_failed` so the partition moves on (1 to 100).")
    startup_timeout_seconds: float = Field(
        default=60.0, gt=0,
        description="At first start, give up (one-line error, non-zero exit) if no broker "
        "answers within this many seconds.")
    shutdown_timeout_seconds: float = Field(
        default=4.0, gt=0, le=60,
        description="On SIGTERM the final flush, checkpoint, offset commit, closes and the "
        "process's exit share this many seconds, counted from the signal (at most 60; "
        "Kubernetes' default grace period is 30 s); what the broker cannot take in time is "
        "left to the next owner, which restores the previous checkpoint.")

    batch_size: int = Field(
        default=2000, gt=0,
        description="Records fetched per poll at most (the consumer's `max_poll_records`).")
    fetch_process: bool = Field(
        True,
        description="Decode records in a child process, pipelined with processing. False: "
        "one process does both.")
    poll_timeout_ms: int = Field(
        default=500, gt=0,
        description="Milliseconds one poll waits for records when none are buffered (> 0).")
    session_timeout_ms: int = Field(
        default=10_000, ge=1000,
        description="Group session timeout (ms): a member silent for longer is evicted and "
        "its partitions reassigned.")
    heartbeat_interval_ms: int = Field(
        default=3000, ge=100,
        description="Milliseconds between heartbeats to the group coordinator; below "
        "`session_timeout_ms`.")
    max_poll_interval_ms: int = Field(
        default=300_000, ge=1000,
        description="Longest time (ms) between two polls before the member is considered "
        "stuck and leaves the group.")
    request_timeout_ms: int = Field(
        default=30_000, ge=1000,
        description="Milliseconds a client waits for a broker's answer to one request.")
    bootstrap_timeout_ms: int = Field(
        default=30_000, ge=500,
        description="Milliseconds a client waits to reach the bootstrap servers.")
    delivery_timeout_ms: int = Field(
        default=120_000, ge=1000,
        description="Milliseconds the producer keeps trying to deliver one output record.")
    retry_backoff_max_seconds: float = Field(
        default=30.0, gt=0,
        description="Longest wait, in seconds, between two reconnection attempts after the "
        "consumer loop fails (the wait doubles from 0.5 s up to this).")
    health_check_seconds: float = Field(
        default=5.0, gt=0, le=10,
        description="Seconds between active broker checks (a bounded ListOffsets request on "
                    "the events topic, also bounded by this many seconds); one failed check "
                    "sets certmon_up and certmon_kafka_connected to 0 and /readyz to 503 "
                    "until a check succeeds, so an outage shows within twice this time.")
    progress_log_seconds: float = Field(
        default=60.0, ge=0,
        description="Seconds between progress log lines (records processed, partitions "
                    "owned and held, lag, broker reachability); 0 turns them off.")
    create_topics: bool = Field(
        True,
        description="Create the missing certmon topics at start (existing topics are left "
        "alone).")
    repartition: bool = Field(
        default=True,
        description="Regroup the input by suite before the engines (the default), as Kafka "
                    "Streams' repartition topics do: a stage reads the input topics (any "
                    "producer, any partitioner, keyed or not) and writes every record, in "
                    "Kafka transactions, to topics.repartition on the partition of its suite; "
                    "the engines read that topic (read_committed) and their checkpoints are "
                    "keyed by it. false: the direct path, cheaper, but the input must be keyed "
                    "by suite with one partitioner (a suite on two partitions is fenced and "
                    "dead-lettered). Changing it moves the checkpoints to other keys: the "
                    "state restarts from the input's retained records.")
    events_partitions: int = Field(
        default=6, gt=0,
        description="Partitions of the input topics when certmon creates them (> 0); the "
        "most instances of a group that can share the work.")

    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="Protocol to the brokers.")
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"] | None = (
        Field(None, description="SASL mechanism; required with the `SASL_*` protocols."))
    sasl_plain_username: str | None = Field(None, description="SASL user name.")
    sasl_plain_password: SecretStr | None = Field(
        None,
        description="SASL password (secret: never printed). Prefer `sasl_plain_password_file` "
        "or the `CERTMON_KAFKA_SASL_PASSWORD` environment variable.")
    ssl_cafile: str | None = Field(
        None, description="CA certificate file (PEM) to verify the brokers.")
    ssl_certfile: str | None = Field(
        None, description="Client certificate file (PEM) for mutual TLS.")
    ssl_keyfile: str | None = Field(
        None, description="Private key file (PEM) of `ssl_certfile`.")
    ssl_password: SecretStr | None = Field(
        None,
        description="Password of `ssl_keyfile` (secret: never printed). Prefer "
        "`ssl_password_file` or the `CERTMON_KAFKA_SSL_PASSWORD` environment variable.")
    ssl_check_hostname: bool = Field(
        True, description="Check that the broker's certificate matches its host name.")
    sasl_plain_password_file: str | None = Field(
        None, description="File holding the SASL password (not with `sasl_plain_password`).")
    ssl_password_file: str | None = Field(
        None, description="File holding the key password (not with `ssl_password`).")

    @model_validator(mode="before")
    @classmethod
    def _secrets_from_files_or_env(cls, data: Any) -> Any:
        """Fill each password from its ``*_file`` or environment variable (never echoed)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for name, env in SECRET_ENV.items():
            path = data.get(f"{name}_file")
            given = [k for k in (name, f"{name}_file") if data.get(k) is not None]
            if len(given) > 1:
                raise ValueError(f"kafka.{name}: set it or kafka.{name}_file, not both")
            if path is not None:
                try:
                    data[name] = Path(str(path)).read_text(encoding="utf-8").strip()
                except OSError as exc:
                    raise ValueError(f"kafka.{name}_file: unreadable ({exc.strerror})") from None
            elif data.get(name) is None and os.environ.get(env):
                data[name] = os.environ[env]
        return data

    @model_validator(mode="after")
    def _check(self) -> KafkaConfig:
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("kafka.heartbeat_interval_ms must be below kafka.session_timeout_ms")
        if self.sasl_mechanism is None and self.security_protocol.startswith("SASL"):
            raise ValueError(f"kafka.sasl_mechanism is required with {self.security_protocol}")
        return self

    def engine_topics(self) -> list[str]:
        """Return the topics the engines' consumer group reads.

        Examples
        --------
        >>> KafkaConfig().engine_topics(), KafkaConfig(repartition=False).engine_topics()
        (['certmon.eval-events-by-suite.v1'], ['certmon.eval-events.v1'])
        """
        return [self.topics.repartition] if self.repartition else self.topics.input_topics()

    def bootstrap_list(self) -> list[str]:
        """Return the bootstrap servers as a list of ``host:port`` strings."""
        if isinstance(self.bootstrap_servers, str):
            return [s.strip() for s in self.bootstrap_servers.split(",") if s.strip()]
        return list(self.bootstrap_servers)

    def client_kwargs(self, bootstrap_timeout_ms: int | None = None) -> dict[str, object]:
        """Return keyword arguments common to kafka-python clients (secrets revealed).

        ``bootstrap_timeout_ms`` overrides the configured one (a first start passes what is
        left of ``startup_timeout_seconds``). Never log the result; log :meth:`redacted`.

        Examples
        --------
        >>> cfg = KafkaConfig(bootstrap_servers="k:9092")
        >>> short = cfg.client_kwargs(700)
        >>> cfg.client_kwargs()["bootstrap_timeout_ms"], short["bootstrap_timeout_ms"]
        (30000, 700)
        """
        kw: dict[str, object] = {
            "bootstrap_servers": self.bootstrap_list(),
            "security_protocol": self.security_protocol,
            "request_timeout_ms": self.request_timeout_ms,
            "bootstrap_timeout_ms": (self.bootstrap_timeout_ms if bootstrap_timeout_ms is None
                                     else bootstrap_timeout_ms),
            "reconnect_backoff_max_ms": int(self.retry_backoff_max_seconds * 1000),
        }
        if self.sasl_mechanism is not None:
            kw["sasl_mechanism"] = self.sasl_mechanism
        if self.sasl_plain_username is not None:
            kw["sasl_plain_username"] = self.sasl_plain_username
        if self.sasl_plain_password is not None:
            kw["sasl_plain_password"] = self.sasl_plain_password.get_secret_value()
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            value = getattr(self, name)
            if value is not None:
                kw[name] = value
        if self.ssl_password is not None:
            kw["ssl_password"] = self.ssl_password.get_secret_value()
        if self.security_protocol in ("SSL", "SASL_SSL"):
            kw["ssl_check_hostname"] = self.ssl_check_hostname
        return kw

    def redacted(self) -> dict[str, object]:
        """Return the settings as JSON-ready data with every secret masked (safe to log)."""
        data = self.model_dump(mode="json")
        for name in SECRET_ENV:
            if data.get(name) is not None:
                data[name] = "**********"
        return data


def kafka_config_of(config: Any) -> KafkaConfig:
    """Return the ``kafka`` section of a certmon config (model or plain dict) as a model.

    Raises
    ------
    ConfigError
        The section does not validate (one line naming the problem).

    Examples
    --------
    >>> class C: kafka = {"group_id": "g"}
    >>> kafka_config_of(C()).group_id
    'g'
    """
    section = getattr(config, "kafka", None)
    if isinstance(section, KafkaConfig):
        return section
    try:
        return KafkaConfig.model_validate(section or {})
    except ValueError as exc:
        raise ConfigError(f"[kafka]: {exc}") from None
