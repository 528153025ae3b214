"""Bounded retries of a record whose processing raises, then a dead letter: no frozen partition.

Bad input is data: the engine rejects it with a reason and it is dead-lettered at once. An
exception raised *while processing* a record is something else (a bug, or a resource that
failed), and it may or may not happen again. The Kafka runner then rewinds the partition to
its last durable checkpoint (the engine may hold part of the failed record) and reads it
again, with :class:`RecordRetries` keeping count:

1. A batch of several records raised: which record is not known, so the batch's offsets are
   read again one record at a time (the *careful* range); that names the record.
2. One record raised: a failed attempt is counted for ``(topic, offset)`` (the batch failure
   that led to it counts as its first), and the partition rewinds again.
3. After ``max_attempts`` failed attempts the record is *given up*: on the next read it is
   not given to the engine but dead-lettered with reason ``processing_failed`` and the
   exception's type and message, and the partition moves on.

Notes
-----
Guarantee: the engine never keeps any part of a failed record (every failure rewinds the
partition to a durable checkpoint and its offsets), so a given-up record is in no state and
in no counter of the engine (``events_in`` included), and nothing before it is counted twice.
The counts live in memory until a checkpoint passes the record: a crash before that makes
the next owner try it ``max_attempts`` times again (its dead letter is then produced again,
like every output since that checkpoint); once a checkpoint passes it, it is never re-read.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from monitor.errors import CertmonError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["PROCESSING_FAILED", "RecordFailed", "RecordRetries", "describe", "log_failure"]

log = logging.getLogger("certmon.kafka")

# Dead-letter reason of a record given up after ``max_record_attempts`` failed attempts.
PROCESSING_FAILED = "processing_failed"

_MAX_MESSAGE = 300  # characters of the exception message kept in logs and dead letters


def describe(exc: BaseException) -> str:
    """Return ``"Type: message"`` of an exception, the message cut to 300 characters.

    Examples
    --------
    >>> describe(KeyError("m1")), describe(ValueError("x" * 400))[-5:]
    ("KeyError: 'm1'", 'xx...')
    """
    text = str(exc)
    if len(text) > _MAX_MESSAGE:
        text = text[:_MAX_MESSAGE] + "..."
    return f"{type(exc).__name__}: {text}"


class RecordFailed(CertmonError):
    """Processing records of one topic-partition raised; the caller rewinds the partition.

    Attributes
    ----------
    topic : str
    first, last : int
        Offsets of the records that were being processed (equal when the record is known).
    attempts : int
        Failed attempts counted for the record at ``first`` (0 while it is not known).
    given_up : bool
        The record reached ``max_attempts``: it is dead-lettered on the next read.
    error : str
        The exception's type name (the ``error`` label of the failure counter).
    """

    def __init__(self, topic: str, first: int, last: int, attempts: int, given_up: bool,
                 exc: BaseException) -> None:  # fmt: skip
        self.topic, self.first, self.last = topic, first, last
        self.attempts, self.given_up = attempts, given_up
        self.error = type(exc).__name__
        where = f"offset {first}" if first == last else f"offsets {first}..{last}"
        super().__init__(f"processing {topic} {where} raised {describe(exc)}")


@dataclass
class RecordRetries:
    """Failed attempts of one partition's records, and the records given up on.

    Parameters
    ----------
    max_attempts : int
        Failed attempts after which a record is given up (``[kafka] max_record_attempts``).

    Examples
    --------
    >>> r = RecordRetries(max_attempts=3)
    >>> r.active()
    False
    >>> e = r.failed("t", 10, 19, RuntimeError("boom"))  # a batch: read it one at a time
    >>> (e.attempts, e.given_up, r.careful)
    (0, False, {'t': 19})
    >>> e = r.failed("t", 14, 14, RuntimeError("boom"))  # offset 14 named: 2nd attempt
    >>> (e.attempts, e.given_up, r.give_up_detail("t", 14))
    (2, False, None)
    >>> e = r.failed("t", 14, 14, RuntimeError("boom"))
    >>> e.attempts, e.given_up, str(e)
    (3, True, 'processing t offset 14 raised RuntimeError: boom')
    >>> r.give_up_detail("t", 14)
    'processing raised RuntimeError: boom (3 failed attempts, [kafka] max_record_attempts = 3)'
    >>> r.first_report("t", 14), r.first_report("t", 14)  # the metric counts it once
    (True, False)
    >>> r.passed({"t": 20}); r.active()  # a durable checkpoint passed it: forgotten
    False
    """

    max_attempts: int = 3
    attempts: dict[tuple[str, int], int] = field(default_factory=dict)
    careful: dict[str, int] = field(default_factory=dict)  # topic -> last offset read singly
    given_up: dict[tuple[str, int], str] = field(default_factory=dict)  # -> dead-letter detail
    _suspect: dict[str, tuple[int, int]] = field(default_factory=dict)  # last failed batch
    _reported: set[tuple[str, int]] = field(default_factory=set)

    def active(self) -> bool:
        """Whether some offsets are read one at a time or skipped (else: the fast path)."""
        return bool(self.careful or self.given_up)

    def failed(self, topic: str, first: int, last: int, exc: BaseException) -> RecordFailed:
        """Count a failure of the records ``first..last`` of ``topic``; return the error to raise.

        A failure of one record (``first == last``) is one attempt of that record (two when
        it lies in the batch whose failure led to reading it alone); a failure of several
        records makes them be read one at a time.
        """
        if first != last:
            self.careful[topic] = max(self.careful.get(topic, last), last)
            self._suspect[topic] = (first, last)
            return RecordFailed(topic, first, last, 0, False, exc)
        key = (topic, first)
        lo, hi = self._suspect.get(topic, (0, -1))
        credited = 1 if key not in self.attempts and lo <= first <= hi else 0
        n = self.attempts[key] = self.attempts.get(key, credited) + 1
        given_up = n >= self.max_attempts
        if given_up:
            self.given_up[key] = (f"processing raised {describe(exc)} ({n} failed attempts, "
                                  f"[kafka] max_record_attempts = {self.max_attempts})")
        return RecordFailed(topic, first, first, n, given_up, exc)

    def give_up_detail(self, topic: str, offset: int) -> str | None:
        """Return the dead-letter detail of a given-up record, or None to process it."""
        return self.given_up.get((topic, offset))

    def first_report(self, topic: str, offset: int) -> bool:
        """Tell whether a given-up record is dead-lettered for the first time (not a re-read)."""
        key = (topic, offset)
        if key in self._reported:
            return False
        self._reported.add(key)
        return True

    def passed(self, offsets: Mapping[str, int]) -> None:
        """Forget what a durable checkpoint at ``offsets`` (next offset per topic) passed."""
        def behind(key: tuple[str, int]) -> bool:
            return key[1] < offsets.get(key[0], 0)

        self.attempts = {k: v for k, v in self.attempts.items() if not behind(k)}
        self.given_up = {k: v for k, v in self.given_up.items() if not behind(k)}
        self._reported = {k for k in self._reported if not behind(k)}
        self.careful = {t: o for t, o in self.careful.items() if not behind((t, o))}
        self._suspect = {t: s for t, s in self._suspect.items() if not behind((t, s[1]))}


def log_failure(exc: RecordFailed, partition: int, max_attempts: int) -> None:
    """Log a processing failure as a warning, with its traceback, saying what happens next."""
    where = {"topic": exc.topic, "partition": partition, "offset": exc.first, "error": str(exc)}
    if exc.first != exc.last:
        log.warning("processing a batch raised; rewinding to read it one record at a time",
                    extra={**where, "last_offset": exc.last}, exc_info=exc.__cause__)
    elif exc.given_up:
        log.warning("record processing failed for good; it is dead-lettered as "
                    "processing_failed and the partition moves on",
                    extra={**where, "attempts": exc.attempts}, exc_info=exc.__cause__)
    else:
        log.warning("record processing failed; rewinding to retry it",
                    extra={**where, "attempts": exc.attempts, "max_attempts": max_attempts},
                    exc_info=exc.__cause__)
