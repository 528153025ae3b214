"""Every stateful class of ``monitor`` and how the state-contract test builds and feeds it.

:data:`CASES` maps each class (``module.Class``) to a :class:`Case` (how to make a small
instance, feed it a random observation, save and restore it) or to a :class:`Covered` (a part
saved and restored only by its owner, or a frozen value object, with the case that exercises
it). ``tests/test_state_contract.py`` discovers every class under ``monitor`` with a state verb
(``to_state``, ``from_state``, ``to_dict``, ``from_dict``, ``to_list``, ``to_columns``) and
fails when one is missing here, so a new stateful class cannot be forgotten.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from monitor.config import load_config
from monitor.engine import Engine
from monitor.state.epochs import CertificateEpochs
from monitor.state.judge_drift import JudgeDrift
from monitor.stats.betting.autoeval_mixture import MixtureTest
from monitor.stats.betting.autoeval_plugin import PlugInTest
from monitor.stats.betting.bets import BetConfig
from monitor.stats.betting.confseq import HedgedConfidenceSequence
from monitor.stats.betting.confseq_bernstein import BernsteinSequences
from monitor.stats.betting.eprocess import BettingEProcess
from monitor.stats.betting.plugin import PlugInEProcess
from monitor.stats.betting.risk import RiskMonitor
from monitor.stats.betting.risk_group import CertificateGroup
from monitor.stats.cereval.certified_mean import StratifiedCertifiedMean
from monitor.stats.cereval.partition import JudgeLossBins, LabelStrata, NearestNeighbourPartition
from monitor.stats.cereval.stitched_radii import SequentialMean
from monitor.stats.changepoint.detector import RiskIncreaseDetector
from monitor.stats.changepoint.drift import DriftDetector
from monitor.stats.changepoint.ppi import PPIRiskDetector
from monitor.stats.comparison.bound import DifferenceBound
from monitor.stats.comparison.eprocess import DifferenceEProcess
from monitor.stats.comparison.group import CandidateGroup
from monitor.stats.comparison.paired import PairedComparison
from monitor.stats.comparison.unpaired import UnpairedComparison
from monitor.stats.pulse.aipw import AIPWEstimator
from monitor.stats.pulse.bandit import SelectionBandit
from monitor.stats.pulse.bestarm import BestModelCertifier
from monitor.stats.pulse.config import SelectionConfig
from monitor.stats.pulse.lowrank import LogisticLowRank
from monitor.stats.stratppi.estimator import StratifiedPPIMean

ROOT = Path(__file__).resolve().parents[1]
Rng = np.random.Generator


@dataclass(frozen=True)
class Case:
    """How the contract test drives one class.

    ``make`` builds a small fresh instance; ``feed`` gives it one random observation (None:
    the class has no update of its own); ``save``/``load`` default to ``to_state`` and the
    class's ``from_state``; ``spawn`` says whether the class has ``spawn``.
    """

    make: Callable[[], Any]
    feed: Callable[[Any, Rng], None] | None
    save: Callable[[Any], Any] = field(default=lambda obj: obj.to_state())
    load: Callable[[Any], Any] | None = None
    spawn: Literal["any", "prototype"] | None = None
    warm: int = 60  # observations before the snapshot
    junk_xfail: str | None = None  # a known gap in refusing junk (the test must still fail)


@dataclass(frozen=True)
class Covered:
    """A class saved and restored only through another case (named), with the reason."""

    by: str
    reason: str


def _u(rng: Rng) -> float:
    return float(rng.random())


def _bit(rng: Rng) -> float:
    return float(rng.random() < 0.3)


def _three(obj: Any, rng: Rng) -> None:  # (human, judge, block mean) rounds
    h = _bit(rng)
    obj.update(h, h if rng.random() < 0.8 else 1.0 - h, _u(rng))


def _paired(obj: Any, rng: Rng) -> None:
    obj.update(_bit(rng), _bit(rng), _u(rng), _u(rng))


def _group(obj: Any, rng: Rng) -> None:
    obj.update(str(rng.choice(["a", "b"])), _bit(rng), _bit(rng), _u(rng), _u(rng), None, None)


def _unpaired(obj: Any, rng: Rng) -> None:
    if rng.random() < 0.5:
        obj.update_candidate(_bit(rng), _u(rng), None)
    else:
        obj.update_baseline(_bit(rng), _u(rng), None)


def _strat_ppi(obj: Any, rng: Rng) -> None:
    s = int(rng.integers(3))
    if rng.random() < 0.3:
        obj.update_label(s, _bit(rng), _u(rng))
    else:
        obj.update_judge(s, _u(rng))


def _best_arm(obj: Any, rng: Rng) -> None:
    th = rng.random(3) * 0.2 + np.array([0.2, 0.5, 0.7])
    obj.update(int(rng.integers(3)), th, th - 0.1, th + 0.1, np.zeros(3), np.ones(3))


def _aipw(obj: Any, rng: Rng) -> None:
    m = int(rng.integers(2))
    if obj.pending(m) is None and rng.random() < 0.5:
        obj.plan(m, 2, rng, predictions=rng.random(400))
    elif obj.pending(m) is not None:
        obj.complete(obj.pending(m), [_bit(rng), _bit(rng)])


def _lowrank(obj: Any, rng: Rng) -> None:
    scores = (rng.random((2, 6)) < 0.5).astype(float)
    obj.refit(scores, rng.random((2, 6)) < 0.6)


def _bandit(obj: Any, rng: Rng) -> None:
    for model, examples in obj.next_requests(1):
        for ex in examples:
            obj.update(model, ex, _bit(rng))


_ENGINE_LINES: list[bytes] = []


def _engine_lines() -> list[bytes]:
    if not _ENGINE_LINES:  # a simulated stream with labels, alerts and judge drift
        from monitor.simulate import SimModel, SimulationSpec, iter_jsonl
        spec = SimulationSpec(examples=1500, drift_at=600, models=(
            SimModel("up", 0.04, 0.9, 0.3), SimModel("same", 0.05, 0.6, 0.05)),
            audit_rate=0.2)
        _ENGINE_LINES.extend(iter_jsonl(spec, np.random.default_rng(3)))
    return _ENGINE_LINES


def _engine_config() -> Any:
    return load_config(ROOT / "examples" / "minimal.toml")


def _engine_feed(eng: Any, rng: Rng) -> None:  # the stream in order (events_in is restored)
    lines = _engine_lines()
    eng.process(lines[eng.events_in % len(lines)])


_STRATA = """
[[suites]]
name = "demo"
models = ["*"]
audit_rate = 0.3
[suites.strata]
by = "stratum"
count = 4
names = ["easy", "mid", "hard"]
allocation = "cereval"
floor = 0.01
[[suites.certificates]]
name = "risk"
alpha = 0.2
delta = 0.05
methods = ["r_eval", "r_autoeval_plus"]
precision = 0.06
"""

_ACTIVE = """
[[suites]]
name = "demo"
models = ["*"]
audit_rate = 0.3
audit_policy = "active"
[[suites.certificates]]
name = "risk"
alpha = 0.2
delta = 0.05
"""
_HEDGED = """
[[suites]]
name = "demo"
models = ["*"]
audit_rate = 0.3
audit_policy = "hedged"
[[suites.certificates]]
name = "risk"
alpha = 0.2
delta = 0.05
"""

_COMPARISONS = """
[[suites]]
name = "demo"
models = ["m-v1", "m-v2"]
audit_rate = 0.3
[[suites.certificates]]
name = "risk"
alpha = 0.2
delta = 0.05
methods = ["r_autoeval_plus"]
[[suites.comparisons]]
name = "v2-vs-v1"
baseline = "m-v1"
candidate = "m-v2"
margin = 0.02
delta = 0.05
"""

_VARIANT_LINES: dict[str, list[bytes]] = {}


def _variant_lines(name: str) -> list[bytes]:
    if name not in _VARIANT_LINES:
        from monitor.simulate import SimModel, SimStratum, SimulationSpec, iter_jsonl
        if name == "strata":
            spec = SimulationSpec(examples=1000, audit_rate=0.3, strata=(
                SimStratum("easy", 0.5, 0.02), SimStratum("mid", 0.3, 0.1),
                SimStratum("hard", 0.2, 0.4)))
        elif name in ("active", "hedged"):
            spec = SimulationSpec(examples=1000, audit_rate=0.3)
        else:
            spec = SimulationSpec(examples=1000, audit_rate=0.3, models=(
                SimModel("m-v1", 0.1, 0.9), SimModel("m-v2", 0.05, 0.9)))
        _VARIANT_LINES[name] = list(iter_jsonl(spec, np.random.default_rng(4)))
    return _VARIANT_LINES[name]


def _variant(name: str, toml: str) -> Case:
    from monitor.config import parse_config

    def feed(eng: Any, rng: Rng) -> None:
        lines = _variant_lines(name)
        eng.process(lines[eng.events_in % len(lines)])

    return Case(lambda: Engine(parse_config(toml)), feed, save=lambda o: o.snapshot(),
                load=lambda d: Engine.restore(parse_config(toml), d), warm=600)


BET = BetConfig()
WSR = BetConfig(rule="wsr")

CASES: dict[str, Case | Covered] = {
    # ---- betting
    "monitor.stats.betting.autoeval_mixture.MixtureTest": Case(
        lambda: MixtureTest(0.2, 0.1, "certify", [0.0, 0.5, 1.0], WSR), _three),
    "monitor.stats.betting.autoeval_plugin.PlugInTest": Case(
        lambda: PlugInTest(0.2, 0.1, "certify", [0.0, 0.5, 1.0], BET), _three, spawn="prototype"),
    "monitor.stats.betting.confseq.HedgedConfidenceSequence": Case(
        lambda: HedgedConfidenceSequence(0.1, [0.0, 0.5, 1.0], WSR, grid_size=50), _three),
    "monitor.stats.betting.confseq_bernstein.BernsteinSequences": Case(
        lambda: BernsteinSequences(0.1, [0.0, 0.5, 1.0], BET, 50, [[0], [0, 1, 2]]),
        lambda o, r: o.update(_bit(r), _u(r), _u(r)), spawn="prototype"),
    "monitor.stats.betting.eprocess.BettingEProcess": Case(
        lambda: BettingEProcess(0.2, 0.1, "certify", [0.0, 0.0], [1.0, 1.0], WSR),
        lambda o, r: o.update([_bit(r), _u(r)])),
    "monitor.stats.betting.plugin.PlugInEProcess": Case(
        lambda: PlugInEProcess(0.2, 0.1, "certify", [0.0, 0.5, 1.0], BET),
        lambda o, r: o.advance(_bit(r), _u(r) - 0.5), spawn="prototype"),
    "monitor.stats.betting.risk.RiskMonitor": Case(
        lambda: RiskMonitor(0.2, 0.1, "r_autoeval_plus", BET, n_rhos=3, cs_grid=50), _three),
    "monitor.stats.betting.risk_group.CertificateGroup": Case(
        lambda: CertificateGroup(0.2, 0.1, ["r_eval", "r_autoeval_plus"], BET, n_rhos=3,
                                 cs_grid=50), _three, spawn="prototype"),
    "monitor.stats.betting.risk_group.CertificateGroup[wsr]": Case(
        lambda: CertificateGroup(0.2, 0.1, ["r_eval", "r_autoeval_plus"], BetConfig(rule="wsr"),
                                 n_rhos=3, cs_grid=50), _three),
    "monitor.stats.betting.bets.BetConfig": Case(
        lambda: BetConfig(rule="wsr"), None, save=lambda o: o.to_dict(),
        load=BetConfig.from_dict),
    "monitor.stats.betting.autoeval.OneSidedTest": Covered(
        "PlugInTest, MixtureTest", "a Protocol: its implementations are cases"),
    "monitor.stats.betting.risk.Interval": Covered(
        "RiskMonitor", "a Protocol: its implementations are saved inside RiskMonitor"),
    "monitor.stats.betting.risk_group.GroupedRiskMonitor": Covered(
        "CertificateGroup", "a member advanced by its group; saved as a RiskMonitor state"),
    "monitor.stats.betting.shared_rows.SharedRows": Covered(
        "CertificateGroup", "the shared wsr/up e-processes of a group; saved in its state"),
    "monitor.stats.betting.rows_view.RowsView": Covered(
        "CertificateGroup", "a view on a shared e-process; its owner saves the rows"),
    "monitor.stats.betting.members.BernsteinMember": Covered(
        "BernsteinSequences", "a member of a shared sequence; its owner saves it"),
    "monitor.stats.betting.confseq_group.GridMember": Covered(
        "CertificateGroup", "a member of a shared grid; its owner saves it"),
    "monitor.stats.betting.confseq_group.SharedGridWealth": Covered(
        "CertificateGroup", "the grid confidence sequences of a group (cs_kind='grid')"),
    # ---- cereval / stratppi
    "monitor.stats.cereval.stitched_radii.SequentialMean": Case(
        lambda: SequentialMean(0.1), lambda o, r: o.update(_u(r))),
    "monitor.stats.cereval.certified_mean.StratifiedCertifiedMean": Case(
        lambda: StratifiedCertifiedMean(3, 0.1), lambda o, r: o.update(int(r.integers(3)),
                                                                       _u(r))),
    "monitor.stats.cereval.partition.LabelStrata": Case(
        lambda: LabelStrata(3), lambda o, r: o.index(str(r.choice(["a", "b", "c", None])))),
    "monitor.stats.cereval.partition.JudgeLossBins": Case(
        lambda: JudgeLossBins(3, warmup=40), lambda o, r: o.update(_u(r))),
    "monitor.stats.cereval.partition.NearestNeighbourPartition": Case(
        lambda: NearestNeighbourPartition([[0.0, 0.0], [1.0, 1.0], [0.0, 1.0]], [0, 1, 1], 2),
        None),
    "monitor.stats.stratppi.estimator.StratifiedPPIMean": Case(
        lambda: StratifiedPPIMean(3, 0.1), _strat_ppi),
    # ---- changepoint
    "monitor.stats.changepoint.detector.RiskIncreaseDetector": Case(
        lambda: RiskIncreaseDetector(0.2, arl=500.0), lambda o, r: o.update(_bit(r)),
        spawn="any"),
    "monitor.stats.changepoint.drift.DriftDetector": Case(
        lambda: DriftDetector(warmup=30, arl=500.0), lambda o, r: o.update(_u(r) - _u(r)),
        spawn="any"),
    "monitor.stats.changepoint.ppi.PPIRiskDetector": Case(
        lambda: PPIRiskDetector(0.2, arl=500.0), lambda o, r: o.update(_bit(r), _u(r), _u(r)),
        spawn="any"),
    # ---- comparison
    "monitor.stats.comparison.bound.DifferenceBound": Case(
        lambda: DifferenceBound(0.1, "certify", 0.1, 0.5),
        lambda o, r: o.advance(_bit(r) - _bit(r), _u(r) - _u(r), 0.5)),
    "monitor.stats.comparison.eprocess.DifferenceEProcess": Case(
        lambda: DifferenceEProcess(0.1, "certify", [0.0, 0.5, 1.0]),
        lambda o, r: o.advance(_bit(r) - _bit(r), _u(r) - _u(r))),
    "monitor.stats.comparison.paired.PairedComparison": Case(
        lambda: PairedComparison(0.05, 0.1, n_rhos=3), _paired),
    "monitor.stats.comparison.unpaired.UnpairedComparison": Case(
        lambda: UnpairedComparison(0.05, 0.1, n_rhos=3), _unpaired),
    "monitor.stats.comparison.group.CandidateGroup": Case(
        lambda: CandidateGroup("paired", ["a", "b"], 0.05, 0.1, n_rhos=3), _group),
    # ---- pulse (selection)
    "monitor.stats.pulse.aipw.AIPWEstimator": Case(lambda: AIPWEstimator(2, 400), _aipw),
    "monitor.stats.pulse.bandit.SelectionBandit": Case(
        lambda: SelectionBandit(SelectionConfig(method="ucbe", batch_size=2), 3, 12), _bandit),
    "monitor.stats.pulse.bestarm.BestModelCertifier": Case(
        lambda: BestModelCertifier(3, 0.1), _best_arm),
    "monitor.stats.pulse.lowrank.LogisticLowRank": Case(
        lambda: LogisticLowRank(2, np.array([[1.0], [-1.0], [0.5], [0.2], [0.0], [-0.3]])),
        _lowrank, warm=3),
    "monitor.stats.pulse.config.SelectionConfig": Case(
        lambda: SelectionConfig(method="ucbe"), None, save=lambda o: o.to_dict(),
        load=SelectionConfig.from_dict),
    "monitor.stats.pulse.aipw_plan.PullPlan": Covered(
        "AIPWEstimator", "a pending pull, saved inside the estimator's state"),
    "monitor.stats.pulse.lowrank.RefitCost": Covered(
        "LogisticLowRank", "a report of one refit's cost (to_dict only; never restored)"),
    # ---- monitor.state: the per-suite rooms
    "monitor.state.epochs.CertificateEpochs": Case(
        lambda: CertificateEpochs.new(alpha=0.2, arl=500.0), _three,
        save=lambda o: o.to_dict(), load=CertificateEpochs.from_dict, spawn="any"),
    "monitor.state.judge_drift.JudgeDrift": Case(
        lambda: JudgeDrift.new(warmup=30, p=0.02, horizon=4500),
        lambda o, r: o.update(_bit(r), _u(r)), save=lambda o: o.to_dict(),
        load=JudgeDrift.from_dict, spawn="any"),
    "monitor.engine.Engine": Case(
        lambda: Engine(_engine_config()), _engine_feed, save=lambda o: o.snapshot(),
        load=lambda d: Engine.restore(_engine_config(), d), warm=300),
    "monitor.engine.Engine[strata]": _variant("strata", _STRATA),
    "monitor.engine.Engine[comparisons]": _variant("comparisons", _COMPARISONS),
    "monitor.engine.Engine[active]": _variant("active", _ACTIVE),
    "monitor.engine.Engine[hedged]": _variant("hedged", _HEDGED),
    "monitor.stats.betting.hedge.HedgedPairs": Covered(
        "Engine[hedged]", "a room of ModelState under audit_policy = \"hedged\""),
    "monitor.stats.betting.active_online.ActiveAudit": Covered(
        "Engine[active]", "a room of ModelState under audit_policy = \"active\""),
    "monitor.state.strata_order.StrataOrder": Covered(
        "Engine[strata]", "the per-stratum audit order of StrataState"),
    "monitor.state.suite.SuiteState": Covered("Engine", "restored with its SuiteConfig"),
    "monitor.state.join.JoinWindow": Covered("Engine", "a room of SuiteState"),
    "monitor.state.join.PendingUnit": Covered("Engine", "a record of JoinWindow"),
    "monitor.state.model.ModelState": Covered("Engine", "a room of SuiteState"),
    "monitor.state.model.EffectiveStatus": Covered("Engine", "a record of ModelState"),
    "monitor.state.comparisons.SuiteComparisons": Covered(
        "Engine[comparisons]", "a room of SuiteState"),
    "monitor.state.strata.StrataState": Covered(
        "Engine[strata]", "a room of SuiteState (tests/test_forged_strata.py forges it)"),
    "monitor.state.audit_order.AuditOrder": Covered("Engine", "a room of SuiteState"),
    "monitor.state.expiring.ExpiringMap": Covered(
        "Engine", "the dedupe/pending/orphan maps of JoinWindow (to_columns)"),
    "monitor.state.expiring.FifoExpiringMap": Covered(
        "Engine", "the dedupe window of JoinWindow (to_columns)"),
    "monitor.state.selection_suites.SelectionState": Covered(
        "Engine", "selection suites (tests/test_forged_selection.py forges them)"),
    "monitor.state.selection_suites.SelectionSuites": Covered("Engine", "the selection part"),
}
