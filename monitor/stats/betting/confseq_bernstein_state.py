"""The state document of :class:`~monitor.stats.betting.confseq_bernstein.BernsteinSequences`.

Bernstein confidence sequences save their configuration (``delta``, ``bet``, ``grid_size``,
``rhos``, ``members``) and their dynamic part (:class:`BernsteinDynamics`: rounds, the WSR
statistics and quadratic sums of every rho row, every member's edges). This module writes the
document (:func:`sequences_state`), checks its header (:func:`check_format`) and reads the
dynamic part back with every check a restore needs (:func:`read_dynamics`); the sequences only
move the values in and out.

Examples
--------
>>> from monitor.stats.betting.bets import BetConfig
>>> dyn = BernsteinDynamics(rounds=0, total=[0.0], dev=[0.0], sums=np.zeros((2, 5, 1)),
...                         edges=[[0, 10, True, 0, 10]])
>>> d = sequences_state(0.1, BetConfig(rule="wsr"), 10, [0.0], [[0]], dyn)
>>> d["format"], d["edges"]
('certmon.confseq_bernstein', [[0, 10, True, 0, 10]])
>>> check_format(d); read_dynamics(d, (2, 5, 1), 1, 10).edges
[[0, 10, True, 0, 10]]
>>> read_dynamics({**d, "edges": [[0, 11, True, 0, 11]]}, (2, 5, 1), 1, 10)
Traceback (most recent call last):
...
ValueError: confidence-sequence edges out of range: [0, 11, True, 0, 11]

Notes
-----
Guarantee: none statistical. The document holds the exact floats of the live sequences (a
restored copy continues bit for bit); a document that no live sequences could have written
(wrong shapes, non-finite or out-of-range sums, negative counts, edges outside
``[0, grid_size]`` or in the wrong order) is refused with a ValueError.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from monitor.stats.betting.bets import BetConfig

__all__ = ["FORMAT", "VERSION", "BernsteinDynamics", "check_format", "read_dynamics",
           "sequences_state"]

FORMAT = "certmon.confseq_bernstein"
VERSION = 1


@dataclass(frozen=True, slots=True)
class BernsteinDynamics:
    """The dynamic part of Bernstein confidence sequences (what changes round by round).

    Attributes
    ----------
    rounds : int
        Rounds seen (all applied: buffered rounds are flushed before a save).
    total, dev : list of float
        Each rho row's WSR statistics (running sum and deviation sum).
    sums : ndarray
        ``(2, 5, R)``: the upper and lower tests' quadratic sums of each rho row.
    edges : list of list
        Per member ``[lo_edge, hi_edge, is_valid, cap_lo, cap_hi]``: its bounds (multiples of
        ``1 / grid_size``), whether it is valid, and the bounds the current bet block is
        capped with.
    """

    rounds: int
    total: list[float]
    dev: list[float]
    sums: npt.NDArray[np.float64]
    edges: list[list[Any]]


def sequences_state(delta: float, bet: BetConfig, grid_size: int, rhos: Sequence[float],
                    members: Sequence[Sequence[int]], dyn: BernsteinDynamics) -> dict[str, Any]:
    """Return the JSON-serializable state document (Python floats, exact)."""
    return {"format": FORMAT, "version": VERSION, "delta": delta, "bet": bet.to_dict(),
            "grid_size": grid_size, "rhos": list(rhos), "members": [list(m) for m in members],
            "rounds": dyn.rounds, "wsr_total": list(dyn.total), "wsr_dev": list(dyn.dev),
            "sums": dyn.sums.tolist(), "edges": [list(e) for e in dyn.edges]}


def check_format(d: dict[str, Any]) -> None:
    """Refuse ``d`` unless it is a version-1 Bernstein confidence-sequence document."""
    if d.get("format") != FORMAT or d.get("version") != VERSION:
        raise ValueError(f"not a Bernstein confidence-sequence state "
                         f"(format={d.get('format')!r})")


def read_dynamics(d: dict[str, Any], shape: tuple[int, ...], n_members: int,
                  grid_size: int) -> BernsteinDynamics:
    """Read and check the dynamic part of ``d`` for sequences of its configuration.

    ``shape`` is the ``(2, 5, R)`` shape of the sequences' sums, ``n_members`` their number of
    members and ``grid_size`` their grid.

    Raises
    ------
    ValueError
        Shapes that do not match the configuration, non-finite sums, negative counts,
        edges outside ``[0, grid_size]`` or in the wrong order for a valid member.
    """
    sums = np.asarray(d["sums"], dtype=np.float64)
    total = [float(v) for v in d["wsr_total"]]
    dev = [float(v) for v in d["wsr_dev"]]
    edges = d["edges"]
    n = shape[2]
    if sums.shape != shape or len(total) != n or len(dev) != n or len(edges) != n_members:
        raise ValueError("malformed confidence-sequence state: shapes do not match")
    rounds = d["rounds"]
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 0:
        raise ValueError(f"confidence-sequence rounds must be an int >= 0, got {rounds!r}")
    if not (np.all(np.isfinite(sums)) and all(map(math.isfinite, total + dev))
            and min(dev) >= 0.0):
        raise ValueError("confidence-sequence state holds non-finite or negative sums")
    if np.any(sums[:, 0] < 0.0) or np.any(sums[:, 2] > 0.0) or np.any(sums[:, 4] > 0.0):
        raise ValueError("confidence-sequence sums out of range (bets are >= 0, the "
                         "quadratic coefficients <= 0)")
    for e in edges:
        if not isinstance(e, list) or len(e) != 5:
            raise ValueError(f"confidence-sequence edges malformed: {e!r}")
        lo, hi, ok, cap_lo, cap_hi = e
        if (not all(isinstance(v, int) and not isinstance(v, bool)
                    for v in (lo, hi, cap_lo, cap_hi))
                or not 0 <= cap_lo <= lo <= grid_size
                or not 0 <= hi <= cap_hi <= grid_size
                or not isinstance(ok, bool) or (ok and lo >= hi)):
            raise ValueError(f"confidence-sequence edges out of range: {e!r}")
    return BernsteinDynamics(rounds, total, dev, sums, edges)
