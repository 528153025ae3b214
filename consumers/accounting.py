"""What a run read and what it did not use: the closing lines of ``replay`` and ``run``.

Every event read is one of used, rejected (dead-lettered with its raw bytes, or dropped when
no dead-letter sink is configured), duplicate or unrouted (a valid event of no configured
suite/model: counted, never dead-lettered). The summary says how many of each and where the
raw bytes of the rejected ones went, so a mistyped suite name or a producer emitting junk is
visible at the end of the command instead of only in STATE.json.
"""

from __future__ import annotations

from typing import Any

__all__ = ["replay_summary"]


def replay_summary(counters: dict[str, Any], seconds: float, state_out: str,
                   dead_letters: str | None, requests: str | None = "") -> list[str]:
    """Return the replay's closing lines: what was read, and what was not used (and why).

    Parameters
    ----------
    counters : dict[str, Any]
        The engine's counters (``events_in``, ``rejected``, ``duplicates``, ``unrouted``).
    seconds : float
        Duration of the replay.
    state_out : str
        Where STATE.json was written.
    dead_letters : str or None
        Where the dead letters (rejected lines' raw bytes and reasons) went: a path,
        ``stdout``..., or None when they were dropped.
    requests : str or None
        Where the label requests went (a path, ``stdout``...), None when they were discarded
        (``sinks.requests = "none"``), ``""`` to say nothing about them.

    Returns
    -------
    list[str]
        One line for the totals, one per kind of unused input (rejected, unrouted), and one
        saying where the label requests went (when there were any).

    Notes
    -----
    Every event read is accounted for: ``events_in`` = used + rejected + duplicate +
    unrouted, and the lines say where the raw bytes of rejected lines went (or that they were
    dropped). Unrouted events are valid events of no configured suite/model: they are counted,
    not dead-lettered.

    Examples
    --------
    >>> lines = replay_summary({"events_in": 20014, "rejected": {"invalid_json": 14},
    ...                         "duplicates": {}, "unrouted": 20000}, 1.0, "S.json", None)
    >>> print(lines[0])
    certmon: 20014 events in 1.0s (14 rejected, 0 duplicate, 20000 unrouted); state in S.json
    >>> print(lines[1][:59])
    certmon: 14 rejected: invalid_json 14; their raw lines were
    >>> "--dead-letters-out" in lines[1] and "suite and model names" in lines[2]
    True
    >>> replay_summary({"events_in": 3, "rejected": {"oversized": 1}}, 1.0, "S.json",
    ...                "dead.jsonl")[1]
    'certmon: 1 rejected: oversized 1; raw lines and reasons written to dead.jsonl'
    >>> replay_summary({"events_in": 9, "label_requests": 2}, 1.0, "S.json", None,
    ...                "out/requests.jsonl")[1]
    'certmon: 2 label requests written to out/requests.jsonl (answer them: docs/label-loop.md)'
    """
    rejected = {k: v for k, v in counters.get("rejected", {}).items() if v}
    n_rej = sum(rejected.values())
    n_dup = sum(counters.get("duplicates", {}).values())
    unrouted = int(counters.get("unrouted", 0))
    lines = [f"certmon: {counters.get('events_in', 0)} events in {seconds:.1f}s ({n_rej} rejected, "
             f"{n_dup} duplicate, {unrouted} unrouted); state in {state_out}"]
    if n_rej:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(rejected.items()))
        where = (f"raw lines and reasons written to {dead_letters}" if dead_letters else
                 "their raw lines were dropped: rerun with --dead-letters-out FILE to keep them")
        lines.append(f"certmon: {n_rej} rejected: {reasons}; {where}")
    if unrouted:
        lines.append(f"certmon: {unrouted} valid events belong to no configured suite/model and "
                     "were skipped (counted, not dead-lettered): check the suite and model names "
                     "in the config")
    n_req = int(counters.get("label_requests", 0))
    if n_req and requests is not None and requests != "":
        lines.append(f"certmon: {n_req} label requests written to {requests} (answer them: "
                     "docs/label-loop.md)")
    elif n_req and requests is None:
        lines.append(f"certmon: {n_req} label requests discarded (sinks.requests = \"none\"): "
                     "no labeller saw them")
    return lines
