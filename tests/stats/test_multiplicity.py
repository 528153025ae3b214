from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from monitor.stats.multiplicity import bonferroni_deltas, e_bh, fixed_sequence

L = math.log


def test_bonferroni() -> None:
    assert bonferroni_deltas(0.1, 1) == [0.1]
    assert bonferroni_deltas(0.1, 25) == [0.1 / 25] * 25
    for bad in (0, -1, True):
        with pytest.raises(ValueError):
            bonferroni_deltas(0.1, bad)
    with pytest.raises(ValueError):
        bonferroni_deltas(1.5, 2)


def test_fixed_sequence_stops_at_first_non_rejection() -> None:
    assert fixed_sequence([L(10), L(11), L(9.99), L(1e6)], 0.1) == [True, True, False, False]
    assert fixed_sequence([L(5), L(1e9)], 0.1) == [False, False]
    assert fixed_sequence([L(100)] * 3, 0.01) == [True, True, True]
    assert fixed_sequence([], 0.1) == []
    # each test is at the full delta (no split)
    assert fixed_sequence([L(21)], 0.05) == [True]
    with pytest.raises(ValueError):
        fixed_sequence([math.nan], 0.1)


def test_e_bh_hand_examples() -> None:
    # K = 4, delta = 0.1: thresholds K / (delta k) = 40, 20, 13.33, 10 for k = 1..4
    assert e_bh([L(15), L(50), L(14), L(1)], 0.1) == [True, True, True, False]
    assert e_bh([L(15), L(30), L(1), L(1)], 0.1) == [False, False, False, False]
    assert e_bh([L(10)] * 4, 0.1) == [True] * 4
    assert e_bh([L(41), L(1), L(1), L(1)], 0.1) == [True, False, False, False]
    assert e_bh([], 0.1) == []
    assert e_bh([math.inf, -math.inf], 0.1) == [True, False]


def test_e_bh_matches_definition_bruteforce() -> None:
    rng = np.random.default_rng(0)
    for _ in range(300):
        k = int(rng.integers(1, 7))
        delta = float(rng.choice([0.05, 0.1, 0.2]))
        e = np.exp(rng.normal(2.0, 2.0, k))
        got = e_bh(np.log(e).tolist(), delta)
        srt = np.sort(e)[::-1]
        ks = [j for j in range(1, k + 1) if srt[j - 1] >= k / (delta * j)]
        kstar = max(ks) if ks else 0
        assert sum(got) == kstar
        if kstar:
            assert all(e[i] >= srt[kstar - 1] for i in range(k) if got[i])
        # e-BH dominates Bonferroni on e-values (reject e >= K / delta)
        assert all(g for g, v in zip(got, e, strict=True) if v >= k / delta)


def test_e_bh_is_monotone_in_evidence() -> None:
    base = [L(5), L(15), L(25), L(2)]
    ref = e_bh(base, 0.2)
    for i, bump in itertools.product(range(4), (1.0, 10.0)):
        more = list(base)
        more[i] += math.log(bump)
        got = e_bh(more, 0.2)
        assert all(g or not r for g, r in zip(got, ref, strict=True))
