"""The engine's memory budget: join entries bounded over all suites of one process.

Each suite bounds its own join maps (:mod:`monitor.state.join`: ``max_pending``,
``max_orphans``, ``dedupe_max_ids``, ``max_round_units``), so nothing per suite bounds an
engine of many suites. :class:`JoinBudget` adds two totals over all suites of one engine:

- ``events.max_waiting_units``: audited units waiting for their label plus labels waiting
  for their judge event (the largest entries: about 600 bytes each);
- ``events.max_dedupe_entries``: remembered event ids plus rounded / missing units (the
  dedupe memory).

When a total exceeds its bound, entries are evicted until it is 1/64 below the bound (a
batch, so the scan over suites is amortised): each eviction takes the *oldest* entry of
the suite holding the *most* entries of that kind (ties: the smallest suite name). An
evicted pending unit takes exactly the path of one expired by its TTL
(:meth:`~monitor.state.suite.SuiteState.evict_waiting`): its label is *missing* and the
unit is applied at its worst value, never silently dropped; an evicted orphan label counts
as ``expired_orphans``. Every eviction is counted in :attr:`JoinBudget.evictions` (the
engine's ``budget_evictions`` counters). The choice depends only on the engine's state,
which depends only on the order of the engine's events, so replays and restores reproduce it.

Measured (``benchmarks/replay_shapes.py --memory``, whole ``certmon replay`` process, peak RSS,
``examples/minimal.toml``): 1,000,000 never-labelled audited units over 200 suites took 638 MB
without the budget; with the defaults (200,000 waiting, 500,000 dedupe entries) 322 MB, the
other 800,000 units counted missing. 10,000 models in one suite: 301 MB; 30,000: 734 MB, so
about 23 KB per model (default certificate; 2026-11-27, with STATE.json written model by
model); hence ``events.max_models`` = 10,000 by default (1 GiB container: 10,000 models plus
both budgets full).

Examples
--------
>>> b = JoinBudget(max_waiting=128, max_dedupe=1000)
>>> b.floor(128), b.floor(1)
(126, 0)
>>> b.evictions
{'pending': 0, 'orphans': 0, 'ids': 0, 'rounded': 0}
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from typing import Any, Protocol

from monitor.config import EventsConfig
from monitor.state.join import JoinWindow

__all__ = ["EVICTION_KINDS", "Evictable", "JoinBudget"]

EVICTION_KINDS = ("pending", "orphans", "ids", "rounded")
MIN_SLACK = 1024  # the shortest run of events whose accounting the budget skips


class Evictable(Protocol):
    """A suite as the budget sees it (:class:`~monitor.state.suite.SuiteState`)."""

    join: JoinWindow

    def evict_waiting(self, alerts: list[Any]) -> str:
        """Evict the suite's oldest waiting entry as if it expired; return its kind."""
        ...


def waiting(join: JoinWindow) -> int:
    """Pending units plus orphan labels of one suite."""
    return join.sizes()[0]


def dedupe(join: JoinWindow) -> int:
    """Remembered event ids plus rounded / missing units of one suite."""
    return join.sizes()[1]


class JoinBudget:
    """Totals of the join entries of all suites of an engine, and their eviction.

    Parameters
    ----------
    max_waiting : int
        Bound on pending units plus orphan labels over all suites.
    max_dedupe : int
        Bound on event ids plus rounded units over all suites.

    Notes
    -----
    Guarantee: after each event (:meth:`account`), each total is at most its bound. The per-suite
    bounds still hold. An evicted pending unit is counted ``expired_pending`` on its model and
    applied as a missing label (worst value); an evicted dedupe entry only weakens duplicate
    recognition for that unit (as if it had left the per-suite window). Deterministic given
    the engine's state and event order.
    """

    __slots__ = ("dedupe", "evictions", "max_dedupe", "max_waiting", "slack", "stale",
                 "waiting")

    def __init__(self, max_waiting: int, max_dedupe: int) -> None:
        self.max_waiting = max_waiting
        self.max_dedupe = max_dedupe
        self.waiting = 0  # current totals (kept by account / recount; not while ``stale``)
        self.dedupe = 0
        # events whose accounting the engine may skip (:meth:`account`): none of them can take
        # a total over its bound; while it is positive the totals and the joins' ``counted``
        # are not kept (``stale``) and the next :meth:`account` recounts
        self.slack = 0
        self.stale = False
        self.evictions: dict[str, int] = dict.fromkeys(EVICTION_KINDS, 0)

    @classmethod
    def of(cls, events: EventsConfig) -> JoinBudget:
        """Return the budget of ``[events]`` ``max_waiting_units`` / ``max_dedupe_entries``."""
        return cls(events.max_waiting_units, events.max_dedupe_entries)

    @staticmethod
    def sizes(join: JoinWindow) -> tuple[int, int]:
        """Return the ``(waiting, dedupe)`` entries of one suite's join."""
        return join.sizes()

    def load_evictions(self, counts: Mapping[str, Any]) -> None:
        """Set :attr:`evictions` from a snapshot's counters (a missing kind is 0)."""
        self.evictions = {k: int(counts.get(k, 0)) for k in EVICTION_KINDS}

    @staticmethod
    def floor(bound: int) -> int:
        """Return the total a batch of evictions brings an excess down to (1/64 below)."""
        return bound - max(1, bound // 64) if bound > 1 else 0

    def recount(self, suites: Mapping[str, Evictable]) -> None:
        """Recompute both totals from the suites (after a restore or evictions).

        Each join's :attr:`~monitor.state.join.JoinWindow.counted` is set to its sizes.
        """
        tw = td = 0
        for s in suites.values():
            join = s.join
            w, d = join.sizes()
            join.counted[0] = w
            join.counted[1] = d
            tw += w
            td += d
        self.waiting = tw
        self.dedupe = td
        self.slack = 0
        self.stale = False

    def account(self, join: JoinWindow, suites: Mapping[str, Evictable], alerts: list[Any],
                changed: set[str]) -> None:
        """Account one event's change of a suite's join, then evict what is over a bound.

        The engine calls it after an event unless :attr:`slack` is positive (then it only
        counts the event down). The change is measured against the join's
        :attr:`~monitor.state.join.JoinWindow.counted` (its sizes when the budget last
        counted it): one reading of the sizes per event; or, after skipped events, by a
        recount. Between two events of a suite only its events and the budget's evictions
        (which recount) change its join; and after every call both totals are within their
        bounds, so a join whose sizes did not change needs no eviction.

        Notes
        -----
        The slack: one event adds at most one waiting entry (a pending unit or an orphan
        label) and at most two entries in all (its event id, and a waiting entry or a
        rounded unit; an expired or evicted pending unit that becomes a missing one leaves
        ``waiting`` as it joins ``rounded``). So after totals ``W``, ``D`` within bounds, the
        next ``min(max_waiting - W, (max_dedupe - W - D) // 2)`` events cannot exceed a bound
        and need no accounting: evictions happen at the same events as with accounting after
        every event. The budget skips only runs of at least :data:`MIN_SLACK` + the number of
        suites events (each run ends with a recount, one reading per suite).
        """
        if self.stale:
            self.recount(suites)  # totals after the skipped events, this one included
        else:
            w, d = join.sizes()
            c = join.counted
            if w == c[0] and d == c[1]:
                return  # (slack 0: the totals are near a bound, they stay exact)
            self.waiting += w - c[0]
            self.dedupe += d - c[1]
            c[0] = w
            c[1] = d
        if self.waiting > self.max_waiting:
            self._evict(suites, alerts, changed, True)
        if self.dedupe > self.max_dedupe:
            self._evict(suites, alerts, changed, False)
        slack = min(self.max_waiting - self.waiting,
                    (self.max_dedupe - self.waiting - self.dedupe) // 2)
        if slack >= MIN_SLACK + len(suites):
            self.slack = slack
            self.stale = True

    def track(self, join: JoinWindow, before: tuple[int, int],
              suites: Mapping[str, Evictable], alerts: list[Any], changed: set[str]) -> None:
        """Account one event's change of a suite's join, then evict: :meth:`account`.

        ``before`` (the join's sizes before the event) is not needed: the budget keeps the
        join's :attr:`~monitor.state.join.JoinWindow.counted`.
        """
        self.account(join, suites, alerts, changed)

    def _evict(self, suites: Mapping[str, Evictable], alerts: list[Any], changed: set[str],
               wait: bool) -> None:
        size = waiting if wait else dedupe
        self.recount(suites)
        total = self.waiting if wait else self.dedupe
        excess = total - self.floor(self.max_waiting if wait else self.max_dedupe)
        heap = [(-n, name) for name, s in suites.items() if (n := size(s.join)) > 0]
        heapq.heapify(heap)
        counts = self.evictions
        while excess > 0 and heap:
            neg, name = heapq.heappop(heap)
            suite = suites[name]
            kind = suite.evict_waiting(alerts) if wait else suite.join.evict_dedupe()
            counts[kind] += 1
            changed.add(name)
            excess -= 1
            if neg < -1:
                heapq.heappush(heap, (neg + 1, name))
        self.recount(suites)  # a missing unit joins ``rounded``: the other total moves too
