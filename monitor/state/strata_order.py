"""Stratified labels in audit order: one reorder buffer per stratum of one model.

Each stratified audit (uniform or top-up) of stratum ``k`` gets a *stratum position* (0, 1, 2,
... per stratum) when its unit is judged; its label is applied to the stratified estimates
(Cer-Eval, StratPPI) strictly in that order, never in the order labels arrive: a label that
arrives before an earlier unit's of the same stratum waits here until every earlier position of
the stratum is resolved, by its label or as *missing* (``None``: the label timed out or its unit
was evicted).

Examples
--------
>>> o = StrataOrder(2)
>>> a, b = o.assign(0), o.assign(0)
>>> o.resolve(0, b, 0.0, 0.1)          # b's label first: it waits for a
True
>>> o.take_ready(0)
[]
>>> o.resolve(0, a, None, 0.9)         # a is missing for good
True
>>> o.take_ready(0)                    # both, in audit order
[(None, 0.9), (0.0, 0.1)]

Notes
-----
Why (``docs/guarantees.md``, "Late, reordered and missing labels"): the stratified intervals
are valid for the stratum's labels in the order its units were audited, a sequence of draws
from the stratum chosen before their losses existed. Applied in arrival order, the labels seen
at any time are the ones that came back fastest, a sample biased whenever the delay depends on
the label.
"""

from __future__ import annotations

from typing import Any

__all__ = ["StrataOrder"]

Resolved = tuple[float | None, float]  # (human loss or None: missing, judge loss)


class StrataOrder:
    """Per-stratum reorder buffer (see the module docstring).

    Parameters
    ----------
    n_strata : int
        Number of strata.
    start : list of int, optional
        Positions already used and applied per stratum (a snapshot written before labels were
        ordered: its audits, applied when their labels arrived).
    """

    def __init__(self, n_strata: int, start: list[int] | None = None) -> None:
        base = [0] * n_strata if start is None else list(start)
        self.next = list(base)
        self.applied = list(base)
        self.ready: list[dict[int, Resolved]] = [{} for _ in range(n_strata)]

    def assign(self, k: int) -> int:
        """Give the next position of stratum ``k`` to a unit audited now."""
        pos = self.next[k]
        self.next[k] = pos + 1
        return pos

    def resolve(self, k: int, pos: int, human: float | None, judge: float) -> bool:
        """Record position ``pos``'s label (None: missing); False for a position not waiting."""
        if not self.applied[k] <= pos < self.next[k] or pos in self.ready[k]:
            return False
        self.ready[k][pos] = (human, judge)
        return True

    def take_ready(self, k: int) -> list[Resolved]:
        """Remove and return stratum ``k``'s entries that are next in audit order."""
        out: list[Resolved] = []
        ready = self.ready[k]
        while self.applied[k] in ready:
            out.append(ready.pop(self.applied[k]))
            self.applied[k] += 1
        return out

    @property
    def waiting(self) -> int:
        """Audited stratified units whose label is not applied yet (pending or waiting)."""
        return sum(n - a for n, a in zip(self.next, self.applied, strict=True))

    @property
    def blocked(self) -> int:
        """Labels that arrived (or went missing) and wait for an earlier position's."""
        return sum(len(r) for r in self.ready)

    # ------------------------------------------------------------------ snapshot
    def to_list(self) -> list[Any]:
        """JSON form ``[[next, applied, [[pos, human, judge], ...]] per stratum]``.

        Examples
        --------
        >>> o = StrataOrder(1); _ = o.assign(0); _ = o.assign(0); _ = o.resolve(0, 1, 1.0, 0.0)
        >>> o.to_list(), StrataOrder.from_list(o.to_list(), 1).to_list() == o.to_list()
        ([[2, 0, [[1, 1.0, 0.0]]]], True)
        """
        return [[n, a, [[p, h, j] for p, (h, j) in sorted(r.items())]]
                for n, a, r in zip(self.next, self.applied, self.ready, strict=True)]

    @classmethod
    def from_list(cls, v: Any, n_strata: int) -> StrataOrder:
        """Inverse of :meth:`to_list`; raises ValueError on anything inconsistent."""
        if not isinstance(v, list) or len(v) != n_strata:
            raise ValueError(f"audit order: {n_strata} strata expected")
        o = cls(n_strata)
        for k, item in enumerate(v):
            nxt, applied, ready = item
            for x in (nxt, applied):
                if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= 2**53:
                    raise ValueError("audit order: positions must be non-negative integers")
            if applied > nxt or not isinstance(ready, list) or len(ready) > nxt - applied:
                raise ValueError("audit order: applied after the next position")
            o.next[k], o.applied[k] = nxt, applied
            for p, h, j in ready:
                if (isinstance(p, bool) or not isinstance(p, int) or not applied < p < nxt
                        or p in o.ready[k]):
                    raise ValueError(f"audit order: waiting position {p!r} outside "
                                     f"({applied}, {nxt})")
                for x in (j,) if h is None else (h, j):
                    if (isinstance(x, bool) or not isinstance(x, int | float)
                            or not 0.0 <= x <= 1.0):
                        raise ValueError(f"audit order: loss {x!r} outside [0, 1]")
                o.ready[k][p] = (None if h is None else float(h), float(j))
        return o
