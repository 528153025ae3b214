"""One suite, one partition: detect a suite read from a second partition and fence it off.

A suite's certificate is valid only if one engine sees all of its events (see DESIGN.md). A
mis-keyed producer, or partitions added to the topic, can put a suite on two partitions; two
engines would then run two certificates for one model. The runner keeps the first owner and
dead-letters the suite's records on every other partition (reason
``suite_partition_conflict``).

Detection costs nothing on the normal path: after a batch, only the suites *new* to the
partition's engine are compared with the other partitions' suites. On a conflict the runner
rewinds that partition to its checkpoint, and from then on its records are screened (their
``suite`` is read) before they reach the engine.

Scope: the partitions of one process. Two processes that own the two partitions do not see
each other's suites; the merged final state (:func:`consumers.kafka.state.merge_state_views`)
reports such a suite.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from monitor.engine import Engine

__all__ = ["new_conflicts", "owners", "record_suite", "screen"]


def record_suite(raw: bytes | None) -> str | None:
    """Return the ``suite`` of a raw JSON event, or None when it has none (or is not JSON).

    Examples
    --------
    >>> record_suite(b'{"suite": "qa", "x": 1}'), record_suite(b"{"), record_suite(None)
    ('qa', None, None)
    """
    if not raw:
        return None
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    suite = doc.get("suite") if isinstance(doc, dict) else None
    return suite if isinstance(suite, str) else None


def new_conflicts(
    engine: Engine, known: int, others: Iterable[Engine]
) -> list[str]:
    """Suites created in ``engine`` since it held ``known`` suites that another engine holds.

    Examples
    --------
    >>> from monitor.config import parse_config
    >>> from monitor.engine import Engine
    >>> toml = ["[[suites]]", "[[suites.certificates]]", "name='r'", "alpha=0.1", "delta=0.1"]
    >>> cfg = parse_config(chr(10).join(toml))
    >>> ev = (b'{"type":"judge","event_id":"e","suite":"s","model":"m","example_id":"x",'
    ...       b'"loss":0,"ts":1}')
    >>> a, b = Engine(cfg), Engine(cfg)
    >>> _ = a.process(ev); _ = b.process(ev)
    >>> new_conflicts(b, 0, [a]), new_conflicts(b, 1, [a])
    (['s'], [])
    """
    names = list(engine.suites)
    if len(names) <= known:
        return []
    fresh = names[known:]
    others = list(others)
    return [n for n in fresh if any(n in o.suites for o in others)]


def screen(
    offsets: list[int], values: list[bytes | None], blocked: Mapping[str, int]
) -> tuple[list[int], list[bytes | None], list[tuple[int, bytes, str, int]]]:
    """Split a batch: records to process, and ``(offset, raw, suite, owner)`` to dead-letter.

    Examples
    --------
    >>> screen([5, 6], [b'{"suite": "a"}', b'{"suite": "b"}'], {"a": 0})
    ([6], [b'{"suite": "b"}'], [(5, b'{"suite": "a"}', 'a', 0)])
    """
    keep_o: list[int] = []
    keep_v: list[bytes | None] = []
    fenced: list[tuple[int, bytes, str, int]] = []
    for offset, value in zip(offsets, values, strict=True):
        suite = record_suite(value)
        if suite is not None and suite in blocked:
            fenced.append((offset, value or b"", suite, blocked[suite]))
        else:
            keep_o.append(offset)
            keep_v.append(value)
    return keep_o, keep_v, fenced


def owners(engines: Mapping[int, Engine]) -> dict[str, int]:
    """Map each suite to the lowest partition whose engine holds it.

    Examples
    --------
    >>> owners({})
    {}
    """
    out: dict[str, int] = {}
    for p in sorted(engines):
        for name in engines[p].suites:
            out.setdefault(name, p)
    return out
