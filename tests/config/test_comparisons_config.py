"""``[[suites.comparisons]]``: TOML shape, validation, fingerprint, descriptions."""

from __future__ import annotations

import pytest

from monitor.config import parse_config
from monitor.config.comparisons import ComparisonConfig
from monitor.errors import ConfigError
from monitor.fingerprint import config_fingerprint

BASE = """
[[suites]]
name = "qa"
models = {models}
[[suites.certificates]]
name = "risk"
alpha = 0.1
delta = 0.05
"""


def cfg(models: str = '["m-v1", "m-v2", "m-v3"]', comparisons: str = "") -> object:
    return parse_config(BASE.format(models=models) + comparisons)


def test_toml_shape_and_defaults() -> None:
    text = """
[[suites.comparisons]]
name = "v2-vs-v1"
baseline = "m-v1"
candidate = "m-v2"
margin = 0.02
delta = 0.05
[[suites.comparisons]]
name = "next"
baseline = "m-v1"
candidates = ["m-v2", "m-v3"]
design = "unpaired"
"""
    a, b = cfg(comparisons=text).suites[0].comparisons  # type: ignore[attr-defined]
    assert (a.name, a.baseline, a.candidate_list, a.margin, a.delta, a.design) == (
        "v2-vs-v1", "m-v1", ["m-v2"], 0.02, 0.05, "paired")
    assert b.candidate_list == ["m-v2", "m-v3"] and b.threshold_delta == 0.025
    assert (b.margin, b.delta, b.design) == (0.02, 0.05, "unpaired")


@pytest.mark.parametrize(("body", "message"), [
    ('name="c"\nbaseline="m-v1"', "exactly one of candidate and candidates"),
    ('name="c"\nbaseline="m-v1"\ncandidate="m-v2"\ncandidates=["m-v3"]', "exactly one"),
    ('name="c"\nbaseline="m-v1"\ncandidates=["m-v2", "m-v2"]', "distinct"),
    ('name="c"\nbaseline="m-v1"\ncandidate="m-v1"', "also a candidate"),
    ('name="c"\nbaseline="m-v1"\ncandidate="m-v9"', "'m-v9' is not among the suite's models"),
    ('name="c"\nbaseline="m-v0"\ncandidate="m-v2"', "'m-v0' is not among"),
    ('name="c"\nbaseline="m-v1"\ncandidate="m-v2"\nmargin=1.0', "margin"),
    ('name="c"\nbaseline="m-v1"\ncandidate="m-v2"\ndelta=0', "delta"),
    ('name="c"\nbaseline="m-v1"\ncandidate="m-v2"\ndesign="ab"', "design"),
    ('name="c"\nbaseline="m-v1"\ncandidate="m-v2"\nmargn=0.1', "margn"),
])
def test_bad_comparisons_are_config_errors(body: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        cfg(comparisons="[[suites.comparisons]]\n" + body + "\n")


def test_unique_names_and_globs() -> None:
    one = '[[suites.comparisons]]\nname="c"\nbaseline="m-v1"\ncandidate="m-v2"\n'
    with pytest.raises(ConfigError, match="comparison names must be unique"):
        cfg(comparisons=one + one)
    # with a glob the models are not known in advance: a matching pattern is enough
    assert cfg(models='["m-*"]', comparisons=one).suites[0].comparisons  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="not among"):
        cfg(models='["x-*"]', comparisons=one)


def test_fingerprint_unchanged_without_comparisons() -> None:
    plain = cfg()
    dumped = plain.model_dump(mode="json", include={"suites"})  # type: ignore[attr-defined]
    assert "comparisons" not in dumped["suites"][0]
    one = '[[suites.comparisons]]\nname="c"\nbaseline="m-v1"\ncandidate="m-v2"\n'
    assert config_fingerprint(plain) != config_fingerprint(cfg(comparisons=one))  # type: ignore[arg-type]


def test_every_field_has_a_description() -> None:
    for name, field in ComparisonConfig.model_fields.items():
        assert field.description, name
