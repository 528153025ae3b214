r"""Configuration sections: one TOML file validated by pydantic.

:mod:`monitor.config.loading` reads it, with ``--set key=value`` overrides.
The minimal file of the engine issue is accepted as is; every other key has a default.
Unknown keys are errors (a typo must not silently fall back to a default).

Examples
--------
>>> from monitor.config.loading import parse_config
>>> minimal = '''
... [[suites]]
... name = "*"
... models = ["*"]
... audit_rate = 0.05
... [[suites.certificates]]
... name = "risk"
... alpha = 0.1
... delta = 0.05
... '''
>>> cfg = parse_config(minimal, overrides=["metrics.port=9200", "suites.0.audit_rate=0.1"])
>>> cfg.metrics.port, cfg.suites[0].audit_rate, cfg.suites[0].certificates[0].primary
(9200, 0.1, 'r_autoeval_plus')
>>> parse_config(minimal, ["suites.0.audit_rate=2"])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
monitor.errors.ConfigError: <config>: suites.0.audit_rate: Input should be less than or equal...
"""

from __future__ import annotations

import fnmatch
from typing import Annotated, Any, Literal, Self

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from monitor.config.comparisons import ComparisonConfig
from monitor.config.kafka import KafkaConfig
from monitor.selection import SelectionSettings

# the certificate and strata sections are re-exported by the package (monitor.config), not here
__all__ = [
    "AlertmanagerConfig",
    "CertmonConfig",
    "CheckpointConfig",
    "EventsConfig",
    "MetricsConfig",
    "SinksConfig",
    "SourceConfig",
    "SuiteConfig",
]

from monitor.config.sections import (
    CertificateConfig,
    StrataConfig,
)
from monitor.config.sections import Name as _Name
from monitor.config.sections import PosFloat as _PosFloat
from monitor.config.sections import PosInt as _PosInt
from monitor.config.sections import Section as _Section
from monitor.config.sections import drop_unset_optional as _drop_unset_optional


class SuiteConfig(_Section):
    """One suite (or a glob of suites) with its models, audit sampling, join bounds, certificates.

    Notes
    -----
    ``multiplicity`` shares the suite's error budget across its family of
    (model, certificate) pairs: ``bonferroni`` tests each at ``delta / family_size``
    (``family_size`` defaults to the number of listed models times the number of
    certificates and is required when a model pattern is a glob such as ``"*"``, because
    the family would be unknown in advance; models seen once the family is full are refused
    and reported as ``refused_models``, since testing them would spend more than ``delta``);
    ``fixed_sequence`` and ``e_bh`` are applied when reading the state (see
    :mod:`monitor.state.family`).

    Precision and strata (optional; absent means the behaviour of the engine issue):
    ``precision = epsilon`` on one certificate adds a Cer-Eval certified interval for each
    model's risk (at that certificate's level after multiplicity) and a ``precision_reached``
    alert when its half-width first drops to epsilon or below; a ``[suites.strata]`` table
    (:class:`StrataConfig`) stratifies that interval and steers the audit rate per stratum.
    Without ``[suites.strata]`` the interval has one stratum and auditing is unchanged.

    Examples
    --------
    >>> cert = {"name": "risk", "alpha": 0.1, "delta": 0.05, "precision": 0.03}
    >>> s = SuiteConfig.model_validate({"audit_rate": 0.1, "certificates": [cert],
    ...     "strata": {"by": "judge_loss", "count": 4, "floor": 0.02}})
    >>> s.strata.warmup, s.strata.allocation, s.certificates[0].precision
    (1000, 'cereval', 0.03)
    >>> SuiteConfig.model_validate({"audit_rate": 0.0, "certificates": [cert],
    ...     "strata": {"count": 2}})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for SuiteConfig
    ...
    """

    name: _Name = "*"
    models: Annotated[list[_Name], Field(min_length=1)] = ["*"]
    audit_rate: Annotated[float, Field(ge=0.0, le=1.0)] = 0.05
    audit_salt: str = ""
    label_requests: bool = True
    multiplicity: Literal["none", "bonferroni", "fixed_sequence", "e_bh"] = "none"
    family_size: _PosInt | None = None
    max_pending: _PosInt = 100_000
    pending_ttl_seconds: _PosFloat = 7 * 86400.0
    max_orphans: _PosInt = 100_000
    orphan_ttl_seconds: _PosFloat = 86400.0
    dedupe_max_ids: _PosInt = 100_000
    dedupe_ttl_seconds: _PosFloat = 86400.0
    max_round_units: _PosInt = 200_000
    # judge drift: two-sided e-detectors on the judge's bias (human - judge loss) and on its
    # disagreement rate, each against a band frozen after a warm-up of labelled rounds; false
    # alarms at most judge_drift_false_alarm per judge_drift_horizon rounds (split between them)
    judge_drift: bool = True
    judge_drift_warmup: Annotated[int, Field(ge=10)] = 500
    judge_drift_false_alarm: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.02
    judge_drift_horizon: _PosInt = 4500
    certificates: list[CertificateConfig] = []
    strata: StrataConfig | None = None
    # Best-model selection (PULSE): mode = "selection" + [suites.selection]; None = monitor.
    mode: Literal["monitor", "selection"] | None = None
    selection: SelectionSettings | None = None

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _drop_unset_optional(self, handler, ("strata", "mode", "selection"))

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.mode == "selection" or self.selection is not None:  # see monitor/selection.py
            if self.mode != "selection" or self.selection is None:
                raise ValueError('selection needs mode = "selection" and [suites.selection]')
            if self.certificates or self.strata is not None:
                raise ValueError("certificates and strata are not used in selection mode")
            return self
        if not self.certificates:
            raise ValueError("certificates: at least one [[suites.certificates]] is required")
        names = [c.name for c in self.certificates]
        if len(set(names)) != len(names):
            raise ValueError(f"certificate names must be unique, got {names}")
        goals = [c.name for c in self.certificates if c.precision is not None]
        if len(goals) > 1:
            raise ValueError(f"at most one certificate per suite may set precision, got {goals}")
        if self.strata is not None:
            budget = self.strata.budget if self.strata.budget is not None else self.audit_rate
            if budget <= 0.0:
                raise ValueError(
                    "strata needs a positive label budget: set strata.budget or audit_rate > 0"
                )
            if self.strata.floor > budget:
                raise ValueError(
                    f"strata.floor ({self.strata.floor}) must not exceed the budget ({budget})"
                )
        if (
            self.multiplicity == "bonferroni"
            and self.family_size is None
            and any(_is_glob(m) for m in self.models)
        ):
            raise ValueError(
                "family_size is required with multiplicity = 'bonferroni' when models contains a "
                "glob (the number of models is not known in advance)"
            )
        listed = sum(not _is_glob(m) for m in self.models) * len(self.certificates)
        if self.family_size is not None and listed > self.family_size:
            raise ValueError(
                f"family_size ({self.family_size}) is smaller than the listed models x "
                f"certificates ({listed})"
            )
        return self

    @property
    def effective_family_size(self) -> int:
        """Family size used by Bonferroni (configured, or listed models x certificates)."""
        if self.family_size is not None:
            return self.family_size
        if any(_is_glob(m) for m in self.models):
            return len(self.certificates)
        return len(self.models) * len(self.certificates)

    def matches_suite(self, suite: str) -> bool:
        """Return True when ``suite`` matches this entry's name or glob."""
        return fnmatch.fnmatchcase(suite, self.name)

    def matches_model(self, model: str) -> bool:
        """Return True when ``model`` matches one of the model patterns."""
        return any(fnmatch.fnmatchcase(model, p) for p in self.models)

    comparisons: list[ComparisonConfig] = Field(default=[], exclude_if=lambda v: not v, description="Candidate-vs-baseline comparisons of this suite's models ([[suites.comparisons]]; absent from dumps while empty, so fingerprints do not change).")  # noqa: E501

    @model_validator(mode="after")
    def _check_comparisons(self) -> Self:
        names = [c.name for c in self.comparisons]
        if len(set(names)) != len(names):
            raise ValueError(f"comparison names must be unique, got {names}")
        for c in self.comparisons:  # listed models: exact names; globs: a matching pattern
            c.check_models(self.matches_model)
        return self


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


class CheckpointConfig(_Section):
    """Where and how often to checkpoint (``dir`` unset: no checkpoints)."""

    dir: str | None = None
    key: _Name = "certmon"
    every_events: _PosInt = 100_000
    every_seconds: _PosFloat = 30.0


class MetricsConfig(_Section):
    """Prometheus endpoint (``monitor.metrics.server``; see ``SECURITY.md``).

    ``host`` defaults to the loopback interface: containers set ``"0.0.0.0"`` explicitly.
    ``workers`` threads answer at most ``max_connections`` connections at once (more are
    closed at once); a connection idle for ``idle_timeout`` seconds is closed, and one that has
    not delivered its whole request (TLS handshake, request line, headers) within
    ``request_timeout`` seconds of reaching a worker is closed too, however it trickles (one
    request per connection); ``/metrics``
    is rendered at most once per ``min_scrape_interval`` seconds whatever the number of
    scrapers, and answered at most ``max_scrapes_per_second`` times per second on average
    (excess scrapers wait; 0 disables the pacing). TLS with ``tls_cert_file`` and
    ``tls_key_file``; basic auth with ``basic_auth_username`` and a password from
    ``basic_auth_password_file`` or the ``CERTMON_METRICS_PASSWORD`` environment variable
    (never from the config file).
    ``detail = "shown"`` (default) exports the per-method series of each certificate's primary
    method only and no ``certmon_rho_weight_ratio``; ``"full"`` every method and every rho
    (about twice the series per model: the counts are in ``deploy/README.md``).
    """

    enabled: bool = True
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 9108
    workers: Annotated[int, Field(ge=1, le=64)] = 2
    max_connections: Annotated[int, Field(ge=1, le=1024)] = 16
    idle_timeout: _PosFloat = 5.0
    request_timeout: _PosFloat = 3.0
    min_scrape_interval: Annotated[float, Field(ge=0.0)] = 1.0
    max_scrapes_per_second: Annotated[float, Field(ge=0.0)] = 10.0
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    basic_auth_username: str | None = None
    basic_auth_password_file: str | None = None
    # per-method / per-rho detail of the state series: "shown" (each certificate's primary
    # method, no certmon_rho_weight_ratio) or "full" (every method, per rho)
    detail: Literal["full", "shown"] = "shown"


class AlertmanagerConfig(_Section):
    """Settings of the Alertmanager alert sink (``[sinks.alertmanager]``).

    The URLs come from the ``alertmanager:URL[,URL2...]`` entry of ``sinks.alerts``; this
    table only tunes the sink (see ``consumers.alertmanager.AlertmanagerSink``).
    """

    grafana_url: str | None = None
    resend_seconds: _PosFloat = 60.0
    # how long an active alert outlives a silent certmon (endsAt = last send + lifetime); at
    # least 4 re-sends; a violation pushed before a crash stays visible through the outage
    lifetime_seconds: _PosFloat = 3600.0
    timeout: _PosFloat = 5.0
    # authentication as Prometheus configures it: basic auth or a bearer token, secrets
    # from a file or the environment (CERTMON_ALERTMANAGER_PASSWORD / _BEARER_TOKEN) only
    basic_auth_username: str | None = None
    basic_auth_password_file: str | None = None
    bearer_token_file: str | None = None


class SinksConfig(_Section):
    """Output sinks: ``"stdout"``, ``"stderr"``, ``"file:PATH"`` or ``"none"``.

    Dead letters (rejected events: reason, detail, raw bytes, source position) go to stderr
    unless configured otherwise, so bad input is never silently lost; ``"none"`` drops them
    (they are still counted in ``certmon_events_rejected_total``).

    ``alerts`` may also be ``"alertmanager:URL[,URL2...]"`` (push to Alertmanager's v2 API),
    or a list of specifications: every alert then goes to each, e.g.
    ``["kafka", "alertmanager:http://alertmanager:9093"]``.
    """

    alerts: str | Annotated[list[_Name], Field(min_length=1)] = "stdout"
    requests: str = "none"
    dead_letters: str = "stderr"
    alertmanager: AlertmanagerConfig = AlertmanagerConfig()

    @property
    def alert_specs(self) -> list[str]:
        """The alert sink specifications as a list (one element for a plain string)."""
        return [self.alerts] if isinstance(self.alerts, str) else list(self.alerts)


class SourceConfig(_Section):
    """Input for ``certmon run``: a JSONL file (optionally followed), stdin, or Kafka."""

    kind: Literal["file", "stdin", "kafka"] = "stdin"
    path: str | None = None
    follow: bool = False
    poll_seconds: _PosFloat = 0.2
    max_events_per_second: _PosFloat | None = None

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.kind == "file" and not self.path:
            raise ValueError("path is required when kind = 'file'")
        return self


class EventsConfig(_Section):
    """Event validation limits.

    ``max_ts_jump_seconds``: an event stamped more than this ahead of both its suite's
    event time (the largest ``ts`` accepted) and the wall clock is dead-lettered as
    ``implausible_ts`` instead of moving the event time, so one bad clock or forged event
    cannot expire every pending join. Events that are not in the future (a suite silent for
    longer than the bound, a replay of past data) are never refused by it.

    Cardinality limits (state is created only by accepted events, and only within them):
    ``max_id_bytes`` bounds the UTF-8 length of ``event_id``, ``example_id``, ``suite``,
    ``model`` and ``stratum`` (a longer one is dead-lettered as ``id_too_long``: ids are kept
    for dedupe, names become state keys and metric labels, a stratum is kept with every
    pending audited unit); ``max_suites`` bounds the suites of one
    engine (a Kafka partition, or the file runner), ``max_models_per_suite`` and
    ``max_models`` the models of one suite and of the engine. An event that would create a
    suite or a model beyond them is dead-lettered as ``too_many_suites`` /
    ``too_many_models``. None of them is part of the checkpoint fingerprint: they only
    decide what is dead-lettered, so they can be tuned across a restart (a restored state
    above a lowered limit is kept; only new suites and models are refused).
    """

    max_bytes: _PosInt = 64 * 1024
    max_ts_jump_seconds: _PosFloat = 30 * 86400.0
    max_id_bytes: _PosInt = 256
    max_suites: _PosInt = 10_000
    max_models_per_suite: _PosInt = 100_000
    max_models: _PosInt = 100_000


class CertmonConfig(_Section):
    """The whole configuration."""

    suites: Annotated[list[SuiteConfig], Field(min_length=1)]
    checkpoint: CheckpointConfig = CheckpointConfig()
    metrics: MetricsConfig = MetricsConfig()
    sinks: SinksConfig = SinksConfig()
    source: SourceConfig = SourceConfig()
    events: EventsConfig = EventsConfig()
    kafka: KafkaConfig = Field(default_factory=KafkaConfig)
