"""The certificate and strata sections, and the base and field types every section shares.

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

from monitor.stats.betting.bets import DEFAULT_CAP, DEFAULT_CS_GRID, DEFAULT_RHOS, DEFAULT_UP_GRID
from monitor.stats.cereval.partition import DEFAULT_BIN_WARMUP
from monitor.stats.changepoint.detector import DEFAULT_HORIZON, DEFAULT_P
from monitor.stats.stratppi.allocation import DEFAULT_FLOOR
from monitor.stats.stratppi.estimator import DEFAULT_PPI_ALPHA

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

    name: Name = Field(
        description="Name of the certificate, unique within its suite; it labels STATE.json, the "
        "`certificate` label of the metrics and the alerts.")
    alpha: Prob = Field(
        description="Risk threshold: the certificate claims `R = E[loss] <= alpha` (a failure "
        "rate when losses are 0/1). Strictly between 0 and 1.")
    delta: Prob = Field(
        description="Error probability: a `certified` or `violated` status is wrong with "
        "probability at most `delta`, however often it is read. Strictly between 0 and 1; the "
        "suite's `multiplicity` setting may split it across certificates and models.")
    methods: Annotated[list[Method], Field(min_length=1)] = Field(
        list(METHODS),
        description="Methods that check the certificate, each with its own e-processes: "
        "`r_eval` (human labels only), `r_autoeval` (judge losses, corrected by the labels, "
        "full reliance) and `r_autoeval_plus` (a mixture over `rhos` reliance factors). At "
        "least one, no repeats.")
    primary: Method | None = Field(
        None,
        description="The method whose status drives alerts (and, with `metrics.detail = "
        "\"shown\"`, the only one exported). Must be one of `methods`; unset: "
        "`r_autoeval_plus` if listed, else the first of `methods`.")
    betting: Literal["plugin_up", "wsr", "up"] = Field(
        "plugin_up",
        description="How the e-processes bet: `plugin_up` (plug-in reliance and a universal "
        "portfolio over fixed bets; no horizon to guess), `wsr` (Waudby-Smith-Ramdas "
        "plug-in bets, one e-process per reliance factor) or `up` (the paper's universal "
        "portfolio over a grid of `up_grid` bets).")
    rhos: PosInt = Field(
        DEFAULT_RHOS,
        description="Number of reliance factors rho (evenly spaced over [0, 1], 0 and 1 "
        "included) mixed by `r_autoeval_plus`. Integer >= 1; memory and time per round grow "
        "linearly with it.")
    bet_cap: Prob | None = Field(
        None,
        description="Bet cap c: bets are at most `c / (M - alpha)` (certify side) so wealth "
        "never reaches zero. Strictly between 0 and 1; unset: the rule's default, "
        f"{DEFAULT_CAP['plugin_up']} for `plugin_up` and {DEFAULT_CAP['wsr']} for `wsr` and "
        "`up`.")
    horizon: PosInt | None = Field(
        None,
        description="Planned number of labelled rounds of the `wsr` bets (the paper's "
        "fixed-horizon form); `betting = \"wsr\"` only. Unset: anytime bets, no horizon.")
    up_grid: PosInt = Field(
        DEFAULT_UP_GRID,
        description="Cells of the universal portfolio's grid over the whole bet range "
        "(`betting = \"up\"` only). Integer >= 1.")
    cap_switch: bool = Field(
        True,
        description="`betting = \"plugin_up\"` only: the R-AutoEval+ row also keeps a switch "
        "cell (half the prior mass) that follows the fixed bets' mixture, or bets the cap once a "
        "lower confidence bound of the plug-in Kelly bet reaches it (fewer labels where the "
        "best bet is past the cap: low risks, good judges). False: the earlier bettor (8 fixed "
        "bets only). A checkpoint written before this setting existed restores only with "
        "`cap_switch = false` (the configuration always wins; the refusal says so).")
    cs_grid: PosInt | None = Field(
        DEFAULT_CS_GRID,
        description="Resolution of each method's confidence sequence on the risk "
        "(`cs_lower`, `cs_upper` in STATE.json): bounds are multiples of `1 / cs_grid`. It "
        "also keeps anytime-WSR bets under `plugin_up`. None (from Python only; TOML has no "
        "null): no confidence sequence, the bounds stay 0 and 1.")
    cs_kind: Literal["bernstein", "grid"] = Field(
        "bernstein",
        description="Confidence-sequence design: `bernstein` keeps five running sums per rho "
        "and side (a few hundred bytes per certificate); `grid` keeps the wealth of every grid "
        "point (about 160 kB per certificate). The median `bernstein` width at 1000 rounds is "
        "within 1% of the grid's or narrower (`benchmarks/confseq_width.py`).")
    precision: Annotated[float, Field(gt=0.0, le=0.5)] | None = Field(
        None,
        description="Precision goal epsilon: adds a Cer-Eval certified interval for each "
        "model's risk (at this certificate's level) and a `precision_reached` alert when its "
        "half-width first drops to epsilon or below. In (0, 0.5]; at most one certificate per "
        "suite. Unset: no interval.")
    detector_arl: PosFloat | None = Field(
        None,
        description="Alarm threshold A of the regression / improvement e-detectors, given as a "
        "guaranteed average run length (labelled rounds between false alarms; > 0). Unset: "
        "`A = detector_horizon / detector_false_alarm`.")
    detector_false_alarm: Prob = Field(
        DEFAULT_P,
        description="Probability of a false regression or improvement alarm within "
        "`detector_horizon` labelled rounds, when `detector_arl` is unset. Strictly between 0 "
        "and 1.")
    detector_horizon: PosInt = Field(
        DEFAULT_HORIZON,
        description="Labelled rounds over which `detector_false_alarm` bounds the false-alarm "
        "probability (integer >= 1); with the defaults "
        f"`A = {DEFAULT_HORIZON} / {DEFAULT_P} = {DEFAULT_HORIZON / DEFAULT_P:.0f}`.")

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

    by: Literal["stratum", "judge_loss"] = Field(
        "stratum",
        description="What defines a stratum: `stratum` (the judge event's `stratum` field; the "
        "first `count - 1` distinct names, or `names`, get a slot each, all others share "
        "`__other__`) or `judge_loss` (`count` equal-mass bins of the judge loss, edges "
        "estimated on each model's first `warmup` judge events, then frozen).")
    count: Annotated[int, Field(ge=1, le=256)] = Field(
        description="K, the number of strata (the stratified certified interval splits its "
        "error probability over K). Integer from 1 to 256.")
    names: list[Name] | None = Field(
        None,
        description="Stratum names fixed in advance, in slot order (`by = \"stratum\"` only): "
        "at most `count - 1`, unique, not `__other__`. Unset: slots in order of first "
        "appearance.")
    warmup: PosInt | None = Field(
        None,
        description="Judge events per model used to fix the bin edges (`by = \"judge_loss\"` "
        f"only; unset means {DEFAULT_BIN_WARMUP}). Warm-up units are audited at the suite's "
        "`audit_rate`, feed the betting certificates as usual, and are not used by the "
        "stratified interval.")
    allocation: Literal["uniform", "proportional", "heuristic", "plugin", "cereval"] = Field(
        "cereval",
        description="How the label budget is spread over strata: `uniform` or `proportional` "
        "(every stratum at rate `budget`), `heuristic` (StratPPI eq. 19-22 from the judge-loss "
        "spread; needs graded judge losses), `plugin` (StratPPI eq. 19 with the labelled "
        "residual spread) or `cereval` (minimises the Cer-Eval certified half-width).")
    floor: Annotated[float, Field(gt=0.0, le=1.0)] = Field(
        DEFAULT_FLOOR,
        description="Minimum audit rate of every stratum, so no stratum is ever starved. In "
        "(0, 1] and at most the budget.")
    budget: Annotated[float, Field(gt=0.0, le=1.0)] | None = Field(
        None,
        description="Overall audit rate: expected labels per judge event, in (0, 1]. Unset: "
        "the suite's `audit_rate` (which must then be positive).")
    refresh_every: PosInt = Field(
        64,
        description="Judge events between two recomputations of the per-stratum audit rates "
        "(they are also recomputed after every stratified label). Integer >= 1.")
    ppi_alpha: Prob = Field(
        DEFAULT_PPI_ALPHA,
        description="Miscoverage of the asymptotic StratPPI interval shown in STATE.json (0.1: "
        "a 90% interval). Informative only: it is not a certificate. Strictly between 0 and 1.")

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.by == "judge_loss":
            if self.names is not None:
                raise ValueError("names is only allowed with by = 'stratum'")
            if self.warmup is None:
                self.warmup = DEFAULT_BIN_WARMUP
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
