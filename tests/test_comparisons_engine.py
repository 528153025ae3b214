"""Comparisons through the engine (monitor.state.comparisons): verdicts, label delays, restore."""

from __future__ import annotations

import json

import numpy as np
import pytest

from monitor.checkpoint import CheckpointError
from monitor.config import parse_config
from monitor.engine import Engine
from monitor.simulate_delays import shadow_stream
from monitor.stats.comparison import PairedComparison

CONFIG = """
[[suites]]
name = "shadow"
models = ["m-v1", "m-v2"]
audit_rate = 0.25
pending_ttl_seconds = 400
[[suites.certificates]]
name = "risk"
alpha = 0.2
delta = 0.05
methods = ["r_autoeval_plus"]
[[suites.comparisons]]
name = "v2-vs-v1"
baseline = "m-v1"
candidate = "m-v2"
margin = 0.02
delta = 0.05
"""


def _stream(seed: int, risk_candidate: float, examples: int = 8000) -> list[bytes]:
    # labels come back late by their value (failures 16x slower); 5% never come, whatever
    # their value (the documented assumption of skipping missing pairs)
    ev = shadow_stream("shadow", np.random.default_rng(seed), examples=examples,
                       risk_baseline=0.05, risk_candidate=risk_candidate, judge_agreement=0.9,
                       delay_pass=5.0, delay_fail=80.0, missing_pass=0.05, missing_fail=0.05)
    return [line for _, line in ev]


def _run(eng: Engine, lines: list[bytes]) -> list[dict[str, object]]:
    return [a for line in lines for a in eng.process(line).alerts]


def _candidate(eng: Engine) -> dict[str, object]:
    view = eng.state_view()["suites"]["shadow"]["comparisons"]["v2-vs-v1"]
    out: dict[str, object] = view["candidates"]["m-v2"]
    return out


@pytest.mark.parametrize(("risk_candidate", "kind", "seed"),
                         [(0.12, "inferior", 0), (0.05, "non_inferior", 1)])
def test_verdict_under_label_dependent_delays(risk_candidate: float, kind: str,
                                              seed: int) -> None:
    eng = Engine(parse_config(CONFIG))
    alerts = [a for a in _run(eng, _stream(seed, risk_candidate))
              if a["kind"] in ("inferior", "non_inferior")]
    assert [a["kind"] for a in alerts] == [kind]
    (a,) = alerts
    assert (a["suite"], a["comparison"], a["baseline"], a["candidate"], a["model"],
            a["certificate"], a["method"]) == (
        "shadow", "v2-vs-v1", "m-v1", "m-v2", "m-v2", "v2-vs-v1", "paired")
    ev = a["evidence"]
    assert isinstance(ev, dict)
    assert ev["labels"] == 2 * a["round"] <= 2 * 2000
    if kind == "inferior":
        assert ev["bound_side"] == "lower" and ev["bound"] >= 0.02
    else:
        assert ev["bound_side"] == "upper" and ev["bound"] <= 0.02
    view = _candidate(eng)
    assert view["status"] == kind and view["missing_pairs"] > 0  # missing labels were skipped
    assert eng.counters["alerts"][kind] == 1


def test_engine_feeds_the_pairs_in_pair_order() -> None:
    """The engine's comparison equals a PairedComparison fed the complete pairs in example
    order (the stream's order of audits), whatever order the labels arrived in."""
    lines = _stream(3, 0.08, examples=3000)
    eng = Engine(parse_config(CONFIG))
    _run(eng, lines)
    labels: dict[tuple[str, str], float] = {}
    judges: dict[tuple[str, str], float] = {}
    blocks: dict[str, list[float]] = {"m-v1": [], "m-v2": []}
    rounds: list[tuple[str, dict[str, tuple[float, float, float | None]]]] = []
    for line in lines:
        e = json.loads(line)
        if e["type"] == "label" and e["ts"] - 1_000_000.0 - int(e["example_id"][1:]) < 399:
            labels[(e["model"], e["example_id"])] = e["loss"]  # in time (pending_ttl 400)
    policy = eng.suites["shadow"].audit
    seen: dict[str, dict[str, tuple[float, float, float | None]]] = {}
    for line in lines:
        e = json.loads(line)
        if e["type"] != "judge":
            continue
        m, ex = e["model"], e["example_id"]
        judges[(m, ex)] = e["loss"]
        if policy.uniform(m, ex) >= 0.25:  # not audited: the arm's synthetic block
            blocks[m].append(e["loss"])
            continue
        b = blocks[m]
        mean = sum(b) / len(b) if b else None
        blocks[m] = []
        if ex not in seen:
            seen[ex] = {}
            rounds.append((ex, seen[ex]))
        seen[ex][m] = (labels.get((m, ex), -1.0), e["loss"], mean)
    direct = PairedComparison(0.02, 0.05)
    fed = 0
    view = _candidate(eng)
    done = int(view["rounds"]) + int(view["missing_pairs"])  # pairs resolved by the stream end
    assert int(view["waiting"]) > 0
    for _, arms in rounds[:done]:
        (hb, fb, bb), (hc, fc, bc) = arms["m-v1"], arms["m-v2"]
        if hb >= 0 and hc >= 0:
            direct.update(hc, hb, fc, fb, bc, bb)
            fed += 1
    group = eng.suites["shadow"].comparisons.groups["v2-vs-v1"]
    engine_state = group.member("m-v2").to_state()
    assert fed > 500 and engine_state == direct.to_state()


def test_restore_anywhere_continues_bit_identically() -> None:
    cfg = parse_config(CONFIG)
    lines = _stream(0, 0.3, examples=1500)
    full = Engine(cfg)
    full_alerts = _run(full, lines)
    expected = json.dumps(full.snapshot(), sort_keys=True)
    assert any(a["kind"] == "inferior" for a in full_alerts)
    waiting = 0
    for k in range(0, len(lines) + 1, 397):
        eng = Engine(cfg)
        alerts = _run(eng, lines[:k])
        snap = json.loads(json.dumps(eng.snapshot()))
        waiting += sum(len(p[4]) for p in snap["suites"][0]["comparisons"]["pairs"]) if k else 0
        restored = Engine.restore(cfg, snap)
        alerts += _run(restored, lines[k:])
        assert alerts == full_alerts, k
        assert json.dumps(restored.snapshot(), sort_keys=True) == expected, k
    assert waiting > 0  # some snapshots were taken with pairs waiting for a label


def test_a_checkpoint_of_an_older_bet_grid_restores_and_keeps_its_grid(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # a checkpoint written when the default grid was "comparison" names that grid in its
    # state: it restores (the grid is not configured) and continues on its own grid,
    # bit-identically to a run that never stopped
    cfg = parse_config(CONFIG)
    lines = _stream(0, 0.12, examples=1500)
    k = 700
    with monkeypatch.context() as m:
        m.setitem(PairedComparison.__init__.__kwdefaults__, "grid", "comparison")
        old = Engine(cfg)
        _run(old, lines[:k])
        snap = json.loads(json.dumps(old.snapshot()))
        later = _run(old, lines[k:])
        expected = json.dumps(old.snapshot(), sort_keys=True)
    assert PairedComparison().config()["grid"] == "lognormal"  # the current default
    restored = Engine.restore(cfg, snap)
    member = restored.suites["shadow"].comparisons.groups["v2-vs-v1"].member("m-v2")
    assert isinstance(member, PairedComparison) and member.config()["grid"] == "comparison"
    before = member.rounds
    assert _run(restored, lines[k:]) == later
    assert member.rounds > before > 0
    assert json.dumps(restored.snapshot(), sort_keys=True) == expected


@pytest.mark.parametrize("forge", ["margin", "kind", "absent", "pair"])
def test_restore_refuses_another_comparison(forge: str) -> None:
    cfg = parse_config(CONFIG)
    eng = Engine(cfg)
    _run(eng, _stream(0, 0.12, examples=600))
    snap = json.loads(json.dumps(eng.snapshot()))
    cmp = snap["suites"][0]["comparisons"]
    if forge == "margin":
        cmp["config"][0]["margin"] = 0.05
    elif forge == "kind":
        cmp["kind"] = "certmon.Other"
    elif forge == "absent":
        del snap["suites"][0]["comparisons"]
    else:
        cmp["pairs"][0][3] = cmp["pairs"][0][2] + 1  # fed beyond the positions given
    with pytest.raises(CheckpointError, match="refused"):
        Engine.restore(cfg, snap)


def test_other_models_keep_their_audit_coin() -> None:
    """Only the models of a paired comparison share a coin; a suite without comparisons and
    the other models of a suite with one audit exactly the same units as before."""
    base = CONFIG.split("[[suites.comparisons]]")[0].replace('"m-v2"]', '"m-v2", "m-v3"]')
    with_cmp = base + CONFIG[CONFIG.index("[[suites.comparisons]]"):]
    plain, paired = Engine(parse_config(base)), Engine(parse_config(with_cmp))
    for eng in (plain, paired):
        for i in range(400):
            for m in ("m-v1", "m-v2", "m-v3"):
                eng.process(json.dumps({"type": "judge", "event_id": f"{m}-{i}",
                                        "suite": "shadow", "model": m, "example_id": f"x{i}",
                                        "loss": 0.0, "ts": 1000 + i}).encode())
    def pending(eng: Engine, m: str) -> int:
        return eng.suites["shadow"].models[m].pending_units
    a1, a2 = (paired.suites["shadow"].audit.uniform(m, "x7") for m in ("m-v1", "m-v2"))
    assert a1 == a2
    assert pending(paired, "m-v1") == pending(paired, "m-v2") != pending(plain, "m-v1")
    assert pending(paired, "m-v3") == pending(plain, "m-v3")
    assert "comparisons" not in plain.state_view()["suites"]["shadow"]
    assert "comparisons" not in plain.snapshot()["suites"][0]


def test_a_candidate_that_gets_worse_starts_a_new_epoch_and_is_shown_inferior() -> None:
    """Equal versions (non_inferior), then the candidate fails 4x as often: the change
    detector ends the stale epoch and the new one shows the candidate inferior."""
    rng = np.random.default_rng(4)
    kw = {"risk_baseline": 0.05, "judge_agreement": 0.9, "delay_pass": 5.0, "delay_fail": 80.0}
    first = shadow_stream("shadow", rng, examples=8000, risk_candidate=0.05, **kw)
    later = shadow_stream("shadow", rng, examples=8000, risk_candidate=0.2, id_prefix="b",
                          start_ts=1_000_000.0 + 8000, **kw)
    eng = Engine(parse_config(CONFIG))
    kinds = [a["kind"] for a in _run(eng, [line for _, line in first + later])
             if a["kind"] in ("inferior", "non_inferior")]
    assert kinds == ["non_inferior", "inferior"]
    view = _candidate(eng)
    assert view["epoch"] == 1 and view["status"] == "inferior"


BOUNDARY_CONFIG = "delta = 0.2\n".join(CONFIG.rsplit("delta = 0.05\n", 1))  # the comparison's


@pytest.mark.statistical
def test_false_verdicts_at_the_boundary_through_the_engine() -> None:
    # difference == margin (0.07 - 0.05) through the real event path: label delays 16x longer
    # for failures, 5% of labels missing, failures coupled 0.5; at delta 0.2 (so that 40 runs of
    # 4000 examples, ~1000 audited each, can show a broken path) neither false verdict may be
    # more frequent than delta
    from tests.stats.binomial import clopper_pearson_lower

    runs, found = 40, {"non_inferior": 0, "inferior": 0}
    for seed in range(runs):
        ev = shadow_stream("shadow", np.random.default_rng(1000 + seed), examples=4000,
                           risk_baseline=0.05, risk_candidate=0.07, judge_agreement=0.9,
                           delay_pass=5.0, delay_fail=80.0, missing_pass=0.05,
                           missing_fail=0.05)
        eng = Engine(parse_config(BOUNDARY_CONFIG))
        kinds = {a["kind"] for a in _run(eng, [line for _, line in ev])}
        for kind in found:
            found[kind] += kind in kinds
    for kind, k in found.items():
        assert clopper_pearson_lower(k, runs, 0.999) <= 0.2, (kind, k, runs)
