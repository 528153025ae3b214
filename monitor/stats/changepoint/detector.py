"""E-detectors for an increase of a risk above ``alpha`` (Shiryaev-Roberts and CUSUM kinds).

Pre-change null class: every round's observation ``x_t >= lo_t`` has conditional mean
``E[x_t | past] <= alpha`` (no independence or identical distribution needed). One constant bet
``lam`` gives the per-round e-value factor ``L_t = 1 + lam (x_t - alpha)`` with
``lam = u / (alpha - lo_t)``, ``u`` in ``(0, 1)``, so ``L_t >= 1 - u > 0`` and
``E[L_t | past] <= 1`` under the null. From these factors, per component ``j`` (a bet fraction
``u_k`` applied to a view ``v`` of the round):

- e-SR:     ``R_t = L_t (R_{t-1} + 1)``, ``R_0 = 0`` (sum of the e-processes started at 1..t);
- e-CUSUM:  ``M_t = L_t max(M_{t-1}, 1)`` (their maximum), so ``M_t <= R_t``.

The detector's statistic is the average of the ``J = V K`` component statistics, and it alarms
the first time the statistic reaches the threshold ``A``. Everything is kept in log space; a
round costs ``O(J)``.

A *view* is one observation of the round that is (conditionally) unbiased for the same risk,
e.g. the human loss ``l`` and the PPI++ observation ``q = l + rho (b - f)``; averaging e-detectors
over views is again an e-detector.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from monitor.stats.changepoint.rounds import advance as _advance_round
from monitor.stats.changepoint.rounds import as_views, round_views
from monitor.stats.changepoint.thresholds import (
    DEFAULT_HORIZON,
    DEFAULT_P,
    FloatArray,
    IntArray,
    Kind,
    bet_fractions,
    check_fractions,
    threshold_from,
)
from monitor.stats.state_contract import restorer

__all__ = [
    "DEFAULT_HORIZON",
    "DEFAULT_P",
    "TOLERANCE",
    "FloatArray",
    "IntArray",
    "Kind",
    "RiskIncreaseDetector",
    "advance_components",
    "as_views",
    "bet_fractions",
    "check_fractions",
    "log_mean_exp",
    "threshold_from",
]

_KIND = "certmon.RiskIncreaseDetector"
TOLERANCE = 1e-9


_DEFAULT_FRACTIONS = bet_fractions()
_DEFAULT_FRACTIONS.setflags(write=False)  # a shared read-only constant, never state
_DEFAULT_FRS = tuple(float(u) for u in _DEFAULT_FRACTIONS.tolist())


def _tiled(fr: FloatArray, views: int) -> tuple[FloatArray, tuple[float, ...]]:
    arr = np.tile(fr, views)
    arr.setflags(write=False)
    return arr, tuple(float(u) for u in arr.tolist())


# the default fractions tiled for one and two views: read-only constants shared by detectors
_DEFAULT_TILED: Mapping[int, tuple[FloatArray, tuple[float, ...]]] = MappingProxyType(
    {v: _tiled(_DEFAULT_FRACTIONS, v) for v in (1, 2)})


# ---------------------------------------------------------------------------- kernel
def log_mean_exp(logs: FloatArray, log_w: float) -> FloatArray:
    """``log(mean_j exp(logs[..., j]))`` along the last axis (``-inf`` rows stay ``-inf``)."""
    m = np.max(logs, axis=-1)
    safe = np.where(np.isfinite(m), m, 0.0)
    s = np.sum(np.exp(logs - safe[..., None]), axis=-1)
    with np.errstate(divide="ignore"):
        return np.asarray(safe + np.log(s) + log_w, dtype=np.float64)


def advance_components(
    log_sr: FloatArray,
    log_cu: FloatArray,
    start: IntArray,
    seg_sum: FloatArray,
    t: int,
    xj: FloatArray,
    loj: FloatArray,
    alpha: float,
    frj: FloatArray,
) -> tuple[FloatArray, FloatArray, IntArray, FloatArray]:
    """One round for arrays of shape ``(..., J)``; returns the new state (no mutation)."""
    lam = frj / (alpha - loj)
    log_l = np.log1p(lam * (xj - alpha))
    new_sr = log_l + np.logaddexp(log_sr, 0.0)
    restart = log_cu <= 0.0  # max(M, 1) = 1: the CUSUM's best segment restarts at round t
    new_cu = log_l + np.maximum(log_cu, 0.0)
    new_start = np.where(restart, t, start).astype(np.int64)
    new_seg = np.where(restart, xj, seg_sum + xj)
    return new_sr, new_cu, new_start, new_seg


def _log_mean_exp_list(logs: list[float], log_w: float) -> float:
    # log_mean_exp of one row, on floats (same steps as the numpy version)
    m = max(logs)
    if not math.isfinite(m):
        return m
    exp = math.exp
    return m + math.log(sum([exp(v - m) for v in logs])) + log_w


# ---------------------------------------------------------------------------- online class
class RiskIncreaseDetector:
    """Mixture e-detector (Shiryaev-Roberts or CUSUM) for an increase of a risk above ``alpha``.

    Parameters
    ----------
    alpha : float
        Null boundary: pre-change, every view of every round has conditional mean ``<= alpha``.
    kind : {"sr", "cusum"}
        Statistic that raises the alarm. ``"sr"`` (default) detects sooner at the same
        threshold; ``"cusum"`` is smaller (``M_t <= R_t``) and alarms far less often than its
        bound allows. The CUSUM recursion is run in both cases: it gives the change estimates.
    arl, p, horizon :
        Threshold, see :func:`threshold_from` (default ``A = 4500 / 0.02 = 225000``).
    fractions : sequence of float, optional
        Bet fractions ``u_k`` in ``(0, 1)`` (default :func:`bet_fractions` ``(8, 0.05, 0.9)``);
        the bet on view ``v`` at round ``t`` is ``u_k / (alpha - lo_{t, v})``.
    views : int
        Number of observations per round (each unbiased for the same risk). Default 1.

    Examples
    --------
    >>> det = RiskIncreaseDetector(0.1, arl=1000.0)
    >>> for _ in range(200):
    ...     det.update(0.0)          # a healthy stretch: the statistic stays small
    >>> det.alarm
    False
    >>> for _ in range(40):
    ...     det.update(1.0)          # every unit fails from round 201 on
    >>> det.alarm, det.change_round, det.risk_before, det.risk_after
    (True, 201, 0.0, 1.0)
    >>> det.alarm_round
    204

    Notes
    -----
    Guarantee (Shin, Ramdas & Rinaldo, e-detectors): if for every round ``t`` before the change
    and every view ``v``, ``x_{t,v} >= lo_{t,v}`` and ``E[x_{t,v} | F_{t-1}] <= alpha``, where
    ``F_{t-1}`` holds everything seen before round ``t`` and ``lo_{t,v}`` is fixed before
    ``x_{t,v}`` is seen (predictable), then each component's ``R_t - t`` is a supermartingale, so
    is the mixture's, and without a change:

    - ``E[N] >= A`` for the alarm time ``N`` (average run length);
    - ``P(N <= T) <= T / A`` for every horizon ``T`` (Ville's inequality applied to the
      nonnegative supermartingale ``R_t + T - t``), e.g. 2% over 4500 rounds with ``A = 225000``.

    Both hold for ``kind="cusum"`` too, since ``M_t <= R_t`` component-wise. No independence,
    identical distribution or stationarity is assumed; bets are constant, so the detection
    delay does not depend on how long the stream was healthy. The change estimates
    (:attr:`change_round`, :attr:`risk_before`, :attr:`risk_after`) come from the CUSUM
    component with the largest statistic: its segment start is the maximiser over start times
    of that bet's likelihood-ratio-like product. They are descriptive (``risk_after`` is biased
    upwards by the selection), not confidence statements.
    """

    def __init__(
        self,
        alpha: float,
        *,
        kind: Kind = "sr",
        arl: float | None = None,
        p: float | None = None,
        horizon: int | None = None,
        fractions: Sequence[float] | FloatArray | None = None,
        views: int = 1,
    ) -> None:
        if not (isinstance(alpha, (int, float)) and math.isfinite(alpha)):
            raise ValueError(f"alpha must be a finite float, got {alpha!r}")
        if kind not in ("sr", "cusum"):
            raise ValueError(f"kind must be 'sr' or 'cusum', got {kind!r}")
        if isinstance(views, bool) or not isinstance(views, int) or views < 1:
            raise ValueError(f"views must be an int >= 1, got {views!r}")
        self._alpha = float(alpha)
        self._kind: Kind = kind
        self._threshold = threshold_from(arl, p, horizon)
        self._log_a = math.log(self._threshold)
        self._log_a_near = self._log_a - 1e-9 * (1.0 + abs(self._log_a))
        self._fr = _DEFAULT_FRACTIONS if fractions is None else check_fractions(fractions)
        self._views = views
        if fractions is None and views in _DEFAULT_TILED:
            self._frj, self._frj_list = _DEFAULT_TILED[views]
        else:
            self._frj, self._frj_list = _tiled(self._fr, views)
        # one view's fractions as floats (the default ones shared)
        self._frs = _DEFAULT_FRS if fractions is None else tuple(self._fr.tolist())
        self._log_w = -math.log(self._frj.size)
        self.reset()

    def reset(self) -> None:
        """Forget all rounds (new epoch), keeping the configuration."""
        j = self._frj.size
        self._rounds = 0
        # plain floats: with J around 16, Python floats beat numpy's per-call overhead ~5x
        self._log_sr: list[float] = [-math.inf] * j
        self._log_cu: list[float] = [-math.inf] * j
        self._start: list[int] = [1] * j
        self._seg: list[float] = [0.0] * j
        self._total: list[float] = [0.0] * self._views
        self._alarm_round: int | None = None

    def spawn(self) -> RiskIncreaseDetector:
        """Return a fresh detector of this configuration (no round), sharing its read-only parts.

        The same state as a newly built one, without re-validating the configuration (a new
        model's detector, say).

        Examples
        --------
        >>> d = RiskIncreaseDetector(0.1, arl=1000.0, views=2); d.update([1.0, 1.0])
        >>> d.spawn().to_state() == RiskIncreaseDetector(0.1, arl=1000.0, views=2).to_state()
        True
        """
        new = RiskIncreaseDetector.__new__(RiskIncreaseDetector)
        new.__dict__.update(self.__dict__)  # configuration: floats, tuples, read-only arrays
        new.reset()  # state: lists of its own
        return new

    # ------------------------------------------------------------------ properties
    @property
    def alpha(self) -> float:
        """Null boundary of the risk."""
        return self._alpha

    @property
    def kind(self) -> Kind:
        """``"sr"`` or ``"cusum"``: which statistic raises the alarm."""
        return self._kind

    @property
    def threshold(self) -> float:
        """Alarm threshold ``A``."""
        return self._threshold

    @property
    def fractions(self) -> FloatArray:
        """Bet fractions ``u_k`` (a copy)."""
        return self._fr.copy()

    @property
    def views(self) -> int:
        """Number of observations per round."""
        return self._views

    @property
    def rounds(self) -> int:
        """Rounds seen since construction or the last :meth:`reset`."""
        return self._rounds

    @property
    def log_statistic(self) -> float:
        """Log of the mixture statistic (``-inf`` before the first round)."""
        return _log_mean_exp_list(self._log_sr if self._kind == "sr" else self._log_cu,
                                  self._log_w)

    @property
    def statistic(self) -> float:
        """The mixture statistic (average over components); alarm when it reaches the threshold."""
        return math.exp(min(self.log_statistic, 700.0))

    @property
    def alarm(self) -> bool:
        """Whether the statistic has reached the threshold (latched until :meth:`reset`)."""
        return self._alarm_round is not None

    @property
    def alarm_round(self) -> int | None:
        """First round (1-based) at which the statistic reached the threshold, else None."""
        return self._alarm_round

    def _best(self) -> int | None:
        cu = self._log_cu
        best = max(cu)
        if self._rounds == 0 or best <= 0.0:
            return None
        return cu.index(best)

    @property
    def change_round(self) -> int | None:
        """Estimated first post-change round: start of the leading CUSUM segment.

        None when no CUSUM component exceeds 1 (no evidence of a change).
        """
        j = self._best()
        return None if j is None else int(self._start[j])

    @property
    def change_view(self) -> int | None:
        """View (0-based) of the leading CUSUM component, or None."""
        j = self._best()
        return None if j is None else j // self._fr.size

    @property
    def risk_after(self) -> float | None:
        """Mean of the leading view over the rounds since :attr:`change_round`, or None."""
        j = self._best()
        if j is None:
            return None
        return float(self._seg[j]) / (self._rounds - int(self._start[j]) + 1)

    @property
    def risk_before(self) -> float | None:
        """Mean of the leading view over the rounds before :attr:`change_round`, or None."""
        j = self._best()
        if j is None or int(self._start[j]) <= 1:
            return None
        v = j // self._fr.size
        return float(self._total[v] - self._seg[j]) / (int(self._start[j]) - 1)

    # ------------------------------------------------------------------ updates
    def update(
        self,
        x: float | Sequence[float] | FloatArray,
        lo: float | Sequence[float] | FloatArray = 0.0,
    ) -> None:
        """Feed one round: observation(s) ``x`` (one per view) with predictable lower bounds ``lo``.

        Raises
        ------
        ValueError
            If a value is not finite, ``lo >= alpha``, ``x < lo``, or ``lo`` is so close to
            ``alpha`` that a bet factor rounds to 0 or below; nothing is changed then.
        """
        t = self._rounds + 1
        sr, cu, start, seg, tot = self._log_sr, self._log_cu, self._start, self._seg, self._total
        use_sr = self._kind == "sr"
        top = _advance_round(sr, cu, start, seg, tot, x, lo, self._frs, self._alpha, t, use_sr)
        if top is None:  # not plain valid floats: converted here, or the precise error raised
            xs, los = round_views(x, lo, self._views, self._alpha)
            top = _advance_round(sr, cu, start, seg, tot, xs, los, self._frs, self._alpha, t,
                                 use_sr)
            if top is None:  # checked views; only a factor that rounds to <= 0 is left
                raise ValueError(f"lo={list(los)} is too close to alpha={self._alpha}: a bet "
                                 "factor 1 + lam (x - alpha) rounds to <= 0")
        self._rounds = t
        # the mixture (a mean) is at most its largest component: the exact value is only
        # needed near the threshold (the margin is far above the rounding of the mean)
        if self._alarm_round is None and top >= self._log_a_near and (
                self.log_statistic >= self._log_a):
            self._alarm_round = t

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, Any]:
        """Return the state as a small JSON-serializable dict (inverse of :meth:`from_state`)."""
        started = self._rounds > 0
        return {
            "kind": _KIND,
            "version": 1,
            "alpha": self._alpha,
            "stat_kind": self._kind,
            "threshold": self._threshold,
            "fractions": self._fr.tolist(),
            "views": self._views,
            "rounds": self._rounds,
            "log_sr": list(self._log_sr) if started else None,
            "log_cu": list(self._log_cu) if started else None,
            "start": list(self._start),
            "seg_sum": list(self._seg),
            "total": list(self._total),
            "alarm_round": self._alarm_round,
        }

    @classmethod
    @restorer("RiskIncreaseDetector")
    def from_state(cls, d: dict[str, Any]) -> RiskIncreaseDetector:
        """Rebuild a detector from :meth:`to_state` output, validating every value.

        Raises
        ------
        ValueError
            If the dict is not such a state or a value is missing, not finite or out of range.
        """
        if not isinstance(d, dict) or d.get("kind") != _KIND or d.get("version") != 1:
            raise ValueError("not a RiskIncreaseDetector state")
        try:
            det = cls(d["alpha"], kind=d["stat_kind"], arl=float(d["threshold"]),
                      fractions=d["fractions"], views=d["views"])
            rounds = d["rounds"]
            if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 0:
                raise ValueError(f"rounds must be an int >= 0, got {rounds!r}")
            j = det._frj.size
            start = np.asarray(d["start"], dtype=np.int64)
            seg = np.asarray(d["seg_sum"], dtype=np.float64)
            total = np.asarray(d["total"], dtype=np.float64)
            if start.shape != (j,) or seg.shape != (j,) or total.shape != (det._views,):
                raise ValueError("state arrays have inconsistent shapes")
            if not (np.all(np.isfinite(seg)) and np.all(np.isfinite(total))):
                raise ValueError("state sums must be finite")
            ar = d["alarm_round"]
            if ar is not None and (isinstance(ar, bool) or not isinstance(ar, int)
                                   or not 1 <= ar <= rounds):
                raise ValueError(f"alarm_round must be None or in [1, rounds], got {ar!r}")
            if rounds == 0:
                if d["log_sr"] is not None or d["log_cu"] is not None or ar is not None:
                    raise ValueError("a state with rounds == 0 has no statistics")
                return det
            log_sr = np.asarray(d["log_sr"], dtype=np.float64)
            log_cu = np.asarray(d["log_cu"], dtype=np.float64)
            if log_sr.shape != (j,) or log_cu.shape != (j,):
                raise ValueError("statistic arrays have inconsistent shapes")
            # every statistic is >= its last factor >= 1 - u
            floor = np.log1p(-det._frj) - TOLERANCE
            if not (np.all(np.isfinite(log_sr)) and np.all(np.isfinite(log_cu))
                    and np.all(log_sr >= floor) and np.all(log_cu >= floor)
                    and np.all(log_cu <= log_sr + TOLERANCE)):
                raise ValueError("log statistics must be finite, >= log(1 - u) and CUSUM <= SR")
            if np.any(start < 1) or np.any(start > rounds):
                raise ValueError("segment starts must lie in [1, rounds]")
        except (KeyError, TypeError) as exc:
            raise ValueError(f"bad RiskIncreaseDetector state: {exc}") from exc
        det._rounds = rounds
        det._log_sr, det._log_cu = log_sr.tolist(), log_cu.tolist()
        det._start = [int(s) for s in start.tolist()]
        det._seg, det._total, det._alarm_round = seg.tolist(), total.tolist(), ar
        return det
