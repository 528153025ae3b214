"""Betting rules for one-sided testing-by-betting e-processes.

Three rules:

- ``"plugin_up"`` (default): a predictable plug-in reliance ``rho_t`` and a universal portfolio
  over a small grid of fixed bets with ``c = 0.95``; its math and online e-process live in
  :mod:`monitor.stats.betting.plugin` (it is not a per-rho row rule, see there);
- ``"wsr"``: the Waudby-Smith--Ramdas predictable plug-in bet, eq. (20)-(21), in its anytime
  form (``horizon=None``) or the paper's fixed-horizon form (``horizon=n``);
- ``"up"``: the universal portfolio, eq. (19): a mixture of constant-bet wealths over a fine
  grid spanning the whole bet range ``[0, 1/(M - alpha))`` with a Beta(1/2, 1/2) prior
  (R-AutoEval+, Park, Zecchin, Simeone, Appendix C).

This module holds the configuration and the pure per-round formulas; the state that evolves over
rounds lives in :class:`monitor.stats.betting.eprocess.BettingEProcess`.

Sign convention: ``side="certify"`` tests H0: mean > alpha with wealth factor
``1 - lam (q - alpha)``; ``side="violate"`` tests H0: mean <= alpha with ``1 + lam (q - alpha)``.
Bets are non-negative and capped at ``c / (M - alpha)`` (certify) or ``c / (alpha - m)``
(violate) for observations in ``[m, M]``, so every factor is at least ``1 - c > 0``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from monitor.stats.state_contract import restorer

__all__ = [
    "DEFAULT_CAP",
    "DEFAULT_CS_GRID",
    "DEFAULT_RHOS",
    "DEFAULT_UP_GRID",
    "RULES",
    "BetConfig",
    "Rule",
    "Side",
    "bet_cap",
    "up_grid",
    "wsr_bet",
    "wsr_prior",
    "wsr_scale",
]

Rule = Literal["plugin_up", "wsr", "up"]
RULES: tuple[Rule, ...] = ("plugin_up", "wsr", "up")
DEFAULT_CAP: dict[str, float] = {"plugin_up": 0.95, "wsr": 0.5, "up": 0.5}
DEFAULT_UP_GRID = 1000
"""Cells of the universal portfolio's bet grid (``BetConfig.up_grid``)."""
DEFAULT_RHOS = 10
"""Reliance factors ``rho`` mixed by ``r_autoeval_plus`` (uniform points of [0, 1])."""
DEFAULT_CS_GRID = 1000
"""Resolution of the confidence sequence: bounds are multiples of ``1 / DEFAULT_CS_GRID``."""
Side = Literal["certify", "violate"]


@dataclass(frozen=True, init=False)
class BetConfig:
    """How an e-process chooses its bets.

    Parameters
    ----------
    rule : {"plugin_up", "wsr", "up"}
        ``"plugin_up"`` (default): plug-in reliance and a universal portfolio over 8 fixed
        bets plus a geometric extension (:mod:`monitor.stats.betting.plugin`); close to the
        clairvoyant bettor with no horizon to guess. ``"wsr"``: Waudby-Smith--Ramdas plug-in,
        one e-process per rho, mixed over rhos. ``"up"``: the paper's universal portfolio over
        the whole bet range, per rho, mixed over rhos.
    c : float or None
        Cap fraction, ``0 < c < 1``: bets are at most ``c / (M - alpha)`` (certify) or
        ``c / (alpha - m)`` (violate). ``None`` picks the rule's default
        (:data:`DEFAULT_CAP`: 0.95 for ``plugin_up``, 1/2 for ``wsr`` and ``up``; the paper
        uses 3/4 for WSR). ``up`` e-processes span the whole range whatever ``c`` (their grid
        midpoints stay below it); ``c`` still caps their confidence sequence.
    horizon : int or None
        WSR only. ``None``: anytime form ``sqrt(2 log(1/delta) / (sigma^2 t log(1 + t)))``;
        an integer ``n``: the paper's fixed-horizon form ``sqrt(2 log(1/delta) / (n sigma^2))``
        (still a valid e-process after round ``n``, just tuned for ``n``).
    up_grid : int
        UP only: number of bets in the grid (cell midpoints of ``[0, 1]`` scaled by the largest
        bet ``1 / (M - alpha)``). Default 1000 (the paper uses 10^4).
    cap_switch : bool
        ``plugin_up`` only: a plug-in row also keeps the switch cell
        (:mod:`monitor.stats.betting.plugin_switch`); False for the other rules. Default
        True; a saved config without
        the key (written before it existed) reads as False, so older checkpoints continue
        with the bettor they were saved with.

    Notes
    -----
    Validity never depends on the rule: any predictable bet in ``[0, cap]`` with ``cap`` below
    the bet that zeroes the wealth gives an e-process. The rule only sets power. The anytime
    WSR bet shrinks like ``1 / sqrt(t log t)``, so its log wealth grows sublinearly (it is
    tuned for confidence sequences); it needs 1.4-4x the labels of the clairvoyant bettor on
    certificates (``benchmarks/labels_vs_oracle.py``). The confidence sequence of a
    ``plugin_up`` certificate keeps anytime WSR bets (:meth:`confseq_config`).

    Examples
    --------
    >>> BetConfig().rule, BetConfig().c
    ('plugin_up', 0.95)
    >>> cfg = BetConfig(rule="up", c=0.75, up_grid=32)
    >>> BetConfig.from_dict(cfg.to_dict()) == cfg
    True
    >>> BetConfig().confseq_config() == BetConfig(rule="wsr")
    True
    """

    rule: Rule
    c: float
    horizon: int | None
    up_grid: int
    cap_switch: bool

    def __init__(self, rule: Rule = "plugin_up", c: float | None = None,
                 horizon: int | None = None, up_grid: int = DEFAULT_UP_GRID,
                 cap_switch: bool = True) -> None:
        if rule not in RULES:
            raise ValueError(f"BetConfig.rule must be one of {RULES}, got {rule!r}")
        if c is None:
            c = DEFAULT_CAP[rule]
        if isinstance(c, bool) or not (isinstance(c, (int, float)) and 0.0 < float(c) < 1.0):
            raise ValueError(f"BetConfig.c must satisfy 0 < c < 1, got {c!r}")
        if horizon is not None and (
            isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1
        ):
            raise ValueError(f"BetConfig.horizon must be None or an int >= 1, got {horizon!r}")
        if horizon is not None and rule != "wsr":
            raise ValueError(f"BetConfig.horizon applies to rule 'wsr' only, not {rule!r}")
        if isinstance(up_grid, bool) or not isinstance(up_grid, int) or up_grid < 1:
            raise ValueError(f"BetConfig.up_grid must be an int >= 1, got {up_grid!r}")
        if not isinstance(cap_switch, bool):
            raise ValueError(f"BetConfig.cap_switch must be a bool, got {cap_switch!r}")
        object.__setattr__(self, "rule", rule)
        object.__setattr__(self, "c", float(c))
        object.__setattr__(self, "horizon", horizon)
        object.__setattr__(self, "up_grid", up_grid)
        object.__setattr__(self, "cap_switch", cap_switch and rule == "plugin_up")

    def confseq_config(self) -> BetConfig:
        """Bet config of the confidence sequence: ``plugin_up`` maps to anytime WSR, c = 1/2."""
        if self.rule == "plugin_up":
            return BetConfig(rule="wsr")
        return self

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-serializable dict (inverse of :meth:`from_dict`)."""
        return {"rule": self.rule, "c": float(self.c), "horizon": self.horizon,
                "up_grid": self.up_grid, "cap_switch": self.cap_switch}

    @classmethod
    @restorer("BetConfig")
    def from_dict(cls, d: dict[str, object]) -> BetConfig:
        """Build a config from :meth:`to_dict` output; unknown keys raise ``ValueError``.

        ``cap_switch`` absent (a config saved before it existed): False.
        """
        unknown = set(d) - {"rule", "c", "horizon", "up_grid", "cap_switch"}
        if unknown:
            raise ValueError(f"unknown BetConfig keys: {sorted(unknown)}")
        rule = d.get("rule", "plugin_up")
        if rule not in RULES:
            raise ValueError(f"BetConfig.rule must be one of {RULES}, got {rule!r}")
        c = d.get("c")
        horizon = d.get("horizon")
        up = d.get("up_grid", 1000)
        if (c is not None and not isinstance(c, (int, float))) or not isinstance(up, int):
            raise ValueError(f"bad BetConfig dict: {d!r}")
        if horizon is not None and not isinstance(horizon, int):
            raise ValueError(f"bad BetConfig horizon: {horizon!r}")
        sw = d.get("cap_switch", False)
        if not isinstance(sw, bool):
            raise ValueError(f"bad BetConfig cap_switch: {sw!r}")
        return cls(rule=rule, c=None if c is None else float(c), horizon=horizon, up_grid=up,
                   cap_switch=sw)


def bet_cap(alpha: float, lo: float, hi: float, side: Side, c: float) -> float:
    """Largest allowed bet: ``c / (hi - alpha)`` (certify) or ``c / (alpha - lo)`` (violate).

    Examples
    --------
    >>> bet_cap(0.12, 0.0, 1.0, "certify", 0.5)  # 0.5 / 0.88
    0.5681818181818182
    >>> bet_cap(0.25, 0.0, 1.0, "violate", 0.5)
    2.0
    """
    if not lo < alpha < hi:
        raise ValueError(f"alpha must lie strictly inside the range [{lo}, {hi}], got {alpha}")
    return c / (hi - alpha) if side == "certify" else c / (alpha - lo)


def wsr_prior(lo: float, hi: float) -> tuple[float, float]:
    """Prior mean and variance ``(mu0, sigma0^2)`` of the WSR plug-in for range ``[lo, hi]``.

    The paper uses ``mu0 = 1/2`` and ``sigma0^2 = 1/4`` for ``[0, 1]``. We use the
    affine-equivariant generalisation ``mu0 = (lo + hi) / 2``, ``sigma0^2 = (hi - lo)^2 / 4``
    (the midpoint and the largest variance of the range): betting on ``q`` is then exactly
    betting on ``(q - lo) / (hi - lo)`` in ``[0, 1]`` with the paper's priors. For the PPI++
    range ``[-rho, 1 + rho]`` the prior mean stays 1/2.

    Examples
    --------
    >>> wsr_prior(0.0, 1.0)
    (0.5, 0.25)
    >>> wsr_prior(-1.0, 2.0)
    (0.5, 2.25)
    """
    return 0.5 * (lo + hi), 0.25 * (hi - lo) ** 2


def wsr_scale(log_inv_delta: float, t: int, horizon: int | None) -> float:
    """Numerator ``K_t`` of the WSR bet ``lam_t = min(cap, sqrt(K_t / sigma_{t-1}^2))``.

    Parameters
    ----------
    log_inv_delta : float
        ``log(1 / delta)``.
    t : int
        Index (1-based) of the round the bet is for.
    horizon : int or None
        ``None``: anytime form ``K_t = 2 log(1/delta) / (t log(1 + t))``; ``n``: fixed-horizon
        form ``K_t = 2 log(1/delta) / n``.

    Examples
    --------
    >>> round(wsr_scale(math.log(10.0), 1, None), 6)  # 2 log 10 / log 2
    6.643856
    >>> wsr_scale(math.log(10.0), 5, 100) == 2 * math.log(10.0) / 100
    True
    """
    if horizon is None:
        return 2.0 * log_inv_delta / (t * math.log1p(t))
    return 2.0 * log_inv_delta / horizon


def wsr_bet(
    past: list[float] | np.ndarray,
    alpha: float,
    delta: float,
    lo: float,
    hi: float,
    side: Side,
    bet: BetConfig,
) -> float:
    """WSR bet for the next round, from the past observations only (batch reference form).

    ``sigma^2_{i-1} = (sigma0^2 + sum_{j<i} (q_j - mu_j)^2) / i`` with
    ``mu_j = (mu0 + sum_{k<=j} q_k) / (j + 1)``, eq. (21); the bet is
    ``min(cap, sqrt(K_i / sigma^2_{i-1}))``, eq. (20), with ``K_i`` from :func:`wsr_scale`.

    Examples
    --------
    >>> cfg = BetConfig(rule="wsr")
    >>> round(wsr_bet([], 0.12, 0.1, 0.0, 1.0, "certify", cfg), 6)  # capped: 0.5 / 0.88
    0.568182
    >>> wsr_bet([0.0] * 50, 0.12, 0.1, 0.0, 1.0, "certify", cfg) > 0
    True

    Notes
    -----
    The bet is a function of ``past`` alone, so it is predictable: it is fixed before the
    observation it multiplies. Validity of the resulting e-process does not depend on how the
    bet is tuned, only on predictability and the cap (factors stay >= 1 - c > 0).
    """
    q = np.asarray(past, dtype=float)
    i = q.size + 1
    mu0, var0 = wsr_prior(lo, hi)
    dev = 0.0
    total = 0.0
    for j, x in enumerate(q.tolist(), start=1):
        total += x
        mu = (mu0 + total) / (j + 1)
        dev += (x - mu) ** 2
    sigma2 = (var0 + dev) / i
    cap = bet_cap(alpha, lo, hi, side, bet.c)
    return min(cap, math.sqrt(wsr_scale(-math.log(delta), i, bet.horizon) / sigma2))


def up_grid(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Grid of bet fractions in ``(0, 1)`` and log prior weights (Beta(1/2, 1/2) cell masses).

    The fractions are the midpoints of ``size`` equal cells of ``[0, 1]``; each weight is the
    exact arcsine-law mass ``(2/pi) (asin sqrt(b) - asin sqrt(a))`` of its cell, so weights sum to
    one. A fraction ``u`` becomes the bet ``u / (M - alpha)`` in an e-process (the paper's full
    range; the factor stays >= ``1 - u > 0``) and ``u * cap`` in a confidence sequence.

    Examples
    --------
    >>> u, logw = up_grid(4)
    >>> u.tolist()
    [0.125, 0.375, 0.625, 0.875]
    >>> round(float(np.exp(logw).sum()), 12)
    1.0
    """
    if size < 1:
        raise ValueError(f"UP grid size must be >= 1, got {size}")
    edges = np.linspace(0.0, 1.0, size + 1)
    cdf = (2.0 / np.pi) * np.arcsin(np.sqrt(edges))
    mass = np.diff(cdf)
    mass = mass / mass.sum()
    frac = 0.5 * (edges[:-1] + edges[1:])
    return frac, np.log(mass)
