"""The declared schemas of the snapshot documents (:mod:`monitor.snapshot_schemas`).

Documents written by a real run convert; junk (another format or version, a missing key, a
value of the wrong type or out of range, at the top level and one level down) is refused with
a ``ValueError`` naming the path, or converts; never another exception. A suite document
missing a key is refused by the restore checks with a ``RefusedState``, not a ``KeyError``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from monitor.checkpoint import LocalDirectoryStore
from monitor.config import load_config
from monitor.engine import Engine
from monitor.incremental import IncrementalCheckpointer, load_checkpoint
from monitor.simulate import SimulationSpec, iter_jsonl
from monitor.snapshot_schemas import Manifest, PartDocument, SuiteDocument, convert
from monitor.state.restore_checks import RefusedState, check_suite_dict
from tests.test_state_contract import _variants

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    eng = Engine(load_config(ROOT / "examples" / "minimal.toml"))
    for line in iter_jsonl(SimulationSpec(examples=800, audit_rate=0.2),
                           np.random.default_rng(1)):
        eng.process(line)
    path = tmp_path_factory.mktemp("ckpt")
    IncrementalCheckpointer(LocalDirectoryStore(path), "k").save(eng, {"line": 1})
    docs = {f.name: json.loads(f.read_text()) for f in sorted(path.iterdir())}
    manifest = next(d for d in docs.values() if d["format"] == "certmon.checkpoint")
    part = next(d for d in docs.values() if d["format"] == "certmon.checkpoint-part")
    assert load_checkpoint(LocalDirectoryStore(path), "k") is not None  # through the schemas
    return {"manifest": manifest, "part": part, "suite": part["state"]}


SCHEMAS: dict[str, type[msgspec.Struct]] = {
    "manifest": Manifest, "part": PartDocument, "suite": SuiteDocument}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_written_documents_convert_and_junk_is_refused(name: str,
                                                       documents: dict[str, Any]) -> None:
    doc = documents[name]
    convert(doc, SCHEMAS[name], name)
    refused = 0
    for what, junk, _ in _variants(json.loads(json.dumps(doc))):
        try:
            convert(junk, SCHEMAS[name], name)
        except ValueError as exc:
            assert str(exc).startswith(f"{name} is malformed: "), (what, exc)
            refused += 1
    assert refused > 20
    for key in ("format", "version"):
        if key in doc:
            with pytest.raises(ValueError, match=f"at `\\$.{key}`"):
                convert({**doc, key: "x"}, SCHEMAS[name], name)


def test_counts_are_bounded(documents: dict[str, Any]) -> None:
    doc = documents["manifest"]
    counters = doc["engine"]["counters"]
    for bad in (-1, 2**53 + 1, 1.5, True):
        with pytest.raises(ValueError, match="events_in"):
            convert({**doc, "engine": {**doc["engine"], "counters": {**counters,
                                                                     "events_in": bad}}},
                    Manifest, "m")


@pytest.mark.parametrize("key", ["ids", "pending", "models", "name", "watermark"])
def test_a_suite_document_missing_a_key_is_refused_not_a_key_error(
        key: str, documents: dict[str, Any]) -> None:
    suite = {k: v for k, v in documents["suite"].items() if k != key}
    cfg = load_config(ROOT / "examples" / "minimal.toml")
    with pytest.raises(RefusedState, match=f"missing required field `{key}`"):
        check_suite_dict(cfg.suites[0], suite, lambda c: c.delta)
