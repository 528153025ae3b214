"""Lifecycle: SIGTERM during an outage, first start without a broker, --state-out."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from consumers.kafka.state import load_partition_states
from monitor.checkpoint import LocalDirectoryStore
from tests.kafka import loop_fault
from tests.kafka.conftest import BrokerInfo
from tests.kafka.kafka_harness import (
    _CLI,
    CONFIG_TEMPLATE,
    REPO,
    KafkaSetup,
    comparable,
    make_events,
    replay_reference,
    sample,
    scrape_until,
)
from tests.support.processes import free_port  # bound then closed: nothing listens there

pytestmark = pytest.mark.kafka


def _config(tmp: Path, bs: str, prefix: str, **extra: object) -> Path:
    """The harness config with ``extra`` [kafka] settings (``bootstrap_timeout_ms=None``:
    the default, 30 s, instead of the harness's 3 s)."""
    text = CONFIG_TEMPLATE.format(bs=bs, prefix=prefix, every=100, every_seconds=0.5,
                                  partitions=2, poll_ms=200, metrics="false", fetch="true",
                                  extra_topics="", repartition="")  # fmt: skip
    extra = {"bootstrap_timeout_ms": 3000, **extra}
    lines = "".join(f"{k} = {json.dumps(v)}\n" for k, v in extra.items() if v is not None)
    path = tmp / "certmon.toml"
    path.write_text(text.replace("bootstrap_timeout_ms = 3000\n", lines))
    return path


def _certmon(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", _CLI, *args], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


@pytest.mark.parametrize(
    ("create_topics", "bootstrap_ms", "startup_s"),
    [
        (True, None, 3),  # the admin client's bootstrap first, default 30 s timeout
        (False, None, 3),  # the producer's bootstrap first, default 30 s timeout
        (False, 1000, 4),  # several producer bootstraps in turn (retry with backoff)
    ],
)
def test_first_start_without_a_broker_exits_with_one_line(
    tmp_path: Path, create_topics: bool, bootstrap_ms: int | None, startup_s: float
) -> None:
    """``startup_timeout_seconds`` bounds the whole first start: no client's bootstrap waits
    its own ``bootstrap_timeout_ms`` past it. Before: 30.7 s with the defaults and
    ``startup_timeout_seconds = 3`` (the admin client waited its 30 s); a retried producer
    bootstrap failed on its metrics registered twice (``DuplicateTimeseries``, a traceback per
    retry, and that was the reason in the final error)."""
    cfg = _config(tmp_path, f"127.0.0.1:{free_port()}", "nobroker",
                  startup_timeout_seconds=startup_s, create_topics=create_topics,
                  bootstrap_timeout_ms=bootstrap_ms)  # fmt: skip
    t0 = time.monotonic()
    proc = _certmon("run", "--config", str(cfg))
    _, err = proc.communicate(timeout=90)
    took = time.monotonic() - t0
    text = err.decode()
    assert proc.returncode == 2, text[-2000:]
    *before, last = text.strip().splitlines()
    assert last.startswith("certmon: error: cannot reach Kafka at 127.0.0.1:"), text
    assert "startup_timeout_seconds" in last and "KafkaTimeoutError" in last, last
    # what comes before it: JSON warnings/errors saying the brokers cannot be reached, no
    # traceback (an outage is not a bug)
    assert before, text
    for line in before:
        doc = json.loads(line)
        assert "exc" not in doc and "Traceback" not in line, line
        assert doc["level"] in ("WARNING", "ERROR") and "KafkaTimeoutError" in doc["error"], line
    # generous bound (a loaded machine), far below the 30 s a single default bootstrap takes
    assert took < 15, f"first start gave up after {took:.1f} s"


def test_sigterm_while_the_broker_is_unreachable_ends_within_5s(tmp_path: Path) -> None:
    cfg = _config(tmp_path, f"127.0.0.1:{free_port()}", "outage", startup_timeout_seconds=120)
    port = free_port()
    text = cfg.read_text().replace("enabled = false\nhost = \"127.0.0.1\"\nport = 0",
                                   f"enabled = true\nhost = \"127.0.0.1\"\nport = {port}")
    assert f"port = {port}" in text
    cfg.write_text(text)
    proc = _certmon("run", "--config", str(cfg), "--state-out", str(tmp_path / "STATE.json"))
    time.sleep(4.0)  # inside the retry loop / a blocking bootstrap
    assert proc.poll() is None
    # while the brokers cannot be reached, the instance does not claim to be up
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    samples = dict(line.rsplit(" ", 1) for line in body.splitlines()
                   if line.startswith(("certmon_up ", "certmon_kafka_connected ")))
    assert float(samples["certmon_up"]) == 0.0, samples
    assert float(samples["certmon_kafka_connected"]) == 0.0, samples
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    took = time.monotonic() - t0
    assert proc.returncode == 0, err.decode()[-2000:]
    assert took < 5.0, f"SIGTERM took {took:.1f} s"
    assert json.loads((tmp_path / "STATE.json").read_text()) == {"suites": {}}


def test_state_out_with_the_kafka_source(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    setup = KafkaSetup(kafka_bootstrap, topic_prefix, tmp_path, partitions=2, every=200)
    records = make_events(800, seed=31)
    ref = replay_reference(setup, records)
    setup.produce(records)
    out = tmp_path / "kafka-STATE.json"
    proc = _certmon("run", "--config", str(setup.config_path), "--state-out", str(out))
    setup.wait_caught_up(timeout=60)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err.decode()[-2000:]
    took = time.monotonic() - t0
    assert took < 4.0, f"SIGTERM took {took:.1f} s"  # shutdown_timeout_seconds, the default
    state = json.loads(out.read_text())
    assert state["counters"]["events_in"] == len(records)
    assert comparable(state) == comparable(ref["state"])


def test_a_running_instance_outlives_its_startup_timeout(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    """``startup_timeout_seconds`` bounds the first connection only: a consumer that reached
    the brokers keeps running past it (kafka-python 3's ``bootstrap_connected()`` is False
    once the bootstrap is over, so it cannot tell "reached")."""
    # The deadline must let a loaded machine start (interpreter, clients, group join: a 2 s
    # deadline failed there); the check is then that the process outlives twice the deadline
    # counted from its start, however long the catch-up took.
    startup_s = 8.0
    setup = KafkaSetup(kafka_bootstrap, topic_prefix, tmp_path, partitions=2, every=100)
    text = setup.config_path.read_text()
    setup.config_path.write_text(text.replace("bootstrap_timeout_ms = 3000\n",
                                              "bootstrap_timeout_ms = 3000\n"
                                              f"startup_timeout_seconds = {startup_s}\n"))
    records = make_events(400, seed=37)
    ref = replay_reference(setup, records)
    setup.produce(records[:200])
    t0 = time.monotonic()
    consumer = setup.start("c")
    setup.wait_caught_up(timeout=60, procs=[consumer])
    time.sleep(max(0.0, t0 + 2 * startup_s - time.monotonic()))  # past the deadline, connected
    assert consumer.alive(), consumer.log_tail()
    setup.produce(records[200:])
    setup.wait_caught_up(timeout=60, procs=[consumer])
    assert consumer.terminate() == 0, consumer.log_tail()
    assert consumer.count_in_log("cannot reach Kafka") == 0
    assert comparable(setup.final_state()) == comparable(ref["state"])


@pytest.mark.parametrize("store", ["kafka", "local", "local-after-loop-failure"])
def test_sigterm_after_the_broker_went_away_ends_within_4s(
    kafka_broker: BrokerInfo, topic_prefix: str, tmp_path: Path, store: str
) -> None:
    """A connected instance with records not yet checkpointed loses the broker, then gets
    SIGTERM: the final checkpoint (and offset commit) is tried within the shutdown budget.
    Before: the checkpoint store waited 60 s (kafka-python's max_block_ms) for the metadata
    of the checkpoint topic, the offset commit 30 s (request_timeout_ms). With a local store
    the final checkpoint is written whichever comes first, the SIGTERM or a failure of the
    consume loop (a race: ``local-after-loop-failure`` forces the failure first, with
    :mod:`tests.kafka.loop_fault`; before, the loop dropped its engines' unsaved work then and
    no checkpoint was written: ``events_in`` 0 of 380)."""
    if not kafka_broker.can_restart or kafka_broker.broker is None:
        pytest.skip(f"broker {kafka_broker.kind} is not controlled by the tests")
    setup = KafkaSetup(kafka_broker.bootstrap_servers, topic_prefix, tmp_path, partitions=2,
                       every=100_000, every_seconds=600, metrics=True)  # fmt: skip
    ckpt = tmp_path / "ckpt"
    local = store.startswith("local")
    if local:  # the final checkpoint can be written; the offset commit cannot
        text = setup.config_path.read_text()
        text = text.replace('checkpoint_store = "kafka"', 'checkpoint_store = "local"')
        text = text.replace("bootstrap_timeout_ms = 3000\n",
                            "bootstrap_timeout_ms = 3000\nshutdown_timeout_seconds = 3.0\n")
        setup.config_path.write_text(text + f'\n[checkpoint]\ndir = "{ckpt}"\n')
    records = make_events(300, seed=41)
    setup.produce(records)
    flag = tmp_path / "fail-the-loop"
    consumer = setup.start("c", cli=loop_fault.CLI, env={"CERTMON_TEST_LOOP_FAIL_FLAG": str(flag)})
    consumer.wait_log("partitions assigned", timeout=60)
    # every record processed (no checkpoint yet: every 600 s), so a final one is due; a fixed
    # sleep was not always enough on a loaded machine (no final checkpoint was due then)
    text = scrape_until(consumer.metrics_port(), "certmon_events_received_total",
                        len(records), timeout=60)
    assert sample(text, "certmon_events_received_total") == len(records), consumer.log_tail()
    broker = kafka_broker.broker
    broker.stop()
    try:
        if store == "local-after-loop-failure":  # the loop fails before the SIGTERM
            flag.touch()
            consumer.wait_log("kafka loop failed", timeout=30)
        else:
            time.sleep(0.5)
        t0 = time.monotonic()
        rc = consumer.terminate(timeout=90)
        took = time.monotonic() - t0
    finally:
        broker.start()
    assert rc == 0, consumer.log_tail()
    assert took < 4.0, f"SIGTERM took {took:.1f} s\n{consumer.log_tail()}"
    if local:  # every record processed is in the checkpoints, whatever came first
        disk = LocalDirectoryStore(ckpt)
        state, _ = load_partition_states(setup.config, disk, setup.engine_topic, range(2))
        events_in = state.get("counters", {}).get("events_in", 0)  # no checkpoint: 0
        assert events_in == len(records), consumer.log_tail()
