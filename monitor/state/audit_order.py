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
audit-ordered wealth to each test (:meth:`~monitor.stats.betting.autoeval.AutoEvalTest.claim`).

Examples
--------
>>> o = AuditOrder()
>>> a, b = o.assign(), o.assign()
>>> o.resolve(b, 0.0, 0.1, 0.0, 0, None, {})        # b's label first: it waits for a
>>> o.take_ready()
[]
>>> o.resolve(a, 1.0, 0.9, 0.0, 0, None, {})
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

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from monitor.stats.betting.risk_group import CertificateGroup

__all__ = ["AuditOrder"]

# [human or None, judge, block_sum, block_count, human counted in sums, reliances or None]
Entry = list[Any]
Rhos = dict[str, list[float]] | None  # per certificate, per plugin_up test (None: unknown)


def _terms(group: CertificateGroup, human: float | None, judge: float,
           block: tuple[float, int], rhos: list[float] | None) -> list[list[float]]:
    mean = block[0] / block[1] if block[1] else None
    out: list[list[float]] = []
    for i, t in enumerate(group.tests):
        terms = t.bound_terms(human, judge, mean, None if rhos is None else rhos[i])
        if terms is not None:
            out.append(terms)
    return out


@dataclass(slots=True)
class AuditOrder:
    """Reorder buffer of one model's audited units, with the bounds of the unapplied ones.

    ``next_position`` positions were given; rounds ``[0, applied)`` were applied (or taken as
    missing); ``ready`` holds resolved positions at or after ``applied`` waiting for an
    earlier one; ``waiting`` counts the positions at or after ``applied`` (pending or ready).
    ``sums`` (derived, not saved) holds, per certificate and ``plugin_up`` test, the per-cell
    sum of the waiting units' log factor bounds.
    """

    next_position: int = 0
    applied: int = 0
    ready: dict[int, Entry] = field(default_factory=dict)
    waiting: int = 0
    sums: dict[str, list[list[float]]] = field(default_factory=dict)

    def assign(self) -> int:
        """Give the next audit position to a unit judged now."""
        pos = self.next_position
        self.next_position = pos + 1
        self.waiting += 1
        return pos

    def add(self, groups: dict[str, CertificateGroup], human: float | None, judge: float,
            block: tuple[float, int], rhos: Rhos, sign: float = 1.0) -> None:
        """Add (``sign`` -1: remove) one waiting unit's log factor bounds to :attr:`sums`.

        ``rhos``: the unit's reliances, fixed when it was judged (None: unknown, any in [0, 1]).
        """
        for cert, group in groups.items():
            terms = _terms(group, human, judge, block, None if rhos is None else rhos.get(cert))
            if not terms:
                continue
            sums = self.sums.get(cert)
            if sums is None:
                sums = self.sums[cert] = [[0.0] * len(t) for t in terms]
            for s, t in zip(sums, terms, strict=True):
                for k, v in enumerate(t):
                    s[k] += sign * v

    def resolve(self, pos: int, human: float | None, judge: float, block_sum: float,
                block_count: int, rhos: Rhos, groups: dict[str, CertificateGroup]) -> None:
        """Record the label of position ``pos`` (None: missing for good).

        A position after ``applied`` keeps waiting; its bound is updated to its label.
        """
        counted = None
        if human is not None and pos != self.applied:
            block = (block_sum, block_count)
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
            self.sums = {}  # exact: no waiting unit left
            return
        for e in taken:
            self.add(groups, e[4], e[1], (e[2], e[3]), e[5], -1.0)

    def claim(self, groups: dict[str, CertificateGroup]) -> None:
        """Offer each ``plugin_up`` test its wealth with the waiting units' bounds."""
        if not self.waiting:
            return
        for cert, group in groups.items():
            sums = self.sums.get(cert)
            if sums is None:
                continue
            tests = group.tests
            for t, s in zip(tests, sums, strict=True):
                t.claim(s)

    def rebuild(self, groups: dict[str, CertificateGroup],
                pending: Sequence[tuple[float, tuple[float, int], Rhos]]) -> None:
        """Recompute :attr:`sums` from scratch (after a restore).

        ``pending`` lists ``(judge, block, rhos)`` of the waiting units whose label has not
        arrived.
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

        ``sums`` is ``[[certificate, per-test per-cell sums]]`` (empty when nothing waits): saved
        so that a restore continues with the same floats; :meth:`adopt` checks them.

        Examples
        --------
        >>> o = AuditOrder(); _ = o.assign(); _ = o.assign()
        >>> o.resolve(1, 0.0, 0.5, 0.0, 0, None, {})
        >>> o.to_list(), AuditOrder.from_list(o.to_list()).to_list() == o.to_list()
        ([2, 0, 2, [[1, 0.0, 0.5, 0.0, 0, None]], []], True)
        """
        return [self.next_position, self.applied, self.waiting,
                [[p, e[0], e[1], e[2], e[3], e[5]] for p, e in sorted(self.ready.items())],
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
        o.sums = {str(c): [[float(x) for x in t] for t in tests] for c, tests in v[4]}
        return o

    def adopt(self, groups: dict[str, CertificateGroup],
              pending: Sequence[tuple[float, tuple[float, int], Rhos]]) -> bool:
        """Check the restored :attr:`sums` against a rebuild; keep them if they agree.

        ``pending`` lists ``(judge, block, rhos)`` of the waiting units whose label has not
        arrived.
        Returns False (and keeps the rebuilt sums) when a saved value differs from the rebuilt
        one by more than float rounding, or the shapes differ: the snapshot was altered.
        """
        saved = self.sums
        self.rebuild(groups, pending)
        rebuilt = self.sums
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
