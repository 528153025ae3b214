"""``audit_policy``: uniform by default (not dumped), active and hedged accepted, refused
combinations (the same for both)."""

from __future__ import annotations

import pytest

from monitor.config.loading import parse_config
from monitor.errors import ConfigError

BASE = '''
[[suites]]
name = "qa"
models = ["a", "b"]
audit_rate = 0.1
{extra}
[[suites.certificates]]
name = "risk"
alpha = 0.1
delta = 0.05
{cert}
'''


def _parse(extra: str = "", cert: str = "", tail: str = "") -> object:
    return parse_config(BASE.format(extra=extra, cert=cert) + tail)


def test_default_is_uniform_and_not_dumped() -> None:
    cfg = parse_config(BASE.format(extra="", cert=""))
    suite = cfg.suites[0]
    assert suite.audit_policy == "uniform"
    assert "audit_policy" not in suite.model_dump()  # fingerprints of old configs unchanged


POLICIES = ["active", "hedged"]


@pytest.mark.parametrize("policy", POLICIES)
def test_active_accepted(policy: str) -> None:
    cfg = parse_config(BASE.format(extra=f'audit_policy = "{policy}"', cert=""))
    assert cfg.suites[0].audit_policy == policy
    assert cfg.suites[0].model_dump()["audit_policy"] == policy


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("extra, cert, tail", [
    ('audit_policy = "{p}"\n[suites.strata]\ncount = 2', "", ""),
    ('audit_policy = "{p}"', "precision = 0.05", ""),
    ('audit_policy = "{p}"', "", '[[suites.comparisons]]\nname = "c"\nbaseline = "a"\n'
     'candidate = "b"\n'),
])
def test_active_refuses_composition(extra: str, cert: str, tail: str, policy: str) -> None:
    with pytest.raises(ConfigError, match=f"audit_policy = \"{policy}\" cannot be combined"):
        _parse(extra.replace("{p}", policy), cert, tail)


@pytest.mark.parametrize("policy", POLICIES)
def test_active_needs_a_budget(policy: str) -> None:
    text = BASE.format(extra=f'audit_policy = "{policy}"', cert="").replace(
        "audit_rate = 0.1", "audit_rate = 0.0")
    with pytest.raises(ConfigError, match=f"audit_policy = \"{policy}\" needs audit_rate > 0"):
        parse_config(text)


def test_unknown_policy_is_an_error() -> None:
    with pytest.raises(ConfigError, match="audit_policy"):
        _parse('audit_policy = "neyman"')


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("rule", ["fixed_sequence", "e_bh"])
def test_active_refuses_family_rules(rule: str, policy: str) -> None:
    with pytest.raises(ConfigError, match=f"audit_policy = \"{policy}\" supports multiplicity"):
        _parse(f'audit_policy = "{policy}"\nmultiplicity = "{rule}"')
