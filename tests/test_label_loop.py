"""The label loop end to end, in one engine (no Kafka): judge events audited by hash ->
the requests the engine emits -> a labeller that answers each request by copying it and
adding ``loss`` -> back into the engine. Every label is used in a round, none is a duplicate,
none is dead-lettered: a labeller that answers requests by copying them has every
label used and nothing silently dropped."""

from __future__ import annotations

import json
from typing import Any

from monitor.config import CertmonConfig
from monitor.engine import Engine
from monitor.label_requests import label_request_id

N_EXAMPLES = 600


def config(**suite: Any) -> CertmonConfig:
    cert = {"name": "risk", "alpha": 0.3, "delta": 0.1, "methods": ["r_eval"], "cs_grid": 40}
    return CertmonConfig.model_validate({"suites": [
        {"name": "*", "models": ["*"], "audit_rate": 0.2, "audit_salt": "loop",
         "certificates": [cert]} | suite]})


def judge_events(n: int = N_EXAMPLES) -> list[bytes]:
    return [json.dumps({"type": "judge", "event_id": f"j{i}", "suite": "qa",
                        "model": "m" + str(i % 2), "example_id": f"x{i}", "loss": float(i % 7 == 0),
                        "ts": 1_700_000_000 + i}).encode() for i in range(n)]


def run_judges(eng: Engine) -> list[dict[str, Any]]:
    requests: list[dict[str, Any]] = []
    for raw in judge_events():
        res = eng.process(raw)
        assert res.rejection is None and res.duplicate is None
        requests.extend(res.requests)
    return requests


def copying_labeller(request: dict[str, Any]) -> bytes:
    """What anyone wiring a labelling tool writes first: the request, plus the answer."""
    return json.dumps({**request, "loss": float(request["example_id"][-1] in "05")}).encode()


def counts(eng: Engine) -> dict[str, int]:
    total: dict[str, int] = {}
    for model in eng.suites["qa"].models.values():
        for k, v in model.counts.items():
            total[k] = total.get(k, 0) + v
    return total


def test_a_labeller_that_copies_requests_has_every_label_used() -> None:
    eng = Engine(config())
    requests = run_judges(eng)
    assert 60 < len(requests) < 200
    assert all(r["kind"] == "label" and "event_id" not in r for r in requests)
    assert len({r["request_id"] for r in requests}) == len(requests)
    dead = []
    for req in requests:
        res = eng.process(copying_labeller(req))
        assert res.duplicate is None, (req, res)
        if res.dead_letter is not None:
            dead.append(res.dead_letter)
    assert dead == []
    c = counts(eng)
    assert c["rounds"] == c["labels"] == len(requests), c
    assert c["duplicates"] == 0 and c["unsolicited_labels"] == 0 and c["rejected"] == 0
    assert sum(eng.counters["rejected"].values()) == 0
    assert sum(eng.counters["duplicates"].values()) == 0


def test_answers_by_request_id_only_duplicates_and_mismatches() -> None:
    eng = Engine(config())
    requests = run_judges(eng)
    first, second, third = requests[:3]
    # an answer naming its unit by request id alone
    res = eng.process(json.dumps({"type": "label", "request_id": first["request_id"],
                                  "loss": 0, "ts": first["ts"] + 60}).encode())
    assert res.rejection is None and res.duplicate is None
    assert counts(eng)["rounds"] == 1
    # the same answer again (a redelivery): an exact duplicate, counted, not used again
    res = eng.process(json.dumps({"type": "label", "request_id": first["request_id"],
                                  "loss": 0, "ts": first["ts"] + 60}).encode())
    assert res.duplicate == "event_id"
    assert eng.counters["duplicates"]["event_id"] == 1
    assert counts(eng)["duplicates"] == 1 and counts(eng)["rounds"] == 1
    # a request id that names another unit than the ids given: dead-lettered with its reason
    mismatch = {**copying_labeller_dict(second), "example_id": third["example_id"]}
    res = eng.process(json.dumps(mismatch).encode(), {"line": 7})
    assert res.rejection is not None and res.rejection.reason == "request_id_mismatch"
    assert res.dead_letter is not None and res.dead_letter["reason"] == "request_id_mismatch"
    assert res.dead_letter["source"] == {"line": 7}
    assert eng.counters["rejected"]["request_id_mismatch"] == 1
    # ... and attributed to its model
    assert eng.suites["qa"].models[second["model"]].counts["rejected"] == 1
    # an unparsable request id: dead-lettered, attributed through nothing (no ids)
    res = eng.process(b'{"kind": "label", "request_id": "lbl1.bogus", "loss": 1, "ts": 1}')
    assert res.rejection is not None and res.rejection.reason == "bad_request_id"
    assert counts(eng)["rounds"] == 1
    # the second unit is still pending: its real answer is used
    res = eng.process(copying_labeller(second))
    assert res.rejection is None and res.duplicate is None
    assert counts(eng)["rounds"] == 2


def copying_labeller_dict(request: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(copying_labeller(request))
    return out


def test_label_for_a_unit_never_audited_is_unsolicited() -> None:
    eng = Engine(config())
    requests = run_judges(eng)
    asked = {r["example_id"] for r in requests}
    never = next(f"x{i}" for i in range(N_EXAMPLES) if f"x{i}" not in asked)
    i = int(never[1:])
    rid = label_request_id("qa", f"m{i % 2}", never)
    res = eng.process(json.dumps({"kind": "label", "request_id": rid, "loss": 1,
                                  "ts": 1_700_000_000 + N_EXAMPLES}).encode())
    assert res.rejection is None and res.duplicate is None
    c = counts(eng)
    assert c["unsolicited_labels"] == 1 and c["rounds"] == 0


def test_copies_of_stratified_requests_are_used() -> None:
    eng = Engine(config(strata={"by": "stratum", "count": 2, "allocation": "uniform"}))
    requests = []
    for i in range(300):
        requests += eng.process(json.dumps({
            "type": "judge", "event_id": f"j{i}", "suite": "qa", "model": "m",
            "example_id": f"x{i}", "loss": 0.0, "ts": 1_700_000_000 + i,
            "stratum": "ab"[i % 2]}).encode()).requests
    assert requests
    for req in requests:
        res = eng.process(copying_labeller(req))
        assert res.rejection is None and res.duplicate is None, res.rejection
    assert counts(eng)["labels"] == len(requests)
