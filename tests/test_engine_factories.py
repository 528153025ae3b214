"""Suites of one ``[[suites]]`` entry share their model factory (``Engine.factories``): nothing
that one suite's models do may reach another suite's, or the prototypes; entries with other
certificate configurations keep their own factory; a restored engine continues identically."""

from __future__ import annotations

import json

from monitor.config import parse_config
from monitor.engine import Engine
from monitor.state.prototypes import ModelFactory

_CONFIG = """
[[suites]]
name = "a*"
audit_rate = 0.5
judge_drift = true
[[suites.certificates]]
name = "r"
alpha = 0.2
delta = 0.1
methods = ["r_eval", "r_autoeval", "r_autoeval_plus"]
[[suites]]
name = "b*"
audit_rate = 0.5
[[suites.certificates]]
name = "r"
alpha = 0.3
delta = 0.2
methods = ["r_autoeval_plus"]
bet_cap = 0.8
"""


def _events(suite: str, n: int, shift: int) -> list[bytes]:
    out = []
    for i in range(n):
        judge, human = float((i + shift) % 7 == 0), float((i + shift) % 5 == 0)
        for kind, loss in (("judge", judge), ("label", human)):
            out.append((f'{{"type": "{kind}", "event_id": "{suite}{kind}{i}", "suite": '
                        f'"{suite}", "model": "m{i % 2}", "example_id": "x{i}", "loss": {loss}, '
                        f'"ts": {i}}}').encode())
    return out


def _view(eng: Engine, suite: str) -> str:
    eng.settle()
    return json.dumps(eng.state_view()["suites"][suite], sort_keys=True)


def test_suites_sharing_a_factory_do_not_share_state() -> None:
    cfg = parse_config(_CONFIG)
    streams = {s: _events(s, 400, k) for k, s in enumerate(("a1", "a2", "b1"))}
    both, alone = Engine(cfg), Engine(cfg)
    for lines in zip(*streams.values(), strict=True):
        for raw in lines:
            both.process(raw)
    for raw in streams["a2"]:
        alone.process(raw)
    s = both.suites
    assert s["a1"].factory is s["a2"].factory is not s["b1"].factory
    # a2 among other suites of its entry is a2 alone: no state crosses the shared factory
    assert _view(both, "a2") == _view(alone, "a2")
    # the shared prototypes never saw a round
    fresh = ModelFactory(s["a1"].config)
    proto, new = s["a1"].factory.group_prototype("r"), fresh.group_prototype("r")
    assert proto is not None and new is not None
    assert json.dumps(proto.to_state(), sort_keys=True) == json.dumps(new.to_state(),
                                                                      sort_keys=True)
    # restored mid-stream, then continued (with a suite first seen after the restore)
    half, cont = Engine(cfg), _events("a3", 200, 9)
    for raw in streams["a1"][:400]:
        half.process(raw)
    back = Engine.restore(cfg, json.loads(json.dumps(half.snapshot())))
    for eng in (half, back):
        for raw in streams["a1"][400:] + cont:
            eng.process(raw)
    assert back.suites["a3"].factory is back.suites["a1"].factory
    assert _view(back, "a1") == _view(half, "a1") and _view(back, "a3") == _view(half, "a3")
