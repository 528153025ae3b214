"""Certificate epochs: regression and improvement detectors deciding when a regime ends.

A certificate speaks for the current regime (docs/guarantees.md). For every model and
certificate, :class:`CertificateEpochs` feeds each round to e-detectors
(:mod:`monitor.stats.changepoint`) and answers the suite with a decision; the suite acts on it
(alerts, a fresh :class:`~monitor.stats.betting.risk_group.CertificateGroup`, statuses back to
``pending``). One-way: this module never touches the suite or the model.

Decisions, from the primary method's effective status:

- ``pending`` or ``certified``: a *regression* detector (risk rising above ``alpha``; labels-only
  and PPI++ views, :class:`~monitor.stats.changepoint.ppi.PPIRiskDetector`) is armed. Its alarm
  ends the epoch with reason ``"regression"`` (the suite emits ``regression`` and, when the model
  was certified, ``certificate_lost``). In an epoch opened by a regression the detector is armed
  again only once the new epoch is certified (and restarts then), so a model that is simply bad
  raises one regression alert, not one per detection delay.
- ``violated``: an *improvement* detector (risk falling below ``alpha``: the same detector on
  ``1 - loss`` against ``1 - alpha``) starts at the violation; its alarm ends the epoch with reason
  ``"improvement"``. A ``violated`` status therefore lasts until the data show the risk went
  below ``alpha`` (an early-noise violation of a good model ends within a few hundred labels).

Notes
-----
Guarantees. Per epoch, the certify / violate e-processes start at 1 at the epoch's first round
(a stopping time), so within an epoch whose risk stays on the null side a false ``certified``
(or ``violated``) has probability at most ``delta`` (Ville's inequality, conditionally on the
past). An armed detector, restarted at a stopping time, has average run length at least ``A``
while the risk stays ``<= alpha`` (regression) or ``>= alpha`` (improvement), and raises a false
alarm within ``T`` labels with probability at most ``T / A`` (Shin, Ramdas & Rinaldo; see
:class:`~monitor.stats.changepoint.detector.RiskIncreaseDetector`). Both assume random audits
and contemporaneous synthetic blocks (``E[b - f | past] = 0``), whatever the judge does.

Examples
--------
>>> ep = CertificateEpochs.new(alpha=0.1, arl=2000.0)
>>> for _ in range(300):
...     ep.update(0.0, 0.0, 0.0)
>>> ep.decide("certified") is None
True
>>> for _ in range(60):
...     ep.update(1.0, 1.0, 1.0)
>>> ep.decide("certified")
'regression'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from monitor.stats.changepoint.ppi import PPIRiskDetector
from monitor.stats.state_contract import restorer

__all__ = ["HISTORY", "CertificateEpochs"]

HISTORY = 5  # earlier epochs kept in STATE.json


def _flip(x: float | None) -> float | None:
    return None if x is None else 1.0 - x


@dataclass(slots=True)
class CertificateEpochs:
    """Epoch bookkeeping and change detectors of one model x certificate (module docstring)."""

    alpha: float
    arl: float | None
    number: int = 1
    started_round: int = 0  # the model's round count when the epoch began
    started_ts: float | None = None
    reason: str = "start"
    history: list[list[Any]] = field(default_factory=list)
    regression: PPIRiskDetector | None = None
    improvement: PPIRiskDetector | None = None
    armed: bool = True
    regressions: int = 0  # epochs ended by a regression alarm
    improvements: int = 0  # epochs ended by an improvement alarm
    lost: int = 0  # regressions of a certified epoch (certificate_lost)

    @classmethod
    def new(cls, alpha: float, arl: float | None = None) -> CertificateEpochs:
        """Epoch 1 with an armed regression detector."""
        return cls(alpha, arl, regression=PPIRiskDetector(alpha, arl=arl))

    def spawn(self) -> CertificateEpochs:
        """Return epoch 1 of this configuration, its detector spawned (a new model's).

        The same state as :meth:`new`; ``self`` is a prototype (its detector's rounds and
        moments are not copied).
        """
        reg = None if self.regression is None else self.regression.spawn()
        return CertificateEpochs(self.alpha, self.arl, regression=reg)

    # ------------------------------------------------------------------ rounds
    def update(self, human: float, judge: float, block_mean: float | None) -> None:
        """Feed one round (validated losses; ``block_mean`` None for an empty block)."""
        if self.regression is not None:
            self.regression.update(human, judge, block_mean)
        if self.improvement is not None:
            self.improvement.update(1.0 - human, 1.0 - judge, _flip(block_mean))

    def update_missing(self, judge: float, block_mean: float | None) -> None:
        """Feed an audited unit whose label is missing for good, at each detector's worst label.

        The regression detector takes the human loss 0 and the improvement detector (on
        ``1 - loss``) the human loss 1: each detector's statistic is monotone in the loss it
        watches, so it stays at or below what the real label would have given (an alarm is
        never raised by a missing label), whatever the missing labels were.
        """
        if self.regression is not None:
            self.regression.update(0.0, judge, block_mean)
        if self.improvement is not None:
            self.improvement.update(0.0, 1.0 - judge, _flip(block_mean))

    def decide(self, status: str) -> str | None:
        """Return ``"regression"``, ``"improvement"`` or None, given the primary status now."""
        if status == "violated":
            if self.improvement is None:  # starts at the violation: from the next round on
                self.improvement = PPIRiskDetector(1.0 - self.alpha, arl=self.arl)
                return None
            return "improvement" if self.improvement.alarm else None
        self.improvement = None
        det = self.regression
        if det is None:
            return None
        armed = status == "certified" or self.reason != "regression"
        if armed and not self.armed:
            det.reset()  # armed at a stopping time: a fresh detector
        self.armed = armed
        return "regression" if armed and det.alarm else None

    def evidence(self, kind: str, model_rounds: int) -> dict[str, Any]:
        """Return what an alarm of ``kind`` shows: statistic, threshold, change estimates."""
        det = self.regression if kind == "regression" else self.improvement
        if det is None:
            raise ValueError(f"no {kind} detector")
        change = det.change_round
        before, after = det.risk_before, det.risk_after
        if kind == "improvement":
            before, after = _flip(before), _flip(after)
        first = model_rounds - det.rounds  # model rounds before the detector's first round
        return {
            "detector": "e_sr_mixture",
            "statistic": det.statistic,
            "threshold": det.threshold,
            "arl": det.threshold,
            "rounds_watched": det.rounds,
            "change_round": None if change is None else first + change,
            "risk_before": before,
            "risk_after": after,
            "rho": det.next_rho,
            "epoch": self.number,
        }

    def next_epoch(self, reason: str, model_rounds: int, ts: float | None,
                   status: str) -> None:
        """Close the epoch (kept in :attr:`history`) and open the next one."""
        self.history.append([self.number, self.started_round, model_rounds, self.reason,
                             reason, status])
        del self.history[:-HISTORY]
        if reason == "regression":
            self.regressions += 1
            self.lost += status == "certified"
        else:
            self.improvements += 1
        self.number += 1
        self.started_round = model_rounds
        self.started_ts = ts
        self.reason = reason
        self.improvement = None
        if self.regression is not None:
            self.regression.reset()  # the plug-in reliance moments are kept
        self.armed = reason != "regression"

    @property
    def began_with_lost_certificate(self) -> bool:
        """Whether this epoch began with a regression of a certified epoch (a lost certificate).

        Examples
        --------
        >>> ep = CertificateEpochs.new(alpha=0.1)
        >>> ep.next_epoch("regression", 50, None, "certified")
        >>> ep.began_with_lost_certificate
        True
        """
        return (self.reason == "regression" and bool(self.history)
                and self.history[-1][4] == "regression" and self.history[-1][5] == "certified")

    def restart_reliance(self) -> None:
        """Forget the detectors' plug-in reliance (after the judge drifted)."""
        if self.regression is not None:
            self.regression.reset_rho()

    # ------------------------------------------------------------------ views and state
    def view(self) -> dict[str, Any]:
        """STATE.json part: the epoch, why it started, its detectors and earlier epochs."""
        det = self.regression
        keys = ("epoch", "started_round", "ended_round", "started_by", "ended_by", "status")
        return {
            "epoch": self.number,
            "started_round": self.started_round,
            "started_ts": self.started_ts,
            "reason": self.reason,
            "began_with_lost_certificate": self.began_with_lost_certificate,
            "regression_detector": None if det is None else {
                "armed": self.armed,
                "statistic": det.statistic,
                "threshold": det.threshold,
                "rounds": det.rounds,
                "rho": det.next_rho,
            },
            "improvement_detector": None if self.improvement is None else {
                "statistic": self.improvement.statistic,
                "threshold": self.improvement.threshold,
                "rounds": self.improvement.rounds,
            },
            "history": [dict(zip(keys, h, strict=True)) for h in self.history],
            "regressions": self.regressions,
            "improvements": self.improvements,
            "certificates_lost": self.lost,
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable snapshot."""
        return {
            "alpha": self.alpha, "arl": self.arl, "number": self.number,
            "started_round": self.started_round, "started_ts": self.started_ts,
            "reason": self.reason, "history": [list(h) for h in self.history],
            "regression": None if self.regression is None else self.regression.to_state(),
            "improvement": None if self.improvement is None else self.improvement.to_state(),
            "armed": self.armed,
            "ended": [self.regressions, self.improvements, self.lost],
        }

    @classmethod
    @restorer("CertificateEpochs")
    def from_dict(cls, d: dict[str, Any]) -> CertificateEpochs:
        """Inverse of :meth:`to_dict` (detector states are validated by their classes)."""
        number, started = int(d["number"]), int(d["started_round"])
        if number < 1 or started < 0:
            raise ValueError(f"bad epoch state: number={number}, started_round={started}")
        if d["reason"] not in ("start", "regression", "improvement"):
            raise ValueError(f"bad epoch reason {d['reason']!r}")
        reg, imp = d["regression"], d["improvement"]
        ended = [int(v) for v in d.get("ended", [0, 0, 0])]
        if len(ended) != 3 or min(ended) < 0 or ended[2] > ended[0]:
            raise ValueError(f"bad epoch counts {ended}")
        return cls(
            float(d["alpha"]), None if d["arl"] is None else float(d["arl"]), number, started,
            None if d["started_ts"] is None else float(d["started_ts"]), str(d["reason"]),
            [list(h) for h in d["history"]][-HISTORY:],
            None if reg is None else PPIRiskDetector.from_state(reg),
            None if imp is None else PPIRiskDetector.from_state(imp), bool(d["armed"]),
            *ended,
        )
