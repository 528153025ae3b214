"""How far reading has really reached in each partition: past records and markers alike.

A consumer's position is the offset it reads next. It moves past offsets that hold no record
to process: a transaction's commit or abort marker (the repartition topic is written in
transactions), records of aborted transactions (``read_committed``), records deleted by
retention. The next offset to process (one past the last record processed) stops before
them, so a caught-up partition whose last offset is a marker showed a lag of 1 forever.

Guarantee: the position counts only once every record returned before it was processed
(``next_offset`` at least the end of those records); a partition rewound, held or behind keeps
its next offset. The lag gauge and the advisory offset commit use it; checkpoints do not.
"""

from __future__ import annotations

__all__ = ["ReadPositions"]


class ReadPositions:
    """Per topic-partition: the end of the records returned so far and the reading position.

    Examples
    --------
    >>> read = ReadPositions()
    >>> read.note("t", 0, 8, 9)  # records up to offset 7 returned, a marker at 8 skipped
    >>> read.consumed_to("t", 0, 8), read.consumed_to("t", 0, 5), read.consumed_to("t", 1, 3)
    (9, 5, 3)
    >>> read.note("t", 0, None, 11)  # no record since: markers or aborted records only
    >>> read.consumed_to("t", 0, 8)
    11

    Notes
    -----
    Holds no state of the certificates: losing it only shows a marker as lag until the next
    record.
    """

    def __init__(self) -> None:
        self._end: dict[tuple[str, int], int] = {}
        self._position: dict[tuple[str, int], int] = {}

    def clear(self) -> None:
        """Forget every partition (a new assignment: positions restart from its offsets)."""
        self._end.clear()
        self._position.clear()

    def note(self, topic: str, partition: int, end: int | None, position: int | None) -> None:
        """Record the end of the records returned (exclusive) and the reading position.

        None (or a negative position) leaves that part as it was.
        """
        key = (topic, partition)
        if end is not None:
            self._end[key] = max(end, self._end.get(key, 0))
        if position is not None and position >= 0:
            self._position[key] = position

    def consumed_to(self, topic: str, partition: int, next_offset: int) -> int:
        """Return the offset reading has reached, given the next offset to process."""
        key = (topic, partition)
        position = self._position.get(key)
        if position is None or next_offset < self._end.get(key, 0):
            return next_offset
        return max(next_offset, position)
