r"""Configuration: one TOML file, validated once by pydantic at the boundary.

What lives here: :mod:`~monitor.config.root` (the whole file: suites, sinks),
:mod:`~monitor.config.runtime` (checkpoint, metrics, source and event-limit sections),
:mod:`~monitor.config.loading` (TOML, ``--set`` overrides, errors),
:mod:`~monitor.config.certificates` (certificate and strata sections, shared field types),
:mod:`~monitor.config.kafka` (the ``[kafka]`` section; no Kafka client import),
:mod:`~monitor.config.reference` (``docs/configuration.md``, generated from the models) and
:mod:`~monitor.config.effective` (the effective configuration as TOML or JSON, for
``certmon config``). Every field carries a ``description``; a default that the statistics
also use is imported from its ``DEFAULT_*`` constant in :mod:`monitor.stats` (or
:mod:`monitor.events`), so it is defined once. May import: pydantic, :mod:`monitor.errors`,
:mod:`monitor.events`, :mod:`monitor.selection_settings`, the ``DEFAULT_*`` constants of
:mod:`monitor.stats`; never other :mod:`monitor.stats` internals, state or I/O wiring.

Examples
--------
>>> from monitor.config import parse_config
>>> cfg = parse_config('[[suites]]\nname = "qa"\n[[suites.certificates]]\nname = "r"\n'
...                    'alpha = 0.1\ndelta = 0.05\n')
>>> cfg.suites[0].certificates[0].alpha
0.1
"""

from __future__ import annotations

from monitor.config.certificates import METHODS, CertificateConfig, StrataConfig
from monitor.config.kafka import KafkaConfig, KafkaTopics
from monitor.config.loading import apply_override, load_config, parse_config
from monitor.config.root import (
    AlertmanagerConfig,
    CertmonConfig,
    CheckpointConfig,
    EventsConfig,
    MetricsConfig,
    SinksConfig,
    SourceConfig,
    SuiteConfig,
)

__all__ = [
    "METHODS",
    "AlertmanagerConfig",
    "CertificateConfig",
    "CertmonConfig",
    "CheckpointConfig",
    "EventsConfig",
    "KafkaConfig",
    "KafkaTopics",
    "MetricsConfig",
    "SinksConfig",
    "SourceConfig",
    "StrataConfig",
    "SuiteConfig",
    "apply_override",
    "load_config",
    "parse_config",
]
