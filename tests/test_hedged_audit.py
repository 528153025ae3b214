"""``audit_policy = "hedged"`` end to end: fewer labels, consistent evidence, config, checkpoint.

The consistency test recomputes both e-processes independently for each certified model (the
per-label one by a ``uniform`` replay of the same stream, whose rounds are the same, the
per-unit one with an :class:`ActiveAudit` fed the same events, each unit's log factors read
from its state) and checks that the alert's ``log_e_label`` is the per-label value after round
``labels``, ``log_e_unit`` the per-unit value at that same audited unit (no later unit), and
that ``labels`` is the first audited unit where their average reaches the threshold. A mutant
that reads the per-unit wealth at another time (:func:`test_mutant_at_label_time_is_caught`)
or pairs another round fails it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks import engine_labels as el
from monitor.audit import audit_prefix, audit_uniform_prefixed
from monitor.checkpoint import decode_checkpoint, encode_checkpoint
from monitor.config import parse_config
from monitor.engine import Engine
from monitor.errors import CheckpointError
from monitor.state import hedged as hedged_module
from monitor.state.model import ModelState
from monitor.stats.betting.active import mix
from monitor.stats.betting.active_growth import POLICIES
from monitor.stats.betting.active_online import ActiveAudit

DELTA = 0.01
MODELS, UNITS, DELAY = 6, 11000, 25  # labels arrive DELAY examples after their judge event


def delayed_lines(h: np.ndarray, f: np.ndarray, audited: np.ndarray,
                  delay: int) -> list[bytes]:
    """:func:`el.stream_lines` (hash coin) with every label ``delay`` examples late."""
    out: list[tuple[int, int, bytes]] = []
    for k, line in enumerate(el.stream_lines(h, f, audited, flags=False)):
        ev = json.loads(line)
        e = int(str(ev["example_id"])[3:])
        late = delay if ev["type"] == "label" else 0
        out.append((e + late, k, line.encode()))
    return [x for _, _, x in sorted(out)]


def run(eng: Engine, lines: list[bytes]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    alerts: list[dict[str, Any]] = []
    requests: list[dict[str, Any]] = []
    for line in lines:
        res = eng.process(line)
        alerts += res.alerts
        requests += res.requests
    return alerts, requests


@pytest.fixture(scope="module")
def stream() -> tuple[np.ndarray, np.ndarray, np.ndarray, list[bytes]]:
    h, f = el.draw_losses(MODELS, UNITS, el.RISK, 0.99, seed=11)
    audited = el.audit_mask("hash", MODELS, UNITS)
    return h, f, audited, delayed_lines(h, f, audited, DELAY)


def per_unit_at_audits(f: np.ndarray, audited: np.ndarray, model: str,
                       lines: list[bytes]) -> np.ndarray:
    """Certify test's per-unit log e at each audited unit (its wealth up to that unit).

    An :class:`ActiveAudit` like the engine's, fed the model's events in stream order; each
    unit's log factors are the change of the state's ``logw`` when the unit is judged
    (unaudited) or labelled (audited).
    """
    aa = ActiveAudit(el.RATE, [(el.ALPHA, "certify"), (el.ALPHA, "violate")], [DELTA, DELTA],
                     c=0.95, policies=POLICIES[:1])
    pre = audit_prefix("", el.SUITE, model)
    factors = np.zeros((len(f), 2, np.asarray(aa.to_state()["logw"]).shape[-1]))
    tickets: dict[int, list[Any]] = {}
    for line in lines:
        ev = json.loads(line)
        if ev["model"] != model:
            continue
        e = int(str(ev["example_id"])[3:])
        before = np.asarray(aa.to_state()["logw"])[:, 0, :]
        if ev["type"] == "judge":
            coin = audit_uniform_prefixed(pre, ev["example_id"])
            audit, _, ticket = aa.judge(float(ev["loss"]), coin)
            assert audit == bool(audited[e])
            if ticket is not None:
                tickets[e] = ticket
                continue
        else:
            aa.label(tickets.pop(e), float(ev["loss"]))
        factors[e] = np.asarray(aa.to_state()["logw"])[:, 0, :] - before
    cum = np.cumsum(factors, axis=0)
    idx = np.flatnonzero(audited)
    return np.asarray(mix(cum[idx, 0, :]))


def per_label_trace(lines: list[bytes]) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                  dict[str, list[float]]]:
    """Replay under ``uniform`` (the same coin, rounds and delays): alerts, requests and, per
    model, the certify log e of the per-label test after each round."""
    eng = Engine(parse_config(el.config_text(deltas=(DELTA,))))
    cert = el.cert_name(DELTA)
    trace: dict[str, list[float]] = {}
    alerts: list[dict[str, Any]] = []
    requests: list[dict[str, Any]] = []
    for line in lines:
        res = eng.process(line)
        alerts += res.alerts
        requests += res.requests
        model = json.loads(line)["model"]
        mon = eng.suites[el.SUITE].models[model].monitors[(cert, "r_autoeval_plus")]
        seq = trace.setdefault(model, [])
        assert mon.rounds - len(seq) in (0, 1)  # (labels in audit order: one round at most)
        if mon.rounds > len(seq):
            seq.append(mon.log_e_certify)
    return alerts, requests, trace


def inconsistencies(alerts: list[dict[str, Any]], f: np.ndarray, audited: np.ndarray,
                    lines: list[bytes], label_side: dict[str, list[float]]) -> list[str]:
    """What the certified alerts' evidence gets wrong against the independent recomputation."""
    thr = math.log(1.0 / DELTA)
    bad: list[str] = []
    certified = [a for a in alerts if a["kind"] == "certified"]
    assert certified
    for a in certified:
        ev, j = a["evidence"], int(str(a["model"])[1:])
        k = int(ev["labels"])
        unit_side = per_unit_at_audits(f[:, j], audited[:, j], str(a["model"]), lines)
        lab = np.array(label_side[str(a["model"])][:k])
        comb = np.logaddexp(unit_side[:k], lab) - math.log(2.0)
        if not math.isclose(ev["log_e_label"], lab[-1], rel_tol=1e-7, abs_tol=1e-9):
            bad.append(f"{a['model']}: log_e_label {ev['log_e_label']} != {lab[-1]}")
        if not math.isclose(ev["log_e_unit"], unit_side[k - 1], rel_tol=1e-7, abs_tol=1e-9):
            bad.append(f"{a['model']}: log_e_unit {ev['log_e_unit']} != {unit_side[k - 1]}")
        if not (comb[-1] >= thr and (comb[:-1] < thr).all()):
            bad.append(f"{a['model']}: the average first crosses at another unit than {k}")
        if not math.isclose(ev["log_e_value"], comb[-1], rel_tol=1e-7, abs_tol=1e-9):
            bad.append(f"{a['model']}: log_e_value {ev['log_e_value']} != {comb[-1]}")
    return bad


def test_hedged_certifies_with_fewer_labels_and_consistent_evidence(
        stream: tuple[np.ndarray, np.ndarray, np.ndarray, list[bytes]]) -> None:
    _, f, audited, lines = stream
    ua, ur, trace = per_label_trace(lines)
    ha, hr = run(Engine(parse_config(el.config_text(deltas=(DELTA,), policy="hedged"))), lines)
    ug, hg = (el.certified_labels(a, MODELS, (DELTA,))[0] for a in (ua, ha))
    # the same coin: the same audited units and requests (reason uniform, same positions)
    assert [(r["example_id"], r["propensity"], r["reason"], r["audit_position"]) for r in hr] \
        == [(r["example_id"], r["propensity"], r["reason"], r["audit_position"]) for r in ur]
    assert np.isfinite(hg).sum() >= MODELS - 1
    assert float(np.sum(np.minimum(hg, UNITS))) < float(np.sum(np.minimum(ug, UNITS)))
    for a in ha:
        if a["kind"] == "certified":
            ev = a["evidence"]
            assert ev["audit_policy"] == "hedged" and a["round"] == ev["labels"]
            assert ev["log_e_value"] >= ev["log_threshold"] == pytest.approx(math.log(100))
            assert ev["log_e_value"] == pytest.approx(
                np.logaddexp(ev["log_e_unit"], ev["log_e_label"]) - math.log(2.0))
            assert "risk_upper_bound" not in ev
    assert inconsistencies(ha, f, audited, lines, trace) == []


def test_mutant_at_label_time_is_caught(
        stream: tuple[np.ndarray, np.ndarray, np.ndarray, list[bytes]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading the per-unit wealth when a unit's label arrives (later units included: an
    arbitrary unit time), not at the unit itself, is detected by :func:`inconsistencies`."""
    _, f, audited, lines = stream
    trace = per_label_trace(lines)[2]

    def at_label_time(m: ModelState) -> None:
        if m.hedge is None or m.active is None:
            return
        for _ in m.active.take_settled():
            m.hedge.unit([m.active.log_e(j) for j in range(len(m.active.tests))])

    monkeypatch.setattr(hedged_module, "hedged_units", at_label_time)
    monkeypatch.setattr("monitor.state.status_book.hedged_units", at_label_time)
    cfg = parse_config(el.config_text(deltas=(DELTA,), policy="hedged"))
    alerts, _ = run(Engine(cfg), lines)
    assert any("log_e_unit" in x for x in inconsistencies(alerts, f, audited, lines, trace))


def test_hedged_checkpoint_restore_continues_identically(
        stream: tuple[np.ndarray, np.ndarray, np.ndarray, list[bytes]],
        tmp_path: Path) -> None:
    """A checkpoint taken while labels are pending (both sides held back) restores to the
    same run: alerts, requests and STATE.json equal an uninterrupted replay."""
    _, _, _, lines = stream
    lines = lines[: len(lines) // 2]
    cfg = parse_config(el.config_text(deltas=(DELTA,), policy="hedged"))
    whole = Engine(cfg)
    a1, r1 = run(whole, lines)
    cut = len(lines) // 3
    first = Engine(cfg)
    a2, r2 = run(first, lines[:cut])
    snap, _ = decode_checkpoint(encode_checkpoint(first.snapshot(), {"offset": cut}))
    m = snap["suites"][0]["models"][0]
    assert "hedge" in m and m["hedge"]["paired"] > 0 and m["pending_units"] > 0
    restored = Engine.restore(cfg, snap)
    a3, r3 = run(restored, lines[cut:])
    assert a2 + a3 == a1 and r2 + r3 == r1
    assert restored.state_view() == whole.state_view()
    view = whole.state_view()["suites"][el.SUITE]["models"][el.model_name(0)]
    assert view["hedged"]["labels"] > 0 and "risk-d0.01" in view["hedged"]["certificates"]


@pytest.mark.parametrize("forge", ["crossing", "threshold", "policy", "status", "both_sides",
                                   "unit_ahead", "paired"])
def test_forged_hedged_state_is_refused(
        stream: tuple[np.ndarray, np.ndarray, np.ndarray, list[bytes]], forge: str) -> None:
    cfg = parse_config(el.config_text(deltas=(DELTA,), policy="hedged"))
    eng = Engine(cfg)
    run(eng, stream[3][:4000])
    snap = json.loads(json.dumps(eng.snapshot()))
    Engine.restore(cfg, json.loads(json.dumps(snap)))  # the real one loads
    model = snap["suites"][0]["models"][0]
    hedge = model["hedge"]
    if forge == "crossing":  # a claim the average never reached
        hedge["crossed"][0] = True
    elif forge == "threshold":  # a level the configuration does not give
        hedge["log_threshold"] = [0.5, 0.5]
    elif forge == "policy":  # the per-unit process with every policy (an active audit's)
        del model["active"]["policies"]
    elif forge == "status":  # a certified status its hedged tests do not support
        for eff in model["effective"]:
            eff[2][0] = "certified"
    elif forge == "unit_ahead":  # a per-unit row ahead: every later pair out of step
        hedge["units"] = [[0.0, 0.0]]
    elif forge == "paired":  # pairs that do not count the rounds applied in audit order
        hedge["paired"] -= 1
    else:  # rows of both sides left unpaired
        hedge["units"], hedge["labels"] = [[0.0, 0.0]], [[[0.0, 0.0], True]]
    with pytest.raises(CheckpointError):
        Engine.restore(cfg, snap)
    if forge == "policy":  # and a hedged checkpoint under "active" is refused too
        real = json.loads(json.dumps(eng.snapshot()))
        with pytest.raises(CheckpointError):
            Engine.restore(parse_config(el.config_text(deltas=(DELTA,), policy="active")), real)


def test_state_shows_one_verdict(
        stream: tuple[np.ndarray, np.ndarray, np.ndarray, list[bytes]]) -> None:
    """STATE.json of a hedged model states the average's verdict only: no ``active`` block
    whose per-unit status alone (certified while the average is pending) contradicts it."""
    eng = Engine(parse_config(el.config_text(deltas=(DELTA,), policy="hedged")))
    cert = el.cert_name(DELTA)
    for k, line in enumerate(stream[3]):
        eng.process(line)
        if k % 2000 == 0:
            for mv in eng.state_view()["suites"][el.SUITE]["models"].values():
                assert "active" not in mv
                meth = mv["certificates"][cert]["methods"]["r_autoeval_plus"]
                assert meth["status"] == mv["hedged"]["certificates"][cert]["status"]
                assert mv["hedged"]["units"] >= mv["hedged"]["audited_paired"]


def test_claim_after_a_restart_states_its_epochs_labels() -> None:
    """A claim of a later epoch (a regression restarted both processes) states the labels of
    its own epoch, as under uniform audits; the alert's round counts from the stream's start."""
    cfg = parse_config(
        '[[suites]]\nname = "s"\nmodels = ["*"]\naudit_rate = 0.25\naudit_policy = "hedged"\n'
        '[[suites.certificates]]\nname = "r"\nalpha = 0.2\ndelta = 0.05\ndetector_arl = 20.0\n'
        '[metrics]\nenabled = false\n')
    rng = np.random.default_rng(5)
    eng = Engine(cfg)
    claims: list[dict[str, Any]] = []
    for i in range(3000):
        h = float(rng.random() < (0.05 if i < 1200 else 0.6))
        base = {"suite": "s", "model": "m", "example_id": f"x{i}", "ts": float(i), "loss": h}
        for kind in ("judge", "label"):
            res = eng.process(json.dumps({"type": kind, "event_id": f"{kind}{i}", **base}))
            claims += [a for a in res.alerts if a["kind"] in ("certified", "violated")]
    late = [a for a in claims if a["evidence"]["epoch"] > 1]
    assert late and claims[0]["evidence"]["epoch"] == 1
    hist = eng.state_view()["suites"]["s"]["models"]["m"]
    for a in late:
        ev = a["evidence"]
        assert 0 < ev["labels"] < a["round"] <= hist["counts"]["rounds"]
