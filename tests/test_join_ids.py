"""The dedupe window's ids (one flat ``(tick, unit, loss)`` tuple per event id) read and write
the snapshot columns as before, older snapshots' unit-only entries included."""

from __future__ import annotations

import json
import math

from monitor.config import CertificateConfig, SuiteConfig
from monitor.state.join import JoinWindow

CFG = SuiteConfig(name="qa", certificates=[CertificateConfig(name="r", alpha=0.1, delta=0.05)])


def test_snapshot_columns_round_trip_and_dedupe() -> None:
    w = JoinWindow(CFG)
    assert w.admit("e1", "1:mx", "j1:mx", True, 5.0, 0.0) is None
    assert w.admit("e2", "1:mx", "l1:mx", False, 5.0, 1.0) is None
    assert w.admit("e3", "1:my", "j1:my", True, 6.0, 0.25) is None
    cols = w.to_dict()["ids"]
    assert cols == {"keys": ["e1", "e2", "e3"], "ticks": [[5.0, 2], [6.0, 1]],
                    "payloads": [["j1:mx", 0.0], ["l1:mx", 1.0], ["j1:my", 0.25]]}
    # an older snapshot kept the unit only: its id matches the unit with any loss
    old = json.loads(json.dumps(w.to_dict()))
    old["ids"]["payloads"][2] = "j1:my"
    r = JoinWindow.from_dict(CFG, 6.0, old)
    assert r.to_dict() == old and r.units == {"j1:mx", "l1:mx", "j1:my"}
    assert r.admit("e3", "1:my", "j1:my", True, 7.0, 1.0) == "event_id"
    assert r.admit("e1", "1:mx", "j1:mx", True, 7.0, 0.0) == "event_id"
    assert r.admit("e1", "1:mx", "j1:mx", True, 7.0, 1.0) == "event_id_conflict"
    assert r.admit("e2", "1:mz", "l1:mz", False, 7.0, 1.0) == "event_id_conflict"


def test_expiry_and_bound_forget_units() -> None:
    cfg = CFG.model_copy(update={"dedupe_max_ids": 2, "dedupe_ttl_seconds": 64.0})
    w = JoinWindow(cfg)
    for i in range(3):
        assert w.admit(f"e{i}", f"1:x{i}", f"j1:x{i}", True, float(i), 0.0) is None
    assert len(w.ids) == 2 and w.units == {"j1:x1", "j1:x2"}
    assert w.admit("e9", "1:x9", "j1:x9", True, 1000.0, 0.0) is None  # the others expired
    assert len(w.ids) == 1 and w.units == {"j1:x9"} and w.watermark == 1000.0
    assert w.evict_dedupe() == "ids" and not w.units and w.ids.due() == math.inf
