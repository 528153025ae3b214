"""The read side of one method's confidence sequence inside a multi-method owner.

:class:`~monitor.stats.betting.confseq_group.SharedGridWealth` and
:class:`~monitor.stats.betting.confseq_bernstein.BernsteinSequences` each advance the sequences
of several methods at once, buffering rounds; a member reads its bounds after the owner
applied the buffered rounds.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["MemberBounds", "SequenceOwner"]


class SequenceOwner(Protocol):
    """What a member reads from its owner."""

    grid_size: int
    rounds: int

    def flush(self) -> None:
        """Apply the buffered rounds."""


class MemberBounds:
    """Bounds (``lo_edge / G``, ``hi_edge / G``) and validity of one member; the owner moves them.

    Examples
    --------
    >>> class Owner:
    ...     grid_size, rounds = 10, 3
    ...     def flush(self) -> None: pass
    >>> m = MemberBounds(Owner())
    >>> m.lo_edge = 2
    >>> (m.lower, m.upper, m.valid, m.rounds)
    (0.2, 1.0, True, 3)

    Notes
    -----
    Every read applies the owner's buffered rounds first, so a member shows what a
    sequence updated round by round would show.
    """

    def __init__(self, owner: SequenceOwner) -> None:
        self._owner = owner
        self.lo_edge = 0
        self.hi_edge = owner.grid_size
        self.is_valid = True  # False once the running intersection became empty

    @property
    def lower(self) -> float:
        """Lower end of the running intersection (a multiple of ``1 / grid_size``)."""
        self._owner.flush()
        return self.lo_edge / self._owner.grid_size

    @property
    def upper(self) -> float:
        """Upper end of the running intersection."""
        self._owner.flush()
        return self.hi_edge / self._owner.grid_size

    @property
    def valid(self) -> bool:
        """False once the running intersection became empty."""
        self._owner.flush()
        return self.is_valid

    @property
    def rounds(self) -> int:
        """Number of rounds processed."""
        return self._owner.rounds
