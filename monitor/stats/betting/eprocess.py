"""One-sided testing-by-betting e-processes, in log space, vectorized over S rows.

Row ``s`` observes ``q_s`` in ``[lo_s, hi_s]`` each round and keeps the wealth

- ``side="certify"`` (H0: mean > alpha): ``E_t = prod_i (1 - lam_i (q_i - alpha))``;
- ``side="violate"`` (H0: mean <= alpha): ``E_t = prod_i (1 + lam_i (q_i - alpha))``,

with predictable bets ``lam_i`` from :mod:`monitor.stats.betting.bets`. The WSR path runs on plain
Python floats (for S around 10 this beats numpy's per-call overhead several times over); the UP path
holds an ``(S, G)`` array of constant-bet log wealths.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from monitor.stats.betting.bets import BetConfig, Side, bet_cap, up_grid, wsr_prior, wsr_scale
from monitor.stats.betting.wsr_round import up_mixture, wsr_round, wsr_twin_round
from monitor.stats.state_contract import check_header, restorer

__all__ = ["BettingEProcess"]

_STATE_KIND = "certmon.BettingEProcess"


def _floats(x: ArrayLike, name: str) -> list[float]:
    arr = np.asarray(x, dtype=float)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {arr.tolist()}")
    return [float(v) for v in arr.tolist()]


class BettingEProcess:
    """S parallel one-sided betting e-processes sharing alpha, delta, side and bet rule.

    Parameters
    ----------
    alpha : float
        Risk level of the null boundary; must lie strictly inside every ``[lo_s, hi_s]``.
    delta : float
        Error level in (0, 1); the WSR bet is tuned for the threshold ``1/delta``.
    side : {"certify", "violate"}
        ``"certify"`` gathers evidence that the mean is <= alpha (H0: mean > alpha);
        ``"violate"`` gathers evidence that the mean is > alpha (H0: mean <= alpha).
    lo, hi : array_like, shape (S,)
        Observation range of each row.
    bet : BetConfig
        Bet rule ``"wsr"`` (anytime / fixed horizon) or ``"up"`` (universal portfolio over the
        whole range ``[0, 1/(M - alpha))``, capped by ``c`` only in WSR).

    Attributes
    ----------
    rounds : int
        Number of observations seen.

    Examples
    --------
    >>> ep = BettingEProcess(0.5, 0.1, "certify", [0.0], [1.0], BetConfig("wsr", c=0.5))
    >>> float(ep.next_bets[0])  # capped at c / (1 - alpha) = 1
    1.0
    >>> ep.update([0.0])       # wealth factor 1 - 1.0 * (0 - 0.5) = 1.5
    >>> round(float(ep.log_wealth[0]), 12) == round(math.log(1.5), 12)
    True

    Notes
    -----
    Guarantee: under H0 each row's wealth is a nonnegative supermartingale with initial value 1,
    so by Ville's inequality ``P(exists t: E_t >= 1/delta) <= delta``, at every stopping time and
    however often it is looked at. Assumptions: the observations are independent with a common
    mean (or, more generally, conditional mean on the correct side of alpha given the past), lie
    in ``[lo, hi]`` (checked), and bets depend on past observations only (by construction:
    ``next_bets`` is fixed before ``update`` sees the observation). Bets are non-negative and
    capped with ``c < 1``, so every factor is >= ``1 - c`` and the wealth never hits zero.
    """

    def __init__(
        self,
        alpha: float,
        delta: float,
        side: Side,
        lo: ArrayLike,
        hi: ArrayLike,
        bet: BetConfig,
    ) -> None:
        if side not in ("certify", "violate"):
            raise ValueError(f"side must be 'certify' or 'violate', got {side!r}")
        if not (isinstance(delta, (int, float)) and 0.0 < delta < 1.0):
            raise ValueError(f"delta must satisfy 0 < delta < 1, got {delta!r}")
        if not (isinstance(alpha, (int, float)) and math.isfinite(alpha)):
            raise ValueError(f"alpha must be a finite float, got {alpha!r}")
        los = _floats(lo, "lo")
        his = _floats(hi, "hi")
        if len(los) != len(his):
            raise ValueError(f"lo and hi must have the same length, got {len(los)} and {len(his)}")
        for a, b in zip(los, his, strict=True):
            if not a < alpha < b:
                raise ValueError(f"alpha={alpha} must lie strictly inside [lo, hi], got [{a}, {b}]")
        if bet.rule not in ("wsr", "up"):
            raise ValueError(f"BettingEProcess runs rules 'wsr' and 'up', not {bet.rule!r} "
                             "(see monitor.stats.betting.plugin)")
        self._alpha = float(alpha)
        self._delta = float(delta)
        self._side: Side = side
        self._bet = bet
        self._lo = los
        self._hi = his
        self._lo_arr = np.array(los)
        self._hi_arr = np.array(his)
        self._log_inv_delta = -math.log(self._delta)
        self._caps = [bet_cap(self._alpha, a, b, side, bet.c)
                      for a, b in zip(los, his, strict=True)]
        self._rounds = 0
        self._logw = [0.0] * len(los)
        if bet.rule == "wsr":
            priors = [wsr_prior(a, b) for a, b in zip(los, his, strict=True)]
            # running sums *including* the priors: msum = mu0 + sum_j q_j and
            # vsum = sigma0^2 + sum_j (q_j - mu_j)^2, so mu_t = msum / (t + 1) and
            # sigma_t^2 = vsum / (t + 1)  (paper eq. 21)
            self._msum = [p[0] for p in priors]
            self._vsum = [p[1] for p in priors]
            k1 = wsr_scale(self._log_inv_delta, 1, bet.horizon)
            self._bets = [min(cap, math.sqrt(k1 / v)) for cap, v in
                          zip(self._caps, self._vsum, strict=True)]
        else:
            frac, log_prior = up_grid(bet.up_grid)
            self._log_prior = log_prior
            # the paper's full range: u / (M - alpha) (certify), u / (alpha - m) (violate)
            full = [bet_cap(self._alpha, a, b, side, 1.0) for a, b in zip(los, his, strict=True)]
            self._grid_bets = np.array(full)[:, None] * frac[None, :]
            self._lwg = np.zeros((len(los), bet.up_grid))
            _, self._bets = self._up_summary()

    # ------------------------------------------------------------------ properties
    @property
    def alpha(self) -> float:
        """Risk level of the null boundary."""
        return self._alpha

    @property
    def delta(self) -> float:
        """Error level the bets are tuned for."""
        return self._delta

    @property
    def side(self) -> Side:
        """``"certify"`` or ``"violate"``."""
        return self._side

    @property
    def bet(self) -> BetConfig:
        """The bet rule."""
        return self._bet

    @property
    def lo(self) -> np.ndarray:
        """Lower end of each row's observation range, shape (S,)."""
        return self._lo_arr.copy()

    @property
    def hi(self) -> np.ndarray:
        """Upper end of each row's observation range, shape (S,)."""
        return self._hi_arr.copy()

    @property
    def rounds(self) -> int:
        """Number of observations seen."""
        return self._rounds

    @property
    def lo_list(self) -> list[float]:
        """Lower ends of the rows' ranges as the list the e-process uses (do not modify)."""
        return self._lo

    @property
    def hi_list(self) -> list[float]:
        """Upper ends of the rows' ranges as the list the e-process uses (do not modify)."""
        return self._hi

    @property
    def next_bets_list(self) -> list[float]:
        """Bets for the next round as the list the e-process uses (do not modify)."""
        return self._bets

    @property
    def next_bets(self) -> np.ndarray:
        """Bets ``lambda_{s, t+1}`` for the NEXT observation (predictable), shape (S,).

        For UP this is the effective bet: the wealth-weighted mean of the grid bets, which makes
        ``E_{t+1} = E_t (1 -/+ lam (q - alpha))`` hold exactly for the mixture wealth.
        """
        return np.array(self._bets)

    @property
    def log_wealth(self) -> np.ndarray:
        """Log wealth ``log E_{s, t}`` of each row, shape (S,)."""
        return np.array(self._logw)

    def log_wealth_list(self) -> list[float]:
        """Log wealths as the internal Python list (cheap; read it, do not mutate it)."""
        return self._logw

    # ------------------------------------------------------------------ updates
    def update(self, q: ArrayLike) -> None:
        """Multiply each row's wealth by its factor for observation ``q``, shape (S,).

        Raises
        ------
        ValueError
            If ``q`` has the wrong shape, is not finite or lies outside ``[lo, hi]``.
        """
        arr = np.asarray(q, dtype=float)
        if arr.ndim == 0:
            arr = arr.reshape(1)
        if arr.shape != self._lo_arr.shape:
            raise ValueError(f"q must have shape {self._lo_arr.shape}, got {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"q must be finite, got {arr.tolist()}")
        bad = (arr < self._lo_arr) | (arr > self._hi_arr)
        if np.any(bad):
            s = int(np.argmax(bad))
            raise ValueError(
                f"q[{s}]={float(arr[s])!r} outside its range [{self._lo[s]}, {self._hi[s]}]"
            )
        self.advance([float(v) for v in arr.tolist()])

    def advance(self, q: list[float]) -> None:
        """Update without input checks (``q`` is a list of S floats known to be in range).

        Used by :class:`~monitor.stats.betting.autoeval_mixture.MixtureTest`, which validates
        its inputs once and builds ``q`` so that it lies in range by construction.
        """
        if self._bet.rule == "wsr":
            self._advance_wsr(q)
        else:
            self._advance_up(q)

    def _advance_wsr(self, q: list[float]) -> None:
        t = self._rounds + 1
        # bet for round t + 1: sqrt(K_{t+1} / sigma_t^2) with sigma_t^2 = vsum / (t + 1)
        k = wsr_scale(self._log_inv_delta, t + 1, self._bet.horizon) * (t + 1)
        self._logw, self._msum, self._vsum, self._bets = wsr_round(
            self._side, q, self._bets, self._logw, self._msum, self._vsum, self._caps,
            self._alpha, k, 1.0 / (t + 1))
        self._rounds = t

    def is_twin_of(self, other: BettingEProcess) -> bool:
        """Tell whether ``other`` is the opposite-side WSR twin (same rows, delta, bets, state).

        Twins see the same observations, so their WSR mean/variance statistics coincide and
        :meth:`advance_twins` can update both in one pass.
        """
        return (
            self._bet.rule == "wsr"
            and self._bet == other._bet
            and self._side != other._side
            and self._alpha == other._alpha
            and self._delta == other._delta
            and self._lo == other._lo
            and self._hi == other._hi
            and self._rounds == other._rounds
            and self._msum == other._msum
            and self._vsum == other._vsum
        )

    def advance_twins(self, other: BettingEProcess, q: list[float]) -> None:
        """Advance this certify-side process and its violate-side twin on the same ``q``.

        Bit-identical to ``self.advance(q); other.advance(q)`` (same float operations in the
        same order), about a third cheaper. The caller must have checked :meth:`is_twin_of`
        (with ``self`` the certify side) and that ``q`` is in range.
        """
        t = self._rounds + 1
        k = wsr_scale(self._log_inv_delta, t + 1, self._bet.horizon) * (t + 1)
        (self._logw, msums, vsums, self._bets), (other._logw, other._bets) = wsr_twin_round(
            q, self._bets, other._bets, self._logw, other._logw, self._msum, self._vsum,
            self._caps, other._caps, self._alpha, k, 1.0 / (t + 1))
        self._msum = other._msum = msums
        self._vsum = other._vsum = vsums
        self._rounds = other._rounds = t

    def _advance_up(self, q: list[float]) -> None:
        x = np.array(q)
        g = self._alpha - x if self._side == "certify" else x - self._alpha
        self._lwg += np.log1p(self._grid_bets * g[:, None])
        self._logw, self._bets = self._up_summary()
        self._rounds += 1

    def _up_summary(self) -> tuple[list[float], list[float]]:
        return up_mixture(self._lwg, self._log_prior, self._grid_bets)

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, Any]:
        """Return the full state as a JSON-serializable dict (Python floats, exact)."""
        d: dict[str, Any] = {
            "kind": _STATE_KIND,
            "version": 1,
            "alpha": self._alpha,
            "delta": self._delta,
            "side": self._side,
            "lo": list(self._lo),
            "hi": list(self._hi),
            "bet": self._bet.to_dict(),
            "rounds": self._rounds,
            "log_wealth": list(self._logw),
            "next_bets": list(self._bets),
        }
        if self._bet.rule == "wsr":
            d["wsr"] = {"msum": list(self._msum), "vsum": list(self._vsum)}
        else:
            d["up"] = {"log_wealth_grid": self._lwg.tolist()}
        return d

    @classmethod
    @restorer("BettingEProcess")
    def from_state(cls, d: dict[str, Any]) -> BettingEProcess:
        """Rebuild an e-process from :meth:`to_state` output (bit-identical continuation)."""
        check_header(d, _STATE_KIND, 1, "BettingEProcess")
        ep = cls(d["alpha"], d["delta"], d["side"], d["lo"], d["hi"],
                 BetConfig.from_dict(d["bet"]))
        n = len(ep._lo)
        ep._rounds = int(d["rounds"])
        ep._logw = [float(v) for v in d["log_wealth"]]
        ep._bets = [float(v) for v in d["next_bets"]]
        if len(ep._logw) != n or len(ep._bets) != n:
            raise ValueError("BettingEProcess state has inconsistent row counts")
        if ep._bet.rule == "wsr":
            ep._msum = [float(v) for v in d["wsr"]["msum"]]
            ep._vsum = [float(v) for v in d["wsr"]["vsum"]]
        else:
            lwg = np.array(d["up"]["log_wealth_grid"], dtype=float)
            if lwg.shape != ep._lwg.shape:
                raise ValueError(f"UP grid state has shape {lwg.shape}, expected {ep._lwg.shape}")
            ep._lwg = lwg
        return ep
