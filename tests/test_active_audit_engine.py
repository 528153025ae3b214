"""``audit_policy = "active"`` end to end: engine, label requests, alerts, checkpoint, replay."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from monitor.audit import audit_uniform
from monitor.checkpoint import decode_checkpoint, encode_checkpoint
from monitor.config import parse_config
from monitor.engine import Engine
from monitor.errors import CheckpointError
from monitor.metrics import StateCollector

CONFIG = '''
[[suites]]
name = "qa"
models = ["m"]
audit_rate = 0.1
audit_policy = "{policy}"
[[suites.certificates]]
name = "risk"
alpha = 0.2
delta = 0.05
'''


def stream(n: int, seed: int, delay: int = 40) -> list[bytes]:
    """A calibrated judge (scores near 0.01, 0.95, 0.5); every unit labelled after ``delay``.

    certmon uses the labels of the units it audits and counts the others as unsolicited.
    """
    rng = np.random.default_rng(seed)
    z = rng.random(n)
    f = np.where(z < 0.85, 0.01, np.where(z < 0.9, 0.95, 0.5))
    human = (rng.random(n) < f).astype(float)
    out: list[tuple[int, bytes]] = []
    for i in range(n):
        base = {"suite": "qa", "model": "m", "example_id": f"x{i}"}
        out.append((2 * i, json.dumps({"type": "judge", "event_id": f"j{i}", "ts": float(i),
                                       "loss": float(f[i]), **base}).encode()))
        lab = {"type": "label", "event_id": f"l{i}", "ts": float(i + delay),
               "loss": float(human[i]), **base}
        out.append((2 * (i + delay) + 1, json.dumps(lab).encode()))
    return [line for _, line in sorted(out, key=lambda t: t[0])]


def run(eng: Engine, lines: list[bytes]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    alerts: list[dict[str, Any]] = []
    requests: list[dict[str, Any]] = []
    for line in lines:
        res = eng.process(line)
        alerts += res.alerts
        requests += res.requests
    return alerts, requests


def test_active_engine_certifies_with_propensities_and_replays() -> None:
    cfg = parse_config(CONFIG.format(policy="active"))
    lines = stream(4000, seed=5)
    alerts, requests = run(Engine(cfg), lines)
    assert requests and all(r["reason"] == "active" for r in requests)
    props = np.array([r["propensity"] for r in requests])
    assert ((props > 0.0) & (props <= 1.0)).all() and len(set(props.round(6))) > 1
    for r in requests:  # the coin is certmon's salted hash against the stated propensity
        assert audit_uniform("", "qa", "m", r["example_id"]) < r["propensity"]
    kinds = [a["kind"] for a in alerts]
    assert kinds == ["certified"], kinds
    ev = alerts[0]["evidence"]
    assert ev["audit_policy"] == "active" and ev["log_e_value"] >= ev["log_threshold"]
    assert 0 < ev["labels"] <= len(requests) and alerts[0]["round"] == ev["labels"]
    assert run(Engine(cfg), lines)[0] == alerts  # replay: the same alerts, ids and evidence


def test_active_checkpoint_restore_continues_identically() -> None:
    cfg = parse_config(CONFIG.format(policy="active"))
    lines = stream(3000, seed=6)
    whole = Engine(cfg)
    a1, r1 = run(whole, lines)
    first = Engine(cfg)
    a2, r2 = run(first, lines[:2500])
    snap, _ = decode_checkpoint(encode_checkpoint(first.snapshot(), {"offset": 2500}))
    restored = Engine.restore(cfg, snap)
    a3, r3 = run(restored, lines[2500:])
    assert a2 + a3 == a1 and r2 + r3 == r1
    view = restored.state_view()["suites"]["qa"]["models"]["m"]["active"]
    assert view == whole.state_view()["suites"]["qa"]["models"]["m"]["active"]
    assert view["labels"] > 0 and view["certificates"]["risk"]["status"] in ("certified",
                                                                              "pending")


def test_uniform_default_unchanged_requests_and_labels_in_evidence() -> None:
    cfg = parse_config(CONFIG.format(policy="uniform"))
    alerts, requests = run(Engine(cfg), stream(4000, seed=7))
    assert requests and {r["reason"] for r in requests} == {"uniform"}
    assert {r["propensity"] for r in requests} == {0.1}
    assert [a["kind"] for a in alerts] == ["certified"]
    ev = alerts[0]["evidence"]
    assert ev["labels"] == ev["rounds"] > 0 and "audit_policy" not in ev


def test_cli_replay_active(tmp_path: Path) -> None:
    cfg = tmp_path / "certmon.toml"
    cfg.write_text(CONFIG.format(policy="active"))
    events = tmp_path / "events.jsonl"
    events.write_bytes(b"\n".join(stream(3000, seed=8)) + b"\n")
    out = subprocess.run(
        [sys.executable, "-m", "consumers.cli", "replay", "--config", str(cfg), "--input",
         str(events), "--state-out", str(tmp_path / "STATE.json"), "--alerts-out",
         str(tmp_path / "alerts.jsonl"), "--requests-out", str(tmp_path / "requests.jsonl"),
         "--quiet"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    reqs = [json.loads(x) for x in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert reqs and all(r["reason"] == "active" and 0 < r["propensity"] <= 1 for r in reqs)
    state = json.loads((tmp_path / "STATE.json").read_text())
    active = state["suites"]["qa"]["models"]["m"]["active"]
    assert active["units"] == 3000 and active["labels"] + active["pending"] <= len(reqs)


def test_metrics_render_an_active_engine() -> None:
    cfg = parse_config(CONFIG.format(policy="active"))
    eng = Engine(cfg)
    run(eng, stream(4000, seed=5))
    registry = CollectorRegistry()
    registry.register(StateCollector(lambda: eng.state_view(), "full"))
    text = generate_latest(registry).decode()
    state = [line for line in text.splitlines() if line.startswith(
        'certmon_certificate_state{certificate="risk",method="r_autoeval_plus"')
        and 'state="certified"' in line]
    assert state and state[0].endswith(" 1.0"), text[:2000]
    log_e = [float(line.split()[-1]) for line in text.splitlines() if line.startswith(
        'certmon_log_e_value{certificate="risk",method="r_autoeval_plus",model="m",'
        'side="certify"')]
    assert log_e and log_e[0] >= math.log(1 / 0.05)  # the active test's wealth


@pytest.mark.parametrize("forge", ["lam", "nan", "threshold", "waiting", "start"])
def test_forged_active_state_is_refused(forge: str) -> None:
    cfg = parse_config(CONFIG.format(policy="active"))
    eng = Engine(cfg)
    run(eng, stream(2000, seed=9)[:3000])
    snap = json.loads(json.dumps(eng.snapshot()))
    Engine.restore(cfg, json.loads(json.dumps(snap)))  # the real one loads
    (model,) = [m for s in snap["suites"] for m in s["models"]]
    active = model["active"]
    if forge == "lam":  # a bet beyond its policy's cap: a factor could reach zero
        active["lam"][0][0] = [10.0] * len(active["lam"][0][0])
    elif forge == "nan":
        active["hw"][0][0] = float("nan")
    elif forge == "threshold":  # a level the configuration does not give
        active["log_threshold"] = [0.5, 0.5]
    elif forge == "start":  # an epoch that starts after the units judged so far
        active["start"] = [active["n"] + 1] * len(active["start"])
    else:
        active["waiting"] += 1
    with pytest.raises(CheckpointError):
        Engine.restore(cfg, snap)


def regressing_stream(n: int, seed: int, change: int, delay: int = 40) -> list[bytes]:
    """:func:`stream`'s calibrated judge; from unit ``change`` on every unit fails w.p. >= 0.6."""
    rng = np.random.default_rng(seed)
    z = rng.random(n)
    f = np.where(z < 0.85, 0.01, np.where(z < 0.9, 0.95, 0.5))
    p = np.where(np.arange(n) < change, f, np.maximum(f, 0.6))
    human = (rng.random(n) < p).astype(float)
    out: list[tuple[int, bytes]] = []
    for i in range(n):
        base = {"suite": "qa", "model": "m", "example_id": f"x{i}"}
        out.append((2 * i, json.dumps({"type": "judge", "event_id": f"j{i}", "ts": float(i),
                                       "loss": float(f[i]), **base}).encode()))
        out.append((2 * (i + delay) + 1, json.dumps(
            {"type": "label", "event_id": f"l{i}", "ts": float(i + delay),
             "loss": float(human[i]), **base}).encode()))
    return [line for _, line in sorted(out, key=lambda t: t[0])]


def test_active_regression_alert_and_fresh_epoch() -> None:
    """Under active the regression detector runs (uniform-share rounds): a certified model
    whose risk jumps raises ``regression`` and ``certificate_lost``; the certificate's active
    tests restart, so the new epoch is judged on its own units (violated, not re-certified)."""
    eng = Engine(parse_config(CONFIG.format(policy="active")))
    alerts, _ = run(eng, regressing_stream(8000, seed=3, change=4000))
    kinds = [a["kind"] for a in alerts]
    assert kinds[:4] == ["certified", "regression", "certificate_lost", "violated"], kinds
    reg = alerts[1]
    assert 4000 < reg["ts"] < 5500 and reg["evidence"]["detector"] == "e_sr_mixture"
    assert "certified" not in kinds[1:]
    m = eng.state_view()["suites"]["qa"]["models"]["m"]
    assert m["counts"]["rounds"] > 0 and m["certificates"]["risk"]["epoch"]["epoch"] == 2


def test_active_state_view_is_coherent() -> None:
    """STATE.json of an active model: rounds are the uniform-share rounds behind the detectors
    and confidence sequences (not 0), every audited unit is counted, the verdict's bound is
    alpha (the sequence is not the active test's), the wealth and labels are the active tests'."""
    eng = Engine(parse_config(CONFIG.format(policy="active")))
    _, requests = run(eng, stream(3000, seed=5))
    m = eng.state_view()["suites"]["qa"]["models"]["m"]
    meth = m["certificates"]["risk"]["methods"]["r_autoeval_plus"]
    assert 0 < m["counts"]["rounds"] == meth["cs_rounds"] <= m["active"]["labels"]
    assert m["labels"]["audited"] == len(requests) and 0.0 <= m["labels"]["completion_ratio"] <= 1.0
    assert meth["status"] == "certified" and meth["risk_upper_bound"] == 0.2
    assert meth["rounds"] == m["active"]["labels"]
    assert meth["log_e_certify"] == m["active"]["certificates"]["risk"]["log_e_certify"]
    assert meth["cs_valid"] and meth["cs_lower"] <= meth["risk_estimate"] <= meth["cs_upper"]
    assert m["certificates"]["risk"]["epoch"]["regression_detector"]["rounds"] > 0


def test_active_restore_after_a_regression_continues_identically() -> None:
    """A checkpoint taken in the epoch after a regression (active tests restarted, units of
    the old epoch still pending) restores to the same run."""
    cfg = parse_config(CONFIG.format(policy="active"))
    lines = regressing_stream(7000, seed=3, change=4000)
    whole = Engine(cfg)
    a1, r1 = run(whole, lines)
    first = Engine(cfg)
    a2, r2 = run(first, lines[:9500])  # the regression was raised at about unit 4735
    assert "regression" in [a["kind"] for a in a2]
    snap, _ = decode_checkpoint(encode_checkpoint(first.snapshot(), {"offset": 9500}))
    restored = Engine.restore(cfg, snap)
    a3, r3 = run(restored, lines[9500:])
    assert a2 + a3 == a1 and r2 + r3 == r1
    assert restored.state_view() == whole.state_view()


def test_claim_evidence_counts_every_audited_unit_and_the_crossing_label() -> None:
    # (found by review) the evidence counted only the uniform-share units as audited, and a
    # claim made by a label's arrival stated the labels before that label
    eng = Engine(parse_config(CONFIG.format(policy="active")))
    alerts, requests = run(eng, stream(4000, seed=5))
    ev = alerts[0]["evidence"]
    asked = sum(1 for r in requests if r["ts"] <= alerts[0]["ts"])
    assert ev["audited_units"] == asked
    assert ev["labels"] + ev["labels_pending"] + ev["labels_missing"] == ev["audited_units"]
    risk = eng.state_view()["suites"]["qa"]["models"]["m"]["certificates"]["risk"]
    primary = risk["methods"]["r_autoeval_plus"]
    assert primary["certified_at_round"] == ev["labels"] == alerts[0]["round"]
