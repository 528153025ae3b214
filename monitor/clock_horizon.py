"""The plausibility of an event time against the wall clock (``events.max_ts_jump_seconds``).

An event stamped more than ``max_ts_jump_seconds`` ahead of the wall clock is refused as
``implausible_ts`` (one far-future event would otherwise expire every pending join, and event
time could walk past the bound step by step); a silent suite or a replay of past data is never
refused. :class:`ClockHorizon` keeps the largest clock reading plus the bound (the *horizon*):
an event time up to it is plausible without reading the clock, so the clock is read only for
an event stamped past the last reading's horizon. The engine applies the same rule to a
checkpoint's event times on restore, so a state the engine accepted restores on any clock not
behind the one that did.

Examples
--------
>>> h = ClockHorizon(lambda: 1000.0, 60.0)
>>> h.horizon                     # nothing read yet
-inf
>>> h.ahead_of_clock(1050.0), h.horizon
(False, 1060.0)
>>> h.ahead_of_clock(1061.0)
True
>>> h.explain(1061.0, None)
'ts 1061.0 is more than 60 s ahead of the clock (1000) (events.max_ts_jump_seconds)'
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["ClockHorizon"]


class ClockHorizon:
    """The largest wall-clock reading plus ``max_jump``: event times beyond it are implausible.

    Parameters
    ----------
    clock : callable
        Wall clock in Unix seconds (read only by :meth:`ahead_of_clock`).
    max_jump : float
        ``events.max_ts_jump_seconds``.

    Notes
    -----
    The horizon never moves back (a clock stepping back never refuses what it accepted; hosts'
    clocks are synchronised). A caller compares an event time with :attr:`horizon` first and
    calls :meth:`ahead_of_clock` only past it, so most events read no clock.
    """

    __slots__ = ("clock", "horizon", "max_jump")

    def __init__(self, clock: Callable[[], float], max_jump: float) -> None:
        self.clock = clock
        self.max_jump = max_jump
        self.horizon = -math.inf  # latest clock reading + max_jump: a ts up to it is plausible

    def ahead_of_clock(self, ts: float) -> bool:
        """Read the clock; return whether ``ts`` is more than ``max_jump`` ahead of it."""
        self.horizon = max(self.horizon, self.clock() + self.max_jump)
        return ts > self.horizon

    def explain(self, ts: float, watermark: float | None, suite: str = "") -> str:
        """Return the rejection detail of ``ts`` (``watermark``: its suite's event time, if any)."""
        now = self.horizon - self.max_jump
        where = "" if watermark is None else f" (suite {suite!r} event time {watermark!r})"
        return (f"ts {ts!r} is more than {self.max_jump:g} s ahead of the clock ({now:.0f})"
                f"{where} (events.max_ts_jump_seconds)")
