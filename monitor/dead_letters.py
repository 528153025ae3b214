"""Dead letters: the record of a rejected event, and whom to attribute it to.

Examples
--------
>>> from monitor.events import Rejection
>>> dead_letter_record(Rejection("invalid_json", "x"), b"{", None)["reason"]
'invalid_json'
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

from monitor.label_requests import parse_label_request_id

if TYPE_CHECKING:
    from monitor.events import Rejection

__all__ = ["dead_letter_record", "peek_route"]


def peek_route(raw: bytes) -> tuple[str, str] | None:
    """Best-effort (suite, model) of a rejected event, to attribute the rejection.

    Examples
    --------
    >>> peek_route(b'{"suite": "s", "model": "m", "loss": "bad"}')
    ('s', 'm')
    >>> peek_route(b'{"request_id": "lbl1.WyJxYSIsIm0xIiwieDEiXQ", "loss": 2}')
    ('qa', 'm1')
    >>> peek_route(b"nope") is None
    True
    """
    try:
        obj: Any = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if isinstance(obj, dict):
        suite, model = obj.get("suite"), obj.get("model")
        if isinstance(suite, str) and isinstance(model, str) and suite and model:
            return suite, model
        rid = obj.get("request_id")  # a label answering by request id alone
        unit = parse_label_request_id(rid) if isinstance(rid, str) else None
        if unit is not None:
            return unit[0], unit[1]
    return None


def dead_letter_record(
    rejection: Rejection, raw: bytes, source: dict[str, Any] | None
) -> dict[str, Any]:
    """Build the dead-letter record of the contract: reason, detail, base64 raw bytes, source.

    Examples
    --------
    >>> from monitor.events import Rejection
    >>> dead_letter_record(Rejection("invalid_json", "x"), b"{", {"line": 3})
    {'reason': 'invalid_json', 'detail': 'x', 'raw': 'ew==', 'source': {'line': 3}}
    """
    return {
        "reason": rejection.reason,
        "detail": rejection.detail,
        "raw": base64.b64encode(raw).decode("ascii"),
        "source": dict(source) if source is not None else {},
    }

