"""Best-model selection (PULSE) as processes: its CLI commands and the evaluation worker.

What lives here: the ``select-demo``, ``evaluate-worker`` and ``selection-benchmark`` commands
(:mod:`.cli`) and the worker and embedded loop that answer evaluation requests (:mod:`.worker`).

May import: :mod:`monitor` (core), :mod:`consumers` wiring and, for the Kafka transport,
:mod:`consumers.kafka`.
"""
