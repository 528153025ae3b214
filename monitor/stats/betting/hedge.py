"""The average of two e-processes read at the same audited units (a hedged claim).

:class:`HedgedPairs` receives, for each audited unit in audit order, two rows of per-test log
e-values: the per-unit (inverse-propensity) e-process's value *at that unit*
(:meth:`HedgedPairs.unit`, before the unaudited units after it) and the per-label e-process's
value *after that unit's round* (:meth:`HedgedPairs.label`). The k-th row of one side pairs
with the k-th row of the other (both advance in audit order only), whichever arrives first;
each pair gives ``log E = logaddexp(unit, label) - log 2`` per test, and a test crosses
(sticky until :meth:`restart`) when ``log E >= log(1/delta)``.

Examples
--------
>>> hp = HedgedPairs([math.log(20.0), math.log(20.0)])
>>> hp.unit([math.log(30.0), 0.0])
[]
>>> hp.label([math.log(20.0), 0.0], labelled=True)  # (30 + 20) / 2 = 25 >= 20
[0]
>>> hp.paired, hp.labels, hp.crossed_at_labels(0), round(math.exp(hp.combined(0)), 6)
(1, 1, 1, 25.0)
>>> HedgedPairs.from_state(hp.to_state()).to_state() == hp.to_state()
True

Notes
-----
Guarantee: under its null each test crosses with probability at most its delta. Let
``tau_1 < tau_2 < ...`` be the audit times (the units whose label is asked, in audit order).
The per-label process ``L_k`` (one round per audited unit) is a nonnegative supermartingale
with ``L_0 = 1`` on the filtration of the rounds; the per-unit process ``U_t`` (every unit) is
one on the unit filtration, so by optional sampling ``U_{tau_k}`` is one on the filtration at
the stopping times ``tau_k``, which contains the rounds' filtration plus the unaudited units.
Both being supermartingales for that common filtration ``G_k`` (a label round's factor has
conditional mean at most 1 given everything before its unit, the audit coin being independent
of the labels), ``(U_{tau_k} + L_k) / 2`` is a nonnegative supermartingale starting at 1 and
Ville's inequality bounds the chance it ever reaches ``1/delta``. Pairing ``U`` at any other
time (an unaudited unit's, or another audited unit's) with ``L_k`` is not covered: the
average of two processes at different times is not a supermartingale in general. A missing
label enters both sides at its worst value (each process' factor is monotone in the label),
which only lowers both. Assumptions: the coin is independent of the labels given the past
(certmon's salted hash) and its probability is known (``audit_rate``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["HedgedPairs"]

_KIND = "certmon.HedgedPairs"
LOG2 = math.log(2.0)


class HedgedPairs:
    """Pair two e-processes' log e-values per audited unit and claim on their average.

    Parameters
    ----------
    log_thresholds : sequence of float
        Each test's ``log(1/delta)``.
    """

    def __init__(self, log_thresholds: Sequence[float]) -> None:
        self.log_threshold = np.array([float(t) for t in log_thresholds])
        j = len(self.log_threshold)
        if j == 0:
            raise ValueError("HedgedPairs: at least one test")
        self._units: list[np.ndarray] = []  # per-unit rows not yet paired (audit order)
        self._labels: list[tuple[np.ndarray, bool]] = []  # per-label rows not yet paired
        self.paired = 0  # audited units paired so far
        self.labels = 0  # of which with a label (the others missing)
        self.last = np.zeros((3, j))  # unit, label, combined log e at the last paired unit
        self.max = np.zeros(j)  # largest combined log e since the test's start
        self.crossed = np.zeros(j, dtype=bool)
        self.at_cross = np.zeros((3, j))  # unit, label, combined at the crossing
        self.cross_labels = np.full(j, -1, dtype=np.int64)  # labels used at the crossing

    # ------------------------------------------------------------------ input
    def unit(self, row: Sequence[float]) -> list[int]:
        """Take the per-unit log e-values at the next audited unit; return new crossings."""
        self._units.append(self._row(row))
        return self._pair()

    def label(self, row: Sequence[float], labelled: bool) -> list[int]:
        """Take the per-label log e-values after the next round (``labelled`` False: missing)."""
        self._labels.append((self._row(row), bool(labelled)))
        return self._pair()

    def _row(self, row: Sequence[float]) -> np.ndarray:
        a = np.array([float(x) for x in row])
        if a.shape != self.log_threshold.shape or np.isnan(a).any():
            raise ValueError(f"HedgedPairs: a row of {a.shape} values (or NaN)")
        return a

    def _pair(self) -> list[int]:
        new: list[int] = []
        while self._units and self._labels:
            u = self._units.pop(0)
            lab, labelled = self._labels.pop(0)
            self.paired += 1
            self.labels += int(labelled)
            comb = np.logaddexp(u, lab) - LOG2
            self.last = np.stack([u, lab, comb])
            self.max = np.maximum(self.max, comb)
            hit = (comb >= self.log_threshold) & ~self.crossed
            if hit.any():
                self.crossed |= hit
                self.at_cross[:, hit] = self.last[:, hit]
                self.cross_labels[hit] = self.labels
                new += [int(j) for j in np.flatnonzero(hit)]
        return new

    def restart(self, tests: Sequence[int]) -> None:
        """Start tests ``tests`` afresh (both processes restart: wealth 1 from now on).

        Rows already received for units not yet paired are of the old processes: those
        tests' values in them become 0 (wealth 1).
        """
        j = np.asarray(list(tests), dtype=np.int64)
        if j.size == 0:
            return
        for u in self._units:
            u[j] = 0.0
        for lab, _ in self._labels:
            lab[j] = 0.0
        self.last[:, j] = 0.0
        self.max[j] = 0.0
        self.crossed[j] = False
        self.at_cross[:, j] = 0.0
        self.cross_labels[j] = -1

    # ------------------------------------------------------------------ reading
    def combined(self, j: int) -> float:
        """Test ``j``'s combined log e-value at the last paired unit."""
        return float(self.last[2, j])

    def crossed_at_labels(self, j: int) -> int | None:
        """Labels used when test ``j`` crossed (None before)."""
        v = int(self.cross_labels[j])
        return None if v < 0 else v

    @property
    def waiting(self) -> tuple[int, int]:
        """Rows waiting for their pair: ``(per-unit, per-label)``."""
        return len(self._units), len(self._labels)

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, Any]:
        """JSON-serializable state (floats exact)."""
        return {"kind": _KIND, "version": 1, "log_threshold": self.log_threshold.tolist(),
                "units": [u.tolist() for u in self._units],
                "labels": [[lab.tolist(), ok] for lab, ok in self._labels],
                "paired": self.paired, "labelled": self.labels, "last": self.last.tolist(),
                "max": self.max.tolist(), "crossed": self.crossed.tolist(),
                "at_cross": self.at_cross.tolist(), "cross_labels": self.cross_labels.tolist()}

    @classmethod
    def from_state(cls, d: dict[str, Any]) -> HedgedPairs:
        """Inverse of :meth:`to_state`; ``ValueError`` on another kind or a bad value."""
        if d.get("kind") != _KIND or d.get("version") != 1:
            raise ValueError("not a HedgedPairs state")
        hp = cls(d["log_threshold"])
        j = len(hp.log_threshold)
        hp._units = [hp._row(u) for u in d["units"]]
        hp._labels = [(hp._row(lab), bool(ok)) for lab, ok in d["labels"]]
        hp.paired, hp.labels = int(d["paired"]), int(d["labelled"])
        hp.last = np.array(d["last"], dtype=float)
        hp.max = np.array(d["max"], dtype=float)
        hp.crossed = np.array(d["crossed"], dtype=bool)
        hp.at_cross = np.array(d["at_cross"], dtype=float)
        hp.cross_labels = np.array(d["cross_labels"], dtype=np.int64)
        shapes = [(hp.last.shape, (3, j)), (hp.max.shape, (j,)), (hp.crossed.shape, (j,)),
                  (hp.at_cross.shape, (3, j)), (hp.cross_labels.shape, (j,))]
        if any(a != b for a, b in shapes) or not (0 <= hp.labels <= hp.paired):
            raise ValueError("HedgedPairs state: a value of the wrong shape or count")
        if hp._units and hp._labels:
            raise ValueError("HedgedPairs state: rows of both sides left unpaired")
        if (hp.crossed & (hp.at_cross[2] < hp.log_threshold - 1e-9)).any():
            raise ValueError("HedgedPairs state: a crossing below the threshold")
        return hp
