"""The STATE.json fields a view reads without numpy are the monitors' own values, bit for bit.

:func:`monitor.state.views.model_view` takes ``rho_weights``, ``risk_estimate`` and ``rhos`` of
a plug-in test as lists (without numpy for a one-rho method, ``r_eval`` / ``r_autoeval``);
they must equal :meth:`RiskMonitor.weights_and_estimate` and :attr:`RiskMonitor.rhos`.
"""

from __future__ import annotations

import math
import struct

from monitor.config import parse_config
from monitor.engine import Engine
from monitor.state.views import model_view

_CONFIG = """
[[suites]]
audit_rate = 0.5
[[suites.certificates]]
name = "risk"
alpha = 0.2
delta = 0.1
methods = ["r_eval", "r_autoeval", "r_autoeval_plus"]
"""


def _bits(x: float) -> bytes:
    return b"nan" if math.isnan(x) else struct.pack("<d", x)


def test_view_weights_estimate_rhos_are_the_monitors_values() -> None:
    eng = Engine(parse_config(_CONFIG))
    checked = 0
    for i in range(600):
        model = f"m{i % 3}"
        judge = float(i % 7 == 0)
        human = float(i % 5 == 0)
        for kind, loss in (("judge", judge), ("label", human)):
            eng.process((f'{{"type": "{kind}", "event_id": "{kind}{i}", "suite": "s", '
                         f'"model": "{model}", "example_id": "x{i}", "loss": {loss}, '
                         f'"ts": {i}}}').encode())
        if i % 50 != 49:
            continue
        eng.settle()
        suite = eng.suites["s"]
        for m in suite.models.values():
            view = model_view(m, suite.config.certificates)
            for (cert, meth), mon in m.monitors.items():
                entry = view["certificates"][cert]["methods"][meth]
                weights, estimate = mon.weights_and_estimate()
                assert entry["rho_weights"] == weights.astype(float).tolist()
                assert entry["rhos"] == mon.rhos.astype(float).tolist()
                assert all(type(v) is float for v in entry["rhos"] + entry["rho_weights"])
                got = entry["risk_estimate"]
                assert (got is None and not math.isfinite(estimate)) or (
                    _bits(got) == _bits(estimate))
                checked += 1
    assert checked >= 100
