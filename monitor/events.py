r"""Input events: one strict schema, validated once at the boundary.

An event is one JSON object (a line of a JSONL file or a Kafka record value)::

    {"type": "judge"|"label", "event_id": str, "suite": str, "model": str,
     "example_id": str, "loss": float in [0, 1], "ts": RFC 3339 string or epoch seconds}

with optional ``audit: bool`` (judge events only), ``stratum: str``, ``judge: str`` and
``embedding: list[float]``. :func:`decode_event` turns raw bytes into an :class:`Event`
or a :class:`Rejection` carrying one of the fixed reason codes
(:data:`REJECTION_REASONS`) and a precise, human-readable detail.

A label event is a *label answer* (:mod:`monitor.label_answers`, ``docs/label-loop.md``): it
may name its unit by ``request_id`` instead of (or as well as) its three ids, leave out
``event_id`` (then ``"label:" + request_id``), and be a copy of a label request plus ``loss``
(``"kind": "label"`` and no ``type``; the request's keys are accepted and not kept).

Two validators implement the one schema. The fast path decodes straight into the
:class:`Event` ``msgspec.Struct`` (about 6x pydantic), or for a label answer into
``_AnswerWire``. Anything it refuses goes to the slow path, the pydantic models
``_EventSchema`` (judge events) and ``_AnswerSchema`` / ``_AnswerByIdSchema`` (label events),
which are the reference: they decide every rejection (and its reason and detail) and accept
whatever they accept. Whatever the fast path accepts, the reference accepts with the same
values (the fast path may refuse more, e.g. a duplicate key whose first value is invalid, and
then the reference decides), so :func:`decode_event` accepts exactly the inputs the reference
accepts (tests/test_events_fast_path.py checks this differentially). Both resolve a label
answer's ids with the one function :func:`monitor.label_answers.resolve_answer`.

Examples
--------
>>> ev = decode_event(b'{"type": "judge", "event_id": "e1", "suite": "qa", "model": "m1",'
...                   b' "example_id": "x1", "loss": 0, "ts": "2024-01-01T00:00:00Z"}')
>>> ev.loss, ev.ts
(0.0, 1704067200.0)
>>> r = decode_event(b'{"type": "judge", "event_id": "e1", "suite": "qa", "model": "m1",'
...                  b' "example_id": "x1", "loss": 1.5, "ts": 0}')
>>> r.reason, r.detail
('out_of_range', 'loss: Input should be less than or equal to 1 (got 1.5)')
>>> decode_event(b"\xff\xfe").reason
'undecodable'
>>> decode_event(b'{"kind": "label", "request_id": "lbl1.WyJxYSIsIm0xIiwieDEiXQ",'
...              b' "judge_event_id": "e1", "ts": 5, "loss": 1}').event_id
'label:lbl1.WyJxYSIsIm0xIiwieDEiXQ'
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

import msgspec
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from monitor.dead_letters import dead_letter_record, peek_route
from monitor.label_answers import ANSWER_REJECTIONS, BadAnswer, resolve_answer
from monitor.timestamps import parse_timestamp, ts_before

__all__ = [
    "DEFAULT_MAX_EVENT_BYTES",
    "DEFAULT_MAX_ID_BYTES",
    "REJECTION_REASONS",
    "Event",
    "Rejection",
    "dead_letter_record",
    "decode_event",
    "parse_timestamp",
    "peek_route",
]

DEFAULT_MAX_EVENT_BYTES: Final = 64 * 1024
DEFAULT_MAX_ID_BYTES: Final = 256
REJECTION_REASONS: Final = (
    "undecodable",
    "oversized",
    "invalid_json",
    "missing_field",
    "unknown_field",
    "wrong_type",
    "out_of_range",
    "not_finite",
    "invalid_value",
    "implausible_ts",  # ts too far ahead of the suite's event time (monitor.engine)
    "id_too_long",  # event_id / example_id / suite / model / stratum over events.max_id_bytes
    "too_many_suites",  # would create a suite beyond events.max_suites (monitor.engine)
    "too_many_models",  # would create a model beyond events.max_models[_per_suite]
    *ANSWER_REJECTIONS,  # a label's request_id: unparsable / naming another unit
    "event_id_conflict",  # an event id reused with different content (monitor.state dedupe)
)

# msgspec has no allow_inf_nan: the closed range [-max, max] excludes both infinities and NaN
# (every comparison with NaN is false). msgspec's JSON parser already refuses NaN/Infinity
# tokens and out-of-range numbers; the bounds keep the guarantee local to the type.
_FiniteFloat = Annotated[float, msgspec.Meta(ge=-sys.float_info.max, le=sys.float_info.max)]
_Id = Annotated[str, msgspec.Meta(min_length=1)]


class Event(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """One validated judge or label event (immutable).

    ``ts`` is always epoch seconds after validation (RFC 3339 strings are converted).

    Notes
    -----
    Obtain events from :func:`decode_event`, which guarantees: ``type`` is ``"judge"`` or
    ``"label"``; the four ids are non-empty strings within ``max_id_bytes``; ``loss`` is a
    finite float in [0, 1]; ``ts`` and every ``embedding`` item are finite floats; ``audit``
    is only set on judge events; unknown fields were refused. The constructor itself does not
    validate (``msgspec.Struct``). ``gc=False``: an event holds no reference cycle, so the
    garbage collector need not track it.

    Examples
    --------
    >>> ev = decode_event(b'{"type": "label", "event_id": "e", "suite": "s",'
    ...     b' "model": "m", "example_id": "x", "loss": 1, "ts": 5}')
    >>> ev.type, ev.loss, ev.ts, ev.stratum
    ('label', 1.0, 5.0, None)
    """

    type: Literal["judge", "label"]
    event_id: _Id
    suite: _Id
    model: _Id
    example_id: _Id
    loss: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
    ts: _FiniteFloat
    audit: bool | None = None
    stratum: str | None = None
    judge: str | None = None
    embedding: list[_FiniteFloat] | None = None


class _EventTextTs(Event, frozen=True, forbid_unknown_fields=True, gc=False):
    """An event whose ``ts`` is still text (an RFC 3339 candidate): the fast path's 2nd try."""

    ts: str  # type: ignore[assignment]


_Propensity = Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]


class _AnswerWire(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A label answer (:mod:`monitor.label_answers`): the fast path's 3rd try."""

    loss: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
    ts: _FiniteFloat | str
    type: Literal["label"] | msgspec.UnsetType = msgspec.UNSET  # absent: "kind" says label
    kind: Literal["label"] | None = None
    event_id: _Id | None = None
    suite: _Id | None = None
    model: _Id | None = None
    example_id: _Id | None = None
    request_id: str | None = None
    audit: bool | None = None
    stratum: str | None = None
    judge: str | None = None
    embedding: list[_FiniteFloat] | None = None
    judge_event_id: str | None = None
    propensity: _Propensity | None = None
    reason: str | None = None
    audit_position: Annotated[int, msgspec.Meta(ge=0)] | None = None


_decode_fast = msgspec.json.Decoder(Event).decode
_decode_fast_text_ts = msgspec.json.Decoder(_EventTextTs).decode
_decode_answer = msgspec.json.Decoder(_AnswerWire).decode

_NonEmpty = Annotated[str, Field(min_length=1)]


class _EventSchema(BaseModel):
    """The reference validator (pydantic): the slow path, which explains every rejection."""

    # cache_strings="keys": only the field names are interned; interning every value (the
    # default) costs more than it saves on high-cardinality ids (measured: ~10% of decode).
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, cache_strings="keys")

    type: Literal["judge", "label"]
    event_id: _NonEmpty
    suite: _NonEmpty
    model: _NonEmpty
    example_id: _NonEmpty
    loss: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
    ts: Annotated[float, Field(allow_inf_nan=False), BeforeValidator(ts_before)]
    audit: bool | None = None
    stratum: str | None = None
    judge: str | None = None
    embedding: list[Annotated[float, Field(allow_inf_nan=False)]] | None = None


_validate_json = _EventSchema.__pydantic_validator__.validate_json


class _AnswerSchema(_EventSchema):
    """A label answer naming its unit by ids: the reference for label events."""

    type: Literal["label"] | None = None  # type: ignore[assignment]
    kind: Literal["label"] | None = None
    event_id: _NonEmpty | None = None  # type: ignore[assignment]
    request_id: str | None = None
    judge_event_id: str | None = None
    propensity: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)] | None = None
    reason: str | None = None
    audit_position: Annotated[int, Field(ge=0)] | None = None


class _AnswerByIdSchema(_AnswerSchema):
    """A label answer with a request id: the ids it names may be left out."""

    suite: _NonEmpty | None = None  # type: ignore[assignment]
    model: _NonEmpty | None = None  # type: ignore[assignment]
    example_id: _NonEmpty | None = None  # type: ignore[assignment]


class _Peek(BaseModel):
    """The keys that choose a schema: ``type``, ``kind``, ``request_id`` (others ignored)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    type: Any = None
    kind: Any = None
    request_id: Any = None


_peek_json = _Peek.__pydantic_validator__.validate_json
_validate_answer = _AnswerSchema.__pydantic_validator__.validate_json
_validate_answer_by_id = _AnswerByIdSchema.__pydantic_validator__.validate_json


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why an event was refused: a reason code from :data:`REJECTION_REASONS` and a detail."""

    reason: str
    detail: str


_REASON_OF_TYPE: Final[dict[str, str]] = {
    "missing": "missing_field",
    "extra_forbidden": "unknown_field",
    "model_type": "wrong_type",
    "model_attributes_type": "wrong_type",
    "string_type": "wrong_type",
    "float_type": "wrong_type",
    "float_parsing": "wrong_type",
    "bool_type": "wrong_type",
    "list_type": "wrong_type",
    "int_type": "wrong_type",
    "finite_number": "not_finite",
    "greater_than_equal": "out_of_range",
    "less_than_equal": "out_of_range",
    "greater_than": "out_of_range",
    "less_than": "out_of_range",
    "string_too_short": "invalid_value",
    "literal_error": "invalid_value",
    "value_error": "invalid_value",
}
# Most specific first: a field that fails in several union branches reports its best reason.
_PRIORITY: Final = (
    "unknown_field",
    "missing_field",
    "not_finite",
    "out_of_range",
    "invalid_value",
    "wrong_type",
)
_MAX_DETAIL: Final = 500


def _classify(exc: ValidationError, raw: bytes) -> Rejection:
    errors = exc.errors(include_url=False)
    if any(e["type"] == "json_invalid" for e in errors):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as ude:
            return Rejection("undecodable", f"not valid UTF-8: {ude}")
        return Rejection("invalid_json", str(errors[0]["msg"])[:_MAX_DETAIL])
    by_field: dict[str, list[tuple[str, str]]] = {}
    for e in errors:
        loc = e["loc"]
        field = str(loc[0]) if loc else "<event>"
        path = ".".join(str(p) for p in loc if p not in ("float", "str"))
        reason = _REASON_OF_TYPE.get(e["type"], "invalid_value")
        msg = str(e["msg"]).removeprefix("Value error, ")
        if e["type"] not in ("missing", "extra_forbidden", "model_type", "value_error"):
            msg += f" (got {_short(e.get('input'))})"
        by_field.setdefault(field, []).append((reason, f"{path or '<event>'}: {msg}"))
    chosen: list[tuple[str, str]] = []
    for items in by_field.values():
        items.sort(key=lambda rm: _PRIORITY.index(rm[0]) if rm[0] in _PRIORITY else 99)
        chosen.append(items[0])
    chosen.sort(key=lambda rm: _PRIORITY.index(rm[0]) if rm[0] in _PRIORITY else 99)
    detail = "; ".join(d for _, d in chosen)
    return Rejection(chosen[0][0], detail[:_MAX_DETAIL])


def _short(value: object) -> str:
    simple = isinstance(value, (bool, int, float, str, type(None)))
    text = json.dumps(value) if simple else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def decode_event(
    raw: bytes, max_bytes: int = DEFAULT_MAX_EVENT_BYTES, max_id_bytes: int = DEFAULT_MAX_ID_BYTES
) -> Event | Rejection:
    """Validate raw bytes into an :class:`Event`, or explain why not.

    Parameters
    ----------
    raw : bytes
        One event (a JSON object, UTF-8). A trailing newline is allowed.
    max_bytes : int
        Larger payloads are rejected as ``oversized`` without being parsed.
    max_id_bytes : int
        An ``event_id``, ``example_id``, ``suite``, ``model`` or ``stratum`` longer than this
        (UTF-8 bytes) is rejected as ``id_too_long``.

    Returns
    -------
    Event or Rejection
        The event, or a rejection with a reason code from :data:`REJECTION_REASONS`.

    Notes
    -----
    Validation is strict: no string-to-number coercion, no booleans as numbers, unknown
    fields refused, ``loss`` finite in [0, 1]. When several fields fail, the reason is the
    most specific one and the detail lists every failing field. Duplicate keys inside one
    object follow JSON parser convention (the last one wins). The result does not depend on
    which path decided it: an event the msgspec fast path refuses is re-validated by the
    pydantic schema, which gives every rejection its reason and detail and whose acceptance
    wins; an event the fast path accepts is one the schema accepts, with the same values.

    Examples
    --------
    >>> decode_event(b'{"type": "judge"}').reason
    'missing_field'
    >>> decode_event(b"x" * 10, max_bytes=5).detail
    'event is 10 bytes, the limit is 5'
    >>> decode_event(b'{"type": "judge", "event_id": "e1", "suite": "qa", "model": "m1",'
    ...              b' "example_id": "x1", "loss": 0, "ts": 0}', max_id_bytes=1).detail
    'event_id is 2 bytes, the limit is 1 (events.max_id_bytes)'
    """
    if len(raw) > max_bytes:
        return Rejection("oversized", f"event is {len(raw)} bytes, the limit is {max_bytes}")
    ev: Event | None
    try:
        ev = _decode_fast(raw)
    except msgspec.ValidationError as exc:
        # The first error is at ts: perhaps an RFC 3339 string (any other first error also
        # fails the 2nd try, so skipping it is only a saving on rejected events).
        ev = _fast_text_ts(raw) if str(exc).endswith("`$.ts`") else None
        if ev is None:  # a label answer (request id, copied request, no event id)?
            answer = _fast_answer(raw)
            if answer is None:
                return _slow_path(raw, max_id_bytes)
            ev, derived = answer
            return _post_checks(ev, max_id_bytes if len(raw) > max_id_bytes else None, derived)
    except ValueError:  # msgspec.DecodeError (malformed JSON), UnicodeDecodeError
        ev = None
    if ev is None:
        return _slow_path(raw, max_id_bytes)
    if len(raw) <= max_id_bytes and (ev.audit is None or ev.type == "judge"):
        return ev  # the usual event: what _post_checks(ev, None) returns, without the call
    return _post_checks(ev, max_id_bytes if len(raw) > max_id_bytes else None)


def _fast_text_ts(raw: bytes) -> Event | None:
    try:
        tev = _decode_fast_text_ts(raw)
        ts = parse_timestamp(tev.ts)
    except ValueError:
        return None
    return _event_from(tev, ts)


def _fast_answer(raw: bytes) -> tuple[Event, bool] | None:
    """Return the label answer in ``raw`` and whether its event id was derived, or None."""
    try:
        w = _decode_answer(raw)
        if w.type is msgspec.UNSET and w.kind is None:
            return None
        ts = parse_timestamp(w.ts) if isinstance(w.ts, str) else w.ts
        eid, suite, model, example_id, derived = resolve_answer(
            w.event_id, w.suite, w.model, w.example_id, w.request_id)
    except ValueError:  # msgspec errors, a bad RFC 3339 ts, BadAnswer: the schema decides
        return None
    return Event("label", eid, suite, model, example_id, w.loss, ts, w.audit, w.stratum,
                 w.judge, w.embedding), derived


def _is_answer(raw: bytes) -> tuple[bool, bool]:
    """Return whether ``raw`` is a label answer, and whether it has a string request id.

    A label answer has ``type`` "label", or no ``type`` and ``kind`` "label"; with a string
    ``request_id`` its ids may be left out.
    """
    try:
        p: _Peek = _peek_json(raw)
    except (ValidationError, ValueError, RecursionError):
        return False, False
    label = p.type == "label" or ("type" not in p.model_fields_set and p.kind == "label")
    return label, isinstance(p.request_id, str)


def _slow_path(raw: bytes, max_id_bytes: int) -> Event | Rejection:
    """Validate with the reference schema: the exact rejection, or the event it accepts.

    Label events are validated as label answers (:class:`_AnswerSchema`, or
    :class:`_AnswerByIdSchema` with a request id), then resolved by
    :func:`monitor.label_answers.resolve_answer`; everything else by :class:`_EventSchema`.
    """
    label, by_id = _is_answer(raw)
    if not label:
        try:
            s: _EventSchema = _validate_json(raw)
        except ValidationError as exc:
            return _classify(exc, raw)
        return _post_checks(_event_from(s, s.ts), max_id_bytes)
    try:
        a: _AnswerSchema = (_validate_answer_by_id if by_id else _validate_answer)(raw)
    except ValidationError as exc:
        return _classify(exc, raw)
    try:
        eid, suite, model, example_id, derived = resolve_answer(
            a.event_id, a.suite, a.model, a.example_id, a.request_id)
    except BadAnswer as bad:
        return Rejection(bad.reason, bad.detail)
    return _post_checks(Event("label", eid, suite, model, example_id, a.loss, a.ts, a.audit,
                              a.stratum, a.judge, a.embedding), max_id_bytes, derived)


def _event_from(src: _EventTextTs | _EventSchema, ts: float) -> Event:
    """Return the :class:`Event` with ``src``'s fields and epoch-seconds ``ts``."""
    return Event(src.type, src.event_id, src.suite, src.model, src.example_id, src.loss, ts,
                 src.audit, src.stratum, src.judge, src.embedding)


def _post_checks(ev: Event, max_id_bytes: int | None, derived: bool = False) -> Event | Rejection:
    """Apply the rules across fields: audit only on judge events; id lengths in UTF-8 bytes.

    ``max_id_bytes=None`` skips the id check: a decoded string takes at most as many UTF-8
    bytes as its JSON text (an escape of 2, 6 or 12 bytes decodes to 1, 1-3 or 4 bytes; other
    bytes are copied; ids decoded from a request id are shorter than it), so no id can exceed
    a limit that the whole event does not. A ``derived`` event id (``"label:" + request id``)
    is not checked: it is bounded by the three ids it encodes.
    """
    if ev.audit is not None and ev.type == "label":
        return Rejection("invalid_value", "audit: only judge events may carry an audit flag")
    if max_id_bytes is None:
        return ev
    for name, value in (("event_id", "" if derived else ev.event_id),
                        ("example_id", ev.example_id), ("suite", ev.suite), ("model", ev.model),
                        ("stratum", ev.stratum or "")):
        # UTF-8 takes 1 to 4 bytes per character: encode only when the length is ambiguous
        if len(value) > max_id_bytes or (
                4 * len(value) > max_id_bytes and _utf8_len(value) > max_id_bytes):
            return Rejection("id_too_long", f"{name} is {_utf8_len(value)} bytes, the limit "
                             f"is {max_id_bytes} (events.max_id_bytes)")
    return ev
