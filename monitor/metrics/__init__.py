"""Prometheus metrics for certmon: a scrape-time state collector, operational metrics, endpoint.

- :class:`StateCollector` converts ``Engine.state_view()`` into the statistical ``certmon_*``
  families at scrape time;
- :class:`OperationalMetrics` holds the process counters, histograms and gauges;
- :func:`serve_metrics` serves a registry on ``/metrics`` with ``/healthz`` and ``/readyz``.

Nothing here touches prometheus_client's global default registry.

Examples
--------
>>> from prometheus_client import CollectorRegistry
>>> registry = CollectorRegistry()
>>> registry.register(StateCollector(lambda: {"suites": {}}))
>>> ops = OperationalMetrics(registry, version="test")
>>> ops.set_up(True)
>>> registry.get_sample_value("certmon_up")
1.0
"""

from __future__ import annotations

from monitor.metrics.collector import STATES, StateCollector, format_rho
from monitor.metrics.operational import (
    ALERT_KINDS,
    DUPLICATE_REASONS,
    REJECTION_REASONS,
    OperationalMetrics,
)
from monitor.metrics.server import (
    MetricsLimits,
    ScrapePacer,
    limits_from_config,
    serve_metrics,
    stop_metrics,
)

__all__ = [
    "ALERT_KINDS",
    "DUPLICATE_REASONS",
    "REJECTION_REASONS",
    "STATES",
    "MetricsLimits",
    "OperationalMetrics",
    "ScrapePacer",
    "StateCollector",
    "format_rho",
    "limits_from_config",
    "serve_metrics",
    "stop_metrics",
]
