"""Scrape-time Prometheus collector for certmon's statistical state.

:class:`StateCollector` turns one ``Engine.state_view()`` document (the STATE.json format plus
the extra keys listed in the interface contract) into the ``certmon_*`` metric families each time
Prometheus scrapes: what a scrape shows is exactly what the state said when the scrape happened.
Given a ``version_fn`` (a state version the owner changes whenever the state changes), the
families rendered at a version are reused until the version changes: an idle instance is
rendered once, however often it is scraped. The sample lines are rendered as text in one pass
(:mod:`monitor.metrics.render`), which keeps a scrape of 10,000 models well under a second.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from monitor.metrics.families import DETAILS, STATES, Detail, family_order
from monitor.metrics.render import format_rho, render_state

__all__ = ["STATES", "RenderedFamily", "StateCollector", "format_rho"]

_READ_ATTEMPTS = 3


class RenderedFamily(Metric):
    r"""A metric family whose samples are held as exposition text.

    Parameters
    ----------
    name, documentation, typ : str
        As for :class:`prometheus_client.core.Metric` (a counter's name without ``_total``).
    lines : list of str
        The family's sample lines, each ending with a newline, in exposition order.

    Notes
    -----
    ``body`` is the lines joined: what follows the ``# HELP`` / ``# TYPE`` header in both the
    text and the OpenMetrics format. ``samples`` parses ``body`` back (only when read), so the
    family also works with every prometheus_client encoder and registry helper, which then
    produce the same bytes.

    Examples
    --------
    >>> fam = RenderedFamily("certmon_x", "X.", "gauge", ['certmon_x{a="1"} 2.0\n'])
    >>> fam.samples[0].labels, fam.samples[0].value
    ({'a': '1'}, 2.0)
    """

    def __init__(self, name: str, documentation: str, typ: str, lines: list[str]) -> None:
        self._parsed: list[Sample] | None = None
        super().__init__(name, documentation, typ)
        self.body = "".join(lines)

    @property
    def samples(self) -> list[Sample]:
        """The samples of ``body`` (parsed on first use)."""
        if self._parsed is None:
            self._parsed = []
            if self.body:
                kind = "gauge" if self.type == "gauge" else "counter"
                text = f"# TYPE {self.name} {kind}\n{self.body}"
                for family in text_string_to_metric_families(text):
                    self._parsed.extend(Sample(s.name, s.labels, s.value) for s in family.samples)
        return self._parsed

    @samples.setter
    def samples(self, value: list[Sample]) -> None:
        if value:  # Metric.__init__ sets [], nothing else may
            raise ValueError("a RenderedFamily's samples come from its text")


class StateCollector(Collector):
    """Expose ``Engine.state_view()`` as Prometheus metric families at scrape time.

    Parameters
    ----------
    view_fn : Callable[[], Mapping[str, Any]]
        Returns the current STATE document. Called once per scrape, from the HTTP server's
        thread: it must return a consistent snapshot (e.g. taken under the engine's lock). A
        ``RuntimeError`` raised while building it (a dict changed size during iteration) is
        retried twice; any other exception fails the scrape (Prometheus then sees ``up == 0``
        for the target, which alerts, instead of silently missing series).
    detail : {"full", "shown"}, optional
        Per-method / per-rho detail (``[metrics] detail``). ``"full"`` (the default here)
        exposes every method and ``certmon_rho_weight_ratio``; ``"shown"`` only each
        certificate's primary method and no per-rho series (see :mod:`monitor.metrics.render`).
    version_fn : Callable[[], Hashable] or None, optional
        Returns the state's version: a value that differs after every change of what
        ``view_fn`` returns (e.g. a counter of applied events). Read before each scrape's
        view; while it equals the version of the last rendering, that rendering is returned
        again without calling ``view_fn`` (it is kept between scrapes: the text of the state
        families, about 3 kB per model). None (the default): every scrape reads the state.

    Notes
    -----
    Each family is returned as a :class:`RenderedFamily`: its sample lines are written once,
    as text, by :func:`monitor.metrics.render.render_state`, and :func:`monitor.metrics.
    server.serve_metrics` copies them into the response as they are; ``samples`` (for
    ``generate_latest``, ``get_sample_value``, ``name[]`` filtering) parses them back only
    when read. Either way the exposition is the same bytes.

    Mapping from the STATE document (suite ``S``, model ``M``, certificate ``C``, method ``K``):

    - per method: ``certmon_risk_estimate`` (``risk_estimate``), ``certmon_risk_upper_bound``
      / ``certmon_risk_lower_bound`` (``risk_upper_bound`` / ``risk_lower_bound``: the
      one-sided bound that goes with a certified / violated verdict, absent otherwise),
      ``certmon_risk_cs_lower_bound`` / ``certmon_risk_cs_upper_bound`` (``cs_lower`` /
      ``cs_upper``, the two-sided confidence sequence, *omitted* when ``cs_valid`` is false: an
      empty confidence sequence is never shown as an interval),
      ``certmon_log_e_value{side}`` (``log_e_certify`` / ``log_e_violate``),
      ``certmon_log_e_threshold`` (``log_threshold``), ``certmon_certificate_state{state}`` (one
      sample per state, 1 for ``status``), ``certmon_certificate_certified_round`` /
      ``certmon_certificate_violated_round`` (0 when null),
      ``certmon_certificate_last_change_timestamp_seconds`` (``status_changed_ts``, omitted when
      null), ``certmon_certificate_primary`` (``primary``: 1 for the certificate's primary
      method, 0 for the others; omitted when the key is missing),
      ``certmon_rho_weight_ratio{rho}`` (``rho_weights`` labelled by ``rhos`` formatted with
      :func:`format_rho`; omitted when ``rhos`` is missing or of another length; ``"full"``
      only), ``certmon_judge_reliance_ratio`` (the mean of ``rhos`` weighted by
      ``rho_weights``; at every detail);
    - per certificate: ``certmon_certificate_alpha``, ``certmon_certificate_delta``,
      ``certmon_certificate_lost`` (``lost``, 1/0) and the epoch series (``epoch``);
    - per model: ``certmon_judge_bias`` (omitted when null), ``certmon_pending_units`` and the
      counters ``certmon_rounds_total``, ``certmon_labels_total``, ``certmon_judge_events_total``,
      ``certmon_unsolicited_labels_total``, ``certmon_label_requests_total`` and
      ``certmon_expired_units_total{kind="pending"|"orphan_label"}`` from ``counts``;
    - per model with strata or a precision goal (the model's ``strata`` block):
      ``certmon_precision_half_width`` / ``certmon_precision_target`` (``half_width`` /
      ``precision_goal``, labelled with the block's ``certificate``) and, per stratum,
      ``certmon_stratum_traffic_ratio``, ``certmon_stratum_labels_total``,
      ``certmon_stratum_risk_estimate`` and ``certmon_stratum_radius`` (both omitted while the
      stratum has no label) and ``certmon_stratum_audit_rate_ratio``.

    A value that is missing, null, NaN or not a number is skipped (the series is absent for that
    scrape) rather than exposed as a fake number; the rest of the document is still exposed.
    Infinite values are exposed as ``+Inf``/``-Inf``. Labels are bounded by configuration
    (suite, model, certificate, method, side, state, rho); example ids never become labels.
    The top-level ``counters`` block is *not* exposed here: those operational counts belong to
    :class:`monitor.metrics.OperationalMetrics`, which owns the names
    ``certmon_events_*_total`` and ``certmon_alerts_emitted_total``.

    Examples
    --------
    >>> from prometheus_client import CollectorRegistry, generate_latest
    >>> state = {"suites": {"qa": {"models": {"m1": {
    ...     "counts": {"rounds": 3, "labels": 3, "judge": 40},
    ...     "certificates": {"risk": {"alpha": 0.1, "delta": 0.05, "methods": {"r_eval": {
    ...         "status": "certified", "log_e_certify": 3.2, "log_e_violate": -1.0,
    ...         "log_threshold": 2.9957, "risk_estimate": 0.02, "certified_at_round": 3}}}}}}}}}
    >>> registry = CollectorRegistry()
    >>> registry.register(StateCollector(lambda: state))
    >>> registry.get_sample_value("certmon_certificate_state", {"suite": "qa", "model": "m1",
    ...     "certificate": "risk", "method": "r_eval", "state": "certified"})
    1.0
    >>> registry.get_sample_value("certmon_rounds_total", {"suite": "qa", "model": "m1"})
    3.0

    With a version, an unchanged state is not read again:

    >>> reads, version = [], [0]
    >>> cached = StateCollector(lambda: reads.append(1) or state, version_fn=lambda: version[0])
    >>> _ = cached.collect(); _ = cached.collect(); len(reads)
    1
    >>> version[0] += 1
    >>> _ = cached.collect(); len(reads)
    2

    Guarantee (with ``version_fn``): a scrape shows the state as of a moment after it read the
    version, so a change whose version update comes after that read is shown by the first
    scrape that reads the new version; nothing is shown that the state did not say. This
    assumes the owner updates the version after (or while) it changes the state, never only
    before, and never returns an earlier version again for a different state.
    """

    def __init__(self, view_fn: Callable[[], Mapping[str, Any]],
                 detail: Detail = "full",
                 version_fn: Callable[[], Hashable] | None = None) -> None:
        if detail not in DETAILS:
            raise ValueError(f"detail must be one of {DETAILS}, not {detail!r}")
        self._view_fn = view_fn
        self._version_fn = version_fn
        self._rendered: tuple[Hashable, list[Metric]] | None = None
        self.detail: Detail = detail

    def describe(self) -> Iterable[Metric]:
        """Return the (empty) metric families, so a registry can detect name clashes.

        Returns
        -------
        Iterable[Metric]
            One family per metric name this collector can expose.
        """
        return [RenderedFamily(name, doc, typ, []) for name, typ, doc in family_order()]

    def collect(self) -> Iterable[Metric]:
        """Read the state once and render it into metric families.

        Returns
        -------
        Iterable[Metric]
            Every family (a :class:`RenderedFamily`), possibly without samples (e.g. before
            the first event); those of the last rendering while the version is unchanged.
        """
        version = None if self._version_fn is None else self._version_fn()
        last = self._rendered
        if last is not None and version is not None and last[0] == version:
            return last[1]
        # Pause the cyclic garbage collector while the view is built and rendered: the view
        # holds no reference cycles (reference counting frees it), and a full collection
        # over the engine's objects (over a million at 10,000 models) would otherwise land
        # in a scrape now and then, doubling its time. Restored even when the view fails.
        paused = gc.isenabled()
        if paused:
            gc.disable()
        try:
            lines = render_state(self._read(), self.detail)
        finally:
            if paused:
                gc.enable()
        families: list[Metric] = [RenderedFamily(name, doc, typ, lines[name])
                                   for name, typ, doc in family_order()]
        if version is not None:
            self._rendered = (version, families)
        return families

    def _read(self) -> Mapping[str, Any]:
        # A view built while the engine thread mutates its dicts can raise RuntimeError
        # ("dictionary changed size during iteration"): retry a few times before failing.
        for _ in range(_READ_ATTEMPTS - 1):
            try:
                return _mapping(self._view_fn())
            except RuntimeError:
                continue
        return _mapping(self._view_fn())


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
