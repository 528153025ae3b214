"""Label answers: how a label event names its unit and gets its event id.

A label event answers a label request (:mod:`monitor.label_requests`) in one of three ways,
all decoded by :func:`monitor.events.decode_event` into the same :class:`~monitor.events.Event`:

- by ``suite``, ``model`` and ``example_id`` (the original format);
- by ``request_id`` alone, or with any of the three ids (which must then agree with it);
- as a *copy of the request* plus ``loss``: no ``type`` but ``"kind": "label"``, and the
  request's other keys (:data:`REQUEST_KEYS`) accepted.

A label without ``event_id`` gets ``"label:" + request_id`` (the id computed from the unit when
none was given): two copies of the same answer are then exact duplicates, and two different
answers for one unit share an id with different content. :func:`resolve_answer` applies these
rules to decoded fields; it is shared by both decoders (the msgspec fast path and the pydantic
reference), so they cannot disagree on them.

Examples
--------
>>> resolve_answer(None, None, None, None, "lbl1.WyJxYSIsIm0xIiwieDEiXQ")
('label:lbl1.WyJxYSIsIm0xIiwieDEiXQ', 'qa', 'm1', 'x1', True)
>>> resolve_answer("e9", "qa", "m1", "x1", None)
('e9', 'qa', 'm1', 'x1', False)
>>> try:
...     resolve_answer(None, "qa", "m1", "x2", "lbl1.WyJxYSIsIm0xIiwieDEiXQ")
... except BadAnswer as exc:
...     print(exc.reason)
request_id_mismatch
"""

from __future__ import annotations

from typing import Final

from monitor.label_requests import label_request_id, parse_label_request_id

__all__ = ["ANSWER_REJECTIONS", "DERIVED_ID_PREFIX", "REQUEST_KEYS", "BadAnswer",
           "resolve_answer"]

DERIVED_ID_PREFIX: Final = "label:"
# Keys of a label request that a label event may carry besides the event's own fields
# ("stratum" and "ts" are event fields already). Validated, then not kept.
REQUEST_KEYS: Final = ("kind", "request_id", "judge_event_id", "propensity", "reason",
                       "audit_position")
ANSWER_REJECTIONS: Final = ("bad_request_id", "request_id_mismatch")


class BadAnswer(ValueError):
    """A label answer whose ids cannot be resolved: a rejection reason and a detail."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def _short(text: str) -> str:
    return repr(text) if len(text) <= 60 else repr(text[:57]) + "..."


def resolve_answer(
    event_id: str | None,
    suite: str | None,
    model: str | None,
    example_id: str | None,
    request_id: str | None,
) -> tuple[str, str, str, str, bool]:
    """Return ``(event_id, suite, model, example_id, derived)`` of a label answer.

    Parameters
    ----------
    event_id, suite, model, example_id : str or None
        The fields as given (None when absent or null).
    request_id : str or None
        The ``request_id`` given, if any.

    Returns
    -------
    tuple
        The unit's ids (filled from the request id where absent), the event id
        (``"label:" + request_id`` when none was given) and whether it was derived.

    Raises
    ------
    BadAnswer
        ``bad_request_id``: the request id is not a canonical certmon request id;
        ``request_id_mismatch``: an id given disagrees with the one the request id names;
        ``missing_field``: no request id and one of the three ids missing.

    Notes
    -----
    A derived event id is a function of the unit only, so every answer for one unit has the
    same event id: an exact repeat is a duplicate, a different answer an id conflict.

    Examples
    --------
    >>> resolve_answer(None, "qa", "m1", "x1", None)[0]
    'label:lbl1.WyJxYSIsIm0xIiwieDEiXQ'
    >>> try:
    ...     resolve_answer(None, None, None, None, "lbl1.nope")
    ... except BadAnswer as exc:
    ...     print(exc.reason, exc.detail)
    bad_request_id request_id: 'lbl1.nope' is not a certmon label request id
    """
    if request_id is not None:
        unit = parse_label_request_id(request_id)
        if unit is None:
            raise BadAnswer("bad_request_id",
                            f"request_id: {_short(request_id)} is not a certmon label request id")
        given = (suite, model, example_id)
        for name, have, want in zip(("suite", "model", "example_id"), given, unit, strict=True):
            if have is not None and have != want:
                raise BadAnswer("request_id_mismatch",
                                f"{name}: {_short(have)} disagrees with the request id, which "
                                f"names {name} {_short(want)}")
        suite, model, example_id = unit
    elif suite is None or model is None or example_id is None:
        missing = next(n for n, v in (("suite", suite), ("model", model),
                                      ("example_id", example_id)) if v is None)
        raise BadAnswer("missing_field", f"{missing}: Field required")
    if event_id is not None:
        return event_id, suite, model, example_id, False
    rid = request_id if request_id is not None else label_request_id(suite, model, example_id)
    return DERIVED_ID_PREFIX + rid, suite, model, example_id, True
