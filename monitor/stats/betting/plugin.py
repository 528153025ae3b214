"""The default bet rule ``"plugin_up"``: predictable plug-in reliance, small universal portfolio.

Each round gives a human loss ``l`` in [0, 1], the judge loss ``f`` of the same unit and the
mean ``b`` of a block of unaudited judge losses (``None`` if the block is empty; then
``d = b - f`` is taken as 0). For a reliance ``rho`` the PPI++ observation
``q = l + rho d`` lies in ``[-rho, 1 + rho]`` and is unbiased for the risk (``E[d] = 0``).

Instead of one e-process per rho on a grid mixed with fixed weights (rules ``"wsr"`` and
``"up"``), a ``plugin_up`` test keeps ONE row whose reliance ``rho_t`` for round ``t`` is
chosen from rounds ``1..t-1`` only (:func:`plugin_rho`): the candidate rho maximising the
plug-in *capped* growth ``lam e - lam^2 m2 / 2`` with ``lam = min(e / m2, cap(rho))``, where
``e`` is the estimated edge (``alpha`` minus the PPI++ mean at the variance-minimising
``rho0 = -Cov(l, d) / Var(d)``, sign-flipped for the violate side) and ``m2 = Var(q_rho) + e^2``;
when no candidate shows a positive edge the row uses ``rho0``. On the certify side, while every
human loss seen was 0 and the judge looks like it agreed, the human variance and its covariance
with ``d`` (which zeros cannot show) are taken from the judge's failure rate on the blocks
(``plugin_rho(..., judge_prior=True)``): otherwise ``rho = 0`` looks variance-free, bets at its
cap, and the first failure (which a good judge sees, ``q = b`` at ``rho = 1``) costs the large
bets most of their wealth. Measured (``benchmarks/labels_vs_oracle.py --low-risk``, 200 runs):
with a good judge this cut the labels from 1.24x to about 1.03x those of R-AutoEval at delta
0.1; over the Example 1 and lower-risk streams the worst ratio to the better of R-Eval and
R-AutoEval went from 1.24 to about 1.07. Not adopted, measured: starting at ``rho = 1`` until a
human loss differs (1.6-2.4x at risk 0.01), hedging with fixed-weight rho = 0 and rho = 1 rows
(they cost ``log(1/w)``), priors over the bets favouring the cap (they lose at gamma 0.7). R-Eval
and R-AutoEval are the same bettor with ``rho`` fixed at 0 and 1.

The row bets with a universal portfolio over fixed bets (:func:`bet_grid`): 8 cell midpoints
of ``(0, c / max(alpha, 1 - alpha)]`` plus a geometric (ratio sqrt 2) extension up to the
side's rho = 0 cap, carrying 25% of the prior mass; each bet is clipped at the round's cap
``c / (1 + rho_t - alpha)`` (certify) or ``c / (alpha + rho_t)`` (violate), ``c = 0.95`` by
default. With ``BetConfig.cap_switch`` (default) a plug-in row also keeps the switch cell
(half the prior mass): it follows the fixed cells' mixture, or bets the cap once a lower bound
of the plug-in Kelly bet reaches it (:mod:`.plugin_switch`). Measured alternatives (median
labels / clairvoyant, ``benchmarks/labels_vs_oracle.py`` and ``benchmarks/plugin_gap.py``):
anytime WSR 1.4-1.9x; c = 1/2 caps good judges; aGRAPA and ONS 1.2-5x; a fixed 10-rho average
pays up to ``log 10`` nats; a geometric bet grid wins at gamma 0.7 (1.26x -> 1.15x) and loses
where the Kelly bet is past the cap (up to 1.26x -> 1.59x).

Cost: O(G + S) plain-float operations per round (G = 8 to 14 bet cells, S candidate rhos).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from monitor.stats.betting.bets import BetConfig, Side
from monitor.stats.betting.plugin_bounds import add_worst_log_factors, worst_log_factors
from monitor.stats.betting.plugin_grid import (
    CELLS,
    EXT_RATIO,
    EXT_WEIGHT,
    bet_grid,
    merge_clipped,
    own_cells,
)
from monitor.stats.betting.plugin_round import (
    cell_log_wealths,
    log_wealth_with,
    plugin_rho,
    reliance,
    step,
)
from monitor.stats.betting.plugin_state import (
    STATE_KIND,
    PlugInDynamics,
    check_loadable,
    is_plugin_state,
    plugin_state,
    read_dynamics,
)
from monitor.stats.betting.plugin_switch import (
    follow_bet,
    step_switch,
    sure,
    with_switch,
    worst_log_factor,
)
from monitor.stats.state_contract import check_header, restorer

__all__ = ["CELLS", "EXT_RATIO", "EXT_WEIGHT", "PlugInEProcess", "bet_grid", "merge_clipped",
           "own_cells", "plugin_rho"]

class PlugInEProcess:
    """One-sided e-process of the ``plugin_up`` rule: one row, plug-in or fixed reliance.

    Parameters
    ----------
    alpha : float
        Risk level in (0, 1).
    delta : float
        Error level in (0, 1) (kept for the owner; the bets do not depend on it).
    side : {"certify", "violate"}
        ``"certify"`` tests H0: R > alpha (factor ``1 - lam (q - alpha)``); ``"violate"`` tests
        H0: R <= alpha (factor ``1 + lam (q - alpha)``).
    rhos : sequence of float
        One value: the fixed reliance (``[0.0]`` R-Eval, ``[1.0]`` R-AutoEval). Several: the
        candidates of the plug-in reliance (R-AutoEval+).
    bet : BetConfig
        Must have ``rule="plugin_up"``; ``bet.c`` is the cap fraction.
    cells : pair of sequences of float, optional
        Fixed bets and their prior weights (positive, summing to 1) instead of
        :func:`bet_grid`'s (the comparisons' grid, say). Not part of :meth:`to_state`: restore
        such a process with :meth:`load_state` on a fresh one of the same cells.
    judge_prior : bool, optional
        :func:`plugin_rho`'s judge prior; default: on the certify side of a plug-in reliance.

    Examples
    --------
    >>> ep = PlugInEProcess(0.3, 0.1, "certify", [0.0, 0.5, 1.0], BetConfig())
    >>> for _ in range(40):
    ...     _ = ep.advance(0.0, 0.0)
    >>> ep.log_wealth > math.log(10), ep.rounds, ep.rho
    (True, 40, 0.0)
    >>> PlugInEProcess.from_state(ep.to_state()).to_state() == ep.to_state()
    True

    Notes
    -----
    Guarantee: under H0 (every round's conditional mean loss on the null side of alpha) the
    wealth is a nonnegative supermartingale with initial value 1, so by Ville's inequality
    ``P(exists t: E_t >= 1/delta) <= delta`` with no horizon. Each cell multiplies its wealth
    by ``1 +/- lam_t (q_t - alpha)`` with ``lam_t = min(lam_k, cap_t)`` in ``[0, cap_t]``; the
    reliance ``rho_t`` and hence ``cap_t`` are fixed before round ``t`` is seen (predictable),
    and ``E[q_t | past] = E[l_t | past]`` since ``E[d_t | past] = 0``; with ``c < 1`` every
    factor is at least ``1 - c > 0``; a fixed-weight mixture of such supermartingales is one.
    Assumptions: losses in [0, 1] (the owner checks them); audits are a random sample and each
    block is disjoint from its audited unit, so ``E[b_t - f_t | past] = 0``.
    """

    # one per test and model: no per-instance dict
    __slots__ = ("_alpha", "_app", "_bet", "_bets", "_c", "_delta", "_jp", "_lam", "_learned",
                 "_log_e", "_napp", "_off", "_plug", "_prior", "_ref", "_rho", "_rhos", "_rounds",
                 "_sgn", "_side", "_since", "_sums", "_sw", "_u")

    def __init__(self, alpha: float, delta: float, side: Side, rhos: Sequence[float],
                 bet: BetConfig, *,
                 cells: tuple[Sequence[float], Sequence[float]] | None = None,
                 judge_prior: bool | None = None) -> None:
        if side not in ("certify", "violate"):
            raise ValueError(f"side must be 'certify' or 'violate', got {side!r}")
        if not (isinstance(alpha, (int, float)) and 0.0 < alpha < 1.0):
            raise ValueError(f"alpha must satisfy 0 < alpha < 1, got {alpha!r}")
        if not (isinstance(delta, (int, float)) and 0.0 < delta < 1.0):
            raise ValueError(f"delta must satisfy 0 < delta < 1, got {delta!r}")
        if bet.rule != "plugin_up":
            raise ValueError(f"PlugInEProcess needs rule 'plugin_up', got {bet.rule!r}")
        rs = [float(v) for v in rhos]
        if not rs or not all(0.0 <= v <= 1.0 for v in rs):
            raise ValueError(f"rhos must be non-empty values in [0, 1], got {rs}")
        self._alpha = float(alpha)
        self._delta = float(delta)
        self._side: Side = side
        self._bet = bet
        self._c = bet.c
        self._rhos = rs
        self._plug = len(rs) > 1
        self._sgn = 1.0 if side == "certify" else -1.0
        self._off = 1.0 - self._alpha if side == "certify" else self._alpha
        lam, w = bet_grid(self._alpha, side, self._c) if cells is None else own_cells(cells)
        if not self._plug:  # a fixed reliance clips the same cells every round
            lam, w = merge_clipped(lam, w, self._c / (self._off + rs[0]))
        self._lam = lam
        # the switch cell (plugin_switch): a plug-in row on the default grid, last in the cells
        self._sw = self._plug and cells is None and bet.cap_switch
        if self._sw:
            w = with_switch(w)
        self._app = [0.0] * 5  # the switch cell's sums over the rounds applied (since restart)
        self._napp = 0
        # cell wealths in linear scale, prior included: u_k = w_k W_k exp(-ref); the mixture
        # is ref + log(sum u) (renormalised before it can over- or underflow)
        self._prior = list(w)
        self._u = list(w)
        self._ref = 0.0
        self._rounds = 0
        self._learned = 0  # labels the plug-in reliance has learned from (see learn())
        self._sums = [0.0] * 5
        self._since = 0  # round from which the running sums count (restart_reliance)
        self._log_e = 0.0
        # plugin_rho's judge prior: by default on the certify side of a plug-in reliance
        self._jp = self._plug and (side == "certify" if judge_prior is None else judge_prior)
        self._set_rho(0.0 if self._plug else rs[0])

    def spawn(self) -> PlugInEProcess:
        """Return a fresh process of this one's configuration (a new model's, say).

        Only a process that has seen no round may be spawned from; the copy shares the
        read-only parts (bet grid, prior, rhos, initial bets) and owns its state.

        Examples
        --------
        >>> proto = PlugInEProcess(0.3, 0.1, "certify", [0.0, 1.0], BetConfig())
        >>> a = proto.spawn(); _ = a.advance(0.0, 0.0)
        >>> proto.spawn().to_state() == proto.to_state(), a.rounds
        (True, 1)
        """
        if self._rounds or self._since or self._learned or self._napp:
            raise ValueError("spawn only from a process that has seen no round (a prototype)")
        new = PlugInEProcess.__new__(PlugInEProcess)  # explicit: faster than copy.copy
        new._alpha, new._delta = self._alpha, self._delta
        new._side, new._bet = self._side, self._bet
        new._c, new._rhos, new._plug, new._sgn = self._c, self._rhos, self._plug, self._sgn
        new._off, new._lam, new._prior, new._rho = self._off, self._lam, self._prior, self._rho
        new._jp = self._jp
        new._bets, new._ref, new._rounds = self._bets, self._ref, self._rounds
        new._since, new._log_e, new._learned = self._since, self._log_e, self._learned
        new._u = list(self._u)  # state: replaced every round, copied to be safe
        new._sums = [0.0] * 5  # state: updated in place
        new._sw, new._app, new._napp = self._sw, [0.0] * 5, 0
        return new

    def _set_rho(self, rho: float) -> None:
        self._rho = rho
        cap = self._c / (self._off + rho)
        self._bets = [v if v < cap else cap for v in self._lam]

    # ------------------------------------------------------------------ properties
    @property
    def alpha(self) -> float:
        """Risk level of the null boundary."""
        return self._alpha

    @property
    def delta(self) -> float:
        """Error level of the owner's threshold."""
        return self._delta

    @property
    def side(self) -> Side:
        """``"certify"`` or ``"violate"``."""
        return self._side

    @property
    def bet(self) -> BetConfig:
        """The bet config."""
        return self._bet

    @property
    def rounds(self) -> int:
        """Number of rounds seen."""
        return self._rounds

    @property
    def rhos(self) -> list[float]:
        """The fixed reliance (one value) or the plug-in candidates."""
        return list(self._rhos)

    @property
    def plugin(self) -> bool:
        """True when the reliance is the plug-in one (several candidates)."""
        return self._plug

    @property
    def rho(self) -> float:
        """Reliance of the NEXT round (predictable)."""
        return self._rho

    @property
    def sums(self) -> list[float]:
        """``sum l, sum d, sum l^2, sum l d, sum d^2`` over the rounds seen.

        Kept for the plug-in reliance only (zeros for a fixed reliance).
        """
        return list(self._sums)

    @property
    def log_wealth(self) -> float:
        """Log wealth of the mixture over bet cells, ``log sum_k w_k W_k``."""
        return self._log_e

    @property
    def log_wealth_cells(self) -> list[float]:
        """Log wealth ``log W_k`` of each bet cell (``-inf`` for a cell that underflowed)."""
        return cell_log_wealths(self._u, self._prior, self._ref)

    @property
    def next_bet(self) -> float:
        """Effective (wealth-weighted) bet of the next round: the mixture's own factor."""
        return sum(u * b for u, b in zip(self._u, self._round_bets(), strict=True)) / sum(self._u)

    @property
    def cap_switch(self) -> bool:
        """True when the row keeps the switch cell (:mod:`.plugin_switch`), the last cell."""
        return self._sw

    def _round_bets(self) -> list[float]:
        """Return the cells' bets for a round at reliance :attr:`rho` (the switch cell's last)."""
        if not self._sw:
            return self._bets
        cap = self._c / (self._off + self._rho)
        if sure(self._app, self._napp, self._alpha, self._c, self._sgn, self._off, self._rho):
            return [*self._bets, cap]
        sb = follow_bet(self._u, self._bets)
        return [*self._bets, sb if sb < cap else cap]  # <= cap but for rounding

    def _cells_step(self, x: float) -> None:
        """``step(u, _round_bets(), x, ref)``: one compiled call, switch cell included."""
        if self._sw:
            self._u, self._ref, self._log_e = step_switch(
                self._u, self._bets, x, self._ref, self._app, self._napp, self._alpha, self._c,
                self._sgn, self._off, self._rho)
        else:
            self._u, self._ref, self._log_e = step(self._u, self._bets, x, self._ref)

    # ------------------------------------------------------------------ update
    def advance(self, human: float, shift: float, rho: float | None = None,
                learn: bool = True) -> float:
        """One validated round: human loss ``l`` and ``d = b - f`` (0 for an empty block).

        ``rho``: the round's reliance if it was fixed earlier (when its unit was judged:
        :attr:`rho` at that time); default: :attr:`rho` now. ``learn``: the reliance also
        learns from this label (False: it already did, :meth:`learn`). Returns the mixture's
        log wealth after the round (:attr:`log_wealth`).
        """
        now = self._rho
        if rho is not None and rho != now:
            self._set_rho(rho)
        x = self._sgn * (self._alpha - (human + self._rho * shift))
        self._cells_step(x)
        self._rounds += 1
        if self._sw:  # the switch cell's statistics: rounds applied, in order
            a = self._app
            a[0] += human
            a[1] += shift
            a[2] += human * human
            a[3] += human * shift
            a[4] += shift * shift
            self._napp += 1
        if learn:
            self.learn(human, shift)
        elif self._rho != now:
            self._set_rho(now)  # the reliance of a unit judged now, as before this round
        return self._log_e

    def learn(self, human: float, shift: float) -> None:
        """Let the plug-in reliance learn from one label (whatever its round's position).

        The reliance of a unit judged later may use every label that arrived before it: those
        are labels of earlier audit positions only, so the reliance stays predictable in audit
        order however labels are delayed (``docs/guarantees.md``).
        """
        self._learned += 1
        if self._plug:  # the running sums only feed the plug-in reliance
            r = reliance(self._sums, human, shift, self._learned - self._since, self._alpha,
                          self._c, self._sgn > 0.0, self._rhos, self._jp)
            if r != self._rho:
                self._set_rho(r)

    def penalize(self, human: float, shift: float, rho: float | None = None) -> float:
        """Multiply the cells by one round's factors without counting the round.

        For a round whose label is missing for good: the owner passes the worst label for
        this side (1 certify, 0 violate), so each cell takes a factor no larger than the one
        the real label would have given, at this round's reliance (predictable). The running
        sums and the round count are untouched (the reliance learns nothing from it).

        Examples
        --------
        >>> ep = PlugInEProcess(0.3, 0.1, "certify", [0.0], BetConfig())
        >>> ep.penalize(1.0, 0.0) < 0.0, ep.rounds
        (True, 0)
        """
        now = self._rho
        if rho is not None and rho != now:
            self._set_rho(rho)  # the round's own reliance, then back to the current one
        x = self._sgn * (self._alpha - (human + self._rho * shift))
        self._cells_step(x)
        if self._rho != now:
            self._set_rho(now)
        return self._log_e

    def bound_terms(self, human: float | None, shift: float,
                    rho: float | None = None) -> list[float]:
        """Per-cell log lower bounds of a round's factor, before its turn comes.

        ``human`` None: the label is not known (worst over [0, 1]). ``rho``: the round's
        reliance, fixed when its unit was judged; None: the fixed one, or for a plug-in
        reliance any value in [0, 1]. See :mod:`monitor.stats.betting.plugin_bounds`.
        """
        if rho is None and not self._plug:
            rho = self._rhos[0]
        out = worst_log_factors(self._alpha, self._side, self._lam, self._c, human, rho, shift)
        if self._sw:
            out.append(worst_log_factor(self._alpha, self._side, self._c, human, rho, shift))
        return out

    def bound_add(self, s: list[float] | None, sign: float, human: float | None, shift: float,
                  rho: float | None = None) -> list[float]:
        """Return ``s + sign * bound_terms(human, shift, rho)`` per cell (``s`` None: zeros).

        The running sum of the bounds of waiting rounds gains (``sign`` 1.0) or loses (-1.0)
        one round's terms in one call; the same floats as adding :meth:`bound_terms` cell by
        cell (:func:`~monitor.stats.betting.plugin_bounds.add_worst_log_factors`).

        Examples
        --------
        >>> ep = PlugInEProcess(0.3, 0.1, "certify", [0.0, 1.0], BetConfig())
        >>> t = ep.bound_terms(None, 0.1)
        >>> ep.bound_add([1.0] * len(t), -1.0, None, 0.1) == [1.0 - v for v in t]
        True
        """
        if rho is None and not self._plug:
            rho = self._rhos[0]
        if not self._sw:
            return add_worst_log_factors(s, sign, self._alpha, self._side, self._lam, self._c,
                                         human, rho, shift)
        last = worst_log_factor(self._alpha, self._side, self._c, human, rho, shift)
        if s is None:
            out = add_worst_log_factors(None, sign, self._alpha, self._side, self._lam, self._c,
                                        human, rho, shift)
            return [*out, sign * last]
        if len(s) != len(self._lam) + 1:
            raise ValueError("sums and cells differ in length")
        out = add_worst_log_factors(s[:-1], sign, self._alpha, self._side, self._lam, self._c,
                                    human, rho, shift)
        return [*out, s[-1] + sign * last]

    def log_wealth_with(self, terms: Sequence[float], floor: float = -math.inf) -> float:
        """Log wealth of the mixture if each cell ``k`` also took the log factor ``terms[k]``.

        A result below ``floor`` may be returned as an upper bound of it instead (cheaper).

        Examples
        --------
        >>> ep = PlugInEProcess(0.3, 0.1, "certify", [0.0], BetConfig())
        >>> ep.log_wealth_with([0.0] * len(ep.log_wealth_cells)) == ep.log_wealth
        True
        """
        return log_wealth_with(self._u, self._ref, self._log_e, terms, floor)

    def restart_reliance(self) -> None:
        """Forget the running sums of the plug-in reliance (after the judge drifted).

        The wealth is untouched; from the next round the reliance is learned again from the
        rounds after this one (rho 0 until two of them are seen). Valid: the reliance of every
        round is still fixed before the round, from past rounds only.
        """
        if self._plug:
            self._sums = [0.0] * 5
            self._since = self._learned
            self._set_rho(0.0)
            self._app, self._napp = [0.0] * 5, 0

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, Any]:
        """Return the full state as a JSON-serializable dict (Python floats, exact)."""
        return plugin_state(self._alpha, self._delta, self._side, self._rhos, self._bet,
                            PlugInDynamics(self._rounds, self._sums, self._since, self._learned,
                                           self._ref, self._u,
                                           applied=(self._app, self._napp) if self._sw else None))

    @classmethod
    @restorer("PlugInEProcess")
    def from_state(cls, d: dict[str, Any]) -> PlugInEProcess:
        """Rebuild from :meth:`to_state` output (bit-identical continuation)."""
        check_header(d, STATE_KIND, 1, "PlugInEProcess")
        ep = cls(d["alpha"], d["delta"], d["side"], d["rhos"], BetConfig.from_dict(d["bet"]))
        ep._load(d)
        return ep

    def load_state(self, d: dict[str, Any]) -> None:
        """Load :meth:`to_state` output of this configuration into a fresh :meth:`spawn`.

        The same result as :meth:`from_state`, sharing this process's read-only parts (a
        restored model's, say).

        Raises
        ------
        ValueError
            If ``d`` is not such a state, its configuration differs, or a value is invalid.
        """
        check_loadable(d, (self._alpha, self._delta, self._side, list(self._rhos), self._bet),
                       not (self._rounds or self._since or self._learned or self._napp))
        self._load(d)

    def _load(self, d: dict[str, Any]) -> None:
        """Set the dynamic part of a state on a fresh process of its configuration."""
        dyn = read_dynamics(d, self._prior, self._sw)
        self._u, self._ref, self._sums, self._log_e = dyn.cells, dyn.ref, dyn.sums, dyn.log_wealth
        self._rounds, self._learned, self._since = dyn.rounds, dyn.learned, dyn.since
        if dyn.applied is not None:
            self._app, self._napp = list(dyn.applied[0]), dyn.applied[1]
        if self._plug:
            self._set_rho(plugin_rho(self._learned - self._since, self._sums, self._alpha,
                                     self._c, self._side, self._rhos, self._jp))

    @staticmethod
    def is_state(d: dict[str, Any]) -> bool:
        """Tell whether ``d`` is a :meth:`to_state` output of this class."""
        return is_plugin_state(d)
