"""Hedged confidence sequences of several methods in a few hundred bytes per certificate.

The two-sided betting sequence of :mod:`monitor.stats.betting.confseq` keeps one wealth per grid
point, rho and side (a 1000-point grid: about 160 kB per certificate). Here every rho's bets are
the same for all candidate means, and each side's log-wealth at *every* ``m`` is bounded below by
a quadratic in ``m`` (Fan's inequality, :mod:`monitor.stats.betting.quadratic_wealth`) whose five
coefficients are running sums. The state is those sums, the WSR statistics and the bounds.
Used by :class:`monitor.stats.betting.risk_group.CertificateGroup` (``cs_kind = "bernstein"``,
the default) and :class:`monitor.stats.betting.risk.RiskMonitor`.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from monitor.stats.betting.bets import BetConfig
from monitor.stats.betting.confseq_bernstein_block import SingleSequenceBlockSums
from monitor.stats.betting.confseq_bernstein_edges import IntervalNarrowing, next_rejections
from monitor.stats.betting.confseq_bernstein_state import (
    FORMAT,
    BernsteinDynamics,
    check_format,
    read_dynamics,
    sequences_state,
)
from monitor.stats.betting.grid_batch import wsr_rounds_stats
from monitor.stats.betting.grid_wealth import edge_limit
from monitor.stats.betting.members import BernsteinMember
from monitor.stats.betting.quadratic_wealth import (
    N_SUMS,
    fold_sums,
    round_terms,
)
from monitor.stats.state_contract import restorer

__all__ = ["FORMAT", "BernsteinMember", "BernsteinSequences", "block_sums", "flush_many"]

FloatArray = npt.NDArray[np.float64]
_CHUNK = 32  # rounds of a bet block; buffered rounds are applied when their block completes
# sequences flushed in one vectorized pass: the arrays of a pass are about
# batch x 32 rounds x 5 sums x rows x 8 bytes each (15 MB at 512 sequences of 23 rows), where
# 5,000 models in one pass took 180 MB at once
_FLUSH_BATCH = 512


def block_sums(seqs: Sequence[BernsteinSequences], qs: FloatArray
               ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Return the sums after each round of a bet block, for sequences of one configuration.

    ``qs`` is ``(N, k, R)``: sequence ``n``'s observations ``q = h + rho (b - f)`` of its next
    ``k`` rounds (rows beyond a sequence's own rounds are ignored padding). Returns ``(up, low,
    totals, devs)``: the upper and lower tests' quadratic sums ``(N, k, 5, R)`` and the WSR
    sums ``(N, k, R)`` after each round, from each sequence's current sums and its block caps.
    Element by element the same float operations as for one sequence, so each slice is what a
    sequence alone gets.
    """
    first = seqs[0]
    g = first.grid_size
    t0 = np.array([s._applied for s in seqs], dtype=np.int64)
    lams, totals, devs = wsr_rounds_stats(qs, t0, first._log_inv_delta, first.bet.horizon,
                                          first._mu0, first._var0,
                                          np.array([s.total for s in seqs]),
                                          np.array([s.dev for s in seqs]))
    lo = np.array([[e[0] for e in s._cap_edges] for s in seqs])[:, first._row_member] / g
    hi = np.array([[e[1] for e in s._cap_edges] for s in seqs])[:, first._row_member] / g
    sums = np.stack([s.sums for s in seqs])  # (N, 2, 5, R)
    c = first.bet.c
    rho = first._row_rho
    cum = []
    for side, span in enumerate((1.0 + rho - lo, hi + rho)):
        lam = np.minimum(lams, (c / span)[:, None, :])  # upper: c / (M - l); lower: c / (u + rho)
        zmin = lam * (lo[:, None, :] - qs) if side == 0 else lam * (qs - hi[:, None, :])
        terms = round_terms(lam, qs, zmin)  # (5, N, k, R); zmin >= -c
        cum.append(fold_sums(sums[:, side], np.moveaxis(terms, 0, -2), axis=1))
    return cum[0], cum[1], totals, devs


class BernsteinSequences:
    """Anytime-valid two-sided confidence sequences of the risk, one per method, in O(S) state.

    Parameters
    ----------
    delta : float
        Miscoverage level of every member's sequence, ``0 < delta < 1``.
    rhos : sequence of float
        Reliance factors in [0, 1] (e.g. the union of the methods' rhos).
    bet : BetConfig
        Bets: anytime WSR (``horizon`` and ``c`` of a ``"wsr"`` config; other rules use anytime
        WSR with ``c = 1/2``).
    grid_size : int
        ``G >= 2``: bounds are multiples of ``1 / G``, and the points ``j / G`` are tested.
    members : sequence of list of int
        Each member's indices into ``rhos`` (a method's rho set).

    Examples
    --------
    >>> g = BernsteinSequences(0.05, [0.0, 0.5, 1.0], BetConfig(), 1000, [[0], [0, 1, 2]])
    >>> rng = np.random.default_rng(0)
    >>> for _ in range(2000):
    ...     h = float(rng.random() < 0.2); g.update(h, h, 0.2)
    >>> lo, hi = g.members[1].lower, g.members[1].upper
    >>> lo < 0.2 < hi and hi - lo < 0.1
    True
    >>> BernsteinSequences.from_state(g.to_state()).to_state() == g.to_state()
    True

    Notes
    -----
    *Guarantee.* If each round's effective observation ``q_s = h + rho_s (b - f)`` (``q_s = h``
    without a synthetic block) has conditional mean ``R`` given the past, then for each member,
    with probability at least ``1 - delta``, ``lower <= R <= upper`` at every round
    simultaneously.

    *Tests.* As in :class:`~monitor.stats.betting.confseq.HedgedConfidenceSequence`: each grid
    point ``m`` is tested from above (H0: ``R >= m``, factor ``1 + lam (m - q)``) and below
    (H0: ``R <= m``, factor ``1 + lam (q - m)``) at level ``delta / 2`` each, with the uniform
    rho mixture, and the running intersection of the accepted hull is reported. Here the bet of
    rho ``s`` in round ``t`` is the same for all ``m``: the anytime WSR bet capped at
    ``c / (M_s - l)`` (upper side) or ``c / (u + rho_s)`` (lower side), with ``[l, u]`` the
    bounds at the start of the round's block of 32 rounds (predictable) and
    ``[-rho_s, 1 + rho_s]`` the range of ``q_s``.

    *Why valid.* Let ``tau`` be the first round at which ``R`` leaves the interval; before
    ``tau``, ``R`` lies in every block's ``[l, u]``. Then every upper factor ``1 + z`` at
    ``m = R`` has ``z = lam (R - q) >= z0 = lam (l - q) >= -c > -1``, and likewise below, so
    the wealth at ``R`` stopped at ``tau`` is a nonnegative supermartingale (the mixture too).
    Fan's inequality ``log(1 + z) >= z + g(z0) z^2`` for ``z >= z0`` (``g`` increasing,
    :func:`~monitor.stats.betting.quadratic_wealth.fan_slope`) holds path by path, so ``z0`` may use
    the round's own ``q``, and makes the quadratic ``Q_s(R)`` a lower bound on each rho's
    log-wealth. ``R`` can only leave when a side rejects it, i.e. when its mixture of
    ``exp(Q_s(R))`` reaches ``2 / delta``; then the true mixture wealth at ``R`` did too, which
    by Ville's inequality has probability at most ``delta / 2`` per side. Rejections need no
    monotonicity in ``m``: the new upper bound is one cell above the largest tested point the
    upper test accepts (and symmetrically), and ``R`` is accepted until ``tau``.

    *Cost.* State: per rho row, two WSR sums and ``2 x 5`` quadratic sums; per member, two
    edges. Rounds are buffered (up to the end of their block of 32, as ``(h, b - f)`` pairs)
    and applied in one vectorized pass (:class:`~monitor.stats.betting.confseq_bernstein_block.
    SingleSequenceBlockSums`; :meth:`flush_all` does it for many sequences of one configuration at
    once with :func:`block_sums`, e.g. at a read of a fleet); a bound can only move when the tested
    point just inside it is rejected, which is checked with a cheap vectorized filter (skipped
    while no log-wealth bound can reach the threshold) and then decided exactly in Python
    floats at that round, and the moves from there are :class:`~monitor.stats.betting.
    confseq_bernstein_edges.IntervalNarrowing`'s, so the outcome never depends on how rounds were
    batched.

    *Width.* Fan's bound is exact at ``z = z0`` and ``z = 0`` and its coefficient
    ``g(z0)`` is near ``-1/2`` once bets are small, so little wealth is lost; the caps use the
    bounds of the block's start, which costs width in the first rounds only. Median width at
    1000 rounds: 0.90-1.01x the wealth grid's (``benchmarks/confseq_width.py``).
    """

    def __init__(self, delta: float, rhos: Sequence[float], bet: BetConfig, grid_size: int,
                 members: Sequence[Sequence[int]]) -> None:
        if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not (
                0.0 < float(delta) < 1.0):
            raise ValueError(f"delta must satisfy 0 < delta < 1, got {delta!r}")
        r = [float(v) for v in rhos]
        if not r or not all(0.0 <= v <= 1.0 for v in r):
            raise ValueError(f"rhos must be non-empty values in [0, 1], got {list(rhos)!r}")
        if isinstance(grid_size, bool) or not isinstance(grid_size, int) or grid_size < 2:
            raise ValueError(f"grid_size must be an int >= 2, got {grid_size!r}")
        if not members or any(not m or min(m) < 0 or max(m) >= len(r) for m in members):
            raise ValueError(f"members must be non-empty index lists into rhos, got {members!r}")
        self.delta = float(delta)
        self.rhos = r
        self.bet = bet if bet.rule == "wsr" else BetConfig(rule="wsr")
        self.grid_size = grid_size
        self.log_threshold = -math.log(self.delta / 2.0)
        self._log_inv_delta = self.log_threshold  # WSR bets tuned for delta / 2, as the grid
        self._member_idx = [list(m) for m in members]
        src = [i for m in self._member_idx for i in m]
        self._row_rho = np.array([r[i] for i in src])
        self._row_member = np.repeat(np.arange(len(members)),
                                     [len(m) for m in self._member_idx])
        self._mu0 = [0.5] * len(src)
        self._var0 = (0.25 * (1.0 + 2.0 * self._row_rho) ** 2).tolist()
        self.members: list[BernsteinMember] = []
        start = 0
        for j, m in enumerate(self._member_idx):
            self.members.append(BernsteinMember(self, j, slice(start, start + len(m))))
            start += len(m)
        # each member's rows are contiguous: segment reductions per member (read-only)
        self._row_starts = np.array([m.rows.start for m in self.members])
        self._row_counts = np.array([len(m) for m in self._member_idx], dtype=np.float64)
        self.rounds = 0
        self._applied = 0
        self.total = [0.0] * len(src)
        self.dev = [0.0] * len(src)
        self.sums = np.zeros((2, N_SUMS, len(src)))
        # the bounds the bets of the current block of _CHUNK rounds are capped with
        self._cap_edges = [(m.lo_edge, m.hi_edge) for m in self.members]
        self._pending = array("d")  # (h, b - f) of buffered rounds
        # what sequences flushed together (flush_sequences) must share
        self._layout = (self.delta, self.grid_size, self.bet, tuple(r),
                        tuple(tuple(m) for m in self._member_idx))
        self._kernel = SingleSequenceBlockSums(self._row_rho, self._row_member.tolist(), self._mu0,
                                   self._var0, self.bet.c, self._log_inv_delta,
                                   self.bet.horizon, grid_size, _CHUNK)

    def spawn(self) -> BernsteinSequences:
        """Return fresh sequences of this configuration, sharing its read-only row layout.

        Only sequences that have seen no round may be spawned from.

        Examples
        --------
        >>> proto = BernsteinSequences(0.1, [0.0, 1.0], BetConfig(), 100, [[0], [0, 1]])
        >>> a = proto.spawn(); a.update(0.0, 0.0, 0.1)
        >>> proto.spawn().to_state() == proto.to_state(), a.rounds
        (True, 1)
        """
        if self.rounds:
            raise ValueError("spawn from sequences that have seen no round")
        new = BernsteinSequences.__new__(BernsteinSequences)  # copy.copy, minus its protocol
        new.__dict__.update(self.__dict__)
        new.members = [BernsteinMember(new, m.index, m.rows) for m in self.members]
        new.total, new.dev = list(self.total), list(self.dev)
        new.sums = np.zeros_like(self.sums)
        new._cap_edges = list(self._cap_edges)
        new._pending = array("d")
        return new

    # ------------------------------------------------------------------ rounds
    def update(self, human: float, judge: float, block_mean: float | None) -> None:
        """One validated round (losses already checked to be floats in [0, 1])."""
        self.rounds += 1
        pending = self._pending
        pending.append(human)
        pending.append(0.0 if block_mean is None else block_mean - judge)
        # apply once the current bet block is complete (the result does not depend on it)
        if len(pending) >= 2 * (_CHUNK - self._applied % _CHUNK):
            self.flush()

    def penalize(self, judge: float, block_mean: float | None) -> None:
        """One round whose label is missing for good, at each side's worst label.

        The upper test (H0: ``R >= m``, factor ``1 + lam (m - q)``, which yields the upper
        bound) sees the label 1, the lower test (H0: ``R <= m``, yields the lower bound) the
        label 0: each factor is at most what the real label would have given. The round's bets
        are those of an ordinary round (from earlier rounds only); the WSR statistics that
        later bets use take the judge's loss for the label. Counted in :attr:`rounds`.

        Examples
        --------
        >>> g = BernsteinSequences(0.1, [0.0, 1.0], BetConfig(), 100, [[0], [0, 1]])
        >>> for _ in range(500):   # every label missing: nothing is learnt about R
        ...     g.penalize(0.2, 0.2)
        >>> [(m.lower, m.upper) for m in g.members], g.rounds
        ([(0.0, 1.0), (0.0, 1.0)], 500)
        >>> for i in range(500):
        ...     g.update(float(i % 5 == 0), 0.2, 0.2); g.penalize(0.2, 0.2)
        >>> m = g.members[0]   # half missing: R is known to lie in about [0.1, 0.6] only
        >>> bool(m.lower < 0.1 and m.upper > 0.55), g.rounds
        (True, 1500)

        Notes
        -----
        *Guarantee.* With the same bets, the real labels' wealth at ``m = R`` is a nonnegative
        supermartingale (the bets are predictable: fixed from earlier rounds, the imputed
        statistics included), and each penalized factor is at most its real one and still at
        least ``1 - c`` (``q`` stays in ``[-rho, 1 + rho]``), so both sides' wealth, and
        Fan's quadratic below it, are at most the real wealth: coverage ``1 - delta`` holds
        whatever makes a label go missing, at the cost of width.
        """
        self.flush()
        self.rounds += 1
        if not any(m.is_valid for m in self.members):
            self._applied = self.rounds
            return
        self._open_block()
        shift = 0.0 if block_mean is None else block_mean - judge
        base = shift * self._row_rho
        run = self._kernel.run
        args = (self._applied, self.total, self.dev, self.sums, self._cap_edges)
        up, _, _ = run((1.0 + base)[None, :], *args)  # label 1 for the upper test
        low, _, _ = run((0.0 + base)[None, :], *args)  # label 0 for the lower test
        _, totals, devs = run((judge + base)[None, :], *args)  # later bets: the judge's loss
        self._settle(np.stack([up[0, 1:], low[1, 1:]]), totals, devs)
        self._applied = self.rounds

    def flush(self) -> None:
        """Apply the buffered rounds (every read of a bound or the state calls this first)."""
        if not self._pending:
            return
        hd = np.frombuffer(self._pending, dtype=np.float64).reshape(-1, 2)
        self._pending = array("d")
        qs_all = hd[:, :1] + hd[:, 1:] * self._row_rho  # (k, R): q = h + rho (b - f)
        pos = 0
        run = self._kernel.run
        while pos < len(qs_all) and any(m.is_valid for m in self.members):
            self._open_block()
            n = min(len(qs_all) - pos, _CHUNK - self._applied % _CHUNK)
            cum, totals, devs = run(qs_all[pos : pos + n], self._applied, self.total,
                                    self.dev, self.sums, self._cap_edges)
            self._settle(cum[:, 1:], totals, devs)
            pos += n
        self._applied = self.rounds

    def _open_block(self) -> None:
        """At the start of a bet block, cap the block's bets with the current bounds."""
        if self._applied % _CHUNK == 0:
            self._cap_edges = [(m.lo_edge, m.hi_edge) if m.is_valid else cap
                               for m, cap in zip(self.members, self._cap_edges, strict=True)]

    def _settle(self, both: FloatArray, totals: FloatArray, devs: FloatArray) -> None:
        """Move the bounds round by round through a block's sums, then keep the sums.

        ``both`` is ``(2, k, 5, R)``: the upper and the lower tests' sums after each round.
        """
        up, low = both[0], both[1]
        k = len(up)
        members = self.members
        stop = [k - 1 if m.is_valid else -1 for m in members]
        # No test can reject anything yet: every log-wealth bound Q_s(m) is at most
        # (1 + rho_s) sum(lam) (the quadratic terms are <= 0, |m - q| <= 1 + rho_s), and
        # sum(lam) only grows, so the block's last round bounds all of them.
        # (1 + rho > 0: the largest product is the product of the larger sum, exactly)
        reach = float((both[:, -1, 0] * self._kernel.one_plus_rho).max())
        limit = edge_limit(self.log_threshold) - 1e-9 * (1.0 + abs(self.log_threshold))
        if reach + 1e-9 * (1.0 + reach) >= limit:
            valid = [i for i, m in enumerate(members) if m.is_valid]
            # members are independent: each runs from its first rejection to the block's end
            for i, first in next_rejections(members, self._kernel.row_member,
                                            (self._row_starts, self._row_counts),
                                            self.grid_size, self.log_threshold, both,
                                            valid).items():
                if min(first) < k:
                    stop[i] = IntervalNarrowing(members[i], up, low, self.grid_size,
                                       self.log_threshold).run(min(first))
        if all(j == k - 1 for j in stop):  # every member counts the whole block
            self.sums[0] = up[-1]
            self.sums[1] = low[-1]
            self.total = totals[-1].tolist()
            self.dev = devs[-1].tolist()
        else:
            for i, m in enumerate(members):
                if stop[i] >= 0:
                    rows = m.rows
                    self.sums[0][:, rows] = up[stop[i]][:, rows]
                    self.sums[1][:, rows] = low[stop[i]][:, rows]
                    self.total[rows] = totals[stop[i]][rows].tolist()
                    self.dev[rows] = devs[stop[i]][rows].tolist()
        self._applied += k

    # ------------------------------------------------------------------ many at once
    @staticmethod
    def flush_all(seqs: Iterable[BernsteinSequences]) -> None:
        """Apply the buffered rounds of many sequences at once: :func:`flush_many`.

        Examples
        --------
        >>> proto = BernsteinSequences(0.1, [0.0, 1.0], BetConfig(), 100, [[0], [0, 1]])
        >>> a, b = proto.spawn(), proto.spawn()
        >>> a.update(1.0, 0.0, 0.2); b.update(1.0, 0.0, 0.2)
        >>> BernsteinSequences.flush_all([a]); b.flush(); a.to_state() == b.to_state()
        True
        """
        flush_many(seqs)

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, Any]:
        """JSON-serializable state: parameters, rounds, sums and every member's edges."""
        return self._state(range(len(self.members)))

    def member_state(self, index: int) -> dict[str, Any]:
        """State of a one-member copy holding member ``index`` only."""
        return self._state([index])

    def _state(self, which: Sequence[int]) -> dict[str, Any]:
        self.flush()
        rows = [r for j in which for r in range(self.members[j].rows.start,
                                                 self.members[j].rows.stop)]
        own = len(which) == len(self.members)
        rhos = self.rhos if own else [self.rhos[i] for j in which for i in self._member_idx[j]]
        edges = [[self.members[j].lo_edge, self.members[j].hi_edge, self.members[j].is_valid,
                  *self._cap_edges[j]] for j in which]
        dyn = BernsteinDynamics(self.rounds, [self.total[r] for r in rows],
                                [self.dev[r] for r in rows], self.sums[:, :, rows], edges)
        return sequences_state(self.delta, self.bet, self.grid_size, rhos,
                               self._member_idx if own else [list(range(len(rows)))], dyn)

    @classmethod
    @restorer("BernsteinSequences")
    def from_state(cls, d: dict[str, Any]) -> BernsteinSequences:
        """Rebuild from :meth:`to_state` output; continuing is bit-identical."""
        check_format(d)
        g = cls(float(d["delta"]), d["rhos"], BetConfig.from_dict(d["bet"]),
                int(d["grid_size"]), d["members"])
        g.load_state(d)
        return g

    def load_state(self, d: dict[str, Any]) -> None:
        """Restore the dynamic part of :meth:`to_state` into this freshly built object.

        Raises
        ------
        ValueError
            As :func:`~monitor.stats.betting.confseq_bernstein_state.read_dynamics`: a
            document whose shapes, sums or edges these sequences could not have written.
        """
        dyn = read_dynamics(d, self.sums.shape, len(self.members), self.grid_size)
        self.sums, self.total, self.dev = dyn.sums, dyn.total, dyn.dev
        self.rounds = self._applied = dyn.rounds
        for m, (lo, hi, ok, _, _) in zip(self.members, dyn.edges, strict=True):
            m.lo_edge, m.hi_edge, m.is_valid = lo, hi, ok
        self._cap_edges = [(e[3], e[4]) for e in dyn.edges]
        self._pending = array("d")


def flush_many(seqs: Iterable[BernsteinSequences]) -> None:
    """Apply the buffered rounds of many sequences, siblings in one vectorized pass.

    Sequences of one configuration (a suite's models) whose buffered rounds lie in one bet
    block share the array work (:func:`block_sums` with a leading axis); the bound moves stay
    each sequence's own. The result is what :meth:`BernsteinSequences.flush` on each gives
    (the same float operations, element by element), at a fraction of the cost when many
    sequences hold a few rounds each (a read of a large fleet).
    :meth:`BernsteinSequences.flush_all` is this function.

    Examples
    --------
    >>> proto = BernsteinSequences(0.1, [0.0, 1.0], BetConfig(), 100, [[0], [0, 1]])
    >>> a, b, c = proto.spawn(), proto.spawn(), proto.spawn()
    >>> for i in range(40):
    ...     for s in (a, b, c):
    ...         s.update(float(i % 3 == 0), 0.0, 0.2)
    >>> flush_many([a, b]); c.flush()
    >>> a.to_state() == c.to_state() == b.to_state()
    True
    """
    groups: dict[Any, list[BernsteinSequences]] = {}
    for s in seqs:
        k = len(s._pending) // 2
        if not k:
            continue
        if s._applied % _CHUNK + k > _CHUNK or not any(m.is_valid for m in s.members):
            s.flush()  # spans two bet blocks (or nothing to apply): alone
        else:
            groups.setdefault(s._layout, []).append(s)
    for siblings in groups.values():
        for lo in range(0, len(siblings), _FLUSH_BATCH):
            _flush_group(siblings[lo:lo + _FLUSH_BATCH])


def _flush_group(group: list[BernsteinSequences]) -> None:
    """:func:`flush_many` of sequences of one configuration within one bet block."""
    if len(group) == 1:
        group[0].flush()
        return
    ks = [len(s._pending) // 2 for s in group]
    # every buffered (h, b - f) in one array; round i of sequence n goes to qs[n, i]
    hd = np.frombuffer(b"".join(s._pending for s in group), dtype=np.float64)
    hd = hd.reshape(-1, 2)
    counts = np.array(ks)
    seq_of = np.repeat(np.arange(len(group)), counts)
    round_of = np.arange(len(hd)) - np.repeat(np.cumsum(counts) - counts, counts)
    qs = np.zeros((len(group), max(ks), len(group[0]._row_rho)))
    qs[seq_of, round_of] = hd[:, :1] + hd[:, 1:] * group[0]._row_rho
    for s in group:
        s._pending = array("d")
        s._open_block()
    up, low, totals, devs = block_sums(group, qs)
    # as _settle, for all at once: where no test can reject yet and every member is
    # valid, the sums after the last round are kept as they are
    at = (np.arange(len(group)), np.array(ks) - 1)
    last_up, last_low = up[at], low[at]  # (N, 5, R)
    reach = np.max(np.maximum(last_up[:, 0], last_low[:, 0]) * (1.0 + group[0]._row_rho),
                   axis=1)
    first = group[0]
    limit = edge_limit(first.log_threshold) - 1e-9 * (1.0 + abs(first.log_threshold))
    quiet = (reach + 1e-9 * (1.0 + reach) < limit).tolist()
    last_tot, last_dev = totals[at], devs[at]
    last_sums = np.stack([last_up, last_low], axis=1)  # (N, 2, 5, R)
    for n, s in enumerate(group):
        if quiet[n] and all(m.is_valid for m in s.members):
            s.sums = last_sums[n].copy()
            s.total, s.dev = last_tot[n].tolist(), last_dev[n].tolist()
        else:
            k = ks[n]
            s._settle(np.stack([up[n, :k], low[n, :k]]), totals[n, :k], devs[n, :k])
        s._applied = s.rounds
