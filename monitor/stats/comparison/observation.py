"""The PPI++ observation of a difference of risks, and its map onto the certificates' scale.

A round of a comparison gives, for the candidate (``c``) and the baseline (``b``) arm, the human
loss ``l``, the judge loss ``f`` of the same unit and the mean ``bm`` of a contemporaneous block
of unaudited judge losses of that arm (``None`` if empty). For a reliance ``rho`` the
observation of the difference is

    d = (l_c - l_b) + rho * ((bm_c - bm_b) - (f_c - f_b)),      in [-1 - 2 rho, 1 + 2 rho],

where an arm with an empty block contributes ``bm - f = 0``. Its conditional mean is
``R_c - R_b`` whatever the judge (``E[bm - f] = 0`` on each arm, random audits).

The affine map ``d -> (d + 1) / 2`` turns it into a certificate round: human loss
``h = (l_c - l_b + 1) / 2`` in ``[0, 1]`` and shift ``s = (sh_c - sh_b) / 2`` in ``[-1, 1]``
(``sh = bm - f``), so ``(d + 1) / 2 = h + rho s`` lies in ``[-rho, 1 + rho]``, exactly the range
of a certificate's PPI++ observation, and the margin becomes the risk level
``alpha = (margin + 1) / 2``. The certificates' e-processes, bets, caps and plug-in reliance
then apply unchanged: a bet ``lam`` on the unit scale is the bet ``lam / 2`` on ``d``, and the
certificates' cap ``c / (1 + rho - alpha)`` is ``c / (1 + 2 rho - margin)`` on ``d``: ``c``
over the distance from the margin to the top of the observation's range.

Examples
--------
>>> d = difference_observation(1.0, 0.0, 1.0, 0.0, 0.5, 0.0, rho=1.0)
>>> d, to_unit(1.0, 0.0, 1.0, 0.0, 0.5, 0.0)
(0.5, (1.0, -0.25))
>>> h, s = to_unit(1.0, 0.0, 1.0, 0.0, 0.5, 0.0)
>>> from_unit(h + 1.0 * s) == d
True

Notes
-----
Guarantee: none of its own; it states what the tests observe. Assumptions: losses and block
means in [0, 1] (checked here), each block disjoint from the audited units and from other blocks.
"""

from __future__ import annotations

import math

__all__ = ["arm_shift", "check_block", "check_loss", "difference_observation", "from_unit",
           "to_unit",
           "unit_margin"]


def check_loss(name: str, value: object) -> float:
    """Return ``value`` as a float if it is a finite number in [0, 1], else raise ``ValueError``.

    Examples
    --------
    >>> check_loss("human_candidate", 1)
    1.0
    >>> check_loss("judge_candidate", 1.5)
    Traceback (most recent call last):
    ...
    ValueError: judge_candidate must be a finite number in [0, 1], got 1.5
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a finite number in [0, 1], got {value!r}")
    v = float(value)
    if not (math.isfinite(v) and 0.0 <= v <= 1.0):
        raise ValueError(f"{name} must be a finite number in [0, 1], got {value!r}")
    return v


def check_block(name: str, value: object) -> float | None:
    """Like :func:`check_loss`, but None (an empty block) passes through.

    Examples
    --------
    >>> check_block("block_baseline", None) is None
    True
    """
    return None if value is None else check_loss(name, value)


def arm_shift(judge: float, block_mean: float | None) -> float:
    """``block_mean - judge`` of one arm, 0 for an empty block (unbiased for 0 either way).

    Examples
    --------
    >>> arm_shift(1.0, 0.25), arm_shift(1.0, None)
    (-0.75, 0.0)
    """
    return 0.0 if block_mean is None else block_mean - judge


def difference_observation(human_c: float, human_b: float, judge_c: float, judge_b: float,
                           block_c: float | None, block_b: float | None, rho: float) -> float:
    """PPI++ observation ``d`` of ``R_c - R_b`` for reliance ``rho`` (module docstring).

    Examples
    --------
    >>> difference_observation(0.0, 1.0, 0.0, 1.0, None, None, rho=0.7)
    -1.0
    """
    return (human_c - human_b) + rho * (arm_shift(judge_c, block_c)
                                        - arm_shift(judge_b, block_b))


def to_unit(human_c: float, human_b: float, judge_c: float, judge_b: float,
            block_c: float | None, block_b: float | None) -> tuple[float, float]:
    """Certificate round ``(h, s)`` of a comparison round: ``(d + 1) / 2 = h + rho s``.

    Examples
    --------
    >>> to_unit(0.0, 0.0, 0.0, 1.0, 0.0, 1.0)
    (0.5, 0.0)
    """
    return 0.5 * (human_c - human_b + 1.0), 0.5 * (arm_shift(judge_c, block_c)
                                                   - arm_shift(judge_b, block_b))


def unit_margin(margin: float) -> float:
    """Risk level of the certificate scale: ``(margin + 1) / 2``; ``margin`` in (-1, 1).

    Examples
    --------
    >>> unit_margin(0.02)
    0.51
    """
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not (
            -1.0 < float(margin) < 1.0):
        raise ValueError(f"margin must satisfy -1 < margin < 1, got {margin!r}")
    return 0.5 * (float(margin) + 1.0)


def from_unit(x: float) -> float:
    """Difference scale of a unit-scale value: ``2 x - 1``.

    Examples
    --------
    >>> round(from_unit(0.51), 12)
    0.02
    """
    return 2.0 * x - 1.0
