"""The catalogue of the ``certmon_*`` state families: names, types, help texts, label names.

One place for what :class:`monitor.metrics.StateCollector` can expose, in exposition order;
:mod:`monitor.metrics.render` writes their samples.

Examples
--------
>>> [name for name, _, _ in family_order()][:2]
['certmon_risk_estimate', 'certmon_risk_upper_bound']
"""

from __future__ import annotations

from typing import Literal

__all__ = ["COMPARISON", "COMPARISON_STATES", "COUNTERS", "DETAILS", "GAUGES", "SELECTION",
           "STATES", "Detail", "family_order"]

Detail = Literal["full", "shown"]
DETAILS: tuple[str, ...] = ("full", "shown")
"""Detail levels of the per-method / per-rho series (``[metrics] detail``)."""

STATES: tuple[str, ...] = ("pending", "certified", "violated")
"""Certificate states, in the order their ``certmon_certificate_state`` samples are exposed."""

_MODEL = ("suite", "model")
_CERT = ("suite", "model", "certificate")
_METHOD = ("suite", "model", "certificate", "method")
_STRATUM = ("suite", "model", "stratum")
_CMP = ("suite", "comparison", "baseline", "candidate")

COMPARISON_STATES: tuple[str, ...] = ("pending", "non_inferior", "inferior")
"""Comparison states, in the order their ``certmon_comparison_state`` samples are exposed."""

# (name, documentation, label names) of every state gauge, in exposition order.
GAUGES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("certmon_risk_estimate", "Point estimate of the risk E[loss] (per method).", _METHOD),
    ("certmon_risk_upper_bound",
     "One-sided upper confidence bound on the risk that goes with a certified verdict (<= "
     "alpha), valid at the certificate's confidence 1 - exp(-certmon_log_e_threshold); "
     "present only while certified.", _METHOD),
    ("certmon_risk_lower_bound",
     "One-sided lower confidence bound on the risk that goes with a violated verdict (>= "
     "alpha), valid at the certificate's confidence 1 - exp(-certmon_log_e_threshold); "
     "present only while violated.", _METHOD),
    ("certmon_risk_cs_lower_bound",
     "Lower end of the two-sided anytime-valid confidence sequence (same confidence; not the "
     "verdict's bound).", _METHOD),
    ("certmon_risk_cs_upper_bound",
     "Upper end of the two-sided anytime-valid confidence sequence (same confidence; not the "
     "verdict's bound).", _METHOD),
    ("certmon_log_e_value", "Log e-value of the certify or violate test.", (*_METHOD, "side")),
    ("certmon_log_e_threshold", "log(1/delta) after the multiplicity correction.", _METHOD),
    ("certmon_certificate_state", "1 for the certificate's current state, 0 for the others.",
     (*_METHOD, "state")),
    ("certmon_certificate_certified_round", "Round at which certify crossed (0 = never).", _METHOD),
    ("certmon_certificate_violated_round", "Round at which violate crossed (0 = never).", _METHOD),
    ("certmon_certificate_last_change_timestamp_seconds",
     "Event time of the certificate's last state change: the ts field (Unix seconds) of the "
     "event that changed it, not the time certmon processed it (a replay shows old times).",
     _METHOD),
    ("certmon_certificate_primary",
     "1 for the certificate's primary method (the one that drives alerts), 0 for the others.",
     _METHOD),
    ("certmon_certificate_alpha", "Risk level alpha the certificate tests.", _CERT),
    ("certmon_certificate_delta", "Error budget delta of the certificate.", _CERT),
    ("certmon_rho_weight_ratio", "Mixture weight of each judge reliance rho (certify side).",
     (*_METHOD, "rho")),
    ("certmon_judge_reliance_ratio",
     "Judge reliance of the mixture: the mean of its reliance factors rho weighted by their "
     "mixture weights (certify side; 0: the judge is ignored, 1: fully relied on). Exported "
     "at every [metrics] detail, unlike the per-rho certmon_rho_weight_ratio.", _METHOD),
    ("certmon_certificate_epoch", "Epoch of the certificate (1 + regimes ended by a detector).",
     _CERT),
    ("certmon_certificate_lost",
     "1 while the certificate is lost and not earned again (a regression ended a certified "
     "epoch, or the violation test crossed after certification), else 0.", _CERT),
    ("certmon_certificate_epoch_start_round",
     "Model round at which the current epoch began (0 for the first epoch).", _CERT),
    ("certmon_regression_statistic",
     "Regression e-detector statistic (alarm at its threshold; average run length >= it).",
     _CERT),
    ("certmon_regression_threshold", "Alarm threshold A of the regression e-detector.", _CERT),
    ("certmon_regression_armed",
     "1 while the regression detector can end the epoch (pending or certified), else 0.", _CERT),
    ("certmon_improvement_statistic",
     "Improvement e-detector statistic of a violated certificate (0 when not violated).",
     _CERT),
    ("certmon_judge_drift_statistic",
     "Judge-drift e-detector statistic (0 during its warm-up).", (*_MODEL, "signal")),
    ("certmon_judge_drift_threshold", "Alarm threshold of the judge-drift e-detector.",
     (*_MODEL, "signal")),
    ("certmon_judge_bias", "Mean of judge loss minus human loss over rounds.", _MODEL),
    ("certmon_pending_units", "Audited units waiting for their human label.", _MODEL),
    ("certmon_labels_waiting",
     "Labels that arrived and wait for an earlier audited unit's label (rounds are applied in "
     "audit order).", _MODEL),
    ("certmon_oldest_pending_label_age_seconds",
     "Event time since the unit of the oldest pending label was judged (0 when none).", _MODEL),
    ("certmon_label_completion_ratio",
     "Share of audited units whose label arrived (pending and missing ones are not).", _MODEL),
    ("certmon_precision_half_width", "Half-width of the Cer-Eval certified (stratified) interval.",
     _CERT),
    ("certmon_precision_target", "Precision goal epsilon for the certified half-width.", _CERT),
    ("certmon_stratum_traffic_ratio", "Share of the traffic seen in the stratum.", _STRATUM),
    ("certmon_stratum_risk_estimate", "Mean human loss of the stratum's labels.", _STRATUM),
    ("certmon_stratum_radius", "Certified radius of the stratum's mean (Cer-Eval).", _STRATUM),
    ("certmon_stratum_audit_rate_ratio", "Current audit probability of the stratum's units.",
     _STRATUM),
)

# (name without _total, documentation, label names) of the state counters, in exposition order.
COUNTERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("certmon_rounds", ("Rounds (audited units with judge and human loss); under audit_policy "
     "\"active\" the uniform-share units only (the change detectors' and confidence "
     "sequences' rounds)."), _MODEL),
    ("certmon_labels", "Human label events accepted.", _MODEL),
    ("certmon_judge_events", "Judge events accepted.", _MODEL),
    ("certmon_unsolicited_labels", "Labels for units never audited (not used).", _MODEL),
    ("certmon_label_requests", "Label requests emitted.", _MODEL),
    ("certmon_labels_missing",
     "Labels missing for good (timed out or evicted): used at their worst value.", _MODEL),
    ("certmon_labels_late", "Labels that arrived after their unit was taken as missing (not "
     "used).", _MODEL),
    ("certmon_expired_units", "Join entries dropped after their time bound.", (*_MODEL, "kind")),
    ("certmon_stratum_labels", "Labels used by the stratified certificate, per stratum.",
     _STRATUM),
    ("certmon_regressions", "Epochs ended by a regression alarm (regression alerts).", _CERT),
    ("certmon_improvements", "Epochs of a violated certificate ended by an improvement alarm.",
     _CERT),
    ("certmon_certificates_lost", "Regressions of a certified model (certificate_lost alerts).",
     _CERT),
    ("certmon_judge_drift_alarms", "Judge-drift alarms of the model (judge_drift alerts).",
     _MODEL),
    ("certmon_refused_model_events",
     "Events of models refused because the suite's Bonferroni family is full.", ("suite",)),
)

# (name, type, documentation, label names) of the selection-mode families, in exposition order.
SELECTION: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("certmon_selection_pulls", "counter",
     "Best-model selection: completed pulls (batches).", _MODEL),
    ("certmon_selection_estimate", "gauge",
     "Best-model selection: the model's mean-score estimate.", _MODEL),
    ("certmon_selection_lower_bound", "gauge", "Best-model selection: anytime-valid lower bound "
     "(simultaneous over the suite's models at level delta).", _MODEL),
    ("certmon_selection_upper_bound", "gauge",
     "Best-model selection: anytime-valid upper bound.", _MODEL),
    ("certmon_selection_rank", "gauge", "Best-model selection: rank by estimate (0 = leader).",
     _MODEL),
    ("certmon_selection_leader", "gauge",
     "Best-model selection: 1 for the current leader, 0 else.", _MODEL),
    ("certmon_selection_budget_used_ratio", "gauge",
     "Best-model selection: evaluations requested over the budget.", ("suite",)),
)
# (name, type, documentation, label names) of the comparison families ([[suites.comparisons]]),
# in exposition order; comparison, baseline and candidate come from the configuration.
COMPARISON: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("certmon_comparison_state", "gauge",
     "Comparison of a candidate with its baseline: 1 for the current verdict (pending, "
     "non_inferior, inferior), 0 for the others.", (*_CMP, "state")),
    ("certmon_comparison_difference", "gauge",
     "risk(candidate) - risk(baseline): the estimate and the anytime one-sided lower / upper "
     "confidence bounds (each at the comparison's level; absent until shown).", (*_CMP, "bound")),
    ("certmon_comparison_margin", "gauge",
     "Non-inferiority margin of the comparison (risk scale).", _CMP),
    ("certmon_comparison_log_e_value", "gauge",
     "Log e-value against the comparison's null, per side (non_inferior, inferior).",
     (*_CMP, "side")),
    ("certmon_comparison_log_e_threshold", "gauge",
     "log(1/level) of the candidate's verdicts (delta / number of candidates).", _CMP),
    ("certmon_comparison_labels", "counter",
     "Human labels used by the comparison (two per paired round).", _CMP),
    ("certmon_comparison_missing_pairs", "counter",
     "Pairs (unpaired: units) skipped because a label or an answer was missing for good.",
     _CMP),
)


def family_order() -> list[tuple[str, str, str]]:
    """Return ``(name, type, documentation)`` of every state family, in exposition order.

    Examples
    --------
    >>> family_order()[0]
    ('certmon_risk_estimate', 'gauge', 'Point estimate of the risk E[loss] (per method).')
    """
    return [*((n, "gauge", d) for n, d, _ in GAUGES),
            *((n, "counter", d) for n, d, _ in COUNTERS),
            *((n, t, d) for n, t, d, _ in SELECTION),
            *((n, t, d) for n, t, d, _ in COMPARISON)]
