from __future__ import annotations

import base64
import json

import pytest

from monitor.events import (
    REJECTION_REASONS,
    Event,
    Rejection,
    dead_letter_record,
    decode_event,
    parse_timestamp,
    peek_route,
)

BASE = {
    "type": "judge",
    "event_id": "e1",
    "suite": "qa",
    "model": "m1",
    "example_id": "x1",
    "loss": 0.25,
    "ts": 1_700_000_000,
}


def enc(obj: object) -> bytes:
    return json.dumps(obj).encode()


def with_(**kw: object) -> bytes:
    d = dict(BASE)
    for k, v in kw.items():
        if v is ...:
            d.pop(k)
        else:
            d[k] = v
    return enc(d)


def test_valid_minimal_and_optional_fields() -> None:
    ev = decode_event(with_(audit=True, stratum="math", judge="gpt", embedding=[0.1, 2]))
    assert isinstance(ev, Event)
    assert ev.loss == 0.25 and ev.ts == 1_700_000_000.0 and ev.audit is True
    assert ev.embedding == [0.1, 2.0]
    assert isinstance(decode_event(with_(loss=0)), Event)
    assert isinstance(decode_event(with_(loss=1)), Event)
    assert isinstance(decode_event(with_(type="label")), Event)


def test_timestamps() -> None:
    ev = decode_event(with_(ts="2024-01-01T00:00:00Z"))
    assert isinstance(ev, Event) and ev.ts == 1704067200.0
    ev = decode_event(with_(ts="2024-01-01T01:00:00.5+01:00"))
    assert isinstance(ev, Event) and ev.ts == 1704067200.5
    ev = decode_event(with_(ts=1.5))
    assert isinstance(ev, Event) and ev.ts == 1.5
    assert parse_timestamp("2024-01-01 00:00:00z") == 1704067200.0


@pytest.mark.parametrize(
    ("raw", "reason", "needle"),
    [
        (b"\xff\xfe{}", "undecodable", "UTF-8"),
        (b'{"type": "judge", "example_id": "\xc3"}', "undecodable", "UTF-8"),
        (b"{not json", "invalid_json", "Invalid JSON"),
        (b"", "invalid_json", ""),
        (b'{"a": 1', "invalid_json", ""),
        (with_(loss=...), "missing_field", "loss: Field required"),
        (with_(ts=...), "missing_field", "ts"),
        (with_(extra=1), "unknown_field", "extra"),
        (with_(loss="0.5"), "wrong_type", "loss"),
        (with_(loss=True), "wrong_type", "loss"),
        (with_(loss=None), "wrong_type", "loss"),
        (with_(event_id=5), "wrong_type", "event_id"),
        (with_(audit="yes"), "wrong_type", "audit"),
        (with_(ts=True), "wrong_type", "ts"),
        (with_(embedding=[1, "a"]), "wrong_type", "embedding.1"),
        (b"[1, 2]", "wrong_type", "object"),
        (b'"text"', "wrong_type", "object"),
        (with_(loss=1.0000001), "out_of_range", "less than or equal to 1"),
        (with_(loss=-0.1), "out_of_range", "greater than or equal to 0"),
        (with_(loss=1e400), "not_finite", "finite"),
        (with_(loss=1e400).replace(b"Infinity", b"NaN"), "not_finite", "finite"),
        (with_(ts=1e400).replace(b"Infinity", b"-Infinity"), "not_finite", "ts"),
        (with_(type="judgment"), "invalid_value", "'judge' or 'label'"),
        (with_(event_id=""), "invalid_value", "event_id"),
        (with_(ts="2024-01-01"), "invalid_value", "RFC 3339"),
        (with_(ts="2024-13-01T00:00:00Z"), "invalid_value", "not a valid time"),
        (with_(ts="yesterday"), "invalid_value", "RFC 3339"),
        (with_(type="label", audit=True), "invalid_value", "only judge events"),
    ],
)
def test_rejections(raw: bytes, reason: str, needle: str) -> None:
    r = decode_event(raw)
    assert isinstance(r, Rejection), r
    assert r.reason == reason, r
    assert r.reason in REJECTION_REASONS
    assert needle in r.detail
    assert "\n" not in r.detail and len(r.detail) <= 500


def test_oversized_not_parsed() -> None:
    raw = with_(judge="x" * 70_000)
    r = decode_event(raw)
    assert isinstance(r, Rejection) and r.reason == "oversized"
    assert str(len(raw)) in r.detail and "65536" in r.detail
    assert isinstance(decode_event(raw, max_bytes=100_000), Event)
    assert decode_event(b"{" * 10, max_bytes=5) == Rejection(
        "oversized", "event is 10 bytes, the limit is 5"
    )


def test_multiple_errors_most_specific_reason_lists_all() -> None:
    r = decode_event(with_(loss=float("inf"), event_id=..., extra=2).replace(b"Infinity", b"NaN"))
    assert isinstance(r, Rejection)
    assert r.reason == "unknown_field"
    assert "extra" in r.detail and "event_id" in r.detail and "loss" in r.detail


def test_trailing_newline_is_fine() -> None:
    assert isinstance(decode_event(with_() + b"\n"), Event)


def test_dead_letter_and_peek() -> None:
    raw = with_(loss=2)
    r = decode_event(raw)
    assert isinstance(r, Rejection)
    dl = dead_letter_record(r, raw, {"kind": "file", "line": 7})
    assert dl["reason"] == "out_of_range" and dl["source"] == {"kind": "file", "line": 7}
    assert base64.b64decode(dl["raw"]) == raw
    json.dumps(dl)
    assert peek_route(raw) == ("qa", "m1")
    assert peek_route(b"[]") is None
    assert peek_route(b'{"suite": 1, "model": "m"}') is None
