"""Mapping of certmon alert records to Alertmanager labels and annotations.

Pure functions: no network, no state. Used by :class:`consumers.alertmanager.AlertmanagerSink`.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "KINDS",
    "alert_annotations",
    "alert_labels",
    "dashboard_url",
    "epoch",
    "rfc3339",
    "state_key",
    "state_records",
]

# kind -> (alertname, severity, group). Alerts of the "state" group describe the certificate's
# current state: at most one is active per (suite, model, certificate, method).
KINDS: dict[str, tuple[str, str, str]] = {
    "certified": ("CertmonCertificateCertified", "info", "state"),
    "violated": ("CertmonCertificateViolated", "critical", "state"),
    "certificate_lost": ("CertmonCertificateLost", "critical", "state"),
    "precision_reached": ("CertmonPrecisionReached", "info", "once"),
    "best_model": ("CertmonBestModel", "info", "best"),
}
RUNBOOK = {
    "certified": "No action needed: the model meets the certificate. Keep monitoring for drift.",
    "violated": "Treat as a confirmed quality regression: roll back or gate the model.",
    "certificate_lost": "Look for drift around the time of change; roll back or re-certify.",
    "precision_reached": "The estimate is precise enough: label requests for it can stop.",
    "best_model": "The suite's best model is identified at the configured confidence.",
}
def rfc3339(ts: float) -> str:
    """Format a Unix time as RFC 3339 in UTC, as Alertmanager expects.

    Examples
    --------
    >>> rfc3339(0.5)
    '1970-01-01T00:00:00.500000Z'
    """
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def epoch(ts: Any, default: float) -> float:
    """Return an event time (epoch seconds or RFC 3339 string) as Unix time, else ``default``.

    Examples
    --------
    >>> epoch("1970-01-01T00:01:00Z", 0.0), epoch(5, 0.0), epoch(None, 7.0)
    (60.0, 5.0, 7.0)
    """
    if isinstance(ts, int | float) and not isinstance(ts, bool):
        return float(ts)
    if isinstance(ts, str):
        try:
            return datetime.fromisoformat(ts).timestamp()
        except ValueError:
            return default
    return default


def alert_labels(
    record: Mapping[str, Any], extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Return the stable Alertmanager labels of a certmon alert record.

    Parameters
    ----------
    record : Mapping[str, Any]
        An alert in the format of ``monitor.alerts`` (``kind``, ``suite``, ``model``, ...).
    extra : Mapping[str, str] or None, optional
        Static labels added to every alert (e.g. ``{"env": "prod"}``).

    Returns
    -------
    dict[str, str]
        ``alertname``, ``severity``, ``origin="certmon"`` and whichever of ``suite``, ``model``,
        ``certificate``, ``method`` the record names (never ids, rounds or values: those change).

    Examples
    --------
    >>> alert_labels({"kind": "violated", "suite": "qa", "model": "m1", "certificate": "risk",
    ...               "method": "r_eval", "round": 9})["alertname"]
    'CertmonCertificateViolated'
    """
    kind = str(record.get("kind", ""))
    default = ("Certmon" + "".join(p.capitalize() for p in kind.split("_")), "info", "once")
    alertname, severity, _ = KINDS.get(kind, default)
    labels = {str(k): str(v) for k, v in (extra or {}).items() if str(v)}
    labels.update(alertname=alertname, severity=severity, origin="certmon")
    for name in ("suite", "model", "certificate", "method"):
        value = record.get(name)
        if value is not None and str(value):
            labels[name] = str(value)
    return labels


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def dashboard_url(grafana_url: str | None, record: Mapping[str, Any]) -> str:
    """Return the per-model Grafana dashboard URL of a record (empty without a base URL).

    Examples
    --------
    >>> dashboard_url("http://g:3000", {"suite": "qa", "model": "m 1"})
    'http://g:3000/d/certmon-model/certmon-model?var-suite=qa&var-model=m+1'
    """
    if grafana_url is None:
        return ""
    query = urllib.parse.urlencode(
        {"var-suite": str(record.get("suite", "")), "var-model": str(record.get("model", ""))}
    )
    return f"{grafana_url}/d/certmon-model/certmon-model?{query}"


def alert_annotations(record: Mapping[str, Any], grafana_url: str | None = None) -> dict[str, str]:
    """Return the annotations (summary, evidence, runbook, dashboard link) of a record.

    Examples
    --------
    >>> ann = alert_annotations({"kind": "violated", "suite": "qa", "model": "m1",
    ...     "certificate": "risk", "method": "r_eval", "round": 12, "id": "ab12",
    ...     "evidence": {"log_e_value": 3.1, "log_threshold": 2.9957, "rounds": 12}})
    >>> ann["summary"]
    'violated: m1 / risk (qa, r_eval) at round 12'
    >>> ann["description"]
    'log e-value 3.1 vs threshold 2.996; 12 rounds'
    """
    kind = str(record.get("kind", ""))
    raw = record.get("evidence")
    ev: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    who = f"{record.get('model')} / {record.get('certificate')} ({record.get('suite')}, " \
          f"{record.get('method')})"
    parts = []
    if ev.get("log_e_value") is not None and ev.get("log_threshold") is not None:
        parts.append(f"log e-value {_fmt(ev['log_e_value'])} vs threshold "
                     f"{_fmt(ev['log_threshold'])}")
    if ev.get("rounds") is not None:
        parts.append(f"{ev['rounds']} rounds")
    if ev.get("cs_lower") is not None and ev.get("cs_upper") is not None:
        parts.append(f"risk in [{_fmt(ev['cs_lower'])}, {_fmt(ev['cs_upper'])}]")
    out = {
        "summary": f"{kind.replace('_', ' ')}: {who} at round {record.get('round')}",
        "description": "; ".join(parts) or "no evidence attached",
        "evidence": json.dumps(ev, sort_keys=True, default=str)[:4000],
        "alert_id": str(record.get("id", "")),
        "runbook": RUNBOOK.get(kind, "See the certmon alert reference."),
    }
    dashboard = dashboard_url(grafana_url, record)
    if dashboard:
        out["dashboard"] = dashboard
    return out


def state_key(record: Mapping[str, Any]) -> tuple[str, ...]:
    """Return the key of a record's certificate-state alert (suite, model, certificate, method)."""
    return ("state", *(str(record.get(n, "")) for n in ("suite", "model", "certificate", "method")))


def state_records(
    state: Mapping[str, Any], methods: Collection[str] | None
) -> list[dict[str, Any]]:
    """Alert records describing every certified or violated method of a STATE document.

    Examples
    --------
    >>> view = {"status": "violated", "certified_at_round": 40, "violated_at_round": 90}
    >>> state = {"suites": {"qa": {"models": {"m1": {"certificates": {"risk": {
    ...     "methods": {"r_eval": view}}}}}}}}
    >>> [(r["kind"], r["round"]) for r in state_records(state, None)]
    [('certificate_lost', 90)]
    """
    out: list[dict[str, Any]] = []
    for suite, sv in (state.get("suites") or {}).items():
        for model, mv in (sv.get("models") or {}).items():
            for cert, cv in (mv.get("certificates") or {}).items():
                for method, view in (cv.get("methods") or {}).items():
                    status = view.get("status")
                    if status not in ("certified", "violated") or (
                            methods is not None and method not in methods):
                        continue
                    violated = status == "violated"
                    lost = violated and view.get("certified_at_round") is not None
                    out.append({
                        "kind": "certificate_lost" if lost else status,
                        "suite": suite, "model": model, "certificate": cert, "method": method,
                        "round": view.get("violated_at_round" if violated else
                                          "certified_at_round"),
                        "ts": view.get("status_changed_ts"),
                        "evidence": {
                            "log_e_value": view.get("log_e_violate" if violated else
                                                    "log_e_certify"),
                            "log_threshold": view.get("log_threshold"),
                            "rounds": view.get("rounds"),
                            "cs_lower": view.get("cs_lower"),
                            "cs_upper": view.get("cs_upper"),
                        },
                    })
    return out
