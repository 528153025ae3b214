r"""Text rendering of the ``certmon_*`` state families straight from a STATE document.

One scrape of an instance with 10,000 models exposes hundreds of thousands of samples: building
a prometheus_client ``Sample`` per value and formatting it through the generic encoder costs
microseconds each. :func:`render_state` writes the sample lines of every family directly, in the
order and with the label and value formatting of prometheus_client's text and OpenMetrics
encoders (the two formats share their sample lines for gauges and counters), so the bytes are
identical to what ``generate_latest`` would produce from the same families.

The ``detail`` level chooses the per-method and per-rho series:

- ``"full"``: every method of every certificate, with ``certmon_rho_weight_ratio`` per rho;
- ``"shown"``: only the certificate's primary (shown) method, no ``certmon_rho_weight_ratio``.

Either way each method with reliance factors gets ``certmon_judge_reliance_ratio``, the mean
of its rhos weighted by their mixture weights (one series per method, not one per rho).

Examples
--------
>>> doc = {"suites": {"qa": {"models": {"m1": {"counts": {"rounds": 3}}}}}}
>>> render_state(doc, "full")["certmon_rounds"]
['certmon_rounds_total{model="m1",suite="qa"} 3.0\n']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, cast

from prometheus_client.utils import floatToGoString

from monitor.metrics.families import COMPARISON_STATES, STATES, Detail, family_order

__all__ = ["format_rho", "render_state"]

_SELECTION_FIELDS = (("certmon_selection_estimate", "estimate"),
                     ("certmon_selection_lower_bound", "lower"),
                     ("certmon_selection_upper_bound", "upper"),
                     ("certmon_selection_rank", "rank"))
_COUNT_KEYS = (("certmon_rounds_total", "rounds"), ("certmon_labels_total", "labels"),
               ("certmon_judge_events_total", "judge"),
               ("certmon_unsolicited_labels_total", "unsolicited_labels"),
               ("certmon_label_requests_total", "label_requests"),
               ("certmon_labels_missing_total", "expired_pending"),
               ("certmon_labels_late_total", "late_labels"))
_LABEL_GAUGES = (("certmon_labels_waiting", "waiting"),
                 ("certmon_oldest_pending_label_age_seconds", "oldest_pending_age_seconds"),
                 ("certmon_label_completion_ratio", "completion_ratio"))
_EXPIRED_KINDS = (("pending", "expired_pending"), ("orphan_label", "expired_orphans"))
_go_float = cast(Callable[[float], str], floatToGoString)  # the library's value formatting
_EPOCH_KEYS = (("certmon_regressions", "regressions"), ("certmon_improvements", "improvements"),
               ("certmon_certificates_lost", "certificates_lost"))


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


def _fmt(value: Any) -> str | None:
    """Return the exposition text of ``value`` (``floatToGoString``), None to skip it."""
    cls = value.__class__
    if cls is float:  # the usual cases first, without the generic checks
        if -1e6 < value < 1e6:  # floatToGoString is repr() here (NaN fails both comparisons)
            return repr(value)
        return None if value != value else _go_float(value)
    if cls is int and -1_000_000 < value < 1_000_000:
        return repr(float(value))
    number = _num(value)
    return None if number is None else _fmt(number)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if value.__class__ is dict or isinstance(value, Mapping) else {}


def _esc(value: Any) -> str:
    """Escape a label value as both encoders do (backslash, newline, double quote)."""
    text = str(value)
    if "\\" in text or "\n" in text or '"' in text:
        text = text.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return text


def render_state(view: Mapping[str, Any], detail: Detail = "full") -> dict[str, list[str]]:
    r"""Render a STATE document into the sample lines of each state family.

    Parameters
    ----------
    view : Mapping[str, Any]
        The ``Engine.state_view()`` document (see :class:`monitor.metrics.StateCollector`
        for the mapping of its keys to series).
    detail : {"full", "shown"}, optional
        ``"shown"`` keeps only each certificate's primary method (the method whose
        ``"primary"`` is true; a certificate with no method marked primary keeps them all)
        and drops ``certmon_rho_weight_ratio``.

    Returns
    -------
    dict of str to list of str
        For every family of :func:`family_order` (by name, without ``_total``), its sample
        lines, each ending with a newline.

    Notes
    -----
    Guarantee: joining the header of each family (as prometheus_client writes it) and these
    lines, in :func:`family_order`, gives byte for byte what ``generate_latest`` (text 0.0.4) or
    ``openmetrics.generate_latest`` (without the final ``# EOF``) would write for the families
    of the same values: labels sorted by name, values through ``floatToGoString``, suites and
    models in sorted order. Missing, null, NaN, boolean or non-numeric values give no line.

    Examples
    --------
    >>> doc = {"suites": {"qa": {"models": {"m": {"certificates": {"c": {"methods": {
    ...     "r_eval": {"risk_estimate": 0.1, "primary": False},
    ...     "r_autoeval_plus": {"risk_estimate": 0.05, "primary": True}}}}}}}}}
    >>> render_state(doc, "shown")["certmon_risk_estimate"]
    ['certmon_risk_estimate{certificate="c",method="r_autoeval_plus",model="m",suite="qa"} 0.05\n']
    """
    out: dict[str, list[str]] = {name: [] for name, _, _ in family_order()}
    rho_plans: dict[tuple[Any, ...], list[tuple[int, str]]] = {}
    for suite, suite_view in sorted(_mapping(view.get("suites")).items()):
        sv = _mapping(suite_view)
        su = f'suite="{_esc(suite)}"'
        for model, model_view in sorted(_mapping(sv.get("models")).items()):
            _model(out, f'model="{_esc(model)}",', su, _mapping(model_view), detail, rho_plans)
        _selection(out, su, _mapping(sv.get("selection")))
        for name, cv in sorted(_mapping(sv.get("comparisons")).items()):
            _comparison(out, name, su, _mapping(cv))
        refused = _fmt(_mapping(sv.get("refused_models")).get("events"))
        if refused is not None:
            out["certmon_refused_model_events"].append(
                f"certmon_refused_model_events_total{{{su}}} {refused}\n")
    return out


def _model(out: dict[str, list[str]], mo: str, su: str, view: Mapping[str, Any],
           detail: Detail, rho_plans: dict[tuple[Any, ...], list[tuple[int, str]]]) -> None:
    key = f"{{{mo}{su}}} "
    counts = _mapping(view.get("counts"))
    for name, count_key in _COUNT_KEYS:
        v = _fmt(counts.get(count_key))
        if v is not None:
            out[name[:-6]].append(f"{name}{key}{v}\n")
    for kind, count_key in _EXPIRED_KINDS:
        v = _fmt(counts.get(count_key))
        if v is not None:
            out["certmon_expired_units"].append(
                f'certmon_expired_units_total{{kind="{kind}",{mo}{su}}} {v}\n')
    for name, field in (("certmon_judge_bias", "judge_bias"),
                        ("certmon_pending_units", "pending_units")):
        v = _fmt(view.get(field))
        if v is not None:
            out[name].append(f"{name}{key}{v}\n")
    labels = _mapping(view.get("labels"))
    for name, field in _LABEL_GAUGES:
        v = _fmt(labels.get(field))
        if v is not None:
            out[name].append(f"{name}{key}{v}\n")
    drift = _mapping(view.get("judge_drift"))
    v = _fmt(drift.get("alarms"))
    if v is not None:
        out["certmon_judge_drift_alarms"].append(f"certmon_judge_drift_alarms_total{key}{v}\n")
    for signal, det in sorted(drift.items()):
        if isinstance(det, Mapping):
            skey = f'{{{mo}signal="{_esc(signal)}",{su}}} '
            for name, field in (("certmon_judge_drift_statistic", "statistic"),
                                ("certmon_judge_drift_threshold", "threshold")):
                v = _fmt(det.get(field))
                if v is not None:
                    out[name].append(f"{name}{skey}{v}\n")
    _strata(out, mo, su, _mapping(view.get("strata")))
    for cert, cert_view in sorted(_mapping(view.get("certificates")).items()):
        cm = _mapping(cert_view)
        ce = f'certificate="{_esc(cert)}",'
        ckey = f"{{{ce}{mo}{su}}} "
        for name, field in (("certmon_certificate_alpha", "alpha"),
                            ("certmon_certificate_delta", "delta")):
            v = _fmt(cm.get(field))
            if v is not None:
                out[name].append(f"{name}{ckey}{v}\n")
        _epoch(out, ckey, _mapping(cm.get("epoch")))
        lost = cm.get("lost")
        if isinstance(lost, bool):
            out["certmon_certificate_lost"].append(
                f'certmon_certificate_lost{ckey}{"1.0" if lost else "0.0"}\n')
        methods = sorted(_mapping(cm.get("methods")).items())
        if detail == "shown" and any(_mapping(mv).get("primary") is True for _, mv in methods):
            methods = [(k, mv) for k, mv in methods if _mapping(mv).get("primary") is True]
        for method, method_view in methods:
            _method(out, f'{ce}method="{_esc(method)}",{mo}', su, _mapping(method_view),
                    rho_plans if detail == "full" else None)


def _epoch(out: dict[str, list[str]], ckey: str, view: Mapping[str, Any]) -> None:
    for name, field in _EPOCH_KEYS:
        v = _fmt(view.get(field))
        if v is not None:
            out[name].append(f"{name}_total{ckey}{v}\n")
    reg = _mapping(view.get("regression_detector"))
    armed = reg.get("armed")
    for name, value in (("certmon_certificate_epoch", view.get("epoch")),
                        ("certmon_certificate_epoch_start_round", view.get("started_round")),
                        ("certmon_regression_statistic", reg.get("statistic")),
                        ("certmon_regression_threshold", reg.get("threshold")),
                        ("certmon_regression_armed",
                         float(armed) if isinstance(armed, bool) else None)):
        v = _fmt(value)
        if v is not None:
            out[name].append(f"{name}{ckey}{v}\n")
    if reg:  # the improvement detector runs only while violated: 0 otherwise
        v = _fmt(_mapping(view.get("improvement_detector")).get("statistic", 0.0))
        if v is not None:
            out["certmon_improvement_statistic"].append(f"certmon_improvement_statistic{ckey}{v}\n")


def _method(out: dict[str, list[str]], head: str, su: str, view: Mapping[str, Any],
            rho_plans: dict[tuple[Any, ...], list[tuple[int, str]]] | None) -> None:
    # rho_plans: None for no per-rho series, else a cache of _rho_plan by rhos
    # head: 'certificate="C",method="K",model="M",' (sorted label names before "rho", "side",
    # "state" and "suite")
    key = f"{{{head}{su}}} "
    get = view.get
    valid = get("cs_valid", True) is not False
    crossed_c, crossed_v = get("certified_at_round"), get("violated_at_round")
    primary = get("primary")
    for name, value in (
        ("certmon_risk_estimate", get("risk_estimate")),
        ("certmon_risk_upper_bound", get("risk_upper_bound")),
        ("certmon_risk_lower_bound", get("risk_lower_bound")),
        ("certmon_risk_cs_lower_bound", get("cs_lower") if valid else None),
        ("certmon_risk_cs_upper_bound", get("cs_upper") if valid else None),
    ):
        v = _fmt(value)
        if v is not None:
            out[name].append(f"{name}{key}{v}\n")
    lines = out["certmon_log_e_value"]
    for side, value in (("certify", get("log_e_certify")), ("violate", get("log_e_violate"))):
        v = _fmt(value)
        if v is not None:
            lines.append(f'certmon_log_e_value{{{head}side="{side}",{su}}} {v}\n')
    v = _fmt(get("log_threshold"))
    if v is not None:
        out["certmon_log_e_threshold"].append(f"certmon_log_e_threshold{key}{v}\n")
    status = get("status")
    if status in STATES:
        out["certmon_certificate_state"].extend(
            f'certmon_certificate_state{{{head}state="{state}",{su}}} '
            f'{"1.0" if state == status else "0.0"}\n' for state in STATES)
    for name, value in (
        ("certmon_certificate_certified_round", 0 if crossed_c is None else crossed_c),
        ("certmon_certificate_violated_round", 0 if crossed_v is None else crossed_v),
        ("certmon_certificate_last_change_timestamp_seconds", get("status_changed_ts")),
        ("certmon_certificate_primary", float(primary) if isinstance(primary, bool) else None),
    ):
        v = _fmt(value)
        if v is not None:
            out[name].append(f"{name}{key}{v}\n")
    weights, rhos = get("rho_weights"), get("rhos")
    if isinstance(weights, list) and isinstance(rhos, list) and len(weights) == len(rhos):
        v = _fmt(_reliance(weights, rhos))
        if v is not None:
            out["certmon_judge_reliance_ratio"].append(f"certmon_judge_reliance_ratio{key}{v}\n")
    if (rho_plans is not None and isinstance(weights, list) and isinstance(rhos, list)
            and len(weights) == len(rhos)):
        lines = out["certmon_rho_weight_ratio"]
        for i, label in _rho_plan(rhos, rho_plans):
            v = _fmt(weights[i])
            if v is not None:
                lines.append(f'certmon_rho_weight_ratio{{{head}rho="{label}",{su}}} {v}\n')


def _reliance(weights: list[Any], rhos: list[Any]) -> float | None:
    """Mean of ``rhos`` weighted by ``weights`` (None without a valid positive weight).

    Examples
    --------
    >>> _reliance([0.25, 0.75], [0.0, 1.0]), _reliance([], []), _reliance([0.0], [1.0])
    (0.75, None, None)
    """
    total = mean = 0.0
    for w, rho in zip(weights, rhos, strict=True):
        wv, rv = _num(w), _num(rho)
        if wv is None or rv is None or wv < 0 or math.isinf(wv) or math.isinf(rv):
            return None
        total += wv
        mean += wv * rv
    return mean / total if total > 0 else None


def _rho_plan(rhos: list[Any], plans: dict[tuple[Any, ...], list[tuple[int, str]]]
              ) -> list[tuple[int, str]]:
    """``(index, label)`` of the rhos to expose: valid ones, the first of equal labels."""
    try:
        key = (*map(type, rhos), *rhos)  # the types too: True == 1.0 but is no rho
        return plans[key]
    except TypeError:  # an unhashable element: not cached
        key = ()
    except KeyError:
        pass
    plan: list[tuple[int, str]] = []
    seen: set[str] = set()
    for i, rho in enumerate(rhos):
        rho_value = _num(rho)
        label = "" if rho_value is None else format_rho(rho_value)
        if label and label not in seen:  # never two series with the same labels
            seen.add(label)
            plan.append((i, label))
    if key:
        plans[key] = plan
    return plan


def _strata(out: dict[str, list[str]], mo: str, su: str, view: Mapping[str, Any]) -> None:
    if not view:
        return
    ckey = f'{{certificate="{_esc(view.get("certificate", ""))}",{mo}{su}}} '
    for name, field in (("certmon_precision_half_width", "half_width"),
                        ("certmon_precision_target", "precision_goal")):
        v = _fmt(view.get(field))
        if v is not None:
            out[name].append(f"{name}{ckey}{v}\n")
    for stratum, sv in sorted(_mapping(view.get("strata")).items()):
        sm = _mapping(sv)
        skey = f'{{{mo}stratum="{_esc(stratum)}",{su}}} '
        for name, field in (("certmon_stratum_traffic_ratio", "traffic_share"),
                            ("certmon_stratum_risk_estimate", "estimate"),
                            ("certmon_stratum_radius", "radius"),
                            ("certmon_stratum_audit_rate_ratio", "audit_rate")):
            v = _fmt(sm.get(field))
            if v is not None:
                out[name].append(f"{name}{skey}{v}\n")
        v = _fmt(sm.get("labels"))
        if v is not None:
            out["certmon_stratum_labels"].append(f"certmon_stratum_labels_total{skey}{v}\n")


def _selection(out: dict[str, list[str]], su: str, view: Mapping[str, Any]) -> None:
    if not view:
        return
    leader = view.get("leader")
    for model, mv in sorted(_mapping(view.get("models")).items()):
        m = _mapping(mv)
        key = f'{{model="{_esc(model)}",{su}}} '
        for name, field in _SELECTION_FIELDS:
            v = _fmt(m.get(field))
            if v is not None:
                out[name].append(f"{name}{key}{v}\n")
        v = _fmt(m.get("pulls"))
        if v is not None:
            out["certmon_selection_pulls"].append(f"certmon_selection_pulls_total{key}{v}\n")
        if leader is not None:
            out["certmon_selection_leader"].append(
                f'certmon_selection_leader{key}{"1.0" if model == leader else "0.0"}\n')
    v = _fmt(view.get("budget_used"))
    if v is not None:
        out["certmon_selection_budget_used_ratio"].append(
            f"certmon_selection_budget_used_ratio{{{su}}} {v}\n")


def _comparison(out: dict[str, list[str]], name: str, su: str, view: Mapping[str, Any]) -> None:
    r"""Render the series of one comparison (its block of a suite's ``comparisons``).

    Examples
    --------
    >>> out = {n: [] for n, _, _ in family_order()}
    >>> _comparison(out, "c", 'suite="qa"', {"baseline": "a", "candidates": {"b": {
    ...     "status": "inferior", "estimate": 0.07, "lower_bound": 0.03, "upper_bound": None,
    ...     "labels": 400}}})
    >>> print(out["certmon_comparison_difference"][0].replace(",", chr(10)), end="")
    certmon_comparison_difference{baseline="a"
    bound="estimate"
    candidate="b"
    comparison="c"
    suite="qa"} 0.07
    >>> [line.split("state=")[1].rstrip() for line in out["certmon_comparison_state"]]
    ['"pending",suite="qa"} 0.0', '"non_inferior",suite="qa"} 0.0', '"inferior",suite="qa"} 1.0']
    """
    base = f'baseline="{_esc(view.get("baseline", ""))}",'
    cmp_ = f'comparison="{_esc(name)}",'
    for cand, cv in sorted(_mapping(view.get("candidates")).items()):
        c = _mapping(cv)
        ca = f'candidate="{_esc(cand)}",'
        key = f"{{{base}{ca}{cmp_}{su}}} "
        status = c.get("status")
        for st in COMPARISON_STATES:
            out["certmon_comparison_state"].append(
                f'certmon_comparison_state{{{base}{ca}{cmp_}state="{st}",{su}}} '
                f'{"1.0" if st == status else "0.0"}\n')
        for label, field in (("estimate", "estimate"), ("lower", "lower_bound"),
                             ("upper", "upper_bound")):
            v = _fmt(c.get(field))
            if v is not None:
                out["certmon_comparison_difference"].append(
                    f'certmon_comparison_difference{{{base}bound="{label}",{ca}{cmp_}{su}}} '
                    f"{v}\n")
        for side in ("inferior", "non_inferior"):
            v = _fmt(c.get(f"log_e_{side}"))
            if v is not None:
                out["certmon_comparison_log_e_value"].append(
                    f'certmon_comparison_log_e_value{{{base}{ca}{cmp_}side="{side}",{su}}} '
                    f"{v}\n")
        for fam, field in (("certmon_comparison_margin", "margin"),
                           ("certmon_comparison_log_e_threshold", "log_threshold")):
            v = _fmt(c.get(field))
            if v is not None:
                out[fam].append(f"{fam}{key}{v}\n")
        for fam, field in (("certmon_comparison_labels", "labels"),
                           ("certmon_comparison_missing_pairs", "missing_pairs")):
            v = _fmt(c.get(field))
            if v is not None:
                out[fam].append(f"{fam}_total{key}{v}\n")
