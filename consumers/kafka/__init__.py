"""Kafka integration: the consumer-group source, checkpoints on a compacted topic, output sinks.

What lives here: the ``certmon run`` entry point (:mod:`.source`) and the consumer-group
runner that feeds one engine per input partition (:mod:`.runner`, :mod:`.partitions`), with
one suite per partition (:mod:`.ownership`), bounded retries of a failing record
(:mod:`.retries`), start/stop deadlines (:mod:`.deadlines`) and client wiring
(:mod:`.clients`); the child process that fetches and decodes records (:mod:`.fetcher`), the
checkpoint store (:mod:`.checkpoints`), producers for alerts, requests and dead letters
(:mod:`.sinks`), topic creation (:mod:`.topics`), the merged STATE.json view (:mod:`.state`),
per-partition metrics (:mod:`.metrics`) and structured logs (:mod:`.logs`).

May import: kafka-python, prometheus-client, :mod:`monitor` (core) and the shared wiring of
:mod:`consumers` (runner, files); the rest of :mod:`consumers` never imports from here except the
CLI, which starts the source.
"""
