"""Start and stop of the Kafka source: the first-connection deadline and the shutdown budget.

- **start**: at first start, ``[kafka] startup_timeout_seconds`` bounds the time until the
  brokers are reached (:func:`check_startup`); past it the process exits with a one-line
  error (:class:`StartupTimeout`). Each client's blocking bootstrap is given at most what is
  left of it (:func:`startup_bootstrap_ms`), so the deadline bounds the whole first start,
  not each client's ``bootstrap_timeout_ms`` in turn. A running instance that loses the
  brokers keeps retrying with backoff instead.
- **stop**: a signal handler may raise :class:`StopRequested` to leave a blocking client
  bootstrap; then ``[kafka] shutdown_timeout_seconds`` is one budget
  (:class:`ShutdownBudget`) shared by the final output flush, checkpoint, offset commit and
  the closes (:func:`close_outputs`), so SIGTERM ends within it even while the brokers cannot
  be reached.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from monitor.errors import CertmonError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from consumers.kafka.sinks import KafkaOutputs
    from monitor.checkpoint import CheckpointStore
    from monitor.config.kafka import KafkaConfig
    from monitor.sinks import Sink

log = logging.getLogger("certmon.kafka")

__all__ = [
    "RebalanceStalled",
    "ShutdownBudget",
    "StartupTimeout",
    "StopRequested",
    "check_startup",
    "close_outputs",
    "log_loop_failure",
    "rebalance_limit_s",
    "startup_bootstrap_ms",
]

# a bootstrap is given at least this long, so a client can still try near the deadline
MIN_BOOTSTRAP_MS = 100


class StopRequested(BaseException):
    """Raised by the signal handler to leave a blocking client bootstrap (see ``run_kafka``).

    A BaseException, so the Kafka client's own ``except Exception`` cannot swallow it.
    """


class StartupTimeout(CertmonError):
    """No broker answered within ``[kafka] startup_timeout_seconds`` of the first start."""


class RebalanceStalled(CertmonError):
    """Partitions were revoked and no assignment followed within :func:`rebalance_limit_s`."""


def rebalance_limit_s(config: KafkaConfig) -> float:
    """Seconds a rebalance may take before the consumer is closed and the group rejoined.

    Three session timeouts, and at least 20 s: a member that left mid-rebalance is expired by
    the broker within one session timeout, so a healthy rebalance has ended well before.

    Examples
    --------
    >>> from monitor.config.kafka import KafkaConfig
    >>> rebalance_limit_s(KafkaConfig(session_timeout_ms=6000)), rebalance_limit_s(
    ...     KafkaConfig(session_timeout_ms=45000))
    (20.0, 135.0)
    """
    return max(20.0, 3.0 * config.session_timeout_ms / 1000.0)


def check_startup(config: KafkaConfig, started: float, reason: str) -> None:
    """Give up at first start when no broker answered within ``startup_timeout_seconds``.

    Parameters
    ----------
    config : KafkaConfig
    started : float
        ``time.monotonic()`` at the start.
    reason : str
        What went wrong last (ends the error message).

    Raises
    ------
    StartupTimeout
        ``startup_timeout_seconds`` have passed since ``started``.

    Examples
    --------
    >>> from monitor.config.kafka import KafkaConfig
    >>> cfg = KafkaConfig(bootstrap_servers="k:9092", startup_timeout_seconds=5)
    >>> check_startup(cfg, time.monotonic(), "refused")  # within the timeout: nothing
    >>> check_startup(cfg, time.monotonic() - 6, "refused")
    Traceback (most recent call last):
    ...
    consumers.kafka.deadlines.StartupTimeout: cannot reach Kafka at k:9092 within 5 s ([kafka] startup_timeout_seconds): refused
    """  # noqa: E501
    limit = config.startup_timeout_seconds
    if time.monotonic() - started >= limit:
        servers = ",".join(config.bootstrap_list())
        raise StartupTimeout(f"cannot reach Kafka at {servers} within {limit:g} s "
                             f"([kafka] startup_timeout_seconds): {reason}")


def startup_bootstrap_ms(config: KafkaConfig, started: float | None) -> int:
    """Return the bootstrap timeout for a client created now, capped by the startup deadline.

    Parameters
    ----------
    config : KafkaConfig
    started : float or None
        ``time.monotonic()`` at the first start, or None once the brokers were reached (a
        running instance's reconnects keep ``bootstrap_timeout_ms``).

    Returns
    -------
    int
        ``min(bootstrap_timeout_ms, ms left of startup_timeout_seconds)``, at least 100 ms.

    Notes
    -----
    Guarantee: a bootstrap given this timeout ends at most 100 ms past the startup deadline,
    so a first start whose clients are created one after another gives up within
    ``startup_timeout_seconds`` (plus 100 ms per client) whatever ``bootstrap_timeout_ms`` is.

    Examples
    --------
    >>> from monitor.config.kafka import KafkaConfig
    >>> cfg = KafkaConfig(startup_timeout_seconds=3, bootstrap_timeout_ms=30_000)
    >>> startup_bootstrap_ms(cfg, None)  # connected before: the client's own timeout
    30000
    >>> 2000 < startup_bootstrap_ms(cfg, time.monotonic() - 0.5) <= 2500
    True
    >>> startup_bootstrap_ms(cfg, time.monotonic() - 10)  # past the deadline: one short try
    100
    """
    own = config.bootstrap_timeout_ms
    if started is None:
        return own
    left_ms = int(1000 * (config.startup_timeout_seconds - (time.monotonic() - started)))
    return max(MIN_BOOTSTRAP_MS, min(own, left_ms))


def _unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the brokers cannot be reached (an outage, not a bug)."""
    from kafka import errors

    return isinstance(exc, (errors.KafkaTimeoutError, errors.KafkaConnectionError,
                            errors.NodeNotReadyError))


def log_loop_failure(exc: Exception, failures: int, backoff: float) -> str:
    """Log a failed pass of the consume loop; return its one-line reason.

    A failure that repeats without progress in between is an error, the first a warning.
    The traceback is logged only for what may be a bug: not for a :class:`CertmonError` (its
    message says it all) nor for brokers that cannot be reached (an outage).

    Examples
    --------
    >>> from kafka.errors import KafkaTimeoutError
    >>> log_loop_failure(KafkaTimeoutError("Unable to bootstrap"), 1, 0.5)
    "KafkaTimeoutError('Unable to bootstrap')"
    >>> log_loop_failure(StartupTimeout("cannot reach Kafka"), 2, 1.0)
    'cannot reach Kafka'
    """
    reason = str(exc) if isinstance(exc, CertmonError) else repr(exc)
    log.log(logging.ERROR if failures >= 2 else logging.WARNING, "kafka loop failed; retrying",
            extra={"error": reason, "retry_in_s": backoff, "consecutive_failures": failures},
            exc_info=not (isinstance(exc, CertmonError) or _unreachable(exc)))  # fmt: skip
    return reason


class ShutdownBudget:
    """The time left for the blocking steps of a shutdown, once it has begun.

    Examples
    --------
    >>> b = ShutdownBudget()
    >>> b.left(30.0)  # not stopping: a step may take its own default
    30.0
    >>> b.begin(4.0), b.begin(4.0)  # the first call starts the budget
    (True, False)
    >>> 3.0 < b.left(30.0) <= 4.0, b.left(1.0)
    (True, 1.0)

    Notes
    -----
    Guarantee: once begun, :meth:`left` never exceeds what remains of the budget (and is at
    least 0.1 s, so a step can still try), so steps that each honour it end within the budget
    plus 0.1 s per step.
    """

    def __init__(self) -> None:
        self.deadline: float | None = None  # monotonic, once stopping

    def begin(self, seconds: float) -> bool:
        """Start the budget of ``seconds``; return False if it had already begun."""
        if self.deadline is not None:
            return False
        self.deadline = time.monotonic() + seconds
        return True

    def left(self, default: float) -> float:
        """Seconds a blocking step may take: ``default``, or what the budget leaves."""
        if self.deadline is None:
            return default
        return max(0.1, min(default, self.deadline - time.monotonic()))


def close_outputs(sinks: Iterable[Sink], outputs: KafkaOutputs | None,
                  store: CheckpointStore | None, budget: ShutdownBudget) -> None:  # fmt: skip
    """Close the sinks, then the producer and the checkpoint store, within ``budget``.

    A failure to close one is logged and does not keep the others open.
    """
    for sink in sinks:
        try:
            sink.close()
        except Exception as exc:
            log.warning("sink close failed", extra={"error": repr(exc)})
    if outputs is not None:
        try:
            outputs.close(timeout=budget.left(10.0))
        except Exception as exc:
            log.warning("producer close failed", extra={"error": repr(exc)})
    close = getattr(store, "close", None)
    if callable(close):
        try:
            close(timeout=budget.left(10.0))
        except TypeError:  # a store without a timeout
            close()
