"""Synthetic judge/label event streams (pure: all randomness from a ``numpy.random.Generator``).

Every model answers every example. The human loss of a unit is Bernoulli(risk); the judge
agrees with the human with probability ``judge_accuracy`` (gamma) and flips the loss
otherwise, as in Example 1 of the R-AutoEval+ paper. A fraction ``audit_rate`` of units is
audited (by an ``audit`` flag on the judge event, or left to certmon's salted hash); their
labels arrive after a random delay (some before the judge event), plus a few unsolicited
labels (complaints) on unaudited units. An optional drift changes the risks from a given
example on. Optional strata (:class:`SimStratum`) give each example a ``stratum`` with its own
risk and judge noise, and ``label_all`` emits a label for every unit (a fully labelled data set
replayed: certmon uses the labels of the units it audits and counts the rest as unsolicited),
which is what steered per-stratum auditing (``[suites.strata]``) needs in ``hash`` mode.

Examples
--------
>>> import numpy as np
>>> spec = SimulationSpec(models=(SimModel("m", risk=0.5, judge_accuracy=1.0),), examples=20,
...                       audit_rate=1.0, unsolicited_rate=0.0)
>>> events = list(generate(spec, np.random.default_rng(0)))
>>> len(events), sorted({e["type"] for e in events})
(40, ['judge', 'label'])
>>> lines = list(iter_jsonl(spec, np.random.default_rng(0)))
>>> import json; json.loads(lines[0]) == events[0]
True
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np

from monitor.audit import audit_uniform

__all__ = ["DEFAULT_MODELS", "SimModel", "SimStratum", "SimulationSpec", "generate", "iter_jsonl"]


@dataclass(frozen=True)
class SimModel:
    """One simulated model: its true risk and its judge's accuracy (gamma)."""

    name: str
    risk: float
    judge_accuracy: float = 0.9
    drift_risk: float | None = None

    @classmethod
    def parse(cls, text: str) -> SimModel:
        """Parse ``NAME:RISK[:JUDGE_ACCURACY[:DRIFT_RISK]]`` (judge accuracy defaults to 0.9).

        Examples
        --------
        >>> SimModel.parse("m:0.1:0.8")
        SimModel(name='m', risk=0.1, judge_accuracy=0.8, drift_risk=None)
        """
        parts = text.split(":")
        if len(parts) not in (2, 3, 4) or not parts[0]:
            raise ValueError("expected NAME:RISK[:JUDGE_ACCURACY[:DRIFT_RISK]]")
        try:
            nums = [float(p) for p in parts[1:]]
        except ValueError:
            raise ValueError("expected NAME:RISK[:JUDGE_ACCURACY[:DRIFT_RISK]] (numbers)") from None
        return cls(parts[0], nums[0], nums[1] if len(nums) > 1 else 0.9,
                   nums[2] if len(nums) > 2 else None)

    def __post_init__(self) -> None:
        if not 0.0 <= self.risk <= 1.0 or not 0.0 <= self.judge_accuracy <= 1.0:
            raise ValueError(f"model {self.name!r}: risk and judge_accuracy must be in [0, 1]")
        if self.drift_risk is not None and not 0.0 <= self.drift_risk <= 1.0:
            raise ValueError(f"model {self.name!r}: drift_risk must be in [0, 1]")


@dataclass(frozen=True)
class SimStratum:
    """One simulated stratum: traffic share, human risk and judge noise (flip probability).

    With strata, each example draws its stratum by share, and the stratum's ``risk`` and
    ``1 - judge_noise`` replace every model's risk and judge accuracy for that example.
    """

    name: str
    share: float
    risk: float
    judge_noise: float = 0.1

    @classmethod
    def parse(cls, text: str) -> SimStratum:
        """Parse ``NAME:SHARE:RISK[:JUDGE_NOISE]`` (judge noise defaults to 0.1).

        Examples
        --------
        >>> SimStratum.parse("hard:0.1:0.5:0.3")
        SimStratum(name='hard', share=0.1, risk=0.5, judge_noise=0.3)
        """
        parts = text.split(":")
        if len(parts) not in (3, 4) or not parts[0]:
            raise ValueError("expected NAME:SHARE:RISK[:JUDGE_NOISE]")
        try:
            nums = [float(p) for p in parts[1:]]
        except ValueError:
            raise ValueError("expected NAME:SHARE:RISK[:JUDGE_NOISE] (numbers)") from None
        return cls(parts[0], nums[0], nums[1], nums[2] if len(nums) > 2 else 0.1)

    def __post_init__(self) -> None:
        if not self.share > 0.0:
            raise ValueError(f"stratum {self.name!r}: share must be > 0")
        if not 0.0 <= self.risk <= 1.0 or not 0.0 <= self.judge_noise <= 1.0:
            raise ValueError(f"stratum {self.name!r}: risk and judge_noise must be in [0, 1]")


DEFAULT_MODELS: tuple[SimModel, ...] = (
    SimModel("good", risk=0.04, judge_accuracy=0.95),
    SimModel("bad", risk=0.22, judge_accuracy=0.9),
    SimModel("borderline", risk=0.08, judge_accuracy=0.8),
)


@dataclass(frozen=True)
class SimulationSpec:
    """What to simulate (see the module docstring); delays are counted in events."""

    suite: str = "demo"
    models: tuple[SimModel, ...] = field(default=DEFAULT_MODELS)
    examples: int = 10_000
    audit_rate: float = 0.1
    audit_mode: Literal["flag", "hash"] = "flag"
    audit_salt: str = ""
    label_delay_mean: float = 30.0
    label_first_fraction: float = 0.05
    unsolicited_rate: float = 0.001
    drift_at: int | None = None
    start_ts: float = 1_700_000_000.0
    seconds_per_example: float = 0.01
    ts_format: Literal["epoch", "rfc3339"] = "epoch"
    max_events: int | None = None
    chunk: int = 2048
    strata: tuple[SimStratum, ...] = ()
    label_all: bool = False

    def __post_init__(self) -> None:
        if not self.models:
            raise ValueError("at least one model is needed")
        if not 0.0 <= self.audit_rate <= 1.0:
            raise ValueError("audit_rate must be in [0, 1]")
        if self.examples < 0 or self.chunk < 1:
            raise ValueError("examples must be >= 0 and chunk >= 1")
        if len({st.name for st in self.strata}) != len(self.strata):
            raise ValueError("stratum names must be unique")


def generate(spec: SimulationSpec, rng: np.random.Generator) -> Iterator[dict[str, Any]]:
    """Yield events (dicts in the certmon event schema) in stream order.

    Parameters
    ----------
    spec : SimulationSpec
    rng : numpy.random.Generator
        The only source of randomness: the same seed gives the same stream.

    Yields
    ------
    dict
        One event.
    """
    n_models = len(spec.models)
    risk0 = np.array([m.risk for m in spec.models])
    risk1 = np.array([m.risk if m.drift_risk is None else m.drift_risk for m in spec.models])
    gamma = np.array([m.judge_accuracy for m in spec.models])
    st_share = np.array([st.share for st in spec.strata])
    st_risk = np.array([st.risk for st in spec.strata])
    st_gamma = np.array([1.0 - st.judge_noise for st in spec.strata])
    heap: list[tuple[float, int, dict[str, Any]]] = []
    seq = 0
    emitted = 0
    for start in range(0, spec.examples, spec.chunk):
        stop = min(start + spec.chunk, spec.examples)
        ex = np.arange(start, stop)
        n = len(ex)
        drifted = np.zeros(n, dtype=bool) if spec.drift_at is None else ex >= spec.drift_at
        risk = np.where(drifted[:, None], risk1[None, :], risk0[None, :])
        acc = gamma[None, :]
        sk = np.zeros(n, dtype=np.intp)
        if spec.strata:
            sk = rng.choice(len(spec.strata), size=n, p=st_share / st_share.sum())
            risk = np.repeat(st_risk[sk][:, None], n_models, axis=1)
            acc = np.repeat(st_gamma[sk][:, None], n_models, axis=1)
        human = rng.random((n, n_models)) < risk
        flip = rng.random((n, n_models)) >= acc
        judge = human ^ flip
        audit_draw = rng.random((n, n_models))
        delay = rng.exponential(spec.label_delay_mean, (n, n_models)) + 1.0
        first = rng.random((n, n_models)) < spec.label_first_fraction
        complaint = rng.random((n, n_models)) < spec.unsolicited_rate
        for i in range(n):
            e = int(ex[i])
            for j, model in enumerate(spec.models):
                pos = float(e * n_models + j)
                example_id = f"ex-{e}"
                if spec.audit_mode == "flag":
                    audited = bool(audit_draw[i, j] < spec.audit_rate)
                else:
                    u = audit_uniform(spec.audit_salt, spec.suite, model.name, example_id)
                    audited = u < spec.audit_rate
                jev: dict[str, Any] = {
                    "type": "judge",
                    "event_id": f"j-{e}-{j}",
                    "suite": spec.suite,
                    "model": model.name,
                    "example_id": example_id,
                    "loss": float(judge[i, j]),
                }
                if spec.audit_mode == "flag":
                    jev["audit"] = audited
                if spec.strata:
                    jev["stratum"] = spec.strata[int(sk[i])].name
                heapq.heappush(heap, (pos, seq, jev))
                seq += 1
                if audited or complaint[i, j] or spec.label_all:
                    lpos = pos - 0.5 if first[i, j] else pos + float(delay[i, j])
                    lev = {
                        "type": "label",
                        "event_id": f"l-{e}-{j}",
                        "suite": spec.suite,
                        "model": model.name,
                        "example_id": example_id,
                        "loss": float(human[i, j]),
                    }
                    heapq.heappush(heap, (lpos, seq, lev))
                    seq += 1
        horizon = float(stop * n_models)
        while heap and heap[0][0] < horizon:
            pos, _, ev = heapq.heappop(heap)
            yield _stamp(ev, pos, spec)
            emitted += 1
            if spec.max_events is not None and emitted >= spec.max_events:
                return
    while heap:
        pos, _, ev = heapq.heappop(heap)
        yield _stamp(ev, pos, spec)
        emitted += 1
        if spec.max_events is not None and emitted >= spec.max_events:
            return


def _stamp(ev: dict[str, Any], pos: float, spec: SimulationSpec) -> dict[str, Any]:
    ts = round(spec.start_ts + math.floor(pos) / len(spec.models) * spec.seconds_per_example, 3)
    if spec.ts_format == "rfc3339":
        ev["ts"] = datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace(
            "+00:00", "Z"
        )
    else:
        ev["ts"] = ts
    return ev


def iter_jsonl(spec: SimulationSpec, rng: np.random.Generator) -> Iterator[bytes]:
    """Yield the events of :func:`generate` as compact JSON lines (bytes, with newline)."""
    for ev in generate(spec, rng):
        yield (json.dumps(ev, separators=(",", ":")) + "\n").encode()
