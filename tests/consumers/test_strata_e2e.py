"""End to end: steered per-stratum auditing reaches the precision goal with fewer labels.

A simulated stream (``monitor.simulate`` with heterogeneous strata, hash audit, a label for every
unit) is fed through the engine twice with the same label budget: ``allocation = "uniform"``
(every stratum audited at the budget rate) and ``allocation = "cereval"`` (rates steered to
shrink the certified half-width). The number of labels used by the stratified certificate when
``precision_reached`` fires is compared.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from monitor.config import parse_config
from monitor.engine import Engine
from monitor.simulate import SimModel, SimStratum, SimulationSpec, generate

STRATA = (SimStratum("easy", 0.7, 0.0, 0.05), SimStratum("mid", 0.2, 0.05, 0.1),
          SimStratum("hard", 0.1, 0.5, 0.3))
CONFIG = """
[[suites]]
name = "demo"
models = ["m"]
audit_rate = 0.15
[suites.strata]
by = "stratum"
count = 4
names = ["easy", "mid", "hard"]
allocation = "{allocation}"
floor = 0.01
[[suites.certificates]]
name = "risk"
alpha = 0.2
delta = 0.05
methods = ["r_eval"]
cs_grid = 100
precision = {eps}
"""


def labels_to_precision(allocation: str, seed: int, eps: float = 0.06,
                        examples: int = 60_000) -> tuple[int, dict[str, int], int]:
    """Labels used when precision_reached fires (and per stratum, and rounds)."""
    eng = Engine(parse_config(CONFIG.format(allocation=allocation, eps=eps)))
    spec = SimulationSpec(models=(SimModel("m", 0.1),), examples=examples, audit_mode="hash",
                          audit_salt=f"seed{seed}", label_all=True, unsolicited_rate=0.0,
                          label_first_fraction=0.0, strata=STRATA)
    requested: set[str] = set()
    for ev in generate(spec, np.random.default_rng(seed)):
        # the labelling team answers the label requests (with the simulated human loss) and
        # nothing else; the label arrives after the judge event with a random delay
        if ev["type"] == "label":
            if ev["example_id"] not in requested:
                continue
            requested.discard(ev["example_id"])
        res = eng.process(json.dumps(ev).encode())
        requested.update(r["example_id"] for r in res.requests)
        for alert in res.alerts:
            if alert["kind"] == "precision_reached":
                ev = alert["evidence"]
                assert ev["half_width"] <= eps and ev["epsilon"] == eps
                model = eng.suites["demo"].models["m"]
                # betting rounds applied, plus labelled ones waiting for an earlier position,
                # minus the labels waiting for an earlier position of their stratum (rounds are
                # applied in audit order; stratified labels in their stratum's order)
                assert model.strata is not None
                rounds = (model.counts["rounds"] + len(model.order.ready)
                          - model.strata.order.blocked)
                return int(alert["round"]), ev["labels_per_stratum"], rounds
    raise AssertionError(f"{allocation}: precision {eps} not reached in {examples} examples")


@pytest.mark.statistical
def test_adaptive_allocation_needs_fewer_labels_than_uniform() -> None:
    ratios = []
    for seed in (1, 2, 3):
        adaptive, per_a, rounds_a = labels_to_precision("cereval", seed)
        uniform, per_u, rounds_u = labels_to_precision("uniform", seed)
        ratio = adaptive / uniform
        ratios.append(ratio)
        print(f"seed {seed}: adaptive {adaptive} {per_a} (betting rounds {rounds_a}), "
              f"uniform {uniform} {per_u} (betting rounds {rounds_u}), ratio {ratio:.3f}")
        # uniform auditing: every label is a uniform audit and feeds the betting certificates
        assert rounds_u == uniform
        # adaptive: the hard stratum is over-sampled relative to its 10% traffic share
        assert per_a["hard"] / adaptive > 1.5 * per_u["hard"] / uniform
        assert ratio < 0.97
    mean = float(np.mean(ratios))
    print(f"labels to precision, adaptive / uniform: {[round(r, 3) for r in ratios]}, "
          f"mean {mean:.3f}")
    assert mean < 0.92


@pytest.mark.parametrize("by", ["stratum", "judge_loss"])
def test_cli_simulate_and_replay_with_strata(tmp_path: Path, by: str) -> None:
    events = tmp_path / "events.jsonl"
    cfg = tmp_path / "certmon.toml"
    extra = 'names = ["easy", "hard"]' if by == "stratum" else "warmup = 500"
    cfg.write_text(f"""
[[suites]]
name = "demo"
audit_rate = 0.2
[suites.strata]
by = "{by}"
count = 3
{extra}
floor = 0.02
[[suites.certificates]]
name = "risk"
alpha = 0.3
delta = 0.1
methods = ["r_eval"]
cs_grid = 50
precision = 0.15
""")
    cli = [sys.executable, "-m", "consumers.cli"]
    subprocess.run([*cli, "simulate", "--out", str(events), "--examples", "6000", "--model",
                    "m:0.1", "--strata", "easy:0.8:0.02:0.05", "--strata", "hard:0.2:0.5:0.3",
                    "--audit-mode", "hash", "--label-all", "--seed", "3"], check=True)
    state, alerts, requests = (tmp_path / n for n in ("STATE.json", "alerts.jsonl", "req.jsonl"))
    subprocess.run([*cli, "replay", "--config", str(cfg), "--input", str(events), "--state-out",
                    str(state), "--alerts-out", str(alerts), "--requests-out", str(requests),
                    "--quiet"], check=True)
    kinds = [json.loads(x)["kind"] for x in alerts.read_text().splitlines()]
    assert kinds.count("precision_reached") == 1
    view = json.loads(state.read_text())["suites"]["demo"]["models"]["m"]["strata"]
    assert view["by"] == by and view["half_width"] <= 0.15
    assert view["precision_reached_at_labels"] is not None
    req = [json.loads(x) for x in requests.read_text().splitlines()]
    assert req and all({"request_id", "propensity", "reason"} <= r.keys() for r in req)
    if by == "judge_loss":
        assert view["warmup_units"] == 500 and len(view["edges"]) >= 1
