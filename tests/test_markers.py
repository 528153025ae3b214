"""Every Monte Carlo test carries ``@pytest.mark.statistical`` (the fast lane leaves them out).

A test that asserts with a Clopper-Pearson bound of ``tests/stats/binomial.py``, directly or
through the helpers of its module, checks a statistical guarantee over many simulated runs: it
must be marked ``statistical`` itself, on its class, or by the module's ``pytestmark``, so that
``python -m pytest -m "not statistical and not kafka and not integration"`` (README,
"Development") stays a fast lane. Checked on the source (ast), like tests/test_architecture.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BINOMIAL = "tests.stats.binomial"


def _marks_statistical(decorators: list[ast.expr]) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "statistical"
               for d in decorators for n in ast.walk(d))


def _module_marked(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.Assign)
               and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
               and _marks_statistical([node.value]) for node in tree.body)


def unmarked_binomial_tests(path: Path) -> list[str]:
    """``file::test`` of the tests of ``path`` that reach a binomial bound without the mark."""
    tree = ast.parse(path.read_text())
    bounds = {a.asname or a.name for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module == BINOMIAL
              for a in node.names}
    if not bounds or _module_marked(tree):
        return []
    functions: dict[str, ast.FunctionDef] = {}
    classes: dict[str, ast.ClassDef] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            classes[node.name] = node
            functions.update({f"{node.name}.{m.name}": m for m in node.body
                              if isinstance(m, ast.FunctionDef)})

    def reaches_bound(name: str, seen: set[str]) -> bool:
        seen.add(name)
        used = {n.id for n in ast.walk(functions[name]) if isinstance(n, ast.Name)}
        return bool(used & bounds) or any(reaches_bound(u, seen) for u in used
                                          if u in functions and u not in seen)

    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    bad = []
    for name, fn in functions.items():
        cls = classes.get(name.partition(".")[0]) if "." in name else None
        if not fn.name.startswith("test_") or _marks_statistical(fn.decorator_list) or (
                cls is not None and _marks_statistical(cls.decorator_list)):
            continue
        if reaches_bound(name, set()):
            bad.append(f"{where}::{name}")
    return bad


def test_tests_with_a_binomial_bound_are_marked_statistical() -> None:
    bad = [t for p in sorted((ROOT / "tests").rglob("test_*.py"))
           for t in unmarked_binomial_tests(p)]
    assert not bad, "Monte Carlo tests without @pytest.mark.statistical:\n" + "\n".join(bad)


def test_the_check_sees_a_helper_and_the_marks(tmp_path: Path) -> None:
    src = '''
import pytest
from tests.stats.binomial import clopper_pearson_lower as cp

def lower(k):
    return cp(k, 100, 0.99)

def test_through_a_helper():
    assert lower(3) <= 0.1

@pytest.mark.statistical
def test_marked():
    assert lower(3) <= 0.1

def test_exact():
    assert 1 + 1 == 2
'''
    probe = tmp_path / "test_probe.py"
    probe.write_text(src)
    assert unmarked_binomial_tests(probe) == ["test_probe.py::test_through_a_helper"]
    probe.write_text("import pytest\npytestmark = pytest.mark.statistical\n" + src)
    assert unmarked_binomial_tests(probe) == []
