"""Alertmanager sink: certmon's certificate alerts pushed to Alertmanager's v2 API.

:class:`AlertmanagerSink` implements the :class:`monitor.sinks.Sink` protocol with the
standard library only; :mod:`consumers.alertmanager.records` maps alert records to
Alertmanager labels and annotations.

Examples
--------
>>> from consumers.alertmanager import alert_labels
>>> alert_labels({"kind": "certificate_lost", "suite": "qa", "model": "m1"})["severity"]
'critical'
"""

from __future__ import annotations

from consumers.alertmanager.records import alert_annotations, alert_labels, rfc3339
from consumers.alertmanager.sink import AlertmanagerSink, Transport

__all__ = ["AlertmanagerSink", "Transport", "alert_annotations", "alert_labels", "rfc3339"]
