"""Every alert's evidence agrees with its verdict.

A stream of certified models that later regress (and bad models that are violated) goes
through the engine; every ``certified`` alert carries a one-sided upper bound <= alpha, every
violation a one-sided lower bound >= alpha, both at the certificate's confidence, and the
two-sided sequence only under its own name. Regression / certificate-lost alerts carry the
detector's own statistic and threshold and the risk before and after, nothing of the
certify / violate e-processes. The Alertmanager text says the same.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from consumers.alertmanager.records import alert_annotations
from monitor.config import CertmonConfig
from monitor.engine import Engine
from monitor.simulate import SimModel, SimulationSpec, iter_jsonl

ALPHA = 0.1


def config(delta: float, multiplicity: str = "none") -> CertmonConfig:
    return CertmonConfig.model_validate({"suites": [{
        "name": "*", "models": ["*"], "audit_rate": 0.5, "multiplicity": multiplicity,
        **({"family_size": 4} if multiplicity == "bonferroni" else {}),
        "certificates": [{"name": "risk", "alpha": ALPHA, "delta": delta,
                          "methods": ["r_eval", "r_autoeval_plus"],
                          "primary": "r_autoeval_plus", "rhos": 5}]}]})


def stream_alerts(delta: float, multiplicity: str = "none", seed: int = 3) -> list[dict[str, Any]]:
    spec = SimulationSpec(
        suite="ev",
        models=(*(SimModel(f"good{i}", risk=0.03 + 0.01 * i, judge_accuracy=0.9,
                           drift_risk=0.3) for i in range(3)),
                SimModel("bad", risk=0.35, judge_accuracy=0.9)),
        examples=2400, audit_rate=0.5, drift_at=1200, unsolicited_rate=0.0,
    )
    eng = Engine(config(delta, multiplicity))
    out: list[dict[str, Any]] = []
    for line in iter_jsonl(spec, np.random.default_rng(seed)):
        out.extend(eng.process(line.rstrip(b"\n")).alerts)
    return out


@pytest.mark.parametrize(("delta", "multiplicity"),
                         [(0.05, "none"), (0.001, "none"), (0.05, "bonferroni")])
def test_every_bound_agrees_with_its_verdict(delta: float, multiplicity: str) -> None:
    alerts = stream_alerts(delta, multiplicity)
    kinds = [a["kind"] for a in alerts]
    assert {"certified", "violated", "regression", "certificate_lost"} <= set(kinds), kinds
    for a in alerts:
        ev = a["evidence"]
        assert "cs_lower" not in ev and "cs_upper" not in ev  # never unnamed
        if a["kind"] == "certified" or ev.get("verdict") is not None:
            conf = 1.0 - ev["threshold_delta"]
            assert ev["bound_confidence"] == pytest.approx(conf)
            assert ev["log_e_value"] >= ev["log_threshold"]
            if ev["verdict"] == "certified":
                assert ev["risk_upper_bound"] <= ALPHA and ev["risk_lower_bound"] is None
                assert ev["test"] == "certify"
            else:
                assert ev["risk_lower_bound"] >= ALPHA and ev["risk_upper_bound"] is None
                assert ev["test"] == "violate"
            assert "two_sided_cs_lower" in ev and "two_sided_cs_upper" in ev
        else:  # a detector's alarm: regression, its certificate_lost, improvement
            assert a["kind"] in ("regression", "certificate_lost", "improvement")
            assert ev["statistic"] >= ev["threshold"]
            assert ev["risk_before"] is not None and ev["risk_after"] is not None
            assert "log_e_value" not in ev and "log_threshold" not in ev
            assert "risk_upper_bound" not in ev and "two_sided_cs_upper" not in ev
        if a["kind"] == "regression":
            assert ev["risk_after"] > ev["risk_before"]


def test_alertmanager_text_states_the_agreeing_bound() -> None:
    alerts = stream_alerts(0.05)
    seen = set()
    for a in alerts:
        text = alert_annotations(a)["description"]
        ev = a["evidence"]
        if a["kind"] == "certified":
            seen.add("certified")
            assert f"risk <= {ev['risk_upper_bound']:.4g}" in text
            assert "one-sided, 95% confidence" in text
        elif ev.get("verdict") == "violated":
            seen.add("violated")
            assert f"risk >= {ev['risk_lower_bound']:.4g}" in text
        else:
            seen.add("detector")
            assert f"risk {ev['risk_before']:.3g} -> {ev['risk_after']:.3g}" in text
            assert "detector statistic" in text and "log e-value" not in text
        assert "risk in [" not in text
        assert "two-sided" not in text or "two-sided 95% confidence sequence" in text
    assert seen == {"certified", "violated", "detector"}
