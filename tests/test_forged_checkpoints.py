"""Forged checkpoints: a writer of the store cannot change a certificate.

Each forgery edits a real checkpoint and recomputes its sha256, as anyone who can write the
checkpoint directory or the checkpoint topic can. Every one is refused with a clear
message, in the file store (``Engine.restore``) and on the Kafka checkpoint path
(``PartitionWorker.start``, which restores a record of the checkpoint topic).
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from hashlib import sha256
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from consumers.kafka.partitions import PartitionWorker
from monitor.checkpoint import (
    AuthenticatedStore,
    LocalDirectoryStore,
    canonical_json,
    checkpoint_key,
    decode_checkpoint,
    encode_checkpoint,
    secured_store,
)
from monitor.config import CertmonConfig, parse_config
from monitor.engine import Engine
from monitor.errors import CheckpointError
from monitor.simulate import SimulationSpec, iter_jsonl

TOML = """
[[suites]]
name = "demo"
models = ["good", "bad", "borderline"]
audit_rate = 0.3
[[suites.certificates]]
name = "risk"
alpha = 0.1
delta = 0.05
methods = ["r_eval", "r_autoeval_plus"]
rhos = 3
cs_grid = 20
"""


@pytest.fixture(scope="module")
def config() -> CertmonConfig:
    return parse_config(TOML)


@pytest.fixture(scope="module")
def snapshot(config: CertmonConfig) -> dict[str, Any]:
    eng = Engine(config)
    spec = SimulationSpec(examples=3000, audit_rate=0.3)
    eng.process_batch(list(iter_jsonl(spec, np.random.default_rng(3))))
    snap = eng.snapshot()
    statuses = {m["name"]: m["effective"][0][2][0] for m in snap["suites"][0]["models"]}
    assert statuses["bad"] == "violated" and statuses["good"] == "certified", statuses
    return snap


def forge(snap: dict[str, Any], edit: Callable[[dict[str, Any]], None]) -> bytes:
    """Edit a copy and re-encode it with a valid sha256 (NaN/Infinity written raw)."""
    doc = copy.deepcopy(snap)
    edit(doc)
    ckpt = {"format": "certmon.checkpoint", "version": 1, "position": {"offset": 0, "line": 0},
            "engine": doc, "written_at": time.time()}
    text = json.dumps(ckpt, sort_keys=True, separators=(",", ":"))  # allows NaN/Infinity
    ckpt["sha256"] = sha256(text.encode()).hexdigest()
    return json.dumps(ckpt, sort_keys=True, separators=(",", ":")).encode()


def model(doc: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(m for m in doc["suites"][0]["models"] if m["name"] == name)
    return found


def group(doc: dict[str, Any], name: str) -> dict[str, Any]:
    g: dict[str, Any] = model(doc, name)["groups"][0][1]
    return g


def _eprocesses(g: dict[str, Any]) -> list[dict[str, Any]]:
    """The e-process states of a CertificateGroup state (plugin_up: one per test)."""
    if "plugin_tests" in g:
        return [test["eprocess"] for test in g["plugin_tests"]]
    return [g["certify"], g["violate"]]


def _loosen_alpha(d: dict[str, Any]) -> None:
    for m in d["suites"][0]["models"]:
        g = m["groups"][0][1]
        g["config"]["alpha"] = 0.6
        for ep in _eprocesses(g):
            ep["alpha"] = 0.6


def _loosen_delta(d: dict[str, Any]) -> None:
    for m in d["suites"][0]["models"]:
        g = m["groups"][0][1]
        g["config"]["delta"] = g["config"]["threshold_delta"] = 0.9
        for ep in _eprocesses(g):
            ep["delta"] = 0.9


def _status(d: dict[str, Any]) -> None:  # the violated model shows certified
    for e in model(d, "bad")["effective"]:
        e[2][0], e[2][1], e[2][2] = "certified", 5, None


def _status_and_progress(d: dict[str, Any]) -> None:  # and its certify tests "crossed"
    _status(d)
    g = group(d, "bad")
    if "plugin_tests" in g:
        for test in g["plugin_tests"]:
            test["max_log_e"], test["crossed_at_round"] = 1.0, 5
    else:
        g["tests"] = [[1.0, 5] for _ in g["tests"]]


def _rounds(d: dict[str, Any]) -> None:
    model(d, "bad")["counts"]["rounds"] = 999_999


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(d: dict[str, Any]) -> None:
        node: Any = d
        for k in path[:-1]:
            node = (next(m for m in node["models"] if m["name"] == k)
                    if k in ("good", "bad", "borderline") else node[k])
        node[path[-1]] = value
    return edit


FORGERIES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "alpha loosened": (_loosen_alpha, "different certificate parameters.*alpha"),
    "delta loosened": (_loosen_delta, "different certificate parameters.*delta"),
    "confidence sequence rounds": (lambda d: group(d, "good")["cs"].update(rounds=999_999),
                                   "confidence sequence has 999999 rounds"),
    "confidence sequence sums": (
        lambda d: group(d, "good")["cs"]["sums"][0][0].__setitem__(0, -5.0),
        "sums out of range"),
    "huge grid": (lambda d: group(d, "good")["config"].update(cs_grid=200_000_000),
                  "different certificate parameters.*cs_grid"),
    "huge UP grid": (lambda d: group(d, "good")["config"]["bet"].update(up_grid=10**8),
                     "different certificate parameters.*bet"),
    "negative counter": (_set(["counters", "events_in"], -5), "non-negative"),
    "negative model count": (_set(["suites", 0, "good", "counts", "labels"], -1),
                             "non-negative"),
    "negative block": (_set(["suites", 0, "good", "block_count"], -3), "non-negative"),
    # a finite but huge integer broke every /metrics scrape (OverflowError in float())
    "huge model count": (_set(["suites", 0, "good", "counts", "labels"], 10**400),
                         "above 2\\*\\*53"),
    "huge counter": (_set(["counters", "events_in"], 2**53 + 1), "above 2\\*\\*53"),
    "rounds inflated": (_rounds, "rounds"),
    "forged status": (_status, "status 'certified' but its test did not cross"),
    "forged crossing": (_status_and_progress, "below the threshold"),
    "unknown status": (lambda d: model(d, "good")["effective"][0][2].__setitem__(0, "ok"),
                       "unknown status"),
    "NaN sum": (_set(["suites", 0, "good", "bias_sum"], float("nan")), "non-finite"),
    "Infinity watermark": (_set(["suites", 0, "watermark"], float("inf")), "non-finite"),
    "huge tick run": (lambda d: d["suites"][0]["ids"]["ticks"].append([1.0, 10**12]),
                      "tick counts"),
    "oversized pending": (
        lambda d: d["suites"][0]["pending"].update(
            keys=[f"u{i}" for i in range(100_001)], ticks=[[1.0, 100_001]],
            payloads=[None] * 100_001),
        "more than the configured bound"),
}


def test_the_honest_checkpoint_restores(config: CertmonConfig, snapshot: dict[str, Any]) -> None:
    data = forge(snapshot, lambda d: None)
    snap, _ = decode_checkpoint(data)
    assert Engine.restore(config, snap).snapshot()["suites"] == snapshot["suites"]
    PartitionWorker.start(config, 0, encode_checkpoint(snapshot, {"kind": "kafka",
                                                                   "partition": 0,
                                                                   "offsets": {"t": 5}}))


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_forged_checkpoint_refused_from_the_file_store(
    name: str, config: CertmonConfig, snapshot: dict[str, Any], tmp_path: Path
) -> None:
    edit, message = FORGERIES[name]
    store = LocalDirectoryStore(tmp_path)
    store.save("replay", forge(snapshot, edit))
    with pytest.raises(CheckpointError, match=message):
        data = store.load("replay")
        assert data is not None
        snap, _ = decode_checkpoint(data)
        Engine.restore(config, snap)


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_forged_checkpoint_refused_from_the_checkpoint_topic(
    name: str, config: CertmonConfig, snapshot: dict[str, Any]
) -> None:
    edit, message = FORGERIES[name]
    doc = json.loads(forge(snapshot, edit))
    doc["position"] = {"kind": "kafka", "partition": 0, "offsets": {"events": 10}}
    doc["sha256"] = sha256(canonical_json({k: v for k, v in doc.items() if k != "sha256"})
                           .encode()).hexdigest()
    with pytest.raises(CheckpointError, match=message):
        PartitionWorker.start(config, 0, json.dumps(doc).encode())


def test_the_refusal_names_both_values(config: CertmonConfig, snapshot: dict[str, Any]) -> None:
    snap, _ = decode_checkpoint(forge(snapshot, _loosen_alpha))
    with pytest.raises(CheckpointError) as err:
        Engine.restore(config, snap)
    assert "alpha: checkpoint 0.6, configuration 0.1" in str(err.value)
    assert "configuration always wins" in str(err.value)


def test_authenticated_store_refuses_a_forgery_with_a_valid_sha256(
    config: CertmonConfig, snapshot: dict[str, Any], tmp_path: Path
) -> None:
    inner = LocalDirectoryStore(tmp_path)
    store = AuthenticatedStore(inner, b"k" * 32)
    store.save("replay", encode_checkpoint(snapshot, {"offset": 0}))
    data = store.load("replay")
    assert data is not None
    assert Engine.restore(config, decode_checkpoint(data)[0]).snapshot()["suites"] \
        == snapshot["suites"]
    # a consistent forgery (here: the honest state re-encoded by the attacker) has no MAC
    inner.save("replay", forge(snapshot, lambda d: None))
    with pytest.raises(CheckpointError, match="not authenticated"):
        store.load("replay")
    # a MAC copied from another checkpoint does not fit
    doc = json.loads(forge(snapshot, _rounds))
    doc["hmac"] = json.loads(data)["hmac"]
    inner.save("replay", json.dumps(doc).encode())
    with pytest.raises(CheckpointError, match="hmac mismatch"):
        store.load("replay")


def test_checkpoint_key_from_env_or_file(tmp_path: Path) -> None:
    keyfile = tmp_path / "key"
    keyfile.write_text("from-a-file\n")
    assert checkpoint_key({"CERTMON_CHECKPOINT_KEY_FILE": str(keyfile)}) == b"from-a-file"
    assert checkpoint_key({"CERTMON_CHECKPOINT_KEY": "x"}) == b"x"
    with pytest.raises(CheckpointError, match="not both"):
        checkpoint_key({"CERTMON_CHECKPOINT_KEY": "x",
                        "CERTMON_CHECKPOINT_KEY_FILE": str(keyfile)})
    with pytest.raises(CheckpointError) as err:
        checkpoint_key({"CERTMON_CHECKPOINT_KEY_FILE": str(tmp_path / "missing")})
    assert "from-a-file" not in str(err.value)
    assert isinstance(secured_store(LocalDirectoryStore(tmp_path),
                                    {"CERTMON_CHECKPOINT_KEY": "x"}), AuthenticatedStore)


def test_non_finite_values_are_never_written(snapshot: dict[str, Any]) -> None:
    with pytest.raises(CheckpointError, match="cannot write"):
        encode_checkpoint({"x": float("nan")}, {})


def test_a_checkpoint_from_before_cs_kind_restores_with_the_grid_only() -> None:
    """Checkpoints written before ``cs_kind`` existed hold the wealth grid: restored as such
    with ``cs_kind = "grid"``, refused with a message naming ``cs_kind`` under the default."""
    grid_cfg = parse_config(TOML.replace("cs_grid = 20", 'cs_grid = 20\ncs_kind = "grid"'))
    eng = Engine(grid_cfg)
    spec = SimulationSpec(examples=300, audit_rate=0.3)
    eng.process_batch(list(iter_jsonl(spec, np.random.default_rng(4))))
    old = copy.deepcopy(eng.snapshot())
    for m in old["suites"][0]["models"]:
        for _, group in m["groups"]:
            del group["config"]["cs_kind"]  # what older versions wrote
    restored = Engine.restore(grid_cfg, old)
    assert restored.state_view() == eng.state_view()
    with pytest.raises(CheckpointError, match='predates cs_kind: set cs_kind = "grid"'):
        Engine.restore(parse_config(TOML), old)
    # and the group check names the field if the hash were made to match
    new_cfg = parse_config(TOML)
    old["config_fingerprint"] = Engine(new_cfg).snapshot()["config_fingerprint"]
    with pytest.raises(CheckpointError, match="cs_kind: checkpoint 'grid', configuration "
                                              "'bernstein'"):
        Engine.restore(new_cfg, old)


def test_a_checkpoint_from_before_cap_switch_restores_with_cap_switch_false() -> None:
    """Checkpoints written before ``cap_switch`` existed hold the 8 fixed cells: restored as
    such with ``cap_switch = false`` (the same hash as the old configuration), refused with a
    message naming ``cap_switch`` under the default."""
    off_cfg = parse_config(TOML.replace("cs_grid = 20", "cs_grid = 20\ncap_switch = false"))
    eng = Engine(off_cfg)
    spec = SimulationSpec(examples=300, audit_rate=0.3)
    events = list(iter_jsonl(spec, np.random.default_rng(4)))
    eng.process_batch(events[:600])
    old = copy.deepcopy(eng.snapshot())
    for m in old["suites"][0]["models"]:
        for _, group in m["groups"]:
            del group["config"]["bet"]["cap_switch"]  # what older versions wrote
    restored = Engine.restore(off_cfg, old)
    assert restored.state_view() == eng.state_view()
    restored.process_batch(events[600:])
    eng.process_batch(events[600:])
    assert restored.snapshot() == eng.snapshot()
    with pytest.raises(CheckpointError, match="predates cap_switch: set cap_switch = false"):
        Engine.restore(parse_config(TOML), old)
    new_cfg = parse_config(TOML)  # and the group check names the field if the hash matched
    old["config_fingerprint"] = Engine(new_cfg).snapshot()["config_fingerprint"]
    with pytest.raises(CheckpointError, match="cap_switch"):
        Engine.restore(new_cfg, old)
