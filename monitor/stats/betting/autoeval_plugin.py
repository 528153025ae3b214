"""The ``plugin_up`` one-sided test: one e-process row with a predictable plug-in reliance.

:class:`PlugInTest` wraps a :class:`~monitor.stats.betting.plugin.PlugInEProcess` (the default
bet rule): one round is one :meth:`PlugInTest.advance`; a label may teach the reliance before its
round is applied (:meth:`PlugInTest.learn`), a label missing for good is taken at the side's worst
value (:meth:`PlugInTest.penalize`), and audit-ordered lower bounds may record a crossing before
the rounds are applied (:meth:`PlugInTest.bound_terms`, :meth:`PlugInTest.claim`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from monitor.stats.betting.autoeval_base import OneSidedBase, check_round, check_state
from monitor.stats.betting.bets import BetConfig, Side
from monitor.stats.betting.plugin import PlugInEProcess
from monitor.stats.betting.plugin_bounds import worst_human
from monitor.stats.state_contract import restorer

__all__ = ["PlugInTest"]


class PlugInTest(OneSidedBase):
    """One-sided test of rule ``"plugin_up"``: reliance ``rhos[0]`` or the plug-in choice.

    Parameters
    ----------
    alpha, delta, side, rhos
        As for :func:`~monitor.stats.betting.autoeval.one_sided_test`.
    bet : BetConfig
        A ``"plugin_up"`` bet configuration.

    Examples
    --------
    >>> from monitor.stats.betting.autoeval import method_rhos
    >>> p = PlugInTest(0.5, 0.1, "certify", method_rhos("r_autoeval_plus", 3), BetConfig())
    >>> for _ in range(10):
    ...     p.update(0.0, 0.0, 0.0)
    >>> p.crossed_at_round, p.rho, p.rho_weights.tolist()
    (6, 0.0, [1.0, 0.0, 0.0])

    Notes
    -----
    Guarantee: under the null of its side, ``P(exists t: log_e_t >= log(1/delta)) <= delta``:
    the row's reliance is chosen from past rounds only, so each round's observation stays
    unbiased for the risk and the wealth is a nonnegative supermartingale (see
    :class:`~monitor.stats.betting.plugin.PlugInEProcess`). Assumptions as for
    :func:`~monitor.stats.betting.autoeval.one_sided_test`.
    """

    __slots__ = ("_pl",)

    def __init__(self, alpha: float, delta: float, side: Side, rhos: ArrayLike,
                 bet: BetConfig, initial_weights: ArrayLike | None = None) -> None:
        super().__init__(alpha, delta, side, rhos, initial_weights)
        self._pl = PlugInEProcess(alpha, delta, side, self._rhos, bet)

    def spawn(self) -> PlugInTest:
        """Return a fresh test of this one's configuration.

        Only a test that has seen no round may be spawned from: the copy shares the read-only
        parts (rhos, prior weights, bet grids) and owns its e-process and sums.

        Examples
        --------
        >>> proto = PlugInTest(0.3, 0.1, "certify", [0.0, 1.0], BetConfig())
        >>> a = proto.spawn(); a.update(0.0, 0.0, 0.0)
        >>> proto.spawn().to_state() == proto.to_state(), a.rounds
        (True, 1)
        """
        new = PlugInTest.__new__(PlugInTest)  # explicit: faster than copy.copy
        self._share_into(new)
        new._pl = self._pl.spawn()
        return new

    # ------------------------------------------------------------------ rounds
    def update(self, human_loss: float, judge_loss: float, block_mean: float | None) -> None:
        """Process one round; raises ``ValueError`` on losses outside [0, 1] or non-finite."""
        check_round(human_loss, judge_loss, block_mean)
        self.advance(float(human_loss), float(judge_loss),
                     None if block_mean is None else float(block_mean))

    def advance(self, human: float, judge: float, block_mean: float | None,
                rho: float | None = None, learn: bool = True) -> None:
        """Process one round whose losses were already validated (see :func:`check_round`).

        ``rho``: the round's reliance, fixed when its unit was judged (:attr:`rho` then);
        default: :attr:`rho` now. ``learn`` False: the reliance already learned from this
        label (:meth:`learn`).
        """
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

    def learn(self, human: float, judge: float, block_mean: float | None) -> None:
        """Let the reliance learn from a label that arrived (any position).

        See :meth:`PlugInEProcess.learn`.
        """
        self._pl.learn(human, 0.0 if block_mean is None else block_mean - judge)

    def penalize(self, judge: float, block_mean: float | None, rho: float | None = None
                 ) -> None:
        """Take a round whose label is missing for good at this side's worst label.

        :meth:`PlugInEProcess.penalize`: the cells' wealth falls to a lower bound of what the
        real label would have given; the round is not counted and no crossing is recorded.
        """
        d = 0.0 if block_mean is None else block_mean - judge
        self._log_e_cache = self._pl.penalize(worst_human(self._side), d, rho)

    def bound_terms(self, human: float | None, judge: float, block_mean: float | None,
                    rho: float | None = None) -> list[float]:
        """Per-cell log lower bounds of a round not applied yet."""
        return self._pl.bound_terms(human, 0.0 if block_mean is None else block_mean - judge,
                                    rho)

    def bound_add(self, s: list[float] | None, sign: float, human: float | None, judge: float,
                  block_mean: float | None, rho: float | None = None) -> list[float]:
        """Return ``s + sign * bound_terms(...)`` per cell (``s`` None: zeros).

        See :meth:`PlugInEProcess.bound_add`.
        """
        return self._pl.bound_add(s, sign, human,
                                  0.0 if block_mean is None else block_mean - judge, rho)

    def claim(self, terms: Sequence[float]) -> None:
        """Record the wealth the cells would have after rounds bounded by ``terms``.

        A lower bound on the wealth after the applied rounds and the rounds whose per-cell
        log factors are bounded below by ``terms`` (:meth:`bound_terms`, summed); if it sets a
        new maximum at or above the threshold, the test has crossed (at the applied rounds).
        """
        if self._crossed is not None:
            return  # a crossing is final: nothing more to claim
        log_e = self._pl.log_wealth_with(terms, self._log_threshold)
        if log_e > self._max_log_e and log_e >= self._log_threshold:  # else maybe a bound
            self._max_log_e = log_e
            self._crossed = self.rounds

    def restart_reliance(self) -> None:
        """Restart the reliance on the judge from the next round (after a judge drift).

        The plug-in reliance forgets its running sums (:meth:`PlugInEProcess.restart_reliance`).
        """
        self._pl.restart_reliance()

    def is_twin_of(self, other: object) -> bool:
        """Return False: a plug-in test advances alone (no shared WSR statistics)."""
        return False

    # ------------------------------------------------------------------ properties
    @property
    def rounds(self) -> int:
        """Number of rounds processed."""
        return self._pl.rounds

    @property
    def plugin(self) -> bool:
        """True: rule ``"plugin_up"`` (one row, predictable reliance)."""
        return True

    @property
    def rho(self) -> float:
        """Reliance of the next round (the plug-in choice)."""
        return self._pl.rho

    @property
    def log_e(self) -> float:
        """Log e-value of the row (its bet cells mixed in linear scale)."""
        if self._log_e_cache is None:
            self._log_e_cache = self._pl.log_wealth
        return self._log_e_cache

    @property
    def log_e_per_rho(self) -> np.ndarray:
        """The one row's ``log E``: shape (1,)."""
        return np.array([self._pl.log_wealth])

    @property
    def rho_weights(self) -> np.ndarray:
        """The next round's reliance :attr:`rho` split linearly between its two neighbours.

        Shape (S,), sum 1, so ``rho_weights @ rhos == rho``.
        """
        return _interpolation_weights(self._rhos, self._pl.rho)

    def weight_list_and_estimate(self) -> tuple[list[float], float]:
        """Return :attr:`rho_weights` as a list and the rho-weighted mean estimate, for a view.

        The estimate is ``rho_weights @ mean_per_rho`` (NaN before round 1). With one rho
        (``r_eval``, ``r_autoeval``) both without numpy: the weight is 1 and the estimate
        that rho's running mean, the same float (a product by 1 plus 0 is exact, and the
        mean is never -0.0: the human losses sum to a non-negative value).

        Examples
        --------
        >>> t = PlugInTest(0.3, 0.1, "certify", [1.0], BetConfig())
        >>> t.update(1.0, 0.0, 0.5); t.update(0.0, 1.0, 0.25)
        >>> t.weight_list_and_estimate() == (t.rho_weights.tolist(),
        ...                                  float(np.dot(t.rho_weights, t.mean_per_rho)))
        True
        """
        t = self.rounds
        rhos = self._rhos
        if len(rhos) == 1:
            return [1.0], (math.nan if t == 0
                           else (self._sum_human + rhos[0] * self._sum_shift) / t)
        w = self.rho_weights
        return w.tolist(), (math.nan if t == 0 else float(np.dot(w, self.mean_per_rho)))

    @property
    def next_bets(self) -> np.ndarray:
        """The effective bet of its one row, shape (1,)."""
        return np.array([self._pl.next_bet])

    @property
    def plugin_e_process(self) -> PlugInEProcess:
        """The single-row e-process (read it, do not update it)."""
        return self._pl

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, Any]:
        """Return the full state as a JSON-serializable dict (Python floats, exact)."""
        return self._state(self._pl.to_state())

    @classmethod
    @restorer("PlugInTest")
    def from_state(cls, d: dict[str, Any]) -> PlugInTest:
        """Rebuild a test from :meth:`to_state` output (bit-identical continuation)."""
        check_state(d)
        pl = PlugInEProcess.from_state(d["eprocess"])
        t = cls(pl.alpha, pl.delta, pl.side, d["rhos"], pl.bet)
        t._pl = pl
        t.load_progress(d)
        return t

    def load_state(self, d: dict[str, Any]) -> None:
        """Load :meth:`to_state` output of this configuration into a fresh :meth:`spawn`.

        The same result as :meth:`from_state`, sharing this test's read-only parts (a
        restored model's, say).

        Raises
        ------
        ValueError
            If ``d`` is not such a state, its configuration differs, or a value is invalid.
        """
        check_state(d)
        if not PlugInEProcess.is_state(d["eprocess"]):
            raise ValueError("load_state: only plugin_up tests are loaded into a spawn")
        if [float(r) for r in d["rhos"]] != list(self._rhos):
            raise ValueError("AutoEvalTest state: rhos differ from this test's")
        self._pl.load_state(d["eprocess"])
        self.load_progress(d)


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
