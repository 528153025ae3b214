"""Certificates stay valid when labels come back late, out of order or never.

Null boundary (risk = alpha = 0.1, delta = 0.05), judge agreement 0.9, 5 unaudited units per
audited one, 100 suites per case; label delays and missingness that depend on the label, in
both directions. Every method (R-Eval, R-AutoEval, R-AutoEval+, each the primary method of its
own certificate) and both claims: the number of suites with a false ``certified`` and with a
false ``violated`` claim is asserted not significantly above ``delta`` (one-sided
Clopper-Pearson at 99%), and so are the change detectors' false alarms. Before rounds were
ordered by audit position, the first case certified 98 of 100 suites.
"""

from __future__ import annotations

import heapq
import math

import numpy as np
import pytest

from monitor.config import parse_config
from monitor.engine import Engine
from monitor.simulate_delays import delayed_stream
from tests.stats.binomial import clopper_pearson_lower

pytestmark = pytest.mark.statistical

DELTA = 0.05
SUITES = 100
UNITS = 2400
CONFIG = """
[[suites]]
name = "*"
models = ["m"]
pending_ttl_seconds = {ttl}
""" + "".join(f"""
[[suites.certificates]]
name = "{m}"
alpha = 0.1
delta = {DELTA}
methods = ["{m}"]
""" for m in ("r_eval", "r_autoeval", "r_autoeval_plus"))

CASES = {
    # passes come back after ~20 units, failures after ~1500: 99/100 certified in arrival order
    "failures_slow": dict(delay_pass=20.0, delay_fail=1500.0),
    "passes_slow": dict(delay_pass=1500.0, delay_fail=20.0),
    # 30% of failing labels never come; the rest after ~20 units; pending forever
    "failures_never": dict(missing_fail=0.3),
    # the mirror, with a label timeout: never-labelled units become missing for good
    "passes_missing": dict(missing_pass=0.3, ttl=300.0),
    "failures_missing": dict(missing_fail=0.3, ttl=300.0),
}


def run_case(seed: int, ttl: float = 1e9, units: int = UNITS,
             **kw: float) -> tuple[Engine, dict[tuple[str, str], int]]:
    """Feed SUITES independent suites; count suites with an alert per (certificate, kind)."""
    eng = Engine(parse_config(CONFIG.format(ttl=ttl)))
    rng = np.random.default_rng(seed)
    streams = [delayed_stream(f"s{i}", rng, units=units, risk=0.1, **kw) for i in range(SUITES)]
    seen: dict[tuple[str, str], set[str]] = {}
    for _, line in heapq.merge(*streams):
        for a in eng.process(line).alerts:
            seen.setdefault((a["certificate"], a["kind"]), set()).add(a["suite"])
    return eng, {k: len(v) for k, v in seen.items()}


@pytest.mark.parametrize("case", sorted(CASES))
def test_false_claims_at_most_delta(case: str) -> None:
    kw = dict(CASES[case])
    ttl = kw.pop("ttl", 1e9)
    eng, counts = run_case(2024, ttl, **kw)
    models = [s.models["m"] for s in eng.suites.values()]
    unlabelled = sum(m.pending_units + m.counts["expired_pending"] for m in models)
    if "missing_pass" in kw or "missing_fail" in kw:  # labels really are missing at the end
        assert unlabelled > SUITES
    else:  # every label came, in the end, and every audited unit became a round
        assert unlabelled == 0 and all(m.order.waiting == 0 for m in models)
    for method in ("r_eval", "r_autoeval", "r_autoeval_plus"):
        for kind in ("certified", "violated"):
            k = counts.get((method, kind), 0)
            assert clopper_pearson_lower(k, SUITES, 0.99) <= DELTA, (case, method, kind, k)
        # change detectors at a constant risk: an alarm is a false alarm (a detector sees the
        # audit-ordered rounds, and a missing label at its worst value for an alarm); at most
        # 2% of healthy models alarm within 4500 labels by default, ~400 labels here
        k = counts.get((method, "regression"), 0) + counts.get((method, "improvement"), 0)
        assert clopper_pearson_lower(k, SUITES, 0.99) <= 0.02, (case, method, "detectors", k)


def test_confidence_sequences_cover_under_label_dependent_delays() -> None:
    """Every label arrives, failures ~75x later: the final sequences still cover the risk."""
    eng, _ = run_case(77, delay_pass=20.0, delay_fail=1500.0)
    missed = 0
    for s in eng.suites.values():
        m = s.models["m"]
        mon = m.monitors[("r_autoeval_plus", "r_autoeval_plus")]
        if not (mon.cs_lower <= 0.1 <= mon.cs_upper):
            missed += 1
        assert math.isfinite(mon.cs_lower)
    assert clopper_pearson_lower(missed, SUITES, 0.99) <= DELTA


def test_confidence_sequences_cover_when_passing_labels_go_missing() -> None:
    """30% of passing labels never come (timeout 300): the final sequences still cover.

    A missing unit is taken at each side's worst label (label 1 for the upper bound, 0 for
    the lower). Skipping it instead (before) missed in 5 of 100 suites here, 0 now; at about
    400 rounds the bias of skipping is within the width (the sharper check, at 2000 rounds:
    ``tests/stats/betting/test_confseq_missing.py``).
    """
    eng, _ = run_case(31, 300.0, missing_pass=0.3)
    missed = 0
    for s in eng.suites.values():
        m = s.models["m"]
        assert m.counts["expired_pending"] > 0
        mon = m.monitors[("r_autoeval_plus", "r_autoeval_plus")]
        assert math.isfinite(mon.cs_lower) and mon.cs_upper - mon.cs_lower < 0.7
        if not (mon.cs_lower <= 0.1 <= mon.cs_upper):
            missed += 1
    print(f"missed {missed} of {SUITES}")
    assert clopper_pearson_lower(missed, SUITES, 0.99) <= DELTA, missed
