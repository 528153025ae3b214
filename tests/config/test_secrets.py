"""Secrets never printed, and each one from a file or the environment."""

from __future__ import annotations

import base64
import logging
from pathlib import Path

import pytest

from consumers.alertmanager.sink import AlertmanagerSink
from consumers.alertmanager.wiring import alertmanager_urls, auth_headers, open_alert_sink
from monitor.config import parse_config
from monitor.config.kafka import KafkaConfig
from monitor.errors import ConfigError, SinkError

BASE = "[[suites]]\n[[suites.certificates]]\nname='r'\nalpha=0.1\ndelta=0.1\n"
KAFKA = BASE + "[kafka]\nbootstrap_servers='b:9092'\n"


def test_a_numeric_password_given_with_set_is_not_echoed() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(KAFKA, ["kafka.sasl_plain_password=987654321"])
    assert "987654321" not in str(err.value)
    assert "kafka.sasl_plain_password" in str(err.value)


def test_kafka_passwords_from_files(tmp_path: Path) -> None:
    (tmp_path / "sasl").write_text("sasl-secret\n")
    (tmp_path / "ssl").write_text("ssl-secret")
    k = KafkaConfig(bootstrap_servers="b:9092", sasl_plain_password_file=str(tmp_path / "sasl"),
                    ssl_password_file=str(tmp_path / "ssl"))
    kw = k.client_kwargs()
    assert kw["sasl_plain_password"] == "sasl-secret" and kw["ssl_password"] == "ssl-secret"
    assert "secret" not in repr(k) and "sasl-secret" not in str(k.redacted())


def test_kafka_passwords_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CERTMON_KAFKA_SASL_PASSWORD", "from-env")
    assert KafkaConfig(bootstrap_servers="b").client_kwargs()["sasl_plain_password"] == "from-env"
    # the config file wins over the environment
    k = KafkaConfig(bootstrap_servers="b", sasl_plain_password="in-file")
    assert k.client_kwargs()["sasl_plain_password"] == "in-file"


def test_kafka_password_and_file_together_refused(tmp_path: Path) -> None:
    (tmp_path / "p").write_text("x")
    with pytest.raises(ConfigError, match="not both"):
        parse_config(KAFKA, ["kafka.sasl_plain_password=abc",
                             f"kafka.sasl_plain_password_file={tmp_path / 'p'}"])


def test_alertmanager_url_with_credentials_refused_without_echo() -> None:
    with pytest.raises(SinkError) as err:
        alertmanager_urls("alertmanager:http://admin:hunter2@am:9093")
    assert "hunter2" not in str(err.value) and "credentials" in str(err.value)
    with pytest.raises(ValueError) as verr:
        AlertmanagerSink("http://admin:hunter2@am:9093")
    assert "hunter2" not in str(verr.value)


def test_alertmanager_basic_auth_and_bearer(tmp_path: Path) -> None:
    pw = tmp_path / "pw"
    pw.write_text("hunter2\n")
    cfg = parse_config(BASE, ["sinks.alertmanager.basic_auth_username=admin",
                              f"sinks.alertmanager.basic_auth_password_file={pw}"])
    h = auth_headers(cfg.sinks.alertmanager, {})
    assert h == {"Authorization": "Basic " + base64.b64encode(b"admin:hunter2").decode()}
    cfg = parse_config(BASE, ["sinks.alertmanager.basic_auth_username=admin"])
    with pytest.raises(SinkError, match="needs"):
        auth_headers(cfg.sinks.alertmanager, {})
    tok = tmp_path / "tok"
    tok.write_text("t0ken")
    cfg = parse_config(BASE, [f"sinks.alertmanager.bearer_token_file={tok}"])
    assert auth_headers(cfg.sinks.alertmanager, {}) == {"Authorization": "Bearer t0ken"}


def test_alertmanager_credentials_reach_the_request_and_never_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import urllib.request

    seen: list[dict[str, str]] = []

    def fake_urlopen(req: urllib.request.Request, timeout: float) -> None:
        seen.append(dict(req.header_items()))
        raise OSError("connection refused")

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    monkeypatch.setenv("CERTMON_ALERTMANAGER_PASSWORD", "hunter2")
    cfg = parse_config(BASE, ["sinks.alerts='alertmanager:http://127.0.0.1:9'",
                              "sinks.alertmanager.basic_auth_username=admin"])
    sink = open_alert_sink(cfg.sinks)
    caplog.set_level(logging.DEBUG)
    sink.emit({"kind": "certified", "suite": "s", "model": "m", "certificate": "r",
               "method": "r_eval", "id": "a1", "ts": 1.0, "round": 5, "status": "certified"})
    sink.close()
    assert seen and seen[0]["Authorization"].startswith("Basic ")
    assert "hunter2" not in caplog.text
    assert base64.b64encode(b"admin:hunter2").decode() not in caplog.text
