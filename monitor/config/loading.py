"""Loading the configuration: TOML text or file, ``--set`` overrides, one-line errors.

:func:`parse_config` validates once, at the boundary, into the sections of
:mod:`monitor.config.root`; errors name the source, the key path and the problem, and a
secret setting's value is never echoed.
"""

from __future__ import annotations

import difflib
import tomllib
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from monitor.config.root import CertmonConfig
from monitor.errors import ConfigError

__all__ = ["apply_override", "load_config", "parse_config"]


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


def _secret(loc: str) -> bool:
    """Whether a setting's value must never appear in a message.

    Examples
    --------
    >>> _secret("kafka.sasl_plain_password"), _secret("metrics.port")
    (True, False)
    """
    return any(w in loc.lower() for w in ("password", "secret", "token", "key"))


def _section(annotation: Any) -> type[BaseModel] | None:
    """Return the configuration section (pydantic model) inside a field's type, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _section(arg)
        if found is not None:
            return found
    return None


def _table(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """Return the section a key path ``loc`` lies in (None when it leaves the sections).

    Examples
    --------
    >>> _table(("suites", 0, "certificates", 0, "betting")).__name__
    'CertificateConfig'
    """
    model: type[BaseModel] | None = CertmonConfig
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        if model is None or part not in model.model_fields:
            return None
        model = _section(model.model_fields[part].annotation)
    return model


def _keys(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def _explain(e: Any, loc: str) -> str | None:
    """Explain an unknown key or a value outside a closed set (None: another error)."""
    where = tuple(e["loc"])
    if e["type"] == "extra_forbidden" and where:
        model = _table(where)
        if model is None:
            return None
        keys = _keys(model)
        near = difflib.get_close_matches(str(where[-1]), keys, n=1, cutoff=0.6)
        hint = f"; did you mean {'.'.join([*map(str, where[:-1]), near[0]])}?" if near else ""
        return f"{loc}: unknown key{hint} (allowed keys: {', '.join(keys)})"
    if e["type"] == "literal_error" and not _secret(loc):
        expected = str(e.get("ctx", {}).get("expected", ""))
        allowed = [a.strip().strip("'") for a in expected.replace(" or ", ",").split(",")]
        allowed = [a for a in allowed if a]
        got = e.get("input")
        near = difflib.get_close_matches(str(got), allowed, n=1, cutoff=0.5)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        return (f"{loc}: {got!r} is not allowed{hint} "
                f"(allowed values: {', '.join(repr(a) for a in allowed)})")
    return None


def _format_errors(exc: ValidationError) -> str:
    r"""One line for all errors: each key path, what is wrong and, where it helps, a fix.

    Examples
    --------
    >>> try:
    ...     CertmonConfig.model_validate({"suites": [], "metrics": {"prot": 1}})
    ... except ValidationError as exc:
    ...     print(_format_errors(exc))  # doctest: +ELLIPSIS
    suites: ...; metrics.prot: unknown key; did you mean metrics.port? (allowed keys: ...port...)
    """
    parts = []
    for e in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in e["loc"]) or "<root>"
        explained = _explain(e, loc)
        if explained is not None:
            parts.append(explained)
            continue
        msg = str(e["msg"]).removeprefix("Value error, ")
        got = "" if e["type"] in ("missing", "extra_forbidden") else f" (got {e.get('input')!r})"
        if e["type"] == "value_error" or isinstance(e.get("input"), dict) or _secret(loc):
            got = ""  # a secret is never echoed, even a mistyped one
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
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    monitor.errors.ConfigError: <config>: suites.0.certificates.0.b: unknown key ...
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
