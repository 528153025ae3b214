"""Compiled round of the plug-in e-processes (``ckernel.c``); see ``plugin_round.step_py``."""

from collections.abc import Sequence
from typing import Literal

def step(u: list[float], bets: list[float], x: float,
         ref: float) -> tuple[list[float], float, float]: ...
def step_switch(u: list[float], bets: list[float], x: float, ref: float, app: list[float],
                napp: int, alpha: float, c: float, sgn: float, off: float,
                rho: float) -> tuple[list[float], float, float]: ...
def reliance(sums: list[float], human: float, shift: float, t: int, alpha: float, c: float,
             certify: bool, rhos: list[float], judge_prior: bool = False) -> float: ...
def worst_log_factors(alpha: float, side: Literal["certify", "violate"], lam: Sequence[float],
                      c: float, human: float | None, rho: float | None,
                      shift: float) -> list[float]: ...
def add_worst_log_factors(s: list[float] | None, sign: float, alpha: float,
                          side: Literal["certify", "violate"], lam: Sequence[float], c: float,
                          human: float | None, rho: float | None,
                          shift: float) -> list[float]: ...
