"""End to end over Kafka: certmon requests evaluations, a worker answers, certmon certifies.

``certmon run`` (a subprocess, ``[source] kind = "kafka"``) owns the selection suite's partition
and writes evaluation requests to the requests topic; ``certmon evaluate-worker --kafka
--kickoff`` (another subprocess) starts the loop with a kickoff event and answers each request
from a synthetic score matrix onto the events topic; certmon emits a ``best_model`` alert naming
the true best model.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kafka import KafkaConsumer, TopicPartition

from consumers.evaluation_worker.cli import run_embedded, synthetic_worker
from consumers.kafka.checkpoints import KafkaTopicStore
from consumers.kafka.source import kafka_config_of
from consumers.kafka.state import load_partition_states
from consumers.kafka.topics import ensure_topics
from monitor.config import load_config
from monitor.selection_settings import KICKOFF_EXAMPLE_ID, synthetic_benchmark
from tests.kafka.conftest import BrokerInfo
from tests.kafka.kafka_harness import _CLI, KAFKA_SECTIONS, REPO, Consumer

pytestmark = pytest.mark.kafka

SUITE = """
[[suites]]
name = "bench"
mode = "selection"
[suites.selection]
models = {models}
examples = 400
history = "{history}"
batch_size = 32
max_outstanding = 4
refit_every = 5
seed = 0

"""


def _read(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or [])]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)
        out: list[dict[str, Any]] = []
        deadline = time.monotonic() + 20
        while any(c.position(tp) < end[tp] for tp in tps) and time.monotonic() < deadline:
            for recs in c.poll(200).values():
                out.extend(json.loads(r.value) for r in recs if r.value is not None)
        return out
    finally:
        c.close()


def test_selection_loop_over_kafka_certifies_the_true_best_model(
    kafka_broker: BrokerInfo, topic_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    bs = kafka_broker.bootstrap_servers
    bench = synthetic_benchmark(8, 400, n_history=40, gap=0.08, seed=0)
    np.save(tmp_path / "history.npy", bench.history)
    names = [f"m{i}" for i in range(8)]
    cfg_path = tmp_path / "certmon.toml"
    cfg_path.write_text(
        (SUITE + KAFKA_SECTIONS).format(
            models=json.dumps(names), history=tmp_path / "history.npy", bs=bs, prefix=topic_prefix,
            metrics="false", every=500, every_seconds=1.0, partitions=3, poll_ms=50,
            extra_topics="", fetch="true", repartition="",
        )
    )
    config = load_config(cfg_path)
    kafka = kafka_config_of(config)
    ensure_topics(kafka)
    # The same loop in-process: the reference for the alert (same requests, same answers).
    embedded = run_embedded(config, synthetic_worker(config, seed=0, gap=0.08))
    assert embedded.truth["bench"]["best"] == names[bench.best]
    assert [a["model"] for a in embedded.alerts] == [names[bench.best]]

    proc = Consumer(cfg_path, tmp_path / "certmon.log")
    worker_log = (tmp_path / "worker.log").open("wb")
    worker_proc = subprocess.Popen(
        [sys.executable, "-c", _CLI, "evaluate-worker", "--config", str(cfg_path), "--kafka",
         "--kickoff", "--seed", "0", "--gap", "0.08", "--max-seconds", "90"],
        cwd=REPO, stdout=worker_log, stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "OPENBLAS_NUM_THREADS": "1"},
    )  # fmt: skip

    def worker_tail() -> str:
        return (tmp_path / "worker.log").read_text(errors="replace")[-3000:]

    alerts: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not alerts:
            assert proc.alive(), proc.log_tail()
            assert worker_proc.poll() is None, worker_tail()
            time.sleep(0.5)
            alerts = [a for a in _read(bs, kafka.topics.alerts) if a.get("kind") == "best_model"]
    finally:
        worker_proc.send_signal(signal.SIGTERM)
        worker_rc = worker_proc.wait(30)
        worker_log.close()
        rc = proc.terminate() if proc.alive() else proc.proc.returncode
    assert alerts, f"no best_model alert within 60 s\n{proc.log_tail()}\n{worker_tail()}"
    assert rc == 0, proc.log_tail()
    assert worker_rc == 0, worker_tail()
    alert = alerts[0]
    assert alert["model"] == names[bench.best] and alert["suite"] == "bench"
    assert alert["evidence"]["lower"] > alert["evidence"]["runner_up_upper"]
    # Kafka keeps the suite's order, so the run is the embedded one: same alert id and round.
    assert (alert["id"], alert["round"]) == (embedded.alerts[0]["id"], embedded.alerts[0]["round"])
    requests = _read(bs, kafka.topics.requests)
    assert requests and all(r["kind"] == "evaluate" and r["suite"] == "bench" for r in requests)
    ids = {str(r["request_id"]) for r in requests}
    answers = _read(bs, kafka.topics.events)
    kickoffs = [e for e in answers if e["example_id"] == KICKOFF_EXAMPLE_ID]
    assert len(kickoffs) == 1 and answers[0] == kickoffs[0]
    assert {str(e["event_id"]).split("/")[0] for e in answers[1:]} <= ids
    # The final checkpoint holds the certified selection state.
    store = KafkaTopicStore(kafka)
    try:
        state, _ = load_partition_states(config, store, kafka.engine_topics()[0], range(3))
    finally:
        store.close()
    sel = state["suites"]["bench"]["selection"]
    assert sel["best_model"] == names[bench.best]
    assert sel["counts"]["kickoff"] == 1 and sel["counts"]["unrequested"] == 0
    ref = embedded.engine.state_view()["suites"]["bench"]["selection"]
    assert alert["round"] <= sel["calls_completed"] <= ref["calls_completed"]
