"""Open the alert sink(s) named by ``[sinks] alerts``, including ``alertmanager:URL[,URL2]``.

``monitor.sinks.open_sink`` knows the generic sinks (stdout, stderr, file, memory, none);
this module adds the Alertmanager sink, fan-out to several sinks (``alerts`` given as a list)
and the start-up take-over of active alerts (:func:`take_over`).

Notes
-----
Alertmanager sinks opened here use ``blocking_flush=False``: the runner flushes its sinks
before every checkpoint, and a dead Alertmanager must not stall the engine. Delivery is
best-effort; what repairs a lost delivery is the periodic re-send and, after a restart,
:func:`take_over`, which derives the active alerts from the restored engine state. With the
Kafka source the take-over runs once, at the first non-empty partition assignment: a
process that later loses a partition in a rebalance keeps re-sending its last alerts for those
suites until it restarts (the new owner sends the current ones; Alertmanager deduplicates equal
label sets).

Examples
--------
>>> from monitor.config import SinksConfig
>>> cfg = SinksConfig(alerts=["memory", "alertmanager:http://am-0:9093,http://am-1:9093"])
>>> sink = open_alert_sink(cfg)
>>> [type(s).__name__ for s in sink.sinks]
['MemorySink', 'AlertmanagerSink']
>>> alertmanager_urls("alertmanager:http://am-0:9093, http://am-1:9093")
['http://am-0:9093', 'http://am-1:9093']
"""

from __future__ import annotations

import base64
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from consumers.alertmanager.urls import has_userinfo, redact_url
from monitor.config import SinksConfig
from monitor.errors import SinkError
from monitor.sinks import Sink, open_sink

if TYPE_CHECKING:
    from consumers.alertmanager.sink import AlertmanagerSink

__all__ = [
    "PREFIX",
    "FanOutSink",
    "alertmanager_sinks",
    "alertmanager_urls",
    "auth_headers",
    "open_alert_sink",
    "primary_view",
    "take_over",
]

PREFIX = "alertmanager:"
CLOSE_BACKOFF_MAX = 5.0
"""Longest wait between two delivery attempts (bounds the retries of ``close``)."""


class FanOutSink:
    """Send every record to several sinks (flush and close each, even if one fails).

    Parameters
    ----------
    sinks : Sequence[Sink]
        The sinks, in order.
    """

    def __init__(self, sinks: Sequence[Sink]) -> None:
        self.sinks = list(sinks)

    def emit(self, record: dict[str, Any]) -> None:
        """Emit ``record`` to every sink."""
        for sink in self.sinks:
            sink.emit(record)

    def flush(self) -> None:
        """Flush every sink."""
        for sink in self.sinks:
            sink.flush()

    def close(self) -> None:
        """Close every sink; re-raise the first error after trying them all."""
        error: BaseException | None = None
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:
                error = error or exc
        if error is not None:
            raise error


def alertmanager_urls(spec: str) -> list[str]:
    """Return the URLs of an ``alertmanager:URL[,URL2...]`` specification.

    Raises
    ------
    SinkError
        No URL, or a URL that is not ``http://`` or ``https://``.

    Examples
    --------
    >>> alertmanager_urls("alertmanager:ftp://x")
    Traceback (most recent call last):
    ...
    monitor.errors.SinkError: alertmanager sink: 'ftp://x' is not an http(s) URL
    """
    urls = [u.strip() for u in spec.removeprefix(PREFIX).split(",") if u.strip()]
    if not urls:
        raise SinkError("alertmanager sink: expected alertmanager:URL[,URL2...]")
    for url in urls:
        try:
            userinfo = has_userinfo(url)
        except ValueError:  # e.g. an unclosed IPv6 bracket: not echoed (it may hold a token)
            raise SinkError("alertmanager sink: a URL cannot be parsed (an unclosed '[' of an "
                            "IPv6 address, or a bad port?)") from None
        if userinfo:  # checked first: the URL is then never echoed
            raise SinkError("alertmanager sink: a URL must not hold credentials (user:pass@); "
                            "use [sinks.alertmanager] basic_auth_username with "
                            "basic_auth_password_file, or bearer_token_file")
        if not url.startswith(("http://", "https://")):
            raise SinkError(f"alertmanager sink: {redact_url(url)!r} is not an http(s) URL")
    return urls


def auth_headers(settings: Any, environ: Mapping[str, str]) -> dict[str, str]:
    """Return the ``Authorization`` header of ``[sinks.alertmanager]`` (basic or bearer).

    Passwords and tokens come from ``basic_auth_password_file`` / ``bearer_token_file`` or
    the ``CERTMON_ALERTMANAGER_PASSWORD`` / ``CERTMON_ALERTMANAGER_BEARER_TOKEN``
    environment variables, never from the config file; errors never print them.

    Raises
    ------
    SinkError
        Both kinds set, a username without a password, or an unreadable file.

    Examples
    --------
    >>> from monitor.config import SinksConfig
    >>> s = SinksConfig().alertmanager
    >>> auth_headers(s, {"CERTMON_ALERTMANAGER_BEARER_TOKEN": "t0k"})
    {'Authorization': 'Bearer t0k'}
    >>> auth_headers(s, {})
    {}
    """
    def secret(path: str | None, env: str) -> str | None:
        if path:
            try:
                with open(path, encoding="utf-8") as fh:
                    return fh.read().strip()
            except OSError as exc:
                raise SinkError(f"alertmanager sink: cannot read {path} ({exc.strerror})") from None
        return environ.get(env) or None

    token = secret(settings.bearer_token_file, "CERTMON_ALERTMANAGER_BEARER_TOKEN")
    if settings.basic_auth_username:
        if token:
            raise SinkError("alertmanager sink: basic auth or a bearer token, not both")
        password = secret(settings.basic_auth_password_file, "CERTMON_ALERTMANAGER_PASSWORD")
        if not password:
            raise SinkError("alertmanager sink: basic_auth_username needs "
                            "basic_auth_password_file or CERTMON_ALERTMANAGER_PASSWORD")
        pair = f"{settings.basic_auth_username}:{password}".encode()
        return {"Authorization": "Basic " + base64.b64encode(pair).decode()}
    return {"Authorization": f"Bearer {token}"} if token else {}


def open_alert_sink(
    sinks: SinksConfig,
    *,
    append: bool = False,
    override: str | None = None,
    kafka: Callable[[], Sink] | None = None,
) -> Sink:
    """Open the alert sink of a ``[sinks]`` section.

    Parameters
    ----------
    sinks : SinksConfig
        ``alerts`` (one specification or a list) and ``[sinks.alertmanager]`` settings.
    append : bool, optional
        For files: append (resume) instead of truncate.
    override : str or None, optional
        A specification replacing the configured ones (e.g. from ``--alerts-out``).
    kafka : callable or None, optional
        Returns the Kafka alert sink, for the ``"kafka"`` specification.

    Returns
    -------
    Sink
        The single sink, or a :class:`FanOutSink` when several are configured. Alertmanager
        sinks are not started: see :func:`take_over`.

    Raises
    ------
    SinkError
        An unknown specification, or ``"kafka"`` without a Kafka producer.
    """
    specs = [override] if override is not None else sinks.alert_specs
    settings = sinks.alertmanager
    opened: list[Sink] = []
    for spec in specs:
        if spec.startswith(PREFIX):
            from consumers.alertmanager.sink import AlertmanagerSink  # only when configured

            opened.append(AlertmanagerSink(
                alertmanager_urls(spec), grafana_url=settings.grafana_url,
                resend_interval=settings.resend_seconds, timeout=settings.timeout,
                lifetime=max(settings.lifetime_seconds, 4 * settings.resend_seconds),
                blocking_flush=False, max_attempts=3, backoff_max=CLOSE_BACKOFF_MAX,
                headers=auth_headers(settings, os.environ),
            ))
        elif spec == "kafka":
            if kafka is None:
                raise SinkError("the 'kafka' alert sink needs the Kafka source (source.kind)")
            opened.append(kafka())
        else:
            opened.append(open_sink(spec, append=append))
    return opened[0] if len(opened) == 1 else FanOutSink(opened)


def alertmanager_sinks(sink: Sink) -> Iterator[AlertmanagerSink]:
    """Yield the Alertmanager sinks inside ``sink`` (itself, or members of a fan-out)."""
    home = sys.modules.get("consumers.alertmanager.sink")
    if home is None:  # never imported: no Alertmanager sink exists
        return
    if isinstance(sink, home.AlertmanagerSink):
        yield sink
    elif isinstance(sink, FanOutSink):
        for member in sink.sinks:
            yield from alertmanager_sinks(member)


def primary_view(view: Mapping[str, Any]) -> dict[str, Any]:
    """Return a STATE document keeping only each certificate's primary method.

    Methods without the ``primary`` flag (older documents) are kept.

    Examples
    --------
    >>> doc = {"suites": {"s": {"models": {"m": {"certificates": {"c": {"methods": {
    ...     "r_eval": {"primary": False}, "r_autoeval_plus": {"primary": True}}}}}}}}}
    >>> list(primary_view(doc)["suites"]["s"]["models"]["m"]["certificates"]["c"]["methods"])
    ['r_autoeval_plus']
    """
    suites: dict[str, Any] = {}
    for suite, sv in (view.get("suites") or {}).items():
        models: dict[str, Any] = {}
        for model, mv in (sv.get("models") or {}).items():
            certs = {
                cert: {**cv, "methods": {
                    name: m for name, m in (cv.get("methods") or {}).items()
                    if m.get("primary", True) is not False
                }}
                for cert, cv in (mv.get("certificates") or {}).items()
            }
            models[model] = {**mv, "certificates": certs}
        suites[suite] = {**sv, "models": models}
    return {**view, "suites": suites}


def take_over(sink: Sink, view: Mapping[str, Any], *, start: bool = True) -> int:
    """Start the Alertmanager sinks in ``sink`` and align them with the current state.

    A restarted process calls this once its engine is restored, so it re-sends the alerts
    the previous process had active (with a fresh ``endsAt``) and keeps re-sending them.

    Parameters
    ----------
    sink : Sink
        The alert sink from :func:`open_alert_sink`.
    view : Mapping[str, Any]
        ``Engine.state_view()`` (or a merged view): only primary methods raise alerts, as
        the engine's own alert records do.
    start : bool, optional
        Also start each sink's re-send thread.

    Returns
    -------
    int
        The number of Alertmanager sinks found.
    """
    found = list(alertmanager_sinks(sink))
    if not found:
        return 0
    primaries = primary_view(view)
    methods = {
        name
        for sv in primaries["suites"].values()
        for mv in (sv.get("models") or {}).values()
        for cv in (mv.get("certificates") or {}).values()
        for name in (cv.get("methods") or {})
    }
    for am in found:
        if start:
            am.start()
        am.reconcile(primaries, methods=methods)
    return len(found)
