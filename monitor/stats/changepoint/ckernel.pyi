"""Compiled round of the e-detector components (``ckernel.c``); see ``detector._advance_py``."""

from collections.abc import Sequence

def advance(
    sr: list[float],
    cu: list[float],
    start: list[int],
    seg: list[float],
    xs: Sequence[float],
    los: Sequence[float],
    frs: tuple[float, ...],
    alpha: float,
    t: int,
    use_sr: bool,
) -> float: ...
