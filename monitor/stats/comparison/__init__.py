"""Anytime-valid comparisons of a candidate model against a baseline (non-inferiority).

A comparison asks whether ``Delta = R(candidate) - R(baseline)`` is below a margin
(``non_inferior``) or above it (``inferior``), from audited units labelled by humans, with the
judge on both arms through PPI++ observations and an adaptive reliance, as the certificates do.

What lives here: the paired observation of the difference and its map onto the certificates'
``[0, 1]`` scale (:mod:`.observation`), the anytime one-sided bounds that agree with the
verdicts (:mod:`.bound`), the paired design (shadow traffic, :mod:`.paired`), the unpaired
design (a live split, :mod:`.unpaired`), several candidates sharing the error budget
(:mod:`.group`). Vectorized synthetic rounds and the e-process's vectorized twin, used only by
tests and benchmarks, live in ``tests/support`` (``comparison_rounds.py``, ``comparison_batch.py``).
The e-process (:mod:`.eprocess`) is the certificates' default
rule (their per-round functions and plug-in reliance) with a bet grid for comparisons; the change
detector is :class:`monitor.stats.changepoint.RiskIncreaseDetector`.

May import: numpy, the standard library, :mod:`monitor.stats.betting` and
:mod:`monitor.stats.changepoint`; nothing else of certmon.

Examples
--------
>>> from monitor.stats.comparison import PairedComparison
>>> cmp = PairedComparison(margin=0.02, delta=0.05)
>>> cmp.status
'pending'
"""

from __future__ import annotations

from monitor.stats.comparison.bound import DifferenceBound
from monitor.stats.comparison.eprocess import (
    DifferenceEProcess,
    comparison_grid,
    grid_cells,
    lognormal_grid,
)
from monitor.stats.comparison.group import CandidateGroup
from monitor.stats.comparison.observation import (
    arm_shift,
    difference_observation,
    from_unit,
    to_unit,
    unit_margin,
)
from monitor.stats.comparison.paired import ComparisonStatus, PairedComparison
from monitor.stats.comparison.unpaired import UnpairedComparison

__all__ = [
    "CandidateGroup",
    "ComparisonStatus",
    "DifferenceBound",
    "DifferenceEProcess",
    "PairedComparison",
    "UnpairedComparison",
    "arm_shift",
    "comparison_grid",
    "difference_observation",
    "from_unit",
    "grid_cells",
    "lognormal_grid",
    "to_unit",
    "unit_margin",
]
