"""Label answers (monitor/label_answers.py) through decode_event: request ids, copies of
requests, derived event ids; the msgspec fast path and the pydantic reference agree on every
case (``check`` from the differential test)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from monitor import events
from monitor.events import REJECTION_REASONS, Event, Rejection, decode_event
from monitor.label_requests import label_request, label_request_id, parse_label_request_id
from tests.test_events_fast_path import _byte_damage, _mutate, _serialize, check

RID = label_request_id("qa", "m1", "x1")
REQUEST = label_request("qa", "m1", "x1", "e1", 1_700_000_000.0, "math", propensity=0.1,
                        reason="uniform", position=3)


def raw(d: dict[str, Any]) -> bytes:
    return json.dumps(d).encode()


def decoded(d: dict[str, Any], **kw: Any) -> Event | Rejection:
    """Decode ``d`` after checking that both paths agree on it."""
    b = raw(d)
    check(b, **kw)
    return decode_event(b, **kw)


def test_request_id_round_trip_and_canonical_form() -> None:
    for ids in (("qa", "m1", "x1"), ("s", "m", "\u00e9\U0001f600"), ("a,b", '"', "\\"),
                ("x" * 300, "y", "z")):
        rid = label_request_id(*ids)
        assert parse_label_request_id(rid) == ids
        assert set(rid[5:]) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                   "0123456789-_")
    assert label_request_id("a", "b", "c") != label_request_id("a", "bc", "")
    for bad in ("", "lbl1.", "lbl1.!!", "lbl2." + RID[5:], RID + "=", RID + "A", " " + RID,
                "lbl1.WyJhIiwiYiJd",  # ["a","b"]: two ids
                "lbl1.WyJhIiwiYiIsIiJd",  # an empty id
                "lbl1.WyJhIiwgImIiLCAiYyJd"):  # ["a", "b", "c"] with spaces: not canonical
        assert parse_label_request_id(bad) is None, bad


def test_request_fields() -> None:
    assert REQUEST == {"kind": "label", "request_id": RID, "suite": "qa", "model": "m1",
                       "example_id": "x1", "judge_event_id": "e1", "ts": 1_700_000_000.0,
                       "stratum": "math", "propensity": 0.1, "reason": "uniform",
                       "audit_position": 3}


def test_copy_of_a_request_is_a_label() -> None:
    ev = decoded({**REQUEST, "loss": 1})
    assert isinstance(ev, Event)
    assert (ev.type, ev.event_id, ev.suite, ev.model, ev.example_id, ev.loss, ev.ts,
            ev.stratum) == ("label", "label:" + RID, "qa", "m1", "x1", 1.0, 1.7e9, "math")
    # two copies of the same answer are the same event (exact duplicates)
    assert decoded({**REQUEST, "loss": 1}) == ev
    # a copy that also says type "label" is the same label
    assert decoded({**REQUEST, "type": "label", "loss": 1}) == ev


def test_answer_by_request_id_alone_and_by_ids() -> None:
    by_id = decoded({"type": "label", "request_id": RID, "loss": 0, "ts": 5})
    by_kind = decoded({"kind": "label", "request_id": RID, "loss": 0, "ts": 5})
    by_ids = decoded({"type": "label", "suite": "qa", "model": "m1", "example_id": "x1",
                      "loss": 0, "ts": 5})
    assert by_id == by_kind == by_ids
    assert isinstance(by_id, Event) and by_id.event_id == "label:" + RID
    # partly given ids are filled from the request id; an own event id is kept
    ev = decoded({"type": "label", "request_id": RID, "model": "m1", "event_id": "L7",
                  "loss": 0.5, "ts": "2024-01-01T00:00:00Z"})
    assert isinstance(ev, Event) and (ev.event_id, ev.suite, ev.example_id, ev.ts) == (
        "L7", "qa", "x1", 1704067200.0)
    # the original format is unchanged
    old = decoded({"type": "label", "event_id": "e", "suite": "qa", "model": "m1",
                   "example_id": "x1", "loss": 0, "ts": 5})
    assert isinstance(old, Event) and old.event_id == "e"


@pytest.mark.parametrize(("extra", "reason", "detail"), [
    ({"example_id": "x2"}, "request_id_mismatch",
     "example_id: 'x2' disagrees with the request id, which names example_id 'x1'"),
    ({"suite": "other"}, "request_id_mismatch", None),
    ({"request_id": "lbl1.nope"}, "bad_request_id",
     "request_id: 'lbl1.nope' is not a certmon label request id"),
    ({"request_id": ""}, "bad_request_id", None),
    ({"request_id": RID + "=="}, "bad_request_id", None),
    ({"request_id": 7}, "wrong_type", None),
    ({"propensity": 1.5}, "out_of_range", None),
    ({"propensity": "0.1"}, "wrong_type", None),
    ({"audit_position": -1}, "out_of_range", None),
    ({"audit_position": 1.5}, "wrong_type", None),
    ({"kind": "evaluate", "type": "label"}, "invalid_value", None),
    ({"audit": True}, "invalid_value", "audit: only judge events may carry an audit flag"),
    ({"surprise": 1}, "unknown_field", None),
    ({"loss": 2}, "out_of_range", None),
])
def test_bad_answers(extra: dict[str, Any], reason: str, detail: str | None) -> None:
    r = decoded({**REQUEST, "loss": 1, **extra})
    assert isinstance(r, Rejection) and r.reason == reason, r
    assert r.reason in REJECTION_REASONS
    if detail is not None:
        assert r.detail == detail


def test_judge_events_take_no_request_keys_and_need_their_ids() -> None:
    judge = {"type": "judge", "event_id": "e", "suite": "qa", "model": "m1", "example_id": "x1",
             "loss": 0, "ts": 5}
    for extra in ({"request_id": RID}, {"kind": "label"}, {"propensity": 0.1}):
        r = decoded({**judge, **extra})
        assert isinstance(r, Rejection) and r.reason == "unknown_field", r
    for name in ("event_id", "suite"):
        r = decoded({k: v for k, v in judge.items() if k != name})
        assert isinstance(r, Rejection) and r.detail == f"{name}: Field required", r
    # no type and no kind "label": not a label answer, "type" is required
    for d in ({**REQUEST, "kind": None, "loss": 1}, {**REQUEST, "kind": "evaluate", "loss": 1},
              {**REQUEST, "type": None, "loss": 1}):
        r = decoded(d)
        assert isinstance(r, Rejection) and r.reason in ("unknown_field", "missing_field",
                                                         "invalid_value", "wrong_type"), r
    # a label without a request id needs its three ids
    r = decoded({"type": "label", "suite": "qa", "model": "m1", "loss": 0, "ts": 5})
    assert isinstance(r, Rejection) and r.detail == "example_id: Field required"


def test_id_limits_of_answers() -> None:
    long_x = "x" * 200
    rid = label_request_id("qa", "m1", long_x)
    assert len("label:" + rid) > 256
    ev = decoded({"kind": "label", "request_id": rid, "loss": 0, "ts": 1})
    # the derived event id is bounded by the ids it encodes: not refused
    assert isinstance(ev, Event) and ev.example_id == long_x
    r = decoded({"kind": "label", "request_id": rid, "loss": 0, "ts": 1}, max_id_bytes=100)
    assert isinstance(r, Rejection) and r.detail.startswith("example_id is 200 bytes")
    for limit in (1, 2, 5, 64, 255, 256, 400):
        check(raw({**REQUEST, "loss": 0}), max_id_bytes=limit)
        check(raw({"kind": "label", "request_id": rid, "loss": 0, "ts": 1}), max_id_bytes=limit)


def test_fast_path_takes_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    raws = [raw({**REQUEST, "loss": 1}), raw({"type": "label", "request_id": RID, "loss": 0,
                                             "ts": "2024-01-01T00:00:00Z"}),
            raw({"type": "label", "suite": "qa", "model": "m", "example_id": "x", "loss": 0,
                 "ts": 1})]
    expected = [decode_event(r) for r in raws]
    assert all(isinstance(e, Event) for e in expected)

    def no_slow_path(raw: bytes, max_id_bytes: int) -> Event | Rejection:
        raise AssertionError(f"slow path taken for {raw!r}")

    monkeypatch.setattr(events, "_slow_path", no_slow_path)
    assert [decode_event(r) for r in raws] == expected


def test_rejection_reasons_registered() -> None:
    assert {"bad_request_id", "request_id_mismatch", "event_id_conflict"} <= set(
        REJECTION_REASONS)
    assert len(set(REJECTION_REASONS)) == len(REJECTION_REASONS)


# ------------------------------------------------------------------ seeded random answers

def _answer_items(rng: random.Random) -> list[tuple[bytes, bytes]]:
    ids = [("qa", "m1", "x1"), ("s", "m", "\u00e9"), ("qa", "m2", "x" * rng.choice([1, 90]))]
    unit = rng.choice(ids)
    other = rng.choice(ids)
    def pick(good: list[bytes], bad: list[bytes]) -> bytes:
        return rng.choice(good if rng.random() < 0.9 else bad)

    items: list[tuple[bytes, bytes]] = [
        (b"loss", pick([b"0", b"1", b"0.25"], [b"1.5", b'"0"'])),
        (b"ts", pick([b"5", b'"2024-01-01T00:00:00Z"'], [b'"x"', b"1e400"]))]
    shape = rng.randrange(4)
    if shape in (0, 1):
        items.append((b"kind", b'"label"'))
    if shape in (1, 2, 3):
        items.append((b"type", pick([b'"label"'], [b'"judge"', b"null"])))
    if rng.random() < 0.7:
        rid = label_request_id(*unit) if rng.random() < 0.9 else rng.choice(
            ["lbl1.x", "", RID + "="])
        items.append((b"request_id", json.dumps(rid).encode()))
    for name, value in zip(("suite", "model", "example_id"),
                           other if rng.random() < 0.1 else unit, strict=True):
        if rng.random() < 0.5:
            items.append((name.encode(), json.dumps(value).encode()))
    if rng.random() < 0.4:
        items.append((b"event_id", rng.choice([b'"L1"', b'""', b"null"])))
    for key, good, bad in ((b"judge_event_id", [b'"e1"'], [b"3"]),
                           (b"stratum", [b'"a"', b"null"], [b"1"]),
                           (b"propensity", [b"0.1", b"1"], [b"-0.5", b"true"]),
                           (b"reason", [b'"uniform"'], [b"[]"]),
                           (b"audit_position", [b"0", b"17"],
                            [b"-1", b"2.0", b"18446744073709551616"])):
        if rng.random() < 0.3:
            items.append((key, pick(good, bad)))
    rng.shuffle(items)
    return items


@pytest.mark.parametrize("seed", range(3))
def test_random_answers_agree(seed: int) -> None:
    rng = random.Random(1000 + seed)
    outcomes = {"fast": 0, "slow": 0}
    accepted = 0
    for _ in range(1500):
        items = _answer_items(rng)
        for _ in range(rng.choice([0, 0, 0, 1, 2])):
            items = _mutate(rng, items)
        b = _serialize(rng, items)
        if rng.random() < 0.1:
            b = _byte_damage(rng, b)
        limit = rng.choice([256, 256, 256, 8, 64])
        outcomes[check(b, max_id_bytes=limit)] += 1
        accepted += isinstance(decode_event(b, max_id_bytes=limit), Event)
    assert outcomes["fast"] > 200 and outcomes["slow"] > 300 and accepted > 200, (
        outcomes, accepted)
