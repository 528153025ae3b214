"""Stratified estimates stay valid when labels come back late, out of order or never.

Steered stratified auditing (two named strata of equal traffic, Cer-Eval allocation, the
engine's hash audit, labels requested and answered by a labeller whose delay, or whether it
answers at all, depends on the label). Before stratified labels were applied in audit order
with missing labels at each side's worst value, the arrival-order estimates saw mostly the
labels that came back: Cer-Eval's anytime interval missed the risk over the traffic seen in
100 of 100 suites in each case below, and the StratPPI interval as often.
"""

from __future__ import annotations

import heapq
import json

import numpy as np
import pytest

from monitor.config import parse_config
from monitor.engine import Engine
from tests.stats.binomial import clopper_pearson_lower

pytestmark = pytest.mark.statistical

DELTA = 0.05
SUITES = 40
UNITS = 3000
CHECK_EVERY = 250
CONFIG = """
[[suites]]
name = "*"
models = ["m"]
audit_rate = 0.2
pending_ttl_seconds = {ttl}
[suites.strata]
by = "stratum"
count = 3
names = ["a", "b"]
allocation = "cereval"
floor = 0.05
refresh_every = 16
[[suites.certificates]]
name = "risk"
alpha = 0.2
delta = {delta}
methods = ["r_eval"]
precision = 0.02
"""

CASES = {
    # failing labels never come (pending forever): arrival order saw only the passes
    "failures_pending": dict(risks=(0.1, 0.6), delay_fail=1e9),
    # 80% of failing labels never come, timed out after 300: missing for good
    "failures_missing": dict(risks=(0.1, 0.6), missing_fail=0.8, ttl=300.0),
    # the mirror: 80% of passing labels missing for good
    "passes_missing": dict(risks=(0.4, 0.9), missing_pass=0.8, ttl=300.0),
}


def _suite_events(name: str, rng: np.random.Generator, risks: tuple[float, float]
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    k = rng.integers(0, 2, UNITS)
    human = rng.random(UNITS) < np.asarray(risks)[k]
    judge = np.where(rng.random(UNITS) < 0.9, human, ~human)
    return k, human, judge


def run_case(seed: int, risks: tuple[float, float], delay_pass: float = 20.0,
             delay_fail: float = 20.0, missing_pass: float = 0.0, missing_fail: float = 0.0,
             ttl: float = 1e12) -> tuple[int, int, int]:
    """Return (suites whose Cer-Eval interval ever missed, StratPPI final misses, missing)."""
    eng = Engine(parse_config(CONFIG.format(ttl=ttl, delta=DELTA)))
    rng = np.random.default_rng(seed)
    r = np.asarray(risks)
    data = [_suite_events(f"s{i}", rng, risks) for i in range(SUITES)]
    delays = rng.exponential(1.0, (SUITES, UNITS))
    never = rng.random((SUITES, UNITS))
    missed = [False] * SUITES
    heap: list[tuple[float, int, int]] = []  # (ts, suite, unit) of labels to come
    for i in range(UNITS):
        t = 1e6 + i
        while heap and heap[0][0] <= t:
            tl, s, j = heapq.heappop(heap)
            eng.process(json.dumps({
                "type": "label", "event_id": f"l{j}", "suite": f"s{s}", "model": "m",
                "example_id": f"x{j}", "loss": float(data[s][1][j]), "ts": tl}).encode())
        for s in range(SUITES):
            k, human, judge = data[s]
            res = eng.process(json.dumps({
                "type": "judge", "event_id": f"j{i}", "suite": f"s{s}", "model": "m",
                "example_id": f"x{i}", "loss": float(judge[i]), "ts": t,
                "stratum": "ab"[k[i]]}).encode())
            if res.requests:
                fail = bool(human[i])
                if never[s, i] < (missing_fail if fail else missing_pass):
                    continue
                d = delays[s, i] * (delay_fail if fail else delay_pass)
                if d < 1e8:
                    heapq.heappush(heap, (t + d, s, i))
        if (i + 1) % CHECK_EVERY == 0:
            for s in range(SUITES):
                st = eng.suites[f"s{s}"].models["m"].strata
                assert st is not None
                theta = float(np.dot(st.cert.weights[:2], r))
                v = st.view()
                if not v["lower"] <= theta <= v["upper"]:
                    missed[s] = True
    ppi_missed = 0
    missing = 0
    for s in range(SUITES):
        m = eng.suites[f"s{s}"].models["m"]
        st = m.strata
        assert st is not None
        missing += m.counts["expired_pending"]
        theta = float(np.dot(st.cert.weights[:2], r))
        ppi = st.view()["ppi"]
        if ppi["lower"] is not None:  # (None: no label applied yet, no interval)
            ppi_missed += not ppi["lower"] <= theta <= ppi["upper"]
    return sum(missed), ppi_missed, missing


@pytest.mark.parametrize("case", sorted(CASES))
def test_stratified_intervals_cover_under_label_dependent_delays(case: str) -> None:
    kw = dict(CASES[case])
    cer, ppi, missing = run_case(2025, **kw)  # type: ignore[arg-type]
    print(f"{case}: Cer-Eval missed in {cer}/{SUITES}, StratPPI in {ppi}/{SUITES}, "
          f"missing labels {missing}")
    if "ttl" in kw:
        assert missing > SUITES  # labels really went missing for good
    assert clopper_pearson_lower(cer, SUITES, 0.99) <= DELTA, (case, cer)
    # StratPPI's interval is asymptotic at miscoverage 0.1 (fixed n): not a guarantee, but
    # taking missing labels at each side's worst value keeps it from missing systematically
    assert clopper_pearson_lower(ppi, SUITES, 0.99) <= 0.1, (case, ppi)
