from __future__ import annotations

import logging

import pytest
from pydantic import ValidationError

from monitor.config.kafka import KafkaConfig, KafkaTopics

SECRET = "hunter2-very-secret"


def _cfg() -> KafkaConfig:
    return KafkaConfig(
        bootstrap_servers="b1:9092,b2:9092",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="certmon",
        sasl_plain_password=SECRET,
        ssl_cafile="/etc/ca.pem",
        ssl_password=SECRET + "-key",
    )


def test_defaults() -> None:
    cfg = KafkaConfig()
    assert cfg.group_id == "certmon"
    assert cfg.topics.events == "certmon.eval-events.v1"
    assert cfg.topics.alerts == "certmon.alerts.v1"
    assert cfg.topics.requests == "certmon.requests.v1"
    assert cfg.topics.dead_letters == "certmon.dead-letters.v1"
    assert cfg.topics.checkpoints == "certmon.checkpoints.v1"
    assert cfg.topics.judge is None and cfg.topics.labels is None
    assert cfg.checkpoint_store in ("local", "kafka")


def test_client_kwargs_pass_security_through() -> None:
    kw = _cfg().client_kwargs()
    assert kw["bootstrap_servers"] == ["b1:9092", "b2:9092"]
    assert kw["security_protocol"] == "SASL_SSL"
    assert kw["sasl_mechanism"] == "SCRAM-SHA-512"
    assert kw["sasl_plain_username"] == "certmon"
    assert kw["sasl_plain_password"] == SECRET
    assert kw["ssl_cafile"] == "/etc/ca.pem"
    assert kw["ssl_password"] == SECRET + "-key"


def test_secrets_never_in_repr_str_dump_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    cfg = _cfg()
    texts = [repr(cfg), str(cfg), str(cfg.redacted()), cfg.model_dump_json(), str(cfg.model_dump())]
    log = logging.getLogger("certmon.kafka.test")
    with caplog.at_level(logging.DEBUG):
        log.info("config %s", cfg)
        log.info("config %r", cfg)
        log.info("redacted", extra={"kafka": cfg.redacted()})
    texts.append(caplog.text)
    texts.extend(str(r.__dict__) for r in caplog.records)
    for text in texts:
        assert SECRET not in text
    assert cfg.redacted()["sasl_plain_password"] == "**********"


def test_validation_errors() -> None:
    with pytest.raises(ValidationError, match="sasl_mechanism"):
        KafkaConfig(security_protocol="SASL_PLAINTEXT")
    with pytest.raises(ValidationError, match="heartbeat"):
        KafkaConfig(session_timeout_ms=3000, heartbeat_interval_ms=3000)
    with pytest.raises(ValidationError):
        KafkaConfig(topics=KafkaTopics(events="bad topic name"))
    with pytest.raises(ValidationError):
        KafkaConfig(unknown_key=1)  # type: ignore[call-arg]


def test_from_toml_section() -> None:
    import tomllib

    doc = tomllib.loads(
        """
        [kafka]
        bootstrap_servers = ["127.0.0.1:9092"]
        group_id = "g1"
        checkpoint_store = "local"
        batch_size = 100
        [kafka.topics]
        events = "x.events.v1"
        judge = "x.judge-scores.v1"
        labels = "x.human-labels.v1"
        """
    )
    cfg = KafkaConfig.model_validate(doc["kafka"])
    assert cfg.group_id == "g1" and cfg.checkpoint_store == "local"
    assert cfg.topics.input_topics() == ["x.events.v1", "x.judge-scores.v1", "x.human-labels.v1"]
