"""The state document of :class:`~monitor.stats.betting.plugin.PlugInEProcess`, and its checks.

A ``plugin_up`` e-process saves its configuration (``alpha``, ``delta``, ``side``, ``rhos``,
``bet``) and its dynamic part (:class:`PlugInDynamics`: rounds, running sums, cells). This
module writes the document (:func:`plugin_state`) and reads the dynamic part back with every
check a restore needs (:func:`read_dynamics`); the e-process only moves the values in and out.

Examples
--------
>>> from monitor.stats.betting.bets import BetConfig
>>> dyn = PlugInDynamics(rounds=0, sums=[0.0] * 5, since=0, learned=0, ref=0.0,
...                      cells=[0.5, 0.5])
>>> d = plugin_state(0.3, 0.1, "certify", [0.0], BetConfig(), dyn)
>>> d["kind"], is_plugin_state(d)
('certmon.PlugInEProcess', True)
>>> read_dynamics(d, [0.5, 0.5]).log_wealth
0.0
>>> read_dynamics({**d, "cells": [1.0]}, [0.5, 0.5])
Traceback (most recent call last):
...
ValueError: PlugInEProcess state: wrong number of cells or sums, or bad cells

Notes
-----
Guarantee: none statistical. A document read here restores a process that continues bit for
bit as the saved one (the log wealth is recomputed with the same float operations as the live
process); a document that no live process could have written is refused with a ValueError.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from monitor.stats.betting.bets import BetConfig, Side
from monitor.stats.betting.plugin_round import sum_in_order

__all__ = ["STATE_KIND", "PlugInDynamics", "check_loadable", "is_plugin_state", "plugin_state",
           "read_dynamics"]

STATE_KIND = "certmon.PlugInEProcess"


@dataclass(frozen=True, slots=True)
class PlugInDynamics:
    """The dynamic part of a ``plugin_up`` e-process (what changes round by round).

    Attributes
    ----------
    rounds : int
        Rounds seen.
    sums : list of float
        Running sums of the plug-in reliance (five).
    since : int
        Label count from which the running sums count.
    learned : int
        Labels the reliance has learned from.
    ref : float
        Log scale of the cells.
    cells : list of float
        Cell wealths in linear scale, prior included (``u_k = w_k W_k exp(-ref)``).
    log_wealth : float
        The mixture's log wealth (derived; not saved).
    applied : (list of float, int) or None
        The switch cell's running sums over the rounds applied and their count
        (:mod:`.plugin_switch`); None without a switch cell.
    """

    rounds: int
    sums: list[float]
    since: int
    learned: int
    ref: float
    cells: list[float]
    log_wealth: float = 0.0
    applied: tuple[list[float], int] | None = None


def plugin_state(alpha: float, delta: float, side: Side, rhos: Sequence[float], bet: BetConfig,
                 dyn: PlugInDynamics) -> dict[str, Any]:
    """Return the JSON-serializable state document (Python floats, exact)."""
    return {
        "kind": STATE_KIND,
        "version": 1,
        "alpha": alpha,
        "delta": delta,
        "side": side,
        "rhos": list(rhos),
        "bet": bet.to_dict(),
        "rounds": dyn.rounds,
        "sums": list(dyn.sums),
        "since": dyn.since,
        "learned": dyn.learned,
        "ref": dyn.ref,
        "cells": list(dyn.cells),
        **({} if dyn.applied is None else {"applied": {"sums": list(dyn.applied[0]),
                                                       "n": dyn.applied[1]}}),
    }


def is_plugin_state(d: dict[str, Any]) -> bool:
    """Tell whether ``d`` is a ``PlugInEProcess`` state document."""
    return d.get("kind") == STATE_KIND


def check_loadable(d: dict[str, Any], config: tuple[Any, ...], fresh: bool) -> None:
    """Refuse ``d`` unless it is a version-1 state of ``config`` and the process is ``fresh``.

    ``config`` is ``(alpha, delta, side, rhos, bet)`` of the process loading it.
    """
    if not is_plugin_state(d) or d.get("version") != 1:
        raise ValueError(f"not a PlugInEProcess state (kind={d.get('kind')!r})")
    if not fresh:
        raise ValueError("load_state needs a process that has seen no round")
    if (d["alpha"], d["delta"], d["side"], [float(r) for r in d["rhos"]],
            BetConfig.from_dict(d["bet"])) != config:
        raise ValueError("PlugInEProcess state: configuration differs")


def read_dynamics(d: dict[str, Any], prior: list[float], switch: bool = False) -> PlugInDynamics:
    """Read and check the dynamic part of ``d`` for a process whose cell prior is ``prior``.

    ``switch``: the process keeps a switch cell, whose sums ``d["applied"]`` must be there.
    """
    u = [float(v) for v in d["cells"]]
    sums = [float(v) for v in d["sums"]]
    if len(u) != len(prior) or len(sums) != 5 or not all(v >= 0.0 for v in u) or not (
            sum(u) > 0.0):
        raise ValueError("PlugInEProcess state: wrong number of cells or sums, or bad cells")
    ref = float(d["ref"])
    rounds = int(d["rounds"])
    learned = int(d.get("learned", rounds))  # older states: learned every round
    since = int(d.get("since", 0))
    if not 0 <= since <= learned or rounds < 0:
        raise ValueError("PlugInEProcess state: 'since' outside [0, learned]")
    # as the live process: exactly 0 before the first round, then ref + log(sum u)
    # (a missing label's penalty moves the cells without counting a round)
    fresh = rounds == 0 and ref == 0.0 and u == prior
    log_e = 0.0 if fresh else ref + math.log(sum_in_order(u))
    applied = None
    if switch:
        a = d.get("applied")
        if not isinstance(a, dict) or len(a.get("sums", ())) != 5 or not (
                isinstance(a.get("n"), int) and 0 <= a["n"] <= rounds):
            raise ValueError("PlugInEProcess state: the switch cell's 'applied' sums are bad")
        applied = ([float(v) for v in a["sums"]], int(a["n"]))
    return PlugInDynamics(rounds, sums, since, learned, ref, u, log_e, applied)
