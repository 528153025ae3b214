"""Forged change-detector states: epochs, regression/improvement and judge drift.

The snapshot has a certified model, a violated one (improvement detector running) and one
whose risk rose mid-stream (epoch 2, opened by a regression, history kept), all with their
judge-drift detectors past the warm-up. Each forgery edits it and recomputes the sha256, as
a writer of the checkpoint store can; each must be refused by ``Engine.restore``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from monitor.checkpoint import decode_checkpoint
from monitor.config import CertmonConfig, parse_config
from monitor.engine import Engine
from monitor.errors import CheckpointError
from monitor.simulate import SimModel, SimulationSpec, iter_jsonl
from monitor.state.epochs import CertificateEpochs
from monitor.stats.changepoint.ppi import PPIRiskDetector
from tests.test_forged_checkpoints import forge, model

TOML = """
[[suites]]
name = "demo"
models = ["good", "bad", "drifting"]
audit_rate = 0.5
judge_drift_warmup = 50
[[suites.certificates]]
name = "risk"
alpha = 0.1
delta = 0.05
methods = ["r_eval", "r_autoeval_plus"]
rhos = 3
cs_grid = 20
detector_arl = 500
"""


@pytest.fixture(scope="module")
def config() -> CertmonConfig:
    return parse_config(TOML)


def _events(examples: int, seed: int) -> list[bytes]:
    models = (SimModel("good", 0.02, 0.95), SimModel("bad", 0.3, 0.9),
              SimModel("drifting", 0.02, 0.95, 0.5))
    spec = SimulationSpec(models=models, examples=examples, audit_rate=0.5, drift_at=1500)
    return list(iter_jsonl(spec, np.random.default_rng(seed)))


@pytest.fixture(scope="module")
def snapshot(config: CertmonConfig) -> dict[str, Any]:
    eng = Engine(config)
    eng.process_batch(_events(3000, 3))
    snap = eng.snapshot()
    epochs = {m["name"]: m["epochs"][0][1] for m in snap["suites"][0]["models"]}
    assert epochs["drifting"]["number"] == 2 and epochs["drifting"]["reason"] == "regression"
    assert epochs["bad"]["improvement"] is not None
    assert all(m["judge_drift"]["bias"]["detector"] is not None
               for m in snap["suites"][0]["models"])
    return snap


def epochs(d: dict[str, Any], name: str) -> dict[str, Any]:
    e: dict[str, Any] = model(d, name)["epochs"][0][1]
    return e


def regression(d: dict[str, Any], name: str) -> dict[str, Any]:
    r: dict[str, Any] = epochs(d, name)["regression"]["detector"]
    return r


def judge(d: dict[str, Any], name: str, which: str = "bias") -> dict[str, Any]:
    j: dict[str, Any] = model(d, name)["judge_drift"][which]
    return j


def _fire(det: dict[str, Any]) -> None:
    """Raise every component's statistic above the threshold, without latching the alarm."""
    high = math.log(det["threshold"]) + 1.0
    det["log_sr"] = [high] * len(det["log_sr"])
    det["log_cu"] = [high] * len(det["log_cu"])
    det["alarm_round"] = None


def _latch(det: dict[str, Any]) -> None:
    det["alarm_round"] = det["rounds"]


def _add_improvement(d: dict[str, Any]) -> None:
    epochs(d, "good")["improvement"] = PPIRiskDetector(0.9, arl=500.0).to_state()


def _short_history(d: dict[str, Any]) -> None:
    epochs(d, "drifting")["history"][0][2] -= 10  # the epoch ended elsewhere


FORGERIES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "regression threshold loosened": (
        lambda d: regression(d, "good").update(threshold=1e300),
        "regression detector: .*different detector parameters.*threshold"),
    "regression threshold tightened": (
        lambda d: regression(d, "good").update(threshold=1.5),
        "different detector parameters.*threshold"),
    "improvement threshold": (
        lambda d: epochs(d, "bad")["improvement"]["detector"].update(threshold=1e9),
        "improvement detector: .*different detector parameters"),
    "detector alpha": (lambda d: epochs(d, "good").update(alpha=0.5),
                       "different detector parameters.*alpha"),
    "detector fractions": (
        lambda d: regression(d, "good").update(fractions=[0.99] * 8),
        "different detector parameters.*fractions"),
    "PPI reliance fixed": (lambda d: epochs(d, "good")["regression"].update(rho=0.0),
                           "different detector parameters.*rho"),
    "statistic forged to fire": (lambda d: _fire(regression(d, "good")),
                                 "at or above its threshold .* without an alarm"),
    "latched regression alarm": (lambda d: _latch(regression(d, "good")),
                                 "regression alarm latched"),
    "latched improvement alarm": (
        lambda d: _latch(epochs(d, "bad")["improvement"]["detector"]),
        "improvement alarm latched"),
    "improvement while certified": (_add_improvement, "improvement detector while 'certified'"),
    "disarmed outside a regression epoch": (lambda d: epochs(d, "good").update(armed=False),
                                            "disarmed"),
    "detector rounds inflated": (lambda d: regression(d, "good").update(rounds=10**6),
                                 "watched 1000000 rounds"),
    "epoch after the last round": (lambda d: epochs(d, "good").update(started_round=10**6),
                                   "starts at round 1000000"),
    "epoch counts": (lambda d: epochs(d, "good").update(ended=[3, 0, 0]), "do not add up"),
    "epoch number without history": (lambda d: epochs(d, "good").update(number=7),
                                     "history entries for epoch 7"),
    "history does not lead here": (_short_history, "does not lead to epoch"),
    "judge-drift threshold": (lambda d: judge(d, "good").update(threshold=1e300),
                              "judge-drift bias detector: .*different detector parameters"),
    "judge-drift inner threshold": (
        lambda d: judge(d, "good", "disagreement")["detector"].update(threshold=1e300),
        "judge-drift disagreement detector: .*different detector parameters"),
    "judge-drift warm-up": (lambda d: judge(d, "good").update(warmup=10**6),
                            "different detector parameters.*warmup"),
    "judge-drift statistic forged to fire": (lambda d: _fire(judge(d, "good")["detector"]),
                                             "at or above its threshold .* without an alarm"),
    "judge-drift latched alarm": (lambda d: _latch(judge(d, "good")["detector"]),
                                  "alarm latched"),
    "judge-drift alarms": (lambda d: model(d, "good")["judge_drift"].update(alarms=10**9),
                           "judge-drift alarms"),
    "judge-drift state removed": (lambda d: model(d, "good").update(judge_drift=None),
                                  "judge_drift is on"),
}


def test_the_honest_snapshot_restores(config: CertmonConfig, snapshot: dict[str, Any]) -> None:
    snap, _ = decode_checkpoint(forge(snapshot, lambda d: None))
    assert Engine.restore(config, snap).snapshot()["suites"] == snapshot["suites"]


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_forged_detector_state_is_refused(name: str, config: CertmonConfig,
                                          snapshot: dict[str, Any]) -> None:
    edit, message = FORGERIES[name]
    with pytest.raises(CheckpointError, match=message):
        snap, _ = decode_checkpoint(forge(snapshot, edit))
        Engine.restore(config, snap)


def test_a_loosened_threshold_would_have_suppressed_the_regression(
    config: CertmonConfig, snapshot: dict[str, Any]
) -> None:
    """What the refusal prevents: after the drift, the honest state raises a regression
    alert for 'good' once its risk rises; the forged threshold silences it."""
    worse = (SimModel("good", 0.6, 0.95), SimModel("bad", 0.3, 0.9),
             SimModel("drifting", 0.5, 0.95))
    spec = SimulationSpec(models=worse, examples=1500, audit_rate=0.5,
                          start_ts=1_700_000_100.0)
    tail = [line.replace(b'"event_id":"', b'"event_id":"t').replace(
        b'"example_id":"', b'"example_id":"t') for line in
        iter_jsonl(spec, np.random.default_rng(9))]
    honest = Engine.restore(config, decode_checkpoint(forge(snapshot, lambda d: None))[0])
    kinds = {(a["model"], a["kind"]) for _, r in honest.process_batch(tail) for a in r.alerts}
    assert ("good", "regression") in kinds
    forged_edit = FORGERIES["regression threshold loosened"][0]
    forged = decode_checkpoint(forge(snapshot, forged_edit))[0]
    with pytest.raises(CheckpointError, match="threshold"):
        Engine.restore(config, forged)
    # without the check (the state classes alone accept it), the alert never comes
    bypass = Engine.restore(config, decode_checkpoint(forge(snapshot, lambda d: None))[0])
    bypass.suites["demo"].models["good"].epochs["risk"] = CertificateEpochs.from_dict(
        epochs(forged, "good"))
    kinds = {(a["model"], a["kind"]) for _, r in bypass.process_batch(tail) for a in r.alerts}
    assert ("good", "regression") not in kinds


def test_honest_states_restore_at_every_stage_of_a_lifecycle() -> None:
    """No false refusal: a stream that goes through judge drift, a regression and an
    improvement is snapshotted and restored every 25 units; each restore must succeed."""
    config = parse_config(TOML.replace("audit_rate = 0.5", "audit_rate = 1.0"))
    rng = np.random.default_rng(7)
    phases = [(0.02, 0.99, 500), (0.02, 0.6, 500), (0.5, 0.9, 300), (0.02, 0.9, 900)]
    lines: list[bytes] = []
    i = 0
    for risk, accuracy, units in phases:
        for _ in range(units):
            y = float(rng.random() < risk)
            f = y if rng.random() < accuracy else 1.0 - y
            for kind, loss in (("judge", f), ("label", y)):
                ev = {"type": kind, "event_id": f"{kind}{i}", "suite": "demo", "model": "good",
                      "example_id": f"x{i}", "loss": loss, "ts": 1.0 + i}
                lines.append(json.dumps(ev | ({"audit": True} if kind == "judge" else {}))
                             .encode())
            i += 1
    eng = Engine(config)
    kinds: set[str] = set()
    for start in range(0, len(lines), 50):
        for _, res in eng.process_batch(lines[start:start + 50]):
            kinds.update(a["kind"] for a in res.alerts)
        snap = json.loads(json.dumps(eng.snapshot()))
        assert Engine.restore(config, snap).snapshot() == snap
    assert {"judge_drift", "regression", "improvement"} <= kinds, kinds
