"""Configuration sections for certificates and strata (split out of :mod:`monitor.config`).

The models here are re-exported by :mod:`monitor.config`; import them from there.

Examples
--------
>>> CertificateConfig(name="risk", alpha=0.1, delta=0.05).primary
'r_autoeval_plus'
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

__all__ = [
    "METHODS",
    "CertificateConfig",
    "Method",
    "Name",
    "PosFloat",
    "PosInt",
    "Prob",
    "Section",
    "StrataConfig",
    "drop_unset_optional",
]

Method = Literal["r_eval", "r_autoeval", "r_autoeval_plus"]
METHODS: tuple[Method, ...] = ("r_eval", "r_autoeval", "r_autoeval_plus")
Prob = Annotated[float, Field(gt=0.0, lt=1.0)]
Name = Annotated[str, Field(min_length=1)]
PosInt = Annotated[int, Field(ge=1)]
PosFloat = Annotated[float, Field(gt=0.0)]


class Section(BaseModel):
    """Base of every configuration section: unknown keys are errors, defaults are validated."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


def drop_unset_optional(
    model: BaseModel, handler: SerializerFunctionWrapHandler, keys: tuple[str, ...]
) -> dict[str, Any]:
    """Serialize ``model`` with ``handler`` and drop the optional ``keys`` that are unset.

    Optional sections added after the first release are left out of dumps while unset, so the
    configuration fingerprint of older configs (and their checkpoints) does not change.
    """
    out: dict[str, Any] = handler(model)
    for key in keys:
        if out.get(key) is None:
            out.pop(key, None)
    return out


class CertificateConfig(Section):
    """A risk certificate ``R <= alpha`` at level ``1 - delta``, checked by several methods."""

    name: Name
    alpha: Prob
    delta: Prob
    methods: Annotated[list[Method], Field(min_length=1)] = list(METHODS)
    primary: Method | None = None
    betting: Literal["plugin_up", "wsr", "up"] = "plugin_up"
    rhos: PosInt = 10
    bet_cap: Prob | None = None  # None: the rule's default (0.95 plugin_up, 0.5 wsr / up)
    horizon: PosInt | None = None
    up_grid: PosInt = 1000
    cs_grid: PosInt | None = 1000
    # confidence-sequence design: "bernstein" keeps five sums per rho and side (a few hundred
    # bytes per certificate); "grid" keeps the wealth of every grid point (about 160 kB)
    cs_kind: Literal["bernstein", "grid"] = "bernstein"
    precision: Annotated[float, Field(gt=0.0, le=0.5)] | None = None
    # change detection (regression / improvement e-detectors): alarm threshold A, given as an
    # average run length ``detector_arl`` or as a false-alarm probability over a horizon of
    # labels (A = detector_horizon / detector_false_alarm; default 4500 / 0.02 = 225000)
    detector_arl: PosFloat | None = None
    detector_false_alarm: Prob = 0.02
    detector_horizon: PosInt = 4500

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return drop_unset_optional(self, handler, ("precision", "detector_arl"))

    @model_validator(mode="after")
    def _check(self) -> Self:
        if len(set(self.methods)) != len(self.methods):
            raise ValueError("methods must not repeat")
        if self.primary is None:
            plus = "r_autoeval_plus"
            self.primary = plus if plus in self.methods else self.methods[0]
        elif self.primary not in self.methods:
            raise ValueError(f"primary {self.primary!r} is not one of methods {self.methods}")
        return self

    @property
    def detector_threshold(self) -> float:
        """Alarm threshold ``A`` of the change detectors (average run length >= A)."""
        if self.detector_arl is not None:
            return float(self.detector_arl)
        return self.detector_horizon / self.detector_false_alarm

    @property
    def primary_method(self) -> str:
        """The method whose status drives alerts."""
        return self.primary or self.methods[0]


class StrataConfig(Section):
    """How one suite's traffic is split into strata and how auditing is steered across them.

    Keys of ``[suites.strata]`` (see :mod:`monitor.state.strata` for the statistics):

    - ``by``: ``"stratum"`` (the judge event's ``stratum`` field; the first ``count - 1``
      distinct names get their own slot, in order of first appearance or as listed in
      ``names``; later names and events without a stratum share the last slot
      ``"__other__"``) or ``"judge_loss"`` (``count`` equal-mass bins of the judge loss,
      edges estimated on the first ``warmup`` judge events of each model and then frozen).
    - ``count``: K, the number of strata (the certified interval splits delta over K).
    - ``names``: optional stratum names fixed in advance (``by = "stratum"`` only).
    - ``warmup``: judge events used to fix the bin edges (``by = "judge_loss"`` only;
      default 1000). Warm-up units are audited at the suite's ``audit_rate``, feed the
      betting certificates as usual, and are *not* used by the stratified certificate.
    - ``allocation``: how the label budget is spread over strata: ``"uniform"`` (every
      stratum at rate ``budget``; same as ``"proportional"``), ``"heuristic"`` (StratPPI
      eq. 19-22 from judge-loss spread; needs graded judge losses such as probabilities:
      with 0/1 judge losses the spread ``E[f(1 - f)]`` is 0), ``"plugin"`` (StratPPI eq. 19
      with the labelled residual spread), ``"cereval"`` (default: minimises the Cer-Eval
      certified half-width, label shares proportional to ``(w_k^2 v_k)^(1/3)``). The StratPPI
      rules optimise the asymptotic StratPPI variance, not the certified half-width.
    - ``floor``: minimum audit rate of every stratum (``0 < floor <= budget``), so no stratum
      is ever starved.
    - ``budget``: overall audit rate, expected labels per judge event (default: the suite's
      ``audit_rate``; must be positive).
    - ``refresh_every``: judge events between two recomputations of the audit rates (they are
      also recomputed after every stratified label).
    - ``ppi_alpha``: miscoverage of the asymptotic StratPPI interval shown in STATE.json.

    The precision goal is the ``precision`` key of a ``[[suites.certificates]]`` entry (at most
    one per suite): the half-width epsilon at which a ``precision_reached`` alert fires.
    """

    by: Literal["stratum", "judge_loss"] = "stratum"
    count: Annotated[int, Field(ge=1, le=256)]
    names: list[Name] | None = None
    warmup: PosInt | None = None
    allocation: Literal["uniform", "proportional", "heuristic", "plugin", "cereval"] = "cereval"
    floor: Annotated[float, Field(gt=0.0, le=1.0)] = 0.01
    budget: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    refresh_every: PosInt = 64
    ppi_alpha: Prob = 0.1

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.by == "judge_loss":
            if self.names is not None:
                raise ValueError("names is only allowed with by = 'stratum'")
            if self.warmup is None:
                self.warmup = 1000
        elif self.warmup is not None:
            raise ValueError("warmup is only allowed with by = 'judge_loss'")
        if self.names is not None:
            if len(set(self.names)) != len(self.names):
                raise ValueError(f"names must be unique, got {self.names}")
            if len(self.names) > max(self.count - 1, 0) or "__other__" in self.names:
                raise ValueError(
                    f"names: at most count - 1 = {self.count - 1} names (the last slot is "
                    f"'__other__'), got {len(self.names)}"
                )
        if self.budget is not None and self.floor > self.budget:
            raise ValueError(f"floor ({self.floor}) must not exceed budget ({self.budget})")
        return self
