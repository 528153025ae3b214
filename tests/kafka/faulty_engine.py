"""Test-only fault injection: make the engine raise on one chosen event, after applying it.

``install(marker)`` replaces :meth:`monitor.engine.Engine._apply` in this process: an event
whose raw bytes contain ``marker`` is applied in full and *then* raises ``RuntimeError``, so
an engine that kept a failed record would show it (``events_in``, a unit, a round). Used by
the unit tests (through ``monkeypatch``) and, in a ``certmon run`` process started by the
Kafka tests, through :data:`CLI` with the marker in ``CERTMON_TEST_FAIL_ON``.
"""

from __future__ import annotations

import os
from typing import Any

from monitor.engine import Engine

__all__ = ["CLI", "faulty_apply", "install"]

CLI = ("import sys; from tests.kafka.faulty_engine import install; install(); "
       "from consumers.cli import main; sys.exit(main(sys.argv[1:]))")


def faulty_apply(marker: bytes) -> Any:
    """Return an ``Engine._apply`` replacement that raises after applying a marked event."""
    original = Engine._apply

    def _apply(self: Engine, raw: bytes, alerts: list[Any], requests: list[Any]) -> Any:
        out = original(self, raw, alerts, requests)
        if marker in raw:
            raise RuntimeError(f"injected failure on {marker.decode()}")
        return out

    return _apply


def install(marker: bytes | None = None) -> None:
    """Patch the engine of this process (marker default: ``$CERTMON_TEST_FAIL_ON``)."""
    if marker is None:
        marker = os.environ["CERTMON_TEST_FAIL_ON"].encode()
    Engine._apply = faulty_apply(marker)  # type: ignore[method-assign]
