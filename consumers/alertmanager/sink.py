"""Alertmanager sink: certmon's certificate alerts pushed to Alertmanager's v2 API.

Implements the :class:`monitor.sinks.Sink` protocol (``emit``/``flush``/``close``) with the
standard library only (``urllib``). See :class:`AlertmanagerSink` for the alert semantics.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from consumers.alertmanager.records import (
    KINDS,
    alert_annotations,
    alert_labels,
    dashboard_url,
    epoch,
    rfc3339,
    state_key,
    state_records,
)
from consumers.alertmanager.urls import api_url, has_userinfo, redact_text, redact_url

__all__ = ["AlertmanagerSink", "Transport", "has_userinfo"]

log = logging.getLogger(__name__)

_Key = tuple[str, ...]
Transport = Callable[[str, bytes, float], int]


@dataclass
class _Entry:
    """One alert as Alertmanager should see it, and what each Alertmanager has been sent."""

    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: float
    ends_at: float | None  # None while active (endsAt = now + lifetime on every send)
    generator_url: str
    version: int = 0
    sent: dict[str, tuple[int, float]] = field(default_factory=dict)  # url -> (version, when)


@dataclass
class _Target:
    url: str
    failures: int = 0
    next_attempt_at: float = 0.0


def _urllib_transport(url: str, body: bytes, timeout: float,
                      headers: Mapping[str, str] | None = None) -> int:
    request = urllib.request.Request(
        url, data=body, method="POST",
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        status: int = response.status
        return status


# kinds that end the certificate's current state
_ENDS_STATE = frozenset({"improvement", "certificate_withdrawn"})
_MIN_LIFETIME = 3600.0  # seconds an active alert outlives a silent certmon by default


class AlertmanagerSink:
    """Push certmon alerts to one or more Alertmanagers (``POST /api/v2/alerts``).

    Parameters
    ----------
    urls : str or Sequence[str]
        Alertmanager base URLs, e.g. ``"http://alertmanager:9093"``. Alerts go to every one
        (Alertmanager replicas gossip silences and notifications, not alerts).
    grafana_url : str or None, optional
        Grafana base URL; when set, each alert gets a ``dashboard`` annotation and a
        ``generatorURL`` pointing at the per-model dashboard.
    resend_interval : float, optional
        Seconds between re-sends of an active alert.
    lifetime : float or None, optional
        ``endsAt`` of an active alert is ``now + lifetime`` at every send, so alerts expire on
        their own if certmon stops re-sending; default ``max(4 * resend_interval, 3600)``: a
        violation pushed just before a crash stays visible through an hour of downtime (the
        ``CertmonDown`` / ``CertmonAbsent`` rules page for the outage itself, and a restarted
        process reconciles the alerts with its checkpoint).
    once_lifetime : float, optional
        How long one-shot alerts (``precision_reached`` and unknown kinds) stay active.
    timeout : float, optional
        Per-request timeout in seconds.
    max_attempts : int, optional
        Attempts per Alertmanager in a blocking :meth:`flush` (and in :meth:`close`).
    blocking_flush : bool, optional
        If False, :meth:`flush` makes one non-blocking attempt, like :meth:`emit` (for a
        runner that flushes before every checkpoint: delivery to Alertmanager is then
        best-effort, covered by re-sends and by :meth:`reconcile` after a restart);
        :meth:`close` still retries.
    backoff_initial, backoff_max : float, optional
        Retry delay after the first failure, doubling up to ``backoff_max`` seconds.
    resolved_retention : float, optional
        Seconds a resolved alert is kept for delivery before it is dropped.
    extra_labels : Mapping[str, str] or None, optional
        Static labels added to every alert.
    clock, sleep, transport : callables, optional
        Injection points for tests: Unix time, sleeping, and ``transport(url, body, timeout)``
        returning the HTTP status (raising on network errors).

    Notes
    -----
    Semantics, per certificate key (suite, model, certificate, method):

    - ``certified``, ``violated`` and ``certificate_lost`` describe the certificate's *state*;
      at most one of ``CertmonCertificateCertified`` (severity info),
      ``CertmonCertificateViolated`` and ``CertmonCertificateLost`` (critical) is active per
      key. A new state alert resolves the previous one (``endsAt`` = now), e.g. ``certified``
      then ``certificate_lost`` resolves Certified and fires Lost. A ``violated`` record after a
      ``certificate_lost`` of the same key is absorbed by the more specific Lost alert.
    - :meth:`reconcile` aligns the state alerts with a STATE document: ``pending`` (or a key
      absent from the document) resolves the key's state alert; this is how alerts clear after
      a reset, and how a restarted process takes over the alerts of the previous one.
    - ``improvement`` resolves the key's state alert (the violated epoch ended; the new epoch
      is pending) and is itself a one-shot info alert.
    - ``regression`` (warning), ``judge_drift`` (warning, labelled by suite and model only)
      and ``precision_reached`` (info) are one-shot.
    - ``best_model``: one active ``CertmonBestModel`` per suite; a new best model resolves the
      previous one. One-shot alerts (and unknown kinds) are active for ``once_lifetime``
      seconds, never re-sent.
    - Active alerts are re-sent every ``resend_interval`` seconds with a fresh ``endsAt``; if
      certmon stops, they expire after ``lifetime`` (Alertmanager then shows them resolved).
      ``close()`` does not resolve anything: a stopped monitor does not make a model healthy.

    Delivery: :meth:`emit` records the change and makes at most one non-blocking attempt per
    Alertmanager (skipped while that Alertmanager is in backoff), so the engine never waits
    on a dead Alertmanager; :meth:`flush` retries up to ``max_attempts`` times with exponential
    backoff (bounded by ``backoff_max``) and also performs due re-sends; :meth:`start` runs
    those re-sends from a daemon thread. A 4xx answer (invalid alert) is logged and not
    retried. Alertmanager deduplicates by label set, so re-sends and replays are harmless.

    Examples
    --------
    >>> posted = []
    >>> sink = AlertmanagerSink("http://am:9093", grafana_url="http://grafana:3000",
    ...     clock=lambda: 1000.0, transport=lambda url, body, t: posted.append(body) or 200)
    >>> sink.emit({"kind": "certified", "suite": "qa", "model": "m1", "certificate": "risk",
    ...     "method": "r_eval", "round": 40, "ts": 990.0, "evidence": {"log_e_value": 3.1}})
    >>> alert = json.loads(posted[0])[0]
    >>> alert["labels"]["alertname"], alert["startsAt"], alert["endsAt"]
    ('CertmonCertificateCertified', '1970-01-01T00:16:40.000000Z', '1970-01-01T01:16:40.000000Z')
    >>> alert["annotations"]["event_time"]
    '1970-01-01T00:16:30.000000Z'
    >>> alert["annotations"]["dashboard"]
    'http://grafana:3000/d/certmon-model/certmon-model?var-suite=qa&var-model=m1'
    >>> sink.close()
    """

    def __init__(
        self,
        urls: str | Sequence[str],
        *,
        grafana_url: str | None = None,
        resend_interval: float = 60.0,
        lifetime: float | None = None,
        once_lifetime: float = 3600.0,
        timeout: float = 5.0,
        max_attempts: int = 4,
        blocking_flush: bool = True,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        resolved_retention: float = 900.0,
        extra_labels: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        transport: Transport | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        url_list = [urls] if isinstance(urls, str) else list(urls)
        if not url_list or max_attempts < 1 or resend_interval <= 0:
            raise ValueError("need at least one URL, max_attempts >= 1, resend_interval > 0")
        if any(has_userinfo(u) for u in url_list):
            raise ValueError("an Alertmanager URL must not hold credentials (user:pass@): "
                             "use basic_auth_username/basic_auth_password_file or "
                             "bearer_token_file in [sinks.alertmanager]")
        self._targets = [
            _Target(api_url(u)) for u in url_list
        ]
        self._grafana = grafana_url.rstrip("/") if grafana_url else None
        self._resend = resend_interval
        self._lifetime = (lifetime if lifetime is not None
                          else max(4 * resend_interval, _MIN_LIFETIME))
        self._once_lifetime = once_lifetime
        self._timeout = timeout
        self._max_attempts = max_attempts
        self._blocking_flush = blocking_flush
        self._backoff = (backoff_initial, backoff_max)
        self._retention = resolved_retention
        self._extra = dict(extra_labels or {})
        self._clock, self._sleep = clock, sleep
        auth = dict(headers or {})  # Authorization: never logged
        self._transport = transport or (
            lambda url, body, timeout: _urllib_transport(url, body, timeout, auth))
        self._entries: dict[_Key, _Entry] = {}
        self._resolved_seq = 0
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.delivered = 0
        """Alerts (payload items) accepted by an Alertmanager so far."""
        self.failed_posts = 0
        """POST attempts that failed (network error, 5xx, 4xx)."""

    # ------------------------------------------------------------------ Sink protocol
    def emit(self, record: dict[str, Any]) -> None:
        """Record one certmon alert and try to deliver it (one attempt, never blocks on backoff).

        Parameters
        ----------
        record : dict[str, Any]
            An alert record (``monitor.alerts`` format).
        """
        with self._lock:
            self._apply(record)
            self._send_due(blocking=False)

    def flush(self) -> None:
        """Deliver everything due (changes and re-sends), retrying with bounded backoff."""
        with self._lock:
            self._send_due(blocking=self._blocking_flush)

    def close(self) -> None:
        """Stop the re-send thread, if any, and flush, retrying (active alerts stay active)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self._timeout * 2)
            self._thread = None
        with self._lock:
            self._send_due(blocking=True)

    # ------------------------------------------------------------------ public extras
    def start(self, tick: float | None = None) -> None:
        """Re-send due alerts from a daemon thread every ``tick`` seconds until :meth:`close`."""
        interval = tick if tick is not None else min(self._resend / 4, 15.0)

        def run() -> None:
            while not self._stop.wait(interval):
                with self._lock:
                    self._send_due(blocking=False)

        self._thread = threading.Thread(target=run, name="certmon-alertmanager", daemon=True)
        self._thread.start()

    def active_alerts(self) -> list[dict[str, str]]:
        """Return the label sets of the alerts currently active (sorted, for inspection)."""
        with self._lock:
            return sorted(
                (dict(e.labels) for e in self._entries.values() if e.ends_at is None),
                key=lambda labels: sorted(labels.items()),
            )

    def reconcile(self, state: Mapping[str, Any], methods: Collection[str] | None = None) -> None:
        """Align the certificate-state alerts with a STATE document (``Engine.state_view()``).

        Parameters
        ----------
        state : Mapping[str, Any]
            The STATE document.
        methods : Collection[str] or None, optional
            Only these methods raise alerts (e.g. each certificate's primary); None for all.
        """
        seen: set[_Key] = set()
        with self._lock:
            for record in state_records(state, methods):
                key = state_key(record)
                seen.add(key)
                current = self._entries.get(key)
                if current is None or current.ends_at is not None or current.labels[
                        "alertname"] != KINDS[record["kind"]][0]:
                    self._apply(record)
            now = self._clock()
            for key, entry in list(self._entries.items()):
                if entry.ends_at is None and key not in seen and (
                        (key[0] == "state" and (methods is None or key[4] in methods))
                        or key[0] == "comparison"):  # a comparison back to pending
                    self._resolve(key, now)
            self._send_due(blocking=False)

    # ------------------------------------------------------------------ internals
    def _apply(self, record: Mapping[str, Any]) -> None:
        now = self._clock()
        labels = alert_labels(record, self._extra)
        kind = str(record.get("kind", ""))
        group = KINDS.get(kind, ("", "", "once"))[2]
        # startsAt is when certmon processed the event: a replay of old input must not show
        # alerts that "started" years ago. The event's own time is kept as an annotation.
        starts = now
        annotations = alert_annotations(record, self._grafana)
        if record.get("ts") is not None:
            annotations["event_time"] = rfc3339(epoch(record.get("ts"), now))
        entry = _Entry(labels, annotations, starts, None, dashboard_url(self._grafana, record))
        if group == "once":
            entry.ends_at = max(now, starts) + self._once_lifetime
            key: _Key = ("once", str(record.get("id", "")), json.dumps(labels, sort_keys=True))
        elif group == "best":
            key = ("best", labels.get("suite", ""))
        else:
            key = state_key(labels)
        if kind in _ENDS_STATE:  # the violated epoch ended: its state alert resolves
            state = self._entries.get(state_key(labels))
            if state is not None and state.ends_at is None:
                self._resolve(state_key(labels), now)
        current = self._entries.get(key)
        if current is not None and group == "once":
            return  # one-shot alert already recorded
        if current is not None and current.ends_at is None:
            if current.labels == labels:
                return  # same alert still active: a replay or a repeated record
            lost = KINDS["certificate_lost"][0]
            if current.labels["alertname"] == lost and kind == "violated":
                return  # the more specific Lost alert already says it
            self._resolve(key, now)
        self._entries[key] = entry

    def _resolve(self, key: _Key, now: float) -> None:
        """End the alert stored under ``key`` and keep it, under its own key, until delivered."""
        entry = self._entries.pop(key)
        entry.ends_at = max(now, entry.starts_at)
        entry.version += 1
        self._resolved_seq += 1
        self._entries[(*key, "resolved", str(self._resolved_seq))] = entry

    def _payload(self, entry: _Entry, now: float) -> dict[str, Any]:
        ends = entry.ends_at if entry.ends_at is not None else now + self._lifetime
        item: dict[str, Any] = {
            "labels": entry.labels,
            "annotations": entry.annotations,
            "startsAt": rfc3339(entry.starts_at),
            "endsAt": rfc3339(max(ends, entry.starts_at)),
        }
        if entry.generator_url:
            item["generatorURL"] = entry.generator_url
        return item

    def _due(self, target: _Target, now: float) -> list[_Entry]:
        due = []
        for entry in self._entries.values():
            version, when = entry.sent.get(target.url, (-1, -1e300))
            if version != entry.version or (
                entry.ends_at is None and now - when >= self._resend
            ):
                due.append(entry)
        # Resolutions first: a resolved alert must never end a newer one with the same labels.
        return sorted(due, key=lambda e: e.ends_at is None or e.ends_at > now)

    def _send_due(self, blocking: bool) -> None:
        for target in self._targets:
            for attempt in range(self._max_attempts if blocking else 1):
                now = self._clock()
                if not blocking and now < target.next_attempt_at:
                    break
                due = self._due(target, now)
                if not due or self._post(target, due, now):
                    break
                if attempt + 1 < self._max_attempts and blocking:
                    self._sleep(max(0.0, target.next_attempt_at - now))
        self._prune(self._clock())

    def _post(self, target: _Target, due: list[_Entry], now: float) -> bool:
        body = json.dumps([self._payload(e, now) for e in due]).encode()
        try:
            status = self._transport(target.url, body, self._timeout)
            ok, retry = 200 <= status < 300, status >= 500
        except urllib.error.HTTPError as exc:
            ok, retry, status = False, exc.code >= 500 or exc.code == 429, exc.code
        except (OSError, ValueError, http.client.HTTPException) as exc:  # URLError, timeouts...
            ok, retry, status = False, True, 0
            log.warning("alertmanager %s unreachable: %s", redact_url(target.url),
                        redact_text(str(exc), [target.url]))
        if ok or not retry:
            if not ok:
                self.failed_posts += 1
                log.error("alertmanager %s rejected %d alert(s) with HTTP %d; dropped",
                          redact_url(target.url), len(due), status)
            else:
                self.delivered += len(due)
            for entry in due:
                entry.sent[target.url] = (entry.version, now)
            target.failures, target.next_attempt_at = 0, 0.0
            return True
        self.failed_posts += 1
        target.failures += 1
        initial, cap = self._backoff
        target.next_attempt_at = now + min(cap, initial * 2 ** (target.failures - 1))
        return False

    def _prune(self, now: float) -> None:
        urls = [t.url for t in self._targets]
        for key, entry in list(self._entries.items()):
            if entry.ends_at is None:
                continue
            delivered = all(entry.sent.get(u, (-1, 0.0))[0] == entry.version for u in urls)
            expired = entry.ends_at <= now and (delivered or now - entry.ends_at > self._retention)
            if expired:
                del self._entries[key]
