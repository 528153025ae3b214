"""The compiled audit uniform is the same float as hashlib's, on every kind of id."""

from __future__ import annotations

import random
from types import ModuleType

import pytest

from monitor import audit
from monitor.audit import audit_prefix, audit_uniform, audit_uniform_prefixed
from tests.ckernels import load


@pytest.fixture(scope="module")
def ca() -> ModuleType:
    return load("monitor.caudit")


def test_hot_path_uses_the_compiled_kernel(ca: ModuleType) -> None:
    assert audit.audit_uniform_fast is ca.uniform


def test_same_float_as_hashlib(ca: ModuleType) -> None:
    rng = random.Random(5)
    alphabet = "ab09-_/é字😀\x00\n\"\\"
    for case in range(20000):
        prefix = audit_prefix(rng.choice(["", "salt", "s" * 70]), "qa", f"m{case % 7}")
        n = rng.choice([0, 1, 8, 55, 56, 63, 64, 65, 119, 120, rng.randint(0, 400)])
        ex = "".join(rng.choice(alphabet) for _ in range(n))
        a, b = ca.uniform(prefix, ex), audit_uniform_prefixed(prefix, ex)
        assert a.hex() == b.hex(), (case, prefix, ex)
    # (almost every 64-bit value is rounded to 53 bits, ties included: about 1 in 2048)
    # the unit's hash as documented: salt|suite|model|example_id
    assert ca.uniform(audit_prefix("k", "s", "m"), "x") == audit_uniform("k", "s", "m", "x")


def test_bad_input(ca: ModuleType) -> None:
    with pytest.raises(UnicodeEncodeError):
        ca.uniform(b"p", "\ud800")
    with pytest.raises(UnicodeEncodeError):
        audit_uniform_prefixed(b"p", "\ud800")
    with pytest.raises(TypeError):
        ca.uniform("p", "x")
