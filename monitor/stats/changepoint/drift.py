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

from monitor.stats.changepoint.detector import (
    FloatArray,
    Kind,
    RiskIncreaseDetector,
    check_fractions,
    threshold_from,
)
from monitor.stats.changepoint.drift_batch import (
    CAP,
    DEFAULT_DRIFT_HORIZON,
    DEFAULT_DRIFT_P,
    DEFAULT_DRIFT_WARMUP,
    eb_band,
    run_drift_batch,
)
from monitor.stats.state_contract import restorer

__all__ = [
    "DEFAULT_DRIFT_HORIZON",
    "DEFAULT_DRIFT_P",
    "DEFAULT_DRIFT_WARMUP",
    "DriftDetector",
    "eb_band",
    "run_drift_batch",
]

_KIND = "certmon.DriftDetector"


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
        # the same sums with missing labels at their highest values (None: none missing yet)
        self._w_hi: list[float] | None = None
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
        self._step(x, x)

    def update_missing(self, x_low: float, x_high: float) -> None:
        """Feed a round whose label is missing for good, at each side's worst value.

        ``x_low <= x_high`` are the smallest and largest values the observation could have
        taken. The up view and the band's lower end see ``x_low``; the down view and the
        band's upper end see ``x_high`` (with the larger of the two squared deviations in the
        band's variance term): each at least as far from an alarm, and the band at least as
        wide, as with the real value under the same predictable bets, so the false-alarm bound
        holds whatever made the label go missing.

        Examples
        --------
        >>> det = DriftDetector(0.0, 1.0, warmup=10, arl=1e3)
        >>> for _ in range(10):
        ...     det.update(0.0)
        >>> det.update_missing(0.0, 1.0); det.statistic < 1.0
        True
        """
        for x in (x_low, x_high):
            if not (isinstance(x, (int, float)) and math.isfinite(x)
                    and self._lo <= x <= self._hi):
                raise ValueError(f"x must be a finite float in [{self._lo}, {self._hi}], "
                                 f"got {x!r}")
        if x_low > x_high:
            raise ValueError(f"need x_low <= x_high, got {x_low!r}, {x_high!r}")
        if self._band is None and self._w_hi is None:
            self._w_hi = list(self._w)  # the two ends of the band part from here on
        self._step(x_low, x_high, missing=True)

    def _step(self, x_low: float, x_high: float, missing: bool = False) -> None:
        if self._det is not None and self._band is not None:
            m_lo, m_hi = self._band
            self._det.update([x_low - m_hi, m_lo - x_high], [self._lo - m_hi, m_lo - self._hi])
            return
        self._w = self._warm(self._w, x_low, x_high if missing else None)
        if self._w_hi is not None:
            self._w_hi = self._warm(self._w_hi, x_high, x_low if missing else None)
        if int(self._w[0]) == self._warmup:
            self._freeze()

    def _warm(self, w: list[float], x: float, other: float | None = None) -> list[float]:
        """One warm-up round of :func:`eb_band`'s running sums.

        ``other``: the round's label is missing and its observation lies between ``x`` (this
        end's worst value) and ``other``; the variance term takes the larger of the two
        squared deviations, so the round's contribution ``lam y - psi(lam) v`` is at most the
        real one whatever the value was (it is concave in ``y``: its smallest value on the
        range is at an end).
        """
        n, sy, sdev, sl, sly, svp = w
        y = (x - self._lo) / (self._hi - self._lo)
        mu_prev = (0.5 + sy) / (n + 1.0)
        s2_prev = (0.25 + sdev) / (n + 1.0)
        lam = min(CAP, math.sqrt(2.0 * self._log2d / (self._warmup * s2_prev)))
        v = (y - mu_prev) ** 2
        if other is not None:
            v = max(v, ((other - self._lo) / (self._hi - self._lo) - mu_prev) ** 2)
        n += 1.0
        sy += y
        mu = (0.5 + sy) / (n + 1.0)
        sdev += (y - mu) ** 2
        sl += lam
        sly += lam * y
        svp += v * (-math.log1p(-lam) - lam)
        return [n, sy, sdev, sl, sly, svp]

    def _end(self, w: list[float], sign: float) -> float:
        _, _, _, sl, sly, svp = w
        y = sly / sl + sign * (self._log2d + svp) / sl
        return self._lo + (self._hi - self._lo) * min(1.0, max(0.0, y))

    def _freeze(self) -> None:
        m_lo = self._end(self._w, -1.0)  # (missing labels at their lowest values)
        m_hi = self._end(self._w if self._w_hi is None else self._w_hi, 1.0)
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
            **({} if self._w_hi is None else {"warm_sums_hi": list(self._w_hi)}),
            "band": None if self._band is None else list(self._band),
            "detector": None if self._det is None else self._det.to_state(),
        }

    @classmethod
    @restorer("DriftDetector")
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
        if n != int(n) or n > obj._warmup or w[1] > n + 1e-9 or w[3] > CAP * n + 1e-9:
            raise ValueError("warm_sums are inconsistent with the warm-up length")
        obj._w = w
        w_hi = d.get("warm_sums_hi")
        if w_hi is not None:
            try:
                wh = [float(v) for v in w_hi]
            except (TypeError, ValueError) as exc:
                raise ValueError(f"bad DriftDetector state: {exc}") from exc
            if (len(wh) != 6 or not all(math.isfinite(v) and v >= 0.0 for v in wh)
                    or wh[0] != n or wh[1] > n + 1e-9 or wh[3] > CAP * n + 1e-9):
                raise ValueError("warm_sums_hi are inconsistent with the warm-up")
            obj._w_hi = wh
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
