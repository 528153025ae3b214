"""ModelState drives one CertificateGroup per certificate; results equal independent monitors."""

from __future__ import annotations

import json

import numpy as np

from monitor.config import CertificateConfig
from monitor.state.model import ModelState, build_monitor
from monitor.stats.betting.risk import RiskMonitor


def test_model_state_groups_equal_independent_monitors_across_restore() -> None:
    certs = [
        CertificateConfig(name="risk", alpha=0.12, delta=0.05, rhos=6, cs_grid=200),
        CertificateConfig(name="loose", alpha=0.3, delta=0.1, methods=["r_autoeval_plus",
                          "r_eval"], betting="up", up_grid=8, rhos=3, cs_grid=None),
    ]
    m = ModelState.new("m", certs, threshold_delta=lambda c: c.delta / 2)
    refs: dict[tuple[str, str], RiskMonitor] = {
        (c.name, meth): build_monitor(c, meth, c.delta / 2) for c in certs for meth in c.methods
    }
    assert list(m.monitors) == list(refs)
    rng = np.random.default_rng(7)
    for i in range(600):
        for _ in range(int(rng.integers(0, 4))):
            m.add_synthetic(float(rng.random() < 0.15))
        bsum, bcount = m.close_block()
        block = bsum / bcount if bcount else None
        h = float(rng.random() < 0.1)
        f = h if rng.random() < 0.85 else 1.0 - h
        m.round(human=h, judge=f, block=(bsum, bcount))
        for r in refs.values():
            r.update(h, f, block)
        if i == 250:  # checkpoint round trip through JSON mid-stream
            m = ModelState.from_dict(json.loads(json.dumps(m.to_dict())))
    for key, ref in refs.items():
        assert m.monitors[key].to_state() == ref.to_state(), key
        assert m.monitors[key].status == ref.status
        assert m.monitors[key].cs_upper == ref.cs_upper
