"""Differential test: decode_event (msgspec fast path + pydantic slow path) against the
pydantic-only reference (the slow path alone; for judge events, the decoder as it was before
the fast path).

Every input must give the same result: the same Rejection (reason and detail), or an Event
whose field values equal the reference's (same types, floats compared bit for bit).
"""

from __future__ import annotations

import json
import math
import random
import struct
from typing import Any

import pytest

from monitor import events
from monitor.events import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_ID_BYTES, Event, Rejection

FIELDS = ("type", "event_id", "suite", "model", "example_id", "loss", "ts", "audit", "stratum",
          "judge", "embedding")
IDS = ("event_id", "suite", "model", "example_id")


def reference(raw: bytes, max_bytes: int = DEFAULT_MAX_EVENT_BYTES,
              max_id_bytes: int = DEFAULT_MAX_ID_BYTES) -> Any:
    """The pydantic-only decoder: the size limit, then the slow path alone.

    The slow path validates judge events with ``_EventSchema`` and label events as label
    answers (``_AnswerSchema`` / ``_AnswerByIdSchema``, then ``resolve_answer``); for judge
    events it is the decoder as it was before the fast path.
    """
    if len(raw) > max_bytes:
        return Rejection("oversized", f"event is {len(raw)} bytes, the limit is {max_bytes}")
    return events._slow_path(raw, max_id_bytes)


def _same_value(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def check(raw: bytes, max_bytes: int = DEFAULT_MAX_EVENT_BYTES,
          max_id_bytes: int = DEFAULT_MAX_ID_BYTES) -> str:
    """Assert both decoders agree; return 'fast' if the fast path alone accepted it."""
    got = events.decode_event(raw, max_bytes, max_id_bytes)
    ref = reference(raw, max_bytes, max_id_bytes)
    if isinstance(ref, Rejection):
        assert got == ref, (raw, got, ref)
    else:
        assert isinstance(got, Event), (raw, got, ref)
        for f in FIELDS:
            assert _same_value(getattr(got, f), getattr(ref, f)), (raw, f, got, ref)
    # The core property, checked directly: whatever the fast path alone accepts, the
    # reference accepts too, with the same values.
    try:
        fast: Event | None = events._decode_fast(raw)
    except ValueError:
        fast = events._fast_text_ts(raw)
        if fast is None:
            answer = events._fast_answer(raw)
            fast = None if answer is None else answer[0]
    if fast is None or len(raw) > max_bytes:
        return "slow"
    ref_plain = reference(raw, max_bytes=len(raw), max_id_bytes=len(raw))
    assert not isinstance(ref_plain, Rejection) or ref_plain.detail.startswith("audit:"), (
        raw, fast, ref_plain)
    if not isinstance(ref_plain, Rejection):
        for f in FIELDS:
            assert _same_value(getattr(fast, f), getattr(ref_plain, f)), (raw, f, fast)
    return "fast"


BASE = (b'{"type":"judge","event_id":"e1","suite":"qa","model":"m1","example_id":"x1",'
        b'"loss":0.25,"ts":1700000000')


def ev(tail: bytes = b"") -> bytes:
    return BASE + tail + b"}"


def sub(field: str, value: bytes) -> bytes:
    """The base event with one field's raw JSON value replaced (or removed if value is b'')."""
    obj: dict[str, bytes] = {"type": b'"judge"', "event_id": b'"e1"', "suite": b'"qa"',
                             "model": b'"m1"', "example_id": b'"x1"', "loss": b"0.25",
                             "ts": b"1700000000"}
    if value:
        obj[field] = value
    else:
        obj.pop(field, None)
    return b"{" + b",".join(b'"' + k.encode() + b'":' + v for k, v in obj.items()) + b"}"


ODD_NUMBERS = [
    b"0", b"-0", b"0.0", b"-0.0", b"1", b"1.0", b"-1", b"0.5", b"1e0", b"1E0", b"1e+0", b"1e-0",
    b"-0e5", b"-0.0e-5", b"1e-400", b"-1e-400", b"1e400", b"-1e400", b"1e308",
    b"1.7976931348623157e308",
    b"1.7976931348623158e308", b"1.7976931348623159e308", b"-1.7976931348623157e308",
    b"179769313486231570814527423731704356798070567525844996598917476803157260780028538760589"
    b"558632766878171540458953514382464234321326889464182768467546703537516986049910576551282"
    b"076245490090389328944075868508455133942304583236903222948165808559332123348274797826204"
    b"144723168738177180919299881250404026184124858368",
    b"179769313486231580793728971405303415079934132710037826936173778980444968292764750946649"
    b"017977587207096330286416692887910946555547851940402630657488671505820681908902000708383"
    b"676273854845817711531764475730270069855571366959622842914819860834936475292719074168444"
    b"365510704342711559699508093042880177904174497791",
    b"1" + b"0" * 400, b"-1" + b"0" * 400, b"1" + b"0" * 30, b"9007199254740993",
    b"18446744073709551615", b"18446744073709551616", b"-9223372036854775808",
    b"-9223372036854775809", b"5e-324", b"2.4703282292062328e-324", b"2.4703282292062327e-324",
    b"2.2250738585072011e-308", b"0.1000000000000000055511151231257827",
    b"0." + b"0" * 500 + b"1", b"0." + b"9" * 600, b"1" + b"0" * 25 + b".5e-30",
    b"0.30000000000000004", b"0.9999999999999999", b"0.99999999999999999", b"1.0000000000000001",
    b"1e99999999999999999999", b"1e-99999999999999999999", b"0e99999999999999999999",
    b"NaN", b"-NaN", b"Infinity", b"-Infinity", b"inf", b"nan", b"1.", b".5", b"01", b"+1",
    b"-", b"1e", b"1e+", b"0x10", b"1_000", b"true", b"false", b"null", b'"0.5"', b'""',
    b"[]", b"{}", b"[0.5]", b'{"a":1}',
]
ODD_STRINGS = [
    b'""', b'" "', b'"a"', b'"\\u0000"', b'"\\ud800"', b'"\\udc00"', b'"\\ud800\\udc00"',
    b'"\\uD83D\\uDE00"', b'"\\ud83d"', b'"\\ud83dx"', b'"\\udc00\\ud800"', b'"\\ud800\\u0041"',
    b'"\xed\xa0\x80"', b'"\xc3"', b'"\xc0\x80"', b'"\xf4\x90\x80\x80"', b'"\xff"', b'"\xe2\x82"',
    b'"\xf0\x9f\x98\x80"', b'"a\x01b"', b'"a\x1fb"', b'"a\x7fb"', b'"\\x41"', b'"\\/"',
    b'"\\u00e9"',
    b'"\\uzzzz"', b'"\\u12"', b'"\xc3\xa9"', b'"a\\nb"', b'"\\""', b'"\\\\"', b"'single'", b'"open',
    b'"judge"', b'"label"', b'"Judge"', b'"jud\\u0067e"', b'"label "', b'"\xe2\x80\x8b"',
    b'"2024-01-01T00:00:00Z"', b'"2024-01-01T00:00:00z"', b'"2024-01-01 00:00:00+02:00"',
    b'"2024-01-01T00:00:00.123456789Z"', b'"2024-01-01T00:00:00Z\\n"', b'"2024-01-01"',
    b'"2024-02-30T00:00:00Z"', b'"2024-01-01T24:00:00Z"', b'"9999-12-31T23:59:59+00:00"',
    b'"0001-01-01T00:00:00Z"', b'"0001-01-01T00:00:00+01:00"', b'"2024-01-01T00:00:00+24:00"',
    b'"\xd9\xa2\xd9\xa0\xd9\xa2\xd9\xa4-01-01T00:00:00Z"', b'"2024-01-01T00:00:60Z"',
]

HAND_WRITTEN: list[bytes] = [
    ev(), ev(b"\n"), ev(b"") + b"\n", ev() + b"\r\n", ev() + b" \t\r\n ", ev() + b"\x0c",
    ev() + b"\x0b", ev() + b"\x00", ev() + b"\xc2\xa0", b"\xef\xbb\xbf" + ev(), b" \n" + ev(),
    ev() + b"}", ev() + b",", ev() + b"x", ev() + ev(), b"", b" ", b"\n", b"null", b"true", b"1",
    b'"s"', b"[]", b"[{}]", b"{}", b"{", b"}", b'{"type"}', b'{"type":}', b"\xff\xfe{}",
    b"\x00", b'{"a":1', BASE, BASE + b",}", ev(b',"audit":true'), ev(b',"audit":false'),
    ev(b',"audit":null'), ev(b',"audit":1'), ev(b',"audit":"true"'),
    ev(b',"type":"label","audit":true'), ev(b',"type":"label","audit":false'),
    ev(b',"type":"label","audit":null'), ev(b',"audit":true,"type":"label"'),
    ev(b',"stratum":""'), ev(b',"stratum":null'), ev(b',"stratum":"math"'), ev(b',"stratum":1'),
    ev(b',"judge":""'), ev(b',"judge":null'), ev(b',"judge":"gpt"'), ev(b',"judge":["a"]'),
    ev(b',"embedding":[]'), ev(b',"embedding":null'), ev(b',"embedding":[0.1,2,-0,-0.0,1e308]'),
    ev(b',"embedding":[1e400]'), ev(b',"embedding":[NaN]'), ev(b',"embedding":[-Infinity]'),
    ev(b',"embedding":[1,"a"]'), ev(b',"embedding":[true]'), ev(b',"embedding":[[1]]'),
    ev(b',"embedding":{"0":1}'), ev(b',"embedding":[1' + b"0" * 400 + b"]"),
    ev(b',"embedding":[' + b",".join([b"0.5"] * 300) + b"]"),
    ev(b',"extra":1'), ev(b',"extra":[[[[{}]]]]'), ev(b',"extra":[[[[['), ev(b',"":1'),
    ev(b',"extra":{"type":"judge"}'), ev(b',"Loss":0.5'), ev(b',"loss ":0.5'),
    ev(b',"extra":1,"extra":2'), ev(b',"zz":"\\ud800"'), ev(b',"zz":"\xff"'),
    # duplicate keys: the last one wins in both; a bad first value must not reject
    ev(b',"loss":0.75'), ev(b',"loss":"x"'), ev(b',"loss":2'), ev(b',"ts":"2024-01-01T00:00:00Z"'),
    ev(b',"ts":true'), ev(b',"type":"label"'), ev(b',"type":"x"'), ev(b',"event_id":""'),
    ev(b',"event_id":"e2"'), ev(b',"embedding":[1],"embedding":null'),
    ev(b',"embedding":[1e400],"embedding":[1]'), ev(b',"audit":"x","audit":true'),
    ev(b',"stratum":"\\ud800","stratum":"a"'),
    b'{"type":"x","type":"judge","event_id":"e1","suite":"qa","model":"m1","example_id":"x1",'
    b'"loss":"bad","loss":0.5,"ts":null,"ts":1}',
    b'{"type":"judge","type":"judge","suite":"qa","model":"m1","example_id":"x1",'
    b'"loss":0.5,"ts":1}',
    # escaped keys and values
    b'{"t\\u0079pe":"judge","event_id":"e1","suite":"qa","model":"m1","example_id":"x1",'
    b'"lo\\u0073s":0.5,"\\u0074s":1}',
    b'{"type":"jud\\u0067e","event_id":"\\u00e9","suite":"\\ud83d\\ude00","model":"\\n",'
    b'"example_id":"\\"","loss":0.5,"ts":1}',
    # whitespace everywhere
    b' { "type" : "judge" , "event_id" : "e1" , "suite" : "qa" , "model" : "m1" ,\n'
    b'\t"example_id" : "x1" , "loss" : 0.5 , "ts" : 1 } ',
    b'{"type":"judge",\x0c"event_id":"e1","suite":"qa","model":"m1","example_id":"x1",'
    b'"loss":0.5,"ts":1}',
    b'{"type":"judge",\xc2\xa0"event_id":"e1","suite":"qa","model":"m1","example_id":"x1",'
    b'"loss":0.5,"ts":1}',
]
HAND_WRITTEN += [sub(f, b"") for f in ("type", "event_id", "suite", "model", "example_id",
                                         "loss", "ts")]
HAND_WRITTEN += [sub(f, v) for f in ("loss", "ts") for v in ODD_NUMBERS]
HAND_WRITTEN += [sub(f, v) for f in FIELDS[:7] for v in ODD_STRINGS]
HAND_WRITTEN += [ev(b',"embedding":[' + v + b"]") for v in ODD_NUMBERS]
HAND_WRITTEN += [ev(b',"stratum":' + v) for v in ODD_STRINGS]


@pytest.mark.parametrize("raw", HAND_WRITTEN, ids=range(len(HAND_WRITTEN)))
def test_hand_written_corpus_agrees(raw: bytes) -> None:
    check(raw)


def test_id_limits_agree() -> None:
    ids = ["e", "e" * 256, "e" * 257, "\U0001f600" * 64, "\U0001f600" * 65, "\u00e9" * 129,
           "\u00e9" * 128, "\u20ac" * 86, "\u20ac" * 85]
    n = 0
    for name in (*IDS, "stratum"):
        for value in ids:
            d = {"type": "judge", "event_id": "e1", "suite": "qa", "model": "m1",
                 "example_id": "x1", "loss": 0.5, "ts": 1, name: value}
            for ascii_only in (True, False):
                raw = json.dumps(d, ensure_ascii=ascii_only).encode()
                for limit in (1, 2, 3, 4, 64, 255, 256, 257, len(raw) - 1, len(raw), len(raw) + 1):
                    check(raw, max_id_bytes=limit)
                    n += 1
    assert n > 900


def test_max_bytes_agrees() -> None:
    for limit in (0, 1, len(ev()) - 1, len(ev()), len(ev()) + 1):
        check(ev(), max_bytes=limit)
        check(b"\xff" * 40, max_bytes=limit)


# ---------------------------------------------------------------- seeded random mutations

_ALPHABET = ["a", "Z", "0", "-", "_", " ", "\u00e9", "\u20ac", "\U0001f600", "\n", '"', "\\",
             "\x00", "\x1f", "\x7f", "/", "\u2028", "\U0010ffff"]


def _rand_str(rng: random.Random, nonempty: bool = True) -> str:
    n = rng.choice([0, 1, 1, 2, 5, 20, 70, 130, 260]) if not nonempty else rng.choice(
        [1, 1, 2, 5, 20, 70, 130, 260])
    if rng.random() < 0.5:
        return "".join(rng.choice("abcxyz0123456789-_") for _ in range(n))
    text = "".join(rng.choice(_ALPHABET) for _ in range(n))
    if rng.random() < 0.1:  # a lone surrogate: an escape or (surrogatepass) invalid UTF-8
        i = rng.randrange(len(text) + 1)
        text = text[:i] + rng.choice(["\ud800", "\udfff", "\ud83d"]) + text[i:]
    return text


def _rand_float(rng: random.Random) -> bytes:
    r = rng.random()
    if r < 0.2:
        return repr(rng.random()).encode()
    if r < 0.3:
        return str(rng.choice([0, 1])).encode()
    if r < 0.45:
        return rng.choice(ODD_NUMBERS)
    if r < 0.6:  # long mantissas: rounding must match bit for bit
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(15, 40)))
        return f"0.{digits}".encode()
    if r < 0.7:
        return f"{rng.randint(0, 9)}.{rng.randint(0, 10**20)}e{rng.randint(-330, 310)}".encode()
    if r < 0.8:
        return str(rng.randint(-(10**rng.randint(1, 330)), 10**rng.randint(1, 330))).encode()
    if r < 0.9:
        x = struct.unpack("<d", rng.randbytes(8))[0]
        return repr(x).encode() if math.isfinite(x) else b"1e999"
    return repr(1.0 - rng.random() * 1e-15).encode()


def _rand_ts(rng: random.Random) -> bytes:
    r = rng.random()
    if r < 0.4:
        return str(1_700_000_000 + rng.randint(0, 10**6)).encode()
    if r < 0.6:
        return repr(1_700_000_000 + rng.random() * 1e6).encode()
    if r < 0.8:
        y, mo, d = rng.randint(1, 9999), rng.randint(0, 13), rng.randint(0, 32)
        frac = rng.choice(["", ".5", ".123456", ".1234567890"])
        off = rng.choice(["Z", "z", "+00:00", "-05:30", "+14:00", "+25:00", ""])
        sep = rng.choice("Tt ")
        return json.dumps(f"{y:04d}-{mo:02d}-{d:02d}{sep}12:34:56{frac}{off}").encode()
    return _rand_float(rng)


def _rand_value(rng: random.Random) -> bytes:
    return rng.choice([
        b"null", b"true", b"false", b"0", b"1", b"-1.5", b'"s"', b'""', b"[]", b"{}",
        b"[1,2]", b'{"a":[1,{"b":null}]}', b"[[[[[[[[]]]]]]]]", _rand_float(rng),
        json.dumps(_rand_str(rng)).encode(),
    ])


def _enc_str(rng: random.Random, s: str) -> bytes:
    """JSON-encode a (possibly surrogate-bearing) string several ways."""
    if rng.random() < 0.5:
        return json.dumps(s, ensure_ascii=True).encode()
    return json.dumps(s, ensure_ascii=False).encode("utf-8", "surrogatepass")


def _random_event(rng: random.Random) -> list[tuple[bytes, bytes]]:
    items: list[tuple[bytes, bytes]] = [
        (b"type", rng.choice([b'"judge"', b'"judge"', b'"label"'])),
        *((f.encode(), _enc_str(rng, _rand_str(rng) if rng.random() < 0.3 else f"{f[0]}{i}"))
          for i, f in enumerate(IDS)),
        (b"loss", rng.choice([b"0", b"1", b"-0.0", b"1.0", repr(rng.random()).encode(),
                              b"0." + str(rng.randint(0, 10**30)).encode(), _rand_float(rng)])),
        (b"ts", _rand_ts(rng)),
    ]
    if rng.random() < 0.3:
        items.append((b"audit", rng.choice([b"true", b"false", b"null"])))
    if rng.random() < 0.3:
        items.append((b"stratum", _enc_str(rng, _rand_str(rng, nonempty=False))))
    if rng.random() < 0.2:
        items.append((b"judge", _enc_str(rng, _rand_str(rng, nonempty=False))))
    if rng.random() < 0.2:
        n = rng.choice([0, 1, 3, 8])
        items.append((b"embedding", b"[" + b",".join(_rand_float(rng) for _ in range(n)) + b"]"))
    rng.shuffle(items)
    return items


def _mutate(rng: random.Random, items: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    items = list(items)
    op = rng.randrange(6)
    i = rng.randrange(len(items))
    if op == 0:
        del items[i]
    elif op == 1:  # type swap
        items[i] = (items[i][0], _rand_value(rng))
    elif op == 2:  # duplicate key, valid or not, before or after
        dup = (items[i][0], rng.choice([items[i][1], _rand_value(rng)]))
        items.insert(rng.choice([i, i + 1, len(items)]), dup)
    elif op == 3:  # unknown field
        key = rng.choice([b"extra", b"Loss", b"", b"ts ", b"\\u0074s"])
        items.insert(i, (key, _rand_value(rng)))
    elif op == 4:  # odd number
        items[i] = (items[i][0], rng.choice(ODD_NUMBERS))
    else:  # odd string
        items[i] = (items[i][0], rng.choice(ODD_STRINGS))
    return items


def _serialize(rng: random.Random, items: list[tuple[bytes, bytes]]) -> bytes:
    ws = rng.choice([b"", b"", b" ", b"\n", b"\t"])
    body = (b"," + ws).join(b'"' + k + b'":' + ws + v for k, v in items)
    raw = b"{" + ws + body + ws + b"}"
    r = rng.random()
    if r < 0.2:
        raw += rng.choice([b"\n", b"\r\n", b" ", b"\x0c", b"\x00", b"x", b"}"])
    return raw


def _byte_damage(rng: random.Random, raw: bytes) -> bytes:
    b = bytearray(raw)
    op = rng.randrange(4)
    if op == 0 and b:  # flip a byte
        b[rng.randrange(len(b))] = rng.randrange(256)
    elif op == 1:  # truncate
        del b[rng.randrange(len(b) + 1):]
    elif op == 2 and b:  # flip a bit
        b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    else:  # insert a byte
        b.insert(rng.randrange(len(b) + 1), rng.choice(b' \x00\xff"\\,:{}[]0e.-'))
    return bytes(b)


def random_corpus(seed: int, n: int) -> list[tuple[bytes, int]]:
    rng = random.Random(seed)
    out: list[tuple[bytes, int]] = []
    for _ in range(n):
        items = _random_event(rng)
        for _ in range(rng.choice([0, 0, 1, 1, 2, 3])):
            items = _mutate(rng, items)
        raw = _serialize(rng, items)
        if rng.random() < 0.15:
            raw = _byte_damage(rng, raw)
        limit = rng.choice([DEFAULT_MAX_ID_BYTES] * 6 + [1, 4, 16, 64, max(1, len(raw) - 60)])
        out.append((raw, limit))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_random_mutations_agree(seed: int) -> None:
    outcomes = {"fast": 0, "slow": 0}
    for raw, limit in random_corpus(seed, 1500):
        outcomes[check(raw, max_id_bytes=limit)] += 1
    # the corpus exercises both paths (else the property above is checked on nothing)
    assert outcomes["fast"] > 300 and outcomes["slow"] > 300, outcomes


def test_fast_path_takes_valid_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """Valid events never need the slow path (numeric or RFC 3339 ts, optional fields)."""
    raws = (ev(), ev(b"\n"), sub("ts", b'"2024-01-01T00:00:00Z"'), sub("ts", b"-0.0"),
            ev(b',"stratum":"s","audit":true,"judge":"j"'), ev(b',"embedding":[0.5,1]'),
            ev(b',"type":"label","audit":null'), ev(b',"loss":0.5'))
    for raw in raws:
        assert check(raw) == "fast"
    expected = [events.decode_event(raw) for raw in raws]

    def no_slow_path(raw: bytes, max_id_bytes: int) -> Event | Rejection:
        raise AssertionError(f"slow path taken for {raw!r}")

    monkeypatch.setattr(events, "_slow_path", no_slow_path)
    assert [events.decode_event(raw) for raw in raws] == expected
    with pytest.raises(AssertionError, match="slow path taken"):
        events.decode_event(sub("loss", b"2"))


def test_decoded_utf8_never_longer_than_json_text() -> None:
    """The claim behind skipping the id check when len(raw) <= max_id_bytes."""
    rng = random.Random(7)
    texts = ["", "\x00", "\u00e9", "\u20ac", "\U0001f600", "\U0010ffff", '"', "\\", "\n", "\u2028"]
    texts += [_rand_str(rng) for _ in range(2000)]
    for text in texts:
        if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
            continue  # lone surrogates: refused by both decoders
        decoded = len(text.encode("utf-8"))
        for ascii_only in (True, False):
            assert decoded <= len(json.dumps(text, ensure_ascii=ascii_only).encode()) - 2
    # the worst cases per JSON form: raw UTF-8 copies 1:1, a 12-byte surrogate-pair escape
    # decodes to 4 bytes, a 6-byte \uXXXX escape to at most 3, a 2-byte escape to 1
    for form, text in ((b'"\\ud83d\\ude00"', "\U0001f600"), (b'"\\uffff"', "\uffff"),
                       (b'"\\n"', "\n"), (b'"\xf0\x9f\x98\x80"', "\U0001f600")):
        assert json.loads(form) == text and len(text.encode()) <= len(form) - 2
