"""One model's active audit online: units judged one at a time, labels late or never.

:class:`ActiveAudit` is :class:`~monitor.stats.betting.active.ActiveBatch` with one copy, plus
pending labels. When a unit is judged its propensity, reliance and bets are fixed (from earlier
units and the labels arrived so far); an unaudited unit's factor is known at once; an audited
unit's factor waits for its label and, until then, counts at its worst value for each test
(label 1 for certify, 0 for violate: the factor is monotone in the label). A label that never
comes stays at its worst value for good (:meth:`ActiveAudit.missing`). The wealth is a product,
so the order in which labels arrive does not change it. A claim (crossing) is made on the lower
bound of the wealth now, with the pending units at their worst, or on the wealth at the time
just before the oldest audited unit still waiting (every unit before it is known: that is the
e-process at that time, as rounds applied in audit order), checked each time it grows.

Examples
--------
>>> aa = ActiveAudit(0.2, [(0.3, "certify"), (0.3, "violate")], [0.05, 0.05])
>>> tickets = []
>>> for i in range(400):
...     audited, pi, ticket = aa.judge(0.02, (i * 0.618) % 1.0)
...     if ticket is not None:
...         tickets.append(ticket)
>>> len(tickets) > 0, aa.status(0), aa.pending
(True, 'pending', 81)
>>> for t in tickets:
...     aa.label(t, 0.0)
>>> aa.status(0), aa.labels, aa.pending
('certified', 81, 0)
>>> ActiveAudit.from_state(aa.to_state()).to_state() == aa.to_state()
True

Notes
-----
Guarantee: as :class:`~monitor.stats.betting.active.ActiveBatch` (each test crosses under its
null with probability at most its delta), whatever the labels' delays and whichever never come:
a unit's bets are fixed at judge time from information then available, each claimed wealth is
at most the true wealth at some time (Ville's inequality bounds the largest of them), and a
missing label's unit keeps its worst factor. Assumptions: the coin is
independent of the unit's label given the past and the score (certmon's salted hash).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from monitor.stats.betting.active import CELLS, ActiveBatch, Test, cell_bets, mix
from monitor.stats.betting.active_growth import bet_cap
from monitor.stats.betting.bets import Side

__all__ = ["ActiveAudit"]

_KIND = "certmon.ActiveAudit"
_ARRAYS = ("hw", "hf", "ln", "ls", "floor", "m", "k", "rho", "ref", "cap", "lam", "logw",
           "labels", "crossed_labels", "crossed_units")


class ActiveAudit:
    """One model's active audit policy and its tests (see the module docstring).

    Parameters
    ----------
    budget : float
        ``audit_rate``, in (0, 1].
    tests : sequence of (alpha, side)
        The one-sided tests (a certificate is a certify and a violate test at its alpha).
    deltas : sequence of float
        Each test's level after multiplicity.
    c : float
        Cap fraction.
    policies : tuple of (floor / b, m), optional
        The candidate policies (:class:`~monitor.stats.betting.active.ActiveBatch`; ``UNIFORM``
        is the uniform audit); also records each settled audited unit's wealth
        (:meth:`take_settled`) when given.
    """

    def __init__(self, budget: float, tests: Sequence[Test], deltas: Sequence[float],
                 c: float = 0.95, policies: tuple[tuple[float, float], ...] | None = None) -> None:
        self._b = (ActiveBatch(budget, tests, deltas, reps=1, c=c) if policies is None
                   else ActiveBatch(budget, tests, deltas, reps=1, c=c, policies=policies))
        self._policies = policies
        # (policies given) per audited unit settled in audit order: (its id, per-test log e at
        # that unit, before the unaudited units after it), until taken
        self._settled: list[tuple[int, list[float]]] = []
        shape = (len(self._b.tests), CELLS)
        self._pend = np.zeros(shape)  # worst log factors waiting
        self._waiting = 0
        # the units before the oldest audited unit still waiting, all known: their wealth is
        # the e-process at that time (a claim, as rounds applied in audit order)
        self._prefix = np.zeros(shape)
        # after it, in judge order: per audited unit (by ticket id) its factor once known
        # (None while waiting) and the known factors of the unaudited units judged after it
        self._queue: dict[int, list[Any]] = {}
        self._max = np.zeros(len(self._b.tests))  # largest claimed log e (0 at the start)
        # per test: the first unit of its current epoch (units before it are not in its wealth)
        self._start = np.zeros(len(self._b.tests), dtype=np.int64)

    # ------------------------------------------------------------------ units
    def propensity(self, f: float) -> float:
        """Return the audit probability of a unit judged now with score ``f``."""
        return float(self._b.propensities(np.array([f]))[0])

    def judge(self, f: float, coin: float) -> tuple[bool, float, list[Any] | None]:
        """Take a judged unit: ``(audited, propensity, ticket)``.

        ``coin`` is the unit's uniform in [0, 1) (the salted hash). An audited unit's ticket
        (JSON) holds what its label needs; pass it to :meth:`label` or :meth:`missing`.
        """
        b = self._b
        fa = np.array([float(f)])
        pi = float(b.propensities(fa)[0])
        audited = coin < pi
        ticket: list[Any] | None = None
        if audited:
            worst = self._worst(f, pi)
            self._pend += worst
            self._waiting += 1
            ticket = [float(f), pi, [[float(b.rho[j, 0]), float(b.ref[j, 0]), float(b.cap[j, 0])]
                                     for j in range(len(b.tests))], b.n]
            self._queue[b.n] = [None, np.zeros_like(self._prefix)]
        else:
            factor = b.factors(fa, np.array([pi]), np.zeros(1), np.zeros(1))[:, 0, :]
            b.logw[:, 0, :] += factor
            if self._queue:
                self._queue[next(reversed(self._queue))][1] += factor
            else:
                self._prefix += factor
        b.observe(fa)
        self._check()
        return audited, pi, ticket

    def label(self, ticket: Sequence[Any], human: float) -> None:
        """Use the label of an audited unit, arrived now (in any order)."""
        f, pi, rho, lam = _unpack(ticket)
        # counted first (counts and bins only; the bets refit at the next unit), so a claim
        # this label makes states the labels used including it, as the alert does
        self._b.learn(np.array([f]), np.array([float(human)]), np.ones(1))
        self._settle(ticket, f, pi, rho, lam, self._factors(f, pi, rho, lam, human))
        self._check()

    def missing(self, ticket: Sequence[Any]) -> None:
        """Give up an audited unit's label: its worst factor stays for good."""
        f, pi, rho, lam = _unpack(ticket)
        self._settle(ticket, f, pi, rho, lam, None)
        self._check()

    def _settle(self, ticket: Sequence[Any], f: float, pi: float, rho: np.ndarray,
                lam: np.ndarray, actual: np.ndarray | None) -> None:
        worst = self._factors(f, pi, rho, lam, None)
        factor = worst if actual is None else actual
        if len(ticket) > 3:  # a unit judged before a test's restart is not in its wealth
            old = int(ticket[3]) < self._start
            worst, factor = np.where(old[:, None], 0.0, worst), np.where(old[:, None], 0.0, factor)
        self._waiting -= 1
        if self._waiting == 0:
            self._pend[:] = 0.0  # exact again (no rounding drift)
        else:
            self._pend -= worst
        self._b.logw[:, 0, :] += factor
        entry = self._queue.get(int(ticket[3])) if len(ticket) > 3 else None
        if entry is None:
            return
        entry[0] = factor
        while self._queue:  # the known prefix grows past every settled unit at its front
            first = next(iter(self._queue))
            head = self._queue[first]
            if head[0] is None:
                break
            if self._policies is not None:  # the e-process at this audited unit
                self._settled.append((first, mix(self._prefix + head[0]).tolist()))
            self._prefix += head[0] + head[1]
            del self._queue[first]
            self._claim(self._prefix)
        if not self._queue:
            self._prefix = self._b.logw[:, 0, :].copy()  # the same sum, without drift

    def _worst(self, f: float, pi: float) -> np.ndarray:
        b = self._b
        return self._factors(f, pi, b.rho[:, 0], b.lam[:, 0, :], None)

    def _factors(self, f: float, pi: float, rho: np.ndarray, lam: np.ndarray,
                 human: float | None) -> np.ndarray:
        """Log factors (J, C) of an audited unit; ``human`` None: each test's worst label."""
        out = np.empty((len(self._b.tests), CELLS))
        for j, (alpha, side) in enumerate(self._b.tests):
            h = (1.0 if side == "certify" else 0.0) if human is None else float(human)
            rf = float(rho[j]) * f
            y = rf + (h - rf) / pi
            x = (alpha - y) if side == "certify" else (y - alpha)
            out[j] = np.log1p(lam[j] * x)
        return out

    def _check(self) -> None:
        self._claim(self._b.logw[:, 0, :] + self._pend)

    def _claim(self, logw: np.ndarray) -> None:
        """Claim on a lower bound ``logw`` (J, C) of the wealth at some time."""
        b = self._b
        log_e = mix(logw)
        self._max = np.maximum(self._max, log_e)
        new = (log_e >= b.log_threshold) & ~b.crossed[:, 0]
        if new.any():
            b.crossed[:, 0] |= new
            b.crossed_labels[:, 0] = np.where(new, b.labels[0], b.crossed_labels[:, 0])
            b.crossed_units[:, 0] = np.where(new, b.n, b.crossed_units[:, 0])

    def restart(self, tests: Sequence[int]) -> None:
        """Start tests ``tests`` afresh (a new epoch): wealth 1 from the next unit judged.

        Units judged before now, pending or not, never enter these tests' wealth again (their
        settled factors are left out, :meth:`_settle`); bets, reliances and the policy keep
        what they learned (they are fixed from earlier units, so they stay predictable).
        """
        b = self._b
        j = np.asarray(list(tests), dtype=np.int64)
        if j.size == 0:
            return
        b.logw[j] = 0.0
        self._pend[j] = 0.0
        self._prefix[j] = 0.0
        for entry in self._queue.values():  # all judged before the restart
            entry[1][j] = 0.0
            if entry[0] is not None:
                entry[0][j] = 0.0
        self._max[j] = 0.0
        b.crossed[j] = False
        b.crossed_labels[j] = -1
        b.crossed_units[j] = -1
        self._start[j] = b.n

    def take_settled(self) -> list[tuple[int, list[float]]]:
        """Remove and return the audited units settled since the last call, in audit order.

        Each as ``(unit id, per-test log e-value at that unit)``: the wealth of every unit up
        to it (the unaudited units after it not yet), pending none (only with ``policies``).
        """
        out, self._settled = self._settled, []
        return out

    # ------------------------------------------------------------------ reading
    @property
    def pi_min(self) -> float:
        """The smallest propensity of the current policy (every unit's is at least this).

        The units whose coin is below it are audited whatever their score: a uniform
        random sample of the stream.
        """
        return float(self._b.pi_min[0])

    def status(self, j: int) -> str:
        """``"certified"`` / ``"violated"`` once test ``j`` crossed (by its side), else pending."""
        if not self._b.crossed[j, 0]:
            return "pending"
        return "certified" if self._b.tests[j][1] == "certify" else "violated"

    def log_e(self, j: int) -> float:
        """Test ``j``'s claimed log e-value (pending labels at their worst)."""
        return float(mix(self._b.logw[j, 0, :] + self._pend[j]))

    def max_log_e(self, j: int) -> float:
        """Test ``j``'s largest claimed log e-value so far (at a crossing: its evidence)."""
        return float(self._max[j])

    def crossed_at_labels(self, j: int) -> int | None:
        """Labels used when test ``j`` crossed (None before)."""
        v = int(self._b.crossed_labels[j, 0])
        return None if v < 0 else v

    @property
    def labels(self) -> int:
        """Human labels used so far (arrived labels of audited units)."""
        return int(self._b.labels[0])

    @property
    def pending(self) -> int:
        """Audited units whose label has not arrived."""
        return self._waiting

    @property
    def units(self) -> int:
        """Judged units so far."""
        return self._b.n

    @property
    def tests(self) -> list[tuple[float, Side]]:
        """The one-sided tests."""
        return list(self._b.tests)

    def policy(self) -> dict[str, float]:
        """Return the current policy: ``floor``, ``uniform_share``, ``scale`` and ``pi_min``."""
        b = self._b
        return {"floor": float(b.floor[0]), "uniform_share": float(b.m[0]),
                "scale": float(b.k[0]), "pi_min": float(b.pi_min[0])}

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, Any]:
        """JSON-serializable state (floats exact)."""
        b = self._b
        return {"kind": _KIND, "version": 1, "budget": b.budget, "c": b.c,
                "tests": [[a, s] for a, s in b.tests],
                "deltas": [math.exp(-t) for t in b.log_threshold.tolist()],
                "log_threshold": b.log_threshold.tolist(), "n": b.n,
                "next_refit": b.next_refit, "crossed": b.crossed.tolist(),
                "pend": self._pend.tolist(), "waiting": self._waiting,
                "prefix": self._prefix.tolist(), "max": self._max.tolist(),
                "queue": [[k, None if v[0] is None else v[0].tolist(), v[1].tolist()]
                          for k, v in self._queue.items()],
                "start": self._start.tolist(),
                **({} if self._policies is None else {
                    "policies": [list(p) for p in self._policies],
                    "settled": [[k, v] for k, v in self._settled]}),
                **{name: getattr(b, name).tolist() for name in _ARRAYS}}

    @classmethod
    def from_state(cls, d: dict[str, Any]) -> ActiveAudit:
        """Inverse of :meth:`to_state`; raises ``ValueError`` on another kind or version."""
        if d.get("kind") != _KIND or d.get("version") != 1:
            raise ValueError("not an ActiveAudit state")
        tests = [(float(a), str(s)) for a, s in d["tests"]]
        for _, s in tests:
            if s not in ("certify", "violate"):
                raise ValueError(f"ActiveAudit state: bad side {s!r}")
        sides: list[Test] = [(a, "certify" if s == "certify" else "violate") for a, s in tests]
        pols = (None if "policies" not in d
                else tuple((float(a), float(m)) for a, m in d["policies"]))
        aa = cls(float(d["budget"]), sides, [float(x) for x in d["deltas"]], float(d["c"]), pols)
        aa._settled = [(int(k), [float(x) for x in v]) for k, v in d.get("settled", [])]
        b = aa._b
        b.log_threshold = np.array(d["log_threshold"], dtype=float)
        b.n, b.next_refit = int(d["n"]), int(d["next_refit"])
        b.crossed = np.array(d["crossed"], dtype=bool)
        for name in _ARRAYS:
            cur = getattr(b, name)
            new = np.array(d[name], dtype=cur.dtype)
            if new.shape != cur.shape:
                raise ValueError(f"ActiveAudit state: {name} has shape {new.shape}")
            setattr(b, name, new)
        aa._pend = np.array(d["pend"], dtype=float).reshape(aa._pend.shape)
        aa._waiting = int(d["waiting"])
        shape = aa._pend.shape
        aa._prefix = np.array(d["prefix"], dtype=float).reshape(shape)
        aa._max = np.array(d["max"], dtype=float).reshape(aa._max.shape)
        aa._queue = {int(k): [None if r is None else np.array(r, dtype=float).reshape(shape),
                              np.array(t, dtype=float).reshape(shape)]
                     for k, r, t in d["queue"]}
        if "start" in d:  # (absent from earlier snapshots: no restart yet)
            aa._start = np.array(d["start"], dtype=np.int64).reshape(aa._start.shape)
        aa._validate()
        return aa

    def same_configuration(self, other: ActiveAudit) -> bool:
        """Whether ``other`` has this one's budget, cap fraction, tests, thresholds, policies."""
        a, b = self._b, other._b
        return (a.budget == b.budget and a.c == b.c and a.tests == b.tests
                and self._policies == other._policies
                and a.log_threshold.tolist() == b.log_threshold.tolist())

    def _validate(self) -> None:
        """Refuse a loaded state no run could have produced (``ValueError``)."""
        b = self._b
        arrays = [getattr(b, name) for name in _ARRAYS] + [self._pend, self._prefix, self._max]
        arrays += [x for v in self._queue.values() for x in v if x is not None]
        if not all(np.isfinite(np.asarray(x, dtype=float)).all() for x in arrays):
            raise ValueError("ActiveAudit state: a value is not finite")
        if ((b.hw < 0).any() or (b.ln < 0).any() or (b.labels < 0).any() or b.n < 0
                or (self._start < 0).any() or (self._start > b.n).any()):
            raise ValueError("ActiveAudit state: a negative count")
        if self._waiting != sum(v[0] is None for v in self._queue.values()):
            raise ValueError("ActiveAudit state: waiting units do not match the queue")
        if not ((b.floor > 0).all() and (b.floor <= 1).all() and (b.m >= 0).all()
                and (b.m <= 1).all() and (b.rho >= 0).all() and (b.rho <= 1).all()):
            raise ValueError("ActiveAudit state: a policy or reliance out of range")
        for j, (alpha, side) in enumerate(b.tests):
            cap = np.asarray(bet_cap(alpha, b.rho[j], b.pi_min, side, b.c))
            if (b.lam[j] < 0).any() or (b.lam[j] > cap[:, None] * (1 + 1e-12)).any():
                raise ValueError("ActiveAudit state: a bet beyond the cap of its policy")
        if (b.crossed[:, 0] & (self._max < b.log_threshold - 1e-9)).any():
            raise ValueError("ActiveAudit state: a crossing below the threshold")


def _unpack(ticket: Sequence[Any]) -> tuple[float, float, np.ndarray, np.ndarray]:
    """``(f, pi, rho, lam)`` of a ticket ``[f, pi, [[rho, ref, cap] per test], id]``."""
    tests = np.array(ticket[2], dtype=float).reshape(-1, 3)
    return float(ticket[0]), float(ticket[1]), tests[:, 0], cell_bets(tests[:, 1], tests[:, 2])
