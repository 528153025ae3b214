#!/bin/bash
# Creates certmon's topics (idempotent). Runs once in the kafka-init service of docker-compose.yml.
set -euo pipefail
BOOTSTRAP="${BOOTSTRAP:-kafka:9092}"
TOPICS=/opt/kafka/bin/kafka-topics.sh
create() {  # name partitions [extra --config args...]
  local name=$1 partitions=$2; shift 2
  "$TOPICS" --bootstrap-server "$BOOTSTRAP" --create --if-not-exists \
    --topic "$name" --partitions "$partitions" --replication-factor 1 "$@"
}
create certmon.eval-events.v1 3
create certmon.alerts.v1 1
create certmon.requests.v1 3
create certmon.dead-letters.v1 1
create certmon.checkpoints.v1 1 --config cleanup.policy=compact
"$TOPICS" --bootstrap-server "$BOOTSTRAP" --list
