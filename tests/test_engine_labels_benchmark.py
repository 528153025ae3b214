"""benchmarks/engine_labels.py: its streams are valid events the engine certifies on.

Tiny streams (a few models, a few thousand events each), no timing assertions.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import engine_labels as el
from monitor.events import Event, decode_event


@pytest.mark.parametrize("mode", el.MODES)
def test_stream_is_valid_and_certified_models_state_labels(mode: str, tmp_path: Path) -> None:
    """Every line is a valid event, the replay dead-letters none, every model certifies at both
    levels and its ``labels`` are the harness's count on the same rounds."""
    models, units = 3, 3000
    h, f = el.draw_losses(models, units, risk=0.03, gamma=0.9, seed=4)
    audited = el.audit_mask(mode, models, units)
    assert 0.05 < audited.mean() < 0.14
    lines = list(el.stream_lines(h, f, audited, flags=mode == "every11"))
    assert len(lines) == units * models + int(audited.sum())
    decoded = [decode_event(x.encode()) for x in lines]
    events = [e for e in decoded if isinstance(e, Event)]
    assert len(events) == len(decoded)  # no Rejection
    assert sum(e.type == "label" for e in events) == int(audited.sum())
    assert all((e.audit is not None) == (mode == "every11") for e in events if e.type == "judge")
    alerts, dead, _ = el.replay(iter(lines), el.config_text(), tmp_path, timeout=300.0)
    assert dead == 0
    got = el.certified_labels(alerts, models, el.DELTAS)
    for g in got:
        assert np.isfinite(g).all() and (g >= 1).all()
    hum, shift = el.engine_rounds(h, f, audited, int(audited.sum(0).max()))
    same = el.harness_labels(hum, shift, el.ALPHA, el.DELTAS)
    for g, s in zip(got, same, strict=True):
        np.testing.assert_array_equal(g, s)
    state = json.loads((tmp_path / "STATE.json").read_text())
    m = state["suites"][el.SUITE]["models"][el.model_name(0)]
    assert m["counts"]["labels"] == int(audited[:, 0].sum())


def test_certified_labels_refuses_a_split_delta() -> None:
    """An alert tested at less than its certificate's delta (a multiplicity split) is refused."""
    alert: dict[str, object] = {
        "kind": "certified", "certificate": el.cert_name(0.01), "model": el.model_name(1),
        "evidence": {"threshold_delta": 0.005, "labels": 40}}
    with pytest.raises(ValueError, match="multiplicity"):
        el.certified_labels([alert], 2, el.DELTAS)
    alert["evidence"] = {"threshold_delta": 0.01, "labels": 40}
    got = el.certified_labels([alert], 2, el.DELTAS)
    assert got[0].tolist() == [np.inf, 40.0] and np.isinf(got[1]).all()
