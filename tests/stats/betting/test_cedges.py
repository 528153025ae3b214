"""The compiled IntervalNarrowing tables make the same decisions as the numpy ones.

A table is a filter: a value at or above ``clear_reject`` means rejected, below
``clear_accept`` accepted, anything between is decided exactly in Python floats. The compiled
table may hold a bound of the mixture instead of the mixture where the bound already decides;
every point must be decided as the exact mixture decides it.
"""

from __future__ import annotations

import json
from types import ModuleType

import numpy as np
import pytest

from monitor.stats.betting import confseq_bernstein_edges
from monitor.stats.betting.bets import BetConfig
from monitor.stats.betting.confseq_bernstein import BernsteinSequences
from monitor.stats.betting.confseq_bernstein_edges import IntervalNarrowing
from monitor.stats.betting.quadratic_wealth import mixture_rejects
from monitor.stats.betting.risk_group import CertificateGroup
from tests.ckernels import load


@pytest.fixture(scope="module")
def ce() -> ModuleType:
    return load("monitor.stats.betting.cedges")


class _Member:
    def __init__(self, lo: int, hi: int, rows: slice) -> None:
        self.lo_edge, self.hi_edge, self.is_valid, self._rows = lo, hi, True, rows

    @property
    def rows(self) -> slice:
        return self._rows


def _decisions(table: np.ndarray, walk: IntervalNarrowing, sums: np.ndarray, side: int, j: int,
               point: int, rows: slice) -> np.ndarray:
    """What IntervalNarrowing.rejected decides from each entry: the table when clear, else
    exactly."""
    out = np.where(table >= walk.clear_reject, 1, np.where(table < walk.clear_accept, 0, -1))
    for r, p in zip(*np.nonzero(out == -1), strict=True):
        m = (point - p if side == 0 else point + p) / walk.grid_size
        out[r, p] = mixture_rejects(sums[j + r][:, rows], m, side == 0, walk.log_threshold)
    return out


def test_tables_decide_every_point_as_the_exact_mixture(ce: ModuleType) -> None:
    rng = np.random.default_rng(8)
    ambiguous = 0
    for case in range(300):
        k, n_rows = int(rng.integers(1, 33)), int(rng.choice([1, 2, 10, 12, 70]))
        # sums around the threshold's scale: A grows with the rounds, quadratic terms <= 0
        a = np.cumsum(rng.uniform(0, 1.5, (k, n_rows)), axis=0)
        b = a * rng.uniform(0, 1, (k, n_rows))
        c = -np.cumsum(rng.uniform(0, 2, (k, n_rows)), axis=0)
        d = c * rng.uniform(0, 1, (k, n_rows))
        e = c * rng.uniform(0, 1, (k, n_rows))
        sums = np.ascontiguousarray(np.stack([a, b, c, d, e], axis=1))
        if case % 10 == 0:  # non-finite bounds: no shortcut, decided exactly (as numpy's NaN)
            sums[int(rng.integers(0, k)), int(rng.integers(0, 5)),
                 int(rng.integers(0, n_rows))] = rng.choice([np.inf, -np.inf, np.nan])
        r0 = int(rng.integers(0, n_rows))
        rows = slice(r0, int(rng.integers(r0 + 1, n_rows + 1)))
        grid = int(rng.choice([10, 100, 1000]))
        side, j = int(rng.integers(0, 2)), int(rng.integers(0, k))
        width = int(rng.integers(1, grid + 2))  # up to one point beyond the grid
        point = grid - 1 if side == 0 else 1
        member = _Member(0, grid, rows)
        with np.errstate(invalid="ignore", over="ignore"):
            exact = IntervalNarrowing(member, sums, sums, grid, 1.0)._mixtures_numpy(side, j, point,
                                                                            width)
            # the threshold on a table value, on a row's largest bound or on that bound less
            # log S, or a margin away from one: the cases where the shortcuts decide
            q_top = np.nanmax(exact) if np.isfinite(exact).any() else 1.0
            pick = float(rng.choice([q_top, q_top - np.log(rows.stop - rows.start)]))
            margin = 1e-9 * (1.0 + abs(pick))
            threshold = pick + float(rng.choice([0.0, margin, -margin, 1e-12, 0.3]))
            walk = IntervalNarrowing(member, sums, sums, grid, threshold)
            out = np.empty_like(exact)
            ce.mixtures(sums, j, rows.start, rows.stop, side == 0, point, width, grid,
                        walk.clear_accept, walk.clear_reject, out)
            got = _decisions(out, walk, sums, side, j, point, rows)
            want = _decisions(exact, walk, sums, side, j, point, rows)
        assert np.array_equal(got, want), case
        band = (exact >= walk.clear_accept) & (exact < walk.clear_reject)
        ambiguous += int(band.sum())
        if rows.stop - rows.start == 1 and np.isfinite(exact).all():
            assert np.array_equal(out, exact), case  # one row: the row's bound, same bits
    assert ambiguous > 50  # the exact path was exercised


def test_sequences_move_the_same_with_either_table(ce: ModuleType,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def run() -> list[str]:
        rng = np.random.default_rng(21)
        out = []
        for s in range(30):
            if s % 2:
                g = CertificateGroup(0.1, 0.05, ["r_eval", "r_autoeval", "r_autoeval_plus"],
                                     BetConfig())
                upd, seq = g.update, g
            else:
                bs = BernsteinSequences(0.05, [0.0, 0.5, 1.0], BetConfig(rule="wsr"),
                                        int(rng.choice([100, 1000])), [[0], [0, 1, 2]])
                upd, seq = bs.update, bs
            p = float(rng.choice([0.02, 0.1, 0.4]))
            for i in range(int(rng.integers(50, 400))):
                h = float(rng.random() < p)
                upd(h, h if rng.random() < 0.9 else 1.0 - h, float(rng.random() * 0.3))
                if i % 97 == 0:
                    out.append(json.dumps(seq.to_state(), sort_keys=True))
            out.append(json.dumps(seq.to_state(), sort_keys=True))
        return out

    compiled = run()
    assert confseq_bernstein_edges._compiled_mixtures is ce.mixtures
    monkeypatch.setattr(confseq_bernstein_edges, "_compiled_mixtures", None)
    assert run() == compiled


def test_bad_input(ce: ModuleType) -> None:
    sums = np.zeros((4, 5, 3))
    with pytest.raises(ValueError, match="inconsistent"):
        ce.mixtures(sums, 0, 0, 3, True, 9, 4, 10, 1.0, 1.1, np.empty((3, 4)))
    with pytest.raises(TypeError):
        ce.mixtures(sums.astype(np.float32), 0, 0, 3, True, 9, 4, 10, 1.0, 1.1,
                    np.empty((4, 4)))
    with pytest.raises((TypeError, ValueError, BufferError)):
        ce.mixtures(sums[:, :, ::2], 0, 0, 1, True, 9, 4, 10, 1.0, 1.1, np.empty((4, 4)))


@pytest.mark.parametrize("seed", range(12))
def test_compiled_filter_same_sequences(ce: ModuleType, seed: int,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """next_rejections with cedges.edge_filter gives the numpy filter's bounds and state."""
    rng = np.random.default_rng(500 + seed)
    rhos = sorted(rng.random(int(rng.integers(1, 6))).tolist())
    members = [[0], list(range(len(rhos)))]
    risk = float(rng.uniform(0.02, 0.5))
    rounds = [(float(rng.random() < risk), float(rng.random() < risk), float(rng.random()))
              for _ in range(int(rng.integers(200, 1500)))]

    delta = float(rng.choice([0.05, 0.2]))

    def run() -> str:
        s = BernsteinSequences(delta, rhos, BetConfig(), 1000, members)
        for h, f, b in rounds:
            s.update(h, f, b)
        return json.dumps(s.to_state())

    assert confseq_bernstein_edges._compiled_filter is not None
    compiled = run()
    monkeypatch.setattr(confseq_bernstein_edges, "_compiled_filter", None)
    assert run() == compiled


def test_compiled_filter_values(ce: ModuleType) -> None:
    """The compiled mixtures are within rounding of numpy's where they could be candidates."""
    rng = np.random.default_rng(7)
    k, n_rows = 9, 7
    both = rng.normal(0.0, 3.0, (2, k + 1, 5, n_rows))[:, 1:]  # strided, as _settle passes it
    segs = [(0, 1), (1, 4), (5, 2)]
    pts = ([0.3, 0.5, 0.9], [0.1, 0.2, 0.7])
    out = np.empty((2, k, 3))
    ce.edge_filter(both, segs, pts, -np.inf, out)
    for side in range(2):
        for r in range(k):
            for i, (a, n) in enumerate(segs):
                m = pts[side][i]
                s = both[side, r][:, a : a + n]
                lin = m * s[0] - s[1]
                q = (lin if side == 0 else -lin) + (m * s[2] - 2.0 * s[3]) * m + s[4]
                want = float(np.log(np.mean(np.exp(q - q.max()))) + q.max())
                assert out[side, r, i] == pytest.approx(want, rel=1e-13, abs=1e-13)
    with pytest.raises(ValueError, match="segment"):
        ce.edge_filter(both, [(0, 8)], ([0.1], [0.1]), 0.0, np.empty((2, k, 1)))
