r"""STATE.json bytes, the same as ``json.dumps(view, sort_keys=True, indent=2)``, written fast.

With ``indent`` the standard library encodes in pure Python (its C encoder has no
indentation): about 1 s per 25 MB document, the STATE.json of 5,000 models. msgspec encodes
and indents in C; its output differs from the standard library's only in how some floats are
spelled (``1e16`` for ``1e+16``, ``1.5e-7`` for ``1.5e-07``, ``0.00009`` for ``9e-05``), and
those tokens are rewritten with ``repr(float(token))``. Documents msgspec would spell
otherwise (non-ASCII text, escaped characters, types it does not encode) go to
:func:`json.dumps` itself.

Examples
--------
>>> import json
>>> view = {"b": [1.5e-7, 1e16, 9.153314360512632e-05, -0.0, 2], "a": {"x": None, "y": []}}
>>> dumps_state(view) == (json.dumps(view, sort_keys=True, indent=2) + "\n").encode()
True
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from monitor.engine import SuiteParts

__all__ = ["dumps_state", "dumps_state_parts", "state_chunks"]

_ENCODER = msgspec.json.Encoder(order="sorted")
# a float token msgspec spells otherwise than repr(): with an exponent, or 0.0000...
_FLOAT = re.compile(rb"-?(?:[0-9][0-9.]*e[-+]?[0-9]+|0\.0000[0-9]+)")
# digits -> "0", "e" kept, anything else -> " ": a digit before an "e" becomes b"0e"
_WINDOW = 1 << 20
_DIGIT_E = bytes(0x30 if 0x30 <= i <= 0x39 else 0x65 if i == 0x65 else 0x20 for i in range(256))


def _float_tokens(data: bytes) -> list[tuple[int, int]]:
    """Return the (start, end) of every float token of ``data`` that :data:`_FLOAT` matches.

    A token is a whole value: after a space (``": "`` or an array's indentation), up to the
    end of its line (an optional comma). Text inside a string never qualifies: an encoded
    string holds no raw newline, so its closing quote would be part of the span. Candidates
    come from :func:`_candidates` (:meth:`bytes.find`, C speed); only they are checked with
    the regex.
    """
    spans: dict[int, int] = {}
    for at in _candidates(data):
        start = data.rfind(b" ", 0, at) + 1
        end = data.find(b"\n", at)
        if end < 0:
            end = len(data)
        stop = end - 1 if data[end - 1:end] == b"," else end
        if start not in spans and _FLOAT.fullmatch(data, start, stop):
            spans[start] = stop
    return sorted(spans.items())


def _candidates(data: bytes) -> list[int]:
    """Positions of ``0.0000`` and of a digit followed by ``e`` (1 MiB windows at a time)."""
    found: list[int] = []
    at = data.find(b"0.0000")
    while at >= 0:
        found.append(at)
        at = data.find(b"0.0000", at + 1)
    for base in range(0, len(data), _WINDOW):
        text = data[base:base + _WINDOW + 1].translate(_DIGIT_E)  # overlaps the next by 1
        at = text.find(b"0e")
        while at >= 0:
            found.append(base + at)
            at = text.find(b"0e", at + 1)
    return found


def dumps_state(view: Any) -> bytes:
    r"""Return ``(json.dumps(view, sort_keys=True, indent=2) + "\n")`` encoded.

    Notes
    -----
    Byte-identical to the standard library's output: floats are spelled as ``repr``
    (shortest round-trip digits, the same digits msgspec writes), strings are ASCII with the
    standard library's escapes (a document with non-ASCII text, a backslash or DEL is
    encoded by :func:`json.dumps`), keys sorted. A differential test compares both on random
    documents. A non-finite float (the views turn them into None first) is written as
    ``null``, where ``json.dumps(allow_nan=False)`` would raise.
    """
    try:
        data = msgspec.json.format(_ENCODER.encode(view), indent=2)
    except (TypeError, ValueError, msgspec.EncodeError):  # ValueError: a lone surrogate
        return _reference(view)
    if not data.isascii() or b"\\" in data or b"\x7f" in data:
        return _reference(view)
    parts: list[bytes | memoryview] = []
    view_of = memoryview(data)  # slices without copies
    done = 0
    for start, stop in _float_tokens(data):
        parts += (view_of[done:start], repr(float(data[start:stop])).encode())
        done = stop
    parts += (view_of[done:], b"\n")
    return b"".join(parts)


def dumps_state_parts(suites: Iterable[SuiteParts], counters: Callable[[], Any]) -> bytes:
    r"""Return :func:`state_chunks` joined (see there).

    Examples
    --------
    >>> parts = [("b", {"x": [1e-7, {}], "models": {}}, iter([("m", {"y": 2e16})])),
    ...          ("a", {"y": "z"}, None)]
    >>> doc = {"suites": {"b": {"x": [1e-7, {}], "models": {"m": {"y": 2e16}}},
    ...                   "a": {"y": "z"}}, "counters": {"events_in": 2}}
    >>> dumps_state_parts(iter(parts), lambda: {"events_in": 2}) == dumps_state(doc)
    True
    """
    return b"".join(state_chunks(suites, counters))


def state_chunks(suites: Iterable[SuiteParts], counters: Callable[[], Any]) -> list[bytes]:
    r"""Return :func:`dumps_state` of the document of ``suites`` and ``counters()``, in chunks.

    ``suites`` yields ``(name, view, models)`` as
    :meth:`monitor.engine.Engine.suite_views`: the document is ``{"suites": {name: view with
    view["models"] = dict(models)}, "counters": counters()}`` (``view`` whole when
    ``models`` is None). Each model's view is encoded as it comes and can be dropped before
    the next is built; ``counters`` is read after the last suite. Names must be distinct.

    Examples
    --------
    >>> chunks = state_chunks(iter([("a", {"y": 1e-7}, None)]), lambda: {"events_in": 1})
    >>> b"".join(chunks) == dumps_state({"suites": {"a": {"y": 1e-7}},
    ...                                  "counters": {"events_in": 1}})
    True

    Notes
    -----
    The same bytes as :func:`dumps_state` of the whole document: a value nested at depth
    ``d`` of an indented document is its own indented encoding with ``2 d`` spaces after
    every newline (an encoded string holds no raw newline), and keys are sorted as
    ``json.dumps(sort_keys=True)`` sorts them (``counters`` before ``suites``). A suite's
    ``"models": {}`` is found as the one line of that text at its keys' indentation.
    """
    out: list[bytes] = []
    suites_at = sorted((name, _suite(view, models)) for name, view, models in suites)
    out += (b'{\n  "counters": ', _nested(counters(), 1), b',\n  "suites": ')
    _members(out, suites_at, 1)
    out.append(b"\n}\n")
    return out


def _suite(view: dict[str, Any], models: Iterable[tuple[str, Any]] | None) -> list[bytes]:
    """Encode a suite's view at depth 2 (chunks), its models' views one at a time (depth 4)."""
    if models is None:
        return [_nested(view, 2)]
    encoded = sorted((name, [_nested(mv, 4)]) for name, mv in models)
    data = _nested({**view, "models": {}}, 2)
    marker = b'\n      "models": {}'  # the suite's own key: 6 spaces, deeper lines have more
    at = data.find(marker)
    if at < 0 or data.find(marker, at + 1) >= 0:
        raise ValueError("suite view: no single 'models' key")
    at += len(marker) - 2
    out = [data[:at]]
    _members(out, encoded, 3)
    out.append(data[at + 2:])
    return out


def _members(out: list[bytes], encoded: list[tuple[str, list[bytes]]], depth: int) -> None:
    """Append the dict at ``depth`` of already-encoded values (chunks), keys sorted."""
    if not encoded:
        out.append(b"{}")
        return
    pad = b"  " * (depth + 1)
    sep = b"{\n"
    for name, chunks in encoded:
        out += (sep, pad, json.dumps(name).encode(), b": ")
        out += chunks
        sep = b",\n"
    out += (b"\n", b"  " * depth, b"}")


def _nested(value: Any, depth: int) -> bytes:
    return dumps_state(value)[:-1].replace(b"\n", b"\n" + b"  " * depth)


def _reference(view: Any) -> bytes:
    return (json.dumps(view, sort_keys=True, indent=2, allow_nan=False) + "\n").encode()
