"""Validity of every method and side when the judge changes while labels are late (engine level).

The judge-drift scenario: at the null boundary (risk = alpha), the judge
agrees with the human 99% of the time and then 60% (or the reverse) from the middle of the
stream, and labels arrive up to 2000 units after their unit was judged. With synthetic blocks
formed at label time, b (judge after the change) and f (judge before it) came from different
judges and the PPI observation was biased: R-AutoEval+ reached a false ``violated`` (or
``certified``) in nearly every stream. With contemporaneous blocks (the block closes at the
audited unit's judge event and travels with it), E[b - f] = 0 whatever the judge does, and the
probability of a false claim must stay below delta for every method and both sides.

Each model of one suite is one independent replication (one stream); the whole engine runs:
dedupe, audit flags, the pending join, blocks, the CertificateGroup, epochs.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from monitor.config import parse_config
from monitor.engine import Engine
from tests.stats.binomial import clopper_pearson_lower

ALPHA = 0.1
DELTA = 0.1
REPS = 100
UNITS = 4000  # judged units per stream; a quarter audited: about 1000 rounds
MAX_DELAY = 2000  # label delay in units, uniform on [0, MAX_DELAY]
CONF = 0.999

CONFIG = f"""
[[suites]]
name = "drift"
models = ["*"]
audit_rate = 0.0
label_requests = false
max_pending = 1000000
max_orphans = 1000000
dedupe_max_ids = 2000000
max_round_units = 2000000
[[suites.certificates]]
name = "risk"
alpha = {ALPHA}
delta = {DELTA}
cs_grid = 100
"""


def stream(rng: np.random.Generator, agree_before: float, agree_after: float) -> list[bytes]:
    """Events of REPS models, merged in time order (time = unit index + label delay)."""
    events: list[tuple[int, int, bytes]] = []
    for r in range(REPS):
        human = (rng.random(UNITS) < ALPHA).astype(int)
        agree = np.where(np.arange(UNITS) < UNITS // 2, agree_before, agree_after)
        judge = np.where(rng.random(UNITS) < agree, human, 1 - human)
        audited = rng.random(UNITS) < 0.25
        delay = rng.integers(0, MAX_DELAY + 1, UNITS)
        for i in range(UNITS):
            a = "true" if audited[i] else "false"
            events.append((i, 0, (
                f'{{"type":"judge","event_id":"j{r}-{i}","suite":"drift","model":"m{r}",'
                f'"example_id":"{i}","loss":{judge[i]},"ts":{i},"audit":{a}}}').encode()))
            if audited[i]:
                t = i + int(delay[i])
                events.append((t, 1, (
                    f'{{"type":"label","event_id":"l{r}-{i}","suite":"drift","model":"m{r}",'
                    f'"example_id":"{i}","loss":{human[i]},"ts":{t}}}').encode()))
    events.sort(key=lambda e: (e[0], e[1]))
    return [e[2] for e in events]


@pytest.mark.statistical
@pytest.mark.parametrize(("before", "after", "seed"), [(0.99, 0.6, 11), (0.6, 0.99, 12)])
def test_no_false_claims_under_judge_drift_with_late_labels(
        before: float, after: float, seed: int) -> None:
    eng = Engine(parse_config(CONFIG))
    lines = stream(np.random.default_rng(seed), before, after)
    eng.process_batch(lines)
    alerts_by_model: dict[str, set[tuple[str, str]]] = {}
    view = json.loads(json.dumps(eng.state_view()))
    models = view["suites"]["drift"]["models"]
    assert len(models) == REPS
    rounds = [m["counts"]["rounds"] for m in models.values()]
    assert min(rounds) > 800  # the streams really ran, nothing expired
    claims = {(meth, side): 0 for meth in ("r_eval", "r_autoeval", "r_autoeval_plus")
              for side in ("certified", "violated")}
    for name, m in models.items():
        seen = alerts_by_model.setdefault(name, set())
        for meth, mv in m["certificates"]["risk"]["methods"].items():
            for side in ("certified", "violated"):
                ever = mv[f"{side}_at_round"] is not None or any(
                    h["status"] == side for h in m["certificates"]["risk"]["epoch"]["history"])
                if ever:
                    seen.add((meth, side))
                    claims[(meth, side)] += 1
    for (meth, side), k in claims.items():
        # at the null boundary every claim is false: P(claim) <= delta (per epoch; epochs
        # beyond the first are rare here, their extra chances are inside the slack of the bound)
        assert clopper_pearson_lower(k, REPS, CONF) <= DELTA, (meth, side, k)
