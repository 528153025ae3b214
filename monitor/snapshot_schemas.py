"""Declared schemas of the snapshot documents: checkpoint manifest, part document, suite state.

Restoring a checkpoint is *convert, then compare with the configuration*: :func:`convert`
checks a decoded JSON document against its schema once (kind and version, every type, counts
non-negative and at most 2**53, sizes and generations non-negative) and reports the first
fault with its path (``$.parts[0][1]``); the comparisons with the configuration follow in
:mod:`monitor.state.restore_checks` and the ``restore_*`` modules. The schemas only read:
documents are still written by the classes that own them, so checkpoints keep their bytes.

Examples
--------
>>> doc = {"format": "certmon.checkpoint-part", "version": 1, "key": "k", "part": "s",
...        "generation": -1, "sha256": "0" * 64, "state": {}}
>>> convert(doc, PartDocument, "the part")
Traceback (most recent call last):
...
ValueError: the part is malformed: Expected `int` >= 0 - at `$.generation`

Notes
-----
Guarantee: a document that converts has the declared shape; it does not prove it fits the
configuration (the restore checks do) nor that it came from real events (see ``SECURITY.md``
for authenticated checkpoints).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

import msgspec

__all__ = ["Columns", "Count", "EngineHead", "Manifest", "PartDocument", "SuiteDocument",
           "convert"]

Count = Annotated[int, msgspec.Meta(ge=0, le=2**53)]
"""A count: an integer in [0, 2**53] (exact as a float; a larger one cannot come from events)."""

_S = TypeVar("_S", bound=msgspec.Struct)


class Columns(msgspec.Struct):
    """An expiring map's columns (:meth:`monitor.state.expiring.ExpiringMap.to_columns`)."""

    keys: list[str]
    ticks: list[tuple[float, int]] = []
    payloads: list[Any] | None = None


class Counters(msgspec.Struct):
    """The engine's counters (``Engine.counters``); ``budget_evictions`` is newer."""

    events_in: Count
    unrouted: Count
    label_requests: Count
    rejected: dict[str, Count]
    duplicates: dict[str, Count]
    alerts: dict[str, Count]
    budget_evictions: dict[str, Count] = {}


class EngineHead(msgspec.Struct):
    """The engine part of a snapshot, without its suites (a manifest's ``engine``)."""

    kind: Literal["certmon.Engine"]
    version: Literal[1]
    config_fingerprint: str
    counters: Counters


class Manifest(msgspec.Struct):
    """A checkpoint manifest (format version 2, :mod:`monitor.incremental`)."""

    format: Literal["certmon.checkpoint"]
    version: Literal[2]
    key: str
    parts: list[tuple[str, Count, str]]
    engine: EngineHead
    position: dict[str, Any]
    sha256: str


class PartDocument(msgspec.Struct):
    """One suite's (or the selection's) document of a version-2 checkpoint."""

    format: Literal["certmon.checkpoint-part"]
    version: Literal[1]
    key: str
    part: str
    generation: Count
    sha256: str
    state: Any


class SuiteDocument(msgspec.Struct):
    """A suite's state (``SuiteState.to_dict``), its top level.

    The models are checked by :func:`monitor.state.restore_checks.check_suite_dict` against
    the configuration.
    """

    name: str
    watermark: float | None
    models: list[dict[str, Any]]
    ids: Columns
    pending: Columns
    orphans: Columns
    rounded: Columns
    refused: tuple[Count, list[Any]] | None = None


def convert(doc: Any, schema: type[_S], what: str) -> _S:
    """Check ``doc`` (decoded JSON) against ``schema`` and return it converted.

    Parameters
    ----------
    doc : Any
        The decoded document.
    schema : type
        One of the schemas of this module.
    what : str
        The document, for the message.

    Returns
    -------
    msgspec.Struct
        ``doc`` as the schema's type (fields of type ``Any`` are the same objects).

    Raises
    ------
    ValueError
        ``"{what} is malformed: {first fault and its path}"``.

    Examples
    --------
    >>> convert({"keys": ["a"], "ticks": [[1.0, 1]]}, Columns, "ids").keys
    ['a']
    >>> convert({"keys": ["a"], "ticks": [[1.0, "x"]]}, Columns, "ids")
    Traceback (most recent call last):
    ...
    ValueError: ids is malformed: Expected `int`, got `str` - at `$.ticks[0][1]`
    """
    try:
        return msgspec.convert(doc, schema, strict=True)
    except msgspec.ValidationError as exc:
        raise ValueError(f"{what} is malformed: {exc}") from None
