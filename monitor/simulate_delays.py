"""Simulated streams whose labels come back late, out of order or never.

Delays and missingness may depend on the label. Production labels do not come back in audit order:
hard cases take longer, some are escalated, some are never labelled. :func:`delayed_stream` makes
one suite's judge and label events under such a mechanism, for the validity tests and
``benchmarks/label_delay.py``: each unit's human loss is Bernoulli(``risk``), its judge agrees with
it with probability ``judge_agreement``, it is audited with probability ``1 / (1 +
unaudited_per_audit)`` (flagged upstream, independent of the losses), and an audited unit's label
arrives after an exponential delay (in units of traffic) whose mean depends on the label, or never
(with a probability that may depend on the label). :func:`shadow_stream` makes the two-arm
version for comparisons: shadow traffic, a baseline and a candidate answer every example, both
answers of an example audited together (the hash coin of a paired comparison), each label late
or missing by its own value.

Examples
--------
>>> import numpy as np
>>> ev = delayed_stream("s", np.random.default_rng(0), units=60, risk=0.5,
...                     delay_pass=1.0, delay_fail=50.0)
>>> ts = [t for t, _ in ev]
>>> ts == sorted(ts), sum(b'"label"' in line for _, line in ev) > 0
(True, True)
"""

from __future__ import annotations

import json

import numpy as np

from monitor.audit import audit_uniform
from monitor.state.comparisons import PAIRED_AUDIT_TAG

__all__ = ["delayed_stream", "shadow_stream"]


def delayed_stream(suite: str, rng: np.random.Generator, *, units: int, risk: float,
                   judge_agreement: float = 0.9, unaudited_per_audit: float = 5.0,
                   delay_pass: float = 20.0, delay_fail: float = 20.0,
                   missing_pass: float = 0.0, missing_fail: float = 0.0, model: str = "m",
                   start_ts: float = 1_000_000.0) -> list[tuple[float, bytes]]:
    """Return one suite's events as ``(ts, JSONL line)``, sorted by ``ts``.

    Unit ``i``'s judge event has ``ts = start_ts + i``; an audited unit's label has ``ts`` one
    exponential delay later (mean ``delay_fail`` for a failure, ``delay_pass`` for a pass),
    or never comes (probability ``missing_fail`` / ``missing_pass``).
    """
    human = rng.random(units) < risk
    agree = rng.random(units) < judge_agreement
    judge = np.where(agree, human, ~human)
    audited = rng.random(units) < 1.0 / (1.0 + unaudited_per_audit)
    delay = rng.exponential(1.0, units) * np.where(human, delay_fail, delay_pass)
    missing = rng.random(units) < np.where(human, missing_fail, missing_pass)
    out: list[tuple[float, int, bytes]] = []
    for i in range(units):
        t = start_ts + i
        out.append((t, 0, json.dumps({
            "type": "judge", "event_id": f"j{i}", "suite": suite, "model": model,
            "example_id": f"x{i}", "loss": float(judge[i]), "ts": t,
            "audit": bool(audited[i])}).encode()))
        if audited[i] and not missing[i]:
            tl = t + float(delay[i])
            out.append((tl, 1, json.dumps({
                "type": "label", "event_id": f"l{i}", "suite": suite, "model": model,
                "example_id": f"x{i}", "loss": float(human[i]), "ts": tl}).encode()))
    out.sort(key=lambda e: (e[0], e[1]))
    return [(t, line) for t, _, line in out]


def shadow_stream(suite: str, rng: np.random.Generator, *, examples: int, risk_baseline: float,
                  risk_candidate: float, baseline: str = "m-v1", candidate: str = "m-v2",
                  coupling: float = 0.5, judge_agreement: float = 0.9,
                  audit_rate: float = 0.25, salt: str = "", delay_pass: float = 20.0,
                  delay_fail: float = 20.0, missing_pass: float = 0.0, missing_fail: float = 0.0,
                  start_ts: float = 1_000_000.0, id_prefix: str = "") -> list[tuple[float, bytes]]:
    """Shadow traffic of two versions, as ``(ts, JSONL line)`` sorted by ``ts``.

    Example ``i`` is answered by the baseline and the candidate (judge events at ``start_ts +
    i``). Their human losses are Bernoulli(``risk_baseline``) and Bernoulli(``risk_candidate``),
    drawn from one uniform with probability ``coupling`` (the versions fail on the same hard
    examples), else independently; each judge agrees with its human loss with probability
    ``judge_agreement``. No ``audit`` flag: the engine's hash decides, and an example is
    audited iff ``audit_uniform(salt, suite, PAIRED_AUDIT_TAG, example_id) < audit_rate``
    (the coin of a paired comparison with this ``audit_rate`` and ``audit_salt``); only the
    audited answers get labels, each after an exponential delay of mean ``delay_fail`` /
    ``delay_pass`` or never (``missing_fail`` / ``missing_pass``), by its own label. Ids
    (``example_id`` ``x<i>``, event ids) start with ``id_prefix`` (to chain streams).

    Examples
    --------
    >>> ev = shadow_stream("s", np.random.default_rng(0), examples=40, risk_baseline=0.1,
    ...                    risk_candidate=0.2)
    >>> sum(b'"judge"' in line for _, line in ev), sum(b'"label"' in line for _, line in ev)
    (80, 20)
    """
    u = rng.random(examples)
    ub = np.where(rng.random(examples) < coupling, u, rng.random(examples))
    human = np.stack([ub < risk_baseline, u < risk_candidate])  # [baseline, candidate]
    agree = rng.random((2, examples)) < judge_agreement
    judge = np.where(agree, human, ~human)
    delay = rng.exponential(1.0, (2, examples)) * np.where(human, delay_fail, delay_pass)
    missing = rng.random((2, examples)) < np.where(human, missing_fail, missing_pass)
    out: list[tuple[float, int, bytes]] = []
    for i in range(examples):
        t = start_ts + i
        ex = f"{id_prefix}x{i}"
        audited = audit_uniform(salt, suite, PAIRED_AUDIT_TAG, ex) < audit_rate
        for a, model in enumerate((baseline, candidate)):
            out.append((t, 0, json.dumps({
                "type": "judge", "event_id": f"{id_prefix}j{a}-{i}", "suite": suite,
                "model": model, "example_id": ex, "loss": float(judge[a, i]), "ts": t}).encode()))
            if audited and not missing[a, i]:
                tl = t + float(delay[a, i])
                out.append((tl, 1, json.dumps({
                    "type": "label", "event_id": f"{id_prefix}l{a}-{i}", "suite": suite,
                    "model": model, "example_id": ex, "loss": float(human[a, i]),
                    "ts": tl}).encode()))
    out.sort(key=lambda e: (e[0], e[1]))
    return [(t, line) for t, _, line in out]
