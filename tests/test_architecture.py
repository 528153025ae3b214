"""The package map and its rules, checked on the source (ast; no import side effects).

Rules (README, "Architecture"):

- layers import one way: ``monitor/stats`` <- ``monitor`` (core) <- ``consumers``;
- ``monitor/stats`` is pure math: numpy and the standard library only, and each method family
  imports only the families its ``__init__`` names;
- no import cycle between files of ``monitor/`` and ``consumers/`` (imports under
  ``TYPE_CHECKING`` aside; imports inside functions count);
- no private name (``_x``) imported from another module, and no private attribute of an object
  other than ``self`` / ``cls`` touched unless the module itself defines that name.
- nothing installed imports the test-only code (``tests``, e.g. ``tests/support``).

An ast-based test instead of ``import-linter``: no extra dependency, the private-name rules are
not expressible there, and ``TYPE_CHECKING`` blocks are handled explicitly.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STDLIB = set(sys.stdlib_module_names) | {"__future__"}
# method family -> families of monitor.stats it may import (besides itself and multiplicity)
FAMILY_DEPS = {"betting": set(), "cereval": set(), "stratppi": {"cereval"},
               "pulse": {"betting"}, "changepoint": set(),
               "comparison": {"betting", "changepoint"}}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files() -> dict[str, Path]:
    return {module_name(p): p for top in ("monitor", "consumers")
            for p in sorted((ROOT / top).rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def imports(path: Path, name: str) -> list[tuple[str, list[str], int]]:
    """(module, imported names, line) of every runtime import (TYPE_CHECKING blocks skipped)."""
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    out = []
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                mod = ".".join([*base, mod] if mod else base)
            out.append((mod, [a.name for a in node.names], node.lineno))
    return out


FILES = source_files()


def resolve(mod: str, names: list[str]) -> list[str]:
    """Our modules an import statement loads (``from pkg import sub`` loads ``pkg.sub``)."""
    hits = [mod] if mod in FILES else []
    hits += [f"{mod}.{n}" for n in names if f"{mod}.{n}" in FILES]
    return hits


def test_layers_one_way() -> None:
    bad = []
    for name, path in FILES.items():
        for mod, _, line in imports(path, name):
            top = mod.split(".")[0]
            if name.startswith("monitor.stats"):
                ok = top in STDLIB or top == "numpy" or mod.startswith("monitor.stats")
            elif name.startswith("monitor"):
                ok = top != "consumers"
            else:
                ok = True
            if not ok:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {mod}")
    assert not bad, "layer rule broken:\n" + "\n".join(bad)


def test_method_families_import_only_what_they_name() -> None:
    bad = []
    for name, path in FILES.items():
        parts = name.split(".")
        if len(parts) < 3 or parts[:2] != ["monitor", "stats"] or parts[2] not in FAMILY_DEPS:
            continue
        fam = parts[2]
        for mod, _, line in imports(path, name):
            mp = mod.split(".")
            if mp[:2] == ["monitor", "stats"] and len(mp) > 2:
                other = mp[2]
                if other not in {fam, "multiplicity", "state_contract"} | FAMILY_DEPS[fam]:
                    bad.append(f"{path.relative_to(ROOT)}:{line} ({fam}) imports {mod}")
    assert not bad, "\n".join(bad)


def test_installed_packages_do_not_import_test_code() -> None:
    """The wheel holds ``monitor`` and ``consumers`` only: test-only code lives in
    ``tests/support`` and nothing installed may import it."""
    bad = [f"{path.relative_to(ROOT)}:{line} imports {mod}"
           for name, path in FILES.items() for mod, _, line in imports(path, name)
           if mod.split(".")[0] == "tests"]
    assert not bad, "installed code imports tests:\n" + "\n".join(bad)


def test_every_package_says_what_lives_there() -> None:
    missing = [str(p.relative_to(ROOT)) for p in FILES.values()
               if p.name == "__init__.py" and not ast.get_docstring(ast.parse(p.read_text()))]
    assert not missing, f"packages without an opening docstring: {missing}"


def test_no_import_cycles() -> None:
    graph = {name: sorted({t for mod, names, _ in imports(path, name)
                           for t in resolve(mod, names) if t != name})
             for name, path in FILES.items()}
    # a package's __init__ importing its own submodules is how re-exports work: keep the edge
    # from the package to the submodule, but a submodule "importing" its package (the parent's
    # __init__ runs first) is implied by Python, not a dependency we track.
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for m in graph[n]:
            if state.get(m) == 1:
                cycles.append([*stack[stack.index(m):], m])
            elif m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in graph:
        if n not in state:
            visit(n)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def _own_private_names(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"}):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def test_no_private_names_across_modules() -> None:
    bad = []
    for name, path in FILES.items():
        tree = ast.parse(path.read_text())
        own = _own_private_names(tree)
        for mod, names, line in imports(path, name):
            if mod.split(".")[0] in {"monitor", "consumers"}:
                bad += [f"{path.relative_to(ROOT)}:{line} imports {n} from {mod}" for n in names
                        if n.startswith("_") and not n.startswith("__")]
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__") and node.attr not in own
                    and not (isinstance(node.value, ast.Name)
                             and node.value.id in {"self", "cls"})):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} touches .{node.attr}")
    assert not bad, "private names used across modules:\n" + "\n".join(bad)


@pytest.mark.parametrize("family", sorted(FAMILY_DEPS))
def test_family_packages_exist_or_are_planned(family: str) -> None:
    pkg = ROOT / "monitor" / "stats" / family
    if family == "changepoint" and not pkg.exists():
        pytest.skip("change detectors not added yet")
    assert (pkg / "__init__.py").is_file()
