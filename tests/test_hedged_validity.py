"""``audit_policy = "hedged"`` at the null boundary, end to end on the engine (Monte Carlo).

Risk equal to alpha: both the certify null (risk >= alpha) and the violate null (risk <= alpha)
hold, so each model may claim neither. Many independent models in one suite (each a run),
certmon's hash coin, labels late (0-40 units) and 10% never (expired after the pending TTL:
at their worst value on both sides); a good judge, one that under-reports failures and one
that over-reports them. The share of models with a ``certified`` (``violated``) alert must not
be significantly above delta (Clopper-Pearson, 99%).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from monitor.audit import audit_prefix, audit_uniform_prefixed
from monitor.config import parse_config
from monitor.engine import Engine
from tests.stats.binomial import clopper_pearson_lower

ALPHA, DELTA, RATE = 0.2, 0.2, 0.25
MODELS, UNITS, MAX_DELAY, MISSING = 120, 700, 40, 0.1

CONFIG = f'''
[[suites]]
name = "qa"
models = ["*"]
audit_rate = {RATE}
audit_policy = "hedged"
pending_ttl_seconds = {MAX_DELAY + 20}.0
[[suites.certificates]]
name = "risk"
alpha = {ALPHA}
delta = {DELTA}
methods = ["r_autoeval_plus"]
'''


def null_stream(judge: str, seed: int) -> list[bytes]:
    """Every model's units at risk ``ALPHA``; audited units' labels late or missing."""
    rng = np.random.default_rng(seed)
    human = rng.random((UNITS, MODELS)) < ALPHA
    if judge == "good":
        f = np.where(rng.random(human.shape) < 0.95, human, ~human)
    elif judge == "under":  # reports half the failures
        f = human & (rng.random(human.shape) < 0.5)
    else:  # "over": adds failures
        f = human | (rng.random(human.shape) < 0.2)
    delay = rng.integers(0, MAX_DELAY + 1, human.shape)
    lost = rng.random(human.shape) < MISSING
    out: list[tuple[float, int, bytes]] = []
    for j in range(MODELS):
        name = f"m{j}"
        pre = audit_prefix("", "qa", name)
        for i in range(UNITS):
            ex = f"x{i}"
            base = {"suite": "qa", "model": name, "example_id": ex}
            out.append((float(i), 0, json.dumps(
                {"type": "judge", "event_id": f"j{i}-{j}", "ts": float(i),
                 "loss": float(f[i, j]), **base}).encode()))
            if not lost[i, j] and audit_uniform_prefixed(pre, ex) < RATE:
                t = float(i + delay[i, j])
                out.append((t, 1, json.dumps(
                    {"type": "label", "event_id": f"l{i}-{j}", "ts": t,
                     "loss": float(human[i, j]), **base}).encode()))
    return [x for _, _, x in sorted(out, key=lambda t: (t[0], t[1]))]


@pytest.mark.statistical
def test_hedged_null_boundary_both_sides() -> None:
    cfg = parse_config(CONFIG)
    claims = {"certified": 0, "violated": 0}
    n = 0
    for k, judge in enumerate(("good", "under", "over")):
        eng = Engine(cfg)
        kinds: dict[str, set[str]] = {}
        for line in null_stream(judge, seed=290 + k):
            for a in eng.process(line).alerts:
                kinds.setdefault(a["model"], set()).add(a["kind"])
                if a["kind"] in claims:
                    assert a["evidence"]["audit_policy"] == "hedged"
        view = eng.state_view()["suites"]["qa"]["models"]
        missing = sum(m["labels"]["missing"] for m in view.values())
        assert missing > 0.05 * sum(m["labels"]["audited"] for m in view.values())
        for m in view.values():  # each round paired (both sides advance in audit order only)
            assert m["hedged"]["labels"] == m["counts"]["rounds"] > 100
            assert m["hedged"]["audited_paired"] <= m["counts"]["rounds"] + m["labels"]["missing"]
        for kind in claims:
            claims[kind] += sum(kind in s for s in kinds.values())
        n += MODELS
    for kind, c in claims.items():
        assert clopper_pearson_lower(c, n, 0.99) <= DELTA, (kind, c, n)
