"""Test-only fault injection: make the Kafka consume loop fail once, as in a broker outage.

During an outage kafka-python mostly retries silently; sometimes a call in the consume loop
raises (``KafkaConnectionError('111 ECONNREFUSED')`` was seen), which fails the loop. That
is a race, so the Kafka tests force it: :func:`install` wraps the runner's per-iteration
``update_lag`` so that the first iteration after the file ``$CERTMON_TEST_LOOP_FAIL_FLAG``
appears raises that error. Used in a ``certmon run`` process through :data:`CLI`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["CLI", "install"]

CLI = ("import sys; from tests.kafka.loop_fault import install; install(); "
       "from consumers.cli import main; sys.exit(main(sys.argv[1:]))")


def install() -> None:
    """Patch ``consumers.kafka.runner.update_lag`` in this process (see the module docs)."""
    from kafka.errors import KafkaConnectionError

    import consumers.kafka.runner as runner

    flag = Path(os.environ["CERTMON_TEST_LOOP_FAIL_FLAG"])
    name = "update_lag"  # the runner's own name of consumers.kafka.health.update_lag
    original = getattr(runner, name)
    fired: list[bool] = []

    def update_lag(*args: Any, **kwargs: Any) -> int:
        if not fired and flag.exists():
            fired.append(True)
            raise KafkaConnectionError("111 ECONNREFUSED (injected by tests.kafka.loop_fault)")
        return int(original(*args, **kwargs))

    setattr(runner, name, update_lag)
