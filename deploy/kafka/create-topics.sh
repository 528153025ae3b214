#!/bin/bash
# Creates certmon's topics (idempotent). Runs once in the kafka-init service of
# docker-compose.yml (apache/kafka image: /opt/kafka/bin/kafka-topics.sh); anywhere else it
# uses kafka-topics.sh from KAFKA_HOME/bin or the PATH, or else certmon's own Python client
# (`python -m consumers.kafka.topics`, kafka-python: no Kafka distribution needed).
# Environment: BOOTSTRAP (default kafka:9092), PARTITIONS of the events topic (default 6,
# as [kafka] events_partitions), REPLICATION (default 1), PYTHON (default python3).
# certmon also creates missing topics itself at start ([kafka] create_topics = true).
set -euo pipefail
BOOTSTRAP="${BOOTSTRAP:-kafka:9092}"
PARTITIONS="${PARTITIONS:-6}"
REPLICATION="${REPLICATION:-1}"
TOPICS=""
for candidate in /opt/kafka/bin/kafka-topics.sh "${KAFKA_HOME:-/nonexistent}/bin/kafka-topics.sh" \
                 "$(command -v kafka-topics.sh || true)"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ]; then TOPICS=$candidate; break; fi
done
if [ -z "$TOPICS" ]; then
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$here/../.."  # a source checkout
  exec "${PYTHON:-python3}" -m consumers.kafka.topics --bootstrap-servers "$BOOTSTRAP" \
    --events-partitions "$PARTITIONS" --replication-factor "$REPLICATION"
fi
create() {  # name partitions [extra --config args...]
  local name=$1 partitions=$2; shift 2
  "$TOPICS" --bootstrap-server "$BOOTSTRAP" --create --if-not-exists \
    --topic "$name" --partitions "$partitions" --replication-factor "$REPLICATION" "$@"
}
create certmon.eval-events.v1 "$PARTITIONS"
# [kafka] repartition (on by default): the input regrouped by suite, read by the engines
create certmon.eval-events-by-suite.v1 "$PARTITIONS"
create certmon.alerts.v1 1
create certmon.requests.v1 1
create certmon.dead-letters.v1 1
create certmon.checkpoints.v1 1 --config cleanup.policy=compact \
  --config min.cleanable.dirty.ratio=0.1 --config segment.ms=600000
"$TOPICS" --bootstrap-server "$BOOTSTRAP" --list
