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

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from consumers.alertmanager.records import alert_annotations, alert_labels, rfc3339
    from consumers.alertmanager.sink import AlertmanagerSink, Transport

__all__ = ["AlertmanagerSink", "Transport", "alert_annotations", "alert_labels", "rfc3339"]

# imported on first use: the sink pulls in http.client, ssl and email, which a replay into
# files never needs (``consumers.alertmanager.wiring`` is imported by every command)
_HOMES = {"AlertmanagerSink": "sink", "Transport": "sink", "alert_annotations": "records",
          "alert_labels": "records", "rfc3339": "records"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
