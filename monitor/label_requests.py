"""Label requests: what certmon asks a labelling tool for, under a stable request id.

A label request names one audited unit (``suite``, ``model``, ``example_id``) and carries what a
labelling tool needs to answer it and what an analyst needs to trust the answer::

    {"kind": "label", "request_id": "lbl1.WyJxYSIsIm0xIiwieDEiXQ", "suite": "qa", "model": "m1",
     "example_id": "x1", "judge_event_id": "e1", "ts": 1700000000.0, "stratum": "math",
     "propensity": 0.1, "reason": "uniform", "audit_position": 17}

The request id is a pure function of the unit: ``"lbl1."`` followed by the unpadded base64url
encoding of the compact JSON array ``[suite, model, example_id]`` (UTF-8). It is stable across
replays, restarts and instances, it can be parsed back into the unit
(:func:`parse_label_request_id`), and a label may answer by the id alone. The protocol
(answers, duplicates, conflicts, late and missing labels) is described in
``docs/label-loop.md``.

Examples
--------
>>> rid = label_request_id("qa", "m1", "x1")
>>> rid
'lbl1.WyJxYSIsIm0xIiwieDEiXQ'
>>> parse_label_request_id(rid)
('qa', 'm1', 'x1')
>>> label_request("qa", "m1", "x1", "e1", 3.0)["request_id"] == rid
True
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Final

import msgspec

__all__ = ["REQUEST_ID_PREFIX", "label_request", "label_request_id", "parse_label_request_id"]

REQUEST_ID_PREFIX: Final = "lbl1."


# json.dumps([...], separators=(",", ":"), ensure_ascii=False), without building an encoder
# per call (json.dumps does for non-default arguments: most of the cost of an id)
_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_decode_ids = msgspec.json.Decoder(list[str]).decode


def _canonical(suite: str, model: str, example_id: str) -> bytes:
    return _encode([suite, model, example_id]).encode()


def label_request_id(suite: str, model: str, example_id: str) -> str:
    """Return the request id of the unit ``(suite, model, example_id)``.

    Parameters
    ----------
    suite, model, example_id : str
        The unit's identifiers, as in its judge event.

    Returns
    -------
    str
        ``"lbl1." + base64url(json.dumps([suite, model, example_id]))`` without padding
        (compact separators, UTF-8, ``ensure_ascii=False``).

    Notes
    -----
    Deterministic and injective: two units have the same id exactly when their three
    identifiers are equal, so a replay or another instance names the same unit by the same id.
    The id only uses the characters ``A-Z a-z 0-9 - _ .``.

    Examples
    --------
    >>> label_request_id("qa", "m1", "x1")
    'lbl1.WyJxYSIsIm0xIiwieDEiXQ'
    >>> label_request_id("q", "m", "é")
    'lbl1.WyJxIiwibSIsIsOpIl0'
    """
    raw = base64.urlsafe_b64encode(_canonical(suite, model, example_id)).rstrip(b"=")
    return REQUEST_ID_PREFIX + raw.decode("ascii")


def parse_label_request_id(rid: str) -> tuple[str, str, str] | None:
    """Return the unit ``(suite, model, example_id)`` a request id names, or None.

    Only the canonical form is accepted: the id must be exactly what :func:`label_request_id`
    returns for the three identifiers it decodes to (non-empty strings), so one unit has one
    id and ``"label:" + request_id`` is one event id per unit.

    Examples
    --------
    >>> parse_label_request_id("lbl1.WyJxYSIsIm0xIiwieDEiXQ")
    ('qa', 'm1', 'x1')
    >>> parse_label_request_id("lbl1.WyJxYSIsIm0xIiwieDEiXQ==") is None  # padded: not canonical
    True
    >>> parse_label_request_id("e1") is None
    True
    """
    if not rid.startswith(REQUEST_ID_PREFIX):
        return None
    body = rid[len(REQUEST_ID_PREFIX):]
    try:
        raw = body.encode("ascii")
        data = base64.urlsafe_b64decode(raw + b"=" * (-len(raw) % 4))
        ids = _decode_ids(data)
    except (binascii.Error, ValueError, UnicodeError):  # msgspec errors are ValueErrors
        return None
    # canonical: the same base64 text (no padding, no stray characters) of the same JSON text
    if (len(ids) != 3 or not all(ids) or _canonical(*ids) != data
            or base64.urlsafe_b64encode(data).rstrip(b"=") != raw):
        return None
    return ids[0], ids[1], ids[2]


def label_request(
    suite: str,
    model: str,
    example_id: str,
    event_id: str,
    ts: float,
    stratum: str | None = None,
    *,
    propensity: float | None = None,
    reason: str | None = None,
    position: int | None = None,
) -> dict[str, Any]:
    """Build the label request of one audited unit.

    Parameters
    ----------
    suite, model, example_id : str
        The unit.
    event_id : str
        The id of the unit's judge event (emitted as ``judge_event_id``).
    ts : float
        The judge event's time (epoch seconds).
    stratum : str, optional
        The unit's stratum, when it has one.
    propensity : float, optional
        The probability with which the unit was chosen for audit.
    reason : str, optional
        Why it was chosen (``"uniform"``, ``"top_up"`` or ``"active"``).
    position : int, optional
        Its audit position (the place of its round in the model's audit order).

    Returns
    -------
    dict
        ``{"kind": "label", "request_id", "suite", "model", "example_id", "judge_event_id",
        "ts", "stratum", "propensity", "reason", "audit_position"}``; keys whose value is None
        are left out.

    Notes
    -----
    The judge's event id is emitted as ``judge_event_id``, never as ``event_id``: a labeller
    that answers by copying the request (and adding ``loss``) must not reuse the judge
    event's id, which certmon would drop as a duplicate. Such a copy is a valid label event
    (see :mod:`monitor.label_answers`).

    Examples
    --------
    >>> label_request("qa", "m1", "x1", "e1", 3.0, stratum="math")["stratum"]
    'math'
    >>> sorted(label_request("qa", "m1", "x1", "e1", 3.0, propensity=0.1, reason="uniform",
    ...                      position=4))
    ... # doctest: +NORMALIZE_WHITESPACE
    ['audit_position', 'example_id', 'judge_event_id', 'kind', 'model', 'propensity', 'reason',
     'request_id', 'suite', 'ts']
    >>> "event_id" in label_request("qa", "m1", "x1", "e1", 3.0)
    False
    """
    req: dict[str, Any] = {
        "kind": "label",
        "request_id": label_request_id(suite, model, example_id),
        "suite": suite,
        "model": model,
        "example_id": example_id,
        "judge_event_id": event_id,
        "ts": ts,
    }
    if stratum is not None:
        req["stratum"] = stratum
    if propensity is not None:
        req["propensity"] = propensity
    if reason is not None:
        req["reason"] = reason
    if position is not None:
        req["audit_position"] = position
    return req
