r"""State of selection-mode suites: PULSE over a benchmark, driven by events.

A suite with ``mode = "selection"`` (see :mod:`monitor.selection_settings`) holds one
:class:`~monitor.stats.pulse.bandit.SelectionBandit`. certmon asks the outside world to evaluate
models on batches of examples and reads the answers back as ordinary events:

- **request** (to the requests sink): ``{"kind": "evaluate", "suite", "model",
  "example_ids": [...], "request_id", "ts"}``. ``request_id`` is the first 32 hex characters of
  SHA-256 over ``[suite, "evaluate", model, seq]`` (``seq`` counts the suite's requests), so a
  replay or a restart re-emits the same ids. At most ``max_outstanding`` requests are in flight
  (one per model); the next ones are planned when a request's last answer arrives.
- **answer** (an event of the suite, type ``judge`` or ``label``): ``model``, ``example_id`` and
  ``loss``; the score is ``1 - loss``. It is used only if the pair belongs to a request in
  flight and was not answered yet; otherwise it is counted (``unrequested``,
  ``unknown_model``, ``unknown_example``) or dropped as a ``unit`` duplicate, never used.
- **start**: when the suite is started by :meth:`SelectionSuites.start` (the configured,
  non-glob suites) or first seen in an event, its first requests are planned. An event whose
  ``example_id`` is :data:`~monitor.selection_settings.KICKOFF_EXAMPLE_ID` only starts the suite (a
  worker sends one to start the loop over a transport where certmon cannot call ``start``).
  ``start`` on a started suite re-emits the requests still in flight (same ids).
- **certificate**: when the bandit certifies a best model, a ``best_model`` alert (certificate
  ``"best_model"``, round = evaluations received) carries the evidence; with
  ``stop_on_certificate`` no new requests follow.

Examples
--------
>>> from monitor.selection_settings import SelectionSettings, synthetic_benchmark
>>> from monitor.events import decode_event
>>> st = SelectionState("b", SelectionSettings(models=["x", "y"], examples=6, method="ucbe",
...                                            batch_size=3, max_outstanding=2))
>>> reqs = st.start(0.0)
>>> [(r["model"], len(r["example_ids"])) for r in reqs]
[('x', 3), ('y', 3)]
>>> def ans(model, ex, loss):
...     return decode_event(('{"type": "judge", "event_id": "%s%s", "suite": "b", "model": "%s",'
...         ' "example_id": "%s", "loss": %s, "ts": 1}' % (model, ex, model, ex, loss)).encode())
>>> alerts, out = [], []
>>> first = reqs[0]["example_ids"]
>>> [st.handle(ans("x", e, 0), alerts, out) for e in first]
[None, None, None]
>>> st.handle(ans("x", first[0], 0), alerts, out), st.counts["duplicates"]
('unit', 1)
>>> other = next(e for e in "012345" if e not in reqs[1]["example_ids"])
>>> st.handle(ans("y", other, 1), alerts, out)
>>> st.counts["unrequested"], len(out)  # x waits for the end of initialization
(1, 0)
>>> [st.handle(ans("y", e, 1), alerts, out) for e in reqs[1]["example_ids"]]
[None, None, None]
>>> sorted(r["model"] for r in out), st.view()["selection"]["leader"]
(['x', 'y'], 'x')
"""

from __future__ import annotations

import math
from hashlib import sha256
from typing import TYPE_CHECKING, Any

import numpy as np

from monitor.alerts import Alert, make_alert
from monitor.checkpoint import canonical_json
from monitor.events import Event
from monitor.selection_settings import KICKOFF_EXAMPLE_ID, SelectionSettings
from monitor.state.model import finite_or_none
from monitor.stats.pulse.bandit import SelectionBandit
from monitor.stats.pulse.lowrank import fit_logistic_factors

if TYPE_CHECKING:
    from monitor.config import CertmonConfig

__all__ = ["SelectionState", "SelectionSuites", "evaluation_request_id"]

COUNT_KEYS = ("answers", "duplicates", "unrequested", "unknown_model", "unknown_example",
              "kickoff", "requests", "completed_requests")
_HISTORY_L2 = 0.05
_HISTORY_SWEEPS = 8


def evaluation_request_id(suite: str, model: str, seq: int) -> str:
    """Deterministic id of the ``seq``-th evaluation request of a suite.

    Examples
    --------
    >>> len(evaluation_request_id("b", "x", 0)), evaluation_request_id("b", "x", 0)[:8]
    (32, 'a2b792d2')
    """
    doc = canonical_json([suite, "evaluate", model, int(seq)])
    return sha256(doc.encode("ascii")).hexdigest()[:32]


def example_factors(settings: SelectionSettings) -> np.ndarray | None:
    """Return example factors: fitted on the history, random without, None for UCB-E."""
    if settings.method == "ucbe":
        return None
    hist = settings.history_matrix
    n = len(settings.example_ids)
    if hist is None:
        gen = np.random.Generator(np.random.Philox(np.random.SeedSequence(settings.seed)))
        return 0.1 * gen.standard_normal((n, settings.rank))
    mask = ~np.isnan(hist)
    _, v, _ = fit_logistic_factors(np.nan_to_num(hist), mask, rank=settings.rank,
                                   l2=_HISTORY_L2, seed=settings.seed, sweeps=_HISTORY_SWEEPS)
    return v


class SelectionState:
    """One selection-mode suite (see the module docstring)."""

    def __init__(self, name: str, settings: SelectionSettings,
                 bandit: SelectionBandit | None = None) -> None:
        self.name = name
        self.settings = settings
        self.models = list(settings.models)
        self.example_ids = settings.example_ids
        self._mi = {m: i for i, m in enumerate(self.models)}
        self._ei = {e: j for j, e in enumerate(self.example_ids)}
        self.bandit = bandit or SelectionBandit(
            settings.to_selection_config(), len(self.models), len(self.example_ids),
            example_factors=example_factors(settings))
        self.started = False
        self.alerted = False
        self.watermark = -math.inf
        self.counts: dict[str, int] = dict.fromkeys(COUNT_KEYS, 0)
        # model index -> [request_id, example indices, unanswered indices, ts]
        self.outstanding: dict[int, list[Any]] = {}
        self.requested: list[set[int]] = [set() for _ in self.models]

    # ------------------------------------------------------------------ requests
    def _ts(self, ts: float | None) -> float:
        if ts is not None:
            return float(ts)
        return self.watermark if math.isfinite(self.watermark) else 0.0

    def _request(self, i: int, record: list[Any]) -> dict[str, Any]:
        return {"kind": "evaluate", "suite": self.name, "model": self.models[i],
                "example_ids": [self.example_ids[j] for j in record[1]],
                "request_id": record[0], "ts": record[3]}

    def _plan(self, ts: float, requests: list[dict[str, Any]]) -> None:
        if self.settings.stop_on_certificate and self.bandit.best_model is not None:
            return
        room = self.settings.max_outstanding - len(self.outstanding)
        if room < 1:
            return
        for i, ids in self.bandit.next_requests(room):
            rid = evaluation_request_id(self.name, self.models[i], self.counts["requests"])
            self.counts["requests"] += 1
            record = [rid, list(ids), set(ids), ts]
            self.outstanding[i] = record
            self.requested[i].update(ids)
            requests.append(self._request(i, record))

    def start(self, ts: float | None = None) -> list[dict[str, Any]]:
        """Start the suite (first requests), or re-emit the requests still in flight."""
        out = [self._request(i, r) for i, r in sorted(self.outstanding.items())]
        self.started = True
        self._plan(self._ts(ts), out)
        return out

    # ------------------------------------------------------------------ answers
    def handle(self, ev: Event, alerts: list[Alert], requests: list[dict[str, Any]]) -> str | None:
        """Apply one event of this suite; return ``"unit"`` for a dropped duplicate."""
        if not self.started:
            requests.extend(self.start(ev.ts))
        if ev.example_id == KICKOFF_EXAMPLE_ID:
            self.counts["kickoff"] += 1
            return None
        i = self._mi.get(ev.model)
        if i is None:
            self.counts["unknown_model"] += 1
            return None
        j = self._ei.get(ev.example_id)
        if j is None:
            self.counts["unknown_example"] += 1
            return None
        rec = self.outstanding.get(i)
        if rec is None or j not in rec[2]:
            if j in self.requested[i]:  # requested once per model: so already answered
                self.counts["duplicates"] += 1
                return "unit"
            self.counts["unrequested"] += 1
            return None
        if ev.ts > self.watermark:
            self.watermark = ev.ts
        rec[2].discard(j)
        self.bandit.update(i, j, 1.0 - ev.loss)
        self.counts["answers"] += 1
        if rec[2]:
            return None
        del self.outstanding[i]
        self.counts["completed_requests"] += 1
        best = self.bandit.best_model
        if best is not None and not self.alerted:
            self.alerted = True
            alerts.append(make_alert("best_model", self.name, self.models[best], "best_model",
                                     self.settings.method, self.bandit.calls_completed, ev.ts,
                                     self.evidence() or {}))
        self._plan(ev.ts, requests)
        return None

    # ------------------------------------------------------------------ views
    def _by_model(self, values: Any) -> dict[str, float | None]:
        return {m: finite_or_none(float(x)) for m, x in zip(self.models, values, strict=True)}

    def evidence(self) -> dict[str, Any] | None:
        """Evidence of the best-model certificate (model names), or None before it."""
        c = self.bandit.certificate
        if c is None:
            return None
        b = self.bandit
        c["model"] = self.models[int(c["model"])]
        c["runner_up"] = self.models[int(c["runner_up"])]
        c.update(method=self.settings.method, estimates=self._by_model(b.estimates),
                 lower_bounds=self._by_model(b.lower), upper_bounds=self._by_model(b.upper),
                 pulls={m: int(p) for m, p in zip(self.models, b.pulls, strict=True)},
                 budget_used=b.budget_used_ratio)
        return c

    def view(self) -> dict[str, Any]:
        """Return the suite's part of STATE.json: ``{"selection": {...}}``."""
        b = self.bandit
        est, lo, up, ranks = b.estimates, b.lower, b.upper, b.ranks
        pulls, evals = b.pulls, b.n_observed
        seen = bool(np.any(pulls > 0))
        leader = self.models[b.leader] if seen else None
        best = b.best_model
        models = {
            m: {"pulls": int(pulls[i]), "evaluations": int(evals[i]),
                "estimate": finite_or_none(float(est[i])), "lower": float(lo[i]),
                "upper": float(up[i]), "rank": int(ranks[i]) if seen else None,
                "leader": m == leader, "outstanding": i in self.outstanding}
            for i, m in enumerate(self.models)
        }  # fmt: skip
        cfg = b.config
        return {"selection": {
            "method": cfg.method, "models": models, "leader": leader,
            "best_model": None if best is None else self.models[best],
            "certificate": self.evidence(), "budget": cfg.budget
            if cfg.budget is not None else len(self.models) * len(self.example_ids),
            "budget_used": b.budget_used_ratio, "calls_issued": b.calls_issued,
            "calls_completed": b.calls_completed, "outstanding": len(self.outstanding),
            "refits": b.refits, "stage": b.stage, "delta": cfg.delta, "epsilon": cfg.epsilon,
            "n_examples": len(self.example_ids), "counts": dict(self.counts),
        }}  # fmt: skip

    # ------------------------------------------------------------------ snapshot
    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable snapshot (exact)."""
        return {
            "name": self.name, "bandit": self.bandit.to_state(), "started": self.started,
            "alerted": self.alerted,
            "watermark": None if self.watermark == -math.inf else self.watermark,
            "counts": dict(self.counts),
            "outstanding": [[i, r[0], r[1], sorted(r[2]), r[3]]
                            for i, r in sorted(self.outstanding.items())],
            "requested": [sorted(s) for s in self.requested],
        }  # fmt: skip

    @classmethod
    def from_dict(cls, settings: SelectionSettings, d: dict[str, Any]) -> SelectionState:
        """Inverse of :meth:`to_dict` (the bandit is restored, not refitted)."""
        st = cls(str(d["name"]), settings, SelectionBandit.from_state(d["bandit"]))
        if st.bandit.n_models != len(st.models) or st.bandit.n_examples != len(st.example_ids):
            raise ValueError(f"selection state of {st.name!r} does not match its benchmark")
        st.started, st.alerted = bool(d["started"]), bool(d["alerted"])
        st.watermark = -math.inf if d["watermark"] is None else float(d["watermark"])
        st.counts = {k: int(d["counts"][k]) for k in COUNT_KEYS}
        st.outstanding = {int(i): [str(rid), [int(x) for x in ex], {int(x) for x in left},
                                   float(ts)] for i, rid, ex, left, ts in d["outstanding"]}
        st.requested = [{int(x) for x in s} for s in d["requested"]]
        return st


class SelectionSuites:
    """The selection-mode suites of one engine, routed like every suite (first match wins).

    Parameters
    ----------
    config : CertmonConfig
        The whole configuration (``[[suites]]`` entries with ``mode = "selection"``).
    """

    def __init__(self, config: CertmonConfig) -> None:
        self._entries = list(config.suites)
        self.states: dict[str, SelectionState] = {}

    def settings_for(self, suite: str) -> SelectionSettings | None:
        """Return the selection settings routing ``suite`` (None: not a selection suite)."""
        for sc in self._entries:
            if sc.matches_suite(suite):
                return sc.selection if sc.mode == "selection" else None
        return None

    def owns(self, suite: str) -> bool:
        """Return True when ``suite`` is (or would be) a selection-mode suite."""
        return suite in self.states or self.settings_for(suite) is not None

    def _state(self, suite: str) -> SelectionState:
        st = self.states.get(suite)
        if st is None:
            settings = self.settings_for(suite)
            if settings is None:
                raise KeyError(f"suite {suite!r} is not in selection mode")
            st = self.states[suite] = SelectionState(suite, settings)
        return st

    def handle(self, ev: Event, alerts: list[Alert], requests: list[dict[str, Any]]) -> str | None:
        """Apply one event of a selection suite (see :meth:`SelectionState.handle`)."""
        return self._state(ev.suite).handle(ev, alerts, requests)

    def start(self, ts: float | None = None) -> list[dict[str, Any]]:
        """Start every configured selection suite with a plain (non-glob) name."""
        out: list[dict[str, Any]] = []
        for sc in self._entries:
            glob = any(ch in sc.name for ch in "*?[")
            if sc.mode == "selection" and not glob and self.settings_for(sc.name) is not None:
                out.extend(self._state(sc.name).start(ts))
        return out

    def views(self) -> dict[str, Any]:
        """Suite views by name."""
        return {name: st.view() for name, st in self.states.items()}

    def to_list(self) -> list[dict[str, Any]]:
        """Snapshot of every selection suite."""
        return [st.to_dict() for st in self.states.values()]

    def restore(self, items: list[dict[str, Any]]) -> None:
        """Load :meth:`to_list` output (raises ValueError for a suite no longer routed here)."""
        for d in items:
            settings = self.settings_for(str(d["name"]))
            if settings is None:
                raise ValueError(f"selection suite {d['name']!r} is not routed by this config")
            self.states[str(d["name"])] = SelectionState.from_dict(settings, d)
