"""Rebuilding an engine from its snapshot: the checks of each part against the configuration.

:meth:`monitor.engine.Engine.restore` reads a snapshot (:mod:`monitor.checkpoint`) in three
steps, each here: the header (kind, version), the operational counters, then each suite's
document, checked against its configuration before and after it is rebuilt
(:mod:`monitor.state.restore_checks` and its siblings). Nothing here keeps state.

Examples
--------
>>> check_engine_head({"kind": "certmon.Engine", "version": 1}, "certmon.Engine")
>>> check_engine_head([], "certmon.Engine")
Traceback (most recent call last):
...
monitor.errors.CheckpointError: not a version-1 engine snapshot (kind='list', version=None)

Notes
-----
Guarantee: a document that passes these checks is one a running engine of this configuration
could have written (every value in range, every suite routed), so the restored engine
continues bit-identically; anything else raises before the engine is handed out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from monitor.alerts import ALERT_KINDS
from monitor.clock_horizon import ClockHorizon
from monitor.config import SuiteConfig
from monitor.errors import CheckpointError
from monitor.events import REJECTION_REASONS
from monitor.state.prototypes import ModelFactory
from monitor.state.restore_checks import (
    RefusedState,
    check_counts,
    check_restored_suite,
    check_suite_dict,
)
from monitor.state.restore_detectors import check_suite_detectors
from monitor.state.restore_selection import check_selection_dict
from monitor.state.restore_strata import check_suite_strata
from monitor.state.selection_suites import SelectionSuites
from monitor.state.suite import SuiteState

if TYPE_CHECKING:
    from monitor.engine import Engine

__all__ = ["check_engine_head", "check_selection_parts", "restore_counters", "restore_suite"]


def check_engine_head(snapshot: Any, kind: str) -> None:
    """Refuse anything but a version-1 engine snapshot of ``kind`` (a :class:`CheckpointError`)."""
    head = snapshot if isinstance(snapshot, dict) else {"kind": type(snapshot).__name__}
    if head.get("kind") != kind or head.get("version") != 1:
        raise CheckpointError(f"not a version-1 engine snapshot (kind={head.get('kind')!r}, "
                              f"version={head.get('version')!r})")


def restore_counters(eng: Engine, c: dict[str, Any]) -> None:
    """Set a fresh engine's operational counters from a snapshot's ``counters``."""
    check_counts(c, "counters")
    eng.events_in = int(c["events_in"])
    eng.unrouted = int(c["unrouted"])
    eng.label_requests = int(c["label_requests"])
    eng.rejected = {k: int(c["rejected"].get(k, 0)) for k in REJECTION_REASONS}
    eng.duplicates = {k: int(c["duplicates"][k]) for k in eng.duplicates}  # DUPLICATE_REASONS
    eng.alerts = {k: int(c["alerts"].get(k, 0)) for k in ALERT_KINDS}  # new kinds: 0
    eng.budget.load_evictions(c.get("budget_evictions", {}))  # absent: older snapshot


def restore_suite(cfg: SuiteConfig, sd: dict[str, Any], clock: ClockHorizon,
                  factory: ModelFactory | None = None) -> SuiteState:
    """Rebuild one suite from its document, checked against ``cfg`` before and after.

    ``factory``: the model factory of ``cfg`` the engine shares between suites (else a new one).

    Raises
    ------
    RefusedState
        A value out of range, or an event time too far ahead of ``clock``.
    """
    # configuration plus state: checked against the config before use
    threshold_delta = SuiteState(str(sd["name"]), cfg, factory).threshold_delta
    check_suite_dict(cfg, sd, threshold_delta)
    check_suite_detectors(cfg, sd)
    check_suite_strata(cfg, sd, threshold_delta)
    suite = SuiteState.from_dict(cfg, sd, factory)
    if clock.ahead_of_clock(suite.watermark):  # the input rule
        raise RefusedState(f"suite {suite.name!r} event time {suite.watermark!r}"
                           f" is more than {clock.max_jump:g} s ahead of the "
                           "clock (events.max_ts_jump_seconds)")
    check_restored_suite(cfg.multiplicity, suite.models)
    check_suite_detectors(cfg, sd, suite.models)
    return suite


def check_selection_parts(selection: SelectionSuites, docs: list[dict[str, Any]]) -> None:
    """Check each selection suite's document against its settings (unrouted ones: later)."""
    for sel in docs:
        settings = selection.settings_for(str(sel["name"]))
        if settings is not None:  # else restore() refuses the unrouted suite
            check_selection_dict(settings, sel)
