"""Kafka source: the ``certmon run`` entry point for ``[source] kind = "kafka"``.

:func:`run_kafka` wires a :class:`~consumers.kafka.runner.KafkaRunner` (the consumer-group
member, one engine per input partition) to a metrics registry, the scrape-time state
collector, the ``/metrics``, ``/healthz`` and ``/readyz`` server and JSON logs, runs it until
stopped and returns the final state for ``--state-out``. The names other modules use
(``KafkaRunner``, ``StopRequested``, ``StartupTimeout``, ``kafka_config_of``) are re-exported.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from consumers.kafka.clients import ignored_settings
from consumers.kafka.deadlines import StartupTimeout, StopRequested
from consumers.kafka.ownership import CONFLICT
from consumers.kafka.retries import PROCESSING_FAILED
from consumers.kafka.runner import KafkaRunner
from monitor.config.kafka import kafka_config_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from monitor.config import CertmonConfig


# Rejection reasons of the Kafka source beyond the events' own (counted from 0 at start-up).
SOURCE_REJECTION_REASONS = (CONFLICT, PROCESSING_FAILED)

log = logging.getLogger("certmon.kafka")

__all__ = ["SOURCE_REJECTION_REASONS", "KafkaRunner", "StartupTimeout", "StopRequested",
           "kafka_config_of", "run_kafka"]


def run_kafka(
    config: CertmonConfig,
    registry: CollectorRegistry,
    stop_event: threading.Event,
    started: Callable[[KafkaRunner], None] | None = None,
) -> dict[str, Any] | None:
    """Run the Kafka source until ``stop_event`` is set (the ``certmon run`` entry point).

    Registers the operational metrics, the scrape-time state collector and the Kafka metrics
    on ``registry``, serves them (with ``/healthz`` and ``/readyz``) on ``[metrics]`` if
    enabled, and logs JSON lines to stderr unless logging is already configured.
    ``started`` is called with the runner before it connects: a signal handler that finds
    ``runner.connecting`` true may raise :class:`StopRequested` to end a blocking bootstrap.

    Returns
    -------
    dict or None
        The merged state view of the partitions owned at the stop (after their final
        checkpoint), for ``--state-out``; None if the stop came before any ownership.

    Raises
    ------
    StartupTimeout
        No broker answered within ``[kafka] startup_timeout_seconds`` at first start.
    """
    from consumers.kafka.logs import configure_json_logging
    from monitor.metrics import (
        OperationalMetrics,
        StateCollector,
        limits_from_config,
        serve_metrics,
        stop_metrics,
    )

    configure_json_logging()
    ignored = ignored_settings(config)
    if ignored:  # a setting that does nothing in this mode is never silent
        log.warning("settings ignored by the Kafka source", extra={"settings": ignored})
    ops = OperationalMetrics(registry, extra_reasons=SOURCE_REJECTION_REASONS)
    runner = KafkaRunner(config, registry, ops=ops)
    if started is not None:
        started(runner)
    shown = config.metrics.detail == "shown"
    registry.register(StateCollector(lambda: runner.state_view(shown), config.metrics.detail,
                                     version_fn=runner.state_version))
    server = None
    if config.metrics.enabled:
        server = serve_metrics(registry, config.metrics.host, config.metrics.port, runner.ready,
                               limits_from_config(config.metrics, dict(os.environ)))
        log.info("metrics served", extra={"port": server[0].server_port})
    try:  # certmon_up turns 1 once the consumer reaches the brokers (KafkaRunner._connected)
        runner.run(stop_event)
    finally:
        ops.set_up(False)
        if server is not None:
            stop_metrics(*server)
    return runner.final_view
