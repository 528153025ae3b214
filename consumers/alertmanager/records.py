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
    "COMPARISON",
    "KINDS",
    "PER_MODEL",
    "alert_annotations",
    "alert_labels",
    "dashboard_url",
    "describe",
    "epoch",
    "rfc3339",
    "state_key",
    "state_records",
]

# kind -> (alertname, severity, group), for every kind of ``monitor.alerts.ALERT_KINDS`` (a test
# checks it). Severity routes (deploy/alertmanager/alertmanager.yml): critical -> pager,
# warning -> team, info -> info. Alerts of the "state" group describe the certificate's current
# state: at most one is active per (suite, model, certificate, method); "once" alerts are
# one-shot events; "best" is one per suite; "comparison" alerts are a candidate's verdict
# against its baseline (one active per suite, comparison and candidate).
KINDS: dict[str, tuple[str, str, str]] = {
    "certified": ("CertmonCertificateCertified", "info", "state"),
    "violated": ("CertmonCertificateViolated", "critical", "state"),
    "certificate_lost": ("CertmonCertificateLost", "critical", "state"),
    "certificate_withdrawn": ("CertmonCertificateWithdrawn", "warning", "once"),
    "regression": ("CertmonRegression", "warning", "once"),
    "improvement": ("CertmonImprovement", "info", "once"),
    "judge_drift": ("CertmonJudgeDrift", "warning", "once"),
    "precision_reached": ("CertmonPrecisionReached", "info", "once"),
    "best_model": ("CertmonBestModel", "info", "best"),
    "non_inferior": ("CertmonNonInferior", "info", "comparison"),
    "inferior": ("CertmonInferior", "warning", "comparison"),
}
COMPARISON = frozenset({"non_inferior", "inferior"})
"""Kinds about a comparison's candidate: labels ``suite``, ``comparison``, ``baseline``,
``candidate`` (as the ``CertmonComparison*`` rules), not model / certificate / method."""
PER_MODEL = frozenset({"judge_drift"})
"""Kinds about a model, not one certificate: no ``certificate`` / ``method`` label (as the
``CertmonJudgeDrift`` rule, so the push inhibits its rule twin)."""
RUNBOOK = {
    "certified": "No action needed: the model meets the certificate. Keep monitoring for drift.",
    "violated": "Treat as a confirmed quality regression: roll back or gate the model.",
    "certificate_lost": "Look for drift around the time of change; roll back or re-certify.",
    "certificate_withdrawn": "e-BH (multiplicity = e_bh) no longer selects this certificate at "
                             "the suite's current e-values: treat the model as not certified "
                             "until it is certified again (the FDR bound covers the certified "
                             "set at every time, not one certification forever).",
    "regression": "Check the change round against deploys and traffic changes; the new epoch "
                  "shows whether the model is violated.",
    "improvement": "The risk went back below alpha: the violated epoch ended; a new epoch must "
                   "earn the certificate.",
    "judge_drift": "Look for a judge prompt or judge-model change; certificates stay valid.",
    "precision_reached": "The estimate is precise enough: label requests for it can stop.",
    "best_model": "The suite's best model is identified at the configured confidence.",
    "non_inferior": "The candidate is no worse than the baseline by more than the margin, at the "
                    "comparison's confidence: the rollout may proceed.",
    "inferior": "The candidate is worse than the baseline by more than the margin: stop or roll "
                "back the rollout and look at the examples where the versions disagree.",
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
    names = ("suite", "model") if kind in PER_MODEL else ("suite", "model", "certificate",
                                                           "method")
    if kind in COMPARISON:
        names = ("suite", "comparison", "baseline", "candidate")
    for name in names:
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


def _percent(confidence: Any) -> str:
    return f"{100 * confidence:.4g}%" if isinstance(confidence, float | int) else "?"


def describe(kind: str, ev: Mapping[str, Any]) -> str:
    """One line saying what the evidence shows, in the terms of the verdict or the detector.

    A verdict (certified, violated, certificate lost by violation) is stated with its one-sided
    bound and confidence and the test that crossed; a detector's alarm (regression, its
    certificate lost, improvement, judge drift) with the risk before and after and the
    detector's own statistic and threshold.

    Examples
    --------
    >>> text = describe("certified", {"verdict": "certified", "risk_upper_bound": 0.1,
    ...     "bound_confidence": 0.95, "test": "certify", "log_e_value": 3.1,
    ...     "log_threshold": 2.9957, "rounds": 412})
    >>> print(text.replace("; ", chr(10)))
    risk <= 0.1 (one-sided, 95% confidence)
    certify log e-value 3.1 >= threshold 2.996
    412 rounds
    >>> text = describe("regression", {"statistic": 5.6e39, "threshold": 225000.0,
    ...     "risk_before": 0.051, "risk_after": 0.236, "change_round": 935, "rounds_watched": 900})
    >>> print(text.replace("; ", chr(10)))
    risk 0.051 -> 0.236 (estimates before / after round 935)
    regression detector statistic 5.6e+39 >= threshold 2.25e+05
    900 rounds watched
    """
    parts = []
    if kind in COMPARISON:
        parts.append(_comparison_line(ev))
    upper, lower = ev.get("risk_upper_bound"), ev.get("risk_lower_bound")
    conf = _percent(ev.get("bound_confidence"))
    if upper is not None:
        parts.append(f"risk <= {_fmt(upper)} (one-sided, {conf} confidence)")
    elif lower is not None:
        parts.append(f"risk >= {_fmt(lower)} (one-sided, {conf} confidence)")
    if ev.get("log_e_value") is not None and ev.get("log_threshold") is not None:
        test = f"{ev['test']} " if ev.get("test") else ""
        parts.append(f"{test}log e-value {_fmt(ev['log_e_value'])} >= "
                     f"threshold {_fmt(ev['log_threshold'])}")
    if ev.get("risk_before") is not None and ev.get("risk_after") is not None:
        at = ev.get("change_round")
        parts.append(f"risk {ev['risk_before']:.3g} -> {ev['risk_after']:.3g} (estimates before"
                     f" / after {'the change' if at is None else f'round {at}'})")
    if ev.get("statistic") is not None and ev.get("threshold") is not None:
        what = {"certificate_lost": "regression"}.get(kind, kind.replace("_", " "))
        parts.append(f"{what} detector statistic {_fmt(ev['statistic'])} >= threshold "
                     f"{_fmt(ev['threshold'])}")
    if ev.get("rounds_watched") is not None:
        parts.append(f"{ev['rounds_watched']} rounds watched")
    elif ev.get("rounds") is not None:
        parts.append(f"{ev['rounds']} rounds")
    if kind in COMPARISON and ev.get("labels") is not None:
        parts.append(f"{ev['labels']} labels, {ev.get('missing_pairs', 0)} missing")
    return "; ".join(p for p in parts if p) or "no evidence attached"


def _comparison_line(ev: Mapping[str, Any]) -> str:
    """``risk(candidate) - risk(baseline) <= bound`` (or ``>=``) with its confidence.

    Examples
    --------
    >>> print(_comparison_line({"bound": 0.018, "bound_side": "upper", "bound_confidence": 0.95,
    ...                         "estimate": -0.004, "margin": 0.02}).replace("; ", chr(10)))
    risk(candidate) - risk(baseline) <= 0.018 (one-sided, 95% confidence
    margin 0.02, estimate -0.004)
    """
    bound, side = ev.get("bound"), ev.get("bound_side")
    if bound is None or side not in ("upper", "lower"):
        return ""
    op = "<=" if side == "upper" else ">="
    est = ev.get("estimate")
    tail = "" if est is None else f", estimate {_fmt(est)}"
    return (f"risk(candidate) - risk(baseline) {op} {_fmt(bound)} (one-sided, "
            f"{_percent(ev.get('bound_confidence'))} confidence; margin "
            f"{_fmt(ev.get('margin'))}{tail})")


def alert_annotations(record: Mapping[str, Any], grafana_url: str | None = None) -> dict[str, str]:
    """Return the annotations (summary, evidence, runbook, dashboard link) of a record.

    Examples
    --------
    >>> ann = alert_annotations({"kind": "violated", "suite": "qa", "model": "m1",
    ...     "certificate": "risk", "method": "r_eval", "round": 12, "id": "ab12",
    ...     "evidence": {"verdict": "violated", "test": "violate", "risk_lower_bound": 0.1,
    ...                  "bound_confidence": 0.95, "log_e_value": 3.1,
    ...                  "log_threshold": 2.9957, "rounds": 12}})
    >>> ann["summary"]
    'violated: m1 / risk (qa, r_eval) at round 12: risk >= 0.1 at 95% confidence'
    >>> ann["description"]
    'risk >= 0.1 (one-sided, 95% confidence); violate log e-value 3.1 >= threshold 2.996; 12 rounds'
    """
    kind = str(record.get("kind", ""))
    raw = record.get("evidence")
    ev: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    who = f"{record.get('model')} / {record.get('certificate')} ({record.get('suite')}, " \
          f"{record.get('method')})"
    if kind in PER_MODEL:
        who = f"{record.get('model')} ({record.get('suite')})"
    if kind in COMPARISON:
        who = (f"{record.get('candidate')} vs {record.get('baseline')} "
               f"({record.get('suite')}, {record.get('comparison')})")
    summary = f"{kind.replace('_', ' ')}: {who} at round {record.get('round')}"
    conf = _percent(ev.get("bound_confidence"))
    if ev.get("risk_upper_bound") is not None:
        summary += f": risk <= {_fmt(ev['risk_upper_bound'])} at {conf} confidence"
    elif ev.get("risk_lower_bound") is not None:
        summary += f": risk >= {_fmt(ev['risk_lower_bound'])} at {conf} confidence"
    elif ev.get("risk_before") is not None and ev.get("risk_after") is not None:
        summary += f": risk {ev['risk_before']:.3g} -> {ev['risk_after']:.3g}"
    elif kind in COMPARISON and ev.get("bound") is not None:
        op = "<=" if ev.get("bound_side") == "upper" else ">="
        summary += f": difference {op} {_fmt(ev['bound'])} at {conf} confidence"
    out = {
        "summary": summary,
        "description": describe(kind, ev),
        "evidence": json.dumps(ev, sort_keys=True, default=str)[:4000],
        "alert_id": str(record.get("id", "")),
        "runbook": RUNBOOK.get(kind, "See the certmon alert reference."),
    }
    dashboard = dashboard_url(grafana_url, record)
    if dashboard:
        out["dashboard"] = dashboard
    return out


def state_key(record: Mapping[str, Any]) -> tuple[str, ...]:
    """Return the key of a record's certificate-state alert (suite, model, certificate, method).

    A comparison's record (or labels) with a ``comparison``: ``("comparison", suite,
    comparison, candidate)``, one verdict per candidate.
    """
    if record.get("comparison") is not None:
        return ("comparison", *(str(record.get(n, "")) for n in ("suite", "comparison",
                                                                  "candidate")))
    return ("state", *(str(record.get(n, "")) for n in ("suite", "model", "certificate", "method")))


def _verdict_evidence(view: Mapping[str, Any], violated: bool) -> dict[str, Any]:
    valid = view.get("cs_valid", True) is not False
    return {
        "verdict": "violated" if violated else "certified",
        "test": "violate" if violated else "certify",
        "log_e_value": view.get("log_e_violate" if violated else "log_e_certify"),
        "log_threshold": view.get("log_threshold"),
        "rounds": view.get("rounds"),
        "risk_upper_bound": view.get("risk_upper_bound"),
        "risk_lower_bound": view.get("risk_lower_bound"),
        "bound_confidence": view.get("bound_confidence"),
        "two_sided_cs_lower": view.get("cs_lower") if valid else None,
        "two_sided_cs_upper": view.get("cs_upper") if valid else None,
    }


def state_records(
    state: Mapping[str, Any], methods: Collection[str] | None
) -> list[dict[str, Any]]:
    """Alert records describing the state of every certificate method of a STATE document.

    ``certified`` / ``violated`` from the method's status; ``certificate_lost`` when the
    certificate ``lost`` its certificate and has not earned it again (the certificate's
    ``lost`` flag, for its primary method: a regression ended a certified epoch, or the
    violation test crossed after certification).

    Examples
    --------
    >>> view = {"status": "violated", "certified_at_round": 40, "violated_at_round": 90}
    >>> state = {"suites": {"qa": {"models": {"m1": {"certificates": {"risk": {
    ...     "methods": {"r_eval": view}}}}}}}}
    >>> [(r["kind"], r["round"]) for r in state_records(state, None)]
    [('certificate_lost', 90)]
    >>> state["suites"]["qa"]["models"]["m1"]["certificates"]["risk"].update(lost=True,
    ...     epoch={"epoch": 2, "started_round": 70})
    >>> view.update(status="pending", certified_at_round=None, violated_at_round=None,
    ...             primary=True)
    >>> [(r["kind"], r["round"]) for r in state_records(state, None)]
    [('certificate_lost', 70)]
    """
    out: list[dict[str, Any]] = []
    for suite, sv in (state.get("suites") or {}).items():
        for model, mv in (sv.get("models") or {}).items():
            for cert, cv in (mv.get("certificates") or {}).items():
                epoch_view = cv.get("epoch") or {}
                for method, view in (cv.get("methods") or {}).items():
                    if methods is not None and method not in methods:
                        continue
                    status = view.get("status")
                    violated = status == "violated"
                    in_epoch = violated and view.get("certified_at_round") is not None
                    lost = in_epoch or (bool(cv.get("lost")) and status != "certified"
                                        and view.get("primary", True) is not False)
                    if status not in ("certified", "violated") and not lost:
                        continue
                    if lost and not in_epoch:  # lost to a regression, not earned since
                        rnd, ts = epoch_view.get("started_round"), epoch_view.get("started_ts")
                        evidence: dict[str, Any] = {
                            "epoch": epoch_view.get("epoch"), "status": status,
                            "rounds": view.get("rounds")}
                    else:
                        rnd = view.get("violated_at_round" if violated else "certified_at_round")
                        ts, evidence = view.get("status_changed_ts"), _verdict_evidence(
                            view, violated)
                    out.append({
                        "kind": "certificate_lost" if lost else status,
                        "suite": suite, "model": model, "certificate": cert, "method": method,
                        "round": rnd, "ts": ts, "evidence": evidence,
                    })
        out += _comparison_records(suite, sv.get("comparisons") or {})
    return out


def _comparison_records(suite: str, comparisons: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``non_inferior`` / ``inferior`` records of a suite's ``comparisons`` STATE block.

    Examples
    --------
    >>> view = {"c": {"baseline": "a", "design": "paired", "candidates": {
    ...     "b": {"status": "inferior", "decided_at_round": 40, "labels": 80},
    ...     "d": {"status": "pending"}}}}
    >>> [(r["kind"], r["candidate"], r["round"]) for r in _comparison_records("qa", view)]
    [('inferior', 'b', 40)]
    """
    out: list[dict[str, Any]] = []
    for name, cv in comparisons.items():
        for cand, view in (cv.get("candidates") or {}).items():
            status = view.get("status")
            if status not in COMPARISON:
                continue
            out.append({"kind": status, "suite": suite, "model": cand, "certificate": name,
                        "method": cv.get("design"), "round": view.get("decided_at_round"),
                        "ts": None, "evidence": dict(view), "comparison": name,
                        "baseline": cv.get("baseline"), "candidate": cand})
    return out
