"""Paired comparison (shadow traffic): both versions answer the same example, both are labelled.

:class:`PairedComparison` runs two one-sided betting e-processes for the weak null on the paired
differences (Choe & Ramdas, "Comparing sequential forecasters"): ``non_inferior`` rejects
H0: ``Delta >= margin`` and ``inferior`` rejects H0: ``Delta <= margin``, where ``Delta`` is the
average of the rounds' conditional mean differences ``R_c - R_b``. Each is the certificates'
default rule (plug-in reliance, universal portfolio over fixed bets, ``c = 0.95``) on the
unit-scale rounds of :mod:`.observation`, with ``alpha = (margin + 1) / 2`` and a bet grid for
comparisons (:class:`~.eprocess.DifferenceEProcess`).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np

from monitor.stats.betting.bets import DEFAULT_CAP
from monitor.stats.changepoint import RiskIncreaseDetector
from monitor.stats.comparison.bound import DifferenceBound
from monitor.stats.comparison.eprocess import GRIDS, DifferenceEProcess, Grid
from monitor.stats.comparison.observation import (
    check_block,
    check_loss,
    from_unit,
    to_unit,
    unit_margin,
)
from monitor.stats.state_contract import check_header, restorer

__all__ = ["DEFAULT_RHOS", "ComparisonStatus", "PairedComparison"]

ComparisonStatus = Literal["pending", "non_inferior", "inferior"]
_KIND = "certmon.PairedComparison"
DEFAULT_RHOS = 11  # candidate reliances 0, 0.1, ..., 1 of the plug-in rule


def _level(name: str, v: object) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 < float(v) < 1.0:
        raise ValueError(f"{name} must satisfy 0 < {name} < 1, got {v!r}")
    return float(v)


class PairedComparison:
    """Anytime-valid non-inferiority of a candidate against a baseline from paired rounds.

    Parameters
    ----------
    margin : float
        Non-inferiority margin on the risk scale, in (-1, 1) (default 0.02).
    delta : float
        Error level of each verdict, in (0, 1) (default 0.05).
    threshold_delta : float, optional
        Level actually used (``delta / K`` for K candidates sharing the budget); default
        ``delta``.
    n_rhos : int
        Candidate reliances of the plug-in rule, ``linspace(0, 1, n_rhos)``; 1 means R-Eval
        (labels only, ``rho = 0``).
    grid : {"lognormal", "comparison", "certificate"}
        Fixed bets of the universal portfolio (:func:`~.eprocess.grid_cells`): the default
        ``"lognormal"`` (most mass on the bets slow comparisons want), the previous default
        ``"comparison"``, or the certificates' own.
    detector_p, detector_horizon : float, int
        Change detector's false-alarm budget: probability ``p`` over ``horizon`` rounds
        (threshold ``horizon / p``, average run length at least that, see
        :func:`monitor.stats.changepoint.threshold_from`).

    Examples
    --------
    >>> cmp = PairedComparison(margin=0.02, delta=0.05)
    >>> for i in range(400):      # both versions fail on the same examples: difference 0
    ...     loss = float(i % 10 == 0)
    ...     cmp.update(loss, loss, loss, loss, 0.1, 0.1)
    >>> cmp.status, cmp.estimate, cmp.bound is not None and cmp.bound < 0.02
    ('non_inferior', 0.0, True)
    >>> cmp.rounds, cmp.labels_used
    (400, 800)
    >>> PairedComparison.from_state(cmp.to_state()).to_state() == cmp.to_state()
    True

    Notes
    -----
    Guarantee: if every round's difference observation has conditional mean ``Delta_i`` given
    the past, then ``P(status ever becomes "non_inferior") <= threshold_delta`` when the
    running average of ``Delta_i`` stays ``>= margin`` (in particular when ``R_c - R_b >=
    margin``) and ``P(status ever becomes "inferior") <= threshold_delta`` when it stays
    ``<= margin``, however often the status is read (Ville's inequality; each wealth is a
    nonnegative supermartingale under its null, bets and reliance being predictable and capped
    at ``c / (1 + 2 rho - margin)`` resp. ``c / (1 + 2 rho + margin)`` on the difference scale,
    so every factor is at least ``1 - c > 0``). At ``Delta == margin`` both nulls hold and each
    verdict has probability at most ``threshold_delta``. Both verdicts are sticky; ``inferior``
    wins if both ever happen. ``bound`` is an anytime one-sided confidence bound at the same
    level that agrees with the verdict (:class:`~.bound.DifferenceBound`); ``estimate`` is a
    point estimate without a guarantee. The change detector (two views: the labels-only and the
    PPI++ difference) alarms when the difference rises above the margin; without such a change
    its average run length is at least ``detector_horizon / detector_p`` rounds. Assumptions:
    audits are a random sample chosen independently of the losses (one audit coin per example,
    both answers labelled), blocks are contemporaneous and disjoint, losses in [0, 1].
    """

    def __init__(self, margin: float = 0.02, delta: float = 0.05, *,
                 threshold_delta: float | None = None, n_rhos: int = DEFAULT_RHOS,
                 grid: Grid = "lognormal", detector_p: float = 0.02,
                 detector_horizon: int = 4500) -> None:
        self._margin = float(margin)
        self._alpha = unit_margin(margin)
        self._delta = _level("delta", delta)
        self._tdelta = self._delta if threshold_delta is None else _level(
            "threshold_delta", threshold_delta)
        if isinstance(n_rhos, bool) or not isinstance(n_rhos, int) or n_rhos < 1:
            raise ValueError(f"n_rhos must be an int >= 1, got {n_rhos!r}")
        self._n_rhos = n_rhos
        if grid not in GRIDS:
            raise ValueError(f"grid must be one of {GRIDS}, got {grid!r}")
        self._grid: Grid = grid
        self._det_p, self._det_h = float(detector_p), int(detector_horizon)
        self._epoch = 0
        self._fresh()

    def _fresh(self) -> None:
        rhos = [0.0] if self._n_rhos == 1 else np.linspace(0.0, 1.0, self._n_rhos).tolist()
        c = DEFAULT_CAP["plugin_up"]
        self._ni = DifferenceEProcess(self._alpha, "certify", rhos, self._grid, c)
        self._inf = DifferenceEProcess(self._alpha, "violate", rhos, self._grid, c)
        self._upper = DifferenceBound(self._alpha, "certify", self._tdelta, c, self._grid)
        self._lower = DifferenceBound(self._alpha, "violate", self._tdelta, c, self._grid)
        self._det = RiskIncreaseDetector(self._alpha, views=2, p=self._det_p,
                                         horizon=self._det_h)
        self._sum_h = 0.0
        self._sum_s = 0.0
        self._ni_at: int | None = None
        self._inf_at: int | None = None

    # ------------------------------------------------------------------ updates
    def update(self, human_candidate: float, human_baseline: float, judge_candidate: float,
               judge_baseline: float, block_candidate: float | None = None,
               block_baseline: float | None = None) -> None:
        """One audited example: both human losses, both judge losses, both block means.

        Raises
        ------
        ValueError
            If a loss is not a finite number in [0, 1] (a block mean may be None: empty block);
            nothing is updated then.
        """
        lc = check_loss("human_candidate", human_candidate)
        lb = check_loss("human_baseline", human_baseline)
        fc = check_loss("judge_candidate", judge_candidate)
        fb = check_loss("judge_baseline", judge_baseline)
        bc = check_block("block_candidate", block_candidate)
        bb = check_block("block_baseline", block_baseline)
        self.advance_unit(*to_unit(lc, lb, fc, fb, bc, bb))

    def advance_unit(self, human: float, shift: float) -> None:
        """One validated round on the unit scale (:func:`~.observation.to_unit`)."""
        r_ni, r_inf = self._ni.rho, self._inf.rho  # fixed before the round (predictable)
        self._upper.advance(human, shift, r_ni)
        self._lower.advance(human, shift, r_inf)
        self._det.update([human, human + r_inf * shift], [0.0, -r_inf])
        thr = -math.log(self._tdelta)
        if self._ni.advance(human, shift) >= thr and self._ni_at is None:
            self._ni_at = self._ni.rounds
        if self._inf.advance(human, shift) >= thr and self._inf_at is None:
            self._inf_at = self._inf.rounds
        self._sum_h += human
        self._sum_s += shift

    def restart(self) -> None:
        """Start a new epoch (after a change alarm): fresh tests, bounds and detector."""
        self._epoch += 1
        self._fresh()

    # ------------------------------------------------------------------ properties
    @property
    def margin(self) -> float:
        """Non-inferiority margin (risk scale)."""
        return self._margin

    @property
    def delta(self) -> float:
        """Nominal error level."""
        return self._delta

    @property
    def threshold_delta(self) -> float:
        """Level after the multiplicity correction (the one the thresholds use)."""
        return self._tdelta

    @property
    def rounds(self) -> int:
        """Paired rounds (audited examples) used in this epoch."""
        return self._ni.rounds

    @property
    def labels_used(self) -> int:
        """Human labels used in this epoch: two per round."""
        return 2 * self._ni.rounds

    @property
    def epoch(self) -> int:
        """Number of :meth:`restart` calls."""
        return self._epoch

    @property
    def status(self) -> ComparisonStatus:
        """``"inferior"`` if ever shown, else ``"non_inferior"`` if ever shown, else pending."""
        if self._inf_at is not None:
            return "inferior"
        if self._ni_at is not None:
            return "non_inferior"
        return "pending"

    @property
    def decided_at_round(self) -> int | None:
        """Round of the verdict in :attr:`status` (None while pending)."""
        return self._inf_at if self._inf_at is not None else self._ni_at

    @property
    def log_e_non_inferior(self) -> float:
        """Log e-value against H0: difference >= margin."""
        return self._ni.log_wealth

    @property
    def log_e_inferior(self) -> float:
        """Log e-value against H0: difference <= margin."""
        return self._inf.log_wealth

    @property
    def log_threshold(self) -> float:
        """``log(1 / threshold_delta)``."""
        return -math.log(self._tdelta)

    @property
    def rho(self) -> float:
        """Reliance of the next round of the ``non_inferior`` test."""
        return self._ni.rho

    @property
    def estimate(self) -> float:
        """PPI++ estimate of ``R_c - R_b`` at the current reliance (NaN before round 1)."""
        t = self._ni.rounds
        if t == 0:
            return math.nan
        return from_unit((self._sum_h + self._ni.rho * self._sum_s) / t)

    @property
    def upper_bound(self) -> float:
        """Anytime upper bound on the difference (``inf`` until one is shown)."""
        return self._upper.bound

    @property
    def lower_bound(self) -> float:
        """Anytime lower bound on the difference (``-inf`` until one is shown)."""
        return self._lower.bound

    @property
    def bound(self) -> float | None:
        """One-sided bound that agrees with the verdict (None while pending).

        The upper bound (``<= margin``) for ``non_inferior``, the lower bound (``>= margin``) for
        ``inferior``.
        """
        st = self.status
        if st == "non_inferior":
            return min(self._upper.bound, self._margin)
        if st == "inferior":
            return max(self._lower.bound, self._margin)
        return None

    @property
    def change_alarm(self) -> bool:
        """Whether the change detector saw the difference rise above the margin."""
        return self._det.alarm

    @property
    def change_round(self) -> int | None:
        """Estimated first round after the change (None without evidence of one)."""
        return self._det.change_round if self._det.alarm else None

    @property
    def detector(self) -> RiskIncreaseDetector:
        """The change detector (read-only use)."""
        return self._det

    # ------------------------------------------------------------------ state
    def config(self) -> dict[str, Any]:
        """Return the configuration part of the state."""
        return {"margin": self._margin, "delta": self._delta, "threshold_delta": self._tdelta,
                "n_rhos": self._n_rhos, "grid": self._grid, "detector_p": self._det_p,
                "detector_horizon": self._det_h}

    def to_state(self) -> dict[str, Any]:
        """JSON-serializable state; continuing from it is bit-identical."""
        return {"kind": _KIND, "version": 1, "config": self.config(), "epoch": self._epoch,
                "non_inferior": self._ni.to_state(), "inferior": self._inf.to_state(),
                "upper": self._upper.to_state(), "lower": self._lower.to_state(),
                "detector": self._det.to_state(), "sum_h": self._sum_h, "sum_s": self._sum_s,
                "non_inferior_at": self._ni_at, "inferior_at": self._inf_at}

    @classmethod
    @restorer("PairedComparison")
    def from_state(cls, d: dict[str, Any]) -> PairedComparison:
        """Rebuild from :meth:`to_state` output (kind and version checked)."""
        check_header(d, _KIND, 1, "PairedComparison")
        c = d["config"]
        m = cls(c["margin"], c["delta"], threshold_delta=c["threshold_delta"],
                n_rhos=c["n_rhos"], grid=c["grid"], detector_p=c["detector_p"],
                detector_horizon=c["detector_horizon"])
        m.load_parts(d)
        return m

    def load_parts(self, d: dict[str, Any]) -> None:
        """Set the dynamic part of a :meth:`to_state` output on this fresh comparison."""
        self._epoch = int(d["epoch"])
        ni_ep = DifferenceEProcess.from_state(d["non_inferior"])
        inf_ep = DifferenceEProcess.from_state(d["inferior"])
        if ni_ep.config() != self._ni.config() or inf_ep.config() != self._inf.config():
            raise ValueError("PairedComparison state: tests of another configuration")
        self._ni, self._inf = ni_ep, inf_ep
        self._upper = DifferenceBound.from_state(d["upper"])
        self._lower = DifferenceBound.from_state(d["lower"])
        self._det = RiskIncreaseDetector.from_state(d["detector"])
        self._sum_h, self._sum_s = float(d["sum_h"]), float(d["sum_s"])
        ni, inf = d["non_inferior_at"], d["inferior_at"]
        self._ni_at = None if ni is None else int(ni)
        self._inf_at = None if inf is None else int(inf)
        if self._det.alpha != self._alpha or self._upper.side != "certify" or (
                self._lower.side != "violate"):
            raise ValueError("PairedComparison state: parts of another configuration")
