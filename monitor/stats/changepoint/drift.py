"""Two-sided detection of a change in a bounded mean whose pre-change value is unknown.

Used for judge drift: the rectifier ``d = l - f`` in ``[-1, 1]`` (human loss minus judge loss of
the same unit) has mean ``E[d]``, the judge's bias against the humans; ``|d|`` in ``[0, 1]`` is the
disagreement rate. The pre-change mean ``mu0`` is unknown, so the detector

1. spends a warm-up of ``W`` rounds on a confidence interval ``[m_lo, m_hi]`` for ``mu0``
   (predictable-plug-in empirical-Bernstein, Waudby-Smith & Ramdas 2023, Thm 2, tuned for ``W``),
2. then freezes this reference band and runs two one-sided mixture e-detectors
   (:class:`~monitor.stats.changepoint.detector.RiskIncreaseDetector`, two views): "up" on
   ``x - m_hi`` (null: mean ``<= m_hi``) and "down" on ``m_lo - x`` (null: mean ``>= m_lo``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from monitor.stats.changepoint.batch import run_batch
from monitor.stats.changepoint.detector import (
    FloatArray,
    IntArray,
    Kind,
    RiskIncreaseDetector,
    check_fractions,
    threshold_from,
)

__all__ = [
    "DEFAULT_DRIFT_HORIZON",
    "DEFAULT_DRIFT_P",
    "DEFAULT_DRIFT_WARMUP",
    "DriftDetector",
    "eb_band",
    "run_drift_batch",
]

_KIND = "certmon.DriftDetector"
_CAP = 0.75  # largest warm-up bet (the paper uses 1/2 or 3/4)

DEFAULT_DRIFT_P = 0.01
DEFAULT_DRIFT_HORIZON = 4500
DEFAULT_DRIFT_WARMUP = 500
"""Labelled rounds observed before the reference band is frozen."""


def _psi(lam: npt.NDArray[np.float64] | float) -> npt.NDArray[np.float64]:
    return np.asarray(-np.log1p(-np.asarray(lam)) - lam, dtype=np.float64)


def eb_band(
    x: npt.ArrayLike, delta: float, lo: float = -1.0, hi: float = 1.0
) -> tuple[FloatArray, FloatArray]:
    """Predictable-plug-in empirical-Bernstein interval for the mean, from rows of a sample.

    Parameters
    ----------
    x : array_like, shape (W,) or (S, W)
        Observations in ``[lo, hi]`` (row ``s`` is one warm-up sample).
    delta : float
        Miscoverage, in ``(0, 1)``.
    lo, hi : float
        Range of the observations.

    Returns
    -------
    (m_lo, m_hi) : arrays of shape () or (S,)
        Interval ends, inside ``[lo, hi]``.

    Examples
    --------
    >>> m_lo, m_hi = eb_band([0.0] * 990 + [-1.0] * 10, 0.01)
    >>> bool(m_lo < -0.01 < m_hi), bool(m_hi - m_lo < 0.06)
    (True, True)

    Notes
    -----
    With ``y = (x - lo) / (hi - lo)`` in ``[0, 1]``, ``mu_{i-1}`` and ``s2_{i-1}`` the regularised
    running mean and variance (priors 1/2 and 1/4), bets
    ``lam_i = min(3/4, sqrt(2 log(2/delta) / (W s2_{i-1})))`` and ``v_i = (y_i - mu_{i-1})^2``,
    the interval is ``sum lam y / sum lam +- (log(2/delta) + sum v_i psi(lam_i)) / sum lam``
    with ``psi(lam) = -log(1 - lam) - lam``. It is the time-``W`` section of a confidence
    sequence, valid whenever every ``y_i`` has conditional mean ``mu0`` given the past
    (martingale-difference noise; no independence needed).
    """
    xa = np.asarray(x, dtype=np.float64)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"need finite lo < hi, got {lo!r}, {hi!r}")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    if xa.ndim not in (1, 2) or xa.shape[-1] < 1:
        raise ValueError(f"x must have shape (W,) or (S, W), got {xa.shape}")
    if not np.all(np.isfinite(xa)) or np.any(xa < lo) or np.any(xa > hi):
        raise ValueError("x must be finite and inside [lo, hi]")
    y = (xa - lo) / (hi - lo)
    w = y.shape[-1]
    log2d = math.log(2.0 / delta)
    # running regularised mean/variance *before* each round: mu_{i-1}, s2_{i-1}
    csum = np.cumsum(y, axis=-1)
    idx = np.arange(1, w + 1, dtype=np.float64)
    mu = (0.5 + csum) / (idx + 1.0)  # mu_i
    mu_prev = np.concatenate([np.full((*y.shape[:-1], 1), 0.5), mu[..., :-1]], axis=-1)
    dev = np.cumsum((y - mu) ** 2, axis=-1)
    s2 = (0.25 + dev) / (idx + 1.0)
    s2_prev = np.concatenate([np.full((*y.shape[:-1], 1), 0.25), s2[..., :-1]], axis=-1)
    lam = np.minimum(_CAP, np.sqrt(2.0 * log2d / (w * s2_prev)))
    v = (y - mu_prev) ** 2
    sl = lam.sum(axis=-1)
    centre = (lam * y).sum(axis=-1) / sl
    half = (log2d + (v * _psi(lam)).sum(axis=-1)) / sl
    m_lo = lo + (hi - lo) * np.clip(centre - half, 0.0, 1.0)
    m_hi = lo + (hi - lo) * np.clip(centre + half, 0.0, 1.0)
    return np.asarray(m_lo, dtype=np.float64), np.asarray(m_hi, dtype=np.float64)


class DriftDetector:
    """Two-sided e-detector of a change in a bounded mean, against a band frozen after warm-up.

    Parameters
    ----------
    lo, hi : float
        Range of the observations (default ``[-1, 1]``, the rectifier ``l - f``).
    warmup : int
        Rounds ``W`` spent estimating the reference band (default 500).
    delta_ref : float
        Miscoverage of the reference band (default 0.01).
    kind, arl, p, horizon, fractions :
        As in :class:`~changepoint.detector.RiskIncreaseDetector`; the default threshold is
        ``A = 4500 / 0.01 = 450000``, so that with ``delta_ref = 0.01`` a stable judge raises a
        false drift alarm within 4500 post-warm-up rounds with probability at most 2%.

    Examples
    --------
    >>> det = DriftDetector(warmup=200, arl=1e4)
    >>> for t in range(600):
    ...     det.update(-1.0 if t % 50 == 0 else 0.0)   # a judge that rarely disagrees
    >>> det.phase, det.alarm
    ('detect', False)
    >>> for t in range(100):
    ...     det.update(-1.0 if t % 3 == 0 else 0.0)    # it now over-calls failures
    >>> det.alarm, det.direction, det.change_round
    (True, 'down', 601)

    Notes
    -----
    Guarantee. Assume that before the change every round satisfies ``E[x_t | past] = mu0``
    (a fixed unknown value; warm-up included) and ``x_t`` in ``[lo, hi]``. Let ``E`` be the
    event that the band ``[m_lo, m_hi]`` computed at round ``W`` contains ``mu0``; then
    ``P(not E) <= delta_ref`` (:func:`eb_band`). ``E`` is determined by the first ``W`` rounds,
    and on ``E``, after the warm-up, the up (down) view has conditional mean ``<= 0``, so the
    average of the two mixture e-SR statistics minus the elapsed time is a supermartingale given
    the warm-up. Hence, conditionally on the warm-up data on ``E``: average run length
    ``>= A`` after the warm-up and ``P(alarm within T post-warm-up rounds) <= T / A``;
    unconditionally, ``P(false alarm within T post-warm-up rounds) <= delta_ref + T / A``.
    A change during the warm-up is not covered (it widens or shifts the band). A drift that
    leaves the mean unchanged is invisible: run a second detector on ``|d|`` (``lo=0, hi=1``)
    for the disagreement rate, splitting the error budget.
    """

    def __init__(
        self,
        lo: float = -1.0,
        hi: float = 1.0,
        *,
        warmup: int = DEFAULT_DRIFT_WARMUP,
        delta_ref: float = 0.01,
        kind: Kind = "sr",
        arl: float | None = None,
        p: float | None = None,
        horizon: int | None = None,
        fractions: Sequence[float] | FloatArray | None = None,
    ) -> None:
        if not (isinstance(lo, (int, float)) and isinstance(hi, (int, float))
                and math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"need finite lo < hi, got {lo!r}, {hi!r}")
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 2:
            raise ValueError(f"warmup must be an int >= 2, got {warmup!r}")
        if not (isinstance(delta_ref, (int, float)) and 0.0 < delta_ref < 1.0):
            raise ValueError(f"delta_ref must lie in (0, 1), got {delta_ref!r}")
        if arl is None and p is None and horizon is None:
            p, horizon = DEFAULT_DRIFT_P, DEFAULT_DRIFT_HORIZON
        self._lo = float(lo)
        self._hi = float(hi)
        self._warmup = warmup
        self._delta_ref = float(delta_ref)
        self._log2d = math.log(2.0 / self._delta_ref)
        self._kind: Kind = kind
        self._threshold = threshold_from(arl, p, horizon)
        self._fractions = fractions
        if kind not in ("sr", "cusum"):
            raise ValueError(f"kind must be 'sr' or 'cusum', got {kind!r}")
        if fractions is not None:
            check_fractions(fractions)
        self.reset()

    def spawn(self) -> DriftDetector:
        """Return a fresh detector of this configuration (warm-up not started).

        Examples
        --------
        >>> d = DriftDetector(warmup=10); d.update(0.5)
        >>> d.spawn().to_state() == DriftDetector(warmup=10).to_state()
        True
        """
        new = DriftDetector.__new__(DriftDetector)
        new.__dict__.update(self.__dict__)  # configuration: floats, strings, fractions
        new.reset()
        return new

    def reset(self) -> None:
        """Start over with a new warm-up (e.g. after acting on an alarm)."""
        # warm-up sums on y in [0, 1]: n, sum y, sum (y - mu_i)^2, sum lam, sum lam y, sum v psi
        self._w: list[float] = [0.0] * 6
        self._band: tuple[float, float] | None = None
        self._det: RiskIncreaseDetector | None = None

    # ------------------------------------------------------------------ properties
    @property
    def phase(self) -> Literal["warmup", "detect"]:
        """``"warmup"`` until ``W`` rounds are seen, then ``"detect"``."""
        return "warmup" if self._band is None else "detect"

    @property
    def band(self) -> tuple[float, float] | None:
        """Reference band ``(m_lo, m_hi)`` for the pre-change mean, None during warm-up."""
        return self._band

    @property
    def threshold(self) -> float:
        """Alarm threshold ``A`` of the post-warm-up detector."""
        return self._threshold

    @property
    def warmup(self) -> int:
        """Warm-up length ``W``."""
        return self._warmup

    @property
    def rounds(self) -> int:
        """Rounds seen since construction or the last :meth:`reset` (warm-up included)."""
        if self._det is None:
            return int(self._w[0])
        return self._warmup + self._det.rounds

    @property
    def statistic(self) -> float:
        """Mixture statistic of the post-warm-up detector (0 during warm-up)."""
        return 0.0 if self._det is None or self._det.rounds == 0 else self._det.statistic

    @property
    def alarm(self) -> bool:
        """Whether a drift has been detected (latched until :meth:`reset`)."""
        return self._det is not None and self._det.alarm

    @property
    def alarm_round(self) -> int | None:
        """Round of the first alarm, counted from the start of the warm-up, else None."""
        if self._det is None or self._det.alarm_round is None:
            return None
        return self._warmup + self._det.alarm_round

    @property
    def direction(self) -> Literal["up", "down"] | None:
        """Direction of the leading change: ``"up"`` (mean above the band) or ``"down"``."""
        v = None if self._det is None else self._det.change_view
        return None if v is None else ("up" if v == 0 else "down")

    @property
    def change_round(self) -> int | None:
        """Estimated first post-change round (CUSUM segment start), from the warm-up start."""
        c = None if self._det is None else self._det.change_round
        return None if c is None else self._warmup + c

    @property
    def mean_after(self) -> float | None:
        """Mean of ``x`` since :attr:`change_round` (descriptive), else None."""
        if self._det is None or self._band is None:
            return None
        r = self._det.risk_after
        v = self._det.change_view
        if r is None or v is None:
            return None
        return r + self._band[1] if v == 0 else self._band[0] - r

    @property
    def mean_before(self) -> float | None:
        """Mean of ``x`` over the rounds before :attr:`change_round` (warm-up included)."""
        if self._det is None or self._band is None:
            return None
        c = self._det.change_round
        v = self._det.change_view
        if c is None or v is None:
            return None
        warm_sum = self._lo * self._warmup + (self._hi - self._lo) * self._w[1]
        rb = self._det.risk_before
        if rb is None:
            return warm_sum / self._warmup
        s = rb * (c - 1)
        post = s + self._band[1] * (c - 1) if v == 0 else self._band[0] * (c - 1) - s
        return (warm_sum + post) / (self._warmup + c - 1)

    # ------------------------------------------------------------------ updates
    def update(self, x: float) -> None:
        """Feed one observation ``x`` in ``[lo, hi]``.

        Raises
        ------
        ValueError
            If ``x`` is not a finite number in ``[lo, hi]``.
        """
        if not (isinstance(x, (int, float)) and math.isfinite(x) and self._lo <= x <= self._hi):
            raise ValueError(f"x must be a finite float in [{self._lo}, {self._hi}], got {x!r}")
        if self._det is not None and self._band is not None:
            m_lo, m_hi = self._band
            self._det.update([x - m_hi, m_lo - x], [self._lo - m_hi, m_lo - self._hi])
            return
        n, sy, sdev, sl, sly, svp = self._w
        y = (x - self._lo) / (self._hi - self._lo)
        mu_prev = (0.5 + sy) / (n + 1.0)
        s2_prev = (0.25 + sdev) / (n + 1.0)
        lam = min(_CAP, math.sqrt(2.0 * self._log2d / (self._warmup * s2_prev)))
        v = (y - mu_prev) ** 2
        n += 1.0
        sy += y
        mu = (0.5 + sy) / (n + 1.0)
        sdev += (y - mu) ** 2
        sl += lam
        sly += lam * y
        svp += v * (-math.log1p(-lam) - lam)
        self._w = [n, sy, sdev, sl, sly, svp]
        if int(n) == self._warmup:
            self._freeze()

    def _freeze(self) -> None:
        _, _, _, sl, sly, svp = self._w
        centre = sly / sl
        half = (self._log2d + svp) / sl
        span = self._hi - self._lo
        m_lo = self._lo + span * min(1.0, max(0.0, centre - half))
        m_hi = self._lo + span * min(1.0, max(0.0, centre + half))
        self._band = (m_lo, m_hi)
        self._det = RiskIncreaseDetector(0.0, kind=self._kind, arl=self._threshold,
                                         fractions=self._fractions, views=2)

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, Any]:
        """Return the state as a small JSON-serializable dict (inverse of :meth:`from_state`)."""
        return {
            "kind": _KIND,
            "version": 1,
            "lo": self._lo,
            "hi": self._hi,
            "warmup": self._warmup,
            "delta_ref": self._delta_ref,
            "stat_kind": self._kind,
            "threshold": self._threshold,
            "fractions": None if self._fractions is None else
            np.asarray(self._fractions, dtype=np.float64).tolist(),
            "warm_sums": list(self._w),
            "band": None if self._band is None else list(self._band),
            "detector": None if self._det is None else self._det.to_state(),
        }

    @classmethod
    def from_state(cls, d: dict[str, Any]) -> DriftDetector:
        """Rebuild from :meth:`to_state` output, validating every value.

        Raises
        ------
        ValueError
            If the dict is not such a state or a value is missing, not finite or out of range.
        """
        if not isinstance(d, dict) or d.get("kind") != _KIND or d.get("version") != 1:
            raise ValueError("not a DriftDetector state")
        try:
            obj = cls(d["lo"], d["hi"], warmup=d["warmup"], delta_ref=d["delta_ref"],
                      kind=d["stat_kind"], arl=float(d["threshold"]), fractions=d["fractions"])
            w = [float(v) for v in d["warm_sums"]]
            band = d["band"]
            det_state = d["detector"]
        except (KeyError, TypeError) as exc:
            raise ValueError(f"bad DriftDetector state: {exc}") from exc
        if len(w) != 6 or not all(math.isfinite(v) and v >= 0.0 for v in w):
            raise ValueError("warm_sums must be 6 finite non-negative floats")
        n = w[0]
        if n != int(n) or n > obj._warmup or w[1] > n + 1e-9 or w[3] > _CAP * n + 1e-9:
            raise ValueError("warm_sums are inconsistent with the warm-up length")
        obj._w = w
        if (band is None) != (det_state is None) or (band is None) != (int(n) < obj._warmup):
            raise ValueError("band and detector must be present exactly after the warm-up")
        if band is not None:
            b = [float(v) for v in band]
            if len(b) != 2 or not (obj._lo <= b[0] <= b[1] <= obj._hi):
                raise ValueError(f"band must satisfy lo <= m_lo <= m_hi <= hi, got {band!r}")
            if not (obj._lo < b[1] and b[0] < obj._hi):
                raise ValueError(f"band must leave room for both detectors, got {band!r}")
            det = RiskIncreaseDetector.from_state(det_state)
            if det.views != 2 or det.alpha != 0.0 or det.threshold != obj._threshold:
                raise ValueError("inner detector does not match the drift configuration")
            obj._band = (b[0], b[1])
            obj._det = det
        return obj


def run_drift_batch(
    x: npt.ArrayLike,
    lo: float = -1.0,
    hi: float = 1.0,
    *,
    warmup: int = DEFAULT_DRIFT_WARMUP,
    delta_ref: float = 0.01,
    kind: Kind = "sr",
    arl: float | None = None,
    p: float | None = None,
    horizon: int | None = None,
    fractions: Sequence[float] | FloatArray | None = None,
) -> dict[str, FloatArray | IntArray]:
    """Run independent :class:`DriftDetector` s over the rows of ``x`` (vectorized).

    Parameters
    ----------
    x : array_like, shape (S, T)
        Streams in ``[lo, hi]``, ``T > warmup``.
    lo, hi, warmup, delta_ref, kind, arl, p, horizon, fractions :
        As in :class:`DriftDetector`.

    Returns
    -------
    dict
        ``alarm_round`` and ``change_round`` (counted from the start of the warm-up, 0 = none),
        ``direction`` (+1 up, -1 down, 0 none), ``m_lo`` and ``m_hi`` (the bands).

    Examples
    --------
    >>> x = [[-1.0 if t % 50 == 0 else 0.0 for t in range(600)]
    ...      + [-1.0 if t % 3 == 0 else 0.0 for t in range(100)]]
    >>> out = run_drift_batch(x, warmup=200, arl=1e4)
    >>> int(out["change_round"][0]), int(out["direction"][0])
    (601, -1)
    """
    xa = np.asarray(x, dtype=np.float64)
    if xa.ndim != 2 or xa.shape[1] <= warmup:
        raise ValueError(f"x must have shape (S, T) with T > warmup, got {xa.shape}")
    if arl is None and p is None and horizon is None:
        p, horizon = DEFAULT_DRIFT_P, DEFAULT_DRIFT_HORIZON
    m_lo, m_hi = eb_band(xa[:, :warmup], delta_ref, lo, hi)
    post = xa[:, warmup:]
    views = np.stack([post - m_hi[:, None], m_lo[:, None] - post], axis=2)
    lows = np.stack([np.broadcast_to((lo - m_hi)[:, None], post.shape),
                     np.broadcast_to((m_lo - hi)[:, None], post.shape)], axis=2)
    out = run_batch(views, 0.0, lows, kind=kind, arl=threshold_from(arl, p, horizon),
                    fractions=fractions)
    a = np.asarray(out["alarm_round"], dtype=np.int64)
    c = np.asarray(out["change_round"], dtype=np.int64)
    up = np.asarray(out["change_view"], dtype=np.int64)
    return {
        "alarm_round": np.where(a > 0, a + warmup, 0),
        "change_round": np.where(c > 0, c + warmup, 0),
        "direction": np.where(c > 0, np.where(up == 0, 1, -1), 0),
        "m_lo": m_lo,
        "m_hi": m_hi,
    }
