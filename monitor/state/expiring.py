"""A bounded, insertion-ordered map whose entries expire by count and by event time.

Every entry is stamped with a *tick*: the suite's event-time watermark (largest event
``ts`` seen so far) when the entry was inserted. Ticks never decrease in insertion order,
so the oldest entry is always at the front and expiry is O(1) per evicted entry.

Examples
--------
>>> m = ExpiringMap(max_entries=2, ttl_seconds=10.0)
>>> m.put("a", 0.0, [1]); m.put("b", 5.0, [2])
[]
[]
>>> m.put("c", 6.0, [3])          # over the count bound: the oldest goes
[('a', [1])]
>>> m.expire(16.0)                # watermark 16: "b" (tick 5) is older than 10 s
[('b', [2])]
>>> list(m.keys())
['c']
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["ExpiringMap", "FifoExpiringMap", "tick_columns"]

_NONE: list[tuple[str, Any]] = []  # shared empty result: callers only iterate it


def tick_columns(rows: Iterable[tuple[str, float, Any]]) -> dict[str, Any]:
    """Return the snapshot columns of ``(key, tick, JSON payload)`` rows in insertion order.

    ``{"keys": [...], "ticks": [[tick, run_length], ...], "payloads": [...]}``; the payloads
    list is omitted when every payload is None (:meth:`ExpiringMap.to_columns`).

    Examples
    --------
    >>> tick_columns([("a", 1.0, None), ("b", 1.0, [2]), ("c", 3.0, None)])
    {'keys': ['a', 'b', 'c'], 'ticks': [[1.0, 2], [3.0, 1]], 'payloads': [None, [2], None]}
    """
    keys: list[str] = []
    ticks: list[list[Any]] = []
    payloads: list[Any] = []
    last: list[Any] | None = None
    for k, t, p in rows:
        keys.append(k)
        payloads.append(p)
        if last is not None and last[0] == t:
            last[1] += 1
        else:
            last = [t, 1]
            ticks.append(last)
    out: dict[str, Any] = {"keys": keys, "ticks": ticks}
    if any(p is not None for p in payloads):
        out["payloads"] = payloads
    return out


class ExpiringMap:
    """Insertion-ordered ``key -> payload`` map bounded by ``max_entries`` and ``ttl_seconds``.

    Parameters
    ----------
    max_entries : int
        Inserting beyond this many entries evicts the oldest ones.
    ttl_seconds : float
        :meth:`expire` evicts entries whose tick is more than this far behind the watermark.

    Notes
    -----
    Payloads are JSON values or None (or objects with an ``encode`` / ``decode`` pair given to
    :meth:`to_columns` / :meth:`from_columns`), so the two round-trip exactly. Re-inserting an
    existing key keeps its original position and tick.
    """

    __slots__ = ("_d", "max_entries", "ttl_seconds")

    def __init__(self, max_entries: int, ttl_seconds: float) -> None:
        self.max_entries = max_entries
        self.ttl_seconds = ttl_seconds
        self._d: OrderedDict[str, tuple[float, Any]] = OrderedDict()

    @property
    def data(self) -> OrderedDict[str, tuple[float, Any]]:
        """The underlying ordered map (read-only use; mutate through the methods)."""
        return self._d

    def __len__(self) -> int:
        return len(self._d)

    def __contains__(self, key: object) -> bool:
        return key in self._d

    def keys(self) -> Iterator[str]:
        """Keys, oldest first."""
        return iter(self._d)

    def get(self, key: str) -> Any | None:
        """Payload of ``key`` or None."""
        item = self._d.get(key)
        return None if item is None else item[1]

    def pop(self, key: str) -> Any | None:
        """Remove ``key`` and return its payload (None if absent)."""
        item = self._d.pop(key, None)
        return None if item is None else item[1]

    def put(self, key: str, tick: float, payload: Any = None) -> list[tuple[str, Any]]:
        """Insert ``key``; return the entries evicted by the count bound (oldest first)."""
        d = self._d
        if key not in d:
            d[key] = (tick, payload)
        if len(d) <= self.max_entries:
            return _NONE
        evicted: list[tuple[str, Any]] = []
        while len(d) > self.max_entries:
            k, (_, p) = d.popitem(last=False)
            evicted.append((k, p))
        return evicted

    def due(self) -> float:
        """Smallest watermark at which :meth:`expire` would evict something (inf if never)."""
        d = self._d
        if not d:
            return math.inf
        return d[next(iter(d))][0] + self.ttl_seconds

    def expire(self, watermark: float) -> list[tuple[str, Any]]:
        """Evict entries with ``tick < watermark - ttl_seconds``; return them, oldest first."""
        d = self._d
        if not d:
            return []
        cutoff = watermark - self.ttl_seconds
        evicted: list[tuple[str, Any]] = []
        while d:
            k = next(iter(d))
            tick, payload = d[k]
            if tick >= cutoff:
                break
            del d[k]
            evicted.append((k, payload))
        return evicted

    def to_columns(self, encode: Callable[[Any], Any] | None = None) -> dict[str, Any]:
        """Compact JSON form, oldest first.

        ``{"keys": [...], "ticks": [[tick, run_length], ...], "payloads": [...]}``; the
        payloads list is omitted when every payload is None. ``encode`` maps a payload to its
        JSON value (default: the payload is one).

        Examples
        --------
        >>> m = ExpiringMap(5, 1.0)
        >>> for k, t in (("a", 1.0), ("b", 1.0), ("c", 2.0)):
        ...     _ = m.put(k, t)
        >>> m.to_columns()
        {'keys': ['a', 'b', 'c'], 'ticks': [[1.0, 2], [2.0, 1]]}
        >>> ExpiringMap.from_columns(5, 1.0, m.to_columns()).to_columns() == m.to_columns()
        True
        """
        return tick_columns((k, t, p if encode is None or p is None else encode(p))
                            for k, (t, p) in self._d.items())

    @classmethod
    def from_columns(
        cls, max_entries: int, ttl_seconds: float, cols: dict[str, Any],
        decode: Callable[[Any], Any] | None = None,
    ) -> ExpiringMap:
        """Rebuild from :meth:`to_columns` output (raises ValueError if inconsistent).

        ``decode`` is the inverse of the ``encode`` given to :meth:`to_columns`.
        """
        keys = cols["keys"]
        payloads = cols.get("payloads") or [None] * len(keys)
        if decode is not None:
            payloads = [None if p is None else decode(p) for p in payloads]
        ticks: list[float] = []
        for t, n in cols["ticks"]:
            ticks.extend([float(t)] * int(n))
        if not len(keys) == len(ticks) == len(payloads):
            raise ValueError("expiring map columns have different lengths")
        m = cls(max_entries, ttl_seconds)
        d = m._d
        for k, t, p in zip(keys, ticks, payloads, strict=True):
            d[str(k)] = (t, p)
        return m


class FifoExpiringMap(ExpiringMap):
    """An :class:`ExpiringMap` whose entries only leave by expiry (no :meth:`pop`): faster.

    A plain dict plus a queue of its keys in insertion order (cheaper than an
    ``OrderedDict`` on the per-event path: the suite's window of recent event ids). The
    owner may insert into :attr:`data` directly if it appends the key to :attr:`order`.

    Examples
    --------
    >>> m = FifoExpiringMap(max_entries=2, ttl_seconds=10.0)
    >>> m.put("a", 0.0, 1), m.put("b", 5.0, 2), m.put("c", 6.0, 3)
    ([], [], [('a', 1)])
    >>> m.expire(16.0), list(m.keys()), m.due()
    ([('b', 2)], ['c'], 16.0)
    >>> FifoExpiringMap.from_columns(2, 10.0, m.to_columns()).to_columns() == m.to_columns()
    True
    """

    __slots__ = ("order",)

    def __init__(self, max_entries: int, ttl_seconds: float) -> None:
        super().__init__(max_entries, ttl_seconds)
        self._d = {}  # type: ignore[assignment]
        self.order: deque[str] = deque()

    def pop(self, key: str) -> Any | None:
        """Refuse: entries of a FIFO map only leave by expiry."""
        raise TypeError("entries of a FifoExpiringMap only leave by expiry")

    def put(self, key: str, tick: float, payload: Any = None) -> list[tuple[str, Any]]:
        """Insert ``key``; return the entries evicted by the count bound (oldest first)."""
        d = self._d
        if key not in d:
            d[key] = (tick, payload)
            self.order.append(key)
        if len(d) <= self.max_entries:
            return _NONE
        evicted: list[tuple[str, Any]] = []
        order = self.order
        while len(d) > self.max_entries:
            k = order.popleft()
            evicted.append((k, d.pop(k)[1]))
        return evicted

    def due(self) -> float:
        """Smallest watermark at which :meth:`expire` would evict something (inf if never)."""
        if not self.order:
            return math.inf
        return self._d[self.order[0]][0] + self.ttl_seconds

    def expire(self, watermark: float) -> list[tuple[str, Any]]:
        """Evict entries with ``tick < watermark - ttl_seconds``; return them, oldest first."""
        d = self._d
        order = self.order
        cutoff = watermark - self.ttl_seconds
        evicted: list[tuple[str, Any]] = []
        while order:
            tick, payload = d[order[0]]
            if tick >= cutoff:
                break
            k = order.popleft()
            del d[k]
            evicted.append((k, payload))
        return evicted

    @classmethod
    def from_columns(
        cls, max_entries: int, ttl_seconds: float, cols: dict[str, Any],
        decode: Callable[[Any], Any] | None = None,
    ) -> FifoExpiringMap:
        """Rebuild from :meth:`to_columns` output (raises ValueError if inconsistent)."""
        m = cls(max_entries, ttl_seconds)
        m._d = dict(ExpiringMap.from_columns(max_entries, ttl_seconds, cols, decode).data)  # type: ignore[assignment]
        m.order = deque(m._d)
        return m
