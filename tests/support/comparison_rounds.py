"""Vectorized synthetic comparison rounds (for Monte Carlo tests and benchmarks; no I/O).

Each arm's human loss is Bernoulli(risk); the judge agrees with the human with probability
``gamma`` and flips the loss otherwise (R-AutoEval+ Example 1, as :mod:`monitor.simulate`);
``judge_favour`` makes the judge pass a failing answer of that arm with that extra probability
(a judge biased toward one version's style). Each round has ``k`` unaudited examples per arm
whose judge losses form the block. ``corr`` couples the two arms' human losses on an example
(shadow traffic: with probability ``corr`` the baseline's outcome is the candidate's latent
outcome re-used, i.e. both versions fail on the same hard examples; the marginals stay exact
only when both risks are equal, so use it with equal risks or ``corr = 0``).

Examples
--------
>>> r = paired_rounds(np.random.default_rng(0), reps=3, horizon=5, risk_c=0.1, risk_b=0.1)
>>> r.human.shape, bool(((r.human >= 0) & (r.human <= 1)).all())
((3, 5), True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["Arm", "UnitRounds", "arm_rounds", "outcomes", "paired_rounds"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Arm:
    """One arm's losses: human ``l``, judge ``f`` of the audited unit, block mean ``b``."""

    human: FloatArray
    judge: FloatArray
    block: FloatArray


@dataclass(frozen=True)
class UnitRounds:
    """Unit-scale rounds ``(h, s)`` of :func:`~.observation.to_unit`, shape (reps, horizon)."""

    human: FloatArray
    shift: FloatArray


def _judge(rng: np.random.Generator, human: FloatArray, gamma: float,
           favour: float) -> FloatArray:
    flip = rng.random(human.shape) >= gamma
    judge = np.abs(human - flip)
    passed = (human == 1.0) & (rng.random(human.shape) < favour)
    return np.asarray(np.where(passed, 0.0, judge), dtype=np.float64)


def outcomes(rng: np.random.Generator, reps: int, horizon: int, risk: float,
             k: int) -> tuple[FloatArray, FloatArray]:
    """Human losses of the audited unit (reps, horizon) and of the k unaudited ones."""
    h = (rng.random((reps, horizon)) < risk).astype(np.float64)
    u = (rng.random((reps, horizon, k)) < risk).astype(np.float64)
    return h, u


def arm_rounds(rng: np.random.Generator, human: FloatArray, unaudited: FloatArray,
               gamma: float = 0.9, favour: float = 0.0) -> Arm:
    """One arm's rounds from its human outcomes: judge losses and block means."""
    f = _judge(rng, human, gamma, favour)
    k = unaudited.shape[-1]
    b = _judge(rng, unaudited, gamma, favour).mean(axis=-1) if k > 0 else np.full(
        human.shape, np.nan)
    return Arm(human, f, np.asarray(b, dtype=np.float64))


def paired_rounds(rng: np.random.Generator, reps: int, horizon: int, risk_c: float,
                  risk_b: float, gamma: float = 0.9, k: int = 3, favour_c: float = 0.0,
                  corr: float = 0.0, k_b: int | None = None) -> UnitRounds:
    """Unit-scale rounds of a comparison (paired, or unpaired with ``corr = 0``).

    ``k_b`` gives the baseline another block size (a live split with other audit rates; only
    with ``corr = 0``).
    """
    kb = k if k_b is None else k_b
    if corr > 0.0 and kb != k:
        raise ValueError("corr > 0 needs the same block size on both arms")
    hc, uc = outcomes(rng, reps, horizon, risk_c, k)
    hb, ub = outcomes(rng, reps, horizon, risk_b, kb)
    if corr > 0.0:  # the same hard examples: re-use the candidate's outcome
        hb = np.where(rng.random(hb.shape) < corr, hc, hb)
        ub = np.where(rng.random(ub.shape) < corr, uc, ub)
    c = arm_rounds(rng, hc, uc, gamma, favour_c)
    b = arm_rounds(rng, hb, ub, gamma, 0.0)
    sc = np.where(np.isnan(c.block), 0.0, c.block - c.judge)
    sb = np.where(np.isnan(b.block), 0.0, b.block - b.judge)
    return UnitRounds(0.5 * (c.human - b.human + 1.0), 0.5 * (sc - sb))
