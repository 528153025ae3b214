"""consumers/labelling: the runnable labeller (files) and the webhook adapters (Label Studio,
Argilla) on recorded payloads (tests/consumers/data, no network); their labels are used by
the engine."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest

from consumers.labelling import labeller, webhooks
from consumers.labelling.webhooks import (
    ArgillaMapping,
    LabelStudioMapping,
    NoLabel,
    WebhookError,
    argilla_label,
    label_studio_label,
)
from monitor.config import CertmonConfig
from monitor.engine import Engine
from monitor.events import Event, decode_event
from monitor.label_requests import label_request_id

DATA = Path(__file__).parent / "data"
LS = LabelStudioMapping(loss_from="verdict", values={"fail": 1.0, "pass": 0.0})
AR = ArgillaMapping(question="verdict", values={"fail": 1.0, "pass": 0.0})


def fixture(name: str) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads((DATA / name).read_text())
    return payload


def engine(audit_rate: float = 1.0) -> Engine:
    cert = {"name": "risk", "alpha": 0.3, "delta": 0.1, "methods": ["r_eval"], "cs_grid": 40}
    return Engine(CertmonConfig.model_validate({"suites": [
        {"name": "*", "models": ["*"], "audit_rate": audit_rate, "audit_salt": "t",
         "certificates": [cert]}]}))


def judge(example_id: str, eid: str, ts: float = 1_795_248_000.0) -> bytes:
    return json.dumps({"type": "judge", "event_id": eid, "suite": "support-bot",
                       "model": "m-q4", "example_id": example_id, "loss": 0.0,
                       "ts": ts}).encode()


def rounds(eng: Engine) -> int:
    return sum(m.counts["rounds"] for m in eng.suites["support-bot"].models.values())


# ------------------------------------------------------------------ Label Studio

def test_label_studio_annotation_created() -> None:
    payload = fixture("label_studio_annotation_created.json")
    label = label_studio_label(payload, LS)
    rid = label_request_id("support-bot", "m-q4", "x42")
    assert label == {"type": "label", "request_id": rid, "loss": 1.0,
                     "ts": 1795248843.118204}
    ev = decode_event(json.dumps(label).encode())
    assert isinstance(ev, Event) and (ev.suite, ev.model, ev.example_id) == (
        "support-bot", "m-q4", "x42")
    # the engine asked for this unit; the webhook's label answers it
    eng = engine()
    req = eng.process(judge("x42", "e1")).requests
    assert req and req[0]["request_id"] == rid
    res = eng.process(json.dumps(label).encode())
    assert res.rejection is None and res.duplicate is None and rounds(eng) == 1
    # a redelivered webhook: an exact duplicate, counted
    res = eng.process(json.dumps(label_studio_label(payload, LS)).encode())
    assert res.duplicate == "event_id" and rounds(eng) == 1


@pytest.mark.parametrize(("change", "error"), [
    (lambda p: p.pop("task"), "no task object"),
    (lambda p: p["task"]["data"].pop("request_id"), "has no 'data.request_id'"),
    (lambda p: p["annotation"]["result"][0]["value"].update(choices=["maybe"]),
     "has no loss (map it: --value maybe=LOSS)"),
    (lambda p: p["annotation"]["result"][0]["value"].update(choices=["pass", "fail"]),
     "expected one answer"),
    (lambda p: p["annotation"].update(result=[]), "0 results from 'verdict'"),
    (lambda p: p["annotation"].update(created_at="yesterday"), "not an ISO 8601 time"),
])
def test_label_studio_errors(change: Any, error: str) -> None:
    payload = fixture("label_studio_annotation_created.json")
    change(payload)
    with pytest.raises(WebhookError, match=error.replace("(", r"\(").replace(")", r"\)")):
        label_studio_label(payload, LS)


def test_label_studio_payloads_without_a_label() -> None:
    payload = fixture("label_studio_annotation_created.json")
    skipped = copy.deepcopy(payload)
    skipped["annotation"]["was_cancelled"] = True
    for p in (skipped, {"action": "PROJECT_UPDATED", "project": {"id": 12}},
              {"action": "ANNOTATIONS_DELETED", "annotations": [{"id": 17}]}):
        with pytest.raises(NoLabel):
            label_studio_label(p, LS)
    # numbers and ratings: mapped, or used as the loss when in [0, 1]
    numeric = copy.deepcopy(payload)
    numeric["annotation"]["result"][0]["value"] = {"number": 0.25}
    assert label_studio_label(numeric, LS)["loss"] == 0.25
    numeric["annotation"]["result"][0]["value"] = {"rating": 5}
    assert label_studio_label(numeric, LabelStudioMapping("verdict", {"5": 0.0}))["loss"] == 0.0
    with pytest.raises(WebhookError):
        label_studio_label(numeric, LS)  # rating 5 unmapped
    # the request id kept elsewhere in the task
    moved = copy.deepcopy(payload)
    moved["task"]["meta"] = {"certmon": {"rid": moved["task"]["data"].pop("request_id")}}
    assert label_studio_label(moved, LabelStudioMapping(
        "verdict", LS.values, request_id_path="meta.certmon.rid"))["loss"] == 1.0


# ------------------------------------------------------------------ Argilla

def test_argilla_response_created() -> None:
    payload = fixture("argilla_response_created.json")
    label = argilla_label(payload, AR)
    rid = label_request_id("support-bot", "m-q4", "x57")
    assert label == {"type": "label", "request_id": rid, "loss": 0.0, "ts": 1795249230.128332}
    assert label == argilla_label(payload, ArgillaMapping("verdict", AR.values, "external_id"))
    eng = engine()
    eng.process(judge("x57", "e2"))
    res = eng.process(json.dumps(label).encode())
    assert res.rejection is None and res.duplicate is None and rounds(eng) == 1
    draft = copy.deepcopy(payload)
    draft["data"]["status"] = "draft"
    with pytest.raises(NoLabel):
        argilla_label(draft, AR)


def test_argilla_record_completed_needs_the_responses() -> None:
    payload = fixture("argilla_record_completed.json")
    with pytest.raises(WebhookError, match="carries no response values"):
        argilla_label(payload, AR)
    merged = copy.deepcopy(payload)
    merged["data"]["responses"] = [
        {"values": {"verdict": {"value": "fail"}}, "status": "submitted"},
        {"values": {"verdict": {"value": "pass"}}, "status": "submitted"},
        {"values": {"verdict": {"value": "fail"}}, "status": "discarded"}]
    label = argilla_label(merged, AR)
    assert label["loss"] == 0.5 and label["request_id"] == label_request_id(
        "support-bot", "m-q4", "x57")
    with pytest.raises(NoLabel):
        argilla_label({"type": "dataset.created", "data": {}}, AR)


def test_webhook_filter_command_line() -> None:
    text = "\n".join((DATA / n).read_text() for n in ("label_studio_annotation_created.json",))
    text += '\n{"action": "PROJECT_UPDATED"}\n'
    out, err = io.StringIO(), io.StringIO()
    rc = webhooks.main(["--tool", "label-studio", "--loss-from", "verdict", "--value", "fail=1",
                        "--value", "pass=0"], io.StringIO(text), out, err)
    assert rc == 0, err.getvalue()
    labels = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [lb["loss"] for lb in labels] == [1.0]
    assert "payload 2: no label" in err.getvalue()
    # Argilla: record.completed alone cannot be mapped: reported, exit status 1
    text = "".join((DATA / n).read_text() for n in ("argilla_response_created.json",
                                                     "argilla_record_completed.json"))
    out, err = io.StringIO(), io.StringIO()
    rc = webhooks.main(["--tool", "argilla", "--loss-from", "verdict", "--value", "fail=1",
                        "--value", "pass=0"], io.StringIO(text), out, err)
    assert rc == 1 and len(out.getvalue().splitlines()) == 1
    assert "payload 2: error: record.completed carries no response values" in err.getvalue()
    assert "1 labels, 0 payloads without a label, 1 errors" in err.getvalue()


# ------------------------------------------------------------------ the labeller

def half(request: dict[str, Any]) -> float | None:
    """An answer function for --answer (loss 0.5, no answer for example x1)."""
    return None if request["example_id"] == "x1" else 0.5


def test_labeller_answers_the_engines_requests(tmp_path: Path) -> None:
    eng = engine(audit_rate=0.3)
    requests = []
    for i in range(200):
        requests += eng.process(judge(f"x{i}", f"e{i}", 1_795_248_000.0 + i)).requests
    assert len(requests) > 20
    req_file = tmp_path / "requests.jsonl"
    lines = [json.dumps(r) for r in requests]
    # a restart re-emits requests; an evaluation request; a bad line
    lines += [lines[0], json.dumps({"kind": "evaluate", "model": "m"}), "not json"]
    req_file.write_text("\n".join(lines) + "\n")
    out = tmp_path / "labels.jsonl"
    rc = labeller.main(["--requests", str(req_file), "--out", str(out), "--answer",
                        "tests.consumers.test_labelling:half"])
    assert rc == 1  # the bad line
    labels = out.read_text().splitlines()
    lab = labeller.Labeller(half)
    for line in lines:
        lab.handle(line)
    assert (lab.answered, lab.repeats, lab.other, lab.bad) == (len(labels), 1, 1, 1)
    assert lab.answered + lab.unanswered == len(requests)
    for raw in labels:
        res = eng.process(raw.encode())
        assert res.rejection is None and res.duplicate is None
    assert rounds(eng) == len(labels)
    # answering the same requests again: every label an exact duplicate
    out2 = tmp_path / "again.jsonl"
    assert labeller.main(["--requests", str(req_file), "--out", str(out2), "--constant",
                          "0.5"]) == 1
    n = rounds(eng)
    dups = [eng.process(raw.encode()).duplicate for raw in out2.read_text().splitlines()]
    assert rounds(eng) == n + dups.count(None) and dups.count("event_id") == len(labels)


def test_labeller_truth_file_and_bad_answers(tmp_path: Path) -> None:
    rid = label_request_id("qa", "m", "x")
    req = {"kind": "label", "request_id": rid, "suite": "qa", "model": "m", "example_id": "x",
           "judge_event_id": "e", "ts": 3.0}
    truth = tmp_path / "truth.jsonl"
    truth.write_text('{"suite": "qa", "model": "m", "example_id": "x", "loss": 1}\n')
    reqs = tmp_path / "r.jsonl"
    reqs.write_text(json.dumps(req) + "\n")
    out = tmp_path / "l.jsonl"
    assert labeller.main(["--requests", str(reqs), "--out", str(out), "--truth",
                          str(truth)]) == 0
    assert json.loads(out.read_text()) == {"type": "label", "request_id": rid, "suite": "qa",
                                           "model": "m", "example_id": "x", "loss": 1.0,
                                           "ts": 3.0}
    lab = labeller.Labeller(lambda r: 2.0)
    assert lab.handle(json.dumps(req)) is None and lab.bad == 1
    assert "not a loss in [0, 1]" in lab.problems[0]
    assert labeller.main(["--requests", str(reqs), "--answer", "no.such.module:f"]) == 2
