"""Stratified auditing per (suite, model): strata, steered audit rates, certified precision.

Configured by ``[suites.strata]`` and/or a certificate's ``precision`` (see
:class:`monitor.config.StrataConfig`). For each model, :class:`StrataState` puts every judge event
in a stratum (the event's ``stratum`` field, or a frozen equal-mass bin of the judge loss, or one
stratum when only ``precision`` is set), counts traffic per stratum, keeps per-stratum audit
rates steered by the allocation rule, and feeds a Cer-Eval
:class:`~monitor.stats.cereval.certified_mean.StratifiedCertifiedMean` (anytime-valid) and a
:class:`~monitor.stats.stratppi.estimator.StratifiedPPIMean` (asymptotic only) with the labels.

Audit decision (once, at judge-event time; ``u`` is the unit's salted-hash uniform):

- rates ``r_k(t)`` come from ``audit_rates(allocation, traffic, budget, floor)`` computed from
  the past only (recomputed every ``refresh_every`` judge events and after each stratified label);
  ``m(t) = min_k r_k(t)`` over strata with traffic (strata without traffic are raised to ``m``);
- ``u < m(t)``: a **uniform** audit -- a betting round (R-Eval / R-AutoEval / R-AutoEval+) and a
  stratified label;
- ``m(t) <= u < r_k(t)``: a **top-up** audit -- a stratified label only; for the betting
  certificates the unit is ordinary unaudited traffic (its judge loss joins the synthetic block);
- otherwise: unaudited (synthetic block, StratPPI unlabelled pool).

An event's ``audit`` flag, when present, decides instead (``true`` is a uniform audit). Units seen
during a judge-loss warm-up have no stratum: they are audited at the suite's ``audit_rate`` as
uniform audits and never enter the stratified estimates.

Notes
-----
Validity. (1) Stratified certificate: a unit of stratum k arriving at time t is labelled with
probability ``r_k(t)``, a function of the past and of k only, and ``u`` is independent of the
unit's losses; so, given the past and k, a labelled unit's human loss has the stratum's loss
distribution, and the labels of stratum k are conditionally i.i.d. as
:class:`~monitor.stats.cereval.certified_mean.StratifiedCertifiedMean` requires (adaptive choice of
which stratum to label is allowed). The interval covers the **risk over the traffic seen** (after
any warm-up), ``sum_k p_k R_k`` with ``p_k`` the observed traffic shares, whatever the audit rates.
(2) Betting certificates: a unit is a betting round with probability ``m(t)``, the same for every
unit whatever its stratum and losses, and joins the synthetic block with probability
``1 - m(t)``, again the same for every unit; so rounds and blocks are uniform samples of the
traffic, exactly the R-AutoEval+ assumptions (stationary traffic). Feeding the top-up units to the
betting certificates would break this: they over-represent high-rate strata.
(3) Late and missing labels: each stratified audit gets its stratum position when judged
(:mod:`monitor.state.strata_order`), and labels are applied to the stratified estimates in that
order, so the estimates (and the audit rates and target stratum steered from them) only ever see
a prefix of the stratum's audit-ordered labels, whatever the delays. A label missing for good
enters the lower side (``cert``, ``ppi``) as 0 and the upper side (``cert_hi``, ``ppi_hi``, made
at the first missing label) as 1: when units' labels and their missingness are produced
independently across units (each may depend on its own loss), each side's sequence is i.i.d.
within a stratum with mean below (lower side) or above (upper side) the stratum's risk, so the
lower side's lower bound and the upper side's upper bound keep their guarantee (eight one-sided
events per stratum, ``0.82 delta`` at ``c = 16``). See ``docs/guarantees.md``.

Examples
--------
>>> from monitor.config import CertificateConfig, SuiteConfig, StrataConfig
>>> cfg = SuiteConfig(audit_rate=0.2, strata=StrataConfig(by="stratum", count=3),
...     certificates=[CertificateConfig(name="r", alpha=0.1, delta=0.05, precision=0.3)])
>>> st = StrataState(StrataSpec.from_suite(cfg, lambda c: c.delta))
>>> st.judge("a", 0.0, None, 0.01), st.judge("b", 1.0, None, 0.9)
((0, 'uniform'), (1, None))
>>> st.label(0, 0.0, 0.0)
False
>>> st.view()["strata"]["a"]["labels"], st.names
(1, ['a', 'b', '__other__'])
>>> StrataState.from_dict(st.spec, st.to_dict()).to_dict() == st.to_dict()
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from monitor.alerts import Alert, make_alert
from monitor.state.strata_order import StrataOrder
from monitor.stats.cereval.certified_mean import StratifiedCertifiedMean
from monitor.stats.cereval.partition import OTHER, JudgeLossBins, LabelStrata
from monitor.stats.stratppi.allocation import audit_rates
from monitor.stats.stratppi.estimator import StratifiedPPIMean

if TYPE_CHECKING:
    from collections.abc import Callable

    from monitor.config import CertificateConfig, SuiteConfig

__all__ = ["TOP_UP", "UNIFORM", "StrataSpec", "StrataState", "stratified_label"]

UNIFORM = "uniform"
TOP_UP = "top_up"


def _finite(x: float) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def _below(u: float, rate: float) -> bool:
    return rate >= 1.0 or (rate > 0.0 and u < rate)


@dataclass(frozen=True)
class StrataSpec:
    """Resolved per-suite settings (see :class:`monitor.config.StrataConfig`)."""

    by: str  # "stratum" | "judge_loss" | "none"
    count: int
    names: tuple[str, ...]
    warmup: int
    allocation: str
    floor: float
    budget: float
    base_rate: float
    refresh_every: int
    ppi_alpha: float
    delta: float
    certificate: str
    precision: float | None

    @classmethod
    def from_suite(
        cls, config: SuiteConfig, threshold_delta: Callable[[CertificateConfig], float]
    ) -> StrataSpec:
        """Build from a suite config (``threshold_delta``: a level after multiplicity).

        The interval belongs to the certificate with ``precision`` (else the first one) and runs
        at that certificate's level after the suite's multiplicity correction.
        """
        cert = next((c for c in config.certificates if c.precision is not None),
                    config.certificates[0])
        delta = threshold_delta(cert)
        s = config.strata
        if s is None:
            rate = config.audit_rate
            return cls("none", 1, (), 0, "uniform", rate, rate, rate, 64, 0.1, delta,
                       cert.name, cert.precision)
        budget = config.audit_rate if s.budget is None else s.budget
        return cls(s.by, s.count, tuple(s.names or ()), s.warmup or 0, s.allocation, s.floor,
                   budget, config.audit_rate, s.refresh_every, s.ppi_alpha, delta,
                   cert.name, cert.precision)

    @staticmethod
    def enabled(config: SuiteConfig) -> bool:
        """Whether the suite has strata or a precision goal."""
        return config.strata is not None or any(c.precision is not None
                                                 for c in config.certificates)


class StrataState:
    """Strata, audit rates and stratified estimates of one model (see the module docstring).

    Parameters
    ----------
    spec : StrataSpec
        Resolved settings.
    """

    def __init__(self, spec: StrataSpec) -> None:
        self.spec = spec
        k = spec.count
        self.labeler: LabelStrata | None = None
        self.bins: JudgeLossBins | None = None
        if spec.by == "stratum":
            self.labeler = LabelStrata(k)
            for name in spec.names:
                self.labeler.index(name)
        elif spec.by == "judge_loss":
            self.bins = JudgeLossBins(k, spec.warmup)
        self.cert = StratifiedCertifiedMean(k, spec.delta)
        self.ppi = StratifiedPPIMean(k, spec.ppi_alpha)
        self.rates = [spec.budget] * k
        self.uniform_rate = spec.budget
        self.target = 0
        self.since = 0
        self.audits = [0] * k
        self.warmup_units = 0
        self.reached_at: int | None = None
        self.order = StrataOrder(k)
        # with a missing label at 1 (upper side); None until a label goes missing: ``cert`` and
        # ``ppi`` then take it at 0 (lower side)
        self.cert_hi: StratifiedCertifiedMean | None = None
        self.ppi_hi: StratifiedPPIMean | None = None
        self.missing = [0] * k

    # ------------------------------------------------------------------ decisions
    def assign(self, name: str | None, judge_loss: float) -> int | None:
        """Stratum of a new unit (``None`` during a judge-loss warm-up)."""
        if self.labeler is not None:
            return self.labeler.index(name)
        if self.bins is not None:
            k = self.bins.assign(judge_loss)  # before update: warm-up units get no stratum
            self.bins.update(judge_loss)
            return k
        return 0

    def judge(
        self, name: str | None, judge_loss: float, flag: bool | None, u: float
    ) -> tuple[int | None, str | None]:
        """Assign and decide the audit of one judge event.

        Returns
        -------
        tuple
            ``(stratum index or None, "uniform" | "top_up" | None)`` (None: not audited).
        """
        k = self.assign(name, judge_loss)
        if k is None:
            self.warmup_units += 1
            audited = flag if flag is not None else _below(u, self.spec.base_rate)
            return None, UNIFORM if audited else None
        self.cert.observe_traffic(k)
        if self.cert_hi is not None:
            self.cert_hi.observe_traffic(k)
        sample: str | None
        if flag is not None:
            sample = UNIFORM if flag else None
        elif _below(u, self.uniform_rate):
            sample = UNIFORM
        elif _below(u, self.rates[k]):
            sample = TOP_UP
        else:
            sample = None
        if sample is None:
            self.ppi.update_judge(k, judge_loss)
            if self.ppi_hi is not None:
                self.ppi_hi.update_judge(k, judge_loss)
        else:
            self.audits[k] += 1
        self.since += 1
        if self.since >= self.spec.refresh_every:
            self.refresh()
        return k, sample

    def position(self, k: int) -> int:
        """Stratum position of a unit of stratum ``k`` audited now (its place in audit order)."""
        return self.order.assign(k)

    def resolve(self, k: int, pos: int, human: float | None, judge: float) -> bool:
        """Resolve stratum position ``pos`` (``human`` None: missing for good).

        Applies every label of stratum ``k`` that is next in audit order; True when the
        precision goal is first met. A position that is not waiting (a forged snapshot's) is
        ignored.
        """
        if not self.order.resolve(k, pos, human, judge):
            return False
        reached = False
        for h, j in self.order.take_ready(k):
            reached = self._apply(k, h, j) or reached
        return reached

    def label(self, k: int | None, human: float, judge: float) -> bool:
        """Add a labelled unit of stratum ``k`` now (a unit without a stratum position).

        Units of snapshots written before stratified labels were ordered; True when the
        precision goal is first met.
        """
        if k is None:
            return False
        return self._apply(k, human, judge)

    def _apply(self, k: int, human: float | None, judge: float) -> bool:
        """Apply one label in audit order; a missing one at 0 (lower side) and 1 (upper)."""
        if human is None:
            if self.cert_hi is None or self.ppi_hi is None:  # the sides part from here on
                self.cert_hi = StratifiedCertifiedMean.from_state(self.cert.to_state())
                self.ppi_hi = StratifiedPPIMean.from_state(self.ppi.to_state())
            self.missing[k] += 1
            lo, hi = 0.0, 1.0
        else:
            lo = hi = human
        self.cert.update(k, lo)
        self.ppi.update_label(k, lo, judge)
        if self.cert_hi is not None and self.ppi_hi is not None:
            self.cert_hi.update(k, hi)
            self.ppi_hi.update_label(k, hi, judge)
        self.refresh()
        eps = self.spec.precision
        if eps is not None and self.reached_at is None and self.half_width <= eps:
            self.reached_at = self.cert.n_labels
            return True
        return False

    # ------------------------------------------------------------------ interval
    @property
    def lower(self) -> float:
        """Cer-Eval lower bound (missing labels at 0)."""
        return self.cert.lower

    @property
    def upper(self) -> float:
        """Cer-Eval upper bound (missing labels at 1)."""
        return (self.cert if self.cert_hi is None else self.cert_hi).upper

    @property
    def estimate(self) -> float:
        """Cer-Eval point estimate (the midpoint of the two sides' when labels are missing)."""
        if self.cert_hi is None:
            return self.cert.estimate
        return 0.5 * (self.cert.estimate + self.cert_hi.estimate)

    @property
    def half_width(self) -> float:
        """``(upper - lower) / 2``, compared with the precision goal."""
        if self.cert_hi is None:
            return self.cert.half_width
        return 0.5 * (self.upper - self.lower)

    def refresh(self) -> None:
        """Recompute the audit rates and the target stratum from the data so far."""
        self.since = 0
        spec = self.spec
        traffic = np.array(self.cert.traffic, dtype=np.float64)
        active = traffic > 0
        if not active.any() or spec.allocation in ("uniform", "proportional"):
            rates = np.full(spec.count, spec.budget)
        else:
            if spec.allocation == "cereval":
                alloc = self.cert.allocation()
            else:
                alloc = self.ppi.allocation("heuristic" if spec.allocation == "heuristic"
                                            else "plugin")
            rates = audit_rates(alloc, traffic, spec.budget, spec.floor)
        m = float(rates[active].min()) if active.any() else spec.budget
        self.rates = [max(float(r), m) for r in rates]
        self.uniform_rate = m
        self.target = self.cert.target_stratum

    # ------------------------------------------------------------------ views
    @property
    def names(self) -> list[str]:
        """Display name of every stratum slot."""
        k = self.spec.count
        if self.labeler is not None:
            named = self.labeler.names[: k - 1] if k > 1 else []
            return [*named, *(f"__slot{i}__" for i in range(len(named), k - 1)), OTHER]
        if self.bins is not None:
            return [f"bin{i}" for i in range(k)]
        return ["all"]

    def request_fields(self, k: int | None) -> tuple[float, str | None]:
        """Return a unit of stratum ``k``.s audit probability and stratum name (None: warm-up).

        A label request carries them as ``propensity`` and ``stratum`` (docs/label-loop.md).
        """
        if k is None:
            return self.spec.base_rate, None
        return self.rates[k], self.names[k]

    def evidence(self) -> dict[str, Any]:
        """Evidence of a ``precision_reached`` alert."""
        c = self.cert
        return {"half_width": _finite(self.half_width), "epsilon": self.spec.precision,
                "labels": c.n_labels, "lower": self.lower, "upper": self.upper,
                "estimate": self.estimate, "delta": self.spec.delta,
                "labels_per_stratum": dict(zip(self.names, c.labels, strict=True)),
                "missing_labels": sum(self.missing), "traffic": sum(c.traffic)}

    def view(self) -> dict[str, Any]:
        """Return the ``strata`` block of a model in STATE.json."""
        c, names = self.cert, self.names
        share, means, radii = c.weights, c.stratum_means, c.stratum_radii
        strata: dict[str, Any] = {}
        for i, name in enumerate(names):
            if name.startswith("__slot") and c.traffic[i] == 0:
                continue
            strata[name] = {"traffic": c.traffic[i], "traffic_share": float(share[i]),
                            "labels": c.labels[i],
                            "estimate": float(means[i]) if c.labels[i] else None,
                            "radius": _finite(radii[i]), "audit_rate": self.rates[i]}
        ppi_ok = any(n > 0 for n in c.labels)
        ppi_hi = self.ppi_hi
        return {
            "by": self.spec.by, "allocation": self.spec.allocation,
            "certificate": self.spec.certificate, "delta": self.spec.delta,
            "target_stratum": names[self.target], "half_width": _finite(self.half_width),
            "lower": self.lower, "upper": self.upper,
            "estimate": self.estimate if ppi_ok else None,
            "precision_goal": self.spec.precision, "precision_reached_at_labels": self.reached_at,
            "labels": c.n_labels, "missing_labels": sum(self.missing),
            "waiting_labels": self.order.blocked, "uniform_rate": self.uniform_rate,
            "warmup_units": self.warmup_units,
            "edges": None if self.bins is None else self.bins.edges,
            "ppi": {"estimate": _finite(self.ppi.estimate if ppi_hi is None else
                                        0.5 * (self.ppi.estimate + ppi_hi.estimate))
                    if ppi_ok else None,
                    "lower": _finite(self.ppi.lower) if ppi_ok else None,
                    "upper": _finite((self.ppi if ppi_hi is None else ppi_hi).upper)
                    if ppi_ok else None,
                    "alpha": self.spec.ppi_alpha, "asymptotic": True},
            "strata": strata,
        }

    # ------------------------------------------------------------------ snapshot
    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable state (floats exact)."""
        return {
            "labeler": None if self.labeler is None else self.labeler.to_state(),
            "bins": None if self.bins is None else self.bins.to_state(),
            "cert": self.cert.to_state(), "ppi": self.ppi.to_state(),
            "rates": list(self.rates), "uniform_rate": self.uniform_rate,
            "target": self.target, "since": self.since, "audits": list(self.audits),
            "warmup_units": self.warmup_units, "reached_at": self.reached_at,
            "order": self.order.to_list(), "missing": list(self.missing),
            "hi": None if self.cert_hi is None or self.ppi_hi is None else
            {"cert": self.cert_hi.to_state(), "ppi": self.ppi_hi.to_state()},
        }

    @classmethod
    def from_dict(cls, spec: StrataSpec, d: dict[str, Any]) -> StrataState:
        """Inverse of :meth:`to_dict`."""
        st = cls(spec)
        if d["labeler"] is not None:
            st.labeler = LabelStrata.from_state(d["labeler"])
        if d["bins"] is not None:
            st.bins = JudgeLossBins.from_state(d["bins"])
        st.cert = StratifiedCertifiedMean.from_state(d["cert"])
        st.ppi = StratifiedPPIMean.from_state(d["ppi"])
        st.rates = [float(r) for r in d["rates"]]
        st.uniform_rate = float(d["uniform_rate"])
        st.target = int(d["target"])
        st.since = int(d["since"])
        st.audits = [int(a) for a in d["audits"]]
        st.warmup_units = int(d["warmup_units"])
        st.reached_at = None if d["reached_at"] is None else int(d["reached_at"])
        if "order" in d:
            st.order = StrataOrder.from_list(d["order"], spec.count)
            st.missing = [int(x) for x in d["missing"]]
            if d["hi"] is not None:
                st.cert_hi = StratifiedCertifiedMean.from_state(d["hi"]["cert"])
                st.ppi_hi = StratifiedPPIMean.from_state(d["hi"]["ppi"])
        else:  # a snapshot written before stratified labels were ordered
            st.order = StrataOrder(spec.count, st.audits)
        if len(st.rates) != spec.count or st.cert.n_strata != spec.count:
            raise ValueError("strata state does not match the configured count")
        return st


def stratified_label(suite: str, model: str, strata: StrataState, tag: list[Any],
                     human: float | None, judge: float, ts: float, alerts: list[Alert]) -> None:
    """Resolve a stratified audit (``human`` None: missing), in its stratum's audit order.

    ``tag`` is the unit's audit tag (``[stratum, reason, position]``); appends a
    ``precision_reached`` alert to ``alerts`` when the certified mean reaches its precision.
    """
    k = tag[0]
    if k is None:
        return  # a warm-up unit: no stratum
    if len(tag) > 2:
        reached = strata.resolve(int(k), int(tag[2]), human, judge)
    else:  # a unit of a snapshot written before stratified labels were ordered
        reached = human is not None and strata.label(int(k), human, judge)
    if reached:
        alerts.append(make_alert("precision_reached", suite, model, strata.spec.certificate,
                                 "cereval", strata.cert.n_labels, ts, strata.evidence()))
