"""``audit_policy = "hedged"``: claim on the average of the per-label and per-unit e-processes.

Under a hedged audit a model runs both processes already run under ``active`` (a model's
:class:`~monitor.stats.betting.active_online.ActiveAudit`, restricted to the uniform policy,
and the certificates' per-label groups in audit order): every audited unit is a per-unit
round *and* a per-label round. Its :class:`~monitor.stats.betting.hedge.HedgedPairs` pairs,
per audited unit in audit order, the per-unit e-process's log e-value at that unit
(:meth:`ActiveAudit.take_settled`) with the certificate's primary method's log e-values after
that unit's round (:func:`hedged_round`), and the certificate's verdict is their average's
(:func:`hedged_status`). A pending label holds both back; a missing one counts at its worst
value in both.

Examples
--------
>>> from monitor.config import CertificateConfig, SuiteConfig
>>> from monitor.state.prototypes import ModelFactory
>>> cert = CertificateConfig(name="r", alpha=0.3, delta=0.1)
>>> cfg = SuiteConfig(name="qa", audit_rate=0.5, audit_policy="hedged", certificates=[cert])
>>> m = ModelFactory(cfg).new("m")
>>> m.hedge is not None, m.active is not None, hedged_status(m.hedge, 0)
(True, True, 'pending')

Notes
-----
Validity (docs/guarantees.md, "Hedged audits"): both processes are nonnegative
supermartingales at the audit times (the per-label one on its rounds, the per-unit one sampled
at the audited units, stopping times), so their average read at the *same* audited unit is an
e-process at those times and Ville's inequality bounds its crossing by delta. Assumptions: the
audit coin is certmon's hash, independent of the labels, with known probability
``audit_rate``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from monitor.config import CertificateConfig
from monitor.state.model import ModelState, finite_or_none
from monitor.state.views import hedged_status, hedged_view, label_fields

__all__ = ["HEDGED", "hedged_evidence", "hedged_round", "hedged_status", "hedged_units",
           "hedged_view"]

HEDGED = "hedged"


def hedged_units(m: ModelState) -> None:
    """Hand the per-unit values of the audited units settled since the last call to the pairs."""
    if m.hedge is None or m.active is None:
        return
    for _, row in m.active.take_settled():
        m.hedge.unit(row)


def hedged_round(m: ModelState, certs: Sequence[CertificateConfig], labelled: bool) -> None:
    """After a per-label round of ``m`` (``labelled`` False: a missing label): pair it.

    The row is each certificate's primary method's certify and violate log e-values now.
    """
    if m.hedge is None:
        return
    hedged_units(m)  # (settled before the round: the per-unit side of the same unit)
    row: list[float] = []
    for c in certs:
        mon = m.monitors[(c.name, c.primary_method)]
        row += [mon.log_e_certify, mon.log_e_violate]
    m.hedge.label(row, labelled)


def hedged_evidence(m: ModelState, i: int, cert: CertificateConfig, level: float,
                    multiplicity: str) -> dict[str, Any]:
    """Evidence of a hedged certificate's claim: both log e-values, their average, labels.

    No risk bound: the confidence sequences are the per-label process' alone (at the full
    level), not the average's; pairing one with the average's verdict would need a union
    bound, so the evidence states none.
    """
    h, a = m.hedge, m.active
    if h is None or a is None:
        raise ValueError("hedged_evidence: the model has no hedged audit")
    status = hedged_status(h, i)
    j = 2 * i + (1 if status == "violated" else 0)
    vals = h.at_cross[:, j] if status != "pending" else h.last[:, j]
    labels = h.crossed_at_labels(j)
    return {
        "verdict": status,
        "test": "violate" if status == "violated" else "certify",
        "audit_policy": HEDGED,
        "log_e_value": finite_or_none(vals[2]),
        "log_e_unit": finite_or_none(vals[0]),
        "log_e_label": finite_or_none(vals[1]),
        "log_threshold": finite_or_none(math.log(1.0 / level)),
        # labels used by this epoch's processes (the pairs count from the stream's start,
        # as the model's rounds do; an epoch starts at a round count)
        "labels": (h.labels if labels is None else labels) - m.epochs[cert.name].started_round,
        "audited_paired": h.paired,
        "units": a.units,
        **label_fields(m),
        "alpha": cert.alpha,
        "delta": cert.delta,
        "threshold_delta": level,
        "multiplicity": multiplicity,
        "epoch": m.epochs[cert.name].number,
    }
