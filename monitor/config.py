r"""Configuration: one TOML file validated by pydantic, with ``--set key=value`` overrides.

The minimal file of the engine issue is accepted as is; every other key has a default.
Unknown keys are errors (a typo must not silently fall back to a default).

Examples
--------
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
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from monitor.config_kafka import KafkaConfig
from monitor.errors import ConfigError

__all__ = [
    "METHODS",
    "CertificateConfig",
    "CertmonConfig",
    "CheckpointConfig",
    "EventsConfig",
    "MetricsConfig",
    "SinksConfig",
    "SourceConfig",
    "SuiteConfig",
    "apply_override",
    "load_config",
    "parse_config",
]

Method = Literal["r_eval", "r_autoeval", "r_autoeval_plus"]
METHODS: tuple[Method, ...] = ("r_eval", "r_autoeval", "r_autoeval_plus")
_Prob = Annotated[float, Field(gt=0.0, lt=1.0)]
_Name = Annotated[str, Field(min_length=1)]
_PosInt = Annotated[int, Field(ge=1)]
_PosFloat = Annotated[float, Field(gt=0.0)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class CertificateConfig(_Section):
    """A risk certificate ``R <= alpha`` at level ``1 - delta``, checked by several methods."""

    name: _Name
    alpha: _Prob
    delta: _Prob
    methods: Annotated[list[Method], Field(min_length=1)] = list(METHODS)
    primary: Method | None = None
    betting: Literal["wsr", "up"] = "wsr"
    rhos: _PosInt = 10
    bet_cap: _Prob = 0.5
    horizon: _PosInt | None = None
    up_grid: _PosInt = 64
    cs_grid: _PosInt | None = 1000

    @model_validator(mode="after")
    def _check(self) -> Self:
        if len(set(self.methods)) != len(self.methods):
            raise ValueError("methods must not repeat")
        if self.primary is None:
            plus = "r_autoeval_plus"
            self.primary = plus if plus in self.methods else self.methods[0]
        elif self.primary not in self.methods:
            raise ValueError(f"primary {self.primary!r} is not one of methods {self.methods}")
        return self

    @property
    def primary_method(self) -> str:
        """The method whose status drives alerts."""
        return self.primary or self.methods[0]


class SuiteConfig(_Section):
    """One suite (or a glob of suites) with its models, audit sampling, join bounds, certificates.

    Notes
    -----
    ``multiplicity`` shares the suite's error budget across its family of
    (model, certificate) pairs: ``bonferroni`` tests each at ``delta / family_size``
    (``family_size`` defaults to the number of listed models times the number of
    certificates and is required when a model pattern is a glob such as ``"*"``, because
    the family would be unknown in advance); ``fixed_sequence`` and ``e_bh`` are applied
    when reading the state (see :mod:`monitor.state.family`).
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
    certificates: Annotated[list[CertificateConfig], Field(min_length=1)]

    @model_validator(mode="after")
    def _check(self) -> Self:
        names = [c.name for c in self.certificates]
        if len(set(names)) != len(names):
            raise ValueError(f"certificate names must be unique, got {names}")
        if (
            self.multiplicity == "bonferroni"
            and self.family_size is None
            and any(_is_glob(m) for m in self.models)
        ):
            raise ValueError(
                "family_size is required with multiplicity = 'bonferroni' when models contains a "
                "glob (the number of models is not known in advance)"
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


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


class CheckpointConfig(_Section):
    """Where and how often to checkpoint (``dir`` unset: no checkpoints)."""

    dir: str | None = None
    key: _Name = "certmon"
    every_events: _PosInt = 100_000
    every_seconds: _PosFloat = 30.0


class MetricsConfig(_Section):
    """Prometheus endpoint."""

    enabled: bool = True
    host: str = "0.0.0.0"
    port: Annotated[int, Field(ge=0, le=65535)] = 9108


class SinksConfig(_Section):
    """Output sinks: ``"stdout"``, ``"stderr"``, ``"file:PATH"`` or ``"none"``."""

    alerts: str = "stdout"
    requests: str = "none"
    dead_letters: str = "none"


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
    """Event validation limits."""

    max_bytes: _PosInt = 64 * 1024


class CertmonConfig(_Section):
    """The whole configuration."""

    suites: Annotated[list[SuiteConfig], Field(min_length=1)]
    checkpoint: CheckpointConfig = CheckpointConfig()
    metrics: MetricsConfig = MetricsConfig()
    sinks: SinksConfig = SinksConfig()
    source: SourceConfig = SourceConfig()
    events: EventsConfig = EventsConfig()
    kafka: KafkaConfig = Field(default_factory=KafkaConfig)


def _parse_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def apply_override(doc: dict[str, Any], override: str) -> None:
    """Apply one ``dotted.path=value`` override to a raw TOML document in place.

    The value is parsed as a TOML literal (``9100``, ``0.1``, ``true``, ``["a", "b"]``,
    ``"text"``); if it is not a valid literal it is taken as a plain string. Integer path
    parts index lists; missing tables are created.

    Raises
    ------
    ConfigError
        Malformed override or a path that does not fit the document.

    Examples
    --------
    >>> d = {"suites": [{"name": "a"}]}
    >>> apply_override(d, "suites.0.audit_rate=0.1"); apply_override(d, "sinks.alerts=file:/tmp/a")
    >>> d
    {'suites': [{'name': 'a', 'audit_rate': 0.1}], 'sinks': {'alerts': 'file:/tmp/a'}}
    """
    key, sep, raw = override.partition("=")
    key = key.strip()
    if not sep or not key or any(not p for p in key.split(".")):
        raise ConfigError(f"--set {override!r}: expected key=value with a dotted key")
    parts = key.split(".")
    node: Any = doc
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        where = ".".join(parts[: i + 1])
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ConfigError(f"--set {key}: {where} is not an index of a list of {len(node)}")
            if last:
                node[int(part)] = _parse_value(raw.strip())
            else:
                node = node[int(part)]
        elif isinstance(node, dict):
            if last:
                node[part] = _parse_value(raw.strip())
            else:
                node = node.setdefault(part, {})
        else:
            raise ConfigError(f"--set {key}: {'.'.join(parts[:i])} is a value, not a table")


def _format_errors(exc: ValidationError) -> str:
    parts = []
    for e in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in e["loc"]) or "<root>"
        msg = str(e["msg"]).removeprefix("Value error, ")
        got = "" if e["type"] in ("missing", "extra_forbidden") else f" (got {e.get('input')!r})"
        if e["type"] == "value_error" or isinstance(e.get("input"), dict):
            got = ""
        parts.append(f"{loc}: {msg}{got}")
    return "; ".join(parts)


def parse_config(
    text: str, overrides: list[str] | tuple[str, ...] = (), source: str = "<config>"
) -> CertmonConfig:
    r"""Parse TOML text plus overrides into a :class:`CertmonConfig`.

    Raises
    ------
    ConfigError
        One line naming the source, the key path and the problem.

    Examples
    --------
    >>> parse_config("[[suites]]\n[[suites.certificates]]\nname='r'\nalpha=0.1\ndelta=0.1\nb=1")
    Traceback (most recent call last):
    ...
    monitor.errors.ConfigError: <config>: suites.0.certificates.0.b: Extra inputs are not permitted
    """
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: invalid TOML: {exc}") from None
    for ov in overrides:
        apply_override(doc, ov)
    try:
        return CertmonConfig.model_validate(doc)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_format_errors(exc)}") from None


def load_config(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> CertmonConfig:
    """Read and validate a TOML configuration file.

    Examples
    --------
    >>> load_config("/nonexistent.toml")
    Traceback (most recent call last):
    ...
    monitor.errors.ConfigError: cannot read config /nonexistent.toml: No such file or directory
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"cannot read config {path}: not UTF-8 text") from None
    return parse_config(text, overrides, source=str(path))
