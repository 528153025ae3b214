"""Reception of metrics connections: one thread reads every request before any worker sees it.

A selector loop accepts connections and reads their requests without blocking, so a client
that sends nothing, or trickles, holds a socket and nothing else: no worker, no thread. Probes
(``/healthz``, ``/readyz``) are answered by the loop itself as soon as their request is in,
whatever the scrape load; complete ``/metrics`` requests wait in the loop (costing no CPU) and
are handed to the workers at the pacer's rate. When ``max_connections`` sockets are held, a
new connection evicts the oldest incomplete request older than half a second, or else the
oldest waiting scrape (answered ``503``), or else the oldest incomplete request; accepts at the
cap are themselves rate-limited, so clients reconnecting in a loop cannot make the loop spin.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_HEADER_BYTES", "PROBE_PATHS", "Reception", "TokenBucket", "request_path"]

MAX_HEADER_BYTES = 65536
PROBE_PATHS = frozenset({"/healthz", "/readyz"})
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 14\r\n"
         b"Connection: close\r\nContent-Type: text/plain\r\n\r\ntoo many peers\n")


def request_path(head: bytes) -> str:
    r"""Return the path (without query) of a request's head, ``""`` if unreadable.

    Examples
    --------
    >>> request_path(b"GET /healthz?x=1 HTTP/1.1\r\nHost: a\r\n\r\n")
    '/healthz'
    >>> request_path(b"junk")
    ''
    """
    parts = head.split(b"\r\n", 1)[0].split(b"\n", 1)[0].split()
    if len(parts) < 2:
        return ""
    return parts[1].split(b"?", 1)[0].decode("latin-1")


class TokenBucket:
    """Non-blocking rate limit: :meth:`take` succeeds ``rate`` times per second on average.

    Examples
    --------
    >>> now = [0.0]
    >>> bucket = TokenBucket(2.0, clock=lambda: now[0])
    >>> [bucket.take() for _ in range(4)]  # a second of credit (two), then empty
    [True, True, False, False]
    >>> now[0] = 0.5
    >>> bucket.take(), bucket.next_at()
    (True, 1.0)

    Notes
    -----
    Guarantee: over any interval of ``T`` seconds at most ``rate * (T + 1)`` calls succeed;
    ``rate = 0`` means unlimited.
    """

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._gap = 1.0 / rate if rate > 0 else 0.0
        self._clock = clock
        self._free = -float("inf")
        self._lock = threading.Lock()

    def next_at(self) -> float:
        """Monotonic time at which :meth:`take` will next succeed."""
        if not self._gap:
            return -float("inf")
        with self._lock:
            return max(self._free, self._clock() - 1.0 + self._gap)

    def take(self) -> bool:
        """Use a slot if one is due now."""
        if not self._gap:
            return True
        with self._lock:
            now = self._clock()
            slot = max(self._free, now - 1.0 + self._gap)
            if slot > now:
                return False
            self._free = slot + self._gap
            return True

    def charge(self, seconds: float) -> None:
        """Push the next slot ``seconds`` later (the credit is spent first); thread-safe."""
        if self._gap and seconds > 0:
            with self._lock:
                self._free = max(self._free, self._clock() - 1.0 + self._gap) + seconds


@dataclass(eq=False)
class _Conn:
    sock: socket.socket
    address: Any
    started: float  # accepted then
    deadline: float  # request fully received by then
    idle_at: float  # closed if no byte arrives by then
    buf: bytearray = field(default_factory=bytearray)
    handshaken: bool = True
    complete: bool = False


class Reception:
    """The selector loop of a metrics server (see the module docstring).

    ``dispatch(sock, address, head)`` hands a complete ``/metrics`` request to a worker,
    ``answer(sock, address, head)`` answers a probe in the loop's thread, ``in_workers()``
    counts the connections the workers hold.
    """

    def __init__(self, listener: socket.socket, limits: Any, tls: ssl.SSLContext | None,
                 dispatch: Callable[[socket.socket, Any, bytes], None],
                 answer: Callable[[socket.socket, Any, bytes], None],
                 in_workers: Callable[[], int]) -> None:
        self._listener, self._lim, self._tls = listener, limits, tls
        self._dispatch, self._answer, self._in_workers = dispatch, answer, in_workers
        self._pacer = TokenBucket(limits.max_scrapes_per_second)
        self._overflow = TokenBucket(_OVERFLOW_PER_SECOND)
        self._conns: OrderedDict[socket.socket, _Conn] = OrderedDict()  # oldest first
        self._waiting: OrderedDict[socket.socket, _Conn] = OrderedDict()  # complete scrapes
        self._sel = selectors.DefaultSelector()
        self._listening = False
        self.stopping = False

    def charge(self, seconds: float) -> None:
        """Delay the next scrape handed to a worker by ``seconds`` (from any thread)."""
        self._pacer.charge(seconds)

    def held(self) -> int:
        """Sockets held: being received, waiting for a worker, or with a worker."""
        return len(self._conns) + len(self._waiting) + self._in_workers()

    def run(self) -> None:
        """Loop until :attr:`stopping` is set (checked at least every half second)."""
        try:
            while not self.stopping:
                self._step()
        finally:
            for conn in [*self._conns.values(), *self._waiting.values()]:
                self._close(conn)
            self._sel.close()

    def _step(self) -> None:
        now = time.monotonic()
        at_cap = self.held() >= self._lim.max_connections
        want = not at_cap or self._overflow.next_at() <= now
        if want != self._listening:
            if want:
                self._sel.register(self._listener, selectors.EVENT_READ, None)
            else:
                self._sel.unregister(self._listener)
            self._listening = want
        wake = [now + 0.5]
        wake += [min(c.deadline, c.idle_at) for c in self._conns.values()]
        if self._waiting:
            wake.append(self._pacer.next_at())
        if at_cap:
            wake.append(self._overflow.next_at())
        for key, _ in self._sel.select(max(0.0, min(wake) - now)):
            if key.data is None:
                self._accept()
            else:
                self._receive(key.data)
        now = time.monotonic()
        for conn in [c for c in self._conns.values() if min(c.deadline, c.idle_at) <= now]:
            self._drop(conn)
        while self._waiting and self._pacer.take():
            _, conn = self._waiting.popitem(last=False)
            conn.sock.settimeout(self._lim.idle_timeout)
            self._dispatch(conn.sock, conn.address, bytes(conn.buf))

    def _accept(self) -> None:
        try:
            sock, address = self._listener.accept()
        except OSError:
            return
        if self.held() >= self._lim.max_connections:
            self._overflow.take()
            oldest = next(iter(self._conns.values()), None)
            stale = oldest is not None and oldest.started <= time.monotonic() - _GRACE
            if oldest is not None and (stale or not self._waiting):
                self._drop(oldest)
            elif self._waiting:
                _, victim = self._waiting.popitem(last=False)
                try:
                    victim.sock.setblocking(False)
                    victim.sock.send(_BUSY)
                except OSError:
                    pass
                self._close(victim)
        now = time.monotonic()
        lim = self._lim
        conn = _Conn(sock, address, now, now + lim.request_timeout, now + lim.idle_timeout)
        sock.setblocking(False)
        if self._tls is not None:
            try:
                conn.sock = self._tls.wrap_socket(sock, server_side=True,
                                                  do_handshake_on_connect=False)
            except (OSError, ValueError):
                self._close(conn)
                return
            conn.handshaken = False
        self._conns[conn.sock] = conn
        self._sel.register(conn.sock, selectors.EVENT_READ, conn)

    def _receive(self, conn: _Conn) -> None:
        try:
            if not conn.handshaken:  # only TLS connections start unhandshaken
                if isinstance(conn.sock, ssl.SSLSocket):
                    conn.sock.do_handshake()
                conn.handshaken = True
            while True:
                chunk = conn.sock.recv(16384)
                if not chunk:
                    self._drop(conn)
                    return
                conn.buf += chunk
                if not isinstance(conn.sock, ssl.SSLSocket) or not conn.sock.pending():
                    break
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
            conn.idle_at = time.monotonic() + self._lim.idle_timeout
            return
        except (OSError, ValueError):
            self._drop(conn)
            return
        conn.idle_at = time.monotonic() + self._lim.idle_timeout
        end = conn.buf.find(b"\r\n\r\n")
        end = end if end >= 0 else conn.buf.find(b"\n\n")
        if end < 0:
            if len(conn.buf) > MAX_HEADER_BYTES:
                self._drop(conn)
            return
        del self._conns[conn.sock]
        self._sel.unregister(conn.sock)
        head = bytes(conn.buf)
        if request_path(head) in PROBE_PATHS:
            try:
                conn.sock.settimeout(_PROBE_WRITE_TIMEOUT)
                self._answer(conn.sock, conn.address, head)
            except Exception:
                pass
            self._close(conn)
        else:
            self._waiting[conn.sock] = conn

    def _drop(self, conn: _Conn) -> None:
        if self._conns.pop(conn.sock, None) is not None:
            self._sel.unregister(conn.sock)
        self._close(conn)

    @staticmethod
    def _close(conn: _Conn) -> None:
        with contextlib.suppress(OSError):
            conn.sock.close()


_OVERFLOW_PER_SECOND = 100.0  # accepts per second while max_connections sockets are held
_GRACE = 0.5  # seconds a new connection has to send its request before it may be evicted
_PROBE_WRITE_TIMEOUT = 0.5  # seconds a probe's answer may take to write (a few bytes)
