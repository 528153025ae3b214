"""consumers.state_json: the same bytes as json.dumps(sort_keys=True, indent=2) on any document."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np

from consumers.state_json import dumps_state
from monitor.engine import SuiteParts


def _reference(view: object) -> bytes:
    return (json.dumps(view, sort_keys=True, indent=2, allow_nan=False) + "\n").encode()


def _floats(rng: np.random.Generator, n: int) -> list[float]:
    mags = 10.0 ** rng.uniform(-30, 30, n) * rng.random(n) * rng.choice([-1.0, 1.0], n)
    bits = [struct.unpack("d", struct.pack("Q", int(b)))[0]
            for b in rng.integers(0, 2**63, n // 4, dtype=np.uint64)]
    rounded = [round(float(x), int(k)) for x, k in zip(mags[: n // 4], rng.integers(0, 9, n // 4),
                                                        strict=True)]
    out = [*mags.tolist(), *bits, *rounded, 0.0, -0.0, 1e16, 1e-5, 9.99e-5, 1e-4, 1e22, 5e-324]
    return [x for x in out if np.isfinite(x)]


def test_random_documents_are_byte_identical() -> None:
    rng = np.random.default_rng(7)
    names = ["a", "b: 1e5", "x 0.00001", "m1e-7", "", "z" * 3, "suite.v1", "1e16"]
    for trial in range(20):
        floats = _floats(rng, 2000)
        doc: dict[str, object] = {"counters": {"events_in": int(rng.integers(0, 10**12))}}
        for i, f in enumerate(floats):
            name = names[i % len(names)] + str(i % 7)
            node = doc.setdefault(name, {})
            assert isinstance(node, dict)
            node[f"k{i}"] = f if i % 3 else [f, None, True, [], {}, {"x": f}, name]
        assert dumps_state(doc) == _reference(doc), trial


def test_text_msgspec_spells_otherwise_falls_back() -> None:
    for text in ["caf\u00e9", "tab\there", "quote\"", "back\\slash", "del\x7f", "nl\nx", "\ud800"]:
        doc = {"models": {text: {"v": 1e-5, "s": text}}}
        assert dumps_state(doc) == _reference(doc)


def test_float_subclasses_and_tuples() -> None:
    doc = {"x": np.float64(1.5e-7), "t": (1, 2.5e20), "n": np.float64(3.0)}
    assert dumps_state(doc) == _reference(doc)


def test_documents_longer_than_a_search_window() -> None:
    rng = np.random.default_rng(3)
    doc = {f"m{i}": {"log_e": float(x), "pad": "p" * int(k)}
           for i, (x, k) in enumerate(zip(10.0 ** rng.uniform(-9, -4, 40_000),
                                          rng.integers(0, 40, 40_000), strict=True))}
    data = dumps_state(doc)
    assert len(data) > 3 * 2**20
    assert data == _reference(doc)


def test_parts_are_the_whole_document() -> None:
    from consumers.state_json import dumps_state_parts

    rng = np.random.default_rng(5)
    names = ["s1", "caf\u00e9", "a b", "Z", "s10", "s2", "quote\"d"]
    for k in range(len(names) + 1):
        whole: dict[str, Any] = {}
        parts: list[SuiteParts] = []
        for j, n in enumerate(names[:k]):
            models = [(f"m{i}" if i % 2 else f"\u00e9{i}",
                       {"x": float(x), "l": [float(x), None, {}]})
                      for i, x in enumerate(rng.random(j % 4) * 1e-5)]
            head: dict[str, Any] = {"family_size": 3, "models": {}, "multiplicity": "none",
                    "refused_models": {"events": 1, "names": ["models"]}}
            whole[n] = {**head, "models": dict(models)}
            parts.append((n, head, iter(models)) if j % 3 else (n, whole[n], None))
        counters = {"events_in": k, "rejected": {}, "budget_evictions": {"ids": 1}}
        doc = {"suites": whole, "counters": counters}
        assert dumps_state_parts(iter(parts), counters.copy) == _reference(doc), k


def test_engine_state_file_is_the_state_view(tmp_path: Path) -> None:
    from consumers.runner import write_engine_state, write_state
    from monitor.config import parse_config
    from monitor.engine import Engine

    cfg = parse_config("[[suites]]\naudit_rate=0.5\n[[suites.certificates]]\nname='r'\n"
                       "alpha=0.2\ndelta=0.1\nmethods=['r_eval', 'r_autoeval']\ncs_grid=20")
    eng = Engine(cfg)
    rng = np.random.default_rng(1)
    events = []
    for i in range(3000):
        s, m, loss = f"s{i % 3}", f"m{i % 7}", float(rng.random() < 0.1)
        events.append(json.dumps({"type": "judge", "event_id": f"j{i}", "suite": s, "model": m,
                                  "example_id": f"x{i}", "loss": loss, "ts": i}).encode())
        if i % 2:
            events.append(json.dumps({"type": "label", "event_id": f"l{i}", "suite": s,
                                      "model": m, "example_id": f"x{i}", "loss": loss,
                                      "ts": i}).encode())
    eng.process_batch(events)
    write_state(str(tmp_path / "a.json"), eng.state_view())
    write_engine_state(str(tmp_path / "b.json"), eng)
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert len(json.loads((tmp_path / "b.json").read_text())["suites"]["s1"]["models"]) == 7
