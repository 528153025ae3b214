from __future__ import annotations

import copy
import math
import urllib.error
import urllib.request
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from monitor.metrics import (
    ALERT_KINDS,
    DUPLICATE_REASONS,
    REJECTION_REASONS,
    OperationalMetrics,
    StateCollector,
    format_rho,
    serve_metrics,
    stop_metrics,
)

RHOS = [0.0, 0.25, 0.5, 0.75, 1.0]
WEIGHTS = [0.1, 0.15, 0.2, 0.25, 0.3]


def method_view(status: str, **over: Any) -> dict[str, Any]:
    view: dict[str, Any] = {
        "rounds": 120,
        "log_e_certify": 3.5,
        "log_e_violate": -2.25,
        "cs_lower": 0.03,
        "cs_upper": 0.085,
        "status": status,
        "certified_at_round": 97 if status == "certified" else None,
        "violated_at_round": None,
        "risk_estimate": 0.05,
        "log_threshold": 3.6888794541139363,
        "rho_weights": [1.0],
        "rhos": [0.0],
        "cs_valid": True,
        "status_changed_ts": 1_763_700_000.5 if status != "pending" else None,
        "risk_upper_bound": 0.085 if status == "certified" else None,
        "risk_lower_bound": 0.1 if status == "violated" else None,
        "bound_confidence": 0.975,
    }
    view.update(over)
    return view


def make_state() -> dict[str, Any]:
    """A STATE document exactly in the contract's shape (README.md, "STATE.json")."""
    return {
        "suites": {
            "qa": {
                "multiplicity": "bonferroni",
                "family_size": 2,
                "models": {
                    "llama-q4": {
                        "counts": {
                            "judge": 5000, "labels": 260, "rounds": 250,
                            "unsolicited_labels": 4, "duplicates": 2, "rejected": 1,
                            "label_requests": 270, "expired_pending": 3, "expired_orphans": 1,
                        },
                        "judge_bias": -0.0125,
                        "pending_units": 17,
                        "orphan_labels": 2,
                        "certificates": {
                            "risk": {
                                "alpha": 0.1,
                                "delta": 0.05,
                                "methods": {
                                    "r_eval": method_view("pending"),
                                    "r_autoeval": method_view("certified", rhos=[1.0]),
                                    "r_autoeval_plus": method_view(
                                        "certified", rhos=RHOS, rho_weights=WEIGHTS
                                    ),
                                },
                            }
                        },
                    },
                    "llama-q2": {
                        "counts": {
                            "judge": 10, "labels": 0, "rounds": 0, "unsolicited_labels": 0,
                            "duplicates": 0, "rejected": 0, "label_requests": 1,
                            "expired_pending": 0, "expired_orphans": 0,
                        },
                        "judge_bias": None,
                        "pending_units": 1,
                        "orphan_labels": 0,
                        "certificates": {
                            "risk": {
                                "alpha": 0.1,
                                "delta": 0.05,
                                "methods": {
                                    "r_eval": method_view(
                                        "violated", violated_at_round=40, cs_valid=False,
                                        risk_estimate=float("nan"),
                                        status_changed_ts=1_763_700_100.0,
                                    ),
                                },
                            }
                        },
                    },
                },
            }
        },
        "counters": {
            "events_in": 5300, "rejected": {"out_of_range": 1}, "duplicates": {"event_id": 2},
            "alerts": {"certified": 2}, "label_requests": 271,
        },
    }


def registry_for(state: dict[str, Any]) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(StateCollector(lambda: state))
    return registry


M1 = {"suite": "qa", "model": "llama-q4"}
M2 = {"suite": "qa", "model": "llama-q2"}


def meth(model: dict[str, str], method: str) -> dict[str, str]:
    return {**model, "certificate": "risk", "method": method}


def test_collector_values_match_state_exactly() -> None:
    state = make_state()
    reg = registry_for(state)
    get = reg.get_sample_value
    plus = meth(M1, "r_autoeval_plus")
    assert get("certmon_risk_estimate", plus) == 0.05
    assert get("certmon_risk_cs_lower_bound", plus) == 0.03
    assert get("certmon_risk_cs_upper_bound", plus) == 0.085
    # the one-sided bound of the verdict: upper while certified, never the other side
    status = state["suites"]["qa"]["models"]["llama-q4"]["certificates"]["risk"]["methods"][
        "r_autoeval_plus"]["status"]
    if status == "certified":
        assert get("certmon_risk_upper_bound", plus) == 0.085
        assert get("certmon_risk_lower_bound", plus) is None
    assert get("certmon_log_e_value", {**plus, "side": "certify"}) == 3.5
    assert get("certmon_log_e_value", {**plus, "side": "violate"}) == -2.25
    assert get("certmon_log_e_threshold", plus) == 3.6888794541139363
    assert get("certmon_certificate_certified_round", plus) == 97
    assert get("certmon_certificate_violated_round", plus) == 0
    assert get("certmon_certificate_last_change_timestamp_seconds", plus) == 1_763_700_000.5
    for state_name, expected in (("pending", 0), ("certified", 1), ("violated", 0)):
        assert get("certmon_certificate_state", {**plus, "state": state_name}) == expected
    for rho, weight in zip(RHOS, WEIGHTS, strict=True):
        assert get("certmon_rho_weight_ratio", {**plus, "rho": format_rho(rho)}) == weight
    assert get("certmon_rho_weight_ratio", {**meth(M1, "r_autoeval"), "rho": "1"}) == 1.0
    assert get("certmon_certificate_alpha", {**M1, "certificate": "risk"}) == 0.1
    assert get("certmon_certificate_delta", {**M1, "certificate": "risk"}) == 0.05
    assert get("certmon_judge_bias", M1) == -0.0125
    assert get("certmon_pending_units", M1) == 17
    assert get("certmon_rounds_total", M1) == 250
    assert get("certmon_labels_total", M1) == 260
    assert get("certmon_judge_events_total", M1) == 5000
    assert get("certmon_unsolicited_labels_total", M1) == 4
    assert get("certmon_label_requests_total", M1) == 270
    assert get("certmon_expired_units_total", {**M1, "kind": "pending"}) == 3
    assert get("certmon_expired_units_total", {**M1, "kind": "orphan_label"}) == 1
    pending = meth(M1, "r_eval")
    assert get("certmon_certificate_state", {**pending, "state": "pending"}) == 1
    assert get("certmon_certificate_last_change_timestamp_seconds", pending) is None


def test_collector_skips_null_nan_and_invalid_interval() -> None:
    reg = registry_for(make_state())
    get = reg.get_sample_value
    violated = meth(M2, "r_eval")
    assert get("certmon_judge_bias", M2) is None  # null
    assert get("certmon_risk_estimate", violated) is None  # NaN
    assert get("certmon_risk_cs_lower_bound", violated) is None  # cs_valid false
    assert get("certmon_risk_cs_upper_bound", violated) is None
    assert get("certmon_risk_lower_bound", violated) == 0.1  # the verdict's bound stays
    assert get("certmon_risk_upper_bound", violated) is None
    assert get("certmon_certificate_violated_round", violated) == 40
    assert get("certmon_certificate_state", {**violated, "state": "violated"}) == 1
    text = generate_latest(reg).decode()
    assert "NaN" not in text


def test_collector_reads_state_at_scrape_time() -> None:
    state = make_state()
    reg = registry_for(state)
    plus = meth(M1, "r_autoeval_plus")
    assert reg.get_sample_value("certmon_rounds_total", M1) == 250
    state["suites"]["qa"]["models"]["llama-q4"]["counts"]["rounds"] = 251
    state["suites"]["qa"]["models"]["llama-q4"]["certificates"]["risk"]["methods"][
        "r_autoeval_plus"]["status"] = "violated"
    assert reg.get_sample_value("certmon_rounds_total", M1) == 251
    assert reg.get_sample_value("certmon_certificate_state", {**plus, "state": "violated"}) == 1


def test_collector_exposes_refused_model_events() -> None:
    state = make_state()
    reg = registry_for(state)
    assert reg.get_sample_value("certmon_refused_model_events_total", {"suite": "qa"}) is None
    state["suites"]["qa"]["refused_models"] = {"events": 7, "names": ["x"]}
    assert reg.get_sample_value("certmon_refused_model_events_total", {"suite": "qa"}) == 7


def test_collector_tolerates_partial_and_empty_documents() -> None:
    docs: list[dict[str, Any]] = [
        {}, {"suites": {}}, {"suites": {"s": {}}}, {"suites": {"s": {"models": {"m": {}}}}},
    ]
    for doc in docs:
        reg = registry_for(doc)
        families = list(text_string_to_metric_families(generate_latest(reg).decode()))
        assert all(not f.samples for f in families)
    state = make_state()
    methods = state["suites"]["qa"]["models"]["llama-q4"]["certificates"]["risk"]["methods"]
    methods["r_eval"] = {"status": "weird", "rounds": "x", "rho_weights": [1.0, 2.0], "rhos": [0.0]}
    reg = registry_for(state)
    assert reg.get_sample_value(
        "certmon_certificate_state", {**meth(M1, "r_eval"), "state": "pending"}) is None
    assert reg.get_sample_value(
        "certmon_rho_weight_ratio", {**meth(M1, "r_eval"), "rho": "0"}) is None
    assert reg.get_sample_value("certmon_rounds_total", M1) == 250


def test_collector_labels_are_bounded() -> None:
    text = generate_latest(registry_for(make_state())).decode()
    allowed = {"suite", "model", "certificate", "method", "side", "state", "rho", "kind"}
    for family in text_string_to_metric_families(text):
        assert family.name.startswith("certmon_")
        for sample in family.samples:
            assert set(sample.labels) <= allowed, sample
            assert "example" not in str(sample.labels)


def test_collector_infinite_values_are_exposed() -> None:
    state = make_state()
    methods = state["suites"]["qa"]["models"]["llama-q4"]["certificates"]["risk"]["methods"]
    methods["r_eval"]["log_e_certify"] = -math.inf
    reg = registry_for(state)
    value = reg.get_sample_value("certmon_log_e_value", {**meth(M1, "r_eval"), "side": "certify"})
    assert value == -math.inf


def test_describe_reports_every_family_and_detects_clashes() -> None:
    collector = StateCollector(dict)
    names = {m.name for m in collector.describe()}
    assert "certmon_rounds" in names and "certmon_risk_estimate" in names
    reg = CollectorRegistry()
    reg.register(collector)
    with pytest.raises(ValueError, match="Duplicated"):
        reg.register(StateCollector(dict))
    OperationalMetrics(reg, version="x")  # no clash between the two halves


def test_operational_metrics() -> None:
    reg = CollectorRegistry()
    ops = OperationalMetrics(reg, version="9.9.9")
    get = reg.get_sample_value
    for reason in REJECTION_REASONS:
        assert get("certmon_events_rejected_total", {"reason": reason}) == 0
    for reason in DUPLICATE_REASONS:
        assert get("certmon_events_duplicate_total", {"reason": reason}) == 0
    for kind in ALERT_KINDS:
        assert get("certmon_alerts_emitted_total", {"kind": kind}) == 0
    ops.events_received()
    ops.events_received(9)
    ops.rejected("not_finite")
    ops.rejected("not_finite")
    ops.duplicate("unit")
    ops.alert_emitted("violated")
    ops.observe_event(2e-5)
    ops.observe_event(0.5)
    ops.checkpoint_written(0.03, 1_763_700_000.0)
    ops.checkpoint_failed()
    ops.set_up(True)
    assert get("certmon_events_received_total") == 10
    assert get("certmon_events_rejected_total", {"reason": "not_finite"}) == 2
    assert get("certmon_events_duplicate_total", {"reason": "unit"}) == 1
    assert get("certmon_alerts_emitted_total", {"kind": "violated"}) == 1
    assert get("certmon_event_processing_seconds_count") == 2
    assert get("certmon_event_processing_seconds_sum") == pytest.approx(0.50002)
    assert get("certmon_event_processing_seconds_bucket", {"le": "2.5e-05"}) == 1
    assert get("certmon_checkpoint_duration_seconds_count") == 1
    assert get("certmon_checkpoint_last_success_timestamp_seconds") == 1_763_700_000.0
    assert get("certmon_checkpoints_total") == 1
    assert get("certmon_checkpoint_failures_total") == 1
    assert get("certmon_up") == 1
    assert get("certmon_build_info", {"version": "9.9.9"}) == 1
    ops.set_up(False)
    assert get("certmon_up") == 0


def test_serve_metrics_over_http_with_probes() -> None:
    state = make_state()
    reg = registry_for(state)
    OperationalMetrics(reg, version="t")
    ready = {"value": False}
    server, thread = serve_metrics(reg, "127.0.0.1", 0, ready_fn=lambda: ready["value"])
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        body = urllib.request.urlopen(base + "/metrics", timeout=5).read().decode()
        parsed = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(body) for s in f.samples
        }
        key = ("certmon_risk_estimate", tuple(sorted(meth(M1, "r_autoeval_plus").items())))
        assert parsed[key] == 0.05
        assert parsed[("certmon_rounds_total", tuple(sorted(M1.items())))] == 250
        assert urllib.request.urlopen(base + "/healthz", timeout=5).read() == b"ok\n"
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(base + "/readyz", timeout=5)
        assert err.value.code == 503
        ready["value"] = True
        assert urllib.request.urlopen(base + "/readyz", timeout=5).status == 200
    finally:
        stop_metrics(server, thread)
    assert not thread.is_alive()


def test_state_document_is_not_mutated() -> None:
    state = make_state()
    before = copy.deepcopy(state)
    generate_latest(registry_for(state))
    assert repr(state) == repr(before)


def test_collector_retries_a_view_that_raced_with_the_engine() -> None:
    calls = {"n": 0}
    state = make_state()

    def flaky() -> dict[str, Any]:
        calls["n"] += 1
        if calls["n"] < 3:
            raise RuntimeError("dictionary changed size during iteration")
        return state

    reg = CollectorRegistry()
    reg.register(StateCollector(flaky))
    assert reg.get_sample_value("certmon_rounds_total", M1) == 250

    def broken() -> dict[str, Any]:
        raise RuntimeError("always")

    reg = CollectorRegistry()
    reg.register(StateCollector(broken))
    with pytest.raises(RuntimeError):
        generate_latest(reg)


def test_before_scrape_hook_runs_before_the_counters_are_read() -> None:
    reg = CollectorRegistry()
    pending = {"events": 0}

    def sync() -> None:
        ops.events_received(pending["events"])
        pending["events"] = 0

    ops = OperationalMetrics(reg, version="t", before_scrape=sync)
    pending["events"] = 7
    text = generate_latest(reg).decode()
    assert "certmon_events_received_total 7.0" in text
    assert reg.get_sample_value("certmon_events_received_total") == 7


def test_primary_method_gauge() -> None:
    state = make_state()
    methods = state["suites"]["qa"]["models"]["llama-q4"]["certificates"]["risk"]["methods"]
    for name, view in methods.items():
        view["primary"] = name == "r_autoeval_plus"
    get = registry_for(state).get_sample_value
    assert get("certmon_certificate_primary", meth(M1, "r_autoeval_plus")) == 1
    assert get("certmon_certificate_primary", meth(M1, "r_eval")) == 0
    assert get("certmon_certificate_primary", meth(M1, "r_autoeval")) == 0
    # A document without the key (older STATE.json) exposes no sample rather than a guess.
    assert get("certmon_certificate_primary", meth(M2, "r_eval")) is None
