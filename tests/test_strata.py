from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from monitor.config import CertmonConfig, parse_config
from monitor.engine import Engine
from monitor.state.strata import TOP_UP, UNIFORM, StrataSpec, StrataState

NAMES = ("easy", "mid", "hard")

CONFIG = """
[[suites]]
name = "s"
models = ["m"]
audit_rate = {rate}
{strata}
[[suites.certificates]]
name = "risk"
alpha = 0.2
delta = 0.05
methods = ["r_eval"]
cs_grid = 50
{precision}
"""


def config(strata: str = "", precision: str = "", rate: float = 0.2) -> CertmonConfig:
    return parse_config(CONFIG.format(rate=rate, strata=strata, precision=precision))


STEERED = ("[suites.strata]\nby = 'stratum'\ncount = 4\nnames = ['easy', 'mid', 'hard']\n"
           "allocation = 'cereval'\nfloor = 0.02\nrefresh_every = 16")


def event(kind: str, i: int, loss: float, stratum: str | None = None, **extra: Any) -> bytes:
    d: dict[str, Any] = {"type": kind, "event_id": f"{kind[0]}{i}", "suite": "s", "model": "m",
                         "example_id": f"x{i}", "loss": loss, "ts": float(i)}
    if stratum is not None:
        d["stratum"] = stratum
    d.update(extra)
    return json.dumps(d).encode()


def stream(n: int, seed: int, shares=(0.7, 0.2, 0.1), risks=(0.02, 0.1, 0.6)):
    """(stratum index, human loss, judge loss) per unit."""
    rng = np.random.default_rng(seed)
    ks = rng.choice(3, size=n, p=shares)
    y = (rng.random(n) < np.array(risks)[ks]).astype(float)
    f = np.where(rng.random(n) < 0.1, 1.0 - y, y)
    return ks, y, f


def drive(eng: Engine, n: int, seed: int, **kw: Any) -> list[dict[str, Any]]:
    """Closed loop: every label request is answered right away; returns all alerts."""
    ks, y, f = stream(n, seed, **kw)
    alerts: list[dict[str, Any]] = []
    for i in range(n):
        res = eng.process(event("judge", i, f[i], NAMES[ks[i]]))
        alerts += res.alerts
        for _ in res.requests:
            alerts += eng.process(event("label", i, y[i])).alerts
    return alerts


def strata_of(eng: Engine) -> StrataState:
    st = eng.suites["s"].models["m"].strata
    assert st is not None
    return st


# ---------------------------------------------------------------------- assignment
def test_no_config_no_strata() -> None:
    eng = Engine(config())
    eng.process(event("judge", 0, 0.0, "easy"))
    assert eng.suites["s"].models["m"].strata is None
    assert "strata" not in eng.state_view()["suites"]["s"]["models"]["m"]
    assert "strata" not in eng.snapshot()["suites"][0]["models"][0]


def test_assignment_by_stratum_field() -> None:
    eng = Engine(config("[suites.strata]\ncount = 3\nnames = ['b']"))
    for i, name in enumerate(["a", "b", "c", None, "a"]):
        eng.process(event("judge", i, 0.0, name))
    st = strata_of(eng)
    assert st.names == ["b", "a", "__other__"]
    assert st.cert.traffic == [1, 2, 2]  # c and the missing stratum share the last slot


def test_precision_without_strata_is_one_stratum_and_unchanged_auditing() -> None:
    plain, prec = Engine(config(rate=0.3)), Engine(config(precision="precision = 0.2", rate=0.3))
    reqs = []
    for eng in (plain, prec):
        reqs.append([r["example_id"] for i in range(300)
                     for r in eng.process(event("judge", i, float(i % 5 == 0))).requests])
    assert reqs[0] == reqs[1] and reqs[0]
    st = strata_of(prec)
    assert st.names == ["all"] and st.cert.traffic == [300] and st.rates == [0.3]


def test_judge_loss_bins_warmup_not_used_by_stratified_certificate() -> None:
    eng = Engine(config("[suites.strata]\nby = 'judge_loss'\ncount = 2\nwarmup = 100\n"
                        "allocation = 'uniform'", rate=0.5))
    rng = np.random.default_rng(0)
    warm_requests = 0
    for i in range(300):
        res = eng.process(event("judge", i, float(rng.random())))
        if i < 100:
            warm_requests += len(res.requests)
            assert all("stratum" not in r and r["reason"] == UNIFORM for r in res.requests)
        for _ in res.requests:
            eng.process(event("label", i, 0.0))
    st = strata_of(eng)
    counts = eng.suites["s"].models["m"].counts
    assert st.warmup_units == 100 and sum(st.cert.traffic) == 200
    assert counts["rounds"] == counts["labels"]  # uniform allocation: every label is a round
    assert st.cert.n_labels == counts["labels"] - warm_requests
    assert st.bins is not None and st.bins.frozen
    view = eng.state_view()["suites"]["s"]["models"]["m"]["strata"]
    assert set(view["strata"]) == {"bin0", "bin1"} and view["warmup_units"] == 100


# ---------------------------------------------------------------------- steering
def test_rates_respect_floor_budget_and_feed_only_uniform_units_to_betting() -> None:
    eng = Engine(config(STEERED))
    ks, y, f = stream(4000, 1)
    samples: dict[str, int] = {UNIFORM: 0, TOP_UP: 0}
    for i in range(4000):
        res = eng.process(event("judge", i, f[i], NAMES[ks[i]]))
        st = strata_of(eng)
        assert min(st.rates) >= 0.02 - 1e-12 and max(st.rates) <= 1.0
        assert st.uniform_rate >= 0.02 - 1e-12 and st.uniform_rate <= min(st.rates) + 1e-12
        for r in res.requests:
            samples[r["reason"]] += 1
            assert r["stratum"] == NAMES[ks[i]]
            assert r["propensity"] == st.rates[ks[i]]
            eng.process(event("label", i, y[i]))
    st = strata_of(eng)
    share = st.cert.weights
    assert abs(float(np.dot(share, st.rates)) - 0.2) < 2e-3  # the budget (shares at last refresh)
    assert st.rates[2] > 0.2 > st.rates[0]  # the risky, rare stratum is over-sampled
    counts = eng.suites["s"].models["m"].counts
    assert counts["rounds"] == samples[UNIFORM] and samples[TOP_UP] > 0
    assert st.cert.n_labels == samples[UNIFORM] + samples[TOP_UP] == counts["labels"]


def test_audit_flag_decides_when_present() -> None:
    eng = Engine(config(STEERED))
    res = eng.process(event("judge", 0, 0.0, "hard", audit=True))
    assert res.requests == []  # the upstream sampler requests its own labels
    eng.process(event("label", 0, 1.0))
    eng.process(event("judge", 1, 0.0, "hard", audit=False))
    st = strata_of(eng)
    counts = eng.suites["s"].models["m"].counts
    assert counts["rounds"] == 1 and st.cert.labels[2] == 1 and st.cert.traffic[2] == 2


def test_label_before_judge_and_top_up_goes_to_synthetic_block() -> None:
    eng = Engine(config(STEERED))
    drive(eng, 2000, 3)
    model = eng.suites["s"].models["m"]
    before = (model.block_count, strata_of(eng).cert.n_labels, model.counts["rounds"])
    # find a top-up unit (rate above the uniform part) and send its label first
    st = strata_of(eng)
    from monitor.audit import audit_uniform
    i = next(j for j in range(10_000, 20_000)
             if st.uniform_rate <= audit_uniform("", "s", "m", f"x{j}") < st.rates[2])
    eng.process(event("label", i, 1.0))
    eng.process(event("judge", i, 1.0, "hard"))
    assert model.block_count == before[0] + 1  # top-up: unaudited for the betting certificates
    assert strata_of(eng).cert.n_labels == before[1] + 1 and model.counts["rounds"] == before[2]
    # a duplicate label of that unit is dropped
    assert eng.process(event("label", i, 1.0, event_id="dup")).duplicate == "unit"


# ---------------------------------------------------------------------- estimates
@pytest.mark.statistical
def test_stratified_estimate_unbiased_under_unequal_audit_rates() -> None:
    """Through the engine: E[estimate - target] = 0, the pooled label mean is biased."""
    reps, n = 30, 1000
    risks = np.array([0.02, 0.1, 0.6])
    err, pooled_err, uniform_err, covered = [], [], [], 0
    for rep in range(reps):
        eng = Engine(config(STEERED))
        ks, y, f = stream(n, 100 + rep)
        labels: list[tuple[float, str]] = []
        for i in range(n):
            res = eng.process(event("judge", i, f[i], NAMES[ks[i]]))
            for r in res.requests:
                labels.append((y[i], r["reason"]))
                eng.process(event("label", i, y[i]))
        st = strata_of(eng)
        target = float(np.dot(st.cert.weights[:3], risks))  # risk over the traffic seen
        assert min(st.cert.labels[:3]) >= 1
        err.append(st.cert.estimate - target)
        pooled_err.append(np.mean([v for v, _ in labels]) - target)
        uniform_err.append(np.mean([v for v, s in labels if s == UNIFORM]) - target)
        covered += st.cert.lower <= target <= st.cert.upper
    err_a, pooled_a, uni_a = np.array(err), np.array(pooled_err), np.array(uniform_err)
    se = err_a.std(ddof=1) / np.sqrt(reps)
    assert abs(err_a.mean()) < 4 * se + 1e-3
    # steering over-samples the risky stratum: the naive pooled mean is far too high
    assert pooled_a.mean() > 0.015 and pooled_a.mean() > 6 * se
    # the uniform part (what the betting certificates see) is unbiased for the overall risk
    assert abs(uni_a.mean()) < 4 * uni_a.std(ddof=1) / np.sqrt(reps) + 1e-3
    assert covered == reps  # conservative certified interval (delta = 0.05)


# ---------------------------------------------------------------------- alerts, replays
def test_precision_reached_alert_is_stable_across_replays_and_restores() -> None:
    cfg = config(STEERED, "precision = 0.2", rate=0.3)
    view = Engine(cfg)
    first = [a for a in drive(view, 3000, 7) if a["kind"] == "precision_reached"]
    second = [a for a in drive(Engine(cfg), 3000, 7) if a["kind"] == "precision_reached"]
    assert len(first) == 1 and first == second
    ev = first[0]["evidence"]
    assert ev["half_width"] <= ev["epsilon"] == 0.2
    assert ev["labels"] == first[0]["round"] == sum(ev["labels_per_stratum"].values())
    assert first[0]["certificate"] == "risk" and first[0]["method"] == "cereval"
    sv = view.state_view()["suites"]["s"]["models"]["m"]["strata"]
    assert sv["precision_reached_at_labels"] == ev["labels"] and sv["precision_goal"] == 0.2
    assert view.counters["alerts"]["precision_reached"] == 1
    assert {"by", "allocation", "target_stratum", "half_width", "lower", "upper", "estimate",
            "precision_goal", "precision_reached_at_labels", "strata"} <= sv.keys()
    assert {"traffic", "traffic_share", "labels", "estimate", "radius", "audit_rate"} == set(
        sv["strata"]["hard"])


def _events(n: int, seed: int) -> list[bytes]:
    ks, y, f = stream(n, seed)
    out, waiting = [], []
    for i in range(n):
        out.append(event("judge", i, f[i], NAMES[ks[i]]))
        if i % 3 == 0:  # some labels before their judge event, some after, all units labelled
            out.insert(max(0, len(out) - 2), event("label", i, y[i]))
        else:
            waiting.append(event("label", i, y[i]))
        if len(waiting) > 4:
            out.append(waiting.pop(0))
    return out + waiting


def test_snapshot_restore_equal_at_every_prefix() -> None:
    cfg = config(STEERED.replace("refresh_every = 16", "refresh_every = 3"),
                 "precision = 0.45", rate=0.5)
    events = _events(120, 11)
    full = Engine(cfg)
    outputs = [full.process(e) for e in events]
    final = json.dumps(full.snapshot(), sort_keys=True)
    assert any(a["kind"] == "precision_reached" for o in outputs for a in o.alerts)
    alert_at = [j for j, o in enumerate(outputs) if o.alerts]
    eng = Engine(cfg)
    for cut in range(len(events) + 1):
        snap = json.loads(json.dumps(eng.snapshot()))
        restored = Engine.restore(cfg, snap)
        assert restored.snapshot() == eng.snapshot()
        assert restored.state_view() == eng.state_view()
        # continue to the end from every 6th prefix and from every prefix near an alert
        if cut % 6 and not any(0 <= a - cut <= 3 for a in alert_at):
            eng.process(events[cut])
            continue
        for j, e in enumerate(events[cut:], start=cut):
            res = restored.process(e)
            assert res.alerts == outputs[j].alerts and res.requests == outputs[j].requests
        assert json.dumps(restored.snapshot(), sort_keys=True) == final
        assert restored.state_view() == full.state_view()
        if cut < len(events):
            eng.process(events[cut])


def test_state_spec_from_suite_uses_precision_certificate_level() -> None:
    cfg = parse_config(CONFIG.format(rate=0.1, strata="multiplicity = 'bonferroni'",
                                     precision="") +
                       "[[suites.certificates]]\nname = 'p'\nalpha = 0.3\ndelta = 0.1\n"
                       "precision = 0.05\n")
    spec = StrataSpec.from_suite(cfg.suites[0], lambda c: c.delta / 2)
    assert spec.certificate == "p" and spec.delta == 0.05 and spec.by == "none"
