"""Stream shapes for the whole-process replay benchmark, written with numpy.

A :class:`Shape` describes one synthetic stream: ``suites`` suites interleaved (unit ``i`` is
in suite ``i % suites``), ``models`` models per suite, judge events of units whose human loss
is Bernoulli(``risk``) (or Beta with mean ``risk`` when ``losses == "beta"``), a judge that
agrees with the human with probability ``judge_accuracy`` (binary) or adds Gaussian noise
(Beta), one audited unit per ``1 + unaudited_per_label`` units (flagged upstream with
``"audit": true/false``, or left to certmon's salted hash at the same rate), whose label comes
after an exponential delay (in units of traffic) of mean ``delay_pass`` / ``delay_fail``
depending on the label, or never (probability ``missing_fail`` for a failure), like
:func:`monitor.simulate_delays.delayed_stream`. Events are sorted by position and stamped one
second apart (``seconds_per_event``): every ``ts`` is distinct, as in production traffic.

``audited_only`` writes judge events that are all flagged for audit and no labels (a
labelling outage, for the memory mode).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from monitor.audit import audit_prefix, audit_uniform_prefixed

START_TS = 1_700_000_000


@dataclass(frozen=True)
class Shape:
    name: str
    events: int
    suites: int = 20
    models: int = 1
    risk: float = 0.095
    judge_accuracy: float = 0.9
    unaudited_per_label: float = 10.0
    audit: Literal["flag", "hash"] = "flag"
    losses: Literal["binary", "beta"] = "binary"
    delay_pass: float = 30.0
    delay_fail: float = 30.0
    missing_fail: float = 0.0
    audited_only: bool = False
    seconds_per_event: float = 1.0
    seed: int = 0

    @property
    def audit_rate(self) -> float:
        return 1.0 / (1.0 + self.unaudited_per_label)

    def key(self) -> str:
        """File name that changes with every parameter (the cache key)."""
        p: list[object] = [self.events, self.suites, self.models, self.risk, self.judge_accuracy,
             self.unaudited_per_label, self.audit, self.losses, self.delay_pass,
             self.delay_fail, self.missing_fail, int(self.audited_only), self.seed]
        if self.seconds_per_event != 1.0:
            p.append(f"dt{self.seconds_per_event}")
        return "shape_" + "_".join(str(x) for x in p) + ".jsonl"


def _losses(shape: Shape, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    if shape.losses == "binary":
        human = (rng.random(n) < shape.risk).astype(np.float64)
        flip = rng.random(n) >= shape.judge_accuracy
        return human, np.where(flip, 1.0 - human, human)
    conc = 2.0  # Beta(a, b) with a + b = 2: wide, mean `risk`
    human = rng.beta(shape.risk * conc, (1.0 - shape.risk) * conc, n)
    judge = np.clip(human + rng.normal(0.0, 0.1, n), 0.0, 1.0)
    return np.round(human, 4), np.round(judge, 4)


def _fmt(x: np.ndarray) -> list[str]:
    return [repr(v) for v in x.tolist()]


def write_stream(shape: Shape, path: Path) -> int:
    """Write ``shape``'s events to ``path`` (JSON lines); return the number of events."""
    rng = np.random.default_rng(shape.seed)
    per_unit = 1.0 if shape.audited_only else 1.0 + shape.audit_rate * (1.0 - shape.missing_fail
                                                                        * shape.risk)
    units = max(1, round(shape.events / per_unit))
    idx = np.arange(units)
    suite = idx % shape.suites
    model = (idx // shape.suites) % shape.models
    human, judge = _losses(shape, rng, units)
    if shape.audited_only:
        audited = np.ones(units, dtype=bool)
    elif shape.audit == "flag":
        audited = rng.random(units) < shape.audit_rate
    else:  # certmon's own decision: the same hash, so every label has its audited unit
        prefixes = {(s, m): audit_prefix("", f"s{s}", f"m{m}")
                    for s in range(shape.suites) for m in range(shape.models)}
        audited = np.fromiter(
            (audit_uniform_prefixed(prefixes[s, m], f"x{i}") < shape.audit_rate
             for i, s, m in zip(idx.tolist(), suite.tolist(), model.tolist(), strict=True)),
            dtype=bool, count=units)
    failed = human > shape.risk if shape.losses == "beta" else human > 0.5
    delay = rng.exponential(1.0, units) * np.where(failed, shape.delay_fail, shape.delay_pass)
    missing = rng.random(units) < np.where(failed, shape.missing_fail, 0.0)
    labelled = audited & ~missing & (not shape.audited_only)
    lab = np.flatnonzero(labelled)
    pos = np.concatenate([idx.astype(np.float64), idx[lab] + 0.5 + delay[lab]])
    kind = np.concatenate([np.zeros(units, np.int8), np.ones(len(lab), np.int8)])
    unit = np.concatenate([idx, lab])
    order = np.lexsort((kind, pos))
    unit, kind = unit[order], kind[order]
    ts = (START_TS + np.arange(len(order)) * shape.seconds_per_event).tolist()
    if shape.seconds_per_event == 1.0:
        ts = [int(t) for t in ts]
    loss = np.where(kind == 1, human[unit], judge[unit])
    flag = {True: ',"audit":true}\n', False: ',"audit":false}\n'}
    lines = []
    for u, k, s, m, lo, t, a in zip(unit.tolist(), kind.tolist(), suite[unit].tolist(),
                                   model[unit].tolist(), _fmt(loss), ts,
                                   audited[unit].tolist(), strict=True):
        head = f'{{"type":"{"label" if k else "judge"}","event_id":"{"l" if k else "j"}{u}",' \
               f'"suite":"s{s}","model":"m{m}","example_id":"x{u}","loss":{lo},"ts":{t}'
        if k or shape.audit == "hash":
            lines.append(head + "}\n")
        else:
            lines.append(head + flag[a])
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(lines))
    tmp.rename(path)
    return len(lines)


def cached(shape: Shape, out: Path) -> Path:
    """Return the cached file of ``shape`` under ``out``, writing it first if missing.

    The file is written by a child process: a child's peak RSS (``ru_maxrss``) counts the
    pages it shares with its parent between fork and exec, so a parent that has just built a
    large stream would inflate the peak RSS measured for the next replay.
    """
    path = out / shape.key()
    if not path.exists():
        out.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, __file__, json.dumps(asdict(shape)), str(path)],
                       check=True)
        print(f"generated {path.name} in {time.perf_counter() - t0:.1f}s", flush=True)
    return path


if __name__ == "__main__":
    write_stream(Shape(**json.loads(sys.argv[1])), Path(sys.argv[2]))
