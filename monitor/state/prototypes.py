"""New models of one suite, spawned from per-suite prototypes.

Every model of a suite runs the same certificates, change detectors and judge-drift detectors,
built from the same configuration. :class:`ModelFactory` builds each of them once per suite, as a
*prototype* that never sees a round, and spawns a new model's parts from it: cheaper than
validating the configuration again, and the spawned parts share the prototype's read-only
arrays. A restored model's certificate groups are loaded into spawns too (see
:meth:`ModelFactory.group_prototype`), so a restored fleet takes the memory a live one takes.

Examples
--------
>>> from monitor.config import CertificateConfig, SuiteConfig
>>> cfg = SuiteConfig(name="qa", certificates=[
...     CertificateConfig(name="r", alpha=0.3, delta=0.1, methods=["r_eval"], cs_grid=None)])
>>> f = ModelFactory(cfg)
>>> m = f.new("m1")
>>> m.name, list(m.groups), f.group_prototype("r") is not None, f.group_prototype("x")
('m1', ['r'], True, None)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

from monitor.config import CertificateConfig, SuiteConfig
from monitor.state.epochs import CertificateEpochs
from monitor.state.judge_drift import JudgeDrift
from monitor.state.model import ModelState, build_group
from monitor.state.strata import StrataSpec, StrataState
from monitor.stats.betting.active_growth import POLICIES
from monitor.stats.betting.active_online import ActiveAudit
from monitor.stats.betting.bets import Side
from monitor.stats.betting.hedge import HedgedPairs
from monitor.stats.betting.risk_group import CertificateGroup

__all__ = ["ModelFactories", "ModelFactory", "new_active", "threshold_delta"]


def threshold_delta(config: SuiteConfig, cert: CertificateConfig) -> float:
    """Level at which a certificate's monitors test, under the suite's multiplicity rule.

    ``delta / family_size`` under Bonferroni; under fixed-sequence testing every test spends
    the family's level, the smallest ``delta`` of the suite's certificates (testing a
    certificate at its own larger ``delta`` would let the family's error exceed it); else the
    certificate's own ``delta``.

    Examples
    --------
    >>> from monitor.config import SuiteConfig, CertificateConfig
    >>> c = CertificateConfig(name="r", alpha=0.1, delta=0.05)
    >>> threshold_delta(SuiteConfig(name="s", models=["a", "b"], multiplicity="bonferroni",
    ...                             certificates=[c]), c)
    0.025
    """
    rule = config.multiplicity
    if rule == "bonferroni":
        return cert.delta / config.effective_family_size
    if rule == "fixed_sequence":
        return min(c.delta for c in config.certificates)
    return cert.delta


def new_active(config: SuiteConfig, certs: list[CertificateConfig],
               level: Callable[[CertificateConfig], float]) -> ActiveAudit:
    """Return a model's fresh :class:`ActiveAudit`: a certify and a violate test per certificate.

    Each test at the certificate's level after multiplicity (``level``); cap fraction the
    certificate's ``bet_cap`` (0.95 when unset; the first certificate's).
    """
    tests: list[tuple[float, Side]] = []
    deltas: list[float] = []
    for cert in certs:
        tests += [(cert.alpha, "certify"), (cert.alpha, "violate")]
        deltas += [level(cert), level(cert)]
    c = certs[0].bet_cap if certs and certs[0].bet_cap is not None else 0.95
    if config.audit_policy == "hedged":  # the uniform policy only (docs/guarantees.md)
        return ActiveAudit(config.audit_rate, tests, deltas, c=min(c, 0.95),
                           policies=POLICIES[:1])
    return ActiveAudit(config.audit_rate, tests, deltas, c=min(c, 0.95))


class ModelFactory:
    """Builds the models of one suite from prototypes (see the module docstring)."""

    def __init__(self, config: SuiteConfig) -> None:
        c = config
        self._config = config
        self._certs = list(c.certificates)
        self._level = partial(threshold_delta, config)
        self._groups: dict[str, CertificateGroup] = {}  # per certificate, sees no round
        self._epochs: dict[str, CertificateEpochs] = {}  # and its epochs, with detectors
        self._judge = (JudgeDrift.new(c.judge_drift_warmup, c.judge_drift_false_alarm,
                                      c.judge_drift_horizon) if c.judge_drift else None)
        self.strata = StrataSpec.from_suite(c, self._level) if StrataSpec.enabled(c) else None

    def new(self, name: str) -> ModelState:
        """Return a fresh model called ``name``."""
        judge = None if self._judge is None else self._judge.spawn()
        m = ModelState.new(name, self._certs, self._level, judge, self._fresh_group,
                           self._fresh_epochs)
        if self.strata is not None:
            m.strata = StrataState(self.strata)
        if self._config.audit_policy in ("active", "hedged"):
            m.active = new_active(self._config, self._certs, self._level)
        if self._config.audit_policy == "hedged":  # the average of both, per audited unit
            m.hedge = HedgedPairs([math.log(1.0 / self._level(c)) for c in self._certs
                                   for _ in (0, 1)])
        return m

    def _fresh_group(self, cert: CertificateConfig) -> CertificateGroup:
        return self._prototype(cert).spawn()

    def _fresh_epochs(self, cert: CertificateConfig) -> CertificateEpochs:
        proto = self._epochs.get(cert.name)
        if proto is None:
            proto = self._epochs[cert.name] = CertificateEpochs.new(
                cert.alpha, cert.detector_threshold)
        return proto.spawn()

    def _prototype(self, cert: CertificateConfig) -> CertificateGroup:
        proto = self._groups.get(cert.name)
        if proto is None:
            proto = self._groups[cert.name] = build_group(cert, self._level(cert))
        return proto

    def group_prototype(self, name: str) -> CertificateGroup | None:
        """Return the prototype group of the certificate called ``name`` (None: unknown)."""
        cert = next((c for c in self._certs if c.name == name), None)
        return None if cert is None else self._prototype(cert)


class ModelFactories:
    """One :class:`ModelFactory` per ``[[suites]]`` entry, shared by the suites it routes.

    The prototypes are built once per entry instead of once per suite (they never see a
    round; every spawn owns its state), which with many suites was a visible share of a replay.

    Examples
    --------
    >>> from monitor.config import CertificateConfig, SuiteConfig
    >>> cfg = SuiteConfig(name="*", certificates=[CertificateConfig(name="r", alpha=0.3,
    ...                                                             delta=0.1)])
    >>> fs = ModelFactories()
    >>> fs.of(cfg) is fs.of(cfg)
    True
    """

    def __init__(self) -> None:
        # by id() of the entry: the owner keeps its configuration (and so each entry) alive
        self._by_entry: dict[int, ModelFactory] = {}

    def of(self, config: SuiteConfig) -> ModelFactory:
        """Return the factory of the ``[[suites]]`` entry ``config`` (built on first use)."""
        f = self._by_entry.get(id(config))
        if f is None:
            f = self._by_entry[id(config)] = ModelFactory(config)
        return f
