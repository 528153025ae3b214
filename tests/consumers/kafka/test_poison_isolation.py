"""Any record, however malformed, becomes a dead letter with a reason (issue 25, finding 3).

A 4 KB record ``[`` x 2000 on a partition fenced after a suite conflict raised RecursionError
in the ownership check (only ValueError / UnicodeDecodeError were caught): the consumer loop
failed on it again after every reconnect, offsets frozen on every partition.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from consumers.kafka.metrics import KafkaMetrics
from consumers.kafka.ownership import SuiteFence
from consumers.kafka.partitions import Columns, PartitionWorker, process_records
from monitor.config import parse_config
from monitor.sinks import MemorySink

TOML = "\n".join(["[[suites]]", "[[suites.certificates]]", "name='r'", "alpha=0.1",
                  "delta=0.1"])


def test_a_deeply_nested_record_on_a_fenced_partition_is_dead_lettered() -> None:
    worker = PartitionWorker.start(parse_config(TOML), 1, None)
    fence = SuiteFence(KafkaMetrics(CollectorRegistry()), None, 1024)
    fence.block(1, ["qa"], {"qa": 0})
    sinks = {n: MemorySink() for n in ("alerts", "requests", "dead_letters")}
    poison = b"[" * 2000
    batch = Columns([7, 8, 9], [b'{"suite": "qa"}', poison, b"{" * 5000])
    kept, fenced_to = fence.screen_batch(worker, "t", batch, sinks["dead_letters"])
    assert fenced_to == 8 and kept.offsets == [8, 9]
    assert process_records(worker, "t", kept, sinks) == 2
    reasons = [(d["reason"], d["source"]["offset"]) for d in sinks["dead_letters"].records]
    assert reasons == [("suite_partition_conflict", 7), ("invalid_json", 8), ("invalid_json", 9)]
    assert worker.offsets == {"t": 10}
