"""Operational Prometheus metrics of a certmon process (events, alerts, checkpoints, liveness).

These are ordinary instrumented counters, histograms and gauges that the process wiring updates
as it works; the statistical values come from :class:`monitor.metrics.StateCollector` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from importlib import metadata

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import Metric
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

from monitor.alerts import ALERT_KINDS
from monitor.engine import DUPLICATE_REASONS
from monitor.events import REJECTION_REASONS

__all__ = [
    "ALERT_KINDS",
    "DUPLICATE_REASONS",
    "REJECTION_REASONS",
    "OperationalMetrics",
    "package_version",
]

# The contract's reason codes and alert kinds are defined once, where they are produced.

# Per-event processing is ~10 us at the 100k events/s target; keep resolution down there.
EVENT_BUCKETS: tuple[float, ...] = (
    5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 1e-2, 0.1, 1.0,
)
CHECKPOINT_BUCKETS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)


def package_version() -> str:
    """Return the installed certmon version, or ``"unknown"`` when it is not installed.

    Returns
    -------
    str
        The distribution version, e.g. ``"0.1.0"``.

    Examples
    --------
    >>> isinstance(package_version(), str)
    True
    """
    try:
        return metadata.version("certmon")
    except metadata.PackageNotFoundError:
        return "unknown"


class _BeforeScrape(Collector):
    """Runs a callback at the start of every scrape; exposes nothing itself."""

    def __init__(self, callback: Callable[[], None]) -> None:
        self._callback = callback

    def describe(self) -> Iterable[Metric]:
        """Expose no names (so the registry never calls :meth:`collect` to find them)."""
        return []

    def collect(self) -> Iterable[Metric]:
        """Call the callback, yield nothing."""
        self._callback()
        return []


class _WithoutCreated(Collector):
    """Exposes the wrapped metrics without their ``_created`` samples.

    prometheus_client can only turn ``_created`` off process-wide
    (``disable_created_metrics()``, global state); wrapping the metrics in one collector of this
    registry drops them for this registry alone.
    """

    def __init__(self, metrics: list[MetricWrapperBase]) -> None:
        self._metrics = metrics

    def describe(self) -> Iterable[Metric]:
        """Describe the wrapped metrics (their names, without samples)."""
        for metric in self._metrics:
            yield from metric.describe()

    def collect(self) -> Iterable[Metric]:
        """Collect the wrapped metrics, leaving out every ``*_created`` sample."""
        for metric in self._metrics:
            for family in metric.collect():
                family.samples = [s for s in family.samples if not s.name.endswith("_created")]
                yield family


class OperationalMetrics:
    """Counters, histograms and gauges that describe how a certmon process is doing.

    Parameters
    ----------
    registry : CollectorRegistry
        Where to register the metrics (never the global default registry).
    version : str or None, optional
        Value of the ``version`` label of ``certmon_build_info``; defaults to the installed
        package version.
    before_scrape : Callable[[], None] or None, optional
        Called at the start of every scrape of ``registry``, before these metrics are read,
        e.g. to bring counters kept elsewhere (the engine's) up to date while the input is idle.
        It runs on the HTTP server's thread.
    extra_reasons : Iterable[str], optional
        Rejection reasons of the event source beyond :data:`REJECTION_REASONS` (the Kafka
        source's ``suite_partition_conflict`` and ``processing_failed``), initialised to 0 too.

    Notes
    -----
    Known label values (every rejection reason, duplicate reason and alert kind of the interface
    contract) are initialised to 0, so ``rate()`` and ``increase()`` work from the first scrape
    and dashboards show explicit zeros instead of "no data". A reason outside those lists is
    still counted under its own label value. Exposed names: ``certmon_events_received_total``,
    ``certmon_events_rejected_total{reason}``, ``certmon_events_duplicate_total{reason}``,
    ``certmon_alerts_emitted_total{kind}``, ``certmon_event_processing_seconds`` (histogram),
    ``certmon_checkpoint_duration_seconds`` (histogram),
    ``certmon_checkpoint_last_success_timestamp_seconds``, ``certmon_checkpoints_total``,
    ``certmon_checkpoint_pending_events``, ``certmon_events_unrouted_total``,
    ``certmon_checkpoint_failures_total``, ``certmon_up`` and ``certmon_build_info{version}``.
    Counters and histograms export no ``_created`` series (for this registry only).
    ``certmon_checkpoint_pending_events`` counts events read since the last durable checkpoint
    (what a crash now would replay): the checkpoint alerts fire only while it is positive, so a
    healthy instance whose input went quiet does not page.
    All methods are thread-safe (prometheus_client metrics lock internally).

    Examples
    --------
    >>> from prometheus_client import CollectorRegistry
    >>> registry = CollectorRegistry()
    >>> ops = OperationalMetrics(registry, version="0.1.0")
    >>> ops.events_received(3)
    >>> ops.rejected("out_of_range")
    >>> ops.checkpoint_written(0.02, timestamp=1_700_000_000.0)
    >>> registry.get_sample_value("certmon_events_received_total")
    3.0
    >>> registry.get_sample_value("certmon_events_rejected_total", {"reason": "out_of_range"})
    1.0
    >>> registry.get_sample_value("certmon_events_rejected_total", {"reason": "oversized"})
    0.0
    >>> registry.get_sample_value("certmon_checkpoint_last_success_timestamp_seconds")
    1700000000.0
    >>> registry.get_sample_value("certmon_build_info", {"version": "0.1.0"})
    1.0
    >>> registry.get_sample_value("certmon_checkpoint_pending_events")
    0.0
    >>> registry.get_sample_value("certmon_events_received_created") is None
    True
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        version: str | None = None,
        before_scrape: Callable[[], None] | None = None,
        extra_reasons: Iterable[str] = (),
    ) -> None:
        if before_scrape is not None:  # registered first: collectors run in registration order
            registry.register(_BeforeScrape(before_scrape))
        self._received = Counter(
            "certmon_events_received", "Events read from the source (before validation).",
            registry=None,
        )
        self._rejected = Counter(
            "certmon_events_rejected", "Events rejected to the dead-letter sink, by reason.",
            ["reason"], registry=None,
        )
        self._duplicate = Counter(
            "certmon_events_duplicate", "Duplicate events dropped, by reason.",
            ["reason"], registry=None,
        )
        self._alerts = Counter(
            "certmon_alerts_emitted", "Alerts emitted, by kind.", ["kind"], registry=None,
        )
        self._event_seconds = Histogram(
            "certmon_event_processing_seconds",
            "Processing time of the first event of each processing batch (sampled: one "
            "observation per batch, not per event).",
            buckets=EVENT_BUCKETS, registry=None,
        )
        self._checkpoint_seconds = Histogram(
            "certmon_checkpoint_duration_seconds", "Time to write one durable checkpoint.",
            buckets=CHECKPOINT_BUCKETS, registry=None,
        )
        self._checkpoint_ts = Gauge(
            "certmon_checkpoint_last_success_timestamp_seconds",
            "Unix time of the last durable checkpoint (0 = none yet).", registry=registry,
        )
        self._checkpoints = Counter(
            "certmon_checkpoints", "Checkpoints written.", registry=None,
        )
        self._checkpoint_failures = Counter(
            "certmon_checkpoint_failures", "Checkpoint writes that failed.", registry=None,
        )
        self._unrouted = Counter(
            "certmon_events_unrouted",
            "Valid events of a suite (or model) this process is not configured for, dropped "
            "(one counter for all suites, so unknown suite names cannot grow the label set).",
            registry=None,
        )
        self._pending = Gauge(
            "certmon_checkpoint_pending_events",
            "Events read since the last durable checkpoint (what a crash now would replay).",
            registry=registry,
        )
        registry.register(_WithoutCreated([
            self._received, self._rejected, self._duplicate, self._alerts, self._event_seconds,
            self._checkpoint_seconds, self._checkpoints, self._checkpoint_failures,
            self._unrouted,
        ]))
        self._up = Gauge("certmon_up",
                         "1 while the processing loop runs and (Kafka source) the brokers "
                         "answer; 0 otherwise.", registry=registry)
        build = Gauge("certmon_build_info", "Build information (always 1).", ["version"],
                      registry=registry)
        build.labels(version=version if version is not None else package_version()).set(1)
        for reason in (*REJECTION_REASONS, *extra_reasons):
            self._rejected.labels(reason=reason)
        for reason in DUPLICATE_REASONS:
            self._duplicate.labels(reason=reason)
        for kind in ALERT_KINDS:
            self._alerts.labels(kind=kind)

    def events_received(self, count: int = 1) -> None:
        """Count ``count`` events read from the source (accepted or not)."""
        self._received.inc(count)
        self._pending.inc(count)

    def unrouted(self, count: int = 1) -> None:
        """Count ``count`` valid events dropped because no configured suite/model owns them."""
        self._unrouted.inc(count)

    def rejected(self, reason: str) -> None:
        """Count one event rejected with the given reason code."""
        self._rejected.labels(reason=reason).inc()

    def duplicate(self, reason: str) -> None:
        """Count one duplicate event dropped (reason ``event_id`` or ``unit``)."""
        self._duplicate.labels(reason=reason).inc()

    def alert_emitted(self, kind: str) -> None:
        """Count one alert of the given kind."""
        self._alerts.labels(kind=kind).inc()

    def observe_event(self, seconds: float) -> None:
        """Record the processing time of one event (about 1 us of overhead per call)."""
        self._event_seconds.observe(seconds)

    def checkpoint_written(self, duration: float, timestamp: float) -> None:
        """Record a durable checkpoint: its duration (s) and its completion Unix time.

        Resets ``certmon_checkpoint_pending_events``: call :meth:`events_received` for every
        event the checkpoint covers first.
        """
        self._checkpoint_seconds.observe(duration)
        self._pending.set(0)
        self._checkpoint_ts.set(timestamp)
        self._checkpoints.inc()

    def checkpoint_failed(self) -> None:
        """Count one failed checkpoint write."""
        self._checkpoint_failures.inc()

    def set_up(self, up: bool) -> None:
        """Set ``certmon_up``: 1 while processing runs (Kafka: while the brokers answer)."""
        self._up.set(1.0 if up else 0.0)
