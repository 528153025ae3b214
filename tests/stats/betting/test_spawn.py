"""Groups spawned from a never-updated prototype equal newly built ones and share no state.

New models of a suite are spawned (monitor/state/suite.py): the copy shares read-only parts
(rhos, bet grids, prior weights, row layout) with the prototype and its siblings, so a state
container shared by mistake would let one model's rounds leak into another's. These tests
feed spawned siblings different rounds and compare each with an independently built group.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from monitor.stats.betting.autoeval import PlugInTest, one_sided_test
from monitor.stats.betting.bets import BetConfig
from monitor.stats.betting.plugin import PlugInEProcess
from monitor.stats.betting.risk import RiskMonitor, make_interval
from monitor.stats.betting.risk_group import CertificateGroup

ALL = ["r_eval", "r_autoeval", "r_autoeval_plus"]


def rounds(seed: int, n: int) -> list[tuple[float, float, float | None]]:
    rng = np.random.default_rng(seed)
    out: list[tuple[float, float, float | None]] = []
    for _ in range(n):
        h = float(rng.random() < 0.2)
        f = h if rng.random() < 0.8 else 1.0 - h
        out.append((h, f, None if rng.random() < 0.1 else float(rng.random() * 0.5)))
    return out


def members(g: CertificateGroup) -> dict[str, object]:
    """Each member monitor's state and the values a view reads from it."""
    return {m: (mon.to_state(), mon.status, mon.cs_lower, mon.cs_upper, mon.rounds)
            for m, mon in g.members.items()}


@pytest.mark.parametrize(("rule", "cs_kind", "cs_grid", "methods"), list(itertools.product(
    ["plugin_up", "wsr"], ["bernstein", "grid"], [None, 50], [ALL, ["r_autoeval_plus"]])))
def test_spawned_groups_equal_built_ones_and_share_no_state(
        rule: str, cs_kind: str, cs_grid: int | None, methods: list[str]) -> None:
    def build() -> CertificateGroup:
        return CertificateGroup(0.15, 0.05, methods, BetConfig(rule), n_rhos=4,  # type: ignore[arg-type]
                                cs_grid=cs_grid, cs_kind=cs_kind)

    proto = build()
    fresh = proto.to_state()
    a, b = proto.spawn(), proto.spawn()
    ref_a, ref_b = build(), build()
    for i, (ra, rb) in enumerate(zip(rounds(1, 300), rounds(2, 300), strict=True)):
        a.update(*ra)
        ref_a.update(*ra)
        if i % 2:  # b lags and sees other rounds
            b.update(*rb)
            ref_b.update(*rb)
        if i % 50 == 49:
            assert a.to_state() == ref_a.to_state()
            assert b.to_state() == ref_b.to_state()
            assert members(a) == members(ref_a)  # what views read: the member monitors
            assert members(b) == members(ref_b)
    assert proto.to_state() == fresh  # the prototype never moves
    assert proto.spawn().to_state() == fresh
    with pytest.raises(ValueError, match="no round"):
        a.spawn()


def test_spawn_sets_every_slot() -> None:
    """The explicit copies in ``spawn`` name every slot (a new slot must be added there)."""
    proto = one_sided_test(0.2, 0.1, "violate", [0.0, 0.5, 1.0], BetConfig())
    child = proto.spawn()
    for obj, cls in ((child, PlugInTest), (child._pl, PlugInEProcess)):
        slots = [k for c in cls.__mro__ for k in getattr(c, "__slots__", ())]
        missing = [k for k in slots if not hasattr(obj, k)]
        assert not missing, (cls.__name__, missing)


@pytest.mark.parametrize(("rule", "method"), [("plugin_up", "r_autoeval_plus"),
                                              ("plugin_up", "r_eval"), ("wsr", "r_autoeval")])
def test_respawn_equals_from_parts(rule: str, method: str) -> None:
    """A respawned monitor is the one from_parts assembles from the same parts and config."""
    bet = BetConfig(rule=rule)
    proto = RiskMonitor(0.2, 0.1, method, bet, n_rhos=4, cs_grid=50)
    config = proto.to_state()["config"]
    proto.add_judge_bias(0.5)  # the new monitor's own sum starts at 0 all the same
    rhos = proto.rhos.tolist()
    for cs, sides in itertools.product((None, make_interval("bernstein", 0.1, rhos, bet, 50)),
                                       (("certify", "violate"), ("certify", "certify"))):
        cert, viol = (one_sided_test(0.2, 0.1, side, rhos, bet) for side in sides)
        new = proto.respawn(cert, viol, cs)
        ref = RiskMonitor.from_parts(config, cert, viol, cs)
        assert type(new) is type(ref) and vars(new).keys() == vars(ref).keys()
        assert all(vars(new)[k] == vars(ref)[k] for k in vars(ref)), vars(new)
        assert new.certify_test is cert and new.violate_test is viol


@pytest.mark.parametrize("methods", [ALL, ["r_autoeval_plus"], ["r_eval", "r_autoeval"]])
def test_restoring_into_a_spawn_equals_building_from_the_state(methods: list[str]) -> None:
    """``from_state(d, proto)`` is ``from_state(d)``, now and after more rounds.

    It shares the prototype's read-only parts (as a spawn) and leaves the prototype as it
    was; a prototype of another configuration is ignored (the group is built from ``d``).
    """
    def build(alpha: float = 0.15) -> CertificateGroup:
        return CertificateGroup(alpha, 0.05, methods, BetConfig(), n_rhos=4, cs_grid=50)

    proto = build()
    fresh = proto.to_state()
    other = build(0.2)
    live = build()
    stream = rounds(3, 400)
    for i, r in enumerate(stream[:300]):
        live.update(*r)
        if i % 37 == 5:  # restore at rounds that are and are not bet-block boundaries
            d = live.to_state()
            built = CertificateGroup.from_state(d)
            loaded = CertificateGroup.from_state(d, proto)
            ignored = CertificateGroup.from_state(d, other)
            assert loaded.to_state() == built.to_state() == ignored.to_state() == d
            assert members(loaded) == members(built)
            assert loaded._grid is not None and proto._grid is not None
            assert loaded._grid._kernel is proto._grid._kernel  # shared, as a spawn's
            for r2 in stream[i + 1 : i + 60]:
                built.update(*r2)
                loaded.update(*r2)
            assert loaded.to_state() == built.to_state()
            assert members(loaded) == members(built)
    assert proto.to_state() == fresh  # the prototype never moves
    with pytest.raises(ValueError, match=r"configuration|rhos"):
        bad = live.to_state()
        bad["plugin_tests"][0]["eprocess"]["delta"] = 0.5  # inconsistent with the group
        CertificateGroup.from_state(bad, proto)
