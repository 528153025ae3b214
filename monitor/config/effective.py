r"""The effective configuration: every key with its value, defaults filled in, as TOML or JSON.

What ``certmon config`` prints. Secrets are masked (``"**********"``; in URLs, such as an
Alertmanager sink's, the user information and query values: ``***``); keys that are unset
(no value: TOML has no null) are listed as comments in the TOML form and as ``null`` in the
JSON form. The TOML form parses back to the same configuration when it holds no secret.

Examples
--------
>>> from monitor.config.loading import parse_config
>>> cfg = parse_config('[[suites]]\n[[suites.certificates]]\nname = "r"\nalpha = 0.1\n'
...                    'delta = 0.05\n')
>>> text = effective_toml(cfg)
>>> print(text.split("\n\n")[0])
[[suites]]
name = "*"
models = ["*"]
audit_rate = 0.05
audit_salt = ""
label_requests = true
multiplicity = "none"
# family_size = (unset)
max_pending = 100000
pending_ttl_seconds = 604800.0
max_orphans = 100000
orphan_ttl_seconds = 86400.0
dedupe_max_ids = 100000
dedupe_ttl_seconds = 86400.0
max_round_units = 200000
judge_drift = true
judge_drift_warmup = 500
judge_drift_false_alarm = 0.02
judge_drift_horizon = 4500
>>> parse_config(text) == cfg
True
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from monitor.config.root import CertmonConfig

__all__ = ["effective_document", "effective_json", "effective_toml", "toml_value"]

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f",
            "\r": "\\r"}


def effective_document(config: CertmonConfig) -> dict[str, Any]:
    """Return the configuration as JSON-ready data: every key, defaults filled in, secrets masked.

    Optional sections that are unset (``strata``, ``selection``, a certificate's
    ``precision``...) are left out, as in the configuration fingerprint.
    """
    doc: dict[str, Any] = _without_url_credentials(config.model_dump(mode="json"))
    return doc


_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^/?#@\s]*@)?"
                  r"(?P<rest>[^?#\s]*)(?:\?(?P<query>[^#\s]*))?")


def _without_url_credentials(value: Any) -> Any:
    """Return ``value`` with the credentials of every URL in its strings masked.

    A URL's user information and each of its query values (tokens travel there) become
    ``***``; scheme, host, port, path and query keys stay (they say which endpoint is meant).

    Examples
    --------
    >>> _without_url_credentials({"alerts": ["file:a.jsonl",
    ...     "alertmanager:https://u:pw@am:9093/x?token=s3cret&y=1"]})
    {'alerts': ['file:a.jsonl', 'alertmanager:https://***@am:9093/x?token=***&y=***']}
    """
    if isinstance(value, str):
        if "://" not in value:
            return value

        def mask(m: re.Match[str]) -> str:
            user = "***@" if m.group("user") else ""
            query = m.group("query")
            masked = "" if query is None else "?" + "&".join(
                f"{pair.partition('=')[0]}=***" if pair else pair for pair in query.split("&"))
            return f"{m.group('scheme')}{user}{m.group('rest')}{masked}"

        return _URL.sub(mask, value)
    if isinstance(value, dict):
        return {k: _without_url_credentials(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_url_credentials(v) for v in value]
    return value


def effective_json(config: CertmonConfig) -> str:
    """Return :func:`effective_document` as indented JSON (unset keys are ``null``)."""
    return json.dumps(effective_document(config), indent=2, ensure_ascii=False) + "\n"


def effective_toml(config: CertmonConfig, header: str = "") -> str:
    """Return :func:`effective_document` as TOML (unset keys as ``# key = (unset)`` comments).

    Parameters
    ----------
    config : CertmonConfig
        A validated configuration.
    header : str
        Comment lines put first (each line gets a ``# ``).
    """
    out = [f"# {line}".rstrip() for line in header.splitlines()]
    _table(effective_document(config), [], None, out)
    return "\n".join(out).lstrip("\n") + "\n"


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _string(key)


def _string(text: str) -> str:
    parts = []
    for ch in text:
        if ch in _ESCAPES:
            parts.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            parts.append(f"\\u{ord(ch):04x}")
        else:
            parts.append(ch)
    return '"' + "".join(parts) + '"'


def toml_value(value: Any) -> str:
    r"""Return a TOML literal for a JSON-ready scalar or list.

    Examples
    --------
    >>> [toml_value(v) for v in (True, 3, 0.5, math.inf, 'a"b', ["x", 1])]
    ['true', '3', '0.5', 'inf', '"a\\"b"', '["x", 1]']
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_key(k)} = {toml_value(v)}" for k, v in value.items())
        return "{" + inner + "}"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value)


def _table(table: Mapping[str, Any], path: list[str], header: str | None,
           out: list[str]) -> None:
    if header is not None:
        out.extend(["", header])
    nested: list[tuple[str, Any]] = []
    for key, value in table.items():
        if isinstance(value, Mapping) or _is_table_array(value):
            nested.append((key, value))
        elif value is None:
            out.append(f"# {_key(key)} = (unset)")
        else:
            out.append(f"{_key(key)} = {toml_value(value)}")
    for key, value in nested:
        sub = [*path, key]
        dotted = ".".join(_key(k) for k in sub)
        if isinstance(value, Mapping):
            _table(value, sub, f"[{dotted}]", out)
        else:
            for item in value:
                _table(item, sub, f"[[{dotted}]]", out)
