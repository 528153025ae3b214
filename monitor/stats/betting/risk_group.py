"""All methods of one certificate updated by one computation per round.

A certificate typically runs R-Eval (``rhos = [0]``), R-AutoEval (``[1]``) and R-AutoEval+
(``S`` rhos uniform on [0, 1], which include 0 and 1) with the same alpha, threshold and bet
rule. Each rho's e-process wealth and bets, and its confidence-sequence grid wealth, depend
only on that rho's own observations, so the three methods share them; only the mixture
weights (``1/S`` vs 1) and the tracked confidence-sequence windows differ. With the default
rule ``"plugin_up"`` each test has one row of its own (the plug-in reliance depends on the side
and the method), so the group advances the members' tests one by one and shares only the
confidence-sequence grid.
:class:`CertificateGroup` advances one certify and one violate e-process over the union of the
rhos and one grid over the union of the windows, and exposes per-method
:class:`~monitor.stats.betting.risk.RiskMonitor` objects that read their slice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from monitor.stats.betting.autoeval import (
    OneSidedTest,
    PlugInTest,
    check_round,
    method_rhos,
)
from monitor.stats.betting.bets import DEFAULT_CS_GRID, DEFAULT_RHOS, BetConfig
from monitor.stats.betting.confseq_bernstein import BernsteinSequences
from monitor.stats.betting.confseq_group import SharedGridWealth
from monitor.stats.betting.eprocess import BettingEProcess
from monitor.stats.betting.risk import METHODS, RiskMonitor, check_cs_kind, check_level
from monitor.stats.betting.shared_rows import SharedRows, union_eprocesses
from monitor.stats.state_contract import check_header, restorer

__all__ = ["CertificateGroup", "GroupedRiskMonitor"]

_STATE_KIND = "certmon.CertificateGroup"


class GroupedRiskMonitor(RiskMonitor):
    """A :class:`RiskMonitor` whose state is advanced by its :class:`CertificateGroup`.

    Every property and :meth:`to_state` are inherited (a member's state is a plain
    ``RiskMonitor`` state); :meth:`update` refuses, the group updates all members at once.

    Examples
    --------
    >>> g = CertificateGroup(0.2, 0.1, ["r_eval", "r_autoeval"], BetConfig(), cs_grid=None)
    >>> g.update(0.0, 0.0, 0.1)
    >>> member = g["r_autoeval"]
    >>> isinstance(member, RiskMonitor), member.rounds, member.rhos.tolist()
    (True, 1, [1.0])
    >>> RiskMonitor.from_state(member.to_state()).rounds
    1
    """

    def update(self, human_loss: float, judge_loss: float, block_mean: float | None) -> None:
        """Refuse: update the owning :class:`CertificateGroup` instead."""
        raise TypeError("update the CertificateGroup, not one of its members")


class CertificateGroup:
    """The methods of one certificate, advanced together with shared per-rho computations.

    Parameters
    ----------
    alpha, delta : float
        Risk level and nominal error level, as for :class:`RiskMonitor`.
    methods : sequence of str
        Distinct methods among ``"r_eval"``, ``"r_autoeval"``, ``"r_autoeval_plus"``.
    bet : BetConfig
        Bet rule of the tests and the confidence sequences.
    n_rhos : int
        Number of rhos of ``r_autoeval_plus``.
    cs_grid : int or None
        Confidence-sequence resolution (bounds are multiples of ``1 / cs_grid``), ``None`` for
        no sequence.
    cs_kind : {"bernstein", "grid"}
        ``"bernstein"`` (default): :class:`~monitor.stats.betting.confseq_bernstein.
        BernsteinSequences`, a few hundred bytes per certificate; ``"grid"``: the wealth of
        every grid point (:class:`~monitor.stats.betting.confseq_group.SharedGridWealth`).
    threshold_delta : float, optional
        Level after multiplicity correction (default ``delta``).

    Examples
    --------
    >>> ms = ["r_eval", "r_autoeval", "r_autoeval_plus"]
    >>> g = CertificateGroup(0.3, 0.1, ms, BetConfig(), n_rhos=5, cs_grid=100)
    >>> ref = {m: RiskMonitor(0.3, 0.1, m, BetConfig(), n_rhos=5, cs_grid=100) for m in ms}
    >>> for i in range(300):
    ...     g.update(float(i % 10 == 0), float(i % 9 == 0), 0.1)
    ...     for r in ref.values():
    ...         r.update(float(i % 10 == 0), float(i % 9 == 0), 0.1)
    >>> all(g[m].to_state() == ref[m].to_state() for m in ms)
    True
    >>> g["r_autoeval_plus"].status, g["r_eval"].cs_upper == ref["r_eval"].cs_upper
    ('certified', True)
    >>> CertificateGroup.from_state(g.to_state()).to_state() == g.to_state()
    True

    Notes
    -----
    Same guarantee as one :class:`RiskMonitor` per method (see its Notes): every member's
    public values (log e-values, crossings, status, bounds, risk estimate, rho weights, judge
    bias, ``to_state``) are bit-identical to an independent ``RiskMonitor`` fed the same
    rounds. The union e-processes compute each rho's observation, wealth, WSR statistics and
    bet with the same float operations, in the same order, as a standalone e-process (rows do
    not interact), and each member's test keeps its own mixture, maximum and crossing round
    over its own rows, with the code of
    :class:`~monitor.stats.betting.autoeval_mixture.MixtureTest`. The confidence sequences
    share :class:`~monitor.stats.betting.confseq_group.SharedGridWealth` (see its Notes).
    Assumes ``method_rhos("r_autoeval_plus", n)`` contains exactly 0.0 and 1.0 (it does:
    ``linspace`` endpoints are exact); otherwise the union simply has more rows.
    """

    def __init__(self, alpha: float, delta: float, methods: Sequence[str], bet: BetConfig,
                 n_rhos: int = DEFAULT_RHOS, cs_grid: int | None = DEFAULT_CS_GRID,
                 threshold_delta: float | None = None, cs_kind: str = "bernstein") -> None:
        self._alpha = check_level("alpha", alpha)
        self._delta = check_level("delta", delta)
        self._tdelta = self._delta if threshold_delta is None else check_level(
            "threshold_delta", threshold_delta)
        meths = list(methods)
        if not meths or len(set(meths)) != len(meths) or not set(meths) <= set(METHODS):
            raise ValueError(f"methods must be distinct values of {METHODS}, got {meths!r}")
        self._methods = meths
        self._bet = bet
        self._n_rhos = n_rhos
        self._cs_grid = cs_grid
        self._cs_kind = check_cs_kind(cs_kind)
        per = {m: [float(v) for v in method_rhos(m, n_rhos).tolist()] for m in meths}  # type: ignore[arg-type]
        union = sorted({v for rs in per.values() for v in rs})
        self._rhos = union
        self._rows = {m: [union.index(v) for v in rs] for m, rs in per.items()}
        self._plugin = bet.rule == "plugin_up"
        eps = () if self._plugin else union_eprocesses(self._alpha, self._tdelta, union, bet)
        self._restarted = False  # a judge-drift restart changed the rho mixture weights
        self._grid: SharedGridWealth | BernsteinSequences | None = None
        if cs_grid is not None:
            kind = SharedGridWealth if cs_kind == "grid" else BernsteinSequences
            self._grid = kind(self._tdelta, union, bet, cs_grid, [self._rows[m] for m in meths])
        self._wire(eps=eps)

    def _wire(self, own: list[PlugInTest] | None = None,
              eps: tuple[BettingEProcess, ...] = ()) -> None:
        # members reading the shared rows (wsr/up: eps) or own tests (plugin_up; ``own``: restored)
        self._shared = SharedRows(self._alpha, self._tdelta, self._rhos, self._bet, eps)
        self._members: dict[str, GroupedRiskMonitor] = {}
        self._tests: list[OneSidedTest] = []  # certify and violate of each method, in order
        self._plugin_tests: list[PlugInTest] = []  # the same tests (plugin_up), or empty
        for j, meth in enumerate(self._methods):
            rhos = [self._rhos[i] for i in self._rows[meth]]
            certify: OneSidedTest
            violate: OneSidedTest
            if own is not None or self._plugin:
                certify, violate = pair = (own[2 * j], own[2 * j + 1]) if own is not None else (
                    PlugInTest(self._alpha, self._tdelta, "certify", rhos, self._bet),
                    PlugInTest(self._alpha, self._tdelta, "violate", rhos, self._bet))
                self._plugin_tests.extend(pair)
            else:
                certify, violate = self._shared.add_method(rhos, self._rows[meth])
            config = {"alpha": self._alpha, "delta": self._delta, "method": meth,
                      "bet": self._bet, "n_rhos": self._n_rhos, "cs_grid": self._cs_grid,
                      "cs_kind": self._cs_kind, "threshold_delta": self._tdelta}
            cs = None if self._grid is None else self._grid.members[j]
            self._members[meth] = GroupedRiskMonitor.from_parts(config, certify, violate, cs)
            self._tests.extend((certify, violate))

    def spawn(self) -> CertificateGroup:
        """Return a fresh group of this configuration (a new model's), cheaper than building one.

        With ``plugin_up`` (the default) and the Bernstein sequences, the copy shares every
        read-only part (rhos, rows, bet grids, prior weights, row layout) and owns its tests,
        sums and bounds; other rules are built anew. Only a group that has seen no round may be
        spawned from. The result equals a newly built group (``to_state`` and every later
        round).

        Examples
        --------
        >>> proto = CertificateGroup(0.2, 0.1, ["r_eval", "r_autoeval_plus"], BetConfig())
        >>> a = proto.spawn(); a.update(0.0, 0.0, 0.1)
        >>> proto.spawn().to_state() == CertificateGroup(
        ...     0.2, 0.1, ["r_eval", "r_autoeval_plus"], BetConfig()).to_state()
        True
        """
        if self.rounds or self._restarted:
            raise ValueError("spawn only from a group that has seen no round (a prototype)")
        if not self._plugin or not isinstance(self._grid, BernsteinSequences | None):
            return CertificateGroup(self._alpha, self._delta, self._methods, self._bet,
                                    n_rhos=self._n_rhos, cs_grid=self._cs_grid,
                                    threshold_delta=self._tdelta, cs_kind=self._cs_kind)
        new = CertificateGroup.__new__(CertificateGroup)  # copy.copy, minus its protocol
        new.__dict__.update(self.__dict__)
        grid = new._grid = None if self._grid is None else self._grid.spawn()
        tests = new._plugin_tests = [t.spawn() for t in self._plugin_tests]
        new._tests = list(tests)  # (new._shared: the prototype's, empty for plugin_up)
        # the members as _wire builds them (method j reads tests 2j, 2j + 1 and sequence j),
        # copied from this group's unread members instead of assembled from their config
        new._members = {
            meth: m.respawn(tests[2 * j], tests[2 * j + 1],
                            None if grid is None else grid.members[j])
            for j, (meth, m) in enumerate(self._members.items())
        }
        return new

    def _shares_parts(self) -> bool:
        """Whether :meth:`spawn` copies this group (its condition, spelled out there for mypy)."""
        return self._plugin and isinstance(self._grid, BernsteinSequences | None)

    def update(self, human_loss: float, judge_loss: float, block_mean: float | None,
               rhos: Sequence[float] | None = None, learn: bool = True) -> None:
        """Process one round for every method (as :meth:`RiskMonitor.update` on each).

        ``rhos``: each test's reliance for this round, fixed when its unit was judged
        (:meth:`reliances` then; ``plugin_up`` only); default: each test's current one.
        ``learn`` False: the reliances already learned from this label (:meth:`learn`).

        Raises
        ------
        ValueError
            If a loss is outside [0, 1] or not finite; nothing is updated then.
        """
        if not (0.0 <= human_loss <= 1.0 and 0.0 <= judge_loss <= 1.0
                and (block_mean is None or 0.0 <= block_mean <= 1.0)):
            check_round(human_loss, judge_loss, block_mean)
        h = float(human_loss)
        f = float(judge_loss)
        b = None if block_mean is None else float(block_mean)
        if self._plugin:
            if rhos is None:
                for t in self._plugin_tests:
                    t.advance(h, f, b, None, learn)
            else:
                for t, r in zip(self._plugin_tests, rhos, strict=True):
                    t.advance(h, f, b, r, learn)
        else:
            self._shared.advance(h, f, b)
        if self._grid is not None:
            self._grid.update(h, f, b)
        bias = f - h
        for m in self._members.values():
            m.add_judge_bias(bias)

    def penalize(self, judge_loss: float, block_mean: float | None,
                 rhos: Sequence[float] | None = None) -> None:
        """Take a round whose label is missing for good: each test at its worst label.

        Certify tests take the label 1, violate tests 0 (:meth:`PlugInTest.penalize` for
        ``plugin_up``, at the reliances ``rhos`` as in :meth:`update`; for the ``wsr`` / ``up``
        rules the shared certify and violate e-processes advance on those labels, a round of
        theirs: their WSR statistics see the same worst label, still a function of the past
        when the next bet is made). The default
        confidence sequences (``cs_kind = "bernstein"``) take the round with the label 1 on
        the side giving the upper bound and 0 on the one giving the lower bound
        (:meth:`BernsteinSequences.penalize`, counted in their rounds), and so do the
        ``"grid"`` sequences (:meth:`SharedGridWealth.penalize`); the judge bias is not fed.
        """
        if not self._plugin:
            self._shared.penalize(float(judge_loss),
                                  None if block_mean is None else float(block_mean))
        elif rhos is None:
            for t in self._plugin_tests:
                t.penalize(judge_loss, block_mean)
        else:
            for t, r in zip(self._plugin_tests, rhos, strict=True):
                t.penalize(judge_loss, block_mean, r)
        if self._grid is not None:
            self._grid.penalize(float(judge_loss),
                                None if block_mean is None else float(block_mean))

    def learn(self, human_loss: float, judge_loss: float, block_mean: float | None) -> None:
        """Let every ``plugin_up`` test's reliance learn from a label that just arrived."""
        if self._plugin:
            for t in self._plugin_tests:
                t.learn(human_loss, judge_loss, block_mean)

    def reliances(self) -> list[float]:
        """Each ``plugin_up`` test's reliance for a unit judged now (empty for other rules)."""
        return [t.rho for t in self._tests] if self._plugin else []

    @property
    def tests(self) -> list[PlugInTest]:
        """The ``plugin_up`` one-sided tests (certify and violate of each method), else empty."""
        return self._plugin_tests

    def restart_reliance(self) -> None:
        """Restart every test's reliance on the judge (see :meth:`OneSidedTest.restart_reliance`).

        The confidence sequences keep their rho mixture (their validity never depended on it).
        """
        for t in self._tests:
            t.restart_reliance()
        self._restarted = True

    # ------------------------------------------------------------------ views
    def __getitem__(self, method: str) -> RiskMonitor:
        """Return the member monitor of ``method``."""
        return self._members[method]

    @property
    def members(self) -> dict[str, RiskMonitor]:
        """Method -> member monitor, in the configured order (read them, update the group)."""
        return dict(self._members)

    @property
    def methods(self) -> list[str]:
        """The configured methods, in order."""
        return list(self._methods)

    @property
    def rhos(self) -> np.ndarray:
        """Union of the methods' reliance factors, shape (S,)."""
        return np.array(self._rhos)

    @property
    def rounds(self) -> int:
        """Number of rounds processed."""
        return self._tests[0].rounds

    @property
    def sequences(self) -> BernsteinSequences | None:
        """The group's Bernstein confidence sequences (None for the grid kind or none).

        For :meth:`BernsteinSequences.flush_all` over many groups; read bounds through
        :attr:`members`.
        """
        return self._grid if isinstance(self._grid, BernsteinSequences) else None

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, Any]:
        """JSON-serializable state of the whole group (shared parts stored once)."""
        if self._plugin:
            return {
                "kind": _STATE_KIND,
                "version": 1,
                "config": self._config_state(),
                "plugin_tests": [t.to_state() for t in self._tests],
                "sum_bias": next(iter(self._members.values())).sum_judge_bias,
                "cs": None if self._grid is None else self._grid.to_state(),
            }
        return {
            "kind": _STATE_KIND,
            "version": 1,
            "config": self._config_state(),
            **self._shared.to_state(),  # certify, violate, tests, sum_human, sum_shift
            "sum_bias": next(iter(self._members.values())).sum_judge_bias,
            "cs": None if self._grid is None else self._grid.to_state(),
            # only after a judge-drift restart of the rho mixture (else uniform, implied)
            **({"log_w0": [t.prior_log_weights for t in self._tests]}
               if self._restarted else {}),
        }

    def _config_state(self) -> dict[str, Any]:
        return {
            "alpha": self._alpha,
            "delta": self._delta,
            "threshold_delta": self._tdelta,
            "methods": list(self._methods),
            "bet": self._bet.to_dict(),
            "n_rhos": self._n_rhos,
            "cs_grid": self._cs_grid,
            "cs_kind": self._cs_kind,
        }

    @classmethod
    @restorer("CertificateGroup")
    def from_state(cls, d: dict[str, Any], proto: CertificateGroup | None = None
                   ) -> CertificateGroup:
        """Rebuild from :meth:`to_state` output; continuing is bit-identical.

        ``proto``: a group of the same configuration that has seen no round (a suite's
        prototype). When given and its configuration is the state's, the group is spawned
        from it and the state loaded into the spawn: the same group, sharing the
        prototype's read-only parts as a new model's group does (a restored fleet then takes
        the memory of a live one). Otherwise the group is built from the state alone.
        """
        check_header(d, _STATE_KIND, 1, "CertificateGroup")
        c = d["config"]
        if (proto is not None and "plugin_tests" in d and proto._shares_parts()
                and c == proto._config_state()):
            g = proto.spawn()  # (raises if the prototype has seen a round)
            if len(d["plugin_tests"]) != len(g._plugin_tests):
                raise ValueError("CertificateGroup state: tests do not match the config")
            for t, td in zip(g._plugin_tests, d["plugin_tests"], strict=True):
                t.load_state(td)
            g._load_common(d)
            return g
        g = cls(c["alpha"], c["delta"], c["methods"], BetConfig.from_dict(c["bet"]),
                n_rhos=c["n_rhos"], cs_grid=c["cs_grid"], threshold_delta=c["threshold_delta"],
                cs_kind=c.get("cs_kind", "grid"))
        if g._plugin:
            tests = [PlugInTest.from_state(t) for t in d["plugin_tests"]]
            if [(t.side, t.rhos.tolist()) for t in tests] != [
                    (t.side, t.rhos.tolist()) for t in g._tests]:
                raise ValueError("CertificateGroup state: tests do not match the config")
            g._wire(tests)
            g._load_common(d)
            return g
        g._wire(eps=SharedRows.restored_eps(d, g._shared.eps))
        g._restarted = g._shared.load_progress(d)
        g._load_common(d)
        return g

    def _load_common(self, d: dict[str, Any]) -> None:
        # judge bias and the shared confidence-sequence grid
        for m in self._members.values():
            m.add_judge_bias(float(d["sum_bias"]))
        if self._grid is not None:
            if d["cs"] is None:
                raise ValueError("CertificateGroup state: missing confidence-sequence state")
            self._grid.load_state(d["cs"])

