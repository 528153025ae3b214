"""Unpaired comparison (a live split of traffic): each arm's audited units arrive separately.

Round ``i`` pairs the ``i``-th audited unit of the candidate with the ``i``-th audited unit of
the baseline, both in audit order (the order their audits were decided, not the order labels
arrive); a unit waits in its arm's queue until the other arm's unit of the same index exists.
Each pair is then a round of :class:`~.paired.PairedComparison`.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from monitor.stats.comparison.observation import arm_shift, check_block, check_loss
from monitor.stats.comparison.paired import ComparisonStatus, PairedComparison
from monitor.stats.state_contract import check_header, restorer

__all__ = ["UnpairedComparison"]

_KIND = "certmon.UnpairedComparison"


class UnpairedComparison:
    """Anytime-valid non-inferiority from two independent streams of audited units.

    Parameters are those of :class:`~.paired.PairedComparison`.

    Examples
    --------
    >>> cmp = UnpairedComparison(margin=0.02, delta=0.05)
    >>> for i in range(500):
    ...     loss = float(i % 10 == 0)
    ...     cmp.update_candidate(loss, loss, 0.1)
    ...     if i % 2 == 0:
    ...         cmp.update_baseline(loss, loss, 0.1)
    >>> cmp.rounds, cmp.backlog
    (250, (250, 0))
    >>> UnpairedComparison.from_state(cmp.to_state()).to_state() == cmp.to_state()
    True

    Notes
    -----
    Guarantee: that of :class:`~.paired.PairedComparison` (each verdict false with probability
    at most ``threshold_delta``, at any time). Why the pairing is valid: within an arm, audited
    units in audit order are i.i.d. draws of that arm's traffic (random audits, stationarity),
    and the two arms are independent (a random split), so the ``i``-th pair's difference
    observation ``(l_c - l_b) + rho ((b_c - f_c) - (b_b - f_b))`` has conditional mean
    ``R_c - R_b`` given all earlier pairs, and the reliance and bets of pair ``i`` depend on
    earlier pairs only. The pairing is fixed by audit positions, never by the losses; pairing
    by label arrival order would not be (arrival may depend on the loss). Units waiting for
    their partner are used later, never dropped (:attr:`backlog` counts them); set the arms'
    audit rates so they gather audited units at similar speeds, or the faster arm's queue grows.
    Unlike shadow traffic, the arms' failures are not correlated, so pairing brings no variance
    reduction: expect more labels than the paired design when versions fail on the same examples.
    """

    def __init__(self, margin: float = 0.02, delta: float = 0.05, **kwargs: Any) -> None:
        self._cmp = PairedComparison(margin, delta, **kwargs)
        self._queues: tuple[deque[tuple[float, float]], deque[tuple[float, float]]] = (
            deque(), deque())

    def _arm(self, arm: int, human: float, judge: float, block_mean: float | None) -> None:
        name = ("candidate", "baseline")[arm]
        h = check_loss(f"human_{name}", human)
        f = check_loss(f"judge_{name}", judge)
        b = check_block(f"block_{name}", block_mean)
        other = self._queues[1 - arm]
        if not other:
            self._queues[arm].append((h, arm_shift(f, b)))
            return
        oh, osh = other.popleft()
        (hc, sc), (hb, sb) = ((h, arm_shift(f, b)), (oh, osh)) if arm == 0 else (
            (oh, osh), (h, arm_shift(f, b)))
        self._cmp.advance_unit(0.5 * (hc - hb + 1.0), 0.5 * (sc - sb))

    def update_candidate(self, human: float, judge: float, block_mean: float | None) -> None:
        """Add the candidate's next audited unit (audit order): human, judge loss, block mean.

        Raises ``ValueError`` on a loss outside [0, 1]; nothing is updated then.
        """
        self._arm(0, human, judge, block_mean)

    def update_baseline(self, human: float, judge: float, block_mean: float | None) -> None:
        """Add the baseline's next audited unit (audit order); see :meth:`update_candidate`."""
        self._arm(1, human, judge, block_mean)

    @property
    def paired(self) -> PairedComparison:
        """The comparison of the formed pairs (read its verdict, bounds, detector)."""
        return self._cmp

    @property
    def backlog(self) -> tuple[int, int]:
        """Audited units waiting for a partner: (candidate, baseline)."""
        return len(self._queues[0]), len(self._queues[1])

    @property
    def status(self) -> ComparisonStatus:
        """Verdict (see :attr:`PairedComparison.status`)."""
        return self._cmp.status

    @property
    def rounds(self) -> int:
        """Pairs formed and used."""
        return self._cmp.rounds

    @property
    def labels_used(self) -> int:
        """Human labels used: two per pair (waiting units excluded)."""
        return self._cmp.labels_used

    @property
    def estimate(self) -> float:
        """Estimate of ``R_c - R_b`` (see :attr:`PairedComparison.estimate`)."""
        return self._cmp.estimate

    @property
    def bound(self) -> float | None:
        """One-sided bound that agrees with the verdict (None while pending)."""
        return self._cmp.bound

    @property
    def log_e_non_inferior(self) -> float:
        """Log e-value against H0: difference >= margin."""
        return self._cmp.log_e_non_inferior

    @property
    def log_e_inferior(self) -> float:
        """Log e-value against H0: difference <= margin."""
        return self._cmp.log_e_inferior

    @property
    def change_alarm(self) -> bool:
        """Whether the change detector alarmed."""
        return self._cmp.change_alarm

    def restart(self) -> None:
        """Start a new epoch: fresh tests; waiting units are kept (they belong to no pair yet)."""
        self._cmp.restart()

    def to_state(self) -> dict[str, Any]:
        """JSON-serializable state, waiting units included."""
        return {"kind": _KIND, "version": 1, "paired": self._cmp.to_state(),
                "candidate_queue": [list(v) for v in self._queues[0]],
                "baseline_queue": [list(v) for v in self._queues[1]]}

    @classmethod
    @restorer("UnpairedComparison")
    def from_state(cls, d: dict[str, Any]) -> UnpairedComparison:
        """Rebuild from :meth:`to_state` output (kind and version checked)."""
        check_header(d, _KIND, 1, "UnpairedComparison")
        u = cls.__new__(cls)
        u._cmp = PairedComparison.from_state(d["paired"])
        qs = []
        for key in ("candidate_queue", "baseline_queue"):
            q: deque[tuple[float, float]] = deque()
            for h, s in d[key]:
                if not (0.0 <= float(h) <= 1.0 and -1.0 <= float(s) <= 1.0):
                    raise ValueError(f"UnpairedComparison state: bad waiting unit in {key}")
                q.append((float(h), float(s)))
            qs.append(q)
        if qs[0] and qs[1]:
            raise ValueError("UnpairedComparison state: both queues non-empty")
        u._queues = (qs[0], qs[1])
        return u
