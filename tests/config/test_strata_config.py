from __future__ import annotations

import pytest

from monitor.config import parse_config
from monitor.errors import ConfigError
from monitor.fingerprint import config_fingerprint

BASE = """
[[suites]]
name = "qa"
audit_rate = {rate}
{strata}
[[suites.certificates]]
name = "risk"
alpha = 0.1
delta = 0.05
{precision}
"""


def cfg(strata: str = "", precision: str = "", rate: float = 0.1, extra: list[str] | None = None):
    return parse_config(BASE.format(rate=rate, strata=strata, precision=precision), extra or [])


def test_valid_strata_and_precision() -> None:
    c = cfg("[suites.strata]\nby = 'judge_loss'\ncount = 4\nallocation = 'heuristic'\n"
            "floor = 0.02\nbudget = 0.2", "precision = 0.02")
    s = c.suites[0]
    assert s.strata is not None and s.strata.warmup == 1000 and s.strata.budget == 0.2
    assert s.certificates[0].precision == 0.02
    c = cfg("[suites.strata]\ncount = 3\nnames = ['a', 'b']")
    assert c.suites[0].strata.by == "stratum" and c.suites[0].strata.allocation == "cereval"
    # overrides reach the new keys
    c = cfg("[suites.strata]\ncount = 3", extra=["suites.0.strata.floor=0.05"])
    assert c.suites[0].strata.floor == 0.05


@pytest.mark.parametrize(("strata", "precision", "rate", "message"), [
    ("[suites.strata]\ncount = 3\nfloor = 0.2", "", 0.1, r"floor \(0.2\) must not exceed"),
    ("[suites.strata]\ncount = 3\nfloor = 0.2\nbudget = 0.1", "", 0.1, "must not exceed budget"),
    ("[suites.strata]\ncount = 3", "", 0.0, "positive label budget"),
    ("[suites.strata]\ncount = 3\nwarmup = 10", "", 0.1, "warmup is only allowed"),
    ("[suites.strata]\nby = 'judge_loss'\ncount = 3\nnames = ['a']", "", 0.1, "names is only"),
    ("[suites.strata]\ncount = 2\nnames = ['a', 'b']", "", 0.1, "at most count - 1"),
    ("[suites.strata]\ncount = 3\nnames = ['a', 'a']", "", 0.1, "must be unique"),
    ("[suites.strata]\ncount = 0", "", 0.1, "suites.0.strata.count"),
    ("[suites.strata]", "", 0.1, "suites.0.strata.count: Field required"),
    ("[suites.strata]\ncount = 3\nallocation = 'neyman'", "", 0.1, "allocation"),
    ("[suites.strata]\ncount = 3\nfloor = 0", "", 0.1, "floor"),
    ("[suites.strata]\ncount = 3\nbogus = 1", "", 0.1, "bogus: unknown key"),
    ("", "precision = 0.7", 0.1, "precision"),
    ("", "precision = 0", 0.1, "precision"),
])
def test_invalid(strata: str, precision: str, rate: float, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        cfg(strata, precision, rate)


def test_at_most_one_precision_goal() -> None:
    text = BASE.format(rate=0.1, strata="", precision="precision = 0.05") + (
        "[[suites.certificates]]\nname = 'r2'\nalpha = 0.2\ndelta = 0.05\nprecision = 0.05\n")
    with pytest.raises(ConfigError, match="at most one certificate per suite may set precision"):
        parse_config(text)


def test_fingerprint_unchanged_without_new_keys() -> None:
    plain = cfg()
    dumped = plain.model_dump(mode="json", include={"suites"})
    assert "strata" not in dumped["suites"][0]
    assert "precision" not in dumped["suites"][0]["certificates"][0]
    assert config_fingerprint(plain) != config_fingerprint(cfg("[suites.strata]\ncount = 2"))
    assert config_fingerprint(plain) != config_fingerprint(cfg(precision="precision = 0.1"))
