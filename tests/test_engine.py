from __future__ import annotations

import json
import math
from typing import Any

import pytest

from monitor.alerts import alert_id
from monitor.audit import is_audited
from monitor.checkpoint import decode_checkpoint, encode_checkpoint
from monitor.config import CertmonConfig, parse_config
from monitor.engine import Engine
from monitor.errors import CheckpointError
from monitor.label_requests import label_request_id
from monitor.stats.betting.bets import BetConfig
from monitor.stats.betting.risk import RiskMonitor


def make_config(certs: list[dict[str, Any]] | None = None, **suite: Any) -> CertmonConfig:
    cert = {
        "name": "risk",
        "alpha": 0.3,
        "delta": 0.1,
        "methods": ["r_eval", "r_autoeval_plus"],
        "rhos": 3,
        "cs_grid": 40,
    }
    doc = {
        "suites": [
            {"name": "*", "models": ["*"], "audit_rate": 0.0, "certificates": certs or [cert]}
            | suite
        ]
    }
    return CertmonConfig.model_validate(doc)


def ev(
    kind: str,
    eid: str,
    example: str,
    loss: float = 0.0,
    ts: float = 0.0,
    model: str = "m",
    suite: str = "qa",
    audit: bool | None = None,
    **extra: Any,
) -> bytes:
    d: dict[str, Any] = {
        "type": kind,
        "event_id": eid,
        "suite": suite,
        "model": model,
        "example_id": example,
        "loss": loss,
        "ts": ts,
    }
    if audit is not None:
        d["audit"] = audit
    d.update(extra)
    return json.dumps(d).encode()


def model_view(eng: Engine, model: str = "m", suite: str = "qa") -> dict[str, Any]:
    v: dict[str, Any] = eng.state_view()["suites"][suite]["models"][model]
    return v


def dump(eng: Engine) -> str:
    return json.dumps(eng.state_view(), sort_keys=True, allow_nan=False)


# ---------------------------------------------------------------------- join
def test_join_judge_first() -> None:
    eng = Engine(make_config())
    eng.process(ev("judge", "j1", "x", loss=0.5, audit=True))
    mv = model_view(eng)
    assert mv["pending_units"] == 1 and mv["counts"]["rounds"] == 0
    eng.process(ev("label", "l1", "x", loss=1.0))
    mv = model_view(eng)
    assert mv["pending_units"] == 0 and mv["counts"]["rounds"] == 1
    assert mv["judge_bias"] == -0.5
    assert mv["counts"]["labels"] == 1 and mv["counts"]["judge"] == 1


def test_join_label_first() -> None:
    eng = Engine(make_config())
    eng.process(ev("label", "l1", "x", loss=1.0))
    mv = model_view(eng)
    assert mv["orphan_labels"] == 1 and mv["counts"]["rounds"] == 0
    eng.process(ev("judge", "j1", "x", loss=0.5, audit=True))
    mv = model_view(eng)
    assert mv["orphan_labels"] == 0 and mv["counts"]["rounds"] == 1
    assert mv["judge_bias"] == -0.5


def test_label_first_then_unaudited_judge_is_unsolicited() -> None:
    eng = Engine(make_config())
    eng.process(ev("label", "l1", "x", loss=1.0))
    eng.process(ev("judge", "j1", "x", loss=0.5, audit=False))
    mv = model_view(eng)
    assert mv["counts"]["unsolicited_labels"] == 1
    assert mv["counts"]["rounds"] == 0 and mv["orphan_labels"] == 0
    assert eng.suites["qa"].models["m"].block_count == 1


def test_label_after_unaudited_judge_is_unsolicited() -> None:
    eng = Engine(make_config())
    eng.process(ev("judge", "j1", "x", loss=0.5, audit=False))
    eng.process(ev("label", "l1", "x", loss=1.0))
    mv = model_view(eng)
    assert mv["counts"]["unsolicited_labels"] == 1
    assert mv["counts"]["rounds"] == 0 and mv["orphan_labels"] == 0


def test_round_uses_block_mean_then_resets() -> None:
    eng = Engine(make_config())
    for i, loss in enumerate([1.0, 0.0, 1.0]):
        eng.process(ev("judge", f"s{i}", f"s{i}", loss=loss, audit=False))
    eng.process(ev("judge", "j1", "x", loss=0.0, audit=True))
    eng.process(ev("label", "l1", "x", loss=0.0))
    eng.process(ev("judge", "j2", "y", loss=1.0, audit=True))
    eng.process(ev("label", "l2", "y", loss=1.0))  # empty block: None
    ref = RiskMonitor(0.3, 0.1, "r_autoeval_plus", BetConfig(), n_rhos=3, cs_grid=40)
    ref.update(0.0, 0.0, 2.0 / 3.0)
    ref.update(1.0, 1.0, None)
    mon = eng.suites["qa"].models["m"].monitors[("risk", "r_autoeval_plus")]
    assert mon.to_state() == ref.to_state()


# ---------------------------------------------------------------------- dedupe
def test_duplicate_event_id_dropped() -> None:
    eng = Engine(make_config())
    r1 = eng.process(ev("judge", "j1", "x", audit=True))
    before = dump(eng)
    r2 = eng.process(ev("judge", "j1", "x", audit=True))  # the same event again
    assert r1.duplicate is None and r2.duplicate == "event_id"
    assert model_view(eng)["counts"]["duplicates"] == 1
    assert eng.counters["duplicates"] == {"event_id": 1, "unit": 0}
    after = json.loads(dump(eng))
    after["suites"]["qa"]["models"]["m"]["counts"]["duplicates"] = 0
    after["counters"]["duplicates"]["event_id"] = 0
    after["counters"]["events_in"] -= 1
    assert json.dumps(after, sort_keys=True) == before


def test_event_id_reused_with_other_content_is_dead_lettered() -> None:
    eng = Engine(make_config())
    eng.process(ev("judge", "j1", "x", audit=True))
    before = dump(eng)
    for other in (ev("judge", "j1", "other", audit=True),   # another unit
                  ev("judge", "j1", "x", 1.0, audit=True),  # another loss
                  ev("label", "j1", "x")):                  # another type (a copied request)
        r = eng.process(other)
        assert r.duplicate is None and r.rejection is not None
        assert r.rejection.reason == "event_id_conflict"
    assert eng.counters["rejected"]["event_id_conflict"] == 3
    after = json.loads(dump(eng))
    assert after["suites"]["qa"]["models"]["m"]["counts"]["rejected"] == 3
    after["suites"]["qa"]["models"]["m"]["counts"]["rejected"] = 0
    assert after["suites"] == json.loads(before)["suites"]  # nothing changed but the count


def test_duplicate_units() -> None:
    eng = Engine(make_config())
    assert eng.process(ev("judge", "j1", "x", audit=True)).duplicate is None
    assert eng.process(ev("judge", "j2", "x", audit=True)).duplicate == "unit"  # pending
    assert eng.process(ev("label", "l1", "x")).duplicate is None  # round
    assert eng.process(ev("label", "l2", "x")).duplicate == "unit"  # already rounded
    assert eng.process(ev("judge", "j3", "x", audit=True)).duplicate == "unit"
    assert eng.process(ev("label", "l3", "y")).duplicate is None  # orphan
    assert eng.process(ev("label", "l4", "y")).duplicate == "unit"  # second orphan label
    assert eng.process(ev("judge", "j4", "z", audit=False)).duplicate is None
    assert eng.process(ev("judge", "j5", "z", audit=False)).duplicate == "unit"
    # same example for another model is another unit
    assert eng.process(ev("judge", "j6", "z", model="m2", audit=False)).duplicate is None
    assert model_view(eng)["counts"]["rounds"] == 1
    assert eng.counters["duplicates"] == {"event_id": 0, "unit": 5}


def test_dedupe_window_bound() -> None:
    eng = Engine(make_config(dedupe_max_ids=2))
    for i in range(3):
        eng.process(ev("judge", f"j{i}", f"x{i}", audit=False))
    assert len(eng.suites["qa"].join.ids) == 2 and len(eng.suites["qa"].join.units) == 2
    # j0 fell out of the window: a duplicate of an unaudited judge is no longer recognized
    assert eng.process(ev("judge", "j0", "x0", audit=False)).duplicate is None
    # but a rounded unit is still recognized through the rounded-unit memory
    eng.process(ev("judge", "a", "u", audit=True))
    eng.process(ev("label", "b", "u"))
    for i in range(5):
        eng.process(ev("judge", f"k{i}", f"k{i}", audit=False))
    assert eng.process(ev("label", "b", "u")).duplicate == "unit"


def test_dedupe_window_time_bound() -> None:
    eng = Engine(make_config(dedupe_ttl_seconds=10.0))
    eng.process(ev("judge", "j0", "x0", ts=0, audit=False))
    eng.process(ev("judge", "j1", "x1", ts=10, audit=False))
    assert eng.process(ev("judge", "j0", "x0", ts=10, audit=False)).duplicate == "event_id"
    eng.process(ev("judge", "j2", "x2", ts=10.5, audit=False))
    assert "j0" not in eng.suites["qa"].join.ids


# ---------------------------------------------------------------------- expiry
def test_expiry_by_count() -> None:
    eng = Engine(make_config(max_pending=2, max_orphans=1))
    for i in range(3):
        eng.process(ev("judge", f"j{i}", f"x{i}", audit=True))
    mv = model_view(eng)
    assert mv["counts"]["expired_pending"] == 1 and mv["pending_units"] == 2
    # the expired unit's label is not used: the unit was taken as missing, its label is late
    eng.process(ev("label", "l0", "x0"))
    assert model_view(eng)["counts"]["rounds"] == 0
    assert model_view(eng)["counts"]["late_labels"] == 1
    eng.process(ev("label", "o1", "y1"))
    eng.process(ev("label", "o2", "y2"))
    mv = model_view(eng)
    assert mv["counts"]["expired_orphans"] == 1 and mv["orphan_labels"] == 1


def test_expiry_by_event_time() -> None:
    eng = Engine(make_config(pending_ttl_seconds=10.0, orphan_ttl_seconds=5.0))
    eng.process(ev("judge", "j0", "x0", ts=100, audit=True))
    eng.process(ev("label", "l9", "y9", ts=100))
    eng.process(ev("judge", "j1", "x1", ts=105, audit=False))  # orphan tick 100: not yet
    assert model_view(eng)["counts"]["expired_orphans"] == 0
    eng.process(ev("judge", "j2", "x2", ts=105.5, audit=False))
    mv = model_view(eng)
    assert mv["counts"]["expired_orphans"] == 1 and mv["orphan_labels"] == 0
    assert mv["counts"]["expired_pending"] == 0
    eng.process(ev("judge", "j3", "x3", ts=99, audit=False))  # late event: no expiry
    assert model_view(eng)["counts"]["expired_pending"] == 0
    # past the TTL and the batching grace (1/64 of the shortest TTL, 5 s: 0.078 s)
    eng.process(ev("judge", "j4", "x4", ts=110.1, audit=False))
    mv = model_view(eng)
    assert mv["counts"]["expired_pending"] == 1 and mv["pending_units"] == 0
    eng.process(ev("label", "l0", "x0", ts=111))
    assert model_view(eng)["counts"]["rounds"] == 0


def test_expiry_is_per_suite() -> None:
    eng = Engine(make_config(pending_ttl_seconds=10.0))
    eng.process(ev("judge", "j0", "x0", ts=0, audit=True, suite="a"))
    eng.process(ev("judge", "j1", "x1", ts=1000, audit=False, suite="b"))
    assert model_view(eng, suite="a")["pending_units"] == 1


# ---------------------------------------------------------------------- audit
def test_audit_hash_determinism_and_requests() -> None:
    cfg = make_config(audit_rate=0.3, audit_salt="pepper")
    lines = [ev("judge", f"j{i}", f"x{i}", loss=0.0, ts=i) for i in range(2000)]
    runs = []
    for _ in range(2):
        eng = Engine(cfg)
        reqs = [r for line in lines for r in eng.process(line).requests]
        runs.append(reqs)
    assert runs[0] == runs[1]
    requested = {r["example_id"] for r in runs[0]}
    expected = {f"x{i}" for i in range(2000) if is_audited("pepper", "qa", "m", f"x{i}", 0.3)}
    assert requested == expected
    # binomial(2000, 0.3): 5 sigma band
    assert abs(len(requested) - 600) < 5 * math.sqrt(2000 * 0.3 * 0.7)
    r = runs[0][0]
    # the request format of docs/label-loop.md (propensity, reason, audit_position: optional)
    assert {"kind", "request_id", "suite", "model", "example_id", "judge_event_id", "ts"} <= set(
        r) <= {"kind", "request_id", "suite", "model", "example_id", "judge_event_id", "ts",
               "stratum", "propensity", "reason", "audit_position"}
    assert r["kind"] == "label" and r["suite"] == "qa" and r["request_id"] == label_request_id(
        "qa", "m", r["example_id"])
    assert eng.counters["label_requests"] == len(requested)
    assert model_view(eng)["counts"]["label_requests"] == len(requested)
    assert model_view(eng)["pending_units"] == len(requested)


def test_event_flag_overrides_hash_and_no_request() -> None:
    eng = Engine(make_config(audit_rate=1.0))
    res = eng.process(ev("judge", "j", "x", audit=False))
    assert res.requests == [] and eng.suites["qa"].models["m"].block_count == 1
    res = eng.process(ev("judge", "k", "y", audit=True, stratum="s1"))
    assert res.requests == [] and model_view(eng)["pending_units"] == 1
    res = eng.process(ev("judge", "l", "z", stratum="s1"))
    assert res.requests[0]["stratum"] == "s1"


# ---------------------------------------------------------------------- routing, rejects
def test_unrouted_and_rejected_attribution() -> None:
    cfg = make_config(name="qa*", models=["m", "n"])
    eng = Engine(cfg)
    eng.process(ev("judge", "a", "x", suite="other", audit=False))
    eng.process(ev("judge", "b", "x", model="zz", audit=False))
    assert eng.counters["unrouted"] == 2 and "other" not in eng.suites
    res = eng.process(ev("judge", "c", "x", loss=7.0))
    assert res.rejection is not None and res.rejection.reason == "out_of_range"
    assert res.dead_letter is not None and res.dead_letter["reason"] == "out_of_range"
    assert model_view(eng)["counts"]["rejected"] == 1
    assert eng.counters["rejected"]["out_of_range"] == 1
    assert eng.counters["events_in"] == 3


# ---------------------------------------------------------------------- alerts
def certify_stream(model: str = "m", n: int = 30, loss: float = 0.0, start: int = 0) -> list[bytes]:
    out = []
    for i in range(start, start + n):
        out.append(ev("judge", f"j{model}{i}", f"x{i}", loss=loss, ts=i, model=model, audit=True))
        out.append(ev("label", f"l{model}{i}", f"x{i}", loss=loss, ts=i, model=model))
    return out


def run(eng: Engine, lines: list[bytes]) -> list[dict[str, Any]]:
    return [a for line in lines for a in eng.process(line).alerts]


def test_alerts_certified_violated_lost_and_stable_ids() -> None:
    cfg = make_config()
    lines = certify_stream(n=30, loss=0.0) + certify_stream(n=120, loss=1.0, start=30)
    alerts = run(Engine(cfg), lines)
    kinds = [a["kind"] for a in alerts]
    # the regression detector ends the certified epoch (regression + certificate_lost); the
    # new epoch earns its own status (violated)
    assert kinds == ["certified", "regression", "certificate_lost", "violated"]
    for a in alerts:
        assert a["id"] == alert_id("qa", "m", "risk", a["kind"], a["round"])
        assert a["method"] == "r_autoeval_plus"
        ev_ = a["evidence"]
        if a["kind"] in ("certified", "violated"):
            assert ev_["log_e_value"] >= ev_["log_threshold"]
            assert {"two_sided_cs_lower", "two_sided_cs_upper", "rho_weights", "rhos",
                    "risk_estimate", "bound_confidence"} <= set(ev_)
        else:  # the detector's alarm: its own statistic, not the e-processes'
            assert ev_["statistic"] >= ev_["threshold"] and ev_["epoch"] == 1
            assert 30 < ev_["change_round"] <= a["round"]
            assert {"risk_before", "risk_after", "status_before"} <= set(ev_)
            assert "log_e_value" not in ev_
    assert alerts[0]["evidence"]["rounds"] == alerts[0]["round"]
    assert alerts[1]["round"] == alerts[2]["round"] < alerts[3]["round"]
    assert alerts[3]["evidence"]["epoch"] == 2
    assert alerts[3]["evidence"]["rounds"] == alerts[3]["round"] - alerts[1]["round"]
    assert run(Engine(cfg), lines) == alerts  # replay: identical ids and content
    eng = Engine(cfg)
    run(eng, lines)
    cert = model_view(eng)["certificates"]["risk"]
    m = cert["methods"]["r_autoeval_plus"]
    assert m["status"] == "violated"
    assert m["violated_at_round"] == alerts[3]["round"]
    assert m["status_changed_ts"] == json.loads(lines[2 * alerts[3]["round"] - 1])["ts"]
    assert cert["epoch"]["epoch"] == 2 and cert["epoch"]["reason"] == "regression"
    assert cert["epoch"]["history"][0]["ended_by"] == "regression"
    assert cert["epoch"]["history"][0]["status"] == "certified"
    assert eng.counters["alerts"]["certificate_lost"] == 1


# ---------------------------------------------------------------------- multiplicity
def test_bonferroni_threshold() -> None:
    eng = Engine(make_config(models=["a", "b"], multiplicity="bonferroni"))
    eng.process(ev("judge", "j", "x", model="a", audit=False))
    s = eng.state_view()["suites"]["qa"]
    assert s["multiplicity"] == "bonferroni" and s["family_size"] == 2
    m = s["models"]["a"]["certificates"]["risk"]["methods"]["r_eval"]
    assert m["log_threshold"] == pytest.approx(math.log(2 / 0.1))


def test_bonferroni_glob_needs_family_size() -> None:
    with pytest.raises(ValueError, match="family_size is required"):
        make_config(multiplicity="bonferroni")
    eng = Engine(make_config(multiplicity="bonferroni", family_size=4))
    eng.process(ev("judge", "j", "x", audit=False))
    m = model_view(eng)["certificates"]["risk"]["methods"]["r_eval"]
    assert m["log_threshold"] == pytest.approx(math.log(4 / 0.1))


def test_bonferroni_refuses_models_beyond_the_family() -> None:
    # family_size = 2 with one certificate: the third model seen would spend more than delta
    cfg = make_config(multiplicity="bonferroni", family_size=2)
    eng = Engine(cfg)
    for i, m in enumerate(["a", "b", "c", "a", "c", "d"]):
        eng.process(ev("judge", f"j{i}", f"x{i}", model=m, audit=False))
    s = eng.state_view()["suites"]["qa"]
    assert sorted(s["models"]) == ["a", "b"]
    assert s["refused_models"] == {"events": 3, "names": ["c", "d"]}
    assert eng.counters["unrouted"] == 3
    m = s["models"]["a"]["certificates"]["risk"]["methods"]["r_eval"]
    assert m["log_threshold"] == pytest.approx(math.log(2 / 0.1))
    back = Engine.restore(cfg, json.loads(json.dumps(eng.snapshot())))
    back.process(ev("judge", "j9", "x9", model="e", audit=False))
    assert back.state_view()["suites"]["qa"]["refused_models"] == {
        "events": 4, "names": ["c", "d", "e"]}
    # no refusal without Bonferroni, and no key when nothing was refused
    free = Engine(make_config())
    free.process(ev("judge", "j", "x", model="c", audit=False))
    assert "refused_models" not in free.state_view()["suites"]["qa"]
    with pytest.raises(ValueError, match="smaller than the listed models"):
        make_config(models=["a", "b", "c"], multiplicity="bonferroni", family_size=2)


def test_fixed_sequence_gates_in_order() -> None:
    lines = certify_stream("a", 40, 0.0) + certify_stream("b", 40, 0.5)
    for order, a_status in ((["a", "b"], "certified"), (["b", "a"], "pending")):
        eng = Engine(make_config(models=order, multiplicity="fixed_sequence"))
        alerts = run(eng, lines)
        s = eng.state_view()["suites"]["qa"]["models"]
        st = s["a"]["certificates"]["risk"]["methods"]["r_autoeval_plus"]
        assert st["status"] == a_status
        mon = eng.suites["qa"].models["a"].monitors[("risk", "r_autoeval_plus")]
        assert mon.status == "certified"  # the raw test crossed either way
        certified = [a["model"] for a in alerts if a["kind"] == "certified"]
        assert certified == (["a"] if a_status == "certified" else [])
        # b is violated: reported at the per-test level, and it stops the sequence
        assert s["b"]["certificates"]["risk"]["methods"]["r_autoeval_plus"]["status"] == "violated"


def test_e_bh_matches_function() -> None:
    from monitor.stats.multiplicity import e_bh

    lines = certify_stream("a", 25) + certify_stream("b", 12) + certify_stream("c", 5)
    eng = Engine(make_config(models=["a", "b", "c"], multiplicity="e_bh"))
    run(eng, lines)
    models = eng.suites["qa"].models
    for meth in ("r_eval", "r_autoeval_plus"):
        log_es = [models[n].monitors[("risk", meth)].log_e_certify for n in "abc"]
        expected = e_bh(log_es, 0.1)
        got = [models[n].effective[("risk", meth)].status == "certified" for n in "abc"]
        assert got == expected


# ---------------------------------------------------------------------- state and restore
def mixed_stream() -> list[bytes]:
    lines: list[bytes] = []
    for i in range(40):
        m = "m" if i % 3 else "n"
        lines.append(ev("judge", f"j{i}", f"x{i}", loss=(i % 5 == 0) * 1.0, ts=i, model=m,
                        audit=(i % 2 == 0)))
        if i % 2 == 0 and i % 7:
            lines.append(ev("label", f"l{i}", f"x{i}", loss=(i % 4 == 0) * 1.0, ts=i + 0.5,
                            model=m))
        if i % 11 == 0:
            lines.append(ev("judge", f"j{i}", f"x{i}", loss=(i % 5 == 0) * 1.0, ts=i, model=m,
                            audit=(i % 2 == 0)))  # the same event again
            lines.append(b'{"type": "judge", "loss": 2}')
        if i % 13 == 0:
            lines.append(ev("label", f"early{i}", f"x{i + 1}", loss=1.0, ts=i, model=m))
    lines.append(b"\xff")
    return lines


def test_state_view_contract_keys() -> None:
    eng = Engine(make_config(pending_ttl_seconds=5.0))
    run(eng, mixed_stream())
    view = json.loads(dump(eng))
    assert set(view) == {"suites", "counters"}
    assert set(view["counters"]) >= {"events_in", "rejected", "duplicates", "alerts",
                                      "label_requests"}
    suite = view["suites"]["qa"]
    assert set(suite) == {"models", "multiplicity", "family_size"}
    mv = suite["models"]["m"]
    assert set(mv) == {"counts", "certificates", "judge_bias", "pending_units", "orphan_labels",
                       "judge_drift", "labels"}
    assert set(mv["labels"]) == {"audited", "pending", "waiting", "missing", "late",
                                 "completion_ratio", "oldest_pending_age_seconds"}
    assert set(mv["counts"]) == {"judge", "labels", "rounds", "unsolicited_labels", "duplicates",
                                 "rejected", "label_requests", "expired_pending",
                                 "expired_orphans", "late_labels"}
    cert = mv["certificates"]["risk"]
    assert set(cert) == {"alpha", "delta", "methods", "epoch", "lost"}
    meth = cert["methods"]["r_autoeval_plus"]
    assert set(meth) == {"rounds", "log_e_certify", "log_e_violate", "cs_lower", "cs_upper",
                         "status", "certified_at_round", "violated_at_round", "rho_weights",
                         "risk_estimate", "log_threshold", "rhos", "cs_valid",
                         "status_changed_ts", "primary", "risk_upper_bound", "risk_lower_bound",
                         "bound_confidence"}
    assert meth["primary"] is True and cert["methods"]["r_eval"]["primary"] is False
    assert len(meth["rho_weights"]) == 3 and cert["methods"]["r_eval"]["rho_weights"] == [1.0]
    assert view["counters"]["rejected"]["invalid_json"] == 0
    assert view["counters"]["rejected"]["undecodable"] == 1
    assert view["counters"]["duplicates"]["event_id"] == 4


def test_restore_at_every_prefix_is_identical() -> None:
    cfg = make_config(pending_ttl_seconds=6.0, orphan_ttl_seconds=3.0, dedupe_max_ids=30)
    lines = mixed_stream()
    full = Engine(cfg)
    full_alerts = run(full, lines)
    expected, expected_snap = dump(full), json.dumps(full.snapshot(), sort_keys=True)
    for k in range(len(lines) + 1):
        eng = Engine(cfg)
        alerts = run(eng, lines[:k])
        data = encode_checkpoint(eng.snapshot(), {"offset": k, "line": k})
        snap, pos = decode_checkpoint(data)
        assert pos["line"] == k
        restored = Engine.restore(cfg, snap)
        alerts += run(restored, lines[k:])
        assert dump(restored) == expected, k
        assert json.dumps(restored.snapshot(), sort_keys=True) == expected_snap, k
        assert alerts == full_alerts


def test_restore_refuses_other_config_and_garbage() -> None:
    eng = Engine(make_config())
    eng.process(ev("judge", "j", "x", audit=True))
    snap = eng.snapshot()
    with pytest.raises(CheckpointError, match="different"):
        Engine.restore(make_config(audit_rate=0.5), snap)
    with pytest.raises(CheckpointError, match="not a version-1 engine snapshot"):
        Engine.restore(make_config(), {"kind": "x"})
    bad = json.loads(json.dumps(snap))
    del bad["suites"][0]["models"][0]["counts"]["judge"]
    with pytest.raises(CheckpointError, match="malformed"):
        Engine.restore(make_config(), bad)


def test_listed_models_exist_from_start_and_rejected_first_event() -> None:
    eng = Engine(make_config(models=["a", "b*"], multiplicity="e_bh", family_size=3))
    res = eng.process(ev("judge", "j", "x", model="bz", loss=9.0))
    assert res.rejection is not None
    # a rejected event creates no suite and no model: counted by the engine only
    assert "qa" not in eng.suites and eng.counters["rejected"]["out_of_range"] == 1
    eng.process(ev("judge", "k", "x", model="bz"))
    models = eng.state_view()["suites"]["qa"]["models"]
    assert set(models) == {"a", "bz"} and models["bz"]["counts"]["rejected"] == 0
    eng.process(ev("judge", "l", "x", model="bz", loss=9.0))
    assert eng.state_view()["suites"]["qa"]["models"]["bz"]["counts"]["rejected"] == 1
    assert models["a"]["certificates"]["risk"]["methods"]["r_eval"]["status"] == "pending"
    json.dumps(eng.state_view(), allow_nan=False)
    run(eng, certify_stream("a", 40))
    assert eng.state_view()["suites"]["qa"]["family_size"] == 3


def test_duplicates_and_unrouted_do_not_move_event_time() -> None:
    eng = Engine(make_config(pending_ttl_seconds=10.0, models=["m"]))
    eng.process(ev("judge", "j0", "x0", ts=0, audit=True))
    eng.process(ev("judge", "j0", "x9", ts=1e9, audit=False))  # duplicate id, far future
    eng.process(ev("judge", "u", "x8", ts=1e9, model="zz", audit=False))  # unrouted model
    assert eng.suites["qa"].watermark == 0.0
    assert model_view(eng)["pending_units"] == 1


def test_fixed_sequence_tests_every_certificate_at_the_family_delta() -> None:
    # Two certificates with different deltas: the fixed sequence spends the family's delta
    # (the smallest), so the loose certificate must not be certified at its own 0.3.
    certs = [
        {"name": "loose", "alpha": 0.3, "delta": 0.3, "methods": ["r_eval"], "cs_grid": 40},
        {"name": "strict", "alpha": 0.3, "delta": 0.05, "methods": ["r_eval"], "cs_grid": 40},
    ]
    eng = Engine(make_config(certs, models=["m"], multiplicity="fixed_sequence"))
    alerts = run(eng, certify_stream("m", 4, 0.0))
    view = model_view(eng)["certificates"]
    for name in ("loose", "strict"):
        assert view[name]["methods"]["r_eval"]["log_threshold"] == pytest.approx(math.log(1 / 0.05))
    for a in alerts:
        assert a["evidence"]["log_e_value"] >= math.log(1 / 0.05)


def _mixed_stream() -> list[bytes]:
    """Judge/label events of two models with alerts, requests, duplicates, rejections."""
    out: list[bytes] = []
    for i in range(400):
        m = "good" if i % 2 else "bad"
        loss = 0.0 if m == "good" else float(i % 3 == 0)
        out.append(ev("judge", f"j{i}", f"x{i}", loss, ts=i, model=m))
        # every unit labelled (audited ones form rounds; a pending label would hold claims)
        out.append(ev("label", f"l{i}", f"x{i}", loss, ts=i, model=m))
        if i % 37 == 0:
            out.append(ev("judge", f"j{i}", f"x{i}", loss, ts=i, model=m))  # duplicate id
            out.append(b'{"type": "judge", "suite": "qa", "model": "m", "loss": 2}')
            out.append(b"\xff not json")
        if i % 53 == 0:
            out.append(ev("label", f"u{i}", f"y{i}", 0.0, ts=i, suite="other", model="z"))
    return out


@pytest.mark.parametrize("sizes", [[1], [7], [256], [1000], [3, 1, 50, 2, 999]])
def test_process_batch_equals_process(sizes: list[int]) -> None:
    cfg = make_config(audit_rate=0.3, models=["good", "bad"])
    stream = _mixed_stream()
    ref = Engine(cfg)
    expected = []
    for i, raw in enumerate(stream):
        r = ref.process(raw)
        if r.alerts or r.requests or r.rejection or r.duplicate:
            expected.append((i, r.alerts, r.requests, r.rejection, r.duplicate))
    assert {e[4] for e in expected} >= {"event_id", None} and any(e[1] for e in expected)
    assert any(e[2] for e in expected) and any(e[3] for e in expected)
    eng = Engine(cfg)
    got = []
    start = k = 0
    while start < len(stream):
        n = sizes[k % len(sizes)]
        for i, r in eng.process_batch(stream[start : start + n]):
            assert r.dead_letter is None
            got.append((start + i, r.alerts, r.requests, r.rejection, r.duplicate))
        start += n
        k += 1
    assert got == expected
    assert eng.state_view() == ref.state_view() and eng.snapshot() == ref.snapshot()


def test_e_bh_withdrawal_emits_an_alert() -> None:
    """e-BH may stop selecting a certified member; that is never silent."""
    cfg = parse_config("""
[[suites]]
name = "s"
models = ["a", "b"]
multiplicity = "e_bh"
[[suites.certificates]]
name = "r"
alpha = 0.3
delta = 0.1
methods = ["r_eval"]
""")
    eng = Engine(cfg)
    seen: list[tuple[str, str]] = []
    i = 0
    for model, losses in (("a", [0.0] * 12), ("b", [0.0] * 30), ("b", [1.0] * 40)):
        for loss in losses:
            i += 1
            for t in ("judge", "label"):
                raw = json.dumps({"type": t, "event_id": f"{t}{i}", "suite": "s", "model": model,
                                  "example_id": f"x{i}", "loss": loss, "ts": i,
                                  **({"audit": True} if t == "judge" else {})}).encode()
                for a in eng.process(raw).alerts:
                    seen.append((a["model"], a["kind"]))
                    if a["kind"] == "certificate_withdrawn":
                        assert a["evidence"]["multiplicity"] == "e_bh"
                        assert a["evidence"]["verdict"] == "pending"
    assert ("a", "certified") in seen and ("a", "certificate_withdrawn") in seen
    a = eng.state_view()["suites"]["s"]["models"]["a"]["certificates"]["r"]["methods"]["r_eval"]
    assert a["status"] == "pending"


def test_suites_of_one_entry_share_their_model_factory() -> None:
    cfg = parse_config("[[suites]]\nname = 'a*'\n[[suites.certificates]]\nname = 'r'\n"
                       "alpha = 0.1\ndelta = 0.1\n[[suites]]\nname = 'b*'\n"
                       "[[suites.certificates]]\nname = 'r'\nalpha = 0.2\ndelta = 0.1\n")
    eng = Engine(cfg)
    for suite in ("a1", "a2", "b1"):
        eng.process(ev("judge", f"j{suite}", "x", suite=suite, audit=True))
    s = eng.suites
    assert s["a1"].factory is s["a2"].factory is not s["b1"].factory
    # the prototypes are built once per entry: a new suite's models spawn from them
    assert s["a1"].factory.group_prototype("r") is s["a2"].factory.group_prototype("r")
    back = Engine.restore(cfg, eng.snapshot())
    assert back.suites["a1"].factory is back.suites["a2"].factory
    assert back.state_view() == eng.state_view()
