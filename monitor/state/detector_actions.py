"""Acting on the change detectors of one model: new epochs, their alerts, judge-drift restarts.

The detectors decide (:class:`~monitor.state.epochs.CertificateEpochs`,
:class:`~monitor.state.judge_drift.JudgeDrift`); these functions turn the decisions into alerts
and state changes of the :class:`~monitor.state.model.ModelState`, once per round, right after
the suite refreshed the statuses. See :mod:`monitor.state.epochs` for the rules and guarantees.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from monitor.alerts import Alert, make_alert
from monitor.config import CertificateConfig
from monitor.state.model import ModelState
from monitor.state.views import detector_evidence

__all__ = ["act_on_detectors"]


def act_on_detectors(
    suite: str,
    model: ModelState,
    certs: Sequence[CertificateConfig],
    threshold_delta: Callable[[CertificateConfig], float],
    multiplicity: str,
    ts: float,
    alerts: list[Alert],
) -> bool:
    """Emit regression / improvement / judge-drift alerts and act on them.

    Returns True when an epoch ended (the suite's family statuses then need a refresh).
    """
    renewed = False
    rounds = model.counts["rounds"]
    for cert in certs:
        primary = cert.primary_method
        status = model.effective[(cert.name, primary)].status
        epochs = model.epochs[cert.name]
        kind = epochs.decide(status)
        if kind is None:
            continue
        renewed = True
        # the detector that fired speaks, not the ending epoch's certify/violate tests
        evidence = detector_evidence(model, cert.name, primary, epochs.evidence(kind, rounds),
                                     status, multiplicity)
        alerts.append(make_alert(kind, suite, model.name, cert.name, primary, rounds, ts,
                                 evidence))
        if kind == "regression" and status == "certified":
            alerts.append(make_alert("certificate_lost", suite, model.name, cert.name, primary,
                                     rounds, ts, evidence))
        model.new_epoch(cert, threshold_delta(cert), kind, ts if math.isfinite(ts) else None)
    judge = model.judge
    drift = None if judge is None else judge.alarm()
    if judge is not None and drift is not None and certs:
        watched, at = drift["rounds_watched"], drift["change_round_in_watch"]
        drift["change_round"] = None if at is None else rounds - watched + at
        alerts.append(make_alert("judge_drift", suite, model.name, certs[0].name, "judge",
                                 rounds, ts, drift))
        judge.restart()
        model.restart_reliance()
    return renewed
