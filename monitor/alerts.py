"""Alerts: the records certmon emits about certificates, with deterministic ids.

Label requests are built by :mod:`monitor.label_requests`; :func:`label_request` is
re-exported here for the callers that import it from this module.

An alert's id is the first 32 hex characters of SHA-256 over the canonical JSON of
``[suite, model, certificate, kind, round]``. A replay of the same events, or a restart
from a checkpoint, re-emits the same ids, so receivers deduplicate: outputs are
*at-least-once* with stable ids.

The engine emits, for each certificate's *primary* method (``primary`` in the config;
STATE.json shows every method): ``certified`` when the status becomes certified,
``violated`` when it becomes violated, and additionally ``certificate_lost`` when a
previously certified model becomes violated (same round, both alerts). ``round`` is the
model's number of rounds at that moment and ``ts`` the event time of the triggering event.

A comparison (``[[suites.comparisons]]``, :mod:`monitor.state.comparisons`) emits
``non_inferior`` / ``inferior`` when a candidate's verdict changes: ``model`` is the candidate,
``certificate`` the comparison's name, ``method`` its design and ``round`` its paired rounds;
the record also carries ``comparison``, ``baseline`` and ``candidate``, and its evidence the
difference's estimate, the one-sided bound that agrees with the verdict and the labels used.

Examples
--------
>>> alert_id("qa", "m1", "risk", "certified", 120) == alert_id("qa", "m1", "risk", "certified", 120)
True
"""

from __future__ import annotations

import json
from hashlib import sha256
from typing import Any, Final

from monitor.label_requests import label_request

__all__ = ["ALERT_KINDS", "Alert", "alert_id", "label_request", "make_alert"]

Alert = dict[str, Any]
ALERT_KINDS: Final = (
    "certified",
    "violated",
    "certificate_lost",
    "certificate_withdrawn",
    "regression",
    "improvement",
    "judge_drift",
    "precision_reached",
    "best_model",
    "non_inferior",
    "inferior",
)


def alert_id(suite: str, model: str, certificate: str, kind: str, round_: int) -> str:
    """Deterministic alert id.

    Examples
    --------
    >>> a = alert_id("qa", "m1", "risk", "certified", 120)
    >>> len(a), a == alert_id("qa", "m1", "risk", "certified", 120)
    (32, True)
    >>> a == alert_id("qa", "m1", "risk", "violated", 120)
    False
    """
    canonical = json.dumps(
        [suite, model, certificate, kind, int(round_)], separators=(",", ":"), ensure_ascii=True
    )
    return sha256(canonical.encode("ascii")).hexdigest()[:32]


def make_alert(
    kind: str,
    suite: str,
    model: str,
    certificate: str,
    method: str,
    round_: int,
    ts: float,
    evidence: dict[str, Any],
) -> Alert:
    """Build an alert record (``ts`` is the event time of the event that triggered it).

    Examples
    --------
    >>> a = make_alert("certified", "qa", "m1", "risk", "r_eval", 7, 1.5, {"rounds": 7})
    >>> a["id"] == alert_id("qa", "m1", "risk", "certified", 7), a["kind"], a["round"]
    (True, 'certified', 7)
    """
    if kind not in ALERT_KINDS:
        raise ValueError(f"unknown alert kind {kind!r}")
    return {
        "id": alert_id(suite, model, certificate, kind, round_),
        "kind": kind,
        "suite": suite,
        "model": model,
        "certificate": certificate,
        "method": method,
        "round": int(round_),
        "ts": ts,
        "evidence": evidence,
    }
