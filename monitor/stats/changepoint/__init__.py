"""Sequential change detection by e-detectors: regressions of a risk and judge drift.

Paper: Shin, Ramdas & Rinaldo, "E-detectors: a nonparametric framework for sequential change
detection". What lives here: :mod:`~.detector` (one-sided detectors of an increase of a risk
above ``alpha``: Shiryaev-Roberts and CUSUM kinds over a mixture of constant bets, threshold from
an average run length or a false-alarm budget), :mod:`~.ppi` (its front end on labelled rounds:
a labels-only view and a PPI++ view with a predictable plug-in reliance), :mod:`~.batch`
(vectorized forms for tests and studies) and :mod:`~.drift` (a two-sided detector of a change in
a bounded mean against a reference band frozen after a warm-up: judge drift). ``ckernel.c`` is
the optional compiled twin of a detector's round, :mod:`~.rounds` its Python reference.

May import: numpy and the standard library only; never the monitor core, pydantic or any I/O.
All state is a small JSON-serializable dict (``to_state`` / ``from_state``, validated on load).

Examples
--------
>>> from monitor.stats.changepoint import RiskIncreaseDetector, threshold_from
>>> threshold_from(p=0.02, horizon=4500)
225000.0
>>> RiskIncreaseDetector(0.1).kind
'sr'
"""

from __future__ import annotations

from monitor.stats.changepoint.batch import run_batch
from monitor.stats.changepoint.detector import RiskIncreaseDetector, bet_fractions, threshold_from
from monitor.stats.changepoint.drift import DriftDetector, eb_band, run_drift_batch
from monitor.stats.changepoint.ppi import PPIRiskDetector, ppi_views_batch

__all__ = [
    "DriftDetector",
    "PPIRiskDetector",
    "RiskIncreaseDetector",
    "bet_fractions",
    "eb_band",
    "ppi_views_batch",
    "run_batch",
    "run_drift_batch",
    "threshold_from",
]
