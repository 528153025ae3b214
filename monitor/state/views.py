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

import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from monitor.config import CertificateConfig
from monitor.state.model import ModelState, finite_or_none
from monitor.stats.betting.active_online import ActiveAudit
from monitor.stats.betting.autoeval_plugin import PlugInTest
from monitor.stats.betting.hedge import HedgedPairs
from monitor.stats.betting.risk import RiskMonitor
from monitor.stats.betting.verdict import verdict_bound

if TYPE_CHECKING:
    from monitor.state.suite import SuiteState

__all__ = [
    "VERDICT_KINDS",
    "active_evidence",
    "active_status",
    "active_view",
    "alert_evidence",
    "certificate_lost",
    "detector_evidence",
    "hedged_status",
    "hedged_view",
    "label_fields",
    "model_view",
    "suite_view",
    "suite_view_parts",
    "verdict_fields",
    "withdrawal_evidence",
]


VERDICT_KINDS = ("certified", "violated", "certificate_lost")
"""Alert kinds whose evidence is a test's verdict (the others come from a change detector)."""


def verdict_fields(status: str, alpha: float, threshold_delta: float, cs_lower: float,
                   cs_upper: float, cs_valid: bool) -> dict[str, Any]:
    """Return the one-sided bound that agrees with ``status`` and its confidence.

    ``risk_upper_bound`` while certified, ``risk_lower_bound`` while violated (None otherwise):
    :func:`~monitor.stats.betting.verdict.verdict_bound`, valid at ``bound_confidence = 1 -
    threshold_delta``, the level of the test that crossed.

    Examples
    --------
    >>> verdict_fields("certified", 0.1, 0.05, 0.0, 0.18, True)
    {'risk_upper_bound': 0.1, 'risk_lower_bound': None, 'bound_confidence': 0.95}
    """
    bound = verdict_bound(status, alpha, cs_lower, cs_upper, cs_valid)
    return {
        "risk_upper_bound": bound[1] if bound is not None and bound[0] == "upper" else None,
        "risk_lower_bound": bound[1] if bound is not None and bound[0] == "lower" else None,
        "bound_confidence": 1.0 - threshold_delta,
    }


def alert_evidence(
    m: ModelState, cert: str, meth: str, kind: str, multiplicity: str
) -> dict[str, Any]:
    """Evidence of a verdict alert of ``kind`` (:data:`VERDICT_KINDS`) for ``(cert, meth)``.

    The verdict's own test (certify for ``certified``, violate for ``violated`` and a
    ``certificate_lost`` by violation) with its log e-value and threshold; the one-sided bound
    that agrees with the verdict (:func:`verdict_fields`); the two-sided confidence sequence
    under its own name (``two_sided_cs_lower`` / ``two_sided_cs_upper``, same confidence).
    """
    if kind not in VERDICT_KINDS:
        raise ValueError(f"{kind!r} is not a verdict; use detector_evidence")
    mon = m.monitors[(cert, meth)]
    certified = kind == "certified"
    log_e = mon.log_e_certify if certified else mon.log_e_violate
    test = mon.certify_test if certified else mon.violate_test
    # a claim beyond the applied rounds (monitor.state.audit_order) crossed on its lower bound
    # of the audit-ordered wealth, which is the test's maximum
    claimed = test.crossed_at_round is not None and test.max_log_e > log_e
    valid = bool(mon.cs_valid)
    return {
        "verdict": "certified" if certified else "violated",
        "test": "certify" if certified else "violate",
        "log_e_value": finite_or_none(test.max_log_e if claimed else log_e),
        "log_threshold": finite_or_none(mon.log_threshold),
        "rounds": mon.rounds,
        "labels": mon.rounds,  # human labels used: one per round
        **label_fields(m),
        **verdict_fields("certified" if certified else "violated", mon.alpha,
                         mon.threshold_delta, mon.cs_lower, mon.cs_upper, valid),
        "two_sided_cs_lower": finite_or_none(mon.cs_lower) if valid else None,
        "two_sided_cs_upper": finite_or_none(mon.cs_upper) if valid else None,
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


def withdrawal_evidence(m: ModelState, cert: str, meth: str, multiplicity: str
                        ) -> dict[str, Any]:
    """Evidence of a ``certificate_withdrawn`` alert (e-BH no longer selects the certificate).

    Under ``multiplicity = "e_bh"`` the certified set is recomputed from the family's current
    certify e-values after every round; the false-discovery bound holds for the set at every
    time, so a member can leave it. States the member's current certify log e-value.
    """
    mon = m.monitors[(cert, meth)]
    return {
        "verdict": "pending",
        "test": "certify",
        "log_e_value": finite_or_none(mon.log_e_certify),
        "log_threshold": finite_or_none(mon.log_threshold),
        "rounds": mon.rounds,
        "labels": mon.rounds,
        **label_fields(m),
        "alpha": mon.alpha,
        "delta": mon.delta,
        "multiplicity": multiplicity,
        "epoch": m.epochs[cert].number,
    }


def label_fields(m: ModelState) -> dict[str, int]:
    """Return the labels behind a claim: pending, missing, arrived but waiting for an earlier one.

    A claim holds with every pending label at its worst value for it and every missing label
    at its worst value (``docs/guarantees.md``): none of them can void it.
    """
    return {
        "labels_pending": m.pending_units,
        "labels_missing": m.counts["expired_pending"],
        "labels_waiting": len(m.order.ready),
        "audited_units": audited_units(m),
    }


def audited_units(m: ModelState) -> int:
    """Return how many of the model's units were audited (under active audits: every one).

    Uniform audits: the audit positions given. Active audits: the labels used, pending and
    missing (the uniform-share units, which also have audit positions, are a part of them).
    """
    if m.active is not None:
        return int(m.active.labels + m.active.pending + m.counts["expired_pending"])
    return m.order.next_position


def detector_evidence(
    m: ModelState, cert: str, meth: str, detector: dict[str, Any], status_before: str,
    multiplicity: str,
) -> dict[str, Any]:
    """Evidence of a change-detector alert for ``(cert, meth)`` of model ``m``.

    Kinds ``regression``, its ``certificate_lost``, ``improvement``; read before the epoch ends.

    ``detector`` is :meth:`~monitor.state.epochs.CertificateEpochs.evidence`: the detector's
    own ``statistic`` and ``threshold`` (the alarm), its change-round estimate and the risk
    estimated ``risk_before`` / ``risk_after`` that round (point estimates, no bound). Nothing
    of the ending epoch's certify / violate tests is attached: they assumed the stationarity
    the alarm refutes, and they did not decide this alert.
    """
    mon = m.monitors[(cert, meth)]
    return {
        **detector,
        "status_before": status_before,
        "rounds": mon.rounds,
        "alpha": mon.alpha,
        "delta": mon.delta,
        "judge_bias": m.judge_bias,
        "multiplicity": multiplicity,
    }


def certificate_lost(m: ModelState, cert: CertificateConfig) -> bool:
    """Whether ``cert`` of model ``m`` lost its certificate and has not earned it again.

    True while the primary method's status is not ``certified`` in an epoch that began with a
    regression of a certified epoch, and while it is ``violated`` after being certified in the
    same epoch. What ``CertmonCertificateLost`` (pushed or rule) describes.

    Examples
    --------
    >>> from monitor.config import CertificateConfig
    >>> cert = CertificateConfig(name="risk", alpha=0.1, delta=0.05, methods=["r_eval"])
    >>> m = ModelState.new("m", [cert], lambda c: c.delta)
    >>> m.effective[("risk", "r_eval")].status = "certified"
    >>> m.new_epoch(cert, 0.05, "regression", None)
    >>> certificate_lost(m, cert)
    True
    """
    eff = m.effective[(cert.name, cert.primary_method)]
    if eff.status == "violated" and eff.certified_at_round is not None:
        return True
    return eff.status != "certified" and m.epochs[cert.name].began_with_lost_certificate


def active_view(m: ModelState, certs_config: Sequence[CertificateConfig]) -> dict[str, Any]:
    """Return the ``active`` part of a model's view (``audit_policy = "active"``).

    Per certificate its status and the claimed log e-values of its certify and violate
    inverse-propensity tests (pending labels at their worst), with the labels they used.
    """
    a = m.active
    if a is None:
        return {}
    certs: dict[str, Any] = {}
    for i, c in enumerate(certs_config):
        certs[c.name] = {
            "status": active_status(a, i),
            "log_e_certify": finite_or_none(a.log_e(2 * i)),
            "log_e_violate": finite_or_none(a.log_e(2 * i + 1)),
            "certified_at_labels": a.crossed_at_labels(2 * i),
            "violated_at_labels": a.crossed_at_labels(2 * i + 1),
        }
    return {"labels": a.labels, "units": a.units, "pending": a.pending,
            "policy": a.policy(), "certificates": certs}


def active_status(a: ActiveAudit, i: int) -> str:
    """Certificate ``i``'s verdict under an active audit: violated, certified or pending."""
    if a.status(2 * i + 1) == "violated":
        return "violated"
    return a.status(2 * i)


def active_evidence(m: ModelState, i: int, cert: CertificateConfig, level: float,
                    multiplicity: str) -> dict[str, Any]:
    """Evidence of an active certificate's claim: its test, wealth and the labels it used."""
    a = m.active
    if a is None:
        raise ValueError("active_evidence: the model has no active audit")
    status = active_status(a, i)
    j = 2 * i + (1 if status == "violated" else 0)
    return {
        "verdict": status,
        "test": "violate" if status == "violated" else "certify",
        "audit_policy": "active",
        "log_e_value": finite_or_none(a.max_log_e(j) if status != "pending" else a.log_e(j)),
        "log_threshold": finite_or_none(math.log(1.0 / level)),
        "labels": a.labels,
        "units": a.units,
        **label_fields(m),
        "policy": a.policy(),
        "alpha": cert.alpha,
        "delta": cert.delta,
        "threshold_delta": level,
        "multiplicity": multiplicity,
        "epoch": m.epochs[cert.name].number,
    }


def hedged_status(h: HedgedPairs, i: int) -> str:
    """Certificate ``i``'s verdict under a hedged audit: violated, certified or pending."""
    if h.crossed[2 * i + 1]:
        return "violated"
    return "certified" if h.crossed[2 * i] else "pending"


def hedged_view(m: ModelState, certs_config: Sequence[CertificateConfig]) -> dict[str, Any]:
    """Return the ``hedged`` part of a model's view: per certificate both values and their mean.

    The values are at the last paired audited unit; ``labels`` the labels used by the pairs.
    """
    h = m.hedge
    if h is None:
        return {}
    fin = finite_or_none
    certs: dict[str, Any] = {}
    for i, c in enumerate(certs_config):
        entry: dict[str, Any] = {"status": hedged_status(h, i)}
        for k, side in ((2 * i, "certify"), (2 * i + 1, "violate")):
            entry[f"log_e_{side}"] = fin(h.last[2, k])
            entry[f"log_e_unit_{side}"] = fin(h.last[0, k])
            entry[f"log_e_label_{side}"] = fin(h.last[1, k])
            entry[f"max_log_e_{side}"] = fin(h.max[k])
        entry["certified_at_labels"] = h.crossed_at_labels(2 * i)
        entry["violated_at_labels"] = h.crossed_at_labels(2 * i + 1)
        certs[c.name] = entry
    units, pending = (0, 0) if m.active is None else (m.active.units, m.active.pending)
    return {"labels": h.labels, "audited_paired": h.paired, "units": units,
            "pending": pending, "certificates": certs}

def model_view(
    m: ModelState, certs_config: Sequence[CertificateConfig], shown_only: bool = False
) -> dict[str, Any]:
    """Model ``m``'s part of STATE.json for the suite's certificates ``certs_config``.

    ``shown_only`` keeps only each certificate's primary method (the reduced view the
    ``[metrics] detail = "shown"`` scrape reads; STATE.json always has every method).
    """
    certs: dict[str, Any] = {}
    monitors, effective, fin = m.monitors, m.effective, finite_or_none
    for c in certs_config:
        methods: dict[str, Any] = {}
        primary = c.primary_method
        for meth in (primary,) if shown_only else c.methods:
            mon = monitors[(c.name, meth)]
            eff = effective[(c.name, meth)]
            # each read once (a fleet's STATE.json reads thousands of monitors)
            weights, estimate, rhos = _weights_estimate_rhos(mon)
            lower, upper, valid = mon.cs_lower, mon.cs_upper, bool(mon.cs_valid)
            status = eff.status
            bound = verdict_bound(status, mon.alpha, lower, upper, valid)  # verdict_fields
            methods[meth] = {
                "rounds": mon.rounds,
                "log_e_certify": fin(mon.log_e_certify),
                "log_e_violate": fin(mon.log_e_violate),
                "cs_lower": fin(lower),
                "cs_upper": fin(upper),
                "status": status,
                "certified_at_round": eff.certified_at_round,
                "violated_at_round": eff.violated_at_round,
                "risk_estimate": fin(estimate),
                "log_threshold": fin(mon.log_threshold),
                "rho_weights": weights,
                "rhos": rhos,
                "cs_valid": valid,
                "risk_upper_bound": bound[1] if bound is not None and bound[0] == "upper"
                else None,
                "risk_lower_bound": bound[1] if bound is not None and bound[0] == "lower"
                else None,
                "bound_confidence": 1.0 - mon.threshold_delta,
                "status_changed_ts": eff.changed_ts,
                "primary": meth == primary,
            }
        if m.active is not None:  # the certificate's verdict is its active tests' (every
            # method shows their wealth and labels); the method's own monitors see the
            # uniform-share rounds only: their estimate and confidence sequence are of those
            # rounds (``cs_rounds``), and the verdict's bound is alpha alone (the sequence is
            # not the active test's: combining them would need a union bound)
            i = list(certs_config).index(c)
            for (meth, entry), eff in zip(methods.items(),
                                          (m.effective[(c.name, k)] for k in methods),
                                          strict=True):
                mon = m.monitors[(c.name, meth)]
                entry["cs_rounds"] = mon.rounds
                entry["rounds"] = m.active.labels
                if m.hedge is not None:  # the average's, at the last paired audited unit
                    entry["rounds"] = m.hedge.labels
                    entry["log_e_certify"] = finite_or_none(m.hedge.combined(2 * i))
                    entry["log_e_violate"] = finite_or_none(m.hedge.combined(2 * i + 1))
                else:
                    entry["log_e_certify"] = finite_or_none(m.active.log_e(2 * i))
                    entry["log_e_violate"] = finite_or_none(m.active.log_e(2 * i + 1))
                entry.update(verdict_fields(eff.status, c.alpha, mon.threshold_delta, 0.0, 1.0,
                                            False))
        certs[c.name] = {"alpha": c.alpha, "delta": c.delta, "methods": methods,
                         "epoch": m.epochs[c.name].view(), "lost": certificate_lost(m, c)}
    audited = audited_units(m)
    return {
        "counts": dict(m.counts),
        "judge_bias": m.judge_bias,
        "pending_units": m.pending_units,
        "orphan_labels": m.orphan_labels,
        "labels": {
            "audited": audited,
            "pending": m.pending_units,
            "waiting": len(m.order.ready),
            "missing": m.counts["expired_pending"],
            "late": m.counts["late_labels"],
            "completion_ratio": (1.0 - (m.pending_units + m.counts["expired_pending"]) / audited
                                 if audited else 1.0),
        },
        "certificates": certs,
        "judge_drift": None if m.judge is None else m.judge.view(),
        **({} if m.strata is None else {"strata": m.strata.view()}),
        # (under hedged audits the per-unit process alone decides nothing: its own status
        # would contradict the verdict; its values are in the hedged block)
        **({} if m.active is None or m.hedge is not None
           else {"active": active_view(m, certs_config)}),
        **({} if m.hedge is None else {"hedged": hedged_view(m, certs_config)}),
    }


def _weights_estimate_rhos(mon: RiskMonitor) -> tuple[list[float], float, list[float]]:
    """Return a monitor's ``rho_weights``, ``risk_estimate`` and ``rhos`` for its view.

    The values of :meth:`~monitor.stats.betting.risk.RiskMonitor.weights_and_estimate` and
    :attr:`~monitor.stats.betting.risk.RiskMonitor.rhos`; a plug-in test (``plugin_up``, the
    default) gives them as lists, without numpy for a one-rho method
    (:meth:`~monitor.stats.betting.autoeval_plugin.PlugInTest.weight_list_and_estimate`):
    a fleet's STATE.json reads thousands of monitors.
    """
    test = mon.certify_test
    if isinstance(test, PlugInTest):
        weights, estimate = test.weight_list_and_estimate()
        return weights, estimate, list(test.rho_list)
    w, estimate = mon.weights_and_estimate()
    return np.asarray(w, dtype=float).tolist(), estimate, mon.rhos.astype(float).tolist()


def suite_view(suite: SuiteState, shown_only: bool = False) -> dict[str, Any]:
    """Suite ``suite``'s part of STATE.json (``shown_only``: see :func:`model_view`).

    Each model's view plus the age of its oldest pending unit (against the suite's event
    time), the multiplicity rule and family size, comparisons and refused models.
    """
    view, models = suite_view_parts(suite, shown_only)
    view["models"] = dict(models)
    return view


def suite_view_parts(suite: SuiteState, shown_only: bool = False
                     ) -> tuple[dict[str, Any], Iterator[tuple[str, dict[str, Any]]]]:
    """Return :func:`suite_view` as its suite-level fields and its models, one at a time.

    The dict has every key of the view, ``"models"`` an empty dict; the iterator yields
    ``(name, model view)`` in the suite's order, each built when it is asked for (a writer
    can encode and drop it before the next: a suite of 10,000 models holds no 10,000
    model views at once). Read it before the suite changes.
    """
    certs = suite.config.certificates
    oldest: dict[str, float] = {}  # the oldest pending unit's tick per model
    for _, (tick, unit) in suite.join.pending.data.items():  # oldest first
        if unit.model not in oldest:
            oldest[unit.model] = tick
            if len(oldest) == len(suite.models):
                break  # every model's oldest found: the rest are younger
    w = suite.join.watermark

    def models() -> Iterator[tuple[str, dict[str, Any]]]:
        for name, m in suite.models.items():
            mv = model_view(m, certs, shown_only)
            t = oldest.get(name)
            mv["labels"]["oldest_pending_age_seconds"] = 0.0 if t is None else w - t
            yield name, mv

    view: dict[str, Any] = {
        "multiplicity": suite.config.multiplicity,
        "family_size": suite.family_size,
        "models": {},
    }
    if suite.comparisons:
        view["comparisons"] = suite.comparisons.view()
    if suite.refused_count:
        view["refused_models"] = {"events": suite.refused_count, "names": list(suite.refused)}
    return view, models()
