"""Event time: RFC 3339 timestamps (offset required) to epoch seconds.

Examples
--------
>>> parse_timestamp("2024-01-01T00:00:00Z")
1704067200.0
"""

from __future__ import annotations

import re
from datetime import datetime

__all__ = ["parse_timestamp", "ts_before"]

_RFC3339 = re.compile(
    r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)


def parse_timestamp(value: str) -> float:
    """Parse an RFC 3339 timestamp (offset required) into epoch seconds.

    Parameters
    ----------
    value : str
        For example ``"2024-01-01T00:00:00.5Z"`` or ``"2024-01-01T02:00:00+02:00"``.
        Fractions beyond microseconds are truncated.

    Returns
    -------
    float
        Seconds since the Unix epoch.

    Raises
    ------
    ValueError
        If ``value`` is not RFC 3339 (a date alone or a missing offset is refused).

    Examples
    --------
    >>> parse_timestamp("2024-01-01T02:00:00+02:00")
    1704067200.0
    >>> parse_timestamp("2024-01-01T00:00:00.25z")
    1704067200.25
    """
    m = _RFC3339.match(value)
    if m is None:
        raise ValueError(
            f"ts must be epoch seconds or an RFC 3339 timestamp with offset, got {value!r}"
        )
    date, clock, frac, offset = m.groups()
    frac = (frac or "")[:7]
    offset = "+00:00" if offset in ("Z", "z") else offset
    try:
        return datetime.fromisoformat(f"{date}T{clock}{frac}{offset}").timestamp()
    except ValueError as exc:
        raise ValueError(f"ts {value!r} is not a valid time: {exc}") from None


def ts_before(value: object) -> object:
    """Convert a text ``ts`` to epoch seconds before validation (numbers pass through)."""
    if isinstance(value, str):
        return parse_timestamp(value)
    return value
