"""The state contract (:mod:`monitor.stats.state_contract`) over every stateful class.

For each class registered in :mod:`tests.state_contract_cases`: the JSON round trip is exact,
``spawn`` equals a fresh object, a restored copy continues bit-identically, and junk (another
kind or version, a missing key, a value of the wrong type or out of range) is refused with a
``ValueError`` (a :class:`~monitor.errors.CheckpointError` for the engine) or restored into a
state that still saves as strict JSON, never a ``KeyError``/``TypeError`` traceback.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import monitor
from monitor.errors import CheckpointError
from monitor.stats.state_contract import Stateful
from tests.state_contract_cases import CASES, Case, Covered

VERBS = ("to_state", "from_state", "to_dict", "from_dict", "to_list", "to_columns", "snapshot")
REFUSED = (ValueError, CheckpointError)
CONTINUE = 40  # observations fed to the original and to the restored copy


def stateful_classes() -> set[str]:
    """Every class defined under ``monitor`` with a state verb of its own or inherited."""
    found = set()
    for info in pkgutil.walk_packages(monitor.__path__, "monitor."):
        mod = importlib.import_module(info.name)
        for name, cls in vars(mod).items():
            if not inspect.isclass(cls) or cls.__module__ != mod.__name__:
                continue
            if cls.__name__ in ("Stateful", "Spawning"):  # the contract itself
                continue
            if any(v in vars(k) for k in cls.__mro__[:-1] for v in VERBS):
                found.add(f"{mod.__name__}.{name}")
    return found


def test_every_stateful_class_is_registered() -> None:
    found = stateful_classes()
    registered = {n.partition("[")[0] for n in CASES}  # "Class[variant]": more cases of Class
    missing = sorted(found - registered)
    assert not missing, (
        "stateful classes without a case in tests/state_contract_cases.py (add a Case, or a "
        f"Covered naming the case that saves them): {missing}")
    stale = sorted(registered - found)
    assert not stale, f"registered classes that no longer exist or lost their verbs: {stale}"
    for name, entry in CASES.items():
        if isinstance(entry, Covered):
            owners = {n.rpartition(".")[2] for n, e in CASES.items() if isinstance(e, Case)}
            assert set(entry.by.split(", ")) <= owners, (name, entry.by)


CASE_IDS = sorted(n for n, e in CASES.items() if isinstance(e, Case))


def _case(name: str) -> Case:
    entry = CASES[name]
    assert isinstance(entry, Case)
    return entry


def _dump(state: Any) -> str:
    return json.dumps(state, sort_keys=True, allow_nan=False)


def _load(case: Case, obj: Any, state: Any) -> Any:
    return case.load(state) if case.load is not None else type(obj).from_state(state)


def _fed(case: Case, seed: int = 0) -> Any:
    obj = case.make()
    if case.feed is not None:
        rng = np.random.default_rng(seed)
        for _ in range(case.warm):
            case.feed(obj, rng)
    return obj


@pytest.mark.parametrize("name", CASE_IDS, ids=lambda n: n.rpartition(".")[2])
def test_json_round_trip(name: str) -> None:
    case = _case(name)
    obj = _fed(case)
    text = _dump(case.save(obj))  # strict JSON: no NaN or infinity
    back = _load(case, obj, json.loads(text))
    assert _dump(case.save(back)) == text


@pytest.mark.parametrize("name", [n for n in CASE_IDS if _case(n).spawn],
                         ids=lambda n: n.rpartition(".")[2])
def test_spawn_equals_a_fresh_object(name: str) -> None:
    case = _case(name)
    fresh = _dump(case.save(case.make()))
    proto = case.make()
    assert _dump(case.save(proto.spawn())) == fresh
    assert _dump(case.save(proto.spawn().spawn())) == fresh
    obj = _fed(case)
    if case.spawn == "any":
        assert _dump(case.save(obj.spawn())) == fresh
    else:  # only a prototype spawns: a used object refuses, clearly
        with pytest.raises(ValueError, match="spawn"):
            obj.spawn()


@pytest.mark.parametrize("name", [n for n in CASE_IDS if _case(n).feed is not None],
                         ids=lambda n: n.rpartition(".")[2])
def test_continuation_after_restore_is_bit_identical(name: str) -> None:
    case = _case(name)
    assert case.feed is not None
    obj = _fed(case)
    copy = _load(case, obj, json.loads(_dump(case.save(obj))))
    ra, rb = np.random.default_rng(7), np.random.default_rng(7)
    for _ in range(CONTINUE):
        case.feed(obj, ra)
        case.feed(copy, rb)
    assert _dump(case.save(copy)) == _dump(case.save(obj))


def _junk_values() -> list[Any]:
    return ["junk", None, [], {}, -1, -0.5, 1.5, 1e308, True, [1, "x"], {"kind": "x"}]


def _variants(state: dict[str, Any]) -> Iterator[tuple[str, Any, bool]]:
    """(what, junk document, must be refused) for a state document."""
    yield "a list instead of the document", [state], True
    yield "a string instead of the document", "state", True
    if "kind" in state:
        yield "another kind", {**state, "kind": "certmon.other"}, True
    if "version" in state:
        for v in (state["version"] + 1, str(state["version"]), None):
            yield f"version {v!r}", {**state, "version": v}, True
    for key, value in state.items():
        if key in ("kind", "version"):
            continue
        yield f"missing {key!r}", {k: v for k, v in state.items() if k != key}, False
        for junk in _junk_values():
            yield f"{key!r} = {junk!r}", {**state, key: junk}, False
        if isinstance(value, dict):
            for sub in value:
                inner = {k: v for k, v in value.items() if k != sub}
                yield f"missing {key}.{sub}", {**state, key: inner}, False
                for junk in _junk_values():
                    yield f"{key}.{sub} = {junk!r}", {**state, key: {**value, sub: junk}}, False


def _junk_params() -> list[Any]:
    out = []
    for n in CASE_IDS:
        gap = _case(n).junk_xfail
        marks = [pytest.mark.xfail(strict=True, reason=gap)] if gap else []
        out.append(pytest.param(n, id=n.rpartition(".")[2], marks=marks))
    return out


@pytest.mark.parametrize("name", _junk_params())
def test_junk_is_refused_with_a_clear_error(name: str) -> None:
    case = _case(name)
    obj = _fed(case)
    state = case.save(obj)
    text = _dump(state)
    crashes, accepted = [], []
    for what, junk, must_refuse in _variants(json.loads(text)):
        try:
            back = _load(case, obj, junk)
        except REFUSED as exc:
            assert str(exc), what
            continue
        except Exception as exc:
            crashes.append(f"{what}: {type(exc).__name__}: {exc}")
            continue
        if must_refuse:
            accepted.append(what)
            continue
        try:  # accepted: it must still save as strict JSON (nothing out of range kept)
            _dump(case.save(back))
        except Exception as exc:
            crashes.append(f"{what}: accepted, then saving fails: {type(exc).__name__}: {exc}")
    assert not crashes, f"{len(crashes)} junk documents crash:\n" + "\n".join(crashes[:40])
    assert not accepted, f"accepted: {accepted}"


def test_the_protocol_is_what_the_cases_follow() -> None:
    for name in CASE_IDS:
        obj = _case(name).make()
        if hasattr(obj, "to_state") and hasattr(type(obj), "from_state"):
            assert isinstance(obj, Stateful), name
