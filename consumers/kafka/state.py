"""Combine per-partition engine states into one STATE.json view.

The Kafka runner keeps one engine per input partition. Suites are the Kafka key, so every
suite lives in exactly one partition and the suites of different engines are disjoint; the
top-level operational ``counters`` are sums. :func:`merge_state_views` builds the view a single
engine would have produced from the same events (the metrics collector and the integration
tests use it); :func:`load_partition_states` rebuilds it from a checkpoint store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from monitor.checkpoint import CheckpointStore
from monitor.incremental import load_checkpoint

if TYPE_CHECKING:
    from monitor.config import CertmonConfig

__all__ = ["load_partition_states", "merge_state_views", "partition_key"]


def partition_key(topic: str, partition: int) -> str:
    """Return the checkpoint-store key of one input partition.

    Examples
    --------
    >>> partition_key("certmon.eval-events.v1", 3)
    'certmon.eval-events.v1/3'
    """
    return f"{topic}/{partition}"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _merge(a: Any, b: Any) -> Any:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out = dict(a)
        for key, value in b.items():
            out[key] = _merge(out[key], value) if key in out else value
        return out
    if _is_number(a) and _is_number(b):
        return a + b
    return a


def merge_state_views(views: Iterable[Mapping[str, Any]], *, strict: bool = True) -> dict[str, Any]:
    """Merge engine state views: union of suites, sums of numeric counters elsewhere.

    With ``strict=False`` a suite held by two views keeps the first view's (a live scrape must
    not fail; the runner fences such suites, see :mod:`consumers.kafka.ownership`).

    Raises
    ------
    ValueError
        ``strict`` and two views hold the same suite (a suite must live in one partition).

    Examples
    --------
    >>> a = {"suites": {"s1": {"n": 1}}, "counters": {"events_in": 3, "rejected": {"x": 1}}}
    >>> b = {"suites": {"s2": {"n": 2}}, "counters": {"events_in": 4, "rejected": {"y": 2}}}
    >>> m = merge_state_views([a, b])
    >>> m["suites"], m["counters"]
    ({'s1': {'n': 1}, 's2': {'n': 2}}, {'events_in': 7, 'rejected': {'x': 1, 'y': 2}})
    >>> merge_state_views([a, a], strict=False)["suites"]
    {'s1': {'n': 1}}
    """
    merged: dict[str, Any] = {"suites": {}}
    for view in views:
        for name, suite in view.get("suites", {}).items():
            if name in merged["suites"]:
                if not strict:
                    continue
                raise ValueError(f"suite {name!r} appears in two partitions")
            merged["suites"][name] = suite
        for key, value in view.items():
            if key == "suites":
                continue
            merged[key] = _merge(merged[key], value) if key in merged else value
    merged["suites"] = dict(sorted(merged["suites"].items()))
    return merged


def load_partition_states(
    config: CertmonConfig, store: CheckpointStore, topic: str, partitions: Iterable[int]
) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """Restore every partition's engine from ``store`` and merge their views.

    Returns
    -------
    tuple of (dict, dict)
        The merged state view and ``{partition: checkpoint position}``; partitions without a
        checkpoint are left out.
    """
    from monitor.engine import Engine

    views = []
    positions: dict[int, dict[str, Any]] = {}
    for p in partitions:
        ckpt = load_checkpoint(store, partition_key(topic, p))
        if ckpt is None:
            continue
        views.append(Engine.restore(config, ckpt.snapshot).state_view())
        positions[p] = ckpt.position
    return merge_state_views(views), positions
