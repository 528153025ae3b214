"""The state collector as it was before the text renderer (tests only: the reference).

A verbatim copy of ``monitor/metrics/collector.py`` at commit 606a786: families built sample by
sample with prometheus_client's ``GaugeMetricFamily`` / ``CounterMetricFamily``. The tests check
that the renderer's exposition (``detail = "full"``) is byte for byte the same as this one's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["STATES", "StateCollector", "format_rho"]

STATES: tuple[str, ...] = ("pending", "certified", "violated")
"""Certificate states, in the order their ``certmon_certificate_state`` samples are exposed."""

_MODEL = ("suite", "model")
_CERT = ("suite", "model", "certificate")
_METHOD = ("suite", "model", "certificate", "method")
_STRATUM = ("suite", "model", "stratum")

# (name, documentation, label names) of every gauge family, in exposition order.
_GAUGES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
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

# (name without _total, documentation, key in model "counts") of the per-model counters.
_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("certmon_rounds", ("Rounds (audited units with judge and human loss); under audit_policy "
     "\"active\" the uniform-share units only (the change detectors' and confidence "
     "sequences' rounds)."), "rounds"),
    ("certmon_labels", "Human label events accepted.", "labels"),
    ("certmon_judge_events", "Judge events accepted.", "judge"),
    ("certmon_unsolicited_labels", "Labels for units never audited (not used).",
     "unsolicited_labels"),
    ("certmon_label_requests", "Label requests emitted.", "label_requests"),
    ("certmon_labels_missing",
     "Labels missing for good (timed out or evicted): used at their worst value.",
     "expired_pending"),
    ("certmon_labels_late", "Labels that arrived after their unit was taken as missing (not "
     "used).", "late_labels"),
)
# (name without _total, documentation, key in the certificate's "epoch" view)
_EPOCH_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("certmon_regressions", "Epochs ended by a regression alarm (regression alerts).",
     "regressions"),
    ("certmon_improvements", "Epochs of a violated certificate ended by an improvement alarm.",
     "improvements"),
    ("certmon_certificates_lost", "Regressions of a certified model (certificate_lost alerts).",
     "certificates_lost"),
)
_EXPIRED = ("certmon_expired_units", "Join entries dropped after their time bound.")
_EXPIRED_KINDS = (("pending", "expired_pending"), ("orphan_label", "expired_orphans"))
_READ_ATTEMPTS = 3


def format_rho(rho: float) -> str:
    """Format a reliance factor rho as a short, stable label value.

    Parameters
    ----------
    rho : float
        The reliance factor.

    Returns
    -------
    str
        Up to 6 significant digits, e.g. ``"0.333333"``; integers without a decimal point.

    Examples
    --------
    >>> format_rho(1.0), format_rho(1 / 3), format_rho(0.25)
    ('1', '0.333333', '0.25')
    """
    return f"{float(rho):.6g}"


def _num(value: Any) -> float | None:
    """Return ``value`` as a float, or None for None, NaN, booleans and non-numbers."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    out = float(value)
    return None if math.isnan(out) else out


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


class _Families:
    """The metric families of one scrape, filled model by model."""

    def __init__(self) -> None:
        self.gauges = {
            name: GaugeMetricFamily(name, doc, labels=list(labels)) for name, doc, labels in _GAUGES
        }
        self.counters = {
            name: CounterMetricFamily(name, doc, labels=list(_MODEL)) for name, doc, _ in _COUNTERS
        }
        self.expired = CounterMetricFamily(*_EXPIRED, labels=[*_MODEL, "kind"])
        self.stratum_labels = CounterMetricFamily(
            "certmon_stratum_labels", "Labels used by the stratified certificate, per stratum.",
            labels=list(_STRATUM))
        self.epochs = {name: CounterMetricFamily(name, doc, labels=list(_CERT))
                       for name, doc, _ in _EPOCH_COUNTERS}
        self.judge_drifts = CounterMetricFamily(
            "certmon_judge_drift_alarms", "Judge-drift alarms of the model (judge_drift alerts).",
            labels=list(_MODEL))
        self.refused = CounterMetricFamily(
            "certmon_refused_model_events",
            "Events of models refused because the suite's Bonferroni family is full.",
            labels=["suite"])

    def gauge(self, name: str, labels: list[str], value: Any) -> None:
        number = _num(value)
        if number is not None:
            self.gauges[name].add_metric(labels, number)

    def all(self) -> Iterator[Metric]:
        yield from self.gauges.values()
        yield from self.counters.values()
        yield self.expired
        yield self.stratum_labels
        yield from self.epochs.values()
        yield self.judge_drifts
        yield self.refused


class StateCollector(Collector):
    """The reference collector."""

    def __init__(self, view_fn: Callable[[], Mapping[str, Any]]) -> None:
        self._view_fn = view_fn

    def describe(self) -> Iterable[Metric]:
        """Return the (empty) metric families, so a registry can detect name clashes.

        Returns
        -------
        Iterable[Metric]
            One family per metric name this collector can expose.
        """
        return [*_Families().all(), *_SelectionFamilies().all(), *_ComparisonFamilies().all()]

    def collect(self) -> Iterable[Metric]:
        """Read the state once and convert it into metric families.

        Returns
        -------
        Iterable[Metric]
            Every family, possibly without samples (e.g. before the first event).
        """
        families = _Families()
        selection = _SelectionFamilies()
        comparisons = _ComparisonFamilies()
        view = self._read()
        for suite, suite_view in sorted(_mapping(view.get("suites")).items()):
            for model, model_view in sorted(_mapping(_mapping(suite_view).get("models")).items()):
                _add_model(families, str(suite), str(model), _mapping(model_view))
            selection.add(str(suite), _mapping(_mapping(suite_view).get("selection")))
            comparisons.add(str(suite), _mapping(_mapping(suite_view).get("comparisons")))
            refused = _num(_mapping(_mapping(suite_view).get("refused_models")).get("events"))
            if refused is not None:
                families.refused.add_metric([str(suite)], refused)
        return [*families.all(), *selection.all(), *comparisons.all()]

    def _read(self) -> Mapping[str, Any]:
        # A view built while the engine thread mutates its dicts can raise RuntimeError
        # ("dictionary changed size during iteration"): retry a few times before failing.
        for _ in range(_READ_ATTEMPTS - 1):
            try:
                return _mapping(self._view_fn())
            except RuntimeError:
                continue
        return _mapping(self._view_fn())


def _add_model(families: _Families, suite: str, model: str, view: Mapping[str, Any]) -> None:
    key = [suite, model]
    counts = _mapping(view.get("counts"))
    for name, _, count_key in _COUNTERS:
        number = _num(counts.get(count_key))
        if number is not None:
            families.counters[name].add_metric(key, number)
    for kind, count_key in _EXPIRED_KINDS:
        number = _num(counts.get(count_key))
        if number is not None:
            families.expired.add_metric([*key, kind], number)
    families.gauge("certmon_judge_bias", key, view.get("judge_bias"))
    families.gauge("certmon_pending_units", key, view.get("pending_units"))
    labels = _mapping(view.get("labels"))
    families.gauge("certmon_labels_waiting", key, labels.get("waiting"))
    families.gauge("certmon_oldest_pending_label_age_seconds", key,
                   labels.get("oldest_pending_age_seconds"))
    families.gauge("certmon_label_completion_ratio", key, labels.get("completion_ratio"))
    drifts = _num(_mapping(view.get("judge_drift")).get("alarms"))
    if drifts is not None:
        families.judge_drifts.add_metric(key, drifts)
    for signal, det in sorted(_mapping(view.get("judge_drift")).items()):
        if isinstance(det, Mapping):
            families.gauge("certmon_judge_drift_statistic", [*key, str(signal)],
                           det.get("statistic"))
            families.gauge("certmon_judge_drift_threshold", [*key, str(signal)],
                           det.get("threshold"))
    _add_strata(families, key, _mapping(view.get("strata")))
    for cert, cert_view in sorted(_mapping(view.get("certificates")).items()):
        cert_map = _mapping(cert_view)
        cert_key = [*key, str(cert)]
        families.gauge("certmon_certificate_alpha", cert_key, cert_map.get("alpha"))
        families.gauge("certmon_certificate_delta", cert_key, cert_map.get("delta"))
        _add_epoch(families, cert_key, _mapping(cert_map.get("epoch")))
        lost = cert_map.get("lost")
        if isinstance(lost, bool):
            families.gauge("certmon_certificate_lost", cert_key, float(lost))
        for method, method_view in sorted(_mapping(cert_map.get("methods")).items()):
            _add_method(families, [*cert_key, str(method)], _mapping(method_view))


def _add_epoch(families: _Families, key: list[str], view: Mapping[str, Any]) -> None:
    for name, _, count_key in _EPOCH_COUNTERS:
        number = _num(view.get(count_key))
        if number is not None:
            families.epochs[name].add_metric(key, number)
    families.gauge("certmon_certificate_epoch", key, view.get("epoch"))
    families.gauge("certmon_certificate_epoch_start_round", key, view.get("started_round"))
    reg = _mapping(view.get("regression_detector"))
    families.gauge("certmon_regression_statistic", key, reg.get("statistic"))
    families.gauge("certmon_regression_threshold", key, reg.get("threshold"))
    armed = reg.get("armed")
    if isinstance(armed, bool):
        families.gauge("certmon_regression_armed", key, float(armed))
    if reg:  # the improvement detector runs only while violated: 0 otherwise
        families.gauge("certmon_improvement_statistic", key,
                       _mapping(view.get("improvement_detector")).get("statistic", 0.0))


def _add_method(families: _Families, key: list[str], view: Mapping[str, Any]) -> None:
    families.gauge("certmon_risk_estimate", key, view.get("risk_estimate"))
    families.gauge("certmon_risk_upper_bound", key, view.get("risk_upper_bound"))
    families.gauge("certmon_risk_lower_bound", key, view.get("risk_lower_bound"))
    if view.get("cs_valid", True) is not False:
        families.gauge("certmon_risk_cs_lower_bound", key, view.get("cs_lower"))
        families.gauge("certmon_risk_cs_upper_bound", key, view.get("cs_upper"))
    families.gauge("certmon_log_e_value", [*key, "certify"], view.get("log_e_certify"))
    families.gauge("certmon_log_e_value", [*key, "violate"], view.get("log_e_violate"))
    families.gauge("certmon_log_e_threshold", key, view.get("log_threshold"))
    status = view.get("status")
    if status in STATES:
        for state in STATES:
            families.gauge("certmon_certificate_state", [*key, state], float(state == status))
    for side in ("certified", "violated"):
        crossed = view.get(f"{side}_at_round")
        families.gauge(f"certmon_certificate_{side}_round", key, 0 if crossed is None else crossed)
    families.gauge(
        "certmon_certificate_last_change_timestamp_seconds", key, view.get("status_changed_ts")
    )
    primary = view.get("primary")
    if isinstance(primary, bool):
        families.gauge("certmon_certificate_primary", key, float(primary))
    weights, rhos = view.get("rho_weights"), view.get("rhos")
    if isinstance(weights, list) and isinstance(rhos, list) and len(weights) == len(rhos):
        pairs = [(_num(w), _num(r)) for w, r in zip(weights, rhos, strict=True)]
        finite = [(w, r) for w, r in pairs if w is not None and r is not None
                  and w >= 0 and math.isfinite(w) and math.isfinite(r)]
        total = sum(w for w, _ in finite)
        if pairs and len(finite) == len(pairs) and total > 0:
            families.gauge("certmon_judge_reliance_ratio", key,
                           sum(w * r for w, r in finite) / total)
        seen: set[str] = set()
        for rho, weight in zip(rhos, weights, strict=True):
            rho_value = _num(rho)
            label = "" if rho_value is None else format_rho(rho_value)
            if label and label not in seen:  # never two series with the same labels
                seen.add(label)
                families.gauge("certmon_rho_weight_ratio", [*key, label], weight)


# ---------------------------------------------------------------------- best-model selection
_SELECTION_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("certmon_selection_estimate", "Best-model selection: the model's mean-score estimate.",
     "estimate"),
    ("certmon_selection_lower_bound", "Best-model selection: anytime-valid lower bound "
     "(simultaneous over the suite's models at level delta).", "lower"),
    ("certmon_selection_upper_bound", "Best-model selection: anytime-valid upper bound.", "upper"),
    ("certmon_selection_rank", "Best-model selection: rank by estimate (0 = leader).", "rank"),
)


class _SelectionFamilies:
    """Families of selection-mode suites (``{"selection": {...}}`` in the suite's view).

    Per model: ``certmon_selection_pulls_total`` (``pulls``), ``certmon_selection_estimate``,
    ``certmon_selection_lower_bound`` / ``_upper_bound``, ``certmon_selection_rank`` (omitted
    before the first pull) and ``certmon_selection_leader`` (1 for ``leader``, 0 else); per suite
    ``certmon_selection_budget_used_ratio`` (``budget_used``).
    """

    def __init__(self) -> None:
        self.gauges = {name: GaugeMetricFamily(name, doc, labels=list(_MODEL))
                       for name, doc, _ in _SELECTION_GAUGES}  # fmt: skip
        self.leader = GaugeMetricFamily(
            "certmon_selection_leader", "Best-model selection: 1 for the current leader, 0 else.",
            labels=list(_MODEL))  # fmt: skip
        self.pulls = CounterMetricFamily(
            "certmon_selection_pulls", "Best-model selection: completed pulls (batches).",
            labels=list(_MODEL))  # fmt: skip
        self.budget = GaugeMetricFamily(
            "certmon_selection_budget_used_ratio",
            "Best-model selection: evaluations requested over the budget.", labels=["suite"])

    def add(self, suite: str, view: Mapping[str, Any]) -> None:
        if not view:
            return
        leader = view.get("leader")
        for model, mv in sorted(_mapping(view.get("models")).items()):
            m = _mapping(mv)
            key = [suite, str(model)]
            for name, _, field in _SELECTION_GAUGES:
                number = _num(m.get(field))
                if number is not None:
                    self.gauges[name].add_metric(key, number)
            pulls = _num(m.get("pulls"))
            if pulls is not None:
                self.pulls.add_metric(key, pulls)
            if leader is not None:
                self.leader.add_metric(key, float(model == leader))
        used = _num(view.get("budget_used"))
        if used is not None:
            self.budget.add_metric([suite], used)

    def all(self) -> Iterator[Metric]:
        yield self.pulls
        yield from self.gauges.values()
        yield self.leader
        yield self.budget


def _add_strata(families: _Families, key: list[str], view: Mapping[str, Any]) -> None:
    if not view:
        return
    cert_key = [*key, str(view.get("certificate", ""))]
    families.gauge("certmon_precision_half_width", cert_key, view.get("half_width"))
    families.gauge("certmon_precision_target", cert_key, view.get("precision_goal"))
    for stratum, sv in sorted(_mapping(view.get("strata")).items()):
        sm = _mapping(sv)
        skey = [*key, str(stratum)]
        families.gauge("certmon_stratum_traffic_ratio", skey, sm.get("traffic_share"))
        families.gauge("certmon_stratum_risk_estimate", skey, sm.get("estimate"))
        families.gauge("certmon_stratum_radius", skey, sm.get("radius"))
        families.gauge("certmon_stratum_audit_rate_ratio", skey, sm.get("audit_rate"))
        labels = _num(sm.get("labels"))
        if labels is not None:
            families.stratum_labels.add_metric(skey, labels)


# ---------------------------------------------------------------------- comparisons
_CMP = ("suite", "comparison", "baseline", "candidate")


class _ComparisonFamilies:
    """Families of a suite's ``comparisons`` block (one series set per candidate)."""

    def __init__(self) -> None:
        from monitor.metrics.families import COMPARISON

        extra = {"certmon_comparison_state": ["state"], "certmon_comparison_difference": ["bound"],
                 "certmon_comparison_log_e_value": ["side"]}
        self.fams: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}
        for name, typ, doc, _ in COMPARISON:
            build = GaugeMetricFamily if typ == "gauge" else CounterMetricFamily
            self.fams[name] = build(name, doc, labels=[*_CMP, *extra.get(name, [])])

    def _add(self, name: str, key: list[str], value: Any) -> None:
        number = _num(value)
        if number is not None:
            self.fams[name].add_metric(key, number)

    def add(self, suite: str, view: Mapping[str, Any]) -> None:
        for name, cv in sorted(view.items()):
            c = _mapping(cv)
            for cand, v in sorted(_mapping(c.get("candidates")).items()):
                m = _mapping(v)
                key = [suite, str(name), str(c.get("baseline", "")), str(cand)]
                for st in ("pending", "non_inferior", "inferior"):
                    self._add("certmon_comparison_state", [*key, st],
                              float(m.get("status") == st))
                for bound, field in (("estimate", "estimate"), ("lower", "lower_bound"),
                                     ("upper", "upper_bound")):
                    self._add("certmon_comparison_difference", [*key, bound], m.get(field))
                self._add("certmon_comparison_margin", key, m.get("margin"))
                for side in ("inferior", "non_inferior"):
                    self._add("certmon_comparison_log_e_value", [*key, side],
                              m.get(f"log_e_{side}"))
                self._add("certmon_comparison_log_e_threshold", key, m.get("log_threshold"))
                self._add("certmon_comparison_labels", key, m.get("labels"))
                self._add("certmon_comparison_missing_pairs", key, m.get("missing_pairs"))

    def all(self) -> Iterator[Metric]:
        yield from self.fams.values()
