"""The Kafka source's metrics say what is known (no broker: fake consumer).

- lag is exported for every assigned partition whose high watermark is known, including one
  no record was read from (no suite's events): 0 for an empty partition, not a blank panel;
- while the brokers are unreachable the lag is unknown: no lag series, not the last number;
- ``state_version`` changes with every applied event and every engine added, dropped or
  rewound, and not otherwise (the metrics server reuses one rendering meanwhile).
"""

from __future__ import annotations

from pathlib import Path

from kafka.structs import TopicPartition

from consumers.kafka.fetcher import decode_frames, encode_frame
from consumers.kafka.health import update_lag
from consumers.kafka.read_positions import ReadPositions
from tests.consumers.kafka.test_units import TOPIC, FakeConsumer, _records, _runner

LAG = "certmon_kafka_consumer_lag_messages"


class Watermarks(FakeConsumer):
    def __init__(self, highs: dict[int, int], positions: dict[int, int] | None = None) -> None:
        super().__init__()
        self.highs = highs
        self.positions = positions or {}

    def highwater(self, tp: TopicPartition) -> int | None:
        return self.highs.get(tp.partition)

    def position(self, tp: TopicPartition, timeout_ms: int | None = None) -> int | None:
        return self.positions.get(tp.partition)


def test_a_trailing_transaction_marker_is_not_lag_once_the_records_are_processed(
    tmp_path: Path,
) -> None:
    """One process (no fetch child): a poll returned offsets 0-19, the consumer's position
    stands at 21 past a commit marker at 20, the high watermark is 21."""
    runner, _, _ = _runner(tmp_path)
    consumer = Watermarks({0: 21}, {0: 21})
    runner._consumer = consumer  # type: ignore[assignment]
    tp0 = TopicPartition(TOPIC, 0)
    consumer.assigned = {tp0}
    runner._on_assigned([tp0])
    read = ReadPositions()
    read.note(TOPIC, 0, 20, None)  # what the poll returned
    update_lag(runner.metrics, consumer, runner._workers, None, read)
    registry = runner.registry
    assert registry.get_sample_value(LAG, {"topic": TOPIC, "partition": "0"}) == 21.0
    runner._process({tp0: _records(0, 10)})  # offsets 0-19 processed
    update_lag(runner.metrics, consumer, runner._workers, None, read)
    assert registry.get_sample_value(LAG, {"topic": TOPIC, "partition": "0"}) == 0.0
    consumer.highs[0] = 30  # more records: the lag counts from the position
    update_lag(runner.metrics, consumer, runner._workers, None, read)
    assert registry.get_sample_value(LAG, {"topic": TOPIC, "partition": "0"}) == 9.0


def test_lag_of_every_assigned_partition_even_without_records(tmp_path: Path) -> None:
    runner, _, _ = _runner(tmp_path)
    consumer = Watermarks({0: 100, 1: 0})
    runner._consumer = consumer  # type: ignore[assignment]
    tp0, tp1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
    consumer.assigned = {tp0, tp1}
    runner._on_assigned([tp0, tp1])
    runner._process({tp0: _records(0, 10)})  # partition 1: no record, no suite
    update_lag(runner.metrics, consumer, runner._workers, None, ReadPositions())
    registry = runner.registry
    assert registry.get_sample_value(LAG, {"topic": TOPIC, "partition": "0"}) == 80.0
    assert registry.get_sample_value(LAG, {"topic": TOPIC, "partition": "1"}) == 0.0
    consumer.highs[1] = 5  # records arrive on partition 1, none read yet: lag 5
    update_lag(runner.metrics, consumer, runner._workers, None, ReadPositions())
    assert registry.get_sample_value(LAG, {"topic": TOPIC, "partition": "1"}) == 5.0


def test_lag_is_unknown_while_the_brokers_are_unreachable(tmp_path: Path) -> None:
    runner, consumer, _ = _runner(tmp_path)
    tp0 = TopicPartition(TOPIC, 0)
    consumer.assigned = {tp0}
    runner._on_assigned([tp0])
    runner._check_health(consumer)  # type: ignore[arg-type]
    assert runner.registry.get_sample_value(LAG, {"topic": TOPIC, "partition": "0"}) == 100.0
    runner._broker.reachable = False  # a failed broker check
    runner._check_health(consumer)  # type: ignore[arg-type]
    assert runner.registry.get_sample_value("certmon_kafka_connected") == 0.0
    assert runner.registry.get_sample_value(LAG, {"topic": TOPIC, "partition": "0"}) is None
    runner._broker.reachable = True
    runner._check_health(consumer)  # type: ignore[arg-type]
    assert runner.registry.get_sample_value(LAG, {"topic": TOPIC, "partition": "0"}) == 100.0


def test_fetch_frames_without_records_carry_the_high_watermark() -> None:
    frames, used = decode_frames(bytearray(encode_frame(3, TOPIC, 1, 42, ())))
    assert used > 0 and frames == [(3, TOPIC, 1, 42, -1, [], [])]


def test_state_version_changes_exactly_with_the_state(tmp_path: Path) -> None:
    runner, consumer, _ = _runner(tmp_path)
    tp0, tp1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
    versions = [runner.state_version()]
    runner._on_assigned([tp0, tp1])
    versions.append(runner.state_version())
    assert runner.state_version() == versions[-1]  # nothing happened: the same version
    runner._process({tp0: _records(0, 5)})
    versions.append(runner.state_version())
    runner.state_view()
    assert runner.state_version() == versions[-1]  # a read changes nothing
    runner._rewind(consumer)  # type: ignore[arg-type]
    versions.append(runner.state_version())
    runner._drop([tp1])
    versions.append(runner.state_version())
    assert len(set(versions)) == len(versions), versions
