#!/usr/bin/env bash
# Start/stop/status a local Apache Kafka 4.x test broker (KRaft, 127.0.0.1, free ports).
# The first start fetches the broker jars from Maven Central into ~/.cache/certmon/kafka.
#   scripts/kafka-broker.sh start     # prints the bootstrap servers, e.g. 127.0.0.1:40123
#   export KAFKA_BOOTSTRAP_SERVERS=$(scripts/kafka-broker.sh start)
#   scripts/kafka-broker.sh status
#   scripts/kafka-broker.sh stop [--purge]
# State (pid, ports, data) lives in $CERTMON_KAFKA_STATE (default ~/.cache/certmon/kafka/dev-broker).
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 -m tests.support.kafka_broker_cli "$@"
