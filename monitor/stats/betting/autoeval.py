"""R-Eval, R-AutoEval and R-AutoEval+: PPI++ effective observations and the mixture over rho.

A *round* is one audited unit: its human loss ``l``, the judge loss ``f`` on the same unit and the
mean ``b`` of the judge losses on the unaudited units of its block (``None`` if the block is
empty). For a reliance factor ``rho`` the PPI++ effective observation is

    q = l + rho * (b - f)        (paper eq. 10; q = l when the block is empty),

an unbiased estimate of the risk ``R = E[l]`` with range ``[-rho, 1 + rho]``. R-Eval is
``rho = 0``, R-AutoEval is ``rho = 1``. With the rules ``"wsr"`` and ``"up"`` R-AutoEval+ runs
one e-process per ``rho_s`` and mixes them with weights proportional to ``w_{s,0} E_{s,i-1}``
(eq. 13), which makes the mixture e-value (eq. 11) equal to ``sum_s w_{s,0} E_{s,i}`` (eq. 25 of
the paper's proof). With the default rule ``"plugin_up"`` a test has one row
(:class:`~monitor.stats.betting.plugin.PlugInEProcess`): the rhos are the candidates of a
predictable plug-in reliance (several) or the fixed reliance (one).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from monitor.stats.betting.bets import DEFAULT_RHOS, BetConfig, Side
from monitor.stats.betting.eprocess import BettingEProcess
from monitor.stats.betting.plugin import PlugInEProcess
from monitor.stats.betting.plugin_bounds import worst_human

__all__ = [
    "AutoEvalTest",
    "Method",
    "advance_pair",
    "advance_verified_pair",
    "check_round",
    "effective_observations",
    "method_rhos",
]

Method = Literal["r_eval", "r_autoeval", "r_autoeval_plus"]
_STATE_KIND = "certmon.AutoEvalTest"


def method_rhos(method: Method, n_rhos: int = DEFAULT_RHOS) -> np.ndarray:
    """Reliance factors of a method: ``[0]``, ``[1]`` or ``n_rhos`` uniform points of [0, 1].

    Examples
    --------
    >>> method_rhos("r_eval").tolist(), method_rhos("r_autoeval").tolist()
    ([0.0], [1.0])
    >>> method_rhos("r_autoeval_plus", 5).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    if method == "r_eval":
        return np.array([0.0])
    if method == "r_autoeval":
        return np.array([1.0])
    if method == "r_autoeval_plus":
        if isinstance(n_rhos, bool) or not isinstance(n_rhos, int) or n_rhos < 2:
            raise ValueError(f"r_autoeval_plus needs n_rhos >= 2, got {n_rhos!r}")
        return np.linspace(0.0, 1.0, n_rhos)
    raise ValueError(f"unknown method {method!r}; use r_eval, r_autoeval or r_autoeval_plus")


def check_round(human: float, judge: float, block_mean: float | None) -> None:
    """Raise ``ValueError`` unless the losses are finite floats in [0, 1].

    Examples
    --------
    >>> check_round(0.0, 1.0, None)
    >>> check_round(0.5, 1.5, 0.2)
    Traceback (most recent call last):
    ...
    ValueError: judge_loss must be a finite number in [0, 1], got 1.5
    """
    if (
        0.0 <= human <= 1.0
        and 0.0 <= judge <= 1.0
        and (block_mean is None or 0.0 <= block_mean <= 1.0)
    ):
        return
    for name, v in (("human_loss", human), ("judge_loss", judge), ("block_mean", block_mean)):
        if not (v is None and name == "block_mean") and not 0.0 <= v <= 1.0:  # type: ignore[operator]
            raise ValueError(f"{name} must be a finite number in [0, 1], got {v!r}")


def effective_observations(
    human: float, judge: float, block_mean: float | None, rhos: np.ndarray
) -> np.ndarray:
    """PPI++ effective observations ``q_s = l + rho_s (b - f)``, one per rho.

    Parameters
    ----------
    human, judge : float
        Human loss ``l`` and judge loss ``f`` of the audited unit, in [0, 1].
    block_mean : float or None
        Mean ``b`` of the judge losses of the round's synthetic block; ``None`` (empty block)
        gives ``q_s = l`` for every rho.
    rhos : numpy.ndarray
        Reliance factors in [0, 1].

    Returns
    -------
    numpy.ndarray
        Shape ``rhos.shape``; entry ``s`` lies in ``[-rho_s, 1 + rho_s]`` exactly (floating point
        rounding is monotone, so the bounds hold after rounding too).

    Examples
    --------
    >>> effective_observations(1.0, 0.0, 0.5, np.array([0.0, 0.5, 1.0])).tolist()
    [1.0, 1.25, 1.5]
    >>> effective_observations(0.0, 1.0, None, np.array([0.0, 1.0])).tolist()
    [0.0, 0.0]
    """
    check_round(human, judge, block_mean)
    r = np.asarray(rhos, dtype=float)
    if block_mean is None:
        return np.full(r.shape, float(human))
    return float(human) + r * (float(block_mean) - float(judge))


class AutoEvalTest:
    """One-sided R-Eval / R-AutoEval / R-AutoEval+ test: a wealth-weighted mixture over rhos.

    Parameters
    ----------
    alpha : float
        Risk level in (0, 1).
    delta : float
        Error level in (0, 1); the test rejects when the mixture e-value reaches ``1/delta``.
    side : {"certify", "violate"}
        ``"certify"``: evidence that the risk is <= alpha (H0: R > alpha);
        ``"violate"``: evidence that the risk is > alpha (H0: R <= alpha).
    rhos : array_like, shape (S,)
        Reliance factors in [0, 1] (see :func:`method_rhos`).
    bet : BetConfig
        Bet rule. ``"wsr"``/``"up"``: one e-process per rho, mixed. ``"plugin_up"``: one
        :class:`~monitor.stats.betting.plugin.PlugInEProcess` whose reliance is ``rhos[0]``
        (one rho) or the plug-in choice among ``rhos`` (several).
    initial_weights : array_like, optional
        Positive prior weights ``w_{s,0}`` (normalized to sum 1); uniform by default.
        Not used by ``"plugin_up"``.
    e_process : BettingEProcess, optional
        The rows' e-process when an owner shares and advances it (it must have one row per rho
        with range ``[-rho, 1 + rho]``); by default the test builds and advances its own.
        Not available with ``"plugin_up"``.

    Examples
    --------
    >>> t = AutoEvalTest(0.5, 0.1, "certify", method_rhos("r_autoeval_plus", 3),
    ...                  BetConfig("wsr"))
    >>> for _ in range(20):
    ...     t.update(0.0, 0.0, 0.0)
    >>> t.crossed_at_round is not None and t.log_e >= t.log_threshold
    True
    >>> t.rho_weights.shape
    (3,)
    >>> p = AutoEvalTest(0.5, 0.1, "certify", method_rhos("r_autoeval_plus", 3), BetConfig())
    >>> for _ in range(10):
    ...     p.update(0.0, 0.0, 0.0)
    >>> p.crossed_at_round, p.rho, p.rho_weights.tolist()
    (6, 0.0, [1.0, 0.0, 0.0])

    Notes
    -----
    Guarantee: if the rounds are i.i.d. with risk ``R > alpha`` (certify) or ``R <= alpha``
    (violate), ``P(exists t: log_e_t >= log(1/delta)) <= delta``. The mixture is a convex
    combination of e-processes with fixed prior weights, hence itself a nonnegative
    supermartingale (Ville's inequality). Assumptions: audited units are a random sample
    independent of their losses, the block of each round is disjoint from the audited unit and
    from other blocks, and losses lie in [0, 1] (checked). Lemma 1: ``log_e`` is at most
    ``log(1 / min_s w_{s,0})`` below the best single-rho ``log E_s``. With ``"plugin_up"``
    the single row's reliance is chosen from past rounds only, so each round's observation
    stays unbiased for the risk and the same supermartingale argument applies (see
    :class:`~monitor.stats.betting.plugin.PlugInEProcess`).
    """

    __slots__ = ("_crossed", "_ep", "_log_e_cache", "_log_threshold", "_log_w0", "_max_log_e",
                 "_pl", "_rhos", "_side", "_sum_human", "_sum_shift", "_uniform")

    def __init__(
        self,
        alpha: float,
        delta: float,
        side: Side,
        rhos: ArrayLike,
        bet: BetConfig,
        initial_weights: ArrayLike | None = None,
        e_process: BettingEProcess | None = None,
    ) -> None:
        if isinstance(rhos, (list, tuple)) and all(type(v) is float for v in rhos):
            rs: list[float] = list(rhos)  # the common case, without numpy's per-call cost
        else:
            rs = [float(v) for v in np.asarray(rhos, dtype=float).reshape(-1).tolist()]
        if not rs or not all(0.0 <= v <= 1.0 for v in rs):
            raise ValueError(f"rhos must be non-empty values in [0, 1], got {rs}")
        if not (isinstance(alpha, (int, float)) and 0.0 < alpha < 1.0):
            raise ValueError(f"alpha must satisfy 0 < alpha < 1, got {alpha!r}")
        if initial_weights is None:
            w0_list = [1.0 / len(rs)] * len(rs)
        else:
            w0 = np.asarray(initial_weights, dtype=float).reshape(-1)
            if w0.shape != (len(rs),) or not np.all(np.isfinite(w0) & (w0 > 0.0)):
                raise ValueError("initial_weights must be positive, finite and one per rho")
            w0_list = (w0 / w0.sum()).tolist()
        self._rhos = rs
        self._log_w0 = [math.log(v) for v in w0_list]
        self._uniform = len(set(self._log_w0)) == 1  # same rule in from_state (determinism)
        self._pl: PlugInEProcess | None = None
        self._ep: BettingEProcess | None = None
        if bet.rule == "plugin_up":
            if e_process is not None:
                raise ValueError("rule 'plugin_up' runs its own e-process (no shared rows)")
            self._pl = PlugInEProcess(alpha, delta, side, self._rhos, bet)
        else:
            self._ep = e_process if e_process is not None else BettingEProcess(
                alpha, delta, side, [-v for v in self._rhos], [1.0 + v for v in self._rhos],
                bet)
        self._side: Side = side
        self._log_threshold = -math.log(float(delta))
        self._log_e_cache: float | None = None
        self._max_log_e = 0.0
        self._crossed: int | None = None
        self._sum_human = 0.0
        self._sum_shift = 0.0  # sum over rounds of (b - f), 0 for empty blocks

    def spawn(self) -> AutoEvalTest:
        """Return a fresh test of this one's configuration (``plugin_up`` only).

        Only a test that has seen no round may be spawned from: the copy shares the read-only
        parts (rhos, prior weights, bet grids) and owns its e-process and sums. Rule ``wsr``
        and ``up`` tests read shared e-process rows and are built, not spawned.

        Examples
        --------
        >>> proto = AutoEvalTest(0.3, 0.1, "certify", [0.0, 1.0], BetConfig())
        >>> a = proto.spawn(); a.update(0.0, 0.0, 0.0)
        >>> proto.spawn().to_state() == proto.to_state(), a.rounds
        (True, 1)
        """
        if self._pl is None:
            raise ValueError("only plugin_up tests are spawned (others share e-process rows)")
        new = AutoEvalTest.__new__(AutoEvalTest)  # explicit: faster than copy.copy
        new._rhos, new._log_w0, new._uniform = self._rhos, self._log_w0, self._uniform
        new._pl, new._ep, new._side = self._pl.spawn(), None, self._side
        new._log_threshold, new._log_e_cache = self._log_threshold, self._log_e_cache
        new._max_log_e, new._crossed = self._max_log_e, self._crossed
        new._sum_human, new._sum_shift = self._sum_human, self._sum_shift
        return new

    # ------------------------------------------------------------------ update
    def update(self, human_loss: float, judge_loss: float, block_mean: float | None) -> None:
        """Process one round; raises ``ValueError`` on losses outside [0, 1] or non-finite."""
        check_round(human_loss, judge_loss, block_mean)
        self.advance(float(human_loss), float(judge_loss),
                     None if block_mean is None else float(block_mean))

    def advance(self, human: float, judge: float, block_mean: float | None,
                rho: float | None = None, learn: bool = True) -> None:
        """Process one round whose losses were already validated (see :func:`check_round`).

        ``rho`` (``plugin_up`` only): the round's reliance, fixed when its unit was judged
        (:attr:`rho` then); default: :attr:`rho` now. ``learn`` False: the reliance already
        learned from this label (:meth:`learn`).
        """
        if self._pl is not None:
            if block_mean is None:
                mx = self._pl.advance(human, 0.0, rho, learn)
            else:
                d0 = block_mean - judge
                mx = self._pl.advance(human, d0, rho, learn)
                self._sum_shift += d0
            self._sum_human += human
            self._log_e_cache = mx  # the exact mixture (one row, cells mixed in linear scale)
            if mx > self._max_log_e:
                self._update_max(mx)
            return
        if self._ep is None:  # pragma: no cover - one of the two is always set
            raise RuntimeError("AutoEvalTest without e-process")
        if block_mean is None:
            self._ep.advance([human] * len(self._rhos))
            self.record(human, None)
        else:
            d = block_mean - judge
            self._ep.advance([human + r * d for r in self._rhos])
            self.record(human, d)

    def record(self, human: float, shift: float | None) -> None:
        """Bookkeeping after the e-process has seen the round (mixture, maximum, crossing).

        :meth:`advance` calls it; an owner that advances a shared e-process itself (a
        :class:`~monitor.stats.betting.risk_group.CertificateGroup`) calls it once per round
        with the human loss and ``b - f`` (``None`` for an empty block).
        """
        self._sum_human += human
        if shift is not None:
            self._sum_shift += shift
        self._log_e_cache = None
        # the mixture (over rhos, or over bet cells for plugin_up) is at most its best member
        mx = self._pl.log_wealth if self._pl is not None else max(
            self._row_ep().log_wealth_list())
        # the mixture is a convex combination, so log_e <= max_s log E_s: the exact value is
        # only needed when it could set a new maximum (and hence cross the threshold)
        if mx + 1e-9 * (1.0 + abs(mx)) > self._max_log_e:
            self._update_max(self._mixture(mx))

    def learn(self, human: float, judge: float, block_mean: float | None) -> None:
        """Let a ``plugin_up`` test's reliance learn from a label that arrived (any position).

        See :meth:`PlugInEProcess.learn`; other rules learn when the round is applied.
        """
        if self._pl is not None:
            self._pl.learn(human, 0.0 if block_mean is None else block_mean - judge)

    def penalize(self, judge: float, block_mean: float | None, rho: float | None = None
                 ) -> None:
        """Take a round whose label is missing for good at this side's worst label.

        ``plugin_up`` only (:meth:`PlugInEProcess.penalize`): the cells' wealth falls to a
        lower bound of what the real label would have given; the round is not counted and no
        crossing is recorded. Other rules ignore it (their rows are shared by both sides).
        """
        if self._pl is None:
            return
        d = 0.0 if block_mean is None else block_mean - judge
        self._log_e_cache = self._pl.penalize(worst_human(self._side), d, rho)

    def bound_terms(self, human: float | None, judge: float, block_mean: float | None,
                    rho: float | None = None) -> list[float] | None:
        """Per-cell log lower bounds of a round not applied yet (None: not ``plugin_up``)."""
        if self._pl is None:
            return None
        return self._pl.bound_terms(human, 0.0 if block_mean is None else block_mean - judge,
                                    rho)

    def claim(self, terms: Sequence[float]) -> None:
        """Record the wealth the cells would have after rounds bounded by ``terms``.

        A lower bound on the wealth after the applied rounds and the rounds whose per-cell
        log factors are bounded below by ``terms`` (:meth:`bound_terms`, summed); if it sets a
        new maximum at or above the threshold, the test has crossed (at the applied rounds).
        """
        if self._pl is None or self._crossed is not None:
            return  # a crossing is final: nothing more to claim
        log_e = self._pl.log_wealth_with(terms, self._log_threshold)
        if log_e > self._max_log_e and log_e >= self._log_threshold:  # else maybe a bound
            self._max_log_e = log_e
            self._crossed = self.rounds

    def _update_max(self, log_e: float) -> None:
        self._log_e_cache = log_e
        if log_e > self._max_log_e:
            self._max_log_e = log_e
            if self._crossed is None and log_e >= self._log_threshold:
                self._crossed = self.rounds

    def _row_ep(self) -> BettingEProcess:
        if self._ep is None:
            raise TypeError("a 'plugin_up' test has no per-rho e-process rows")
        return self._ep

    def _mixture(self, mx: float) -> float:
        # log sum_s w0_s E_s, given mx = max_s log E_s; cached until the next round
        if self._pl is not None:
            self._log_e_cache = self._pl.log_wealth
            return self._log_e_cache
        lw = self._row_ep().log_wealth_list()
        exp = math.exp
        if len(lw) == 1:
            log_e = self._log_w0[0] + lw[0]
        elif self._uniform:
            log_e = self._log_w0[0] + mx + math.log(sum([exp(x - mx) for x in lw]))
        else:
            v = [a + b for a, b in zip(self._log_w0, lw, strict=True)]
            m = max(v)
            log_e = m + math.log(sum([exp(x - m) for x in v]))
        self._log_e_cache = log_e
        return log_e

    # ------------------------------------------------------------------ properties
    @property
    def rounds(self) -> int:
        """Number of rounds processed."""
        return self._pl.rounds if self._pl is not None else self._row_ep().rounds

    @property
    def side(self) -> Side:
        """``"certify"`` or ``"violate"``."""
        return self._side

    @property
    def plugin(self) -> bool:
        """True for the ``"plugin_up"`` rule (one row, predictable reliance)."""
        return self._pl is not None

    @property
    def rho(self) -> float:
        """Reliance of the next round.

        The plug-in choice (``"plugin_up"``), else the rho-weighted mean reliance of the mixture.
        """
        if self._pl is not None:
            return self._pl.rho
        return float(np.dot(self.rho_weights, np.array(self._rhos)))

    @property
    def rhos(self) -> np.ndarray:
        """Reliance factors, shape (S,)."""
        return np.array(self._rhos)

    @property
    def log_threshold(self) -> float:
        """``log(1 / delta)``."""
        return self._log_threshold

    @property
    def log_e(self) -> float:
        """Mixture log e-value ``log sum_s w_{s,0} E_{s,t}`` (= log of eq. 11)."""
        if self._log_e_cache is None:
            if self._pl is not None:
                return self._mixture(0.0)
            return self._mixture(max(self._row_ep().log_wealth_list()))
        return self._log_e_cache

    @property
    def log_e_per_rho(self) -> np.ndarray:
        """``log E_{s,t}`` of each rho's own e-process, shape (S,).

        ``"plugin_up"`` has one row: shape (1,), the test's own ``log_e``.
        """
        if self._pl is not None:
            return np.array([self._pl.log_wealth])
        return self._row_ep().log_wealth

    @property
    def rho_weights(self) -> np.ndarray:
        """Weights ``w_{s,t+1}`` (eq. 13) that the NEXT round uses, shape (S,), sum 1.

        ``"plugin_up"``: the next round's reliance :attr:`rho` split linearly between its two
        neighbours in :attr:`rhos`, so ``rho_weights @ rhos == rho``.
        """
        if self._pl is not None:
            return _interpolation_weights(self._rhos, self._pl.rho)
        v = np.array(self._log_w0) + self._row_ep().log_wealth
        w = np.exp(v - v.max())
        out: np.ndarray = w / w.sum()
        return out

    @property
    def next_bets(self) -> np.ndarray:
        """Each rho's bet for the next round, shape (S,).

        ``"plugin_up"``: the effective bet of its one row, shape (1,).
        """
        if self._pl is not None:
            return np.array([self._pl.next_bet])
        return self._row_ep().next_bets

    @property
    def max_log_e(self) -> float:
        """Largest mixture log e-value seen so far (0 at round 0)."""
        return self._max_log_e

    @property
    def crossed_at_round(self) -> int | None:
        """First round whose mixture ``log_e >= log(1/delta)``, or ``None``."""
        return self._crossed

    def restart_reliance(self) -> None:
        """Restart the reliance on the judge from the next round (after a judge drift).

        ``plugin_up``: the plug-in reliance forgets its running sums. Mixture rules: the prior
        weights are reset so that every rho holds an equal share of the current wealth, which
        is a new uniform mixture started now with the wealth reached so far, so the e-value is
        unchanged at this round and stays a supermartingale afterwards (rebalancing at a time
        fixed by past rounds only).
        """
        if self._pl is not None:
            self._pl.restart_reliance()
            return
        lw = self._row_ep().log_wealth_list()
        if len(lw) < 2:
            return
        log_e = self.log_e
        self._log_w0 = [log_e - math.log(len(lw)) - x for x in lw]
        self._uniform = False
        self._log_e_cache = None

    @property
    def prior_log_weights(self) -> list[float]:
        """Log prior weights ``log w_{s,0}`` of the rho mixture (reset by restart_reliance)."""
        return list(self._log_w0)

    def set_prior_log_weights(self, log_w0: list[float]) -> None:
        """Restore :attr:`prior_log_weights` (from a snapshot of a shared e-process)."""
        if len(log_w0) != len(self._log_w0) or not all(math.isfinite(v) for v in log_w0):
            raise ValueError("prior log weights: wrong length or not finite")
        self._log_w0 = [float(v) for v in log_w0]
        self._uniform = len(set(self._log_w0)) == 1
        self._log_e_cache = None

    @property
    def progress(self) -> tuple[float, int | None, float, float]:
        """``(max_log_e, crossed_at_round, sum of human losses, sum of b - f)``."""
        return self._max_log_e, self._crossed, self._sum_human, self._sum_shift

    def restore_progress(self, max_log_e: float, crossed: int | None, sum_human: float,
                         sum_shift: float) -> None:
        """Set what :attr:`progress` returns (restoring a snapshot of a shared e-process)."""
        self._max_log_e = float(max_log_e)
        self._crossed = None if crossed is None else int(crossed)
        self._sum_human = float(sum_human)
        self._sum_shift = float(sum_shift)
        self._log_e_cache = None

    @property
    def mean_per_rho(self) -> np.ndarray:
        """Running mean of each rho's effective observations (unbiased for the risk); NaN at t=0."""
        t = self.rounds
        if t == 0:
            return np.full(len(self._rhos), math.nan)
        return (self._sum_human + np.array(self._rhos) * self._sum_shift) / t

    @property
    def mean_human(self) -> float:
        """Running mean of the human losses (NaN before round 1)."""
        t = self.rounds
        return self._sum_human / t if t else math.nan

    @property
    def e_process(self) -> BettingEProcess:
        """The underlying per-rho e-processes (read it, do not update it).

        Raises ``TypeError`` for ``"plugin_up"`` (see :attr:`plugin_e_process`).
        """
        return self._row_ep()

    @property
    def plugin_e_process(self) -> PlugInEProcess | None:
        """The single-row ``"plugin_up"`` e-process (read it, do not update it), else None."""
        return self._pl

    def is_twin_of(self, other: AutoEvalTest) -> bool:
        """Tell whether ``self`` (certify) and ``other`` (violate) are WSR twins.

        Twins on the same rows may be advanced in one pass by :func:`advance_verified_pair`.
        """
        return (self._ep is not None and other._ep is not None and self.side == "certify"
                and self._ep.is_twin_of(other._ep))

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, Any]:
        """Return the full state as a JSON-serializable dict (Python floats, exact)."""
        return {
            "kind": _STATE_KIND,
            "version": 1,
            "rhos": list(self._rhos),
            "log_w0": list(self._log_w0),
            "max_log_e": self._max_log_e,
            "crossed_at_round": self._crossed,
            "sum_human": self._sum_human,
            "sum_shift": self._sum_shift,
            "eprocess": self._pl.to_state() if self._pl is not None else self._row_ep().to_state(),
        }

    @classmethod
    def from_state(cls, d: dict[str, Any]) -> AutoEvalTest:
        """Rebuild a test from :meth:`to_state` output (bit-identical continuation)."""
        if d.get("kind") != _STATE_KIND or d.get("version") != 1:
            raise ValueError(f"not an AutoEvalTest state (kind={d.get('kind')!r})")
        if PlugInEProcess.is_state(d["eprocess"]):
            pl = PlugInEProcess.from_state(d["eprocess"])
            t = cls(pl.alpha, pl.delta, pl.side, d["rhos"], pl.bet)
            t._pl = pl
        else:
            ep = BettingEProcess.from_state(d["eprocess"])
            t = cls(ep.alpha, ep.delta, ep.side, d["rhos"], ep.bet)
            t._ep = ep
        t._load_progress(d)
        return t

    def load_state(self, d: dict[str, Any]) -> None:
        """Load :meth:`to_state` output of this configuration into a fresh :meth:`spawn`.

        The same result as :meth:`from_state` (``plugin_up`` tests), sharing this test's
        read-only parts (a restored model's, say).

        Raises
        ------
        ValueError
            If ``d`` is not such a state, its configuration differs, or a value is invalid.
        """
        if d.get("kind") != _STATE_KIND or d.get("version") != 1:
            raise ValueError(f"not an AutoEvalTest state (kind={d.get('kind')!r})")
        if self._pl is None or not PlugInEProcess.is_state(d["eprocess"]):
            raise ValueError("load_state: only plugin_up tests are loaded into a spawn")
        if [float(r) for r in d["rhos"]] != list(self._rhos):
            raise ValueError("AutoEvalTest state: rhos differ from this test's")
        self._pl.load_state(d["eprocess"])
        self._load_progress(d)

    def _load_progress(self, d: dict[str, Any]) -> None:
        """Set the mixture weights, maximum, crossing and sums of a state."""
        self._log_w0 = [float(v) for v in d["log_w0"]]
        self._uniform = len(set(self._log_w0)) == 1
        if len(self._log_w0) != len(self._rhos):
            raise ValueError("AutoEvalTest state: log_w0 and rhos differ in length")
        self._max_log_e = float(d["max_log_e"])
        c = d["crossed_at_round"]
        self._crossed = None if c is None else int(c)
        self._sum_human = float(d["sum_human"])
        self._sum_shift = float(d["sum_shift"])


def advance_pair(certify: AutoEvalTest, violate: AutoEvalTest, human: float, judge: float,
                 block_mean: float | None) -> None:
    """Advance a certify test and its violate twin on one validated round.

    Bit-identical to ``certify.advance(...); violate.advance(...)``; when both use WSR bets on
    the same rhos it builds the effective observations once and shares the WSR statistics
    (:meth:`BettingEProcess.advance_twins`), which is what makes a two-sided
    :class:`monitor.stats.betting.risk.RiskMonitor` cheap.

    Examples
    --------
    >>> rh = method_rhos("r_autoeval_plus", 4)
    >>> a, b = (AutoEvalTest(0.2, 0.1, s, rh, BetConfig("wsr")) for s in ("certify", "violate"))
    >>> c, d = (AutoEvalTest(0.2, 0.1, s, rh, BetConfig("wsr")) for s in ("certify", "violate"))
    >>> advance_pair(a, b, 0.0, 1.0, 0.3)
    >>> c.advance(0.0, 1.0, 0.3); d.advance(0.0, 1.0, 0.3)
    >>> a.to_state() == c.to_state() and b.to_state() == d.to_state()
    True
    """
    if not certify.is_twin_of(violate):
        certify.advance(human, judge, block_mean)
        violate.advance(human, judge, block_mean)
        return
    advance_verified_pair(certify, violate, human, judge, block_mean)


def advance_verified_pair(certify: AutoEvalTest, violate: AutoEvalTest, human: float, judge: float,
                   block_mean: float | None) -> None:
    """Advance a verified twin pair (see :func:`advance_pair`) without checking it again.

    For callers that built the pair once and keep it in lockstep (:class:`RiskMonitor`).
    """
    if block_mean is None:
        q = [human] * len(certify._rhos)
        d: float | None = None
    else:
        d = block_mean - judge
        q = [human + r * d for r in certify._rhos]
    certify._row_ep().advance_twins(violate._row_ep(), q)
    certify.record(human, d)
    violate.record(human, d)


def _interpolation_weights(rhos: list[float], rho: float) -> np.ndarray:
    # weights on the sorted-or-not candidate list putting ``rho`` between its two nearest
    # neighbours (one-hot when it is a candidate or outside their range)
    w = np.zeros(len(rhos))
    below = [(rho - r, i) for i, r in enumerate(rhos) if r <= rho]
    above = [(r - rho, i) for i, r in enumerate(rhos) if r >= rho]
    if not below or not above:
        w[min(below or above)[1]] = 1.0
        return w
    (db, ib), (da, ia) = min(below), min(above)
    if ib == ia or db + da == 0.0:
        w[ib] = 1.0
    else:
        w[ib] = da / (db + da)
        w[ia] = db / (db + da)
    return w
