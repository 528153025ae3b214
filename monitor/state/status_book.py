"""The statuses of one suite's (model, certificate, method) family and the alerts they raise.

After every round, :class:`StatusBook` moves each *effective* status (what STATE.json, metrics
and alerts show) to what the suite's multiplicity rule says (:func:`monitor.state.family.
target_statuses`), emits ``certified`` / ``violated`` / ``certificate_lost`` alerts for each
certificate's primary method (and ``certificate_withdrawn`` when e-BH stops selecting a
certified member), and lets the change detectors act
(:func:`monitor.state.detector_actions.act_on_detectors`: regression, improvement, judge drift).

Examples
--------
>>> from monitor.config import SuiteConfig, CertificateConfig
>>> from monitor.state.prototypes import ModelFactory
>>> cfg = SuiteConfig(name="qa", certificates=[
...     CertificateConfig(name="r", alpha=0.5, delta=0.1, methods=["r_eval"], cs_grid=None)])
>>> models = {"m": ModelFactory(cfg).new("m")}
>>> book, alerts = StatusBook("qa", cfg, models), []
>>> for _ in range(8):
...     models["m"].round(human=0.0, judge=0.0, block=None)
...     book.after_round(models["m"], 1.0, alerts)
>>> models["m"].effective[("r", "r_eval")].status, [a["kind"] for a in alerts]
('certified', ['certified'])
"""

from __future__ import annotations

import fnmatch
import math
from functools import partial
from typing import Any

from monitor.alerts import Alert, make_alert
from monitor.config import SuiteConfig
from monitor.state.detector_actions import act_on_detectors
from monitor.state.family import target_statuses
from monitor.state.hedged import hedged_evidence, hedged_status, hedged_units
from monitor.state.model import ModelState
from monitor.state.prototypes import threshold_delta
from monitor.state.views import (
    active_evidence,
    active_status,
    alert_evidence,
    withdrawal_evidence,
)

__all__ = ["StatusBook"]


class StatusBook:
    """Effective statuses, multiplicity and status alerts of one suite (module docstring).

    Parameters
    ----------
    suite : str
        The suite's name (alerts carry it).
    config : SuiteConfig
        Its certificates and multiplicity rule.
    models : dict of str to ModelState
        The suite's models, shared with the suite (the book reads it, never adds to it).

    Notes
    -----
    Under ``none`` and ``bonferroni`` a round changes only its own model's statuses, so only
    that model is refreshed; the family rules (``fixed_sequence``, ``e_bh``) refresh every
    member, since one member's evidence can change another's status.
    """

    def __init__(self, suite: str, config: SuiteConfig, models: dict[str, ModelState]) -> None:
        self._suite = suite
        self._config = config
        self._models = models
        self._certs = list(config.certificates)
        self._primary = {cert.name: cert.primary_method for cert in self._certs}
        self._level = partial(threshold_delta, config)
        self.family_rule = config.multiplicity in ("fixed_sequence", "e_bh")

    @property
    def family_size(self) -> int:
        """Configured family size, else models x certificates (models seen so far for globs)."""
        c = self._config
        if c.family_size is not None:
            return c.family_size
        if any(ch in p for p in c.models for ch in "*?["):
            return len(self._models) * len(self._certs)
        return len(c.models) * len(self._certs)

    def ordered_models(self) -> list[ModelState]:
        """Models in family order: by first matching pattern of ``models``, then first seen."""
        pats = self._config.models

        def rank(m: ModelState) -> int:
            hits = (i for i, p in enumerate(pats) if fnmatch.fnmatchcase(m.name, p))
            return next(hits, len(pats))

        return sorted(self._models.values(), key=rank)

    def after_round(self, model: ModelState, ts: float, alerts: list[Alert]) -> None:
        """Refresh the statuses a round of ``model`` may change, then act on its detectors."""
        self.refresh(model, ts, alerts)
        # the detectors decide (monitor.state.epochs); monitor.state.detector_actions acts
        renewed = act_on_detectors(self._suite, model, self._certs, self._level,
                                   self._config.multiplicity, ts, alerts)
        if renewed and self.family_rule:
            self.refresh(None, ts, alerts)

    def refresh(self, model: ModelState | None, ts: float, alerts: list[Alert]) -> None:
        """Move effective statuses to their targets: ``model``'s own, or (None) the family's.

        An active model's statuses are its active tests' (:meth:`set_active`): its uniform
        rounds feed the detectors and confidence sequences only.
        """
        if model is not None and model.active is not None:
            return
        if model is not None and not self.family_rule:
            # one model's own statuses (target_statuses of rule none/bonferroni, written out:
            # this runs every round and a status seldom changes)
            effective = model.effective
            for key, mon in model.monitors.items():
                status = mon.status
                if status != effective[key].status:
                    self._set_status(model, key[0], key[1], status, ts, alerts)
            return
        # family_size only matters to the family rules (e-BH padding)
        size = self.family_size if self.family_rule else 0
        targets = target_statuses(self._config.multiplicity, self.ordered_models(), self._certs,
                                  size)
        for (mname, cert, meth), new in targets.items():
            m = self._models[mname]
            if new != m.effective[(cert, meth)].status:
                self._set_status(m, cert, meth, new, ts, alerts)

    def set_active(self, m: ModelState, cert: str, new: str, ts: float, alerts: list[Alert],
                   evidence: dict[str, Any], rounds: int | None = None) -> None:
        """Move every method's status of ``cert`` to ``new`` (``audit_policy = "active"``).

        Under an active audit the certificate's verdict is its inverse-propensity tests'
        (:class:`~monitor.stats.betting.active_online.ActiveAudit`); ``evidence`` is the
        alerts' evidence (it states the human ``labels`` used); ``rounds`` the alerts' round
        (default: those labels).
        """
        if rounds is None:
            rounds = int(evidence["labels"])
        for (c, meth), eff in m.effective.items():
            if c == cert and eff.status != new:
                self._set_status(m, c, meth, new, ts, alerts, evidence, rounds)

    def follow_active(self, model: ModelState, ts: float, alerts: list[Alert]) -> None:
        """Move each certificate's statuses to its active tests' verdict (``model.active``).

        Under ``audit_policy = "hedged"`` the verdict is the average's (:mod:`monitor.state.
        hedged`; the per-unit values settled since the last call are paired first).
        """
        active, hedge = model.active, model.hedge
        if active is None:
            return
        if hedge is not None:  # audit_policy = "hedged": the average's verdict
            hedged_units(model)
        for i, cert in enumerate(self._certs):
            status = active_status(active, i) if hedge is None else hedged_status(hedge, i)
            if model.effective[(cert.name, cert.primary_method)].status == status:
                continue
            level = self._level(cert)
            if hedge is None:
                self.set_active(model, cert.name, status, ts, alerts, active_evidence(
                    model, i, cert, level, self._config.multiplicity))
                continue
            ev = hedged_evidence(model, i, cert, level, self._config.multiplicity)
            # the alert's round counts from the stream's start (as under uniform)
            start = model.epochs[cert.name].started_round
            self.set_active(model, cert.name, status, ts, alerts, ev, int(ev["labels"]) + start)

    def _set_status(self, m: ModelState, cert: str, meth: str, new: str, ts: float,
                    alerts: list[Alert], evidence: dict[str, Any] | None = None,
                    rounds: int | None = None) -> None:
        """Move one effective status to ``new``; alerts for the certificate's primary method.

        ``evidence`` and ``rounds`` (the alert's round) default to the certificate's monitors'
        and the model's rounds; an active audit passes its own (its labels used).
        """
        eff = m.effective[(cert, meth)]
        if rounds is None:
            rounds = m.counts["rounds"]
        old = eff.status
        eff.status = new
        eff.changed_ts = ts if math.isfinite(ts) else None
        kinds: list[str] = []
        if new == "certified":
            if eff.certified_at_round is None:
                eff.certified_at_round = rounds
            eff.ever_certified = True
            kinds.append("certified")
        elif new == "violated":
            if eff.violated_at_round is None:
                eff.violated_at_round = rounds
            kinds.append("violated")
            if eff.ever_certified:
                kinds.append("certificate_lost")
        elif old == "certified":  # e-BH no longer selects it (the family rule's withdrawal)
            kinds.append("certificate_withdrawn")
        if meth != self._primary[cert]:
            return
        rule = self._config.multiplicity
        for kind in kinds:
            ev = (evidence if evidence is not None
                  else withdrawal_evidence(m, cert, meth, rule)
                  if kind == "certificate_withdrawn"
                  else alert_evidence(m, cert, meth, kind, rule))
            alerts.append(make_alert(kind, self._suite, m.name, cert, meth, rounds, ts, ev))
