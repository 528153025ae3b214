"""Judge drift per model: whether the judge changed relative to the humans.

Two two-sided e-detectors (:class:`~monitor.stats.changepoint.drift.DriftDetector`) watch each
labelled round of a model: one on the judge's bias ``d = l - f`` in ``[-1, 1]`` (human loss minus
judge loss of the same unit), one on the disagreement ``|d|`` in ``[0, 1]`` (a judge that got
noisier without changing its bias). Each detector freezes a reference band for its mean after a
warm-up and then alarms when the mean leaves the band. The suite emits ``judge_drift`` and
restarts the judge reliance of the model's detectors and certificates; the detectors start a new
warm-up. One-way: this module never touches the suite or the model.

Notes
-----
False alarms. With the judge and the humans unchanged (``E[d | past]`` constant), each detector
raises a false alarm within ``T`` rounds after its warm-up with probability at most
``delta_ref + T / A`` (band miss-probability plus Ville's bound); the two share the configured
budget ``p`` over ``horizon`` (``delta_ref = p / 4`` and ``A = horizon / (p / 4)`` each, so
``p`` in total at ``T = horizon``). A label missing for good (:meth:`update_missing`) enters
each one-sided view, and each end of the band, at the value least favourable to it, so each
view's observation is at most the one its real label would have given and the band at least
as wide: the bound holds whatever made labels go missing (each view's e-SR statistic is
monotone in its observations). Validity of the certificates never depends on this detector:
with contemporaneous blocks the PPI observation is unbiased under any judge drift; the alarm only
tells the operator and lets the reliance on the judge be re-learned (power).

Examples
--------
>>> jd = JudgeDrift.new(warmup=50, p=0.02, horizon=4500)
>>> for i in range(200):
...     jd.update(0.0, 0.0)                    # the judge agrees with the humans
>>> jd.alarm() is None
True
>>> for i in range(200):
...     jd.update(float(i % 2), 1.0 - i % 2)   # now it disagrees half the time
>>> jd.alarm()["signal"] in ("bias", "disagreement")
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from monitor.stats.changepoint.detector import DEFAULT_P
from monitor.stats.changepoint.drift import (
    DEFAULT_DRIFT_HORIZON,
    DEFAULT_DRIFT_WARMUP,
    DriftDetector,
)
from monitor.stats.state_contract import restorer

__all__ = ["JudgeDrift"]


@dataclass(slots=True)
class JudgeDrift:
    """The two judge-drift detectors of one model (module docstring)."""

    bias: DriftDetector
    disagreement: DriftDetector
    alarms: int = 0

    @classmethod
    def new(cls, warmup: int = DEFAULT_DRIFT_WARMUP, p: float = DEFAULT_P,
            horizon: int = DEFAULT_DRIFT_HORIZON) -> JudgeDrift:
        """Detectors splitting the false-alarm budget ``p`` over ``horizon`` rounds."""
        q = p / 4.0
        return cls(DriftDetector(-1.0, 1.0, warmup=warmup, delta_ref=q, p=q, horizon=horizon),
                   DriftDetector(0.0, 1.0, warmup=warmup, delta_ref=q, p=q, horizon=horizon))

    def spawn(self) -> JudgeDrift:
        """Return fresh detectors of this configuration (a new model's, from a prototype)."""
        return JudgeDrift(self.bias.spawn(), self.disagreement.spawn())

    def update(self, human: float, judge: float) -> None:
        """Feed one labelled round (validated losses)."""
        d = human - judge
        self.bias.update(d)
        self.disagreement.update(abs(d))

    def update_missing(self, judge: float) -> None:
        """Feed an audited unit whose label is missing for good (judge loss ``judge``).

        Each side takes the label least favourable to its own alarm: on the bias ``d = l - f``
        the up view (and the band's lower end) ``l = 0``, the down view (and the band's upper
        end) ``l = 1``; on ``|d|`` the up view ``l = f`` (``|d| = 0``) and the down view the
        farther end (``|d| = max(f, 1 - f)``).
        """
        self.bias.update_missing(-judge, 1.0 - judge)
        self.disagreement.update_missing(0.0, max(judge, 1.0 - judge))

    def alarm(self) -> dict[str, Any] | None:
        """Evidence of a drift detected by either detector, else None."""
        for signal, det in (("bias", self.bias), ("disagreement", self.disagreement)):
            if det.alarm:
                band = det.band
                return {
                    "signal": signal,
                    "direction": det.direction,
                    "statistic": det.statistic,
                    "threshold": det.threshold,
                    "band": None if band is None else list(band),
                    "mean_before": det.mean_before,
                    "mean_after": det.mean_after,
                    "rounds_watched": det.rounds,
                    "change_round_in_watch": det.change_round,
                }
        return None

    def restart(self) -> None:
        """Start new warm-ups for both detectors (after acting on an alarm)."""
        self.bias.reset()
        self.disagreement.reset()
        self.alarms += 1

    def view(self) -> dict[str, Any]:
        """STATE.json part."""
        return {
            "alarms": self.alarms,
            **{name: {"phase": det.phase, "band": None if det.band is None else list(det.band),
                      "statistic": det.statistic, "threshold": det.threshold}
               for name, det in (("bias", self.bias), ("disagreement", self.disagreement))},
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable snapshot."""
        return {"bias": self.bias.to_state(), "disagreement": self.disagreement.to_state(),
                "alarms": self.alarms}

    @classmethod
    @restorer("JudgeDrift")
    def from_dict(cls, d: dict[str, Any]) -> JudgeDrift:
        """Inverse of :meth:`to_dict` (the detectors validate their states)."""
        alarms = int(d["alarms"])
        if alarms < 0:
            raise ValueError(f"bad judge-drift alarm count {alarms}")
        return cls(DriftDetector.from_state(d["bias"]),
                   DriftDetector.from_state(d["disagreement"]), alarms)
