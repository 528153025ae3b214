"""Forged selection-mode states: the PULSE bandit and the requests in flight.

Two snapshots of a PULSE suite (4 models, 60 examples, two requests in flight): one mid-run
(no certificate yet) and one after the best-model certificate. Each forgery edits one and
recomputes the sha256, as a writer of the checkpoint store can; each must be refused by
``Engine.restore`` with a message naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from monitor.checkpoint import decode_checkpoint
from monitor.config import CertmonConfig
from monitor.engine import Engine
from monitor.errors import CheckpointError
from tests.test_forged_checkpoints import forge
from tests.test_selection import answer, cfg


@pytest.fixture(scope="module")
def config() -> CertmonConfig:
    return cfg(method="pulse", outstanding=2)


def _run(config: CertmonConfig, stop_after: int | None) -> dict[str, Any]:
    eng = Engine(config)
    queue = list(eng.start(0.0).requests)
    done = 0
    while queue and (stop_after is None or done < stop_after):
        for r in answer(eng, queue.pop(0)):
            queue.extend(r.requests)
        done += 1
    snap: dict[str, Any] = json.loads(json.dumps(eng.snapshot()))
    return snap


@pytest.fixture(scope="module")
def midway(config: CertmonConfig) -> dict[str, Any]:
    snap = _run(config, 6)
    sel = snap["selection"][0]
    assert sel["bandit"]["certifier"]["certified"] is None and len(sel["outstanding"]) == 2
    return snap


@pytest.fixture(scope="module")
def certified(config: CertmonConfig) -> dict[str, Any]:
    snap = _run(config, None)
    assert snap["selection"][0]["bandit"]["certifier"]["certified"] is not None
    return snap


def sel(d: dict[str, Any]) -> dict[str, Any]:
    s: dict[str, Any] = d["selection"][0]
    return s


def bandit(d: dict[str, Any]) -> dict[str, Any]:
    b: dict[str, Any] = sel(d)["bandit"]
    return b


def cert(d: dict[str, Any]) -> dict[str, Any]:
    c: dict[str, Any] = bandit(d)["certifier"]
    return c


def _certify(d: dict[str, Any]) -> None:  # a certificate the bounds do not support
    cert(d)["certified"] = {"model": 0, "lower": 0.99, "runner_up": 1, "runner_up_upper": 0.1,
                            "epsilon": 0.0, "delta": 0.05, "log_threshold": 5.0, "rounds": 1}


def _other_winner(d: dict[str, Any]) -> None:
    c = cert(d)["certified"]
    c["model"] = (c["model"] + 1) % 4


def _cross(d: dict[str, Any]) -> None:
    cert(d)["lower"][0], cert(d)["upper"][0] = 0.9, 0.1


def _third_request(d: dict[str, Any]) -> None:
    taken = {r[0] for r in sel(d)["outstanding"]}
    free = next(i for i in range(4) if i not in taken)
    sel(d)["outstanding"].append([free, "f" * 32, [0], [0], 5.0])


MIDWAY: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "delta loosened": (lambda d: bandit(d)["config"].update(delta=0.9),
                       "different selection parameters.*delta"),
    "epsilon loosened": (lambda d: bandit(d)["config"].update(epsilon=0.5),
                         "different selection parameters.*epsilon"),
    "budget raised": (lambda d: bandit(d)["config"].update(budget=10**9), "budget"),
    "certifier delta": (lambda d: cert(d).update(delta=0.9),
                        "certificate: .*different selection parameters.*delta"),
    "unknown arm": (lambda d: bandit(d).update(n_models=5), "n_models"),
    "more examples": (lambda d: bandit(d).update(n_examples=10**6), "n_examples"),
    "huge AIPW arrays": (lambda d: bandit(d)["aipw"].update(order=[[]] * 10**5),
                         "4 entries expected"),
    "huge increments": (lambda d: cert(d)["theta"].__setitem__(0, [0.5] * 10**6),
                        "at most 60 entries"),
    "unknown example": (lambda d: sel(d)["requested"].__setitem__(0, [10**9]), "below 60"),
    "negative count": (lambda d: sel(d)["counts"].update(answers=-1), "non-negative"),
    "score above 1": (lambda d: bandit(d)["aipw"]["scores"][0].__setitem__(0, 2.0),
                      r"score must be a finite number in \[0, 1\]"),
    "bounds crossed": (_cross, "above upper bound"),
    "bound out of range": (lambda d: cert(d)["upper"].__setitem__(1, 7.0), "upper bound"),
    "forged certificate": (_certify, "certificate 0 but the bounds select None"),
    "alert without certificate": (lambda d: sel(d).update(alerted=True),
                                  "alert sent without a certificate"),
    "requests beyond max_outstanding": (_third_request, "at most 2 entries"),
    "rounds inflated": (lambda d: cert(d).update(rounds=10**6), "rounds for"),
    "low-rank model removed": (lambda d: bandit(d).update(lowrank=None), "low-rank state"),
    "low-rank l2": (lambda d: bandit(d)["lowrank"].update(l2=1e9), "l2"),
    "huge low-rank factors": (lambda d: bandit(d)["lowrank"].update(u=[[0.0] * 4] * 10**5),
                              "4 entries expected"),
    "completed beyond issued": (lambda d: bandit(d).update(completed=10**6),
                                "pulls completed"),
}

CERTIFIED: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "another winner": (_other_winner, "but the bounds select"),
    "certificate removed": (lambda d: cert(d).update(certified=None),
                            "certificate None but the bounds select"),
}


def _restore(config: CertmonConfig, snap: dict[str, Any],
             edit: Callable[[dict[str, Any]], None]) -> Engine:
    return Engine.restore(config, decode_checkpoint(forge(snap, edit))[0])


def test_the_honest_snapshots_restore(config: CertmonConfig, midway: dict[str, Any],
                                      certified: dict[str, Any]) -> None:
    for snap in (midway, certified):
        assert _restore(config, snap, lambda d: None).snapshot() == snap


@pytest.mark.parametrize("name", sorted(MIDWAY))
def test_forged_selection_state_is_refused(name: str, config: CertmonConfig,
                                           midway: dict[str, Any]) -> None:
    edit, message = MIDWAY[name]
    with pytest.raises(CheckpointError, match=f"checkpoint refused: selection suite.*{message}"):
        _restore(config, midway, edit)


@pytest.mark.parametrize("name", sorted(CERTIFIED))
def test_forged_best_model_certificate_is_refused(name: str, config: CertmonConfig,
                                                  certified: dict[str, Any]) -> None:
    edit, message = CERTIFIED[name]
    with pytest.raises(CheckpointError, match=f"checkpoint refused: selection suite.*{message}"):
        _restore(config, certified, edit)


@pytest.mark.parametrize("method", ["pulse", "ucbe", "naive"])
def test_honest_states_restore_after_every_request(method: str) -> None:
    """No false refusal: restore after each answered request, through the certificate."""
    config = cfg(method=method, outstanding=2)
    eng = Engine(config)
    queue = list(eng.start(0.0).requests)
    while queue:
        for r in answer(eng, queue.pop(0)):
            queue.extend(r.requests)
        snap = json.loads(json.dumps(eng.snapshot()))
        assert Engine.restore(config, snap).snapshot() == snap
    assert sel(snap)["bandit"]["certifier"]["certified"] is not None
