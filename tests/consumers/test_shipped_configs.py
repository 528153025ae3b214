"""The shipped run and deploy configurations use the defaults and set nothing that is ignored.

Before: they set ``betting = "wsr"`` (the old default, so ``replay`` and ``run`` disagreed on
the same data) and a ``[checkpoint]`` section that the Kafka source silently ignores
(``checkpoint_store = "kafka"``): the volumes it named were never written.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from consumers.kafka.clients import ignored_settings
from consumers.kafka.deadlines import StartupTimeout
from consumers.kafka.source import run_kafka
from monitor.config import CertmonConfig, load_config, parse_config

REPO = Path(__file__).resolve().parents[2]


def _configmap() -> str:
    doc = yaml.safe_load((REPO / "deploy/k8s/configmap.yaml").read_text())
    return str(doc["data"]["certmon.toml"])


SHIPPED = {
    "deploy/certmon/certmon.toml": lambda: load_config(REPO / "deploy/certmon/certmon.toml"),
    "deploy/k8s/configmap.yaml": lambda: parse_config(_configmap()),
    "examples/run-local.toml": lambda: load_config(REPO / "examples/run-local.toml"),
}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_configs_use_the_defaults_and_nothing_ignored(name: str) -> None:
    config: CertmonConfig = SHIPPED[name]()
    for suite in config.suites:
        for cert in suite.certificates:
            assert "betting" not in cert.model_fields_set, (name, cert.betting)
    if config.source.kind == "kafka":
        assert ignored_settings(config) == [], name


def test_an_ignored_checkpoint_setting_is_named_in_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    text = "\n".join(["[[suites]]", "[[suites.certificates]]", "name='r'", "alpha=0.1",
                      "delta=0.1", "[source]", "kind='kafka'", "[checkpoint]", "dir='/x'",
                      "[metrics]", "enabled=false", "[kafka]",
                      "bootstrap_servers='127.0.0.1:1'", "startup_timeout_seconds=0.5",
                      "bootstrap_timeout_ms=500", "create_topics=false"])
    with caplog.at_level(logging.WARNING, logger="certmon.kafka"), \
            pytest.raises(StartupTimeout):
        run_kafka(parse_config(text), CollectorRegistry(), threading.Event())
    warned = [r for r in caplog.records if r.getMessage() == "settings ignored by the Kafka source"]
    assert len(warned) == 1 and warned[0].settings == [  # type: ignore[attr-defined]
        'checkpoint.dir (kafka.checkpoint_store = "kafka")']
