"""PPI++ front end of the risk detector: labels-only and judge-powered views of each round.

Each labelled round gives the human loss ``l``, the judge loss ``f`` of the same unit and the
mean ``b`` of the contemporaneous block of unaudited judge losses. The detector watches two views
of the round, ``l`` (range ``[0, 1]``) and ``q = l + rho_t (b - f)`` (range ``[-rho_t, 1 +
rho_t]``), where ``rho_t`` is a predictable plug-in reliance estimated from exponentially
weighted moments of past rounds. Both views have conditional mean ``E[l | past]`` whenever
``E[b - f | past] = 0`` (random audits, contemporaneous blocks), whatever the judge's quality.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from monitor.stats.changepoint.detector import (
    TOLERANCE,
    FloatArray,
    Kind,
    RiskIncreaseDetector,
)
from monitor.stats.state_contract import restorer

__all__ = ["PPIRiskDetector", "plugin_rho", "plugin_rho_float", "ppi_views_batch"]

_PPI_KIND = "certmon.PPIRiskDetector"


def plugin_rho(m: FloatArray, prior_n: float, rho_max: float) -> FloatArray:
    """Plug-in reliance from weighted moments ``m[..., :] = (n, l, f, b, lf, ff, bb)``."""
    n = m[..., 0]
    safe = np.where(n > 0.0, n, 1.0)
    ml, mf, mb = m[..., 1] / safe, m[..., 2] / safe, m[..., 3] / safe
    cov = m[..., 4] / safe - ml * mf
    den = (m[..., 5] / safe - mf * mf) + (m[..., 6] / safe - mb * mb)
    ok = (n > 0.0) & (den > 1e-12)
    r = np.where(ok, cov / np.where(ok, den, 1.0) * n / (n + prior_n), 0.0)
    return np.asarray(np.clip(r, 0.0, rho_max), dtype=np.float64)


def plugin_rho_float(m: Sequence[float], prior_n: float, rho_max: float) -> float:
    """:func:`plugin_rho` of one moment vector, on plain floats (same steps).

    Examples
    --------
    >>> m = [4.0, 1.0, 1.0, 0.4, 1.0, 1.0, 0.1]
    >>> plugin_rho_float(m, 50.0, 1.0) == float(plugin_rho(np.array(m), 50.0, 1.0))
    True
    """
    n = m[0]
    if not n > 0.0:
        return 0.0
    ml, mf, mb = m[1] / n, m[2] / n, m[3] / n
    cov = m[4] / n - ml * mf
    den = (m[5] / n - mf * mf) + (m[6] / n - mb * mb)
    if not den > 1e-12:
        return 0.0
    r = cov / den * n / (n + prior_n)
    return min(max(r, 0.0), rho_max)


def ppi_views_batch(
    human: npt.ArrayLike,
    judge: npt.ArrayLike,
    unaudited: npt.ArrayLike,
    *,
    halflife: float | None = 500.0,
    prior_n: float = 50.0,
    rho_max: float = 1.0,
    labels_view: bool = True,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Compute the views and lower bounds of :class:`PPIRiskDetector` for rows of streams.

    Parameters
    ----------
    human, judge, unaudited : array_like, shape (S, T)
        Human loss ``l``, judge loss ``f`` of the same unit, mean unaudited judge loss ``b``
        (all in ``[0, 1]``).
    halflife, prior_n, rho_max, labels_view :
        As in :class:`PPIRiskDetector`.

    Returns
    -------
    x, lo : arrays of shape (S, T, V)
        Views ``[l, q]`` (or ``[q]``) and their predictable lower bounds ``[0, -rho_t]``; feed
        them to :func:`run_batch` to reproduce :class:`PPIRiskDetector` exactly.
    rho : array of shape (S, T)
        The reliance used at each round.

    Examples
    --------
    >>> x, lo, rho = ppi_views_batch([[1.0, 0.0]], [[1.0, 0.0]], [[0.4, 0.2]])
    >>> x.shape, float(rho[0, 0])
    ((1, 2, 2), 0.0)
    """
    la, fa, ba = (np.asarray(v, dtype=np.float64) for v in (human, judge, unaudited))
    if la.ndim != 2 or fa.shape != la.shape or ba.shape != la.shape:
        raise ValueError("l, f and b must share one shape (S, T)")
    for v in (la, fa, ba):
        if not (np.all(np.isfinite(v)) and np.all(v >= 0.0) and np.all(v <= 1.0)):
            raise ValueError("l, f and b must be finite and in [0, 1]")
    g = 1.0 if halflife is None else 0.5 ** (1.0 / float(halflife))
    s, t_max = la.shape
    m = np.zeros((s, 7))
    rho = np.zeros((s, t_max))
    for t in range(t_max):
        rho[:, t] = plugin_rho(m, prior_n, rho_max)
        lt, ft, bt = la[:, t], fa[:, t], ba[:, t]
        m = g * m + np.stack([np.ones(s), lt, ft, bt, lt * ft, ft * ft, bt * bt], axis=1)
    q = la + rho * (ba - fa)
    if labels_view:
        return np.stack([la, q], axis=2), np.stack([np.zeros_like(rho), -rho], axis=2), rho
    return q[:, :, None], -rho[:, :, None], rho


class PPIRiskDetector:
    """Risk-increase e-detector on human labels and the PPI++ observation with a plug-in rho.

    Each labelled round gives the human loss ``l``, the judge loss ``f`` of the same unit and
    ``b``, the mean judge loss of unaudited units judged around the same time (so
    ``E[b - f] = 0``). The views are ``l`` (labels only, bounded below by 0) and
    ``q = l + rho_t (b - f)`` (bounded below by ``-rho_t``), where the reliance ``rho_t`` in
    ``[0, rho_max]`` is computed from earlier rounds only: the variance-minimising
    ``Cov(l, f) / (Var(f) + Var(b))`` from exponentially weighted moments, shrunk by
    ``n / (n + prior_n)``.

    Parameters
    ----------
    alpha : float
        Null boundary of the risk, in ``(0, 1)``.
    rho : "plugin" or float
        ``"plugin"`` (default) or a fixed reliance in ``[0, 1]`` (0 = labels only).
    labels_view : bool
        Keep the labels-only view in the mixture (default True): a judge that turns bad (or
        drifts at the moment of the regression) then costs at most ``log 2`` of evidence.
    halflife : float or None
        Half-life, in labelled rounds, of the moments behind the plug-in (default 500; None:
        cumulative).
    prior_n : float
        Shrinkage of the plug-in towards 0 (default 50 rounds).
    rho_max : float
        Largest reliance, in ``(0, 1]`` (default 1).
    kind, arl, p, horizon, fractions :
        As in :class:`RiskIncreaseDetector`.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> det = PPIRiskDetector(0.1, arl=1e4)
    >>> for t in range(1500):
    ...     risk = 0.05 if t < 1000 else 0.4
    ...     l = float(rng.random() < risk)
    ...     f = l if rng.random() < 0.95 else 1.0 - l      # a good judge
    ...     b = float(np.mean(rng.random(5) < risk * 0.95 + (1 - risk) * 0.05))
    ...     det.update(l, f, b)
    >>> det.alarm, 1000 < det.alarm_round < 1100, 0.3 < det.next_rho <= 1.0
    (True, True, True)

    Notes
    -----
    Guarantee: as :class:`RiskIncreaseDetector` (``E[N] >= A``, ``P(N <= T) <= T / A``),
    provided that before the change ``E[l_t | past] <= alpha`` and
    ``E[b_t - f_t | past, l_t is available] = 0`` -- the audited unit is chosen at random among
    units judged in the same period as the ``b`` units, whatever the judge's quality or drift.
    ``rho_t`` depends on past rounds only, so ``q_t`` keeps conditional mean ``<= alpha`` and
    lower bound ``-rho_t`` for any value of the estimate: a poor estimate costs power, never
    validity. When ``f`` or ``b`` is missing the round uses ``q = l``.
    """

    def __init__(
        self,
        alpha: float,
        *,
        rho: Literal["plugin"] | float = "plugin",
        labels_view: bool = True,
        halflife: float | None = 500.0,
        prior_n: float = 50.0,
        rho_max: float = 1.0,
        kind: Kind = "sr",
        arl: float | None = None,
        p: float | None = None,
        horizon: int | None = None,
        fractions: Sequence[float] | FloatArray | None = None,
    ) -> None:
        if not (isinstance(alpha, (int, float)) and 0.0 < alpha < 1.0):
            raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
        if isinstance(rho, str):
            if rho != "plugin":
                raise ValueError(f"rho must be 'plugin' or a float in [0, 1], got {rho!r}")
        elif not (isinstance(rho, (int, float)) and 0.0 <= rho <= 1.0):
            raise ValueError(f"rho must be 'plugin' or a float in [0, 1], got {rho!r}")
        if halflife is not None and not (math.isfinite(halflife) and halflife > 0.0):
            raise ValueError(f"halflife must be None or > 0, got {halflife!r}")
        if not (math.isfinite(prior_n) and prior_n >= 0.0):
            raise ValueError(f"prior_n must be >= 0, got {prior_n!r}")
        if not (math.isfinite(rho_max) and 0.0 < rho_max <= 1.0):
            raise ValueError(f"rho_max must lie in (0, 1], got {rho_max!r}")
        self._alpha = float(alpha)
        self._rho: str | float = rho if isinstance(rho, str) else float(rho)
        self._labels_view = bool(labels_view) and self._rho != 0.0
        self._halflife = None if halflife is None else float(halflife)
        self._decay = 1.0 if halflife is None else 0.5 ** (1.0 / float(halflife))
        self._prior_n = float(prior_n)
        self._rho_max = float(rho_max)
        self._det = RiskIncreaseDetector(
            alpha, kind=kind, arl=arl, p=p, horizon=horizon, fractions=fractions,
            views=2 if self._labels_view else 1,
        )
        # weighted moments: n, sum l, sum f, sum b, sum lf, sum ff, sum bb
        self._m: list[float] = [0.0] * 7

    def spawn(self) -> PPIRiskDetector:
        """Return a fresh detector of this configuration (no round, no moments).

        Examples
        --------
        >>> d = PPIRiskDetector(0.1, arl=1e4); d.update(1.0, 1.0, 0.5)
        >>> d.spawn().to_state() == PPIRiskDetector(0.1, arl=1e4).to_state()
        True
        """
        new = PPIRiskDetector.__new__(PPIRiskDetector)
        new.__dict__.update(self.__dict__)  # configuration: floats and strings
        new._det = self._det.spawn()
        new._m = [0.0] * 7
        return new

    def reset(self) -> None:
        """Start a new epoch for the detector; the plug-in moments are kept."""
        self._det.reset()

    def reset_rho(self) -> None:
        """Forget the plug-in moments (e.g. after a judge-drift alarm)."""
        self._m = [0.0] * 7

    # ------------------------------------------------------------------ properties
    @property
    def next_rho(self) -> float:
        """Reliance ``rho`` for the NEXT round (predictable)."""
        if not isinstance(self._rho, str):
            return self._rho
        return plugin_rho_float(self._m, self._prior_n, self._rho_max)

    @property
    def detector(self) -> RiskIncreaseDetector:
        """Underlying mixture detector (views ``[l, q]`` or ``[q]``); read it, do not feed it."""
        return self._det

    @property
    def alarm(self) -> bool:
        """Whether a regression has been detected in this epoch."""
        return self._det.alarm

    @property
    def alarm_round(self) -> int | None:
        """Round of the first alarm in this epoch, else None."""
        return self._det.alarm_round

    @property
    def change_round(self) -> int | None:
        """Estimated first post-change round (see :attr:`RiskIncreaseDetector.change_round`)."""
        return self._det.change_round

    @property
    def risk_before(self) -> float | None:
        """Estimated risk before :attr:`change_round` (descriptive)."""
        return self._det.risk_before

    @property
    def risk_after(self) -> float | None:
        """Estimated risk since :attr:`change_round` (descriptive, biased upwards)."""
        return self._det.risk_after

    @property
    def statistic(self) -> float:
        """Mixture statistic; alarm at :attr:`threshold`."""
        return self._det.statistic

    @property
    def threshold(self) -> float:
        """Alarm threshold ``A``."""
        return self._det.threshold

    @property
    def rounds(self) -> int:
        """Labelled rounds in this epoch."""
        return self._det.rounds

    # ------------------------------------------------------------------ updates
    def update(
        self, human: float, judge: float | None = None, unaudited: float | None = None
    ) -> None:
        """Feed one labelled round: losses ``l`` (human), ``f`` (judge), ``b`` (unaudited mean).

        Raises
        ------
        ValueError
            If a given value is not a finite number in ``[0, 1]``.
        """
        if not (type(human) is float and 0.0 <= human <= 1.0  # the usual round, checked fast
                and (judge is None or (type(judge) is float and 0.0 <= judge <= 1.0))
                and (unaudited is None or (type(unaudited) is float
                                           and 0.0 <= unaudited <= 1.0))):
            for name, v in (("human", human), ("judge", judge), ("unaudited", unaudited)):
                if v is not None and not (isinstance(v, (int, float)) and 0.0 <= v <= 1.0):
                    raise ValueError(f"{name} must be a float in [0, 1], got {v!r}")
        h, f, b = float(human), judge, unaudited
        rho = self.next_rho
        q = h if f is None or b is None else h + rho * (b - f)
        if self._labels_view:
            self._det.update([h, q], [0.0, -rho])
        else:
            self._det.update(q, -rho)
        if f is not None and b is not None and isinstance(self._rho, str):
            g = self._decay
            m = self._m
            self._m = [g * m[0] + 1.0, g * m[1] + h, g * m[2] + f, g * m[3] + b,
                       g * m[4] + h * f, g * m[5] + f * f, g * m[6] + b * b]

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, Any]:
        """Return the state as a small JSON-serializable dict (inverse of :meth:`from_state`)."""
        return {
            "kind": _PPI_KIND,
            "version": 1,
            "alpha": self._alpha,
            "rho": self._rho,
            "labels_view": self._labels_view,
            "halflife": self._halflife,
            "prior_n": self._prior_n,
            "rho_max": self._rho_max,
            "moments": list(self._m),
            "detector": self._det.to_state(),
        }

    @classmethod
    @restorer("PPIRiskDetector")
    def from_state(cls, d: dict[str, Any]) -> PPIRiskDetector:
        """Rebuild from :meth:`to_state` output, validating every value.

        Raises
        ------
        ValueError
            If the dict is not such a state or a value is missing, not finite or out of range.
        """
        if not isinstance(d, dict) or d.get("kind") != _PPI_KIND or d.get("version") != 1:
            raise ValueError("not a PPIRiskDetector state")
        try:
            inner = RiskIncreaseDetector.from_state(d["detector"])
            obj = cls(d["alpha"], rho=d["rho"], labels_view=bool(d["labels_view"]),
                      halflife=d["halflife"], prior_n=d["prior_n"], rho_max=d["rho_max"],
                      kind=inner.kind, arl=inner.threshold, fractions=inner.fractions)
            m = [float(v) for v in d["moments"]]
        except (KeyError, TypeError) as exc:
            raise ValueError(f"bad PPIRiskDetector state: {exc}") from exc
        if inner.views != obj.detector.views or inner.alpha != obj._alpha:
            raise ValueError("inner detector does not match the PPI configuration")
        if len(m) != 7 or not all(math.isfinite(v) for v in m):
            raise ValueError("moments must be 7 finite floats")
        n = m[0]
        if n < 0.0 or any(not -TOLERANCE <= v <= n + TOLERANCE for v in m[1:]):
            raise ValueError("moments must satisfy 0 <= sum <= n (values in [0, 1])")
        obj._det = inner
        obj._m = m
        return obj
