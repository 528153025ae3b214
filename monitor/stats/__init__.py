"""Pure statistics for certmon: numpy only, no I/O, JSON-serializable state.

The public API is re-exported here and loaded lazily (PEP 562): ``import monitor.stats`` imports
no submodule, and ``monitor.stats.X`` imports only the submodule defining ``X`` (and what that
submodule imports) on first access. Submodules import each other by their full path, never
through this package, so there is no import cycle, and importing one submodule does not load the
others.

=============================  ===========================================================
Submodule                      Public names
=============================  ===========================================================
:mod:`~.bets`                  :class:`BetConfig`
:mod:`~.eprocess`              :class:`BettingEProcess`
:mod:`~.autoeval`              :class:`AutoEvalTest`, :func:`method_rhos`,
                               :func:`effective_observations`
:mod:`~.risk`                  :class:`RiskMonitor`
:mod:`~.risk_group`            :class:`CertificateGroup`
:mod:`~.confseq`               :class:`HedgedConfidenceSequence`
:mod:`~.multiplicity`          :func:`bonferroni_deltas`, :func:`fixed_sequence`, :func:`e_bh`
:mod:`~.bernstein`             :class:`SequentialMean`
:mod:`~.cereval`               :class:`StratifiedCertifiedMean`
:mod:`~.stratppi`              :class:`StratifiedPPIMean`
:mod:`~.partition`             :class:`LabelStrata`, :class:`JudgeLossBins`,
                               :class:`NearestNeighbourPartition`
:mod:`~.allocation`            :func:`audit_rates`
:mod:`~.lowrank`               :class:`LogisticLowRank`
:mod:`~.aipw`                  :class:`AIPWEstimator`
:mod:`~.bestarm`               :class:`BestModelCertifier`
:mod:`~.pulse`                 :class:`SelectionBandit`
:mod:`~.selection_config`      :class:`SelectionConfig`
=============================  ===========================================================

Examples
--------
>>> import monitor.stats as stats
>>> stats.BetConfig().rule
'wsr'
>>> stats.bonferroni_deltas(0.05, 2)
[0.025, 0.025]
>>> from monitor.stats.pulse import SelectionConfig
>>> stats.SelectionConfig is SelectionConfig
True
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from monitor.stats.aipw import AIPWEstimator
    from monitor.stats.allocation import audit_rates
    from monitor.stats.autoeval import AutoEvalTest, effective_observations, method_rhos
    from monitor.stats.bernstein import SequentialMean
    from monitor.stats.bestarm import BestModelCertifier
    from monitor.stats.bets import BetConfig
    from monitor.stats.cereval import StratifiedCertifiedMean
    from monitor.stats.confseq import HedgedConfidenceSequence
    from monitor.stats.eprocess import BettingEProcess
    from monitor.stats.lowrank import LogisticLowRank
    from monitor.stats.multiplicity import bonferroni_deltas, e_bh, fixed_sequence
    from monitor.stats.partition import JudgeLossBins, LabelStrata, NearestNeighbourPartition
    from monitor.stats.pulse import SelectionBandit
    from monitor.stats.risk import RiskMonitor
    from monitor.stats.risk_group import CertificateGroup
    from monitor.stats.selection_config import SelectionConfig
    from monitor.stats.stratppi import StratifiedPPIMean

__all__ = [
    "AIPWEstimator",
    "AutoEvalTest",
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
]

# Public name -> defining submodule (read-only; the import system caches the modules).
_SOURCE: Final = {
    "AIPWEstimator": "aipw",
    "AutoEvalTest": "autoeval",
    "BestModelCertifier": "bestarm",
    "BetConfig": "bets",
    "BettingEProcess": "eprocess",
    "CertificateGroup": "risk_group",
    "HedgedConfidenceSequence": "confseq",
    "JudgeLossBins": "partition",
    "LabelStrata": "partition",
    "LogisticLowRank": "lowrank",
    "NearestNeighbourPartition": "partition",
    "RiskMonitor": "risk",
    "SelectionBandit": "pulse",
    "SelectionConfig": "selection_config",
    "SequentialMean": "bernstein",
    "StratifiedCertifiedMean": "cereval",
    "StratifiedPPIMean": "stratppi",
    "audit_rates": "allocation",
    "bonferroni_deltas": "multiplicity",
    "e_bh": "multiplicity",
    "effective_observations": "autoeval",
    "fixed_sequence": "multiplicity",
    "method_rhos": "autoeval",
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
