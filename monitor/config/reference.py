"""The configuration reference, ``docs/configuration.md``, generated from the pydantic models.

:func:`config_tables` walks :class:`~monitor.config.root.CertmonConfig` and every model
it holds, so a field or a section added to a model appears in the reference without editing
this module; :func:`render_reference` turns them into markdown (one section per TOML table,
one row per key: type, default, allowed values, description). Regenerate the file with::

    python -m monitor.config.reference --output docs/configuration.md

and ``tests/config/test_reference.py`` fails while it is out of date.

Examples
--------
>>> [t.path for t in config_tables()][:4]
['', '[[suites]]', '[[suites.certificates]]', '[suites.strata]']
>>> row = next(r for r in config_tables()[1].rows if r.key == "audit_rate")
>>> row.type, row.default, row.allowed
('float', '`0.05`', '[0, 1]')
"""

from __future__ import annotations

import argparse
import inspect
import sys
import types
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union

import annotated_types as at
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from monitor.config.effective import toml_value
from monitor.config.root import CertmonConfig

__all__ = ["ConfigTable", "Row", "config_tables", "main", "render_reference", "undocumented"]

COMMAND = "python -m monitor.config.reference --output docs/configuration.md"
"""The command that regenerates ``docs/configuration.md`` (from the repository root)."""


@dataclass(frozen=True)
class Row:
    """One key of a table: name, type, default, allowed values and description (markdown)."""

    key: str
    type: str
    default: str
    allowed: str
    description: str


@dataclass(frozen=True)
class ConfigTable:
    """One TOML table: its path (``[[suites]]``; ``""`` for the top level) and its keys."""

    path: str
    model: type[BaseModel]
    rows: tuple[Row, ...]


# ------------------------------------------------------------------------- annotations
def _arms(annotation: Any) -> list[Any]:
    """Return the non-None alternatives of a (possibly Optional / union) annotation."""
    if typing.get_origin(annotation) in (Union, types.UnionType):
        return [a for a in typing.get_args(annotation) if a is not type(None)]
    return [annotation]


def _strip(annotation: Any) -> tuple[Any, list[Any]]:
    """Peel ``Annotated`` layers: the bare type and the constraints found on the way."""
    found: list[Any] = []
    while typing.get_origin(annotation) is typing.Annotated:
        args = typing.get_args(annotation)
        annotation = args[0]
        for meta in args[1:]:
            found.extend(meta.metadata if isinstance(meta, FieldInfo) else [meta])
    return annotation, found


def _model_of(annotation: Any) -> tuple[type[BaseModel], bool] | None:
    """``(model, is_array)`` when the annotation is a table or an array of tables."""
    for arm in _arms(annotation):
        bare, _ = _strip(arm)
        if typing.get_origin(bare) is list:
            (item,) = typing.get_args(bare)
            item, _ = _strip(item)
            if inspect.isclass(item) and issubclass(item, BaseModel):
                return item, True
        elif inspect.isclass(bare) and issubclass(bare, BaseModel):
            return bare, False
    return None


def _type_name(annotation: Any) -> str:
    names: list[str] = []
    for arm in _arms(annotation):
        bare, _ = _strip(arm)
        if typing.get_origin(bare) is Literal:
            values = typing.get_args(bare)
            name = "string" if all(isinstance(v, str) for v in values) else "literal"
        elif typing.get_origin(bare) is list:
            (item,) = typing.get_args(bare)
            inner = _type_name(item)
            plural = {"table": "tables", "string": "strings", "integer": "integers",
                      "float": "floats", "boolean": "booleans"}
            name = f"array of {plural.get(inner, inner)}"
        elif inspect.isclass(bare) and issubclass(bare, BaseModel):
            name = "table"
        elif bare is SecretStr:
            name = "string (secret)"
        else:
            name = {str: "string", int: "integer", float: "float", bool: "boolean"}.get(
                bare, getattr(bare, "__name__", str(bare)))
        if name not in names:
            names.append(name)
    return " or ".join(names)


def _number(x: Any) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _range(constraints: list[Any]) -> list[str]:
    lo: Any = None
    hi: Any = None
    lo_open = hi_open = False
    parts: list[str] = []
    for c in constraints:
        if isinstance(c, at.Ge):
            lo, lo_open = c.ge, False
        elif isinstance(c, at.Gt):
            lo, lo_open = c.gt, True
        elif isinstance(c, at.Le):
            hi, hi_open = c.le, False
        elif isinstance(c, at.Lt):
            hi, hi_open = c.lt, True
        elif isinstance(c, at.MinLen) and c.min_length > 0:
            parts.append("non-empty" if c.min_length == 1 else f"at least {c.min_length} long")
        elif isinstance(c, at.MaxLen):
            parts.append(f"at most {c.max_length} long")
    if lo is not None and hi is not None:
        parts.insert(0, f"{'(' if lo_open else '['}{_number(lo)}, {_number(hi)}"
                        f"{')' if hi_open else ']'}")
    elif lo is not None:
        parts.insert(0, f"{'>' if lo_open else '>='} {_number(lo)}")
    elif hi is not None:
        parts.insert(0, f"{'<' if hi_open else '<='} {_number(hi)}")
    return parts


def _allowed(field: FieldInfo) -> str:
    """Return the allowed values: a Literal's choices, or the range / length constraints."""
    out: list[str] = []
    own = _range(list(field.metadata))
    for arm in _arms(field.annotation):
        bare, constraints = _strip(arm)
        out.extend(_range(constraints))
        if typing.get_origin(bare) is list:
            (item,) = typing.get_args(bare)
            item_bare, item_constraints = _strip(item)
            if typing.get_origin(item_bare) is Literal:
                out.append("each of " + ", ".join(f"`{toml_value(v)}`"
                                                  for v in typing.get_args(item_bare)))
            items = _range(item_constraints)
            if items:
                out.append("items " + ", ".join(items))
        elif typing.get_origin(bare) is Literal:
            out.append(", ".join(f"`{toml_value(v)}`" for v in typing.get_args(bare)))
    return "; ".join([*own, *out])


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value: Any = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return "table"
    return f"`{toml_value(value)}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


# ------------------------------------------------------------------------------ walking
def config_tables(root: type[BaseModel] = CertmonConfig) -> list[ConfigTable]:
    """Every TOML table of the configuration, depth first, in field order.

    A field whose type is a model is a table ``[path.key]``; a list of models is an array of
    tables ``[[path.key]]``.
    """
    out: list[ConfigTable] = []

    def walk(model: type[BaseModel], path: str) -> None:
        rows = []
        children: list[tuple[type[BaseModel], str]] = []
        for key, field in model.model_fields.items():
            nested = _model_of(field.annotation)
            if nested is not None:
                sub, array = nested
                dotted = f"{path.strip('[]')}.{key}" if path else key
                children.append((sub, f"[[{dotted}]]" if array else f"[{dotted}]"))
            rows.append(Row(key, _type_name(field.annotation), _default(field),
                            _allowed(field), field.description or ""))
        out.append(ConfigTable(path, model, tuple(rows)))
        for sub, sub_path in children:
            walk(sub, sub_path)

    walk(root, "")
    return out


def undocumented(root: type[BaseModel] = CertmonConfig) -> list[str]:
    """Return the keys (``table key``) whose model field has no (or a blank) description."""
    return [f"{t.path or '<top level>'} {r.key}" for t in config_tables(root) for r in t.rows
            if not r.description.strip()]


# ---------------------------------------------------------------------------- rendering
def _summary(model: type[BaseModel]) -> str:
    doc = inspect.getdoc(model) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _lines(tables: Sequence[ConfigTable]) -> Iterator[str]:
    yield "# Configuration reference"
    yield ""
    yield (f"<!-- Generated from the models in monitor/config by `{COMMAND}`; "
           "do not edit by hand. -->")
    yield ""
    yield ("certmon reads one TOML file (`--config FILE`), validated once at start; "
           "`--set key=value` overrides any key (dotted path, TOML value, e.g. "
           "`--set suites.0.audit_rate=0.1`). Unknown keys are errors. `certmon config "
           "--config FILE` prints the effective configuration with every default filled in "
           "(`--json` for JSON). A key that is *unset* by default has no value (TOML has no "
           "null): leave it out.")
    yield ""
    for t in tables:
        if t.path:
            yield f"- [`{t.path}`](#{_anchor(t.path)})"
    for t in tables:
        yield ""
        yield f"## `{t.path}`" if t.path else "## Top level"
        yield ""
        yield _summary(t.model)
        yield ""
        yield "| key | type | default | allowed values | description |"
        yield "|---|---|---|---|---|"
        for r in t.rows:
            yield (f"| `{r.key}` | {_cell(r.type)} | {_cell(r.default)} | {_cell(r.allowed)} | "
                   f"{_cell(r.description)} |")


def _anchor(path: str) -> str:
    """GitHub's anchor of a ``## `path` `` heading (punctuation dropped, dots kept out)."""
    return "".join(ch for ch in path.lower() if ch.isalnum() or ch in "-_ ").replace(" ", "-")


def render_reference(root: type[BaseModel] = CertmonConfig) -> str:
    """Return the markdown of ``docs/configuration.md``."""
    return "\n".join(_lines(config_tables(root))) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write the reference to ``--output`` (default: standard output)."""
    parser = argparse.ArgumentParser(prog="python -m monitor.config.reference",
                                     description="Generate docs/configuration.md.")
    parser.add_argument("--output", help="file to write (default: standard output)")
    args = parser.parse_args(argv)
    text = render_reference()
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
