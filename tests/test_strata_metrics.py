from __future__ import annotations

import json

from prometheus_client import CollectorRegistry, generate_latest

from monitor.config import parse_config
from monitor.engine import Engine
from monitor.metrics.collector import StateCollector

CONFIG = """
[[suites]]
name = "s"
models = ["m"]
audit_rate = 0.5
[suites.strata]
count = 3
names = ["a", "b"]
floor = 0.05
[[suites.certificates]]
name = "risk"
alpha = 0.2
delta = 0.05
methods = ["r_eval"]
cs_grid = 50
precision = 0.3
"""


def test_strata_metrics_from_state_view() -> None:
    eng = Engine(parse_config(CONFIG))
    for i in range(400):
        stratum = "a" if i % 4 else "b"
        loss = float(stratum == "b" and i % 8 == 0)
        ev = {"type": "judge", "event_id": f"j{i}", "suite": "s", "model": "m",
              "example_id": f"x{i}", "loss": loss, "ts": i, "stratum": stratum}
        for _ in eng.process(json.dumps(ev).encode()).requests:
            ev.update(type="label", event_id=f"l{i}")
            eng.process(json.dumps(ev).encode())
    registry = CollectorRegistry()
    registry.register(StateCollector(eng.state_view))
    view = eng.state_view()["suites"]["s"]["models"]["m"]["strata"]
    cert = {"suite": "s", "model": "m", "certificate": "risk"}
    assert registry.get_sample_value("certmon_precision_half_width", cert) == view["half_width"]
    assert registry.get_sample_value("certmon_precision_target", cert) == 0.3
    for name in ("a", "b"):
        lab = {"suite": "s", "model": "m", "stratum": name}
        sv = view["strata"][name]
        assert registry.get_sample_value("certmon_stratum_traffic_ratio", lab) == sv[
            "traffic_share"]
        assert registry.get_sample_value("certmon_stratum_labels_total", lab) == sv["labels"] > 0
        assert registry.get_sample_value("certmon_stratum_risk_estimate", lab) == sv["estimate"]
        assert registry.get_sample_value("certmon_stratum_radius", lab) == sv["radius"]
        assert registry.get_sample_value("certmon_stratum_audit_rate_ratio", lab) == sv[
            "audit_rate"] >= 0.05
    # the empty "__other__" slot has no label: no estimate and no radius series
    other = {"suite": "s", "model": "m", "stratum": "__other__"}
    assert registry.get_sample_value("certmon_stratum_traffic_ratio", other) == 0.0
    assert registry.get_sample_value("certmon_stratum_radius", other) is None
    text = generate_latest(registry).decode()
    assert "# TYPE certmon_stratum_labels_total counter" in text


def test_no_strata_no_series() -> None:
    state = {"suites": {"s": {"models": {"m": {"counts": {"rounds": 1}}}}}}
    registry = CollectorRegistry()
    registry.register(StateCollector(lambda: state))
    text = generate_latest(registry).decode()
    assert "certmon_stratum_traffic_ratio{" not in text
    assert "certmon_precision_half_width{" not in text
