"""The judge/label join of one suite: dedupe window, pending units, orphan labels, expiry.

A unit (one example answered by one model) is *judged* by a judge event and *labelled* by a label
event; the two can arrive in either order. :class:`JoinWindow` keeps, in bounded memory:

- ``ids``: recent event ids (``dedupe_max_ids`` / ``dedupe_ttl_seconds``) with the unit and loss
  each one carried (an entry ``(tick, unit, loss)``: one flat tuple per event), and the set
  ``units`` of those units ("j"/"l" + unit key), so a replayed event or a second judge/label of
  one unit is recognised, and an id reused with other content is refused
  (``event_id_conflict``);
- ``pending``: audited units waiting for their label (``max_pending`` / ``pending_ttl_seconds``),
  each a :class:`PendingUnit`;
- ``orphans``: labels waiting for their judge event (``max_orphans`` / ``orphan_ttl_seconds``);
- ``rounded``: units already used in a round or taken as missing (``max_round_units``, FIFO).

Time is *event time*: each entry is stamped with the window's watermark (largest ``ts`` of an
accepted event) and expires once the watermark moves more than the TTL past it (checked in
batches: an entry may live up to 1/64 of the shortest TTL longer). Everything
depends only on the order of the suite's own events, so replays reproduce the same state.

Examples
--------
>>> from monitor.config import CertificateConfig, SuiteConfig
>>> cert = CertificateConfig(name="r", alpha=0.1, delta=0.05)
>>> w = JoinWindow(SuiteConfig(name="qa", certificates=[cert]))
>>> w.admit("e1", "1:mx", "j1:mx", True, 5.0, 0.0), w.watermark
(None, 5.0)
>>> w.admit("e1", "1:mx", "j1:mx", True, 6.0, 0.0)          # the same event again
'event_id'
>>> w.admit("e1", "1:mx", "j1:mx", True, 6.0, 1.0)          # its id, other content
'event_id_conflict'
>>> w.admit("e2", "1:mx", "j1:mx", True, 6.0, 0.0)          # a second judge of the unit
'unit'
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from monitor.config import SuiteConfig
from monitor.state.expiring import ExpiringMap, FifoExpiringMap, tick_columns

__all__ = ["NO_EXPIRY", "JoinWindow", "PendingUnit"]

NO_EXPIRY: list[tuple[str, Any]] = []  # shared empty result of :meth:`JoinWindow.admit`


@dataclass(slots=True)
class PendingUnit:
    """An audited unit waiting for its human label.

    ``tag`` is the stratified audit's ``[stratum index, sample kind]`` (None without strata);
    ``block_sum`` / ``block_count`` are the unit's contemporaneous block of unaudited judge
    losses, closed when the unit was judged (``block_count`` is -1 for a unit of a snapshot
    written before blocks travelled with their unit: it has no block); ``position`` is its
    audit position (:mod:`monitor.state.audit_order`; -1: not a betting round, or a unit of a
    snapshot written before rounds were ordered, applied when its label arrives); ``rhos``
    are its round's reliances, fixed when it was judged (per certificate, per ``plugin_up``
    test; None: not a round, or an older snapshot's unit).
    """

    model: str
    judge: float
    event_id: str
    stratum: str | None
    tag: list[Any] | None
    block_sum: float
    block_count: int
    position: int = -1
    rhos: dict[str, list[float]] | None = None

    @property
    def block(self) -> tuple[float, int] | None:
        """The contemporaneous block ``(sum, count)``, or None for an old snapshot's unit."""
        return None if self.block_count < 0 else (self.block_sum, self.block_count)

    def to_list(self) -> list[Any]:
        """JSON form ``[model, judge, event_id, stratum, tag, bsum, bcount, position, rhos]``.

        Examples
        --------
        >>> u = PendingUnit("m", 0.0, "e1", None, None, 1.5, 3, 7, {"r": [0.0, 1.0]})
        >>> u.to_list(), PendingUnit.from_list(u.to_list()) == u
        (['m', 0.0, 'e1', None, None, 1.5, 3, 7, {'r': [0.0, 1.0]}], True)
        >>> PendingUnit.from_list(["m", 0.0, "e1", None]).block is None   # an old snapshot
        True
        """
        return [self.model, self.judge, self.event_id, self.stratum, self.tag, self.block_sum,
                self.block_count, self.position, self.rhos]

    @classmethod
    def from_list(cls, v: Sequence[Any]) -> PendingUnit:
        """Inverse of :meth:`to_list` (also reads the four-field form of older snapshots)."""
        tag = v[4] if len(v) > 4 else None
        if len(v) < 7:
            return cls(str(v[0]), float(v[1]), str(v[2]), v[3], tag, 0.0, -1)
        pos = int(v[7]) if len(v) > 7 else -1
        rhos = None if len(v) < 9 or v[8] is None else {
            str(c): [float(r) for r in rs] for c, rs in v[8].items()}
        return cls(str(v[0]), float(v[1]), str(v[2]), v[3], tag, float(v[5]), int(v[6]), pos,
                   rhos)


_LOSSES: dict[float, float] = {0.0: 0.0, 1.0: 1.0}  # read-only: canonical loss objects


_ANY_LOSS: Any = object()  # the loss of an ids entry of an older snapshot (unit only)


def _flat_id(tick: float, payload: Any) -> tuple[float, Any, Any]:
    """Return the ``ids`` entry ``(tick, unit, loss)`` of a snapshot's payload.

    A payload is ``[unit, loss]``, or the unit alone in snapshots of older versions (then
    the loss is ``_ANY_LOSS``: its id matches any loss of the same unit).
    """
    return (tick, payload, _ANY_LOSS) if type(payload) is str else (tick, payload[0],
                                                                    payload[1])


def _ids_columns(d: dict[str, tuple[float, Any, Any]]) -> dict[str, Any]:
    """Return the snapshot columns of the ``ids`` entries.

    What ``ExpiringMap.to_columns`` writes for payloads ``[unit, loss]`` (the unit alone for
    an older snapshot's entry).

    Examples
    --------
    >>> _ids_columns({"e1": (5.0, "j1:mx", 0.0), "e2": (5.0, "l1:mx", _ANY_LOSS)})
    {'keys': ['e1', 'e2'], 'ticks': [[5.0, 2]], 'payloads': [['j1:mx', 0.0], 'l1:mx']}
    >>> _ids_columns({})
    {'keys': [], 'ticks': []}
    """
    return tick_columns((k, t, unit if loss is _ANY_LOSS else [unit, loss])
                        for k, (t, unit, loss) in d.items())


class JoinWindow:
    """Dedupe window, pending units, orphan labels and used units of one suite (module doc).

    Parameters
    ----------
    config : SuiteConfig
        Its bounds: ``dedupe_max_ids``, ``dedupe_ttl_seconds``, ``max_pending``,
        ``pending_ttl_seconds``, ``max_orphans``, ``orphan_ttl_seconds``, ``max_round_units``.

    Notes
    -----
    What the dedupe bound implies: a duplicate is caught if its original is still in the window,
    or its unit is pending / orphaned / among the last ``max_round_units`` rounded units. A
    duplicate beyond all of these is not recognised. A lone duplicate label of an old unit then
    waits as an orphan and expires (its judge was consumed); a lone duplicate judge is either
    pending and expires, or (unaudited) enters a synthetic block once more, which slightly
    perturbs the control variate but never a human loss. Double counting a *round* requires both
    the judge and the label to be duplicated beyond the bounds.
    """

    __slots__ = ("_due", "_grace", "_ids_d", "_max_ids", "_min_ttl", "_order", "_orphans_d",
                 "_pending_d", "_rounded_d", "counted", "expired", "ids", "orphans", "pending",
                 "rounded", "tick", "units", "watermark")

    def __init__(self, config: SuiteConfig) -> None:
        c = config
        self.watermark = -math.inf
        self.tick = -math.inf  # the watermark stamped on the last admitted event
        self.ids = FifoExpiringMap(c.dedupe_max_ids, c.dedupe_ttl_seconds)
        self.units: set[str] = set()  # exactly the payloads of ``ids``
        self.pending = ExpiringMap(c.max_pending, c.pending_ttl_seconds)
        self.orphans = ExpiringMap(c.max_orphans, c.orphan_ttl_seconds)
        self.rounded = ExpiringMap(c.max_round_units, math.inf)
        # the watermark past which expire() runs: the earliest expiry plus a grace of 1/64 of
        # the shortest TTL, so that one run evicts a batch (entries live at most that much
        # longer than their TTL; amortised O(1) per event instead of a run per event)
        self._due = math.inf
        self._grace = min(c.dedupe_ttl_seconds, c.pending_ttl_seconds,
                          c.orphan_ttl_seconds) / 64.0
        # pending units and orphan labels expired by the last admit(), oldest first, as
        # ("pending", key, PendingUnit) / ("orphan", key, [model, loss]); the owner empties it
        self.expired: list[tuple[str, str, Any]] = []
        self._max_ids = c.dedupe_max_ids
        self._min_ttl = min(c.dedupe_ttl_seconds, c.pending_ttl_seconds, c.orphan_ttl_seconds)
        # [waiting, dedupe]: the sizes the engine's budget last counted (monitor.state.budget;
        # the budget keeps it, so that it reads the sizes once per event)
        self.counted = [0, 0]
        self._bind()

    def _bind(self) -> None:
        # direct references to the underlying maps for the per-event path
        # the ids entries are (tick, unit, loss): this class reads and writes them itself
        self._ids_d = cast("dict[str, tuple[float, Any, Any]]", self.ids.data)
        self._order = self.ids.order
        self._pending_d = self.pending.data
        self._orphans_d = self.orphans.data
        self._rounded_d = self.rounded.data

    # ------------------------------------------------------------------ per event
    def admit(self, event_id: str, key: str, ukey: str, is_judge: bool, ts: float,
              loss: float) -> str | None:
        """Admit one event of unit ``key`` (``ukey``: "j"/"l" + key), or name its duplicate.

        Returns ``"event_id"`` (a known event id with the same content) or ``"unit"`` (a
        second judge / label of the unit) for a duplicate, ``"event_id_conflict"`` for a known
        id with other content (bad input), all of which change nothing; ``"late"`` for the
        first label of a unit already taken as missing (recorded like an accepted event, never
        used); else None, after moving the watermark,
        expiring what is due (into :attr:`expired`, which the caller empties) and recording
        the event.
        The watermark the event was stamped with is :attr:`tick`.
        """
        ids = self._ids_d
        seen = ids.get(event_id)
        if seen is not None:
            # the same content (the same unit, type and loss) is a duplicate; anything else
            # reusing the id is bad input (a snapshot of an older version kept the unit only)
            if seen[1] == ukey and (seen[2] is _ANY_LOSS or seen[2] == loss):
                return "event_id"
            return "event_id_conflict"
        late = False
        if ukey in self.units:
            return "unit"
        used = self._rounded_d.get(key)
        if used is not None:
            if is_judge or used[1] is None:
                return "unit"
            late = True  # the first label of a unit taken as missing: recorded, not used
        elif key in (self._pending_d if is_judge else self._orphans_d):
            return "unit"
        # only accepted events move event time (a duplicate never changes the state)
        if ts > self.watermark:
            self.watermark = ts
            if ts > self._due:
                self._expire()
        tick = self.tick = self.watermark
        if tick + self._min_ttl + self._grace < self._due:
            self._due = tick + self._min_ttl + self._grace
        # FifoExpiringMap.put without the eviction list, one flat tuple per id; the usual
        # losses 0 and 1 share one float object each (no new float per id)
        ids[event_id] = (tick, ukey, _LOSSES.get(loss, loss))
        order = self._order
        order.append(event_id)
        units = self.units
        units.add(ukey)
        while len(ids) > self._max_ids:
            units.discard(ids.pop(order.popleft())[1])
        return "late" if late else None

    def _expire(self) -> None:
        """Evict what the watermark expired (as ``expire`` of each map), then the next due.

        The event ids' FIFO runs here (the same comparisons as
        :meth:`FifoExpiringMap.expire`); a pending or orphan map is asked only when its
        oldest entry is past its TTL: with many suites this runs on a large share of events.
        """
        w = self.watermark
        ids, order, ttl = self._ids_d, self._order, self.ids.ttl_seconds
        if order:
            cutoff = w - ttl
            discard, popleft = self.units.discard, order.popleft
            while order:
                event_id = order[0]
                entry = ids[event_id]
                if entry[0] >= cutoff:
                    break
                popleft()
                del ids[event_id]
                discard(entry[1])  # with many suites this loop evicts most event ids
        due = ids[order[0]][0] + ttl if order else math.inf
        if self._pending_d:
            due = self._expire_map("pending", self.pending, self._pending_d, w, due)
        if self._orphans_d:
            due = self._expire_map("orphan", self.orphans, self._orphans_d, w, due)
        self._due = due + self._grace

    def _expire_map(self, kind: str, m: ExpiringMap, d: dict[str, tuple[float, Any]], w: float,
                    due: float) -> float:
        """Expire the non-empty map ``m`` (data ``d``) at watermark ``w``; return the new due."""
        if d[next(iter(d))][0] < w - m.ttl_seconds:
            expired = self.expired
            for k, p in m.expire(w):
                expired.append((kind, k, p))
        return min(due, m.due())

    # ------------------------------------------------------------------ the join
    def judged(self, key: str) -> bool:
        """Whether a judge event of unit ``key`` is in the dedupe window."""
        return "j" + key in self.units

    def take_orphan(self, key: str) -> list[Any] | None:
        """Remove and return the orphan label ``[model, loss]`` of unit ``key`` (or None)."""
        orphans = self._orphans_d
        if not orphans:
            return None
        entry = orphans.pop(key, None)
        return None if entry is None else entry[1]

    def add_orphan(self, key: str, model: str, loss: float) -> list[tuple[str, Any]]:
        """Keep a label waiting for its judge event; return the orphans evicted by the bound."""
        return self.orphans.put(key, self.tick, [model, loss])

    def add_pending(self, key: str, unit: PendingUnit) -> list[tuple[str, Any]]:
        """Keep an audited unit waiting for its label; return the units evicted by the bound."""
        return self.pending.put(key, self.tick, unit)

    def take_pending(self, key: str) -> PendingUnit | None:
        """Remove and return the pending unit ``key`` (None if it is not pending)."""
        return self.pending.pop(key)

    def mark_rounded(self, key: str) -> None:
        """Record that unit ``key`` was used (a later judge or label of it is a duplicate)."""
        self.rounded.put(key, self.tick)

    def mark_missing(self, key: str) -> None:
        """Record that unit ``key``'s label is missing for good (a later one is *late*)."""
        self.rounded.put(key, self.tick, "missing")

    def waiting_units(self, model: str) -> list[tuple[float, tuple[float, int], Any]]:
        """List ``model``'s audited units whose label has not arrived: ``(judge, block, rhos)``.

        Units in audit order only (``position >= 0``), oldest first.
        """
        return [(u.judge, (u.block_sum, u.block_count), u.rhos)
                for _, (_, u) in self.pending.data.items()
                if u.position >= 0 and u.model == model]

    # ------------------------------------------------------------------ engine budget
    def sizes(self) -> tuple[int, int]:
        """Return ``(pending units + orphan labels, event ids + rounded units)``.

        The two totals the engine's memory budget bounds (:mod:`monitor.state.budget`), read
        on every event: four ``len`` of the underlying maps, no Python call per map.
        """
        return (len(self._pending_d) + len(self._orphans_d),
                len(self._ids_d) + len(self._rounded_d))

    def pop_oldest_waiting(self) -> tuple[str, str, Any]:
        """Remove the oldest pending unit or orphan label (the engine's budget, module doc).

        Returns ``("pending", key, PendingUnit)`` or ``("orphans", key, [model, loss])``, the
        entry with the smaller tick (a pending unit on a tie); the owner takes it as expired.
        Raises KeyError when both maps are empty.
        """
        p, o = self._pending_d, self._orphans_d
        if p and (not o or p[next(iter(p))][0] <= o[next(iter(o))][0]):
            k, (_, unit) = p.popitem(last=False)
            return "pending", k, unit
        k, (_, label) = o.popitem(last=False)
        return "orphans", k, label

    def evict_dedupe(self) -> str:
        """Forget the oldest event id or rounded unit (the engine's budget); return its kind.

        ``"ids"`` or ``"rounded"`` (the smaller tick; an id on a tie). A duplicate of what is
        forgotten is no longer recognised (class Notes). Raises KeyError when both are empty.
        """
        order, r = self._order, self._rounded_d
        if order and (not r or self._ids_d[order[0]][0] <= r[next(iter(r))][0]):
            self.units.discard(self._ids_d.pop(order.popleft())[1])
            return "ids"
        r.popitem(last=False)
        return "rounded"

    # ------------------------------------------------------------------ snapshot
    def to_dict(self) -> dict[str, Any]:
        """JSON columns of the four maps (pending units as :meth:`PendingUnit.to_list`)."""
        return {
            "ids": _ids_columns(self._ids_d),
            "pending": self.pending.to_columns(PendingUnit.to_list),
            "orphans": self.orphans.to_columns(),
            "rounded": self.rounded.to_columns(),
        }

    @classmethod
    def from_dict(cls, config: SuiteConfig, watermark: float, d: dict[str, Any]) -> JoinWindow:
        """Inverse of :meth:`to_dict` (raises ValueError / KeyError / TypeError if malformed)."""
        c = config
        w = cls(config)
        w.watermark = watermark
        w.ids = FifoExpiringMap.from_columns(c.dedupe_max_ids, c.dedupe_ttl_seconds, d["ids"])
        ids: dict[str, Any] = w.ids.data
        for k, (t, p) in ids.items():  # (values replaced in place: the keys stay)
            ids[k] = _flat_id(t, p)
        w.units = {str(unit) for _, unit, _ in ids.values()}
        w.pending = ExpiringMap.from_columns(c.max_pending, c.pending_ttl_seconds, d["pending"],
                                             PendingUnit.from_list)
        w.orphans = ExpiringMap.from_columns(c.max_orphans, c.orphan_ttl_seconds, d["orphans"])
        w.rounded = ExpiringMap.from_columns(c.max_round_units, math.inf, d["rounded"])
        w._due = min(w.ids.due(), w.pending.due(), w.orphans.due()) + w._grace
        w._bind()
        return w
