#!/usr/bin/env bash
# Set up and run certmon's full check on a fresh machine: Python packages, the external tools the
# deploy tests use (promtool, Prometheus, Alertmanager from Debian), ruff, mypy --strict, and the
# whole pytest suite. The Kafka tests start a real Apache Kafka broker themselves (jars fetched once
# from Maven Central with Maven and cached under ~/.cache/certmon/kafka).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# One BLAS thread: on 2 cores threaded BLAS made small matrix products ~100x slower under load.
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

echo "== installing certmon and its dev dependencies"
"$PY" -m pip install --quiet --disable-pip-version-check -e '.[dev]'

# Java 17 + Maven fetch and run the Apache Kafka broker the Kafka tests start.
if ! command -v java >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing Java 17 and Maven (Debian packages)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless maven >/dev/null
  else
    echo "== java/mvn missing and not root: the Kafka tests will skip (CI fails on that)"
  fi
fi

if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1 \
    || ! { command -v prometheus-alertmanager >/dev/null 2>&1 || command -v alertmanager >/dev/null 2>&1; }; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing promtool, Prometheus and Alertmanager (Debian packages)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # The packages' maintainer scripts would start daemons on :9090/:9093 (the tests use free
    # ports and need none): a policy-rc.d answering 101 ("action forbidden") keeps them from
    # starting, so nothing has to be killed afterwards, and no process of anyone else is.
    policy=/usr/sbin/policy-rc.d
    added_policy=""
    if [ ! -e "$policy" ]; then
      printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && added_policy=1
    fi
    apt-get install -y -qq --no-install-recommends prometheus prometheus-alertmanager >/dev/null \
      || { if [ -n "$added_policy" ]; then rm -f "$policy"; fi; exit 1; }
    if [ -n "$added_policy" ]; then rm -f "$policy"; fi
  else
    echo "== promtool/prometheus/alertmanager missing and not root: those tests will be skipped"
  fi
fi

# Node.js + npm: the dashboard test installs Grafana's schema types (@grafana/schema, the version
# of the Grafana in deploy/docker-compose.yml) and TypeScript into .cache/grafana-schema itself.
if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing Node.js and npm (Debian packages)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  else
    echo "== npm missing and not root: the Grafana schema test will be skipped"
  fi
fi

echo "== ruff"
"$PY" -m ruff check .
echo "== mypy --strict"
"$PY" -m mypy
echo "== pytest"
mkdir -p .cache
"$PY" -m pytest --junitxml=.cache/junit.xml "$@"
