"""The certmon process's garbage-collector policy: an application setting, applied once.

CPython's cyclic collector runs a generation-0 pass every 700 net allocations and, as the heap
grows, full passes over every tracked object. An instance holding thousands of models keeps
millions of long-lived objects (their e-processes, detectors and sequences), so the default
policy spends more time traversing them than processing events while models are being created
(``benchmarks/fleet_scale.py``: 10,000 models ran at 0.45x the one-model rate with the default
thresholds, 0.75x with these). certmon's state is freed by reference counting; the collector
is only needed for rare reference cycles, so passes can be much less frequent.

A generation-0 pass scans every young object still alive, among them the recent entries of
every suite's dedupe window; a fleet's new models trigger passes (their objects count as
allocations) that each rescan such a window. With 200,000 allocations between passes
instead of 50,000, the 5,000-model replay of ``benchmarks/replay_shapes.py`` (300,000
events) spent 0.17 s in the collector instead of 0.28 s (3 passes instead of 13; the
one-model stream of the same length 0.07 s either way).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["THRESHOLDS", "paused", "tune_gc"]

THRESHOLDS = (200_000, 50, 100)


def tune_gc() -> tuple[int, int, int]:
    """Set the collector's thresholds to :data:`THRESHOLDS`; return the previous ones.

    Called by the console entry point (and the benchmarks, to measure what users get), never
    by library code: importing certmon changes nothing.

    Examples
    --------
    >>> import gc
    >>> before = tune_gc()
    >>> gc.get_threshold() == THRESHOLDS
    True
    >>> gc.set_threshold(*before)

    Notes
    -----
    Generation-0 passes every 200,000 allocations instead of 700 (the young objects of a
    batch of events are mostly freed by reference counting before that), and older
    generations 50 and 100 times less often than young ones. Collection still happens: no
    cycle is leaked for good, and memory held by cycles is bounded by what 200,000
    allocations can create.
    """
    before = gc.get_threshold()
    gc.set_threshold(*THRESHOLDS)
    return before


@contextmanager
def paused() -> Iterator[None]:
    """Run a block with the cyclic collector off (restored to its previous state after).

    For the command's last step, building and writing STATE.json: millions of new dicts and
    lists (about 500 per model), none in a cycle and all freed by reference counting, whose
    allocations would otherwise trigger collector passes over every model's state. Like
    :func:`tune_gc`, used by the console commands, never by library code.

    Examples
    --------
    >>> import gc
    >>> with paused():
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
