"""Which judged units of a suite are audited (sent for a human label), decided at judge time.

The decision for one judge event, made before any label of the unit can be used:

- the event's ``audit`` flag decides when present (an upstream sampler owns the decision and
  requests its own labels);
- otherwise the salted hash decides, ``audit_uniform(salt, suite, model, example_id) <
  audit_rate`` (:mod:`monitor.audit`: reproducible in replays, independent of the losses), and
  certmon emits a label request for an audited unit (unless ``label_requests = false``); for
  the models of a *paired* comparison (``[[suites.comparisons]]``, shadow traffic) the hash
  takes the fixed tag :data:`~monitor.state.comparisons.PAIRED_AUDIT_TAG` in place of the
  model, so there is one coin per example and both answers of an audited example are audited
  together (every other model's coin is unchanged);
- with ``[suites.strata]`` or a certificate ``precision`` goal the model's
  :class:`~monitor.state.strata.StrataState` decides from the same uniform: a *uniform* audit
  (a betting round and a stratified label), a *top-up* audit (a stratified label only) or none.

Examples
--------
>>> from monitor.config import CertificateConfig, SuiteConfig
>>> from monitor.events import decode_event
>>> cert = CertificateConfig(name="r", alpha=0.1, delta=0.05)
>>> policy = AuditPolicy("qa", SuiteConfig(name="qa", audit_rate=0.5, certificates=[cert]))
>>> ev = decode_event(b'{"type": "judge", "event_id": "e1", "suite": "qa", "model": "m",'
...                   b' "example_id": "x", "loss": 0, "ts": 1, "audit": true}')
>>> policy.decide(ev, None)
('uniform', None)
>>> 0.0 <= policy.uniform("m", "x") < 1.0
True
>>> from monitor.config.comparisons import ComparisonConfig
>>> paired = AuditPolicy("qa", SuiteConfig(name="qa", models=["a", "b"], certificates=[cert],
...     comparisons=[ComparisonConfig(name="c", baseline="a", candidate="b")]))
>>> paired.uniform("a", "x") == paired.uniform("b", "x") != policy.uniform("a", "x")
True
"""

from __future__ import annotations

from typing import Any

from monitor.audit import audit_prefix, audit_uniform_fast
from monitor.config import SuiteConfig
from monitor.events import Event
from monitor.state.comparisons import PAIRED_AUDIT_TAG
from monitor.state.strata import UNIFORM, StrataState

__all__ = ["UNIFORM", "AuditPolicy"]


class AuditPolicy:
    """The audit decision of one suite's judge events (see the module docstring).

    Notes
    -----
    Validity needs the decision to be independent of the unit's human loss given the past: the
    hash is a function of fixed ids and the salt, an upstream flag is assumed to come from a
    random sampler, and the strata's rates are functions of earlier events only.
    """

    def __init__(self, suite: str, config: SuiteConfig) -> None:
        self._suite = suite
        self._rate = config.audit_rate
        self._salt = config.audit_salt
        self.requests = config.label_requests  # emit label requests for hash audits
        self._prefix: dict[str, bytes] = {}  # model -> b'salt|suite|model|'
        # models of paired comparisons share one coin per example (module docstring)
        self._coin = {m: PAIRED_AUDIT_TAG for c in config.comparisons if c.design == "paired"
                      for m in (c.baseline, *c.candidate_list)}

    @property
    def rate(self) -> float:
        """The hash audit's probability (``audit_rate``, at most 1)."""
        return min(1.0, self._rate)

    def uniform(self, model: str, example_id: str) -> float:
        """Return the unit's :func:`monitor.audit.audit_uniform` (prefix cached per model).

        For a model of a paired comparison it is ``audit_uniform(salt, suite,
        PAIRED_AUDIT_TAG, example_id)``.
        """
        prefix = self._prefix.get(model)
        if prefix is None:
            prefix = self._prefix[model] = audit_prefix(self._salt, self._suite,
                                                        self._coin.get(model, model))
        return audit_uniform_fast(prefix, example_id)

    def decide(self, ev: Event, strata: StrataState | None) -> tuple[str | None, list[Any] | None]:
        """Return ``(sample, tag)`` for a judge event of a model with these ``strata``.

        ``sample`` is ``"uniform"`` (a betting round), ``"top_up"`` (a stratified label only)
        or None (not audited); ``tag`` is the stratified audit's ``[stratum index, sample,
        stratum position]`` (:mod:`monitor.state.strata_order`; ``[None, sample]`` in a warm-up)
        (None without strata).
        """
        if strata is not None:
            u = 1.0 if ev.audit is not None else self.uniform(ev.model, ev.example_id)
            k, sample = strata.judge(ev.stratum, ev.loss, ev.audit, u)
            if sample is None:
                return None, None
            # a stratified audit's place in its stratum's audit order (none in a warm-up)
            return sample, ([k, sample] if k is None else [k, sample, strata.position(k)])
        return (UNIFORM if self.audited(ev) else None), None

    def audited(self, ev: Event) -> bool:
        """Whether a judge event of a model without strata is audited (a uniform round).

        Its own ``audit`` flag when it has one, else certmon's salted hash against
        ``audit_rate``.
        """
        if ev.audit is not None:
            return bool(ev.audit)
        rate = self._rate
        return rate >= 1.0 or (rate > 0.0 and self.uniform(ev.model, ev.example_id) < rate)
