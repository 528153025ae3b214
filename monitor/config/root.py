r"""The root of the configuration: the whole TOML file (suites, sinks), validated by pydantic.

:mod:`monitor.config.loading` reads it, with ``--set key=value`` overrides.
The minimal file of the example below is accepted as is; every other key has a default.
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
from monitor.selection_settings import SelectionSettings
from monitor.stats.changepoint.detector import DEFAULT_P
from monitor.stats.changepoint.drift import DEFAULT_DRIFT_HORIZON, DEFAULT_DRIFT_WARMUP

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

# the process-level sections live in monitor.config.runtime (re-exported here and by the package)
from monitor.config.certificates import (
    CertificateConfig,
    StrataConfig,
)
from monitor.config.certificates import Name as _Name
from monitor.config.certificates import PosFloat as _PosFloat
from monitor.config.certificates import PosInt as _PosInt
from monitor.config.certificates import Section as _Section
from monitor.config.certificates import drop_unset_optional as _drop_unset_optional
from monitor.config.runtime import (
    CheckpointConfig,
    EventsConfig,
    MetricsConfig,
    SourceConfig,
)


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

    Precision and strata (optional; absent: no precision interval, unstratified audits):
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

    name: _Name = Field(
        "*",
        description="Suite name, or a glob (`*`, `?`, `[...]`) matched against each event's "
        "`suite`. The first `[[suites]]` entry that matches configures the suite; events of "
        "suites no entry matches are counted as unrouted.")
    models: Annotated[list[_Name], Field(min_length=1)] = Field(
        ["*"],
        description="Model names or globs of this suite; events of other models are counted as "
        "unrouted. At least one.")
    audit_rate: Annotated[float, Field(ge=0.0, le=1.0)] = Field(
        0.05,
        description="Probability that a judged unit is audited (sent for a human label) when "
        "the judge event carries no `audit` flag: certmon decides with a salted hash of "
        "(suite, model, example_id), reproducible in replays. In [0, 1]; 0 audits nothing.")
    audit_salt: str = Field(
        "",
        description="Salt of the audit hash: changing it draws another audit sample. Keep it "
        "fixed across restarts, or the audited sample changes.")
    audit_policy: Literal["uniform", "active", "hedged"] = Field(
        "uniform", exclude_if=lambda v: v == "uniform",  # absent from dumps: fingerprints stay
        description="How certmon's own audits are drawn: `uniform` (every judged unit with "
        "probability `audit_rate`) or `active` (a unit's probability grows with the judge's "
        "uncertainty about it, sqrt(f (1 - f)) for the judge loss f read as a failure "
        "probability, with a floor and a uniform share chosen by estimated growth rate from "
        "earlier units, mean `audit_rate`; every judged unit then enters an inverse-propensity "
        "betting e-process, see docs/guarantees.md). `active` needs `audit_rate > 0` and "
        "refuses strata, a precision goal and comparisons (their per-stratum or paired "
        "probabilities would have to be composed with the per-unit one) and the family "
        "multiplicity rules (`fixed_sequence`, `e_bh`). `hedged` (opt-in) audits as `uniform` "
        "(certmon's hash against `audit_rate`; an event's own `audit` flag does not decide) "
        "and claims on the average of the per-label e-process (the certificate's primary "
        "method) and the every-unit inverse-propensity e-process, both read at each audited "
        "unit in audit order (docs/guarantees.md, \"Hedged audits\"); same constraints as "
        "`active`.")
    label_requests: bool = Field(
        True,
        description="Emit a label request (to `sinks.requests`) for each unit certmon audits "
        "itself. False when another system asks humans for labels.")
    multiplicity: Literal["none", "bonferroni", "fixed_sequence", "e_bh"] = Field(
        "none",
        description="How the suite's models and certificates share one error budget `delta`: "
        "`none` (each pair at its own `delta`), `bonferroni` (each at `delta / family_size`; "
        "models beyond the family are refused and listed as `refused_models`), "
        "`fixed_sequence` (in the listed order, each at the full `delta`, certified only after "
        "every earlier member) or `e_bh` (e-BH: false discovery rate over the certify "
        "e-values).")
    family_size: _PosInt | None = Field(
        None,
        description="Number of (model, certificate) pairs sharing the budget under "
        "`bonferroni`. Unset: listed models x certificates; required when `models` holds a "
        "glob. Integer >= 1, at least the listed models x certificates.")
    max_pending: _PosInt = Field(
        100_000,
        description="Audited judge losses waiting for their label, at most (per suite). The "
        "oldest is evicted beyond it and counted as `expired_pending` (its label is missing).")
    pending_ttl_seconds: _PosFloat = Field(
        7 * 86400.0,
        description="Seconds of event time an audited unit waits for its label before it is "
        "evicted as `expired_pending` (default: 7 days). Event time is the largest `ts` "
        "accepted in the suite.")
    max_orphans: _PosInt = Field(
        100_000,
        description="Labels waiting for their judge event, at most (per suite); beyond it the "
        "oldest is evicted and counted as `expired_orphans`.")
    orphan_ttl_seconds: _PosFloat = Field(
        86400.0,
        description="Seconds of event time a label waits for its judge event before it is "
        "evicted as `expired_orphans` (default: one day).")
    dedupe_max_ids: _PosInt = Field(
        100_000,
        description="Recent event ids (and judged / labelled units) remembered to recognise "
        "duplicates, at most (per suite). A duplicate whose original has left this window, "
        "and whose unit is neither pending, orphaned nor among the last `max_round_units` "
        "rounded units, is not recognised.")
    dedupe_ttl_seconds: _PosFloat = Field(
        86400.0,
        description="Seconds of event time an event id stays in the dedupe window (default: one "
        "day).")
    max_round_units: _PosInt = Field(
        200_000,
        description="Units already used in a round that are remembered (first in, first out), "
        "so a late duplicate label or judge of such a unit is not used twice.")
    judge_drift: bool = Field(
        True,
        description="Watch each model's judge for drift: two-sided e-detectors on the judge's "
        "bias (human minus judge loss) and on its disagreement rate, each against a band "
        "frozen after `judge_drift_warmup` labelled rounds; an alarm emits a `judge_drift` "
        "alert. Certificates stay valid either way.")
    judge_drift_warmup: Annotated[int, Field(ge=10)] = Field(
        DEFAULT_DRIFT_WARMUP,
        description="Labelled rounds per model observed before the judge-drift reference band "
        "is frozen and monitoring starts. Integer >= 10; a drift during the warm-up is not "
        "detected.")
    judge_drift_false_alarm: Annotated[float, Field(gt=0.0, lt=1.0)] = Field(
        DEFAULT_P,
        description="Probability of a false judge-drift alarm within `judge_drift_horizon` "
        "labelled rounds, split between the bias and disagreement detectors. Strictly between "
        "0 and 1.")
    judge_drift_horizon: _PosInt = Field(
        DEFAULT_DRIFT_HORIZON,
        description="Labelled rounds over which `judge_drift_false_alarm` bounds the "
        "false-alarm probability of the judge-drift detectors. Integer >= 1.")
    certificates: list[CertificateConfig] = Field(
        [],
        description="The suite's risk certificates (`[[suites.certificates]]`): at least one in "
        "monitor mode, none in selection mode; names unique.")
    strata: StrataConfig | None = Field(
        None,
        description="Stratification of the certified interval and of auditing "
        "(`[suites.strata]`). Unset: one stratum, auditing at `audit_rate`.")
    mode: Literal["monitor", "selection"] | None = Field(
        None,
        description="`selection` runs PULSE best-model identification over a fixed benchmark "
        "(needs `[suites.selection]`, no certificates); unset or `monitor`: certificates on "
        "live traffic.")
    selection: SelectionSettings | None = Field(
        None,
        description="The benchmark and bandit of a selection suite (`[suites.selection]`, with "
        "`mode = \"selection\"` only).")

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _drop_unset_optional(self, handler, ("strata", "mode", "selection"))

    @model_validator(mode="after")
    def _check(self) -> Self:
        # see monitor/selection_settings.py
        if self.mode == "selection" or self.selection is not None:
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
        if self.audit_policy in ("active", "hedged"):
            pol = self.audit_policy
            if self.audit_rate <= 0.0:
                raise ValueError(f'audit_policy = "{pol}" needs audit_rate > 0 (the budget)')
            if self.multiplicity in ("fixed_sequence", "e_bh"):
                raise ValueError(
                    f'audit_policy = "{pol}" supports multiplicity "none" or "bonferroni", not '
                    f"{self.multiplicity!r}")
            if self.strata is not None or goals or self.comparisons:
                raise ValueError(
                    f'audit_policy = "{pol}" cannot be combined with [suites.strata], a '
                    "certificate precision goal or [[suites.comparisons]]: their per-stratum or "
                    "paired audit probabilities are not composed with the per-unit one; use "
                    'audit_policy = "uniform" with them')
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


class AlertmanagerConfig(_Section):
    """Settings of the Alertmanager alert sink (``[sinks.alertmanager]``).

    The URLs come from the ``alertmanager:URL[,URL2...]`` entry of ``sinks.alerts``; this
    table only tunes the sink (see ``consumers.alertmanager.AlertmanagerSink``).
    """

    grafana_url: str | None = Field(
        None,
        description="Base URL of Grafana: each alert then links to the model's dashboard. "
        "Unset: no dashboard link.")
    resend_seconds: _PosFloat = Field(
        60.0,
        description="Seconds between two pushes of a still-active alert (Alertmanager forgets "
        "alerts that are not re-sent).")
    lifetime_seconds: _PosFloat = Field(
        3600.0,
        description="How long an active alert outlives a silent certmon (`endsAt` = last send + "
        "lifetime), at least 4 re-sends: a violation pushed before a crash stays visible "
        "through the outage.")
    timeout: _PosFloat = Field(
        5.0, description="Seconds to wait for Alertmanager's answer to one push (> 0).")
    basic_auth_username: str | None = Field(
        None,
        description="User name of HTTP basic auth towards Alertmanager; the password comes "
        "from `basic_auth_password_file` or `CERTMON_ALERTMANAGER_PASSWORD`. Unset: no basic "
        "auth.")
    basic_auth_password_file: str | None = Field(
        None, description="File holding the basic-auth password.")
    bearer_token_file: str | None = Field(
        None,
        description="File holding a bearer token (or set `CERTMON_ALERTMANAGER_BEARER_TOKEN`); "
        "not together with basic auth.")


class SinksConfig(_Section):
    """Output sinks: where alerts, label requests and dead letters go.

    Each is ``"stdout"``, ``"stderr"``, ``"file:PATH"``, ``"kafka"`` or ``"none"``.

    Label requests default to ``"auto"``: somewhere visible (see the field's description),
    never discarded unless ``"none"`` is configured.

    Dead letters (rejected events: reason, detail, raw bytes, source position) go to stderr
    unless configured otherwise, so bad input is never silently lost; ``"none"`` drops them
    (they are still counted in ``certmon_events_rejected_total``).

    ``alerts`` may also be ``"alertmanager:URL[,URL2...]"`` (push to Alertmanager's v2 API),
    or a list of specifications: every alert then goes to each, e.g.
    ``["kafka", "alertmanager:http://alertmanager:9093"]``.
    """

    alerts: str | Annotated[list[_Name], Field(min_length=1)] = Field(
        "stdout",
        description="Where alerts go: `stdout`, `stderr`, `file:PATH`, `none`, `kafka` (the "
        "`kafka.topics.alerts` topic), `alertmanager:URL[,URL2...]` (Alertmanager's v2 API), "
        "or a list of these (every alert goes to each).")
    requests: str = Field(
        "auto",
        description="Where label requests (one per unit certmon audits itself) and the "
        "evaluation requests of selection suites go. `auto` (default): the Kafka requests "
        "topic when the source is Kafka; for `certmon replay`, `requests.jsonl` next to "
        "STATE.json (--state-out); for `certmon run` from a file or stdin, stdout. Or "
        "`stdout`, `stderr`, `file:PATH`, `kafka`, or `none` (counted but discarded, with a "
        "warning at start). Protocol: docs/label-loop.md.")
    dead_letters: str = Field(
        "stderr",
        description="Where rejected events go (reason, detail, raw bytes, source position): "
        "`stdout`, `stderr`, `file:PATH`, `kafka` or `none` (dropped, still counted in "
        "`certmon_events_rejected_total`).")
    alertmanager: AlertmanagerConfig = Field(
        AlertmanagerConfig(),
        description="Settings of the Alertmanager alert sink (`[sinks.alertmanager]`).")

    @property
    def alert_specs(self) -> list[str]:
        """The alert sink specifications as a list (one element for a plain string)."""
        return [self.alerts] if isinstance(self.alerts, str) else list(self.alerts)


class CertmonConfig(_Section):
    """The whole configuration."""

    suites: Annotated[list[SuiteConfig], Field(min_length=1)] = Field(
        description="The suites (`[[suites]]`), at least one; an event goes to the first whose "
        "`name` matches its suite.")
    checkpoint: CheckpointConfig = Field(
        CheckpointConfig(), description="Local checkpoints (`[checkpoint]`).")
    metrics: MetricsConfig = Field(
        MetricsConfig(), description="The Prometheus endpoint (`[metrics]`).")
    sinks: SinksConfig = Field(
        SinksConfig(), description="Output sinks (`[sinks]`).")
    source: SourceConfig = Field(
        SourceConfig(), description="Input of `certmon run` (`[source]`).")
    events: EventsConfig = Field(
        EventsConfig(), description="Event validation limits (`[events]`).")
    kafka: KafkaConfig = Field(
        default_factory=KafkaConfig, description="Kafka source, sinks and checkpoints (`[kafka]`).")
