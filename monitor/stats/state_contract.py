"""The state contract: how a stateful object saves and restores itself, defined once.

Every object whose state survives a restart (tests, e-processes, confidence sequences,
detectors, estimators; in :mod:`monitor.state`, the per-suite rooms built from them) follows
one protocol:

- ``update(...)``: one observation (the arguments depend on the object);
- ``to_state() -> dict``: a JSON-serializable document holding ``kind`` and ``version``
  (``to_dict`` in :mod:`monitor.state`, where restoring also needs the configuration);
- ``from_state(d)`` (classmethod): the inverse, refusing anything else with a
  :class:`StateError` (a ``ValueError``) that names the class and the field, never a
  ``KeyError`` or ``TypeError`` from deep inside;
- ``spawn()`` where the object has one: a fresh object of the same configuration.

:func:`check_header` is the kind/version guard every ``from_state`` starts with;
:func:`restoring` (or the decorator :func:`restorer`) turns a missing key or a value of the
wrong type into a :class:`StateError`.
The snapshot documents of the engine (checkpoint manifests and per-suite documents) have
declared schemas in :mod:`monitor.snapshot_schemas`. ``tests/test_state_contract.py`` runs
every stateful class through this contract (JSON round trip, spawn, continuation after a
restore, junk refused) and fails when a class with ``to_state`` is not registered there.

Examples
--------
>>> check_header({"kind": "demo", "version": 1}, "demo", 1, "Demo")
{'kind': 'demo', 'version': 1}
>>> check_header({"kind": "other", "version": 1}, "demo", 1, "Demo")
Traceback (most recent call last):
...
monitor.stats.state_contract.StateError: not a Demo state: kind 'other', expected 'demo'
>>> with restoring("Demo"):
...     {"a": 1}["n"]
Traceback (most recent call last):
...
monitor.stats.state_contract.StateError: bad Demo state: missing key 'n'

Notes
-----
Guarantee: none statistical. The contract is that ``from_state(json.loads(json.dumps(
x.to_state())))`` continues exactly as ``x`` would (same floats, bit for bit), and that a
document which is not such a state is refused with a ``ValueError``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, Self, TypeVar, cast, runtime_checkable

__all__ = ["MAX_CELLS", "Spawning", "StateError", "Stateful", "check_header", "finite_floats",
           "restorer", "restoring", "size"]

# the most cells (models x examples) a restored table may allocate: 2**28 float64 is 2 GiB, far
# above any configuration certmon accepts; a larger size in a state document is a forgery
MAX_CELLS = 2**28


class StateError(ValueError):
    """A state document that cannot be restored (it names the class and the field)."""


@runtime_checkable
class Stateful(Protocol):
    """An object that saves itself as a JSON document and is rebuilt from it."""

    def to_state(self) -> dict[str, Any]:
        """Return a JSON-serializable document with ``kind`` and ``version``."""
        ...

    @classmethod
    def from_state(cls, d: dict[str, Any]) -> Self:
        """Rebuild from :meth:`to_state` output, or raise :class:`StateError`."""
        ...


@runtime_checkable
class Spawning(Stateful, Protocol):
    """A stateful object that can also make a fresh copy of its configuration."""

    def spawn(self) -> Self:
        """Return a fresh object configured as this one (no observations)."""
        ...


def size(x: object, what: str, lo: int = 1, hi: int = MAX_CELLS) -> int:
    """Return ``x`` when it is an integer in ``[lo, hi]`` (a size to allocate), else raise.

    Examples
    --------
    >>> size(3, "n_models")
    3
    >>> size(1e308, "n")
    Traceback (most recent call last):
    ...
    monitor.stats.state_contract.StateError: n must be an integer in [1, 268435456], got 1e+308
    """
    if isinstance(x, bool) or not isinstance(x, int) or not lo <= x <= hi:
        raise StateError(f"{what} must be an integer in [{lo}, {hi}], got {x!r}")
    return x


def finite_floats(x: object, n: int, what: str) -> list[float]:
    """Return ``x`` as ``n`` finite floats, else raise :class:`StateError`.

    Examples
    --------
    >>> finite_floats([0, 1.5], 2, "sums")
    [0.0, 1.5]
    >>> finite_floats([None, 1.5], 2, "sums")
    Traceback (most recent call last):
    ...
    monitor.stats.state_contract.StateError: sums must be 2 finite numbers, got [None, 1.5]
    """
    if (not isinstance(x, list) or len(x) != n or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            for v in x)):
        raise StateError(f"{what} must be {n} finite numbers, got {x!r}")
    return [float(v) for v in x]


def check_header(d: object, kind: str, version: int | None, name: str) -> dict[str, Any]:
    """Return ``d`` when it is a dict of this ``kind`` and ``version``; else raise.

    Parameters
    ----------
    d : object
        The document to restore.
    kind, version : str, int or None
        What the class writes (``version`` None: its documents have no version field).
    name : str
        The class, for the message.

    Returns
    -------
    dict
        ``d`` itself.

    Raises
    ------
    StateError
        ``d`` is not a dict, or of another kind or version.

    Examples
    --------
    >>> check_header([], "demo", 1, "Demo")
    Traceback (most recent call last):
    ...
    monitor.stats.state_contract.StateError: a Demo state must be a JSON object, got list
    >>> check_header({"kind": "demo", "version": 2}, "demo", 1, "Demo")
    Traceback (most recent call last):
    ...
    monitor.stats.state_contract.StateError: not a Demo state: version 2, expected 1
    """
    art = "an" if name[:1] in tuple("AEIOU") else "a"
    if not isinstance(d, dict):
        raise StateError(f"{art} {name} state must be a JSON object, got {type(d).__name__}")
    if d.get("kind") != kind:
        raise StateError(f"not {art} {name} state: kind {d.get('kind')!r}, expected {kind!r}")
    got = d.get("version")
    if version is not None and (got != version or isinstance(got, bool)):
        raise StateError(f"not {art} {name} state: version {got!r}, expected {version}")
    return d


@contextmanager
def restoring(name: str) -> Iterator[None]:
    """Turn a missing key or a value of the wrong type while restoring into :class:`StateError`.

    ``ValueError`` (and so :class:`StateError`) passes unchanged: it already explains itself.

    Examples
    --------
    >>> with restoring("Demo"):
    ...     [][0]
    Traceback (most recent call last):
    ...
    monitor.stats.state_contract.StateError: bad Demo state: list index out of range
    """
    try:
        yield
    except KeyError as exc:
        raise StateError(f"bad {name} state: missing key {exc.args[0]!r}") from exc
    except (TypeError, IndexError, AttributeError, OverflowError) as exc:
        raise StateError(f"bad {name} state: {exc}") from exc


_F = TypeVar("_F", bound=Callable[..., Any])


def restorer(name: str) -> Callable[[_F], _F]:
    """Decorate a ``from_state(cls, d, ...)``: a dict in, only ``ValueError`` out.

    ``d`` must be a dict, and restoring it cannot raise anything but ``ValueError``
    (:func:`restoring`). Put it under ``@classmethod``.

    Examples
    --------
    >>> class Demo:
    ...     @classmethod
    ...     @restorer("Demo")
    ...     def from_state(cls, d):
    ...         return d["n"][0]
    >>> Demo.from_state({"n": [3]})
    3
    >>> Demo.from_state([])
    Traceback (most recent call last):
    ...
    monitor.stats.state_contract.StateError: a Demo state must be a JSON object, got list
    >>> Demo.from_state({"n": []})
    Traceback (most recent call last):
    ...
    monitor.stats.state_contract.StateError: bad Demo state: list index out of range
    """
    def wrap(fn: _F) -> _F:
        @functools.wraps(fn)
        def checked(cls: Any, d: Any, *args: Any, **kwargs: Any) -> Any:
            if not isinstance(d, dict):
                check_header(d, "", None, name)  # raises: not a JSON object
            with restoring(name):
                return fn(cls, d, *args, **kwargs)
        return cast(_F, checked)
    return wrap
