"""The read side of one method's confidence sequence inside a multi-method owner.

:class:`~monitor.stats.betting.confseq_group.SharedGridWealth` and
:class:`~monitor.stats.betting.confseq_bernstein.BernsteinSequences` each advance the sequences
of several methods at once, buffering rounds; a member reads its bounds after the owner
applied the buffered rounds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from monitor.stats.betting.confseq_bernstein import BernsteinSequences

__all__ = ["BernsteinMember", "MemberBounds", "SequenceOwner"]


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


class BernsteinMember(MemberBounds):
    """One method's sequence inside a :class:`BernsteinSequences`: bounds, validity, rounds.

    It offers the read side of a confidence sequence (``lower``, ``upper``, ``valid``,
    ``rounds``, ``to_state``); its owner applies the rounds.

    Examples
    --------
    >>> from monitor.stats.betting.confseq_bernstein import BernsteinSequences
    >>> from monitor.stats.betting.bets import BetConfig
    >>> g = BernsteinSequences(0.1, [0.0, 1.0], BetConfig(), 100, [[0], [0, 1]])
    >>> m = g.members[0]
    >>> (m.lower, m.upper, m.valid, m.rounds)
    (0.0, 1.0, True, 0)
    """

    def __init__(self, owner: BernsteinSequences, index: int, rows: slice) -> None:
        super().__init__(owner)
        self._seqs = owner
        self.index = index
        self.rows = rows

    def update(self, human_loss: float, judge_loss: float, block_mean: float | None) -> None:
        """Process one round; only the sole member of an owner may (else the owner updates)."""
        if len(self._seqs.members) != 1:
            raise TypeError("a BernsteinMember of several is updated through its owner")
        self._seqs.update(human_loss, judge_loss, block_mean)

    def to_state(self) -> dict[str, Any]:
        """Return the owner's state restricted to this member (restorable by ``from_state``)."""
        return self._seqs.member_state(self.index)
