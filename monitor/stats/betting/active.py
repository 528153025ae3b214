"""Active audits with an inverse-propensity betting e-process, vectorized over repetitions.

:class:`ActiveBatch` runs ``R`` independent copies (the online monitor uses ``R = 1``, see
:mod:`monitor.stats.betting.active_online`; Monte Carlo tests and benchmarks use many) of:

- an **active audit policy**: unit ``t`` with judge score ``f_t`` is audited when its uniform
  coin ``v_t`` (certmon's salted hash) is below ``pi_t = pi(f_t)``, with ``pi`` of
  :func:`~.active_growth.propensity` whose floor, uniform share and scale were fixed from
  earlier units only, at refits (every 25% more units, at least 32 apart);
- for every test ``(alpha, side)``, a **betting e-process over every judged unit**: observation
  ``Y_t = rho f_t + (xi_t / pi_t) (L_t - rho f_t)``, factor ``1 + lam_t s (alpha - Y_t)`` per
  cell, ``s = +1`` (certify: H0 ``E[L] >= alpha``) or ``-1`` (violate: H0 ``E[L] <= alpha``),
  ten cells with equal weights, fixed bets ``2^(-j/2) cap_b`` (``j = 0..9``, ``cap_b`` the
  uniform policy's cap at the test's reliance), each clipped at the current policy's cap. The
  reliance ``rho`` maximises the estimated expected log growth (:func:`~.active_growth.
  growth_table`) at the refit, and so does the policy, for the first test (an active candidate
  must beat the uniform policy by 2%). Measured (``benchmarks/active_audit.py``): this grid
  needed fewer labels than plug-in bets ``(1/2, 1, 2) lam*`` from the same growth estimates,
  alone (5-27% fewer) or mixed with the grid.

Examples
--------
>>> rng = np.random.default_rng(0)
>>> ab = ActiveBatch(0.1, [(0.3, "certify"), (0.3, "violate")], [0.05, 0.05], reps=4)
>>> for _ in range(3000):
...     f = rng.choice([0.02, 0.5], size=4, p=[0.8, 0.2])
...     _ = ab.update(f, rng.random(4), (rng.random(4) < f).astype(float))
>>> bool(ab.crossed[0].all()), bool(ab.crossed[1].any()), bool((ab.labels < 600).all())
(True, False, True)

Notes
-----
Guarantee (per test and repetition): under the test's null, whatever the judge (calibrated or
not), ``P(exists t: E_t >= 1/delta) <= delta``. Conditional on the past and on ``f_t``, ``xi_t``
is Bernoulli(``pi_t``) independently of ``L_t`` (the coin is a hash of fixed ids), so
``E[Y_t | past, f_t] = E[L_t | past, f_t]`` and ``E[Y_t | past] = E[L_t | past]``; the bet
``lam_t`` and ``rho`` are fixed before ``f_t`` is seen, so ``E[1 + lam_t s (alpha - Y_t) |
past] <= 1`` under the null; ``pi_t >= pi_min`` puts ``Y_t`` in ``[rho (1 - 1/pi_min),
1/pi_min]`` and the cap keeps every factor at least ``1 - c > 0``: each cell is a nonnegative
supermartingale and so is their average (Ville's inequality). Assumptions: losses and scores in
[0, 1]; the coin independent of the label given the past and the score.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from monitor.stats.betting.active_growth import (
    BINS,
    FRACS,
    POLICIES,
    RHOS,
    bet_cap,
    bin_of,
    growth_table,
    propensity,
)
from monitor.stats.betting.bets import Side

__all__ = ["CELLS", "GRID", "LOG_W", "ActiveBatch", "Test", "cell_bets", "mix"]

GRID = tuple(2.0 ** (-j / 2.0) for j in range(10))
"""The cells' bets as fractions of the uniform policy's cap (each clipped at the current cap)."""
MARGIN = 0.02
"""An active candidate replaces the uniform policy only if its estimated growth is larger by
this fraction (ties, and rounding, keep the uniform policy and its larger cap)."""
CELLS = len(GRID)
LOG_W = np.full(CELLS, -np.log(CELLS))
PRIOR_LABELS = 4.0
"""Pseudo-labels per score bin at the judge's own score (a calibrated prior)."""
FIRST_REFIT = 32
Test = tuple[float, Side]


class ActiveBatch:
    """``reps`` independent active audits and their e-processes (see the module docstring).

    Parameters
    ----------
    budget : float
        The label budget ``b`` (``audit_rate``), in (0, 1].
    tests : sequence of (alpha, side)
        The one-sided tests; the first one's growth chooses the policy.
    deltas : sequence of float
        Each test's level (its threshold is ``log(1/delta)``).
    reps : int
        Independent copies.
    c : float
        Cap fraction (factors at least ``1 - c``).
    policies : tuple of (floor / b, m)
        Candidate policies; ``((1.0, 1.0),)`` is the uniform audit with the same bettor.
    """

    def __init__(self, budget: float, tests: Sequence[Test], deltas: Sequence[float],
                 reps: int = 1, c: float = 0.95,
                 policies: tuple[tuple[float, float], ...] = POLICIES) -> None:
        if not 0.0 < budget <= 1.0:
            raise ValueError(f"budget must be in (0, 1], got {budget!r}")
        if not 0.0 < c < 1.0:
            raise ValueError(f"c must be in (0, 1), got {c!r}")
        if len(tests) != len(deltas) or not tests:
            raise ValueError("one delta per test, at least one test")
        for alpha, side in tests:
            if not 0.0 < alpha < 1.0 or side not in ("certify", "violate"):
                raise ValueError(f"bad test {(alpha, side)!r}")
        self.budget, self.c, self.reps = float(budget), float(c), int(reps)
        self.tests = [(float(a), s) for a, s in tests]
        self.log_threshold = np.array([math.log(1.0 / d) for d in deltas])
        self.policies = policies
        R, J, C = self.reps, len(self.tests), CELLS
        self.n = 0
        self.next_refit = FIRST_REFIT
        self.hw = np.zeros((R, BINS))  # judged units per score bin
        self.hf = np.zeros((R, BINS))  # their scores' sum
        self.ln = np.zeros((R, BINS))  # labels per score bin
        self.ls = np.zeros((R, BINS))  # their losses' sum
        self.floor = np.full(R, self.budget)  # the uniform policy until the first refit
        self.m = np.ones(R)
        self.k = np.zeros(R)
        self.rho = np.zeros((J, R))
        self.lam = np.zeros((J, R, C))  # no bet before the first refit
        self.ref = np.zeros((J, R))  # the uniform policy's cap (the grid's unit)
        self.cap = np.zeros((J, R))  # the current policy's cap: lam = min(ref GRID, cap)
        self.logw = np.zeros((J, R, C))
        self.crossed = np.zeros((J, R), dtype=bool)
        self.labels = np.zeros(R, dtype=np.int64)
        self.crossed_labels = np.full((J, R), -1, dtype=np.int64)
        self.crossed_units = np.full((J, R), -1, dtype=np.int64)

    # ------------------------------------------------------------------ policy
    def propensities(self, f: np.ndarray) -> np.ndarray:
        """Each copy's audit probability for its unit's score ``f`` (shape (R,))."""
        return np.asarray(propensity(np.asarray(f, dtype=float), self.budget, self.floor,
                                     self.m, self.k))

    @property
    def pi_min(self) -> np.ndarray:
        """The smallest propensity of the current policy (at ``f = 0`` or 1), shape (R,)."""
        return np.asarray(np.minimum(1.0, np.maximum(self.floor, self.m * self.budget)))

    def log_e(self) -> np.ndarray:
        """Log e-value (the cells' prior-weighted average) of each test and copy, (J, R)."""
        return mix(self.logw)

    # ------------------------------------------------------------------ units
    def factors(self, f: np.ndarray, pi: np.ndarray, xi: np.ndarray,
                human: np.ndarray) -> np.ndarray:
        """Log factor of every test, copy and cell for one unit each, shape (J, R, C)."""
        out = np.empty_like(self.logw)
        w = xi / pi
        for j, (alpha, side) in enumerate(self.tests):
            rf = self.rho[j] * f
            y = rf + w * (human - rf)
            x = (alpha - y) if side == "certify" else (y - alpha)
            out[j] = np.log1p(self.lam[j] * x[:, None])
        return out

    def update(self, f: np.ndarray, coin: np.ndarray, human: np.ndarray) -> np.ndarray:
        """One judged unit per copy: score ``f``, coin ``coin`` in [0, 1), label ``human``.

        ``human`` is read only where the unit is audited. Returns the audit indicator.
        """
        f = np.asarray(f, dtype=float)
        pi = self.propensities(f)
        xi = (np.asarray(coin) < pi).astype(float)
        self.logw += self.factors(f, pi, xi, np.asarray(human, dtype=float))
        self.observe(f)
        self.learn(f, np.asarray(human, dtype=float), xi)
        self._check()
        return xi

    def observe(self, f: np.ndarray) -> None:
        """Count a judged unit's score (the policy's scale) and refit on schedule."""
        idx = np.arange(self.reps) * BINS + bin_of(f)
        self.hw.ravel()[idx] += 1.0
        self.hf.ravel()[idx] += f
        self.n += 1
        if self.n >= self.next_refit:
            self.next_refit = max(self.n + FIRST_REFIT, int(self.n * 1.25))
            self.refit()

    def learn(self, f: np.ndarray, human: np.ndarray, weight: np.ndarray) -> None:
        """Count labels (``weight`` 1 where a label arrived) for the growth estimates."""
        idx = np.arange(self.reps) * BINS + bin_of(f)
        self.ln.ravel()[idx] += weight
        self.ls.ravel()[idx] += weight * human
        self.labels += weight.astype(np.int64)

    def _check(self) -> None:
        new = (self.log_e() >= self.log_threshold[:, None]) & ~self.crossed
        if new.any():
            self.crossed |= new
            self.crossed_labels = np.where(new, self.labels[None, :], self.crossed_labels)
            self.crossed_units = np.where(new, self.n, self.crossed_units)

    # ------------------------------------------------------------------ refit
    def estimates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per bin: share of units, mean score, estimated failure rate (shrunk to the score)."""
        tot = self.hw.sum(-1, keepdims=True)
        w = self.hw / np.maximum(tot, 1.0)
        centre = (np.arange(BINS) + 0.5) / BINS
        fb = np.where(self.hw > 0, self.hf / np.maximum(self.hw, 1.0), centre)
        pb = (self.ls + PRIOR_LABELS * fb) / (self.ln + PRIOR_LABELS)
        return w, fb, pb

    def refit(self) -> None:
        """Choose the policy (first test's growth) and every test's reliance and bet."""
        w, fb, pb = self.estimates()
        b, c = self.budget, self.c
        cache: dict[Test, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

        def table(test: Test) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            if test not in cache:
                cache[test] = growth_table(w, fb, pb, b, test[0], test[1], c, self.policies)
            return cache[test]

        alpha0 = self.tests[0][0]
        mu = (w * pb).sum(-1)
        rows = np.arange(self.reps)
        best = np.empty((self.reps, len(self.policies)))
        ks = np.empty_like(best)
        sides: tuple[Side, Side] = ("certify", "violate")
        for side in sides:
            g, k, _ = table((alpha0, side))
            mine = (mu < alpha0) if side == "certify" else (mu >= alpha0)
            best = np.where(mine[:, None], g.reshape(self.reps, len(self.policies), -1).max(-1),
                            best)
            ks = np.where(mine[:, None], k, ks)
        p = best.argmax(-1)
        p = np.where(best[rows, p] > best[:, 0] + MARGIN * np.abs(best[:, 0]) + 1e-12, p, 0)
        pol = np.array(self.policies)[p]
        self.floor = np.minimum(1.0, pol[:, 0] * b)
        self.m = pol[:, 1]
        self.k = ks[rows, p]
        for j, test in enumerate(self.tests):
            g, _, cap = table(test)
            gp = g[rows, p].reshape(self.reps, -1)  # (R, S*F)
            si, _ = np.unravel_index(gp.argmax(-1), (len(RHOS), len(FRACS)))
            capj = cap[rows, p, si]
            self.rho[j] = np.array(RHOS)[si]
            alpha, side = test
            ref = np.broadcast_to(bet_cap(alpha, self.rho[j], min(1.0, b), side, c),
                                  (self.reps,))  # the uniform policy's cap
            self.ref[j], self.cap[j] = ref, capj
            self.lam[j] = cell_bets(self.ref[j], self.cap[j])


def mix(logw: np.ndarray) -> np.ndarray:
    """Log of the prior-weighted average of the cells' wealth (last axis, ``LOG_W``).

    Examples
    --------
    >>> float(mix(np.zeros(CELLS)))
    0.0
    """
    z = logw + LOG_W
    mx = z.max(-1)
    return np.asarray(mx + np.log(np.exp(z - mx[..., None]).sum(-1)))


def cell_bets(ref: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Return the cells' bets ``min(ref 2^(-j/2), cap)``, shape ``ref.shape + (CELLS,)``.

    Examples
    --------
    >>> cell_bets(np.array(0.1), np.array(0.06))[:3].round(4).tolist()
    [0.06, 0.06, 0.05]
    """
    return np.asarray(np.minimum(np.asarray(ref)[..., None] * np.array(GRID),
                                 np.asarray(cap)[..., None]))
