"""Ports and subprocesses for the tests: one place for what every integration test needs.

Free and busy ports, starting a process with its output in a log file, waiting for a TCP port,
an HTTP endpoint or any condition (failing early when the process died, with its log), and
stopping or killing what a test started. No pytest dependency: a failed wait raises
``AssertionError`` (a test failure in pytest), so ``scripts/kafka-broker.sh`` can use it too.

Examples
--------
>>> with listening_port() as port:
...     tcp_open("127.0.0.1", port)
True
>>> wait_until(lambda: True, "nothing")
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "certmon_command",
    "die_with_parent",
    "free_port",
    "kill9",
    "listening_port",
    "log_tail",
    "start_daemon",
    "start_logged",
    "stop",
    "tcp_open",
    "wait_http",
    "wait_until",
]


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that was free on ``host`` a moment ago (bound, then closed).

    Examples
    --------
    >>> 0 < free_port() < 65536
    True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def listening_port(host: str = "127.0.0.1") -> Iterator[int]:
    """Hold a port busy (bound and listening, nobody accepting) for the ``with`` block.

    Examples
    --------
    >>> with listening_port() as port:
    ...     port > 0
    True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def tcp_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """Tell whether a TCP connection to ``host:port`` succeeds within ``timeout`` seconds.

    Examples
    --------
    >>> tcp_open("127.0.0.1", free_port())
    False
    """
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def die_with_parent() -> None:
    """``preexec_fn``: ask Linux to SIGTERM the child when its parent dies (no-op elsewhere).

    Keeps a test broker or consumer from outliving a killed test run.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def certmon_command() -> list[str]:
    """The ``certmon`` console script when installed, else ``python -m consumers.cli``.

    Examples
    --------
    >>> certmon_command()[-1] in ("certmon", "consumers.cli") or "certmon" in certmon_command()[0]
    True
    """
    exe = shutil.which("certmon")
    return [exe] if exe else [sys.executable, "-m", "consumers.cli"]


def log_tail(log: Path | None, chars: int = 3000) -> str:
    """The last ``chars`` characters of a log file ("" when there is none).

    Examples
    --------
    >>> log_tail(None)
    ''
    """
    if log is None or not log.exists():
        return ""
    return log.read_text(errors="replace")[-chars:]


def start_logged(cmd: Sequence[str], log: Path, **popen: Any) -> subprocess.Popen[bytes]:
    """Start ``cmd`` with stdout and stderr appended to ``log`` and no stdin.

    ``popen`` is passed on to :class:`subprocess.Popen` (``cwd``, ``env``, ``preexec_fn``...).

    Examples
    --------
    >>> import tempfile
    >>> log = Path(tempfile.mkdtemp()) / "echo.log"
    >>> start_logged([sys.executable, "-c", "print('hi')"], log).wait(30), log.read_text()
    (0, 'hi\\n')
    """
    with open(log, "ab") as out:
        return subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, **popen)


def wait_until(check: Callable[[], bool], what: str, timeout: float = 30.0,
               interval: float = 0.1) -> None:
    """Poll ``check`` every ``interval`` seconds until it is true; fail after ``timeout``.

    Raises
    ------
    AssertionError
        ``check`` was still false after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(interval)


def wait_http(url: str, proc: subprocess.Popen[bytes] | None = None, timeout: float = 30.0,
              log: Path | None = None) -> None:
    """Wait until ``url`` answers 200, failing early if ``proc`` died.

    Raises
    ------
    AssertionError
        ``proc`` exited or ``url`` did not answer 200 in time; the message ends with the
        tail of ``log``.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
            code = proc.poll() if proc is not None else None
            raise AssertionError(f"{url} not ready (exit={code}): {log_tail(log)}")
        time.sleep(0.1)


def stop(proc: subprocess.Popen[Any], timeout: float = 5.0) -> None:
    """Terminate a process we started (SIGTERM), then kill it if it does not exit in time."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def kill9(proc: subprocess.Popen[Any]) -> int:
    """Kill a process with SIGKILL (if still running), reap it and return its exit code.

    Examples
    --------
    >>> p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    >>> kill9(p) == -signal.SIGKILL
    True
    """
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    return proc.wait(10)


def start_daemon(cmd: Sequence[str], log: Path, ready_url: str,
                 timeout: float = 30.0, **popen: Any) -> subprocess.Popen[bytes]:
    """Start a server (:func:`start_logged`) and wait until ``ready_url`` answers 200.

    The process is stopped again if it does not become ready.
    """
    proc = start_logged(cmd, log, **popen)
    try:
        wait_http(ready_url, proc, timeout=timeout, log=log)
    except BaseException:
        stop(proc)
        raise
    return proc
