"""Two-sided confidence sequence for a risk by hedged betting capital on a grid.

The confidence interval for R-Eval (``rhos = [0]``), R-AutoEval (``rhos = [1]``) and R-AutoEval+
(``S`` values of ``rho`` in ``[0, 1]``), following R-AutoEval+ (Park, Zecchin, Simeone) App. D.5
and Waudby-Smith & Ramdas (2024) Sec. 4.4: every grid value ``m`` is tested from both sides with
``delta / 2`` each, the rejected values are cut away, and the running intersection is reported.
The vectorized per-round arithmetic lives in :mod:`monitor.stats.betting.grid_wealth`.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from monitor.stats.betting.bets import DEFAULT_CS_GRID, BetConfig, up_grid
from monitor.stats.betting.grid_wealth import (
    apply_wsr_bets,
    bet_caps,
    fold_wsr_sums,
    grid_points,
    hull_edges,
    log_mixture,
    may_move_edges,
    update_log_wealth,
    wsr_bets,
)
from monitor.stats.state_contract import restorer

__all__ = ["HedgedConfidenceSequence"]

FloatArray = npt.NDArray[np.float64]
_FORMAT = "certmon.confseq"
_VERSION = 1


def _check_loss(name: str, value: float) -> float:
    if type(value) is float and 0.0 <= value <= 1.0:  # the common case, NaN fails the test
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"{name} must be a float in [0, 1], got {value!r}")
    v = float(value)
    if not (math.isfinite(v) and 0.0 <= v <= 1.0):
        raise ValueError(f"{name} must be a finite float in [0, 1], got {value!r}")
    return v


class HedgedConfidenceSequence:
    """Anytime-valid two-sided confidence sequence for the risk ``R = E[loss]`` of one method.

    Parameters
    ----------
    delta : float
        Miscoverage level, ``0 < delta < 1``:
        ``P(R in [lower, upper] at all rounds) >= 1 - delta``.
    rhos : array_like, shape (S,)
        Reliance factors in ``[0, 1]``: ``[0]`` R-Eval, ``[1]`` R-AutoEval, ``S`` values (e.g.
        ``linspace(0, 1, 10)``) R-AutoEval+ with uniform initial weights.
    bet : BetConfig
        Bet rule (``"wsr"`` or ``"up"``) and cap fraction ``c``; ``"plugin_up"`` is run as
        anytime WSR with ``c = 1/2`` (:meth:`BetConfig.confseq_config`).
    grid_size : int
        ``G >= 2``: the points ``m = j / G``, ``j = 1..G-1``, are tested; bounds are multiples of
        ``1 / G``.

    Attributes
    ----------
    lower, upper : float
        Running intersection, initially ``0.0`` and ``1.0``. While ``valid``,
        ``upper - lower >= 1 / G``. Once invalid they freeze with ``lower >= upper``.
    valid : bool
        ``False`` once the running intersection is empty (an event of probability ``<= delta``).
    rounds : int
        Number of rounds processed.

    Examples
    --------
    >>> cs = HedgedConfidenceSequence(0.1, np.array([0.0]), BetConfig(), grid_size=100)
    >>> (cs.lower, cs.upper, cs.valid)
    (0.0, 1.0, True)
    >>> for i in range(400):
    ...     cs.update(float(i % 10 < 3), 0.0, None)   # losses with mean 0.3
    >>> cs.lower < 0.3 < cs.upper and cs.upper - cs.lower < 0.25
    True
    >>> HedgedConfidenceSequence.from_state(cs.to_state()).to_state() == cs.to_state()
    True

    Notes
    -----
    *Guarantee.* If the rounds' ``(human, judge, block mean)`` are i.i.d. (more generally: each
    effective observation ``q_s = rho_s b + l - rho_s f`` has conditional mean ``R`` given the
    past, with ``b`` a fresh block mean of the judge on unaudited units, or ``q_s = l`` when the
    block is empty), then with probability at least ``1 - delta``, ``lower <= R <= upper`` at every
    round simultaneously, so the interval may be read at data-dependent times.

    *Tests.* For each grid point ``m`` and each ``rho_s`` two wealth processes are kept:
    ``E^up_s(m) = prod (1 - lam (q_s - m))`` (H0: R >= m) and ``E^lo_s(m) = prod (1 + lam (q_s -
    m))`` (H0: R <= m). Each side uses the rho mixture ``sum_s w0_s E_s(m)``, ``w0 = 1/S`` (equal
    to betting with the wealth-proportional weights of eq. 13, paper eq. 25), and rejects ``m``
    when it reaches ``2 / delta``. At ``m = R`` each mixture is a nonnegative supermartingale with
    initial value 1, so by Ville's inequality it ever reaches ``2 / delta`` with probability
    ``<= delta / 2``; the union over the two sides gives ``delta`` (the paper's App. D.5 with
    ``eps = 1/2``; WSR's summed hedged capital ``(E^up + E^lo) / 2 >= 1 / delta`` is not used).

    *Bets.* WSR: ``lam_s = min(sqrt(K_t / sigma_s^2), cap_s(m))`` with the anytime
    ``K_t = 2 log(2/delta) / (t log(1+t))`` (or ``2 log(2/delta) / n`` with ``bet.horizon = n``)
    and rho's own running mean/variance (eq. 21), computed from past rounds only, the same for
    every ``m`` except for the cap ``c / (M_s - m)`` (upper) or ``c / (m - m_s)`` (lower), where
    ``[m_s, M_s] = [-rho_s, 1 + rho_s]``. UP: bettor ``k`` bets ``u_k * cap_s(m)`` on fixed
    fractions ``u_k`` (Beta(1/2, 1/2) prior), and ``E_s(m)`` is the prior mixture of the bettors,
    which is exactly the universal-portfolio wealth. Every factor is ``>= 1 - c > 0``.

    *Interval.* With such bets, ``E^up_s(m)`` is non-decreasing in ``m`` for every path: a factor
    ``1 - lam(m) (q - m)`` with ``lam(m) = min(lam, c / (M_s - m))`` is non-decreasing in ``m``
    (if ``q <= m``, ``lam(m)`` and ``m - q`` are non-negative and non-decreasing; if ``q > m``,
    both ``lam (q - m)`` and ``c (q - m) / (M_s - m)`` are non-increasing because ``q <= M_s``),
    and so are products of positive such factors, prior mixtures over ``u_k`` and the rho
    mixture. Symmetrically ``E^lo`` is non-increasing. Hence per side the rejected set is
    ``(b, 1)`` resp. ``(0, a)``, the accepted set is an interval, and on the event above no
    ``m >= R`` is ever rejected by the lower test and no ``m <= R`` by the upper test: rejected
    grid points lie strictly on the correct side of ``R``. The bounds are grid edges rounded
    outward: ``lower`` is the grid point just below the first point the lower test accepts (or 0),
    ``upper`` the point just above the last point the upper test accepts (or 1), i.e. the convex
    hull of the accepted points widened by one cell on each side, which stays conservative even
    if rounding ever broke monotonicity. ``lower < R < upper`` on the event (for ``0 < R < 1``).

    *Running intersection and validity.* ``lower`` is the running max, ``upper`` the running
    min. An empty intersection (``lower >= upper``: some grid point rejected by both sides) is
    impossible on the event above; it sets ``valid = False`` for good, freezes ``lower`` and
    ``upper`` at the crossing values and stops the wealth updates (``rounds`` still counts).
    While valid, the interval is never a single point: ``upper - lower >= 1 / G``.

    *Incremental cost.* Only grid points inside ``[lower, upper]`` are tracked: a point outside
    can no longer move the running bounds (by monotonicity any later rejection there implies one
    at the tracked edge points), so its wealth is dropped. One vectorized pass per round costs
    ``O(S W)`` (WSR) or ``O(S W K)`` (UP, ``K = bet.up_grid``) with ``W <= G - 1`` the tracked
    points; W shrinks like the interval width. UP at ``G = 1000`` is heavy early on (about
    ``2 S G K`` log1p/exp per round, and ``3 * 2 S G K`` floats of memory): prefer a coarser
    ``grid_size`` or ``up_grid`` for UP. The state stores the tracked points only. The
    mixtures and the hull are recomputed over the whole window only in rounds that can move a
    bound: the window includes the (rejected) edge points, so a bound moves only when the point
    just inside it is rejected, and that is checked first on those two points with a margin
    far above rounding error (:func:`monitor.stats.betting.grid_wealth.may_move_edges`); the bounds
    are exactly those of the full computation. The per-rho scalars (``q``, WSR sums and
    bets) use Python floats: the same correctly rounded operations in the same order as the
    numpy reference, so results are bit-identical to it.
    """

    def __init__(
        self, delta: float, rhos: npt.ArrayLike, bet: BetConfig, grid_size: int = DEFAULT_CS_GRID
    ) -> None:
        if isinstance(delta, bool) or not isinstance(delta, (int, float)):
            raise ValueError(f"delta must be a float in (0, 1), got {delta!r}")
        if not 0.0 < float(delta) < 1.0:
            raise ValueError(f"delta must satisfy 0 < delta < 1, got {delta!r}")
        r = np.array(rhos, dtype=np.float64).reshape(-1) if np.ndim(rhos) <= 1 else None
        if r is None or r.size == 0 or not np.all(np.isfinite(r)) or np.any((r < 0) | (r > 1)):
            raise ValueError(f"rhos must be a non-empty 1-D array in [0, 1], got {rhos!r}")
        if not isinstance(bet, BetConfig):
            raise ValueError(f"bet must be a BetConfig, got {bet!r}")
        bet = bet.confseq_config()  # plugin_up certificates keep anytime WSR bets here
        self._grid = grid_points(grid_size)
        self._g = grid_size
        self._delta = float(delta)
        self._rhos = r
        self._bet = bet
        self._log_thr = -math.log(self._delta / 2.0)
        self._caps = bet_caps(r, self._grid, float(bet.c))
        # wsr_prior(lo, hi) of monitor.stats.betting.bets, vectorized over rho: range [-rho, 1 +
        # rho]
        lo, hi = -r, 1.0 + r
        self._mu0: FloatArray = 0.5 * (lo + hi)
        self._var0: FloatArray = 0.25 * (hi - lo) ** 2
        if bet.rule == "up":
            u, logw = up_grid(bet.up_grid)
            self._up: FloatArray | None = u
            self._up_logw: FloatArray | None = logw
        else:
            self._up = None
            self._up_logw = None
        self.rounds = 0
        self.valid = True
        self._lo_edge = 0
        self._hi_edge = grid_size
        self._first = 1
        self._total: list[float] = [0.0] * r.size
        self._dev: list[float] = [0.0] * r.size
        self._log_wealth = np.zeros(self._wealth_shape(grid_size - 1))
        # work buffers (not state): views of their first W columns are used every round
        self._scratch = (np.empty_like(self._log_wealth), np.empty_like(self._log_wealth))
        # Python-float copies for the per-round scalar arithmetic (same IEEE operations as
        # the numpy reference, correctly rounded either way, hence bit-identical)
        self._rhos_l: list[float] = r.tolist()
        self._mu0_l: list[float] = self._mu0.tolist()
        self._var0_l: list[float] = self._var0.tolist()
        self._set_window()

    def _set_window(self) -> None:
        """Cache the views of the tracked window (grid, caps, work buffers); not state."""
        first = self._first
        width = self._log_wealth.shape[2]
        sl = slice(first - 1, first - 1 + width)
        self._win_grid = self._grid[sl]
        self._win_caps = self._caps[:, :, sl]
        self._win_scratch = (self._scratch[0][:, :, :width], self._scratch[1][:, :, :width])

    def _wealth_shape(self, width: int) -> tuple[int, ...]:
        base = (2, self._rhos.size, width)
        return base if self._up is None else (*base, self._up.size)

    # ------------------------------------------------------------------ read-only views
    @property
    def lower(self) -> float:
        """Lower end of the running intersection (a multiple of ``1 / grid_size``)."""
        return self._lo_edge / self._g

    @property
    def upper(self) -> float:
        """Upper end of the running intersection (a multiple of ``1 / grid_size``)."""
        return self._hi_edge / self._g

    @property
    def delta(self) -> float:
        """Miscoverage level of the whole sequence."""
        return self._delta

    @property
    def rhos(self) -> FloatArray:
        """Reliance factors (copy)."""
        return self._rhos.copy()

    @property
    def grid_size(self) -> int:
        """Number of grid cells ``G``."""
        return self._g

    @property
    def tracked(self) -> tuple[int, int]:
        """``(first, last)`` edge index of the grid points still tracked (``j`` means ``j / G``)."""
        return self._first, self._first + self._log_wealth.shape[2] - 1

    @property
    def next_bets(self) -> FloatArray | None:
        """WSR: uncapped bets ``lam_s`` for the next round, shape (S,); ``None`` for UP.

        The bet used at grid point ``m`` is ``min(lam_s, cap_s(m))``: the only dependence on
        ``m`` is the cap (see :meth:`effective_bets`).
        """
        if self._up is not None:
            return None
        return wsr_bets(np.array(self._dev), self.rounds, self._var0, self._log_thr,
                        self._bet.horizon)

    def effective_bets(self, side: Literal["upper", "lower"]) -> FloatArray:
        """Bets for the next round at every grid point, shape (S, G - 1), from the past only.

        WSR: ``min(lam_s, cap_s(m))``. UP: ``cap_s(m)`` times the wealth-weighted mean fraction
        (the universal-portfolio bet; at untracked points it uses the prior only).
        """
        k = 0 if side == "upper" else 1
        caps = self._caps[k]
        if self._up is None:
            lam = self.next_bets
            if lam is None:
                raise RuntimeError("WSR confidence sequence without bets")
            return np.asarray(np.minimum(lam[:, None], caps), dtype=np.float64)
        if self._up_logw is None:
            raise RuntimeError("UP confidence sequence without its prior weights")
        logw = np.broadcast_to(self._up_logw, (*caps.shape, self._up.size)).copy()
        first, last = self.tracked
        logw[:, first - 1 : last] += self._log_wealth[k]
        w = np.exp(logw - logw.max(axis=-1, keepdims=True))
        return np.asarray(caps * (w @ self._up) / w.sum(axis=-1), dtype=np.float64)

    # ------------------------------------------------------------------ update
    def update(self, human_loss: float, judge_loss: float, block_mean: float | None) -> None:
        """Process one round; raises ``ValueError`` (and changes nothing) on bad input.

        Parameters
        ----------
        human_loss, judge_loss : float
            Human and judge loss of the same audited unit, in ``[0, 1]``.
        block_mean : float or None
            Mean judge loss of this round's unaudited block, in ``[0, 1]``; ``None`` for an
            empty block (then every ``q_s`` is the human loss).
        """
        lval = _check_loss("human_loss", human_loss)
        fval = _check_loss("judge_loss", judge_loss)
        if block_mean is None:
            q = [lval] * len(self._rhos_l)
        else:
            b = _check_loss("block_mean", block_mean)
            q = [r * b + lval - r * fval for r in self._rhos_l]
        self.rounds += 1
        if not self.valid:
            return
        t = self.rounds  # this round; its bets use rounds 1..t-1 only
        lw = self._log_wealth
        sa, sb = self._win_scratch
        if self._up is None:
            apply_wsr_bets(lw, q, t, self._log_thr, self._bet.horizon, self._var0_l, self._dev,
                           self._win_grid, self._win_caps, (sa, sb))
        else:
            update_log_wealth(lw, np.array(q), self._win_grid, self._win_caps, None, self._up,
                              (sa, sb))
        self._total, self._dev = fold_wsr_sums(q, t, self._mu0_l, self._total, self._dev)
        if not self._may_reject(lw):
            return  # no tracked point can be rejected this round: the bounds stay put
        first = self._first
        last = first + lw.shape[2] - 1
        rejected = log_mixture(lw, self._up_logw, sa) >= self._log_thr
        lo_e, hi_e = hull_edges(rejected, first)
        self._lo_edge = max(self._lo_edge, lo_e)
        self._hi_edge = min(self._hi_edge, hi_e)
        if self._lo_edge >= self._hi_edge:
            self.valid = False
            return
        new_first = max(self._lo_edge, 1)
        new_last = min(self._hi_edge, self._g - 1)
        if (new_first, new_last) != (first, last):
            keep = lw[:, :, new_first - first : new_last - first + 1]
            self._log_wealth = np.ascontiguousarray(keep)
            self._first = new_first
            self._set_window()

    def _may_reject(self, lw: FloatArray) -> bool:
        """Whether this round could move a bound (see :func:`may_move_edges`)."""
        return may_move_edges(lw, self._hi_edge - 1 - self._first,
                              self._lo_edge + 1 - self._first, self._log_thr)

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, Any]:
        """Return the state as plain JSON types; floats are exact (``json`` round-trips them).

        Only the tracked grid points' log-wealth is stored.
        """
        return {
            "format": _FORMAT,
            "version": _VERSION,
            "delta": self._delta,
            "rhos": self._rhos.tolist(),
            "bet": self._bet.to_dict(),
            "grid_size": self._g,
            "rounds": self.rounds,
            "valid": self.valid,
            "lower_edge": self._lo_edge,
            "upper_edge": self._hi_edge,
            "tracked_first": self._first,
            "wsr_total": list(self._total),
            "wsr_dev": list(self._dev),
            "log_wealth": self._log_wealth.tolist(),
        }

    @classmethod
    @restorer("HedgedConfidenceSequence")
    def from_state(cls, d: dict[str, Any]) -> HedgedConfidenceSequence:
        """Rebuild from :meth:`to_state` output; continues bit-identically.

        Raises
        ------
        ValueError
            If ``d`` is not a state of this format/version or is inconsistent.
        """
        if not isinstance(d, dict) or d.get("format") != _FORMAT or d.get("version") != _VERSION:
            raise ValueError("not a certmon.confseq state of version 1")
        try:
            bet = BetConfig.from_dict(dict(d["bet"]))
            cs = cls(d["delta"], np.asarray(d["rhos"], dtype=np.float64), bet, d["grid_size"])
            rounds, lo, hi, valid = d["rounds"], d["lower_edge"], d["upper_edge"], d["valid"]
            first = d["tracked_first"]
            total = np.asarray(d["wsr_total"], dtype=np.float64)
            dev = np.asarray(d["wsr_dev"], dtype=np.float64)
            lw = np.asarray(d["log_wealth"], dtype=np.float64)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed confseq state: {exc}") from exc
        ints = (rounds, lo, hi, first)
        if not (all(isinstance(v, int) and not isinstance(v, bool) for v in ints)
                and isinstance(valid, bool)):
            raise ValueError("malformed confseq state: rounds/edges/valid types")
        if not (rounds >= 0 and 0 <= lo <= cs._g and 0 <= hi <= cs._g and 1 <= first < cs._g):
            raise ValueError("malformed confseq state: rounds or edges out of range")
        if valid and not (lo < hi and first == max(lo, 1)):
            raise ValueError("malformed confseq state: a valid state needs lower < upper")
        if total.shape != cs._rhos.shape or dev.shape != cs._rhos.shape:
            raise ValueError("malformed confseq state: wsr sums do not match rhos")
        cs.rounds, cs.valid, cs._lo_edge, cs._hi_edge = rounds, valid, lo, hi
        cs._first, cs._total, cs._dev = first, total.tolist(), dev.tolist()
        width = lw.shape[2] if lw.ndim >= 3 else -1
        expected = min(hi, cs._g - 1) - first + 1 if valid else width
        if (lw.shape != cs._wealth_shape(expected) or first + width - 1 >= cs._g
                or not np.all(np.isfinite(lw))):
            raise ValueError("malformed confseq state: log_wealth shape or values")
        cs._log_wealth = lw
        cs._set_window()
        return cs
