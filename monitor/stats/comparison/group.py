"""Several candidates compared with one baseline, sharing one error budget (Bonferroni).

Examples
--------
>>> g = CandidateGroup("paired", ["m-v2", "m-v3"], margin=0.02, delta=0.05)
>>> g.member("m-v2").threshold_delta
0.025
>>> g.update("m-v2", 0.0, 0.0, 0.0, 0.0, None, None)
>>> g.member("m-v2").rounds, g.member("m-v3").rounds
(1, 0)
>>> CandidateGroup.from_state(g.to_state()).to_state() == g.to_state()
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from monitor.stats.comparison.paired import PairedComparison
from monitor.stats.comparison.unpaired import UnpairedComparison
from monitor.stats.state_contract import check_header, restorer

__all__ = ["CandidateGroup", "Design"]

Design = Literal["paired", "unpaired"]
_KIND = "certmon.CandidateGroup"


class CandidateGroup:
    """One comparison per candidate against a common baseline, each at ``delta / K``.

    Parameters
    ----------
    design : {"paired", "unpaired"}
        Shadow traffic or a live split (:class:`~.paired.PairedComparison`,
        :class:`~.unpaired.UnpairedComparison`).
    candidates : sequence of str
        Distinct candidate names (K of them).
    margin, delta : float
        Margin and the comparison's error budget; every candidate's verdicts use
        ``threshold_delta = delta / K``.
    **kwargs
        Passed to each member (``n_rhos``, ``detector_p``, ``detector_horizon``).

    Notes
    -----
    Guarantee: the probability that any candidate ever gets a false verdict (a ``non_inferior``
    while its difference is ``>= margin`` or an ``inferior`` while it is ``<= margin``) is at
    most ``delta`` (union bound over the K candidates, any dependence between them, e.g. a
    shared baseline; at a difference exactly equal to the margin each of the two verdicts is
    bounded separately). Members' own guarantees and assumptions apply.
    """

    def __init__(self, design: Design, candidates: Sequence[str], margin: float = 0.02,
                 delta: float = 0.05, **kwargs: Any) -> None:
        if design not in ("paired", "unpaired"):
            raise ValueError(f"design must be 'paired' or 'unpaired', got {design!r}")
        names = list(candidates)
        if not names or len(set(names)) != len(names) or not all(
                isinstance(n, str) and n for n in names):
            raise ValueError(f"candidates must be distinct non-empty names, got {names!r}")
        self._design: Design = design
        self._delta = float(delta)
        cls = PairedComparison if design == "paired" else UnpairedComparison
        td = float(delta) / len(names)
        self._members: dict[str, PairedComparison | UnpairedComparison] = {
            n: cls(margin, delta, threshold_delta=td, **kwargs) for n in names}

    @property
    def design(self) -> Design:
        """``"paired"`` or ``"unpaired"``."""
        return self._design

    @property
    def candidates(self) -> list[str]:
        """Candidate names, in configuration order."""
        return list(self._members)

    def member(self, candidate: str) -> Any:
        """Return the comparison of one candidate (paired or unpaired)."""
        if candidate not in self._members:
            raise KeyError(f"unknown candidate {candidate!r}")
        return self._members[candidate]

    def update(self, candidate: str, human_candidate: float, human_baseline: float,
               judge_candidate: float, judge_baseline: float, block_candidate: float | None,
               block_baseline: float | None) -> None:
        """Paired design: one audited example of ``candidate`` and the baseline."""
        m = self.member(candidate)
        if not isinstance(m, PairedComparison):
            raise ValueError("update() is for the paired design; use update_candidate()")
        m.update(human_candidate, human_baseline, judge_candidate, judge_baseline,
                 block_candidate, block_baseline)

    def update_candidate(self, candidate: str, human: float, judge: float,
                         block_mean: float | None) -> None:
        """Unpaired design: the candidate's next audited unit."""
        m = self.member(candidate)
        if not isinstance(m, UnpairedComparison):
            raise ValueError("update_candidate() is for the unpaired design; use update()")
        m.update_candidate(human, judge, block_mean)

    def update_baseline(self, human: float, judge: float, block_mean: float | None) -> None:
        """Unpaired design: the baseline's next audited unit, queued for every candidate.

        Every candidate's ``i``-th pair uses the baseline's ``i``-th audited unit (the e-values
        are dependent through it; Bonferroni does not care).
        """
        if self._design != "unpaired":
            raise ValueError("update_baseline() is for the unpaired design; use update()")
        for m in self._members.values():
            if isinstance(m, UnpairedComparison):
                m.update_baseline(human, judge, block_mean)

    def to_state(self) -> dict[str, Any]:
        """JSON-serializable state of every member."""
        return {"kind": _KIND, "version": 1, "design": self._design, "delta": self._delta,
                "members": {n: m.to_state() for n, m in self._members.items()}}

    @classmethod
    @restorer("CandidateGroup")
    def from_state(cls, d: dict[str, Any]) -> CandidateGroup:
        """Rebuild from :meth:`to_state` output (kind, version and members' levels checked)."""
        check_header(d, _KIND, 1, "CandidateGroup")
        g = cls.__new__(cls)
        g._design = d["design"]
        g._delta = float(d["delta"])
        build = PairedComparison if g._design == "paired" else UnpairedComparison
        g._members = {n: build.from_state(s) for n, s in d["members"].items()}
        k = len(g._members)
        for m in g._members.values():
            p = m if isinstance(m, PairedComparison) else m.paired
            if k == 0 or abs(p.threshold_delta - g._delta / k) > 1e-15 * g._delta:
                raise ValueError("CandidateGroup state: members' levels are not delta / K")
        return g
