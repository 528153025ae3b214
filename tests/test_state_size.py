"""Compact model state: at most 16 KiB per (model x certificate), steady state.

The default certificate (three methods, 10 rhos, ``plugin_up``, Bernstein confidence
sequences on both sides) measured both ways: in the checkpoint (the model's
entry of its suite's document) and in memory (``tracemalloc``: what a second certificate adds
per model, so the suite-level dedupe window, which does not grow with certificates, is not
counted). ``benchmarks/fleet_scale.py`` reports the RSS of whole processes.
"""

from __future__ import annotations

import gc
import json
import tracemalloc

import numpy as np

from monitor.config import parse_config
from monitor.engine import Engine

LIMIT = 16 * 1024
N_MODELS = 50  # one suite
LABELS_PER_MODEL = 20
CERT = "[[suites.certificates]]\nname = '{name}'\nalpha = 0.1\ndelta = 0.05\n"
SUITE = "[[suites]]\nname = '*'\nmodels = ['*']\naudit_rate = 0.1\n"


def _stream() -> list[bytes]:
    """Labels round-robin over the models, each after 10 judge events (as fleet_scale)."""
    rng = np.random.default_rng(14)
    out: list[bytes] = []
    for i in range(N_MODELS * LABELS_PER_MODEL):
        head = {"suite": "s", "model": f"m{i % N_MODELS}", "ts": i}
        human = float(rng.random() < 0.05)
        for k in range(10):
            loss = float(human != (rng.random() < 0.1)) if k == 0 else float(rng.random() < 0.1)
            out.append(json.dumps({"type": "judge", "event_id": f"j{i}_{k}", **head,
                                   "example_id": f"x{i}" if k == 0 else f"u{i}_{k}",
                                   "loss": loss, "audit": k == 0}).encode())
        out.append(json.dumps({"type": "label", "event_id": f"l{i}", **head,
                               "example_id": f"x{i}", "loss": human}).encode())
    return out


def _run(n_certs: int, lines: list[bytes]) -> tuple[Engine, int]:
    """Replay ``lines`` into an engine with ``n_certs`` default certificates; traced bytes."""
    cfg = parse_config(SUITE + "".join(CERT.format(name=f"c{i}") for i in range(n_certs)))
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        eng = Engine(cfg)
        for start in range(0, len(lines), 4096):
            eng.process_batch(lines[start:start + 4096])
        eng.state_view(True)  # fold every pending round into the statistics
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return eng, grown


def test_per_model_and_certificate_state_is_at_most_16_kib() -> None:
    lines = _stream()
    one, mem_one = _run(1, lines)
    two, mem_two = _run(2, lines)
    for eng in (one, two):
        models = eng.suites["s"].models
        assert len(models) == N_MODELS
        assert all(m.counts["labels"] == LABELS_PER_MODEL for m in models.values())
    docs_one = one.suites["s"].to_dict()["models"]
    docs_two = two.suites["s"].to_dict()["models"]
    # checkpoint: a whole model with the default certificate, and what a certificate adds
    per_model = max(len(json.dumps(d)) for d in docs_one)
    per_cert = max(len(json.dumps(b)) - len(json.dumps(a)) for a, b in zip(docs_one, docs_two,
                                                                           strict=True))
    assert per_model <= LIMIT, per_model
    assert 0 < per_cert <= LIMIT, per_cert
    # memory: what a certificate adds per model (was ~1.3 MB per model with the wealth grid)
    per_cert_mem = (mem_two - mem_one) / N_MODELS
    assert 0 < per_cert_mem <= LIMIT, per_cert_mem


def _restored(n_certs: int, lines: list[bytes]) -> int:
    """Traced bytes of an engine restored from the snapshot of a replay of ``lines``."""
    cfg = parse_config(SUITE + "".join(CERT.format(name=f"c{i}") for i in range(n_certs)))
    live = Engine(cfg)
    for start in range(0, len(lines), 4096):
        live.process_batch(lines[start:start + 4096])
    snap = json.loads(json.dumps(live.snapshot()))  # as read back from a checkpoint
    del live
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        eng = Engine.restore(cfg, snap)
        eng.state_view(True)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
        assert len(eng.suites["s"].models) == N_MODELS
    finally:
        tracemalloc.stop()
    return grown


def test_a_restored_model_takes_no_more_memory_than_a_live_one() -> None:
    """After a restart (restore from a checkpoint) the same bound holds per certificate.

    Restored groups are spawned from the suite's prototype and loaded, so they share its
    read-only parts (bet grids, priors, the confidence sequences' layout) as live ones do;
    built from their states alone they took about 23 KiB per model and certificate.
    """
    lines = _stream()
    per_cert_mem = (_restored(2, lines) - _restored(1, lines)) / N_MODELS
    assert 0 < per_cert_mem <= LIMIT, per_cert_mem

