"""Forged stratified-auditing states: Cer-Eval / StratPPI state of a model.

The snapshots come from steered stratified auditing (named strata, Cer-Eval allocation,
a precision goal that was reached) and from judge-loss bins past their warm-up. Each
forgery edits one and recomputes the sha256, as a writer of the checkpoint store can; each
must be refused by ``Engine.restore`` with a message naming the field.
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
from tests.test_strata import STEERED, _events, config, drive

BINS = "[suites.strata]\nby = 'judge_loss'\ncount = 3\nwarmup = 50\nallocation = 'cereval'"


@pytest.fixture(scope="module")
def steered() -> tuple[CertmonConfig, dict[str, Any]]:
    cfg = config(STEERED, "precision = 0.45", rate=0.5)
    eng = Engine(cfg)
    for e in _events(400, 11):
        eng.process(e)
    snap = eng.snapshot()
    st = snap["suites"][0]["models"][0]["strata"]
    assert st["reached_at"] is not None and st["labeler"]["names"] == ["easy", "mid", "hard"]
    return cfg, snap


@pytest.fixture(scope="module")
def binned() -> tuple[CertmonConfig, dict[str, Any]]:
    cfg = config(BINS, rate=0.3)
    eng = Engine(cfg)
    drive(eng, 600, 5)
    snap = eng.snapshot()
    assert snap["suites"][0]["models"][0]["strata"]["bins"]["edges"]
    return cfg, snap


def strata(d: dict[str, Any]) -> dict[str, Any]:
    st: dict[str, Any] = d["suites"][0]["models"][0]["strata"]
    return st


def _bump(key: str, field: str, j: int, by: int) -> Callable[[dict[str, Any]], None]:
    def edit(d: dict[str, Any]) -> None:
        node = strata(d) if key == "" else strata(d)[key]
        node[field][j] += by
    return edit


def _many_labels(d: dict[str, Any]) -> None:  # consistent per stratum, beyond the model's
    st = strata(d)
    for node, name in ((st["cert"], "traffic"), (st, "audits"), (st["cert"], "n")):
        node[name][0] += 10**6
    st["ppi"]["n"][0] += 10**6


STEERED_FORGERIES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "more strata": (lambda d: strata(d)["cert"].update(n_strata=5),
                    "different strata parameters.*n_strata"),
    "certificate level loosened": (lambda d: strata(d)["cert"].update(delta=0.9),
                                   "different strata parameters.*delta"),
    "StratPPI alpha": (lambda d: strata(d)["ppi"].update(alpha=0.9),
                       "different strata parameters.*alpha"),
    "labeler slots": (lambda d: strata(d)["labeler"].update(n_strata=10**6),
                      "labeler: .*different strata parameters"),
    "bins instead of names": (
        lambda d: strata(d).update(bins={"kind": "judge_loss_bins", "n_bins": 4, "warmup": 1,
                                         "buffer": [], "edges": [0.5]}),
        "present in only one"),
    "audit rate above 1": (lambda d: strata(d)["rates"].__setitem__(1, 7.0),
                           r"audit rates must lie in \[0, 1\]"),
    "negative audit rate": (lambda d: strata(d)["rates"].__setitem__(0, -0.5),
                            r"audit rates must lie in \[0, 1\]"),
    "rate below the uniform rate": (lambda d: strata(d).update(uniform_rate=0.99),
                                    "below the uniform rate"),
    "huge rate array": (lambda d: strata(d).update(rates=[0.5] * 10**6),
                        "values expected"),
    "negative labels": (lambda d: strata(d)["cert"]["n"].__setitem__(0, -1),
                        "non-negative integers"),
    "huge label array": (lambda d: strata(d)["cert"].update(n=[0] * 10**6), "values expected"),
    "mean out of range": (lambda d: strata(d)["cert"]["mean"].__setitem__(0, 2.0),
                          r"means must lie in \[0, 1\]"),
    "negative m2": (lambda d: strata(d)["cert"]["m2"].__setitem__(0, -1.0), "m2 must lie"),
    "StratPPI moment": (lambda d: strata(d)["ppi"]["my"].__setitem__(0, 3.0), "StratPPI my"),
    "traffic inflated": (_bump("cert", "traffic", 0, 1000), "do not add up"),
    "labels beyond audits": (_bump("cert", "n", 2, 50), "do not add up"),
    "labels beyond the model's": (_many_labels, "more traffic or labels than the model's"),
    "too many names": (lambda d: strata(d)["labeler"].update(names=[f"s{i}" for i in range(99)]),
                       "stratum names"),
    "renamed configured stratum": (lambda d: strata(d)["labeler"]["names"].__setitem__(0, "x"),
                                   "starting with the configured names"),
    "unknown target stratum": (lambda d: strata(d).update(target=99), "target stratum 99"),
    "precision reached early": (lambda d: strata(d).update(reached_at=10**6),
                                "precision reached at 1000000"),
    "strata state removed": (lambda d: strata(d).clear(), "malformed"),
}

BINNED_FORGERIES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "bins warm-up": (lambda d: strata(d)["bins"].update(warmup=10**6),
                     "different strata parameters.*warmup"),
    "unsorted edges": (lambda d: strata(d)["bins"].update(edges=[0.9, 0.1]), "increasing"),
    "edge outside [0, 1]": (lambda d: strata(d)["bins"].update(edges=[0.5, 9.0]),
                            r"bin edges must lie in \[0, 1\]"),
    "buffer after freezing": (lambda d: strata(d)["bins"].update(buffer=[0.5] * 10), "buffer"),
    "huge warm-up buffer": (
        lambda d: strata(d)["bins"].update(edges=None, buffer=[0.5] * 10**5),
        "warm-up buffer of 100000 values"),
}


def _restore(cfg: CertmonConfig, snap: dict[str, Any],
             edit: Callable[[dict[str, Any]], None]) -> Engine:
    return Engine.restore(cfg, decode_checkpoint(forge(snap, edit))[0])


def test_the_honest_snapshots_restore(steered: tuple[CertmonConfig, dict[str, Any]],
                                      binned: tuple[CertmonConfig, dict[str, Any]]) -> None:
    for cfg, snap in (steered, binned):
        assert _restore(cfg, snap, lambda d: None).snapshot()["suites"] == snap["suites"]


@pytest.mark.parametrize("name", sorted(STEERED_FORGERIES))
def test_forged_strata_state_is_refused(name: str,
                                        steered: tuple[CertmonConfig, dict[str, Any]]) -> None:
    edit, message = STEERED_FORGERIES[name]
    with pytest.raises(CheckpointError, match=f"checkpoint refused: .*strata.*{message}"):
        _restore(*steered, edit)


@pytest.mark.parametrize("name", sorted(BINNED_FORGERIES))
def test_forged_judge_loss_bins_are_refused(name: str,
                                            binned: tuple[CertmonConfig, dict[str, Any]]) -> None:
    edit, message = BINNED_FORGERIES[name]
    with pytest.raises(CheckpointError, match=f"checkpoint refused: .*strata.*{message}"):
        _restore(*binned, edit)


def test_strata_state_in_a_suite_without_strata(
        steered: tuple[CertmonConfig, dict[str, Any]]) -> None:
    cfg = config("", "", rate=0.5)
    eng = Engine(cfg)
    for e in _events(50, 11):
        eng.process(e)
    stolen = strata(steered[1])
    with pytest.raises(CheckpointError, match="strata state, but the suite has no strata"):
        _restore(cfg, eng.snapshot(), lambda d: d["suites"][0]["models"][0].update(
            strata=stolen))


@pytest.fixture(scope="module")
def waiting() -> tuple[CertmonConfig, dict[str, Any]]:
    """Stratified labels that wait for an earlier one (audit order) and labels gone missing."""
    from monitor.config import parse_config
    from tests.test_strata_label_delay import CONFIG as DELAY_CONFIG

    cfg = parse_config(DELAY_CONFIG.format(ttl=50.0, delta=0.05))
    eng = Engine(cfg)
    audited: list[tuple[int, float]] = []
    for i in range(600):
        res = eng.process(json.dumps({
            "type": "judge", "event_id": f"j{i}", "suite": "s", "model": "m",
            "example_id": f"x{i}", "loss": float(i % 7 == 0), "ts": float(i),
            "stratum": "ab"[i % 2]}).encode())
        if res.requests:
            audited.append((i, float(i % 7 == 0)))
    # answer every other label in reverse order; the others never come (missing after 50 s)
    for i, loss in reversed(audited[::2]):
        eng.process(json.dumps({"type": "label", "event_id": f"l{i}", "suite": "s",
                                "model": "m", "example_id": f"x{i}", "loss": loss,
                                "ts": 600.0}).encode())
    snap = eng.snapshot()
    st = strata(snap)
    assert st["hi"] is not None and sum(st["missing"]) > 0
    assert any(ready for _, _, ready in st["order"])  # labels waiting for an earlier one
    return cfg, snap


WAITING_FORGERIES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "upper side removed": (lambda d: strata(d).update(hi=None), "upper side"),
    "positions beyond the audits": (lambda d: strata(d)["order"][0].__setitem__(0, 10**6),
                                    "audit order"),
    "missing beyond the expired": (_bump("", "missing", 0, 10**4), "missing"),
    "waiting loss out of range": (lambda d: strata(d)["order"][0][2][0].__setitem__(1, 7.0),
                                  "loss 7.0"),
    "upper counts differ": (lambda d: strata(d)["hi"]["cert"]["n"].__setitem__(0, 0),
                            "upper side's counts"),
}


def test_waiting_snapshot_restores(waiting: tuple[CertmonConfig, dict[str, Any]]) -> None:
    cfg, snap = waiting
    assert _restore(cfg, snap, lambda d: None).snapshot()["suites"] == snap["suites"]


@pytest.mark.parametrize("name", sorted(WAITING_FORGERIES))
def test_forged_audit_order_is_refused(name: str,
                                       waiting: tuple[CertmonConfig, dict[str, Any]]) -> None:
    edit, message = WAITING_FORGERIES[name]
    with pytest.raises(CheckpointError, match=f"checkpoint refused: .*strata.*{message}"):
        _restore(*waiting, edit)
