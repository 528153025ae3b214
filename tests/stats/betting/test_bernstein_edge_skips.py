"""IntervalNarrowing's table reads (``next_candidate``, ``skip_rejected``) return exactly the
round / point their docstrings state, compared with a plain walk over random tables (every
exit: all clear, the first entry not clear, a later one, NaN, the limit and the table's edge).

The Bernstein sequence tests and the reference replays do not see an off-by-one in these
reads (an over-skip narrows an interval by one grid point only in a long edge move)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from monitor.stats.betting.confseq_bernstein_edges import IntervalNarrowing


def _narrowing(rng: np.random.Generator) -> tuple[IntervalNarrowing, int, int, int]:
    m = SimpleNamespace(lo_edge=0, hi_edge=100, is_valid=True, rows=slice(0, 1))
    nar = IntervalNarrowing(m, np.zeros((1, 1, 1)), np.zeros((1, 1, 1)), 100, 3.0)
    j0, base = int(rng.integers(0, 5)), int(rng.integers(20, 80))
    rounds, width = int(rng.integers(1, 9)), int(rng.integers(1, 12))
    values = [nar.clear_accept - 1.0, nar.clear_accept, 3.0, nar.clear_reject,
              nar.clear_reject + 1.0, math.nan]  # the margins themselves included
    level = rng.choice(values, size=(rounds, width), p=[0.3, 0.05, 0.1, 0.05, 0.45, 0.05])
    for side in (0, 1):
        nar.tables[side] = (j0, base, width, level.copy())
    return nar, j0, base, width


def _next_candidate(nar: IntervalNarrowing, side: int, j: int, point: int) -> int:
    table = nar.tables[side]
    assert table is not None
    j0, base, width, mix = table
    at = base - point if side == 0 else point - base
    if j < j0 or not 0 <= at < width or j >= len(mix) + j0:
        return j
    r = j
    while r < j0 + len(mix) and mix[r - j0, at] < nar.clear_accept:
        r += 1
    return r


def _skip_rejected(nar: IntervalNarrowing, side: int, j: int, point: int, limit: int) -> int:
    table = nar.tables[side]
    assert table is not None
    j0, base, width, mix = table
    at = base - point if side == 0 else point - base
    if j < j0 or not 0 <= at < width:
        return point
    step = -1 if side == 0 else 1
    p = point
    while True:
        a = base - p if side == 0 else p - base
        past = p < limit if side == 0 else p > limit
        if past or not 0 <= a < width or not mix[j - j0, a] >= nar.clear_reject:
            return p
        p += step


def test_table_reads_match_a_plain_walk() -> None:
    rng = np.random.default_rng(29)
    exits = set()
    for _ in range(3000):
        nar, j0, base, width = _narrowing(rng)
        for side in (0, 1):
            sgn = -1 if side == 0 else 1
            point = base + sgn * int(rng.integers(-1, width + 1))
            j = j0 + int(rng.integers(-1, 10))
            got = nar.next_candidate(side, j, point)
            assert got == _next_candidate(nar, side, j, point)
            limit = point + sgn * int(rng.integers(-2, width + 2))
            jj = j0 + int(rng.integers(0, len(nar.tables[side][3])))  # type: ignore[index]
            got = nar.skip_rejected(side, jj, point, limit)
            assert got == _skip_rejected(nar, side, jj, point, limit)
            exits.add(abs(got - point))
    assert {0, 1, 2} <= exits  # no skip, one point, several points
