"""The STATE.json view of a model and the evidence attached to its alerts (pure functions).

Split out of :mod:`monitor.state.suite`; both read a :class:`~monitor.state.model.ModelState`
and never change it.

Examples
--------
>>> from monitor.config import CertificateConfig
>>> from monitor.state.model import ModelState
>>> cert = CertificateConfig(name="risk", alpha=0.1, delta=0.05, methods=["r_eval"], cs_grid=20)
>>> m = ModelState.new("m", [cert], lambda c: c.delta)
>>> view = model_view(m, [cert])
>>> view["certificates"]["risk"]["methods"]["r_eval"]["status"], view["counts"]["rounds"]
('pending', 0)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from monitor.config import CertificateConfig
from monitor.state.model import ModelState, finite_or_none

__all__ = ["alert_evidence", "model_view"]


def alert_evidence(
    m: ModelState, cert: str, meth: str, kind: str, multiplicity: str
) -> dict[str, Any]:
    """Evidence of an alert of ``kind`` for ``(cert, meth)`` of model ``m``."""
    mon = m.monitors[(cert, meth)]
    log_e = mon.log_e_certify if kind == "certified" else mon.log_e_violate
    return {
        "log_e_value": finite_or_none(log_e),
        "log_threshold": finite_or_none(mon.log_threshold),
        "rounds": mon.rounds,
        "cs_lower": finite_or_none(mon.cs_lower),
        "cs_upper": finite_or_none(mon.cs_upper),
        "rho_weights": [float(w) for w in mon.rho_weights],
        "rhos": [float(r) for r in mon.rhos],
        "risk_estimate": finite_or_none(mon.risk_estimate),
        "judge_bias": m.judge_bias,
        "alpha": mon.alpha,
        "delta": mon.delta,
        "threshold_delta": mon.threshold_delta,
        "multiplicity": multiplicity,
        "epoch": m.epochs[cert].number,
    }


def model_view(
    m: ModelState, certs_config: Sequence[CertificateConfig], shown_only: bool = False
) -> dict[str, Any]:
    """Model ``m``'s part of STATE.json for the suite's certificates ``certs_config``.

    ``shown_only`` keeps only each certificate's primary method (the reduced view the
    ``[metrics] detail = "shown"`` scrape reads; STATE.json always has every method).
    """
    certs: dict[str, Any] = {}
    for c in certs_config:
        methods: dict[str, Any] = {}
        for meth in (c.primary_method,) if shown_only else c.methods:
            mon = m.monitors[(c.name, meth)]
            eff = m.effective[(c.name, meth)]
            methods[meth] = {
                "rounds": mon.rounds,
                "log_e_certify": finite_or_none(mon.log_e_certify),
                "log_e_violate": finite_or_none(mon.log_e_violate),
                "cs_lower": finite_or_none(mon.cs_lower),
                "cs_upper": finite_or_none(mon.cs_upper),
                "status": eff.status,
                "certified_at_round": eff.certified_at_round,
                "violated_at_round": eff.violated_at_round,
                "risk_estimate": finite_or_none(mon.risk_estimate),
                "log_threshold": finite_or_none(mon.log_threshold),
                "rho_weights": [float(w) for w in mon.rho_weights],
                "rhos": [float(r) for r in mon.rhos],
                "cs_valid": bool(mon.cs_valid),
                "status_changed_ts": eff.changed_ts,
                "primary": meth == c.primary_method,
            }
        certs[c.name] = {"alpha": c.alpha, "delta": c.delta, "methods": methods,
                         "epoch": m.epochs[c.name].view()}
    return {
        "counts": dict(m.counts),
        "judge_bias": m.judge_bias,
        "pending_units": m.pending_units,
        "orphan_labels": m.orphan_labels,
        "certificates": certs,
        "judge_drift": None if m.judge is None else m.judge.view(),
        **({} if m.strata is None else {"strata": m.strata.view()}),
    }
