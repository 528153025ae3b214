"""HedgedPairs: the k-th rows of both sides pair, whichever comes first; restarts; state."""

from __future__ import annotations

import math

import numpy as np
import pytest

from monitor.stats.betting.hedge import HedgedPairs

THR = math.log(10.0)


def test_rows_pair_by_position_whichever_side_comes_first() -> None:
    a, b = HedgedPairs([THR]), HedgedPairs([THR])
    units = [[0.5], [1.0], [2.9]]
    labels = [([0.1], True), ([0.2], False), ([1.0], True)]
    for u in units:  # every per-unit row first, then the per-label ones
        a.unit(u)
    for row, ok in labels:
        a.label(row, ok)
    for u, (row, ok) in zip(units, labels, strict=True):  # interleaved, label first
        b.label(row, ok)
        b.unit(u)
    assert a.to_state() == b.to_state()
    assert a.paired == 3 and a.labels == 2 and a.waiting == (0, 0)
    assert a.combined(0) == pytest.approx(math.log((math.exp(2.9) + math.e) / 2))
    assert a.crossed[0] and a.crossed_at_labels(0) == 2  # (e^2.9 + e) / 2 = 10.3 >= 10


def test_no_crossing_until_the_same_unit_has_both_values() -> None:
    hp = HedgedPairs([THR])
    assert hp.unit([10.0]) == [] and not hp.crossed[0]  # a huge per-unit value alone waits
    assert hp.label([-50.0], True) == [0]  # its pair: (e^10 + e^-50) / 2 >= 10


def test_restart_zeroes_the_unpaired_rows_of_the_restarted_tests() -> None:
    hp = HedgedPairs([THR, THR])
    hp.unit([3.0, 3.0])
    hp.label([3.0, 3.0], True)
    assert hp.crossed.all()
    hp.unit([5.0, 5.0])  # an old-epoch row still waiting for its pair
    hp.restart([1])
    assert hp.crossed.tolist() == [True, False] and hp.crossed_at_labels(1) is None
    hp.label([0.0, 0.0], True)
    assert hp.combined(1) == 0.0
    assert hp.combined(0) == pytest.approx(np.logaddexp(5.0, 0.0) - math.log(2.0))


@pytest.mark.parametrize("field, value", [("units", [[float("nan")]]), ("crossed", [True]),
                                          ("paired", -1), ("kind", "x")])
def test_from_state_refuses_junk(field: str, value: object) -> None:
    hp = HedgedPairs([THR])
    hp.unit([0.5])
    d = hp.to_state()
    assert HedgedPairs.from_state(d).to_state() == d
    d[field] = value
    with pytest.raises(ValueError):
        HedgedPairs.from_state(d)
