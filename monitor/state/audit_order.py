"""Rounds in audit order: one model's reorder buffer and its claims beyond applied rounds.

Each audited unit of a model gets an *audit position* when it is judged (0, 1, 2, ...). Its
round is applied to the certificates, confidence sequences and detectors strictly in that
order, never in the order labels happen to arrive: a label that arrives before an earlier
unit's label waits in :class:`AuditOrder` until every earlier position is resolved, either by
its label or as *missing* (its label timed out or was evicted; see
:meth:`~monitor.stats.betting.risk_group.CertificateGroup.penalize`).

Waiting for the slowest label would delay every claim, so the certificates also claim
*beyond* the applied rounds: for each ``plugin_up`` test and bet cell, the log factors of the
units not applied yet are bounded below (:mod:`monitor.stats.betting.plugin_bounds`: a pending
label at its worst value for the claim, at the round's reliance, fixed when its unit was
judged) and summed here; :meth:`AuditOrder.claim` offers the resulting lower bound on the
audit-ordered wealth to each test (:meth:`~monitor.stats.betting.autoeval_plugin.PlugInTest.claim`).

Examples
--------
>>> o = AuditOrder()
>>> a, b = (o.assign({}, 0.5, (0.0, 0), None) for _ in range(2))
>>> o.resolve(b, 0.0, 0.1, 0.0, 0, None, {}, list)   # b's label first: it waits for a
>>> o.take_ready()
[]
>>> o.resolve(a, 1.0, 0.9, 0.0, 0, None, {}, list)
>>> [(e[0], e[1]) for e in o.take_ready()]  # both, in audit order
[(1.0, 0.9), (0.0, 0.1)]

Notes
-----
Validity (``docs/guarantees.md``, "Late, reordered and missing labels"): everything a round
uses except its label (judge loss, block, reliance) is fixed when the unit is judged, from
earlier positions only, so the
audit-ordered wealth is a nonnegative supermartingale under the null whatever the labels'
delays; every claim is made on a lower bound of it, so Ville's inequality bounds the error
however labels are delayed, and whether or not they ever arrive.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from monitor.stats.betting.risk_group import CertificateGroup

__all__ = ["AuditOrder"]

# [human or None, judge, block_sum, block_count, human counted in sums, reliances or None]
Entry = list[Any]
Rhos = dict[str, list[float]] | None  # per certificate, per plugin_up test (None: unknown)
Waiting = tuple[float, tuple[float, int], Rhos]  # a waiting unit's (judge, block, rhos)


@dataclass(slots=True)
class AuditOrder:
    """Reorder buffer of one model's audited units, with the bounds of the unapplied ones.

    ``next_position`` positions were given; rounds ``[0, applied)`` were applied (or taken as
    missing); ``ready`` holds resolved positions after ``applied`` waiting for an earlier one;
    ``waiting`` counts the positions at or after ``applied`` (pending or ready). ``sums`` holds,
    per certificate and ``plugin_up`` test, the per-cell sum of the waiting units' log factor
    bounds; it is built only once a label arrives out of order (None until then, and again once
    nothing waits), so labels that arrive in audit order cost nothing here.
    """

    next_position: int = 0
    applied: int = 0
    ready: dict[int, Entry] = field(default_factory=dict)
    waiting: int = 0
    sums: dict[str, list[list[float]]] | None = None

    def assign(self, groups: dict[str, CertificateGroup], judge: float,
               block: tuple[float, int], rhos: Rhos) -> int:
        """Give the next audit position to a unit judged now (its bound joins the sums)."""
        pos = self.next_position
        self.next_position = pos + 1
        self.waiting += 1
        if self.sums is not None:
            self.add(groups, None, judge, block, rhos)
        return pos

    def add(self, groups: dict[str, CertificateGroup], human: float | None, judge: float,
            block: tuple[float, int], rhos: Rhos, sign: float = 1.0) -> None:
        """Add (``sign`` -1: remove) one waiting unit's log factor bounds to :attr:`sums`.

        ``rhos``: the unit's reliances, fixed when it was judged (None: unknown, any in [0, 1]).
        """
        if self.sums is None:
            self.sums = {}
        mean = block[0] / block[1] if block[1] else None
        for cert, group in groups.items():
            tests = group.tests
            if not tests:
                continue
            r = None if rhos is None else rhos.get(cert)
            sums = self.sums.get(cert)
            # per cell s_k + sign * t_k (zeros for a certificate's first unit), in one call
            # per test (PlugInTest.bound_add)
            if sums is None:
                self.sums[cert] = [t.bound_add(None, sign, human, judge, mean,
                                               None if r is None else r[i])
                                   for i, t in enumerate(tests)]
            else:
                for i, (s, t) in enumerate(zip(sums, tests, strict=True)):
                    sums[i] = t.bound_add(s, sign, human, judge, mean,
                                          None if r is None else r[i])

    def resolve(self, pos: int, human: float | None, judge: float, block_sum: float,
                block_count: int, rhos: Rhos, groups: dict[str, CertificateGroup],
                pending: Callable[[], Sequence[Waiting]]) -> None:
        """Record the label of position ``pos`` (None: missing for good).

        A position after ``applied`` keeps waiting; its bound becomes its label's. The first
        label out of order builds :attr:`sums` from ``pending()`` (the other waiting units whose
        label has not arrived, as ``(judge, block, rhos)``) and the ready ones.
        """
        counted = None
        if human is not None and pos != self.applied:
            block = (block_sum, block_count)
            if self.sums is None:
                self.rebuild(groups, pending())
            else:
                self.add(groups, None, judge, block, rhos, -1.0)
            self.add(groups, human, judge, block, rhos)
            counted = human
        self.ready[pos] = [human, judge, block_sum, block_count, counted, rhos]

    def take_ready(self) -> list[Entry]:
        """Remove and return the entries that are next in audit order (maybe none)."""
        out: list[Entry] = []
        ready = self.ready
        while self.applied in ready:
            out.append(ready.pop(self.applied))
            self.applied += 1
            self.waiting -= 1
        return out

    def settle(self, groups: dict[str, CertificateGroup], taken: Sequence[Entry]) -> None:
        """Remove the bounds of entries just taken by :meth:`take_ready` (before applying them)."""
        if not self.waiting:
            self.sums = None  # exact: no waiting unit left
            return
        if self.sums is None:
            return
        for e in taken:
            self.add(groups, e[4], e[1], (e[2], e[3]), e[5], -1.0)

    def claim(self, groups: dict[str, CertificateGroup]) -> None:
        """Offer each ``plugin_up`` test its wealth with the waiting units' bounds."""
        if not self.waiting or self.sums is None:
            return  # (without a label out of order, nothing beyond the applied rounds to claim)
        for cert, group in groups.items():
            sums = self.sums.get(cert)
            if sums is None:
                continue
            for t, s in zip(group.tests, sums, strict=True):
                t.claim(s)

    def rebuild(self, groups: dict[str, CertificateGroup], pending: Sequence[Waiting]) -> None:
        """Compute :attr:`sums` from scratch, from the ready units and ``pending``.

        ``pending``: ``(judge, block, rhos)`` of the waiting units whose label has not arrived.
        """
        self.sums = {}
        for e in self.ready.values():
            e[4] = e[0]
            self.add(groups, e[0], e[1], (e[2], e[3]), e[5])
        for judge, block, rhos in pending:
            self.add(groups, None, judge, block, rhos)

    # ------------------------------------------------------------------ snapshot
    def to_list(self) -> list[Any]:
        """JSON form ``[next, applied, waiting, [[pos, human, judge, bsum, bcount, rhos]], sums]``.

        ``sums`` is ``[[certificate, per-test per-cell sums]]``, or None when not built: saved
        so that a restore continues with the same floats; :meth:`adopt` checks them.

        Examples
        --------
        >>> o = AuditOrder(); _ = o.assign({}, 0.5, (0.0, 0), None)
        >>> _ = o.assign({}, 0.5, (0.0, 0), None)
        >>> o.resolve(1, 0.0, 0.5, 0.0, 0, None, {}, list)
        >>> o.to_list(), AuditOrder.from_list(o.to_list()).to_list() == o.to_list()
        ([2, 0, 2, [[1, 0.0, 0.5, 0.0, 0, None]], []], True)
        """
        return [self.next_position, self.applied, self.waiting,
                [[p, e[0], e[1], e[2], e[3], e[5]] for p, e in sorted(self.ready.items())],
                None if self.sums is None else
                [[c, [list(t) for t in v]] for c, v in self.sums.items()]]

    @classmethod
    def from_list(cls, v: Sequence[Any]) -> AuditOrder:
        """Inverse of :meth:`to_list`; the owner then calls :meth:`adopt` (it needs the groups)."""
        o = cls(int(v[0]), int(v[1]), waiting=int(v[2]))
        for p, human, judge, bsum, bcount, rhos in v[3]:
            o.ready[int(p)] = [None if human is None else float(human), float(judge),
                               float(bsum), int(bcount), None,
                               None if rhos is None else {
                                   str(c): [float(r) for r in rs] for c, rs in rhos.items()}]
        o.sums = None if v[4] is None else {
            str(c): [[float(x) for x in t] for t in tests] for c, tests in v[4]}
        return o

    def adopt(self, groups: dict[str, CertificateGroup], pending: Sequence[Waiting]) -> bool:
        """Check the restored :attr:`sums` against a rebuild; keep them if they agree.

        ``pending`` lists ``(judge, block, rhos)`` of the waiting units whose label has not
        arrived. Returns False when a saved value differs from the rebuilt one by more than float
        rounding, or the shapes differ: the snapshot was altered.
        """
        saved = self.sums
        if saved is None:  # built only once a label arrived out of order
            return not any(e[0] is not None for e in self.ready.values())
        self.rebuild(groups, pending)
        rebuilt = self.sums or {}
        if set(saved) != set(rebuilt):
            return False
        for c, tests in rebuilt.items():
            if len(saved[c]) != len(tests):
                return False
            for a, b in zip(saved[c], tests, strict=True):
                if len(a) != len(b) or any(
                        not abs(x - y) <= 1e-9 * (1.0 + abs(y)) for x, y in zip(a, b, strict=True)):
                    return False
        self.sums = saved  # the floats the live process had
        return True
