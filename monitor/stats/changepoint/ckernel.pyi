"""Compiled round of the e-detector components (``ckernel.c``); see ``rounds.advance_py``."""


def advance(
    sr: list[float],
    cu: list[float],
    start: list[int],
    seg: list[float],
    total: list[float],
    xs: object,
    los: object,
    frs: tuple[float, ...],
    alpha: float,
    t: int,
    use_sr: bool,
) -> float | None: ...
