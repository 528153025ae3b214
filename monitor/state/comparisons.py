"""The comparisons of one suite (``[[suites.comparisons]]``): rounds in, verdicts and alerts out.

:class:`SuiteComparisons` is fed by :class:`~monitor.state.suite.SuiteState` at two points:

- :meth:`SuiteComparisons.judged`, for every judge event of a model of a *paired* comparison
  (shadow traffic): an audited example gets its place in the comparison's *pair order* when
  its first audited answer is judged (the audit coin is one per example, see
  :data:`PAIRED_AUDIT_TAG`);
- :meth:`SuiteComparisons.applied`, whenever rounds of a model of a comparison are applied in
  its audit order (:mod:`monitor.state.audit_order`), a missing label included.

Paired design: the pair of an example is fed to its
:class:`~monitor.stats.comparison.PairedComparison` strictly in pair order, once both arms'
rounds are applied; a pair with an arm missing for good (its label timed out or was evicted,
the arm was not audited, or its judge event did not come within ``pending_ttl_seconds`` of
event time or ``max_pending`` pairs) is *missing*: nothing is fed and it is counted. Unpaired
design: each arm's applied rounds go, in audit order, to the
:class:`~monitor.stats.comparison.UnpairedComparison` (a missing label feeds nothing and is
counted). A verdict that changes emits a ``non_inferior`` or ``inferior`` alert; a change
alarm (the difference rose above the margin) of a candidate not shown ``inferior`` starts a new
epoch (fresh tests: its earlier evidence is stale), which must earn its verdict again.

Examples
--------
>>> from monitor.config import CertificateConfig, SuiteConfig
>>> from monitor.config.comparisons import ComparisonConfig
>>> cert = CertificateConfig(name="r", alpha=0.1, delta=0.05)
>>> cfg = SuiteConfig(name="qa", models=["a", "b"], certificates=[cert], comparisons=[
...     ComparisonConfig(name="b-vs-a", baseline="a", candidate="b")])
>>> cmp, alerts = SuiteComparisons("qa", cfg), []
>>> cmp.audit_tag("a"), cmp.audit_tag("zz")
('|paired', None)
>>> for i in range(300):
...     loss = float(i % 10 == 0)
...     for m in ("a", "b"):
...         cmp.judged(m, f"x{i}", i, float(i), float(i), alerts)
...         cmp.applied(m, i, [[loss, loss, 0.0, 0, None, None]], float(i), float(i), alerts)
>>> [(a["kind"], a["model"], a["certificate"]) for a in alerts]
[('non_inferior', 'b', 'b-vs-a')]
>>> v = cmp.view()["b-vs-a"]["candidates"]["b"]
>>> v["status"], v["rounds"], v["labels"], v["missing_pairs"]
('non_inferior', 300, 600, 0)
>>> SuiteComparisons.from_dict("qa", cfg, cmp.to_dict()).to_dict() == cmp.to_dict()
True

Notes
-----
Validity (``docs/guarantees.md``, "Comparisons"): the pair order is fixed when an example's
first audited answer is judged and the unpaired arms use audit order, so label delays (even
delays that depend on the label) change when a round is fed, never which rounds are fed nor
their order; the bets and reliance of a round depend on earlier rounds only. A missing pair or
unit is skipped: this assumes that whether a label goes missing for good is independent of
the losses of its example (given the past); judge events that never come and arms that were
not audited depend on no label.
"""

from __future__ import annotations

import math
from typing import Any

from monitor.alerts import Alert, make_alert
from monitor.config import SuiteConfig
from monitor.state.restore_checks import RefusedState
from monitor.stats.comparison import CandidateGroup, PairedComparison

__all__ = ["PAIRED_AUDIT_TAG", "SuiteComparisons"]

PAIRED_AUDIT_TAG = "|paired"
"""What replaces the model name in the audit hash of every model of a paired comparison:
``audit_uniform(salt, suite, "|paired", example_id)``, one coin per example for all of them."""

_KIND = "certmon.SuiteComparisons"
# a pair: [pair position, event time of its first audited answer, candidate arm, baseline arm];
# an arm is None (not judged yet), True (audited, round not applied yet), False (missing) or
# [human, judge, block mean or None]
Pair = list[Any]


def _arm_value(entry: list[Any]) -> list[Any] | bool:
    """Return an audit-order entry ``[human, judge, block_sum, block_count, ...]`` as an arm."""
    if entry[0] is None:
        return False
    return [float(entry[0]), float(entry[1]), entry[2] / entry[3] if entry[3] else None]


class SuiteComparisons:
    """Every comparison of one suite, fed with rounds in audit order (module docstring).

    Parameters
    ----------
    suite : str
        The suite's name (alerts carry it).
    config : SuiteConfig
        Its ``comparisons``, ``pending_ttl_seconds`` and ``max_pending``.

    Notes
    -----
    Guarantee: each candidate's verdicts are those of its
    :class:`~monitor.stats.comparison.CandidateGroup` member, false with probability at most
    ``delta / number of candidates`` at any time, under the assumptions of the module's Notes.
    """

    def __init__(self, suite: str, config: SuiteConfig) -> None:
        self._suite = suite
        self.configs = {c.name: c for c in config.comparisons}
        self._ttl = config.pending_ttl_seconds
        self._max_pairs = config.max_pending
        self.groups = {c.name: CandidateGroup(c.design, c.candidate_list, c.margin, c.delta)
                       for c in config.comparisons}
        # model -> [(comparison, candidate, arm 0 candidate / 1 baseline)]
        self._roles: dict[str, list[tuple[str, str, int]]] = {}
        for c in config.comparisons:
            for cand in c.candidate_list:
                self._roles.setdefault(cand, []).append((c.name, cand, 0))
                self._roles.setdefault(c.baseline, []).append((c.name, cand, 1))
        self.paired_models = frozenset(
            m for c in config.comparisons if c.design == "paired"
            for m in [c.baseline, *c.candidate_list])
        self.models = frozenset(self._roles)
        keys = [(c.name, cand) for c in config.comparisons for cand in c.candidate_list]
        # per paired (comparison, candidate): pairs by example, example by pair position
        self._pairs: dict[tuple[str, str], dict[str, Pair]] = {
            k: {} for k in keys if self.configs[k[0]].design == "paired"}
        self._by_pos: dict[tuple[str, str], dict[int, str]] = {k: {} for k in self._pairs}
        self._next = dict.fromkeys(self._pairs, 0)  # next pair position
        self._fed = dict.fromkeys(self._pairs, 0)  # pair positions fed or skipped
        self._missing = dict.fromkeys(keys, 0)  # pairs (units, unpaired) skipped as missing
        self._examples: dict[str, dict[int, str]] = {m: {} for m in self.paired_models}

    def __bool__(self) -> bool:
        return bool(self.configs)

    def audit_tag(self, model: str) -> str | None:
        """:data:`PAIRED_AUDIT_TAG` for a model of a paired comparison, else None."""
        return PAIRED_AUDIT_TAG if model in self.paired_models else None

    # ------------------------------------------------------------------ feeding
    def judged(self, model: str, example_id: str, position: int | None, ts: float,
               now: float, alerts: list[Alert]) -> None:
        """Place a judge event of ``model`` (paired designs); ``position``: audit position or None.

        ``ts`` is the event's time, ``now`` the suite's event time (expiry of judge events
        that never came).
        """
        if model not in self.paired_models:
            return
        if position is not None:
            self._examples[model][position] = example_id
        for name, cand, arm in self._roles[model]:
            key = (name, cand)
            pairs = self._pairs.get(key)
            if pairs is None:
                continue
            p = pairs.get(example_id)
            if position is not None:
                if p is None:
                    pos = self._next[key]
                    self._next[key] = pos + 1
                    p = pairs[example_id] = [pos, ts, None, None]
                    self._by_pos[key][pos] = example_id
                if p[2 + arm] is None:
                    p[2 + arm] = True
            elif p is not None and p[2 + arm] is None:
                p[2 + arm] = False  # this answer was not audited: the pair is missing
            self._drain(key, now, ts, alerts)

    def applied(self, model: str, first: int, taken: list[list[Any]], ts: float, now: float,
                alerts: list[Alert]) -> None:
        """Feed the rounds of ``model`` just applied in audit order, from position ``first`` on.

        ``taken`` holds :class:`~monitor.state.audit_order.AuditOrder` entries (``human`` None:
        missing for good).
        """
        roles = self._roles.get(model)
        if not roles:
            return
        if model in self.paired_models:
            examples = self._examples[model]
            for k, entry in enumerate(taken):
                ex = examples.pop(first + k, None)
                value = _arm_value(entry)
                for name, cand, arm in roles:
                    p = self._pairs.get((name, cand), {}).get(ex or "")
                    if ex is not None and p is not None and p[2 + arm] is True:
                        p[2 + arm] = value
        for name, cand, arm in roles:
            key = (name, cand)
            if key in self._pairs:
                self._drain(key, now, ts, alerts)
                continue
            member = self.groups[name].member(cand)
            for entry in taken:
                value = _arm_value(entry)
                if not isinstance(value, list):  # a label missing for good
                    self._missing[key] += 1
                    continue
                before = member.status
                if arm == 0:
                    member.update_candidate(*value)
                else:  # a baseline round: every candidate's queue (counted once per candidate)
                    member.update_baseline(*value)
                self._verdict(key, before, ts, alerts)

    def _drain(self, key: tuple[str, str], now: float, ts: float, alerts: list[Alert]) -> None:
        """Feed the pairs that are next in pair order and complete (or skip them as missing)."""
        pairs, by_pos = self._pairs[key], self._by_pos[key]
        member = self.groups[key[0]].member(key[1])
        fed = self._fed[key]
        while fed in by_pos:
            p = pairs[by_pos[fed]]
            if (p[2] is None or p[3] is None) and (
                    p[1] + self._ttl < now or len(pairs) > self._max_pairs):
                p[2] = False if p[2] is None else p[2]  # its judge event did not come in time
                p[3] = False if p[3] is None else p[3]
            if p[2] is None or p[3] is None or p[2] is True or p[3] is True:
                break
            del pairs[by_pos.pop(fed)]
            fed += 1
            if p[2] is False or p[3] is False:
                self._missing[key] += 1
            else:
                (hc, fc, bc), (hb, fb, bb) = p[2], p[3]
                before = member.status
                member.update(hc, hb, fc, fb, bc, bb)
                self._verdict(key, before, ts, alerts)
        self._fed[key] = fed

    def _verdict(self, key: tuple[str, str], before: str, ts: float,
                 alerts: list[Alert]) -> None:
        """Alert on a new verdict; a change alarm not yet shown as inferior starts a new epoch."""
        name, cand = key
        m = self.groups[name].member(cand)
        status = m.status
        if status != before and status != "pending":
            c = self.configs[name]
            alert = make_alert(status, self._suite, cand, name, c.design, m.rounds, ts,
                               self.evidence(key))
            alert.update(comparison=name, baseline=c.baseline, candidate=cand)
            alerts.append(alert)
        if m.change_alarm and status != "inferior":  # the difference rose above the margin:
            m.restart()  # the evidence of a non_inferior (or pending) candidate is stale

    # ------------------------------------------------------------------ views
    def evidence(self, key: tuple[str, str]) -> dict[str, Any]:
        """One candidate's numbers (STATE.json and the evidence of its verdict alerts)."""
        name, cand = key
        c = self.configs[name]
        m = self.groups[name].member(cand)
        p: PairedComparison = m if isinstance(m, PairedComparison) else m.paired
        status = p.status
        bound = p.bound
        waiting = (len(self._pairs[key]) if key in self._pairs else sum(m.backlog))
        return {
            "comparison": name, "baseline": c.baseline, "candidate": cand, "design": c.design,
            "status": status, "margin": c.margin, "delta": c.delta,
            "threshold_delta": p.threshold_delta,
            "estimate": _finite(p.estimate),
            "bound": bound,
            "bound_side": {"non_inferior": "upper", "inferior": "lower"}.get(status),
            "bound_confidence": 1.0 - p.threshold_delta,
            "lower_bound": _finite(p.lower_bound), "upper_bound": _finite(p.upper_bound),
            "log_e_non_inferior": p.log_e_non_inferior, "log_e_inferior": p.log_e_inferior,
            "log_threshold": p.log_threshold, "decided_at_round": p.decided_at_round,
            "rounds": p.rounds, "labels": p.labels_used, "missing_pairs": self._missing[key],
            "waiting": waiting, "change_alarm": p.change_alarm, "epoch": p.epoch,
        }

    def view(self) -> dict[str, Any]:
        """Return the suite's ``comparisons`` block of STATE.json: ``{name: {...}}``."""
        out: dict[str, Any] = {}
        for name, c in self.configs.items():
            out[name] = {"baseline": c.baseline, "design": c.design, "margin": c.margin,
                         "delta": c.delta, "candidates": {
                             cand: self.evidence((name, cand)) for cand in c.candidate_list}}
        return out

    # ------------------------------------------------------------------ snapshot
    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable snapshot (configuration included, checked on restore)."""
        return {
            "kind": _KIND, "version": 1,
            "config": [c.model_dump(mode="json") for c in self.configs.values()],
            "groups": {n: g.to_state() for n, g in self.groups.items()},
            "pairs": [[n, cand, self._next[(n, cand)], self._fed[(n, cand)],
                       [[ex, *p] for ex, p in self._pairs[(n, cand)].items()]]
                      for n, cand in self._pairs],
            "missing": [[n, cand, v] for (n, cand), v in self._missing.items()],
            "examples": {m: [[pos, ex] for pos, ex in sorted(e.items())]
                         for m, e in sorted(self._examples.items())},
        }

    @classmethod
    def from_dict(cls, suite: str, config: SuiteConfig, d: dict[str, Any]) -> SuiteComparisons:
        """Inverse of :meth:`to_dict`; raises RefusedState for another configuration."""
        if d.get("kind") != _KIND or d.get("version") != 1:
            raise RefusedState(f"suite {suite!r}: not a version-1 comparisons state "
                               f"(kind={d.get('kind')!r})")
        s = cls(suite, config)
        if d["config"] != [c.model_dump(mode="json") for c in s.configs.values()]:
            raise RefusedState(f"suite {suite!r}: the comparisons of the checkpoint differ "
                               "from the configured ones")
        if set(d["groups"]) != set(s.groups):
            raise RefusedState(f"suite {suite!r}: comparison states do not match the config")
        for n, g in d["groups"].items():
            restored = CandidateGroup.from_state(g)
            if restored.design != s.groups[n].design or (
                    restored.candidates != s.groups[n].candidates):
                raise RefusedState(f"suite {suite!r} comparison {n!r}: another design or "
                                   "other candidates than configured")
            _check_member_config(suite, n, restored, s.groups[n])
            s.groups[n] = restored
        for n, cand, nxt, fed, pairs in d["pairs"]:
            key = (str(n), str(cand))
            if key not in s._pairs or not 0 <= int(fed) <= int(nxt):
                raise RefusedState(f"suite {suite!r}: bad pair buffer for {key!r}")
            s._next[key], s._fed[key] = int(nxt), int(fed)
            for ex, pos, ts, a, b in pairs:
                if not int(fed) <= int(pos) < int(nxt) or not all(
                        v is None or isinstance(v, bool) or len(v) == 3 for v in (a, b)):
                    raise RefusedState(f"suite {suite!r}: bad pair of {key!r}")
                s._pairs[key][str(ex)] = [int(pos), float(ts), a, b]
                s._by_pos[key][int(pos)] = str(ex)
        for n, cand, v in d["missing"]:
            if (str(n), str(cand)) not in s._missing or int(v) < 0:
                raise RefusedState(f"suite {suite!r}: bad missing count of {n!r}/{cand!r}")
            s._missing[(str(n), str(cand))] = int(v)
        for m, entries in d["examples"].items():
            if m not in s._examples:
                raise RefusedState(f"suite {suite!r}: model {m!r} is in no paired comparison")
            s._examples[m] = {int(pos): str(ex) for pos, ex in entries}
        return s


def _check_member_config(suite: str, name: str, restored: CandidateGroup,
                         fresh: CandidateGroup) -> None:
    # the bet grid is not configured: a checkpoint names its own (``grid`` in each test's
    # state) and keeps it, so a checkpoint of an older default still restores; every grid's
    # wealth is an e-process, and switching grids mid-epoch would not be one
    for cand in fresh.candidates:
        a, b = restored.member(cand), fresh.member(cand)
        pa = a if isinstance(a, PairedComparison) else a.paired
        pb = b if isinstance(b, PairedComparison) else b.paired
        if _without_grid(pa.config()) != _without_grid(pb.config()):
            raise RefusedState(f"suite {suite!r} comparison {name!r} candidate {cand!r}: "
                               "parameters differ from the configuration")


def _without_grid(config: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k != "grid"}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None
