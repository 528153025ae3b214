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

When the command has returned, :func:`freeze_for_exit` spares the interpreter's last full
collection at exit: the models' confidence sequences and their members reference each other
(a cycle per model that reference counting leaves to the collector), so a fleet's replay ended
with a full pass over them and everything else still alive (0.08-0.15 s of a 5,000-model
replay's 4.5-5 CPU seconds, 67,829 objects; well under 0.05 s for one model).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["THRESHOLDS", "freeze_for_exit", "paused", "tune_gc"]

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


def freeze_for_exit() -> None:
    """Take every object out of the collector's generations: the process is about to exit.

    The interpreter's finalization runs one last full collection over every tracked object
    still alive or in a cycle; at the end of a command it would only free memory that the
    operating system reclaims anyway. Frozen objects (:func:`gc.freeze`) are skipped by it.
    Called by the console entry point after the command returned (its outputs closed and
    flushed), never by library code.

    Examples
    --------
    >>> import gc
    >>> freeze_for_exit(); gc.get_freeze_count() > 0
    True
    >>> gc.unfreeze()

    Notes
    -----
    What is frozen is never collected: objects in reference cycles then never have their
    finalizers run. Only for the very end of a process whose files were closed explicitly
    (a cycle holding an unflushed file would lose its buffer).
    """
    gc.freeze()
