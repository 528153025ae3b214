from __future__ import annotations

import importlib
import json
import subprocess
import sys

import monitor.stats as stats

EXPECTED = {
    "BetConfig", "BettingEProcess", "one_sided_test", "RiskMonitor", "method_rhos",
    "effective_observations", "HedgedConfidenceSequence", "bonferroni_deltas", "fixed_sequence",
    "e_bh", "SequentialMean", "StratifiedCertifiedMean", "StratifiedPPIMean", "LabelStrata",
    "JudgeLossBins", "NearestNeighbourPartition", "audit_rates", "LogisticLowRank",
    "AIPWEstimator", "BestModelCertifier", "SelectionBandit", "SelectionConfig", "CertificateGroup",
}


def test_public_api_is_exported_and_is_the_submodule_object():
    assert set(stats.__all__) == EXPECTED and len(stats.__all__) == len(EXPECTED)
    for name in stats.__all__:
        obj = getattr(stats, name)
        home = importlib.import_module(obj.__module__)
        assert getattr(home, name) is obj, name
        assert home.__name__.startswith("monitor.stats."), name
    assert set(stats.__all__) <= set(dir(stats))


def test_unknown_name_raises_attribute_error():
    try:
        stats.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")
    assert not hasattr(stats, "_private")


def test_import_is_lazy_cheap_and_star_import_works():
    code = (
        "import json, sys\n"
        "import monitor.stats\n"
        "after_pkg = sorted(m for m in sys.modules if m.startswith('monitor.stats.'))\n"
        "heavy = sorted(m for m in ('matplotlib', 'pydantic', 'prometheus_client', 'kafka')"
        " if m in sys.modules)\n"
        "import monitor.stats.betting.bets\n"
        "after_bets = sorted(m for m in sys.modules if m.startswith('monitor.stats.'))\n"
        "ns = {}\n"
        "exec('from monitor.stats import *', ns)\n"
        "star = sorted(k for k in ns if not k.startswith('__'))\n"
        "heavy_end = sorted(m for m in ('matplotlib', 'pydantic', 'prometheus_client', 'kafka')"
        " if m in sys.modules)\n"
        "print(json.dumps([after_pkg, heavy, after_bets, star, heavy_end]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    after_pkg, heavy, after_bets, star, heavy_end = json.loads(out)
    assert after_pkg == [] and heavy == []
    # (the state contract is standard library only: every from_state is under its @restorer)
    assert after_bets == ["monitor.stats.betting", "monitor.stats.betting.bets",
                          "monitor.stats.state_contract"]
    assert set(star) == EXPECTED
    assert heavy_end == []
