"""Compiled mixture tables of EdgeWalk (``cedges.c``); see ``EdgeWalk._mixtures``."""

def mixtures(sums: object, j: int, r0: int, r1: int, upper: bool, point: int, width: int,
             grid_size: int, clear_accept: float, clear_reject: float, out: object) -> None: ...
