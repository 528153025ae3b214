"""Generate certmon's Grafana dashboards (deploy/grafana/dashboards/*.json).

The JSON files are committed; this script (with the panel building blocks of ``panels.py``) is
their source. After editing either run

    python deploy/grafana/build_dashboards.py

and commit both. ``tests/deploy/test_deploy_dashboards.py`` fails if the JSON files and this
script disagree, and checks every metric name used in a query against a live certmon scrape.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

_SPEC = importlib.util.spec_from_file_location(
    "certmon_dashboard_panels", Path(__file__).resolve().parent / "panels.py")
assert _SPEC is not None and _SPEC.loader is not None
_PANELS = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_PANELS)
DS, NO_VALUE, Layout = _PANELS.DS, _PANELS.NO_VALUE, _PANELS.Layout
target, timeseries, stat = _PANELS.target, _PANELS.timeseries, _PANELS.stat
by_name, variable, link = _PANELS.by_name, _PANELS.variable, _PANELS.link
dashboard, datasource_variable = _PANELS.dashboard, _PANELS.datasource_variable

OUT = Path(__file__).resolve().parent / "dashboards"
MODEL_LINK = "/d/certmon-model/certmon-model?var-suite=${__data.fields.suite}" \
             "&var-model=${__data.fields.model}&${datasource:queryparam}"
# Scrape health of certmon targets (the alert rules use the same selector).
UP = 'up{job=~"certmon.*"}'
FLEET_FILTER = 'suite=~"$suite", model=~"$model"'
MODEL_FILTER = 'suite="$suite", model="$model"'
CERT_FILTER = 'suite="$suite", model="$model", certificate="$certificate"'
# 0 pending, 1 certified, 2 violated (as one number per certificate x method)
STATE_CODE = (
    "max by (suite, model, certificate, method) "
    '(certmon_certificate_state{{state="certified", {f}}})'
    " + 2 * max by (suite, model, certificate, method) "
    '(certmon_certificate_state{{state="violated", {f}}})'
)
STATE_MAPPINGS = [
    {
        "type": "value",
        "options": {
            "0": {"text": "pending", "color": "text", "index": 0},
            "1": {"text": "certified", "color": "green", "index": 1},
            "2": {"text": "violated", "color": "red", "index": 2},
        },
    }
]


def zero_while_up(expr: str) -> str:
    """``expr``, or 0 while at least one certmon target is up, else nothing (never a false 0).

    ``expr or vector(0)`` reads 0 when certmon is down or not scraped at all; this reads
    "no data" (:data:`NO_VALUE`) then.
    """
    return f"{expr} or (0 * count({UP} == 1))"


def per_method(expr: str, on: str, f: str) -> str:
    """Spread a per-model or per-certificate series over every method row of the table."""
    index = (f"0 * max by (suite, model, certificate, method) "
             f'(certmon_certificate_state{{state="pending", {f}}})')
    return f"{index} + on ({on}) group_left () {expr}"


def fleet() -> dict[str, Any]:
    """Return the fleet overview dashboard."""
    lay = Layout()
    lay.row("Certificates")
    f = FLEET_FILTER
    for title, state, color in (("Certified", "certified", "green"),
                                 ("Violated", "violated", "red"),
                                 ("Pending", "pending", "text")):
        lay.add(stat(f"{title} certificates",
                     zero_while_up(f'count(max by (suite, model, certificate, method) '
                     f'(certmon_certificate_state{{state="{state}", {f}}}) == 1)'),
                     description=f"Certificates currently {state} (by their primary method; "
                                 "certificate x method pairs with [metrics] detail = "
                                 "\"full\").",
                     thresholds=[(None, color)]), 4, 4)
    lay.add(stat("Labels received (all models)",
                 zero_while_up(f"sum(certmon_labels_total{{{f}}})"),
                 description="Human labels accepted since the state began."), 6, 4)
    lay.add(stat("Label requests pending",
                 zero_while_up(f"sum(certmon_pending_units{{{f}}})"),
                 description="Audited units waiting for their human label."), 6, 4)
    table_targets = [
        target(STATE_CODE.format(f=f), ref="A", instant=True, fmt="table"),
        target(f"max by (suite, model, certificate, method) (certmon_risk_estimate{{{f}}})",
               ref="B", instant=True, fmt="table"),
        target(f"max by (suite, model, certificate, method) (certmon_risk_upper_bound{{{f}}})",
               ref="C", instant=True, fmt="table"),
        target(f"max by (suite, model, certificate, method) (certmon_risk_lower_bound{{{f}}})",
               ref="D", instant=True, fmt="table"),
        target(per_method(f"max by (suite, model, certificate) (certmon_certificate_alpha{{{f}}})",
                          "suite, model, certificate", f), ref="E", instant=True, fmt="table"),
        target(per_method(f"max by (suite, model) (certmon_rounds_total{{{f}}})",
                          "suite, model", f), ref="F", instant=True, fmt="table"),
        target(per_method(f"max by (suite, model) (certmon_labels_total{{{f}}})",
                          "suite, model", f), ref="G", instant=True, fmt="table"),
        target(f"1000 * max by (suite, model, certificate, method) "
               f"(certmon_certificate_last_change_timestamp_seconds{{{f}}})",
               ref="H", instant=True, fmt="table"),
    ]
    names = {"Value #A": "State", "Value #B": "Risk estimate",
             "Value #C": "Risk <= (certified, one-sided)",
             "Value #D": "Risk >= (violated, one-sided)", "Value #E": "Alpha", "Value #F": "Rounds",
             "Value #G": "Labels", "Value #H": "Last change (event time)"}
    table = {
        "type": "table", "title": "Every suite / model / certificate / method",
        "description": "Current certificate state; risk estimate; the one-sided bound that "
                       "goes with the verdict, at the certificate's confidence (risk <= bound "
                       "<= alpha while certified, risk >= bound >= alpha while violated; "
                       "empty while pending: no one-sided statement yet); labels so far and "
                       "time of the last state change. Click a model to drill down.",
        "datasource": DS, "targets": table_targets,
        "transformations": [{"id": "merge", "options": {}},
                            {"id": "organize", "options": {"excludeByName": {"Time": True},
                                                           "renameByName": names}}],
        "fieldConfig": {
            "defaults": {"custom": {"align": "auto", "cellOptions": {"type": "auto"},
                                    "inspect": False}, "decimals": 4},
            "overrides": [
                by_name("State", {"mappings": STATE_MAPPINGS,
                                  "custom.cellOptions": {"type": "color-background"}}),
                by_name("Rounds", {"decimals": 0}), by_name("Labels", {"decimals": 0}),
                by_name("Last change (event time)", {"unit": "dateTimeAsIso"}),
                by_name("model", {"links": [{"title": "Model drill-down", "url": MODEL_LINK}]}),
            ],
        },
        "options": {"showHeader": True, "sortBy": [{"displayName": "State", "desc": True}]},
    }
    lay.add(table, 24, 10)
    timeline = {
        "type": "state-timeline", "title": "Certificate state over time",
        "description": "One line per suite/model/certificate/method. Empty: no certmon target "
                       "scraped in the time range, or no certificate yet.", "datasource": DS,
        "targets": [target(STATE_CODE.format(f=f),
                           legend="{{suite}}/{{model}} {{certificate}} {{method}}")],
        "fieldConfig": {"defaults": {"mappings": STATE_MAPPINGS,
                                     "thresholds": {"mode": "absolute",
                                                    "steps": [{"value": None,
                                                               "color": "text"}]}},
                        "overrides": []},
        "options": {"showValue": "never", "mergeValues": True, "rowHeight": 0.8},
    }
    lay.add(timeline, 24, 8)
    alpha_line = {"matcher": {"id": "byRegexp", "options": "^alpha .*"},
                  "properties": [{"id": "custom.lineStyle",
                                  "value": {"fill": "dash", "dash": [10, 10]}},
                                 {"id": "custom.lineWidth", "value": 2}]}
    lay.add(timeseries("Two-sided confidence sequence, upper end, vs alpha: $method",
                       [target(f"max by (suite, model, certificate) "
                               f'(certmon_risk_cs_upper_bound{{method="$method", {f}}})',
                               legend="{{suite}}/{{model}} {{certificate}}", ref="A"),
                        target(f"max by (suite, model, certificate) "
                               f"(certmon_certificate_alpha{{{f}}})",
                               legend="alpha {{suite}}/{{model}} {{certificate}}", ref="B")],
                       unit="percentunit", minimum=0, overrides=[alpha_line],
                       description="Upper end of the two-sided anytime-valid confidence "
                                   "sequence of the chosen method (variable `method`); dashed: "
                                   "each certificate's alpha. Progress, not the verdict: a "
                                   "model is certified by its certify test, often while this "
                                   "end is still above alpha (the verdict's own one-sided bound "
                                   "is in the table). Empty: no rounds yet, or the sequence "
                                   "became empty (non-stationary risk)."),
            12, 8)
    lay.add(timeseries("Labels received per minute",
                       [target(f"60 * sum by (suite, model) "
                               f"(rate(certmon_labels_total{{{f}}}[$__rate_interval]))",
                               legend="{{suite}}/{{model}}")], unit="short", minimum=0), 12, 8)
    comparisons_row(lay)
    operations_row(lay)
    return dashboard("certmon-fleet", "certmon / fleet overview",
                     "Certificate state of every model, and the health of the certmon pipeline.",
                     lay.panels,
                     [datasource_variable(),
                      variable("suite", "label_values(certmon_rounds_total, suite)", "Suite",
                               multi=True),
                      variable("model", 'label_values(certmon_rounds_total{suite=~"$suite"}, '
                                        "model)", "Model", multi=True),
                      variable("method", "label_values(certmon_risk_estimate, method)",
                               "Method")],
                     [link("Model drill-down", "/d/certmon-model/certmon-model",
                           include_vars=True)])


def comparisons_row(lay: Layout) -> None:
    """Add the comparisons row (candidate vs baseline, ``[[suites.comparisons]]``) to ``lay``."""
    lay.row("Comparisons (candidate vs baseline)")
    f = 'suite=~"$suite"'
    by = "max by (suite, comparison, baseline, candidate) "
    code = (f'{by}(certmon_comparison_state{{state="non_inferior", {f}}}) + 2 * '
            f'{by}(certmon_comparison_state{{state="inferior", {f}}})')
    targets = [target(code, ref="A", instant=True, fmt="table")]
    for ref, bound in (("B", "estimate"), ("C", "lower"), ("D", "upper")):
        targets.append(target(f'{by}(certmon_comparison_difference{{bound="{bound}", {f}}})',
                              ref=ref, instant=True, fmt="table"))
    targets += [target(f"{by}(certmon_comparison_margin{{{f}}})", ref="E", instant=True,
                       fmt="table"),
                target(f"{by}(certmon_comparison_labels_total{{{f}}})", ref="F", instant=True,
                       fmt="table")]
    names = {"Value #A": "Verdict", "Value #B": "Difference estimate",
             "Value #C": "Difference >= (lower bound)", "Value #D": "Difference <= (upper bound)",
             "Value #E": "Margin", "Value #F": "Labels"}
    mappings = [{"type": "value", "options": {
        "0": {"text": "pending", "color": "text", "index": 0},
        "1": {"text": "non_inferior", "color": "green", "index": 1},
        "2": {"text": "inferior", "color": "orange", "index": 2}}}]
    lay.add({
        "type": "table", "title": "Every comparison / candidate",
        "description": "Verdict of each candidate against its baseline (non_inferior: "
                       "risk(candidate) - risk(baseline) < margin; inferior: > margin, each at "
                       "the comparison's confidence); the difference's estimate and anytime "
                       "one-sided bounds (empty until shown); labels used. Empty: no "
                       "[[suites.comparisons]] configured.",
        "datasource": DS, "targets": targets,
        "transformations": [{"id": "merge", "options": {}},
                            {"id": "organize", "options": {"excludeByName": {"Time": True},
                                                           "renameByName": names}}],
        "fieldConfig": {"defaults": {"custom": {"align": "auto", "cellOptions": {"type": "auto"},
                                                "inspect": False}, "decimals": 4},
                        "overrides": [by_name("Verdict", {
                            "mappings": mappings,
                            "custom.cellOptions": {"type": "color-background"}}),
                            by_name("Labels", {"decimals": 0})]},
        "options": {"showHeader": True, "sortBy": [{"displayName": "Verdict", "desc": True}]},
    }, 12, 8)
    lay.add(timeseries("Difference risk(candidate) - risk(baseline), bounds and margin", [
        target(f'{by}(certmon_comparison_difference{{bound="estimate", {f}}})',
               legend="{{comparison}} {{candidate}} estimate", ref="A"),
        target(f'{by}(certmon_comparison_difference{{bound="lower", {f}}})',
               legend="{{comparison}} {{candidate}} lower bound", ref="B"),
        target(f'{by}(certmon_comparison_difference{{bound="upper", {f}}})',
               legend="{{comparison}} {{candidate}} upper bound", ref="C"),
        target(f"{by}(certmon_comparison_margin{{{f}}})",
               legend="margin {{comparison}} {{candidate}}", ref="D")],
        unit="percentunit", description="Estimate and anytime one-sided bounds of the "
        "difference; a lower bound above the margin is inferior, an upper bound below it "
        "non-inferior. Empty: no comparison configured, or no pair yet."), 12, 8)


def operations_row(lay: Layout) -> None:
    """Add the operations row (pipeline health) to ``lay``."""
    lay.row("Operations")
    lay.add(timeseries("Events received / rejected / duplicate / unrouted per second", [
        target("sum(rate(certmon_events_received_total[$__rate_interval]))", "received", "A"),
        target("sum by (reason) (rate(certmon_events_rejected_total[$__rate_interval]))",
               "rejected: {{reason}}", "B"),
        target("sum by (reason) (rate(certmon_events_duplicate_total[$__rate_interval]))",
               "duplicate: {{reason}}", "C"),
        target("sum(rate(certmon_events_unrouted_total[$__rate_interval]))", "unrouted", "D"),
    ], unit="reqps", minimum=0, description="Rejected events go to the dead-letter sink. "
       "Unrouted events are valid events of no configured suite or model (a mistyped suite, "
       "a model outside the suite's globs): counted, in no certificate."),
            12, 8)
    lay.add(timeseries("Kafka consumer lag", [
        target("sum by (topic) (certmon_kafka_consumer_lag_messages)", "{{topic}}"),
    ], minimum=0, description="Messages behind the end of each input topic (Kafka source). "
       "Empty: not the Kafka source, no partition assigned yet, or the brokers are unreachable "
       "(the lag is unknown then, not 0: see certmon up and CertmonNotProcessing)."),
            12, 8)
    lay.add(stat("Checkpoint age",
                 zero_while_up("max(time() - (certmon_checkpoint_last_success_timestamp_seconds"
                               " > 0) and on (job, instance) "
                               "certmon_checkpoint_pending_events > 0)"),
                 unit="s", thresholds=[(None, "green"), (900, "orange"), (3600, "red")],
                 description="Seconds since the last durable checkpoint of the stalest "
                             "replica that has events waiting for one (what the checkpoint "
                             "alerts watch). 0 while every replica is idle: nothing to "
                             "checkpoint, so an idle healthy instance never turns red. No "
                             "data: no certmon target is scraped."), 4, 4)
    lay.add(stat("Events awaiting a checkpoint", "sum(certmon_checkpoint_pending_events)",
                 unit="none", description="Events read since the last durable checkpoint, "
                                          "all replicas: what a crash now would replay."),
            4, 4)
    lay.add(timeseries("Checkpoint duration", [
        target("histogram_quantile(0.5, sum by (le) "
               "(rate(certmon_checkpoint_duration_seconds_bucket[$__rate_interval])))", "p50",
               "A"),
        target("histogram_quantile(0.99, sum by (le) "
               "(rate(certmon_checkpoint_duration_seconds_bucket[$__rate_interval])))", "p99",
               "B"),
        target("sum(increase(certmon_checkpoint_failures_total[$__rate_interval]))",
               "failures", "C"),
    ], unit="s", minimum=0, overrides=[by_name("failures", {"unit": "short",
                                                           "custom.axisPlacement": "right"})]),
            8, 8)
    lay.add(timeseries("Event processing time", [
        target("histogram_quantile(0.5, sum by (le) "
               "(rate(certmon_event_processing_seconds_bucket[$__rate_interval])))", "p50", "A"),
        target("histogram_quantile(0.99, sum by (le) "
               "(rate(certmon_event_processing_seconds_bucket[$__rate_interval])))", "p99", "B"),
    ], unit="s", minimum=0,
        description="Sampled: the processing time of the first event of each processing "
                    "batch, timed alone; one observation per batch, not per event. Empty (a "
                    "gap): nothing was processed in the interval (idle input, or a Kafka "
                    "source whose brokers are unreachable: see certmon up), or no certmon "
                    "target was scraped."),
            6, 8)
    lay.add(timeseries("Alerts emitted", [
        target("sum by (kind) (increase(certmon_alerts_emitted_total[$__rate_interval]))",
               "{{kind}}"),
    ], minimum=0), 6, 8)
    lay.add(stat("certmon up", f'min(certmon_up{{job=~"certmon.*"}} or {UP}) or on () vector(0)',
                 thresholds=[(None, "red"), (1, "green")],
                 description="up while every certmon target is scraped and processing "
                             "(certmon_up 1); down when any replica is down or not processing "
                             "(Kafka unreachable), or no target is scraped at all.",
                 mappings=[{"type": "value", "options": {"0": {"text": "down"},
                                                         "1": {"text": "up"}}}]), 4, 4)
    lay.add(stat("Replicas up", f"sum({UP})", unit="none",
                 description="certmon targets scraped successfully (no data: none known)."),
            4, 4)
    lay.add(stat("Version", "count by (version) (certmon_build_info)", unit="none",
                 legend="{{version}}", text_mode="name",
                 description="certmon version of the running replicas (one per version)."),
            4, 4)


def model() -> dict[str, Any]:
    """Return the per-model drill-down dashboard."""
    lay = Layout()
    m, c = MODEL_FILTER, CERT_FILTER
    lay.row("$suite / $model")
    lay.add(stat("Rounds", f"sum(certmon_rounds_total{{{m}}})"), 4, 4)
    lay.add(stat("Labels received", f"sum(certmon_labels_total{{{m}}})"), 4, 4)
    lay.add(stat("Judge events", f"sum(certmon_judge_events_total{{{m}}})"), 4, 4)
    lay.add(stat("Pending units", f"sum(certmon_pending_units{{{m}}})"), 4, 4)
    lay.add(stat("Unsolicited labels (not used)", f"sum(certmon_unsolicited_labels_total{{{m}}})"),
            4, 4)
    lay.add(stat("Expired units", f"sum(certmon_expired_units_total{{{m}}})"), 4, 4)
    lay.row("Certificate $certificate, per method")
    cs_up, cs_low = "two-sided CS upper", "two-sided CS lower"
    band = [by_name(cs_up, {"custom.fillBelowTo": cs_low, "custom.fillOpacity": 20}),
            by_name(cs_low, {"custom.lineWidth": 0}),
            by_name(cs_up, {"custom.lineWidth": 0}),
            by_name("risk <= (certified)", {"custom.lineWidth": 2,
                                            "color": {"mode": "fixed", "fixedColor": "green"}}),
            by_name("risk >= (violated)", {"custom.lineWidth": 2,
                                           "color": {"mode": "fixed", "fixedColor": "orange"}}),
            by_name("alpha", {"custom.lineStyle": {"fill": "dash", "dash": [10, 10]},
                              "color": {"mode": "fixed", "fixedColor": "red"}})]
    risk = timeseries("Risk: $method", [
        target(f'certmon_risk_estimate{{{c}, method="$method"}}', "estimate", "A"),
        target(f'certmon_risk_cs_lower_bound{{{c}, method="$method"}}', cs_low, "B"),
        target(f'certmon_risk_cs_upper_bound{{{c}, method="$method"}}', cs_up, "C"),
        target(f"certmon_certificate_alpha{{{c}}}", "alpha", "D"),
        target(f'certmon_risk_upper_bound{{{c}, method="$method"}}', "risk <= (certified)",
               "E"),
        target(f'certmon_risk_lower_bound{{{c}, method="$method"}}', "risk >= (violated)",
               "F"),
    ], unit="percentunit", minimum=0, overrides=band,
        description="Point estimate; the two-sided anytime-valid confidence sequence (band, "
                    "valid at every time simultaneously); the one-sided bound that goes with "
                    "the verdict, at the same confidence: risk <= (green, <= alpha) while "
                    "certified, risk >= (orange, >= alpha) while violated, absent while "
                    "pending; dashed: alpha. The band's ends may lie across alpha when a "
                    "verdict is reached: the verdict comes from a one-sided test (see "
                    "docs/guarantees.md). An empty band: no rounds yet, or the sequence "
                    "became empty (non-stationary risk). Under audit_policy \"active\" the "
                    "estimate and band are of the uniform-share rounds (certmon_rounds_total) "
                    "and the one-sided bound is alpha itself (the verdict is the "
                    "inverse-propensity test's).")
    risk.update(repeat="method", repeatDirection="h", maxPerRow=3)
    lay.add(risk, 8, 9)
    lay.newline()
    evalues = timeseries("log e-values: $method", [
        target(f'certmon_log_e_value{{{c}, method="$method", side="certify"}}', "certify", "A"),
        target(f'certmon_log_e_value{{{c}, method="$method", side="violate"}}', "violate", "B"),
        target(f'certmon_log_e_threshold{{{c}, method="$method"}}', "threshold", "C"),
    ], overrides=[by_name("threshold", {"custom.lineStyle": {"fill": "dash", "dash": [10, 10]},
                                        "color": {"mode": "fixed", "fixedColor": "red"}}),
                  by_name("certify", {"color": {"mode": "fixed", "fixedColor": "green"}}),
                  by_name("violate", {"color": {"mode": "fixed", "fixedColor": "orange"}})],
        description="A certificate is reached when a log e-value crosses log(1/delta) "
                    "(after the multiplicity correction). Under audit_policy \"active\": the "
                    "inverse-propensity tests' (pending labels at their worst).")
    evalues.update(repeat="method", repeatDirection="h", maxPerRow=3)
    lay.add(evalues, 8, 9)
    lay.newline()
    lay.add(timeseries("Judge reliance (R-AutoEval+, certify side)", [
        target(f'certmon_judge_reliance_ratio{{{c}, method="r_autoeval_plus"}}',
               "reliance (weighted mean rho)", "A"),
        target(f'certmon_rho_weight_ratio{{{c}, method="r_autoeval_plus"}}',
               "weight of rho={{rho}}", "B"),
    ], unit="percentunit", stack=True, fill=40, minimum=0, maximum=1,
        overrides=[by_name("reliance (weighted mean rho)", {
            "custom.stacking": {"mode": "none", "group": "A"}, "custom.fillOpacity": 0,
            "custom.lineWidth": 3, "color": {"mode": "fixed", "fixedColor": "blue"}})],
        description="How much R-AutoEval+ relies on the judge: the mean of its reliance "
                    "factors rho weighted by the mixture (thick line; 0: the judge is ignored, "
                    "1: fully relied on), exported at every [metrics] detail. With detail = "
                    "\"full\" the weight of each rho is stacked below it (not exported with "
                    "the default \"shown\", which keeps the series count of a fleet down). "
                    "Empty: the certificate has no R-AutoEval+ method, it is not the primary "
                    "method (detail \"shown\" exports the primary method only), or no event "
                    "of that model yet."), 12, 8)
    lay.add(timeseries("Judge bias (mean judge - human loss)", [
        target(f"certmon_judge_bias{{{m}}}", "bias"),
    ], description="Positive: the judge is harsher than humans."), 12, 8)
    lay.add(timeseries("Label requests vs labels received (per minute)", [
        target(f"60 * sum(rate(certmon_label_requests_total{{{m}}}[$__rate_interval]))",
               "requests", "A"),
        target(f"60 * sum(rate(certmon_labels_total{{{m}}}[$__rate_interval]))", "labels", "B"),
        target(f"sum(certmon_pending_units{{{m}}})", "pending units", "C"),
    ], minimum=0, overrides=[by_name("pending units", {"custom.axisPlacement": "right"})]),
            12, 8)
    lay.add(timeseries("Rounds per minute", [
        target(f"60 * sum(rate(certmon_rounds_total{{{m}}}[$__rate_interval]))", "rounds"),
        target(f"60 * sum(rate(certmon_judge_events_total{{{m}}}[$__rate_interval]))",
               "judge events", "B"),
    ], minimum=0, description="Rounds: audited units with their label. Under audit_policy "
                              "\"active\" only the uniform-share units (coin below the "
                              "policy's smallest propensity) are rounds: they feed the change "
                              "detectors and confidence sequences; every judged unit enters "
                              "the active tests."), 12, 8)
    dashed = {"custom.lineStyle": {"fill": "dash", "dash": [10, 10]},
              "color": {"mode": "fixed", "fixedColor": "red"}}
    lay.add(timeseries("Change detection: regression statistic vs threshold", [
        target(f"certmon_regression_statistic{{{c}}}", "regression", "A"),
        target(f"certmon_improvement_statistic{{{c}}}", "improvement (violated)", "B"),
        target(f"certmon_regression_threshold{{{c}}}", "threshold", "C"),
    ], overrides=[by_name("threshold", dashed)], log_scale=True,
        description="e-Shiryaev-Roberts statistics on a log axis (they span dozens of orders "
                    "of magnitude): an alarm when a statistic reaches the dashed threshold A "
                    "(average run length without a change >= A); an alarm ends the epoch. "
                    "The improvement statistic runs only while the certificate is violated "
                    "(0, not drawn on a log axis, otherwise). Empty: no rounds yet, or the "
                    "certificate is not configured for this model."), 12, 8)
    lay.add(timeseries("Epoch and judge drift", [
        target(f"certmon_certificate_epoch{{{c}}}", "epoch", "A"),
        target(f"certmon_judge_drift_statistic{{{m}}} / "
               f"certmon_judge_drift_threshold{{{m}}}", "judge drift {{signal}} / threshold",
               "B"),
    ], minimum=0, description="The certificate's epoch (a new one after each regression or "
                              "improvement) and the judge-drift statistics as a share of their "
                              "thresholds (1 = alarm)."), 12, 8)
    lay.add({
        "type": "state-timeline", "title": "Certificate state", "datasource": DS,
        "description": "State of each method of the certificate over time. Empty: no certmon "
                       "target scraped in the time range, or no event of this model yet.",
        "targets": [target(STATE_CODE.format(f=c), legend="{{method}}")],
        "fieldConfig": {"defaults": {"mappings": STATE_MAPPINGS, "thresholds": {
            "mode": "absolute", "steps": [{"value": None, "color": "text"}]}},
                        "overrides": []},
        "options": {"showValue": "never", "mergeValues": True, "rowHeight": 0.8},
    }, 24, 5)
    return dashboard(
        "certmon-model", "certmon / model drill-down",
        "Evidence for one model: risk with confidence band, e-values vs threshold, judge "
        "reliance, labelling progress.", lay.panels,
        [datasource_variable(),
         variable("suite", "label_values(certmon_rounds_total, suite)", "Suite"),
         variable("model", 'label_values(certmon_rounds_total{suite="$suite"}, model)', "Model"),
         variable("certificate", 'label_values(certmon_certificate_alpha{suite="$suite", '
                                 'model="$model"}, certificate)', "Certificate"),
         variable("method", 'label_values(certmon_risk_estimate{suite="$suite", '
                            'model="$model"}, method)', "Method", multi=True)],
        [link("Fleet overview", "/d/certmon-fleet/certmon-fleet")])


def render() -> dict[str, str]:
    """Return {file name: JSON text} of every dashboard."""
    return {f"{d['uid']}.json": json.dumps(d, indent=2, sort_keys=True) + "\n"
            for d in (fleet(), model())}


def main(argv: list[str]) -> int:
    """Write every dashboard to deploy/grafana/dashboards/."""
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in render().items():
        (OUT / name).write_text(text, encoding="utf-8")
        print(f"wrote {OUT / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
