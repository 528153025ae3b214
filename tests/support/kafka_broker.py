"""A real single-node Apache Kafka 4.x broker (KRaft) started from Maven Central jars.

The broker's runtime classpath is the dependency closure of ``org.apache.kafka:kafka_2.13``,
fetched once with Maven (the ``maven-dependency-plugin`` pinned explicitly) into a cache
directory (``~/.cache/certmon/kafka/<version>/libs``, overridable with ``CERTMON_KAFKA_CACHE``)
and reused by later runs. :class:`KafkaBroker` formats KRaft storage, starts one combined
broker+controller node on ``127.0.0.1`` with free ports, waits until it answers an admin
``list_topics``, and can be stopped, killed and restarted on the same ports and data directory.

This module has no pytest dependency: the test fixtures, ``scripts/kafka-broker.sh`` and
``benchmarks/kafka_throughput.py`` use it. The developer commands (start/stop/status) live in
:mod:`tests.support.kafka_broker_cli`.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from tests.support.processes import die_with_parent, free_port, tcp_open

KAFKA_VERSION = "4.3.1"
"""Apache Kafka release used when none is given (present on Maven Central)."""

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
"""Pinned plugin coordinates (Maven 3.8's implicit default version is far too old)."""

LOG4J_SLF4J_BINDING = "2.25.4"
"""Version of ``log4j-slf4j-impl`` added so the broker's SLF4J logging reaches log4j2."""

_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>certmon.testing</groupId>
  <artifactId>kafka-broker-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>{version}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>{log4j}</version>
    </dependency>
  </dependencies>
</project>
"""

_LOG4J2 = """status = error
name = certmon-test-broker
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log_file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
"""


class KafkaBrokerError(RuntimeError):
    """The test broker could not be fetched, formatted or started."""


def default_cache_dir() -> Path:
    """Return the jar cache root (``$CERTMON_KAFKA_CACHE`` or ``~/.cache/certmon/kafka``).

    Returns
    -------
    Path
        Directory holding one ``<version>/libs`` folder per fetched Kafka release.

    Examples
    --------
    >>> import os
    >>> expected = os.environ.get("CERTMON_KAFKA_CACHE") or str(
    ...     Path.home() / ".cache" / "certmon" / "kafka")
    >>> str(default_cache_dir()) == expected
    True
    """
    env = os.environ.get("CERTMON_KAFKA_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "certmon" / "kafka"


def fetch_kafka(
    version: str = KAFKA_VERSION,
    cache_dir: Path | None = None,
    *,
    mvn: str = "mvn",
    timeout: float = 900.0,
) -> Path:
    """Fetch (once) the broker's runtime jars and return the ``libs`` directory.

    Parameters
    ----------
    version : str
        Apache Kafka release (``kafka_2.13`` artifact version).
    cache_dir : Path, optional
        Cache root; defaults to :func:`default_cache_dir`.
    mvn : str
        Maven executable.
    timeout : float
        Seconds allowed for the Maven run.

    Returns
    -------
    Path
        ``<cache_dir>/<version>/libs``, complete (a marker file is written last).

    Raises
    ------
    KafkaBrokerError
        Maven is missing or the fetch failed (for example Maven Central is unreachable).

    Notes
    -----
    A file lock serializes concurrent fetches; a partial download never becomes ``libs``.
    """
    root = (cache_dir or default_cache_dir()) / version
    libs = root / "libs"
    marker = root / ".complete"
    if marker.exists() and libs.is_dir():
        return libs
    if shutil.which(mvn) is None:
        raise KafkaBrokerError(f"Maven ({mvn!r}) not found: cannot fetch Apache Kafka {version}")
    root.mkdir(parents=True, exist_ok=True)
    with _file_lock(root / ".lock"):
        if marker.exists() and libs.is_dir():
            return libs
        pom = root / "pom.xml"
        pom.write_text(_POM.format(version=version, log4j=LOG4J_SLF4J_BINDING))
        partial = root / "libs.partial"
        shutil.rmtree(partial, ignore_errors=True)
        cmd = [
            mvn, "-q", "-B", "-f", str(pom),
            f"{DEPENDENCY_PLUGIN}:copy-dependencies",
            "-DincludeScope=runtime", f"-DoutputDirectory={partial}",
        ]  # fmt: skip
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise KafkaBrokerError(f"Maven fetch of Kafka {version} timed out") from exc
        if proc.returncode != 0 or not any(partial.glob("kafka_2.13-*.jar")):
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
            raise KafkaBrokerError(
                f"Maven could not fetch org.apache.kafka:kafka_2.13:{version}:\n" + "\n".join(tail)
            )
        shutil.rmtree(libs, ignore_errors=True)
        partial.rename(libs)
        marker.write_text(version + "\n")
    return libs


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class KafkaBroker:
    """One Apache Kafka node (broker + KRaft controller) on ``127.0.0.1``.

    Parameters
    ----------
    work_dir : Path
        Holds ``server.properties``, ``data/`` and the broker's logs; kept across restarts.
    libs : Path
        Directory of runtime jars (from :func:`fetch_kafka`).
    port, controller_port : int, optional
        Listener ports; free ports are chosen when omitted and kept for restarts.
    heap : str
        JVM ``-Xmx`` (``-Xms`` is half of it at most 256m).
    java : str
        Java 17+ executable.
    detach : bool
        Run the JVM in its own session so it outlives this process (developer script);
        otherwise it is terminated when this process dies.

    Examples
    --------
    >>> b = KafkaBroker(Path("/tmp/unused-broker"), Path("/tmp/unused-libs"), port=19092,
    ...                 controller_port=19093)
    >>> b.bootstrap_servers
    '127.0.0.1:19092'
    >>> b.is_running
    False
    """

    def __init__(
        self,
        work_dir: Path,
        libs: Path,
        *,
        port: int | None = None,
        controller_port: int | None = None,
        heap: str = "512m",
        java: str = "java",
        detach: bool = False,
    ) -> None:
        self.work_dir = Path(work_dir)
        self.libs = Path(libs)
        self.host = "127.0.0.1"
        self.port = port if port is not None else free_port()
        self.controller_port = controller_port if controller_port is not None else free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.heap = heap
        self.java = java
        self.detach = detach
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of the PLAINTEXT listener."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """PID of the running JVM, or ``None``."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    @property
    def is_running(self) -> bool:
        """Whether the JVM started by this object is alive."""
        return self.pid is not None

    @property
    def data_dir(self) -> Path:
        """The broker's ``log.dirs``."""
        return self.work_dir / "data"

    @property
    def log_file(self) -> Path:
        """The broker's log4j2 log file."""
        return self.work_dir / "broker.log"

    def _classpath(self) -> str:
        return str(self.libs / "*")

    def _write_config(self) -> Path:
        c, p = self.controller_port, self.port
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": f"{self.host}:{c}",
            "listeners": f"PLAINTEXT://{self.host}:{p},CONTROLLER://{self.host}:{c}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{p}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "1000",
            "log.cleaner.enable": "true",
            "auto.create.topics.enable": "false",
        }
        self.work_dir.mkdir(parents=True, exist_ok=True)
        path = self.work_dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.work_dir / "log4j2.properties").write_text(_LOG4J2.format(log_file=self.log_file))
        return path

    def _format(self, config: Path) -> None:
        if (self.data_dir / "meta.properties").exists():
            return
        cluster_id = "-"
        while cluster_id.startswith("-"):  # a leading "-" would parse as an option (as in Kafka)
            cluster_id = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
        cmd = [
            self.java, "-cp", self._classpath(), "kafka.tools.StorageTool", "format",
            "--standalone", "-t", cluster_id, "-c", str(config),
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise KafkaBrokerError(f"kafka StorageTool format failed:\n{proc.stderr[-2000:]}")

    def start(self, timeout: float = 90.0) -> None:
        """Format storage (first time only), start the JVM and wait until ready.

        Raises
        ------
        KafkaBrokerError
            The JVM exited or did not become ready within ``timeout`` seconds.
        """
        if self.is_running:
            return
        if not any(self.libs.glob("kafka_2.13-*.jar")):
            raise KafkaBrokerError(f"no Kafka jars in {self.libs}")
        config = self._write_config()
        self._format(config)
        cmd = [
            self.java, f"-Xmx{self.heap}", "-Xms128m", "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.work_dir / 'log4j2.properties'}",
            "-cp", self._classpath(), "kafka.Kafka", str(config),
        ]  # fmt: skip
        out = (self.work_dir / "broker.out").open("ab")
        try:
            self._proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=None if self.detach else die_with_parent,
            )  # fmt: skip
        finally:
            out.close()
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Block until the listener accepts TCP and an admin ``list_topics`` succeeds."""
        from kafka import KafkaAdminClient

        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise KafkaBrokerError(
                    f"broker exited with code {self._proc.returncode}:\n{self._log_tail()}"
                )
            if not tcp_open(self.host, self.port):
                time.sleep(0.1)
                continue
            try:
                admin = KafkaAdminClient(
                    bootstrap_servers=self.bootstrap_servers, request_timeout_ms=5000
                )
                try:
                    admin.list_topics()
                finally:
                    admin.close()
                return
            except Exception as exc:  # not ready yet: any client error means "retry"
                last = exc
                time.sleep(0.2)
        raise KafkaBrokerError(
            f"broker not ready after {timeout:.0f}s ({last!r}):\n{self._log_tail()}"
        )

    def _log_tail(self, lines: int = 20) -> str:
        texts = []
        for name in ("broker.out", "broker.log"):
            path = self.work_dir / name
            if path.exists():
                texts.extend(path.read_text(errors="replace").splitlines()[-lines:])
        return "\n".join(texts)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop gracefully (SIGTERM), escalating to SIGKILL after ``timeout`` seconds."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            self._proc = None
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        self._proc = None

    def kill(self) -> None:
        """Kill the JVM with SIGKILL (data stays; :meth:`start` recovers it)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        self._proc = None

    def restart(self, timeout: float = 90.0) -> None:
        """Stop then start again on the same ports and data directory."""
        self.stop()
        self.start(timeout)

    def __enter__(self) -> KafkaBroker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
