r"""The ``[[suites.comparisons]]`` section: a candidate model against a baseline.

Examples
--------
>>> from monitor.config.loading import parse_config
>>> text = '''
... [[suites]]
... name = "qa"
... models = ["m-v1", "m-v2", "m-v3"]
... [[suites.certificates]]
... name = "risk"
... alpha = 0.1
... delta = 0.05
... [[suites.comparisons]]
... name = "v2-vs-v1"
... baseline = "m-v1"
... candidate = "m-v2"
... margin = 0.02
... delta = 0.05
... '''
>>> cmp = parse_config(text).suites[0].comparisons[0]
>>> cmp.candidate_list, cmp.design, cmp.threshold_delta
(['m-v2'], 'paired', 0.05)
>>> ComparisonConfig(name="c", baseline="a", candidates=["b", "c"]).threshold_delta
0.025
>>> parse_config(text.replace('"m-v2"\nmargin', '"m-v9"\nmargin'))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
monitor.errors.ConfigError: <config>: suites.0: comparison 'v2-vs-v1': model 'm-v9' is not...
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Literal, Self

from pydantic import Field, model_validator

from monitor.config.certificates import Name, Prob, Section

__all__ = ["ComparisonConfig"]


class ComparisonConfig(Section):
    """A comparison: is the candidate worse than the baseline by more than ``margin``.

    Alerts of kind ``non_inferior`` (``risk(candidate) - risk(baseline) < margin``, shown at
    level ``1 - delta``) and ``inferior`` (the difference ``> margin``); several candidates share
    ``delta`` (Bonferroni). The statistics are in :mod:`monitor.stats.comparison`.
    """

    name: Name = Field(description="Name of the comparison, unique in its suite (alert label).")
    baseline: Name = Field(description="The model the candidates are compared with.")
    candidate: Name | None = Field(
        default=None, description="The candidate model (or use `candidates` for several).")
    candidates: Annotated[list[Name], Field(min_length=1)] | None = Field(
        default=None,
        description="Several candidates compared with the same baseline; they share `delta` "
                    "(each verdict at delta / number of candidates).")
    margin: Annotated[float, Field(gt=-1.0, lt=1.0)] = Field(
        default=0.02,
        description="Non-inferiority margin on the risk scale: `non_inferior` means "
                    "risk(candidate) - risk(baseline) < margin, `inferior` means it is > margin.")
    delta: Prob = Field(
        default=0.05,
        description="Error budget of the comparison: each false verdict (at every time it may "
                    "be read) has probability at most delta, shared by the candidates.")
    design: Literal["paired", "unpaired"] = Field(
        default="paired",
        description="`paired`: shadow traffic, both versions answer the same examples and an "
                    "audited example is labelled for both; `unpaired`: a live split of "
                    "traffic, the i-th audited unit of each arm form the i-th pair.")

    @model_validator(mode="after")
    def _check(self) -> Self:
        if (self.candidate is None) == (self.candidates is None):
            raise ValueError(f"comparison {self.name!r}: set exactly one of candidate and "
                             "candidates")
        names = self.candidate_list
        if len(set(names)) != len(names):
            raise ValueError(f"comparison {self.name!r}: candidates must be distinct: {names}")
        if self.baseline in names:
            raise ValueError(f"comparison {self.name!r}: the baseline {self.baseline!r} is also "
                             "a candidate")
        return self

    @property
    def candidate_list(self) -> list[str]:
        """The candidates, one or several, in configuration order."""
        return [self.candidate] if self.candidate is not None else list(self.candidates or [])

    @property
    def threshold_delta(self) -> float:
        """Level of each candidate's verdicts: ``delta / number of candidates`` (Bonferroni)."""
        return self.delta / len(self.candidate_list)

    def check_models(self, is_model: Callable[[str], bool]) -> None:
        """Raise ``ValueError`` unless ``is_model(name)`` holds for the baseline and candidates."""
        for m in [self.baseline, *self.candidate_list]:
            if not is_model(m):
                raise ValueError(f"comparison {self.name!r}: model {m!r} is not among the "
                                 "suite's models")
