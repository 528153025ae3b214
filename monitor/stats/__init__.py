"""Pure statistics for certmon: numpy only, no I/O, JSON-serializable state.

The public API is re-exported here and loaded lazily (PEP 562): ``import monitor.stats`` imports
no submodule, and ``monitor.stats.X`` imports only the submodule defining ``X`` (and what that
submodule imports) on first access. Submodules import each other by their full path, never
through this package, so there is no import cycle, and importing one submodule does not load the
others.

One package per method family, each opening with what lives there and what it may import:

==============================  ===========================================================
Package / module                Paper, concept and public names
==============================  ===========================================================
:mod:`~.betting`                R-AutoEval+: :class:`BetConfig`, :class:`BettingEProcess`,
                                :func:`one_sided_test`, :func:`method_rhos`,
                                :func:`effective_observations`, :class:`RiskMonitor`,
                                :class:`CertificateGroup`, :class:`HedgedConfidenceSequence`
:mod:`~.cereval`                Cer-Eval: :class:`SequentialMean`,
                                :class:`StratifiedCertifiedMean`, :class:`LabelStrata`,
                                :class:`JudgeLossBins`, :class:`NearestNeighbourPartition`
:mod:`~.stratppi`               StratPPI: :class:`StratifiedPPIMean`, :func:`audit_rates`
:mod:`~.pulse`                  PULSE: :class:`SelectionConfig`, :class:`LogisticLowRank`,
                                :class:`AIPWEstimator`, :class:`BestModelCertifier`,
                                :class:`SelectionBandit`
:mod:`~.multiplicity`           shared: :func:`bonferroni_deltas`, :func:`fixed_sequence`,
                                :func:`e_bh`
==============================  ===========================================================

Layer rule: everything under ``monitor/stats`` imports numpy and the standard library only
(never pydantic, I/O, or the rest of :mod:`monitor`); :mod:`monitor` core builds on it and
:mod:`consumers` on both (enforced by ``tests/test_architecture.py``).

Examples
--------
>>> import monitor.stats as stats
>>> stats.BetConfig().rule
'plugin_up'
>>> stats.bonferroni_deltas(0.05, 2)
[0.025, 0.025]
>>> from monitor.stats.pulse.bandit import SelectionConfig
>>> stats.SelectionConfig is SelectionConfig
True
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from monitor.stats.betting.autoeval import effective_observations, method_rhos, one_sided_test
    from monitor.stats.betting.bets import BetConfig
    from monitor.stats.betting.confseq import HedgedConfidenceSequence
    from monitor.stats.betting.eprocess import BettingEProcess
    from monitor.stats.betting.risk import RiskMonitor
    from monitor.stats.betting.risk_group import CertificateGroup
    from monitor.stats.cereval.certified_mean import StratifiedCertifiedMean
    from monitor.stats.cereval.partition import (
        JudgeLossBins,
        LabelStrata,
        NearestNeighbourPartition,
    )
    from monitor.stats.cereval.stitched_radii import SequentialMean
    from monitor.stats.multiplicity import bonferroni_deltas, e_bh, fixed_sequence
    from monitor.stats.pulse.aipw import AIPWEstimator
    from monitor.stats.pulse.bandit import SelectionBandit
    from monitor.stats.pulse.bestarm import BestModelCertifier
    from monitor.stats.pulse.config import SelectionConfig
    from monitor.stats.pulse.lowrank import LogisticLowRank
    from monitor.stats.stratppi.allocation import audit_rates
    from monitor.stats.stratppi.estimator import StratifiedPPIMean

__all__ = [
    "AIPWEstimator",
    "BestModelCertifier",
    "BetConfig",
    "BettingEProcess",
    "CertificateGroup",
    "HedgedConfidenceSequence",
    "JudgeLossBins",
    "LabelStrata",
    "LogisticLowRank",
    "NearestNeighbourPartition",
    "RiskMonitor",
    "SelectionBandit",
    "SelectionConfig",
    "SequentialMean",
    "StratifiedCertifiedMean",
    "StratifiedPPIMean",
    "audit_rates",
    "bonferroni_deltas",
    "e_bh",
    "effective_observations",
    "fixed_sequence",
    "method_rhos",
    "one_sided_test",
]

# Public name -> defining submodule (read-only; the import system caches the modules).
_SOURCE: Final = {
    "AIPWEstimator": "pulse.aipw",
    "one_sided_test": "betting.autoeval",
    "BestModelCertifier": "pulse.bestarm",
    "BetConfig": "betting.bets",
    "BettingEProcess": "betting.eprocess",
    "CertificateGroup": "betting.risk_group",
    "HedgedConfidenceSequence": "betting.confseq",
    "JudgeLossBins": "cereval.partition",
    "LabelStrata": "cereval.partition",
    "LogisticLowRank": "pulse.lowrank",
    "NearestNeighbourPartition": "cereval.partition",
    "RiskMonitor": "betting.risk",
    "SelectionBandit": "pulse.bandit",
    "SelectionConfig": "pulse.config",
    "SequentialMean": "cereval.stitched_radii",
    "StratifiedCertifiedMean": "cereval.certified_mean",
    "StratifiedPPIMean": "stratppi.estimator",
    "audit_rates": "stratppi.allocation",
    "bonferroni_deltas": "multiplicity",
    "e_bh": "multiplicity",
    "effective_observations": "betting.autoeval",
    "fixed_sequence": "multiplicity",
    "method_rhos": "betting.autoeval",
}


def __getattr__(name: str) -> Any:
    """Import the submodule defining public ``name`` on first access (PEP 562).

    Raises
    ------
    AttributeError
        If ``name`` is not part of the public API (nor an already imported submodule).
    """
    source = _SOURCE.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{source}"), name)


def __dir__() -> list[str]:
    """Public names plus the module's own globals."""
    return sorted(set(globals()) | set(__all__))
