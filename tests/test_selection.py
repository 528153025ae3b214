"""Selection-mode suites: config validation, request/answer bookkeeping, snapshots, views."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor.config import CertmonConfig, parse_config
from monitor.engine import Engine
from monitor.errors import CheckpointError, ConfigError
from monitor.selection_settings import KICKOFF_EXAMPLE_ID, synthetic_benchmark
from monitor.state.selection_suites import evaluation_request_id

SEL = """
[[suites]]
name = "bench"
mode = "selection"
[suites.selection]
models = ["a", "b", "c", "d"]
examples = 60
method = "{method}"
batch_size = 8
max_outstanding = {outstanding}
refit_every = 2
seed = 3
{extra}
"""

MONITOR = """
[[suites]]
name = "*"
audit_rate = 1.0
[[suites.certificates]]
name = "risk"
alpha = 0.5
delta = 0.1
methods = ["r_eval"]
cs_grid = 50
"""


def cfg(method: str = "ucbe", outstanding: int = 2, extra: str = "",
        tail: str = MONITOR) -> CertmonConfig:
    return parse_config(SEL.format(method=method, outstanding=outstanding, extra=extra) + tail)


def event(model: str, ex: str, loss: float, eid: str | None = None, suite: str = "bench",
          ts: float = 5.0, kind: str = "judge") -> bytes:
    return json.dumps({"type": kind, "event_id": eid or f"{model}/{ex}/{loss}", "suite": suite,
                       "model": model, "example_id": ex, "loss": loss, "ts": ts}).encode()


SCORES = synthetic_benchmark(4, 60, n_history=20, gap=0.15, seed=5).scores


def answer(eng: Engine, req: dict[str, Any]) -> list[Any]:
    i = "abcd".index(req["model"])
    out = []
    for ex in req["example_ids"]:
        out.append(eng.process(event(req["model"], ex, 1.0 - SCORES[i, int(ex)],
                                     eid=f"{req['request_id']}/{ex}")))
    return out


# ---------------------------------------------------------------------- config
def test_config_defaults_and_unchanged_fingerprint_without_selection() -> None:
    c = cfg()
    s = c.suites[0]
    assert s.mode == "selection" and s.selection is not None
    assert s.selection.example_ids[:3] == ("0", "1", "2") and len(s.selection.example_ids) == 60
    assert s.selection.budget is None and s.selection.delta == 0.05
    assert c.suites[1].mode is None and c.suites[1].selection is None
    dumped = c.suites[1].model_dump(mode="json")
    assert "mode" not in dumped and "selection" not in dumped  # fingerprints of old configs kept


@pytest.mark.parametrize(
    ("extra_or_override", "expected"),
    [
        (["suites.0.selection.models=['a']"], "models: List should have at least 2 items"),
        (["suites.0.selection.models=['a', 'a']"], "models must be unique"),
        (["suites.0.selection.models=['a', 'b*']"], "not globs"),
        (["suites.0.selection.examples=0"], "examples"),
        (["suites.0.selection.batch_size=61"], "batch_size 61 exceeds the 60 examples"),
        (["suites.0.selection.method='thompson'"], "method"),
        (["suites.0.selection.delta=1.5"], "delta"),
        (["suites.0.selection.budget=0"], "budget"),
        (["suites.0.selection.max_outstanding=0"], "max_outstanding"),
        (["suites.0.selection.typo=1"], "typo: unknown key"),
        (["suites.0.selection.examples='/nonexistent/ids.txt'"], "cannot read examples file"),
        (["suites.0.selection.history='/nonexistent/h.npy'"], "cannot read /nonexistent/h.npy"),
        (["suites.0.mode='monitor'"], 'selection needs mode = "selection"'),
        (["suites.1.mode='selection'"], 'selection needs mode = "selection"'),
        (["suites.1.certificates=[]"], "certificates: at least one"),
    ],
)
def test_config_errors(extra_or_override: list[str], expected: str) -> None:
    text = SEL.format(method="ucbe", outstanding=1, extra="") + MONITOR
    with pytest.raises(ConfigError, match=None) as info:
        parse_config(text, extra_or_override)
    assert expected in str(info.value), str(info.value)


def test_config_selection_with_certificates_is_refused() -> None:
    text = SEL.format(method="ucbe", outstanding=1, extra="") + (
        "[[suites.certificates]]\nname='r'\nalpha=0.1\ndelta=0.1\n")
    with pytest.raises(ConfigError, match="not used in selection mode"):
        parse_config(text)


def test_config_files(tmp_path: Path) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("q1\nq2\n\nq3\n")
    hist = tmp_path / "h.json"
    hist.write_text(json.dumps([[1, 0, None], [0, 1, 1]]))
    text = SEL.format(method="pulse", outstanding=1, extra=f'history = "{hist}"')
    good = parse_config(text.replace("examples = 60", f'examples = "{ids}"')
                        .replace("batch_size = 8", "batch_size = 2"))
    sel = good.suites[0].selection
    assert sel is not None and sel.example_ids == ("q1", "q2", "q3")
    assert sel.history_matrix is not None and np.isnan(sel.history_matrix[0, 2])
    np.save(tmp_path / "bad.npy", np.ones((2, 5)))
    with pytest.raises(ConfigError, match="has 5 columns, expected one per example"):
        parse_config(text.replace(str(hist), str(tmp_path / "bad.npy")))
    np.save(tmp_path / "range.npy", np.full((2, 60), 2.0))
    with pytest.raises(ConfigError, match=r"scores must lie in \[0, 1\]"):
        parse_config(text.replace(str(hist), str(tmp_path / "range.npy")))
    dup = tmp_path / "dup.txt"
    dup.write_text("x\nx\n")
    with pytest.raises(ConfigError, match="repeats ids"):
        parse_config(text.replace("examples = 60", f'examples = "{dup}"'))
    reserved = tmp_path / "reserved.json"
    reserved.write_text(json.dumps(["x", KICKOFF_EXAMPLE_ID, "y", "z", "w", "v", "u", "t"]))
    with pytest.raises(ConfigError, match="reserved"):
        parse_config(SEL.format(method="ucbe", outstanding=1, extra="")
                     .replace("examples = 60", f'examples = "{reserved}"'))


def test_ordinary_suites_unchanged_next_to_a_selection_suite() -> None:
    c = cfg()
    eng, ref = Engine(c), Engine(parse_config(MONITOR))
    for i in range(30):
        for kind in ("judge", "label"):
            raw = event("m", f"x{i}", 0.0, eid=f"{kind}{i}", suite="qa", ts=i, kind=kind)
            assert eng.process(raw).alerts == ref.process(raw).alerts
    assert eng.state_view() == ref.state_view()
    assert "selection" not in eng.snapshot()  # no selection suite started: snapshot as before


# ---------------------------------------------------------------------- bookkeeping
def test_requests_start_and_are_deterministic() -> None:
    eng = Engine(cfg())
    reqs = eng.start(10.0).requests
    assert [r["model"] for r in reqs] == ["a", "b"]
    assert all(r["kind"] == "evaluate" and r["suite"] == "bench" and r["ts"] == 10.0
               for r in reqs)
    assert reqs[0]["request_id"] == evaluation_request_id("bench", "a", 0)
    assert [len(r["example_ids"]) for r in reqs] == [8, 8]
    assert Engine(cfg()).start(10.0).requests == reqs
    assert eng.start(99.0).requests == reqs  # started: re-emits the requests in flight
    # A first event of the suite starts it too (replays need no start call).
    other = Engine(cfg())
    res = other.process(event("a", KICKOFF_EXAMPLE_ID, 0.0, ts=10.0))
    assert res.requests == reqs
    assert other.state_view()["suites"]["bench"]["selection"]["counts"]["kickoff"] == 1


def test_no_example_requested_twice_and_bad_answers_ignored() -> None:
    eng = Engine(cfg(outstanding=3))
    queue = list(eng.start(0.0).requests)
    seen: dict[str, list[str]] = {m: [] for m in "abcd"}
    first = queue[0]
    # unrequested pair (model b on an example only requested from a), unknown model/example
    not_b = next(e for e in first["example_ids"] if e not in queue[1]["example_ids"])
    assert eng.process(event("b", not_b, 0.0)).duplicate is None
    eng.process(event("zz", "1", 0.0))
    eng.process(event("a", "nope", 0.0))
    before = eng.state_view()["suites"]["bench"]["selection"]
    assert before["calls_completed"] == 0
    n_dups = 0
    while queue:
        req = queue.pop(0)
        seen[req["model"]].extend(req["example_ids"])
        results = answer(eng, req)
        for r in results:
            queue.extend(r.requests)
        # a redelivered answer (same event) and a re-scored one are duplicates, never used
        again = eng.process(event(req["model"], req["example_ids"][0], 0.0, eid="other"))
        assert again.duplicate == "unit"
        n_dups += 1
    for m, exs in seen.items():
        assert len(exs) == len(set(exs)), m
    sel = eng.state_view()["suites"]["bench"]["selection"]
    assert sel["counts"]["unrequested"] == 1
    assert sel["counts"]["unknown_model"] == 1 and sel["counts"]["unknown_example"] == 1
    assert sel["counts"]["duplicates"] == n_dups == eng.counters["duplicates"]["unit"]
    assert sel["calls_completed"] == sum(len(v) for v in seen.values())
    # the loop ended with a certificate naming the true best, evaluated on fewer than all
    assert sel["best_model"] == "abcd"[int(np.argmax(SCORES.mean(axis=1)))]
    assert sel["outstanding"] == 0 and sel["calls_completed"] < 4 * 60


def test_best_model_alert_evidence_and_view() -> None:
    eng = Engine(cfg(method="pulse"))
    queue = list(eng.start(0.0).requests)
    alerts = []
    while queue:
        for r in answer(eng, queue.pop(0)):
            queue.extend(r.requests)
            alerts.extend(r.alerts)
    assert len(alerts) == 1
    a = alerts[0]
    best = "abcd"[int(np.argmax(SCORES.mean(axis=1)))]
    assert a["kind"] == "best_model" and a["model"] == best and a["certificate"] == "best_model"
    ev = a["evidence"]
    assert ev["model"] == best and ev["runner_up"] in "abcd" and ev["runner_up"] != best
    assert ev["lower"] > ev["runner_up_upper"] - ev["epsilon"]
    assert set(ev["estimates"]) == set("abcd") and ev["method"] == "pulse"
    assert len(a["id"]) == 32 and a["round"] == ev["calls"]
    assert eng.counters["alerts"]["best_model"] == 1
    sel = eng.state_view()["suites"]["bench"]["selection"]
    assert sel["best_model"] == best and sel["certificate"]["model"] == best
    assert {m["rank"] for m in sel["models"].values()} == {0, 1, 2, 3}
    assert sel["models"][sel["leader"]]["rank"] == 0
    for mv in sel["models"].values():
        assert 0.0 <= mv["lower"] <= mv["upper"] <= 1.0
    assert 0.0 < sel["budget_used"] < 1.0
    json.dumps(eng.state_view(), allow_nan=False)


@pytest.mark.parametrize("method", ["pulse", "ucbe", "naive"])
def test_snapshot_restore_mid_loop_is_bit_identical(method: str) -> None:
    config = cfg(method=method, outstanding=2)
    ref = Engine(config)
    queue = list(ref.start(0.0).requests)
    answers: list[bytes] = []
    while queue:  # record the full answer stream of an uninterrupted run
        req = queue.pop(0)
        i = "abcd".index(req["model"])
        for ex in req["example_ids"]:
            raw = event(req["model"], ex, 1.0 - SCORES[i, int(ex)], eid=f"{req['request_id']}/{ex}")
            answers.append(raw)
            queue.extend(ref.process(raw).requests)
    for cut in (5, len(answers) // 2, len(answers) - 3):
        eng = Engine(config)
        eng.start(0.0)
        for raw in answers[:cut]:
            eng.process(raw)
        snap = json.loads(json.dumps(eng.snapshot(), allow_nan=False))
        restored = Engine.restore(config, snap)
        assert restored.snapshot() == eng.snapshot()
        assert restored.state_view() == eng.state_view()
        outs_a = [eng.process(raw) for raw in answers[cut:]]
        outs_b = [restored.process(raw) for raw in answers[cut:]]
        assert [(o.alerts, o.requests) for o in outs_a] == [(o.alerts, o.requests) for o in outs_b]
        assert restored.snapshot() == eng.snapshot() == ref.snapshot()


def test_restore_refuses_a_selection_suite_no_longer_configured() -> None:
    eng = Engine(cfg())
    eng.start(0.0)
    snap = eng.snapshot()
    snap["selection"][0]["name"] = "elsewhere"
    with pytest.raises(CheckpointError, match="malformed"):
        Engine.restore(cfg(), snap)


def test_glob_selection_suites_start_on_first_sight() -> None:
    text = SEL.format(method="ucbe", outstanding=1, extra="").replace('"bench"', '"bench-*"')
    eng = Engine(parse_config(text))
    assert eng.start().requests == []
    res = eng.process(event("a", KICKOFF_EXAMPLE_ID, 0.0, suite="bench-1"))
    assert [r["suite"] for r in res.requests] == ["bench-1"]
    assert eng.process(event("a", "0", 0.0, suite="other")).requests == []
    assert eng.counters["unrouted"] == 1
