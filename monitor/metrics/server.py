"""HTTP endpoint serving ``/metrics`` from a given registry, plus ``/healthz`` and ``/readyz``.

Bounded so that whoever can reach the port cannot starve processing, exhaust the process or
fail liveness: one reception loop (:mod:`monitor.metrics.reception`) reads every request
without blocking before any worker sees it (an idle or trickling client holds a socket, not a
thread), answers the probes itself, holds at most ``max_connections`` connections (at the cap
a new one evicts a stale unfinished request or the oldest waiting scrape, at a bounded rate),
closes a connection idle for ``idle_timeout`` or without its request ``request_timeout``
after it was accepted (TLS handshake included; one request per connection, no keep-alive),
and hands ``/metrics`` requests to a fixed pool of workers at most ``max_scrapes_per_second``
times per second on average (waiting scrapers cost no CPU). ``/metrics`` is rendered at most
once per ``min_scrape_interval`` (concurrent or looping scrapers share one rendering instead
of each taking the state lock); within a rendering, the state families are re-rendered only
when the state's version changed (``StateCollector(version_fn=...)``, as ``certmon run`` wires
it), so between state changes a rendering re-encodes only the operational families. Optional
TLS and HTTP basic auth.
"""

from __future__ import annotations

import base64
import hmac
import io
import queue
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from prometheus_client import CollectorRegistry

from monitor.config.runtime import MetricsConfig
from monitor.errors import CertmonError
from monitor.metrics.exposition import metrics_app
from monitor.metrics.reception import Reception

__all__ = ["MetricsLimits", "ScrapePacer", "limits_from_config", "serve_metrics",
           "stop_metrics"]

_StartResponse = Callable[..., Any]
_App = Callable[[dict[str, Any], _StartResponse], Iterable[bytes]]


def _default(key: str) -> Any:
    """Return the default of ``[metrics] key`` (defined once, in :mod:`monitor.config.runtime`)."""
    return MetricsConfig.model_fields[key].default


@dataclass(frozen=True, slots=True)
class MetricsLimits:
    """Resource bounds and access control of the endpoint (see ``[metrics]`` in the config).

    Examples
    --------
    >>> MetricsLimits().max_connections
    16
    """

    workers: int = _default("workers")
    max_connections: int = _default("max_connections")
    idle_timeout: float = _default("idle_timeout")
    request_timeout: float = _default("request_timeout")  # TLS handshake + request line + headers
    min_scrape_interval: float = _default("min_scrape_interval")
    max_scrapes_per_second: float = _default("max_scrapes_per_second")  # 0: unlimited
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    basic_auth: tuple[str, str] | None = None  # (username, password)


class _HeadReader(io.RawIOBase):
    """A request's head, already received by the reception loop, then end of input."""

    def __init__(self, head: bytes) -> None:
        super().__init__()
        self._head = memoryview(head)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), len(self._head))
        buffer[:n] = self._head[:n]
        self._head = self._head[n:]
        return n


class _DeadlineReader(io.RawIOBase):
    """A socket's reading side with every read under the time left before a deadline.

    Each read waits at most ``min(idle_timeout, deadline - now)`` and none starts after the
    deadline, so a client sending one byte at a time within the idle timeout is still cut
    at the deadline (a per-read timeout alone never fires for it). The socket's timeout is
    put back to ``idle_timeout`` after each read, for the response's writes.
    """

    def __init__(self, sock: socket.socket, deadline: float, idle_timeout: float) -> None:
        super().__init__()
        self._sock, self._deadline, self._idle = sock, deadline, idle_timeout

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("request not received within metrics.request_timeout")
        self._sock.settimeout(min(self._idle, left))
        try:
            return self._sock.recv_into(buffer)
        finally:
            self._sock.settimeout(self._idle)


class _QuietHandler(WSGIRequestHandler):
    """Request handler that does not log every request to stderr.

    It reads the request under the connection's deadline (``request_timeout`` from
    ``deadline``, by default from now) and handles one request per connection, as wsgiref's.
    """

    def __init__(self, request: Any, client_address: Any, server: _BoundedServer,
                 deadline: float | None = None, head: bytes | None = None) -> None:
        lim = server.limits
        self._deadline = time.monotonic() + lim.request_timeout if deadline is None else deadline
        self._idle = lim.idle_timeout
        self._head = head
        super().__init__(request, client_address, server)

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the plain makefile reader; the socket stays open
        raw: io.RawIOBase = (_HeadReader(self._head) if self._head is not None else
                             _DeadlineReader(self.connection, self._deadline, self._idle))
        self.rfile = io.BufferedReader(raw)

    def log_message(self, format: str, *args: Any) -> None:
        """Log nothing."""


class ScrapePacer:
    """Serve at most ``rate`` responses per second on average, in bursts of up to ``rate``.

    Each call reserves the next free slot, ``1 / rate`` seconds after the previous one (a
    second of unused slots is kept as credit) and sleeps until it: waiting costs no CPU, and
    the workers it holds make further connections queue or be closed at the cap.

    Examples
    --------
    >>> now = [0.0]
    >>> def sleep(s):
    ...     now[0] += s
    >>> pacer = ScrapePacer(2.0, clock=lambda: now[0], sleep=sleep)
    >>> for _ in range(6):
    ...     pacer.wait()
    >>> now[0]  # three at once (a second of credit and the current slot), then every 0.5 s
    1.5

    Notes
    -----
    Guarantee: over any interval of ``T`` seconds at most ``rate * (T + 1) + 1`` calls return;
    ``rate = 0`` disables pacing.
    """

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._gap = 1.0 / rate if rate > 0 else 0.0
        self._credit = 1.0  # seconds of unused slots a quiet period leaves
        self._clock, self._sleep = clock, sleep
        self._free = -float("inf")
        self._lock = threading.Lock()

    def wait(self) -> None:
        """Return at the caller's slot (at once while there is credit)."""
        if not self._gap:
            return
        with self._lock:
            now = self._clock()
            slot = max(self._free, now - self._credit)
            self._free = slot + self._gap
        if slot > now:
            self._sleep(slot - now)


RENDER_BUDGET = 0.05  # at most this fraction of a core spent rendering /metrics, on average
SERVE_BUDGET = 0.05  # and at most this fraction answering scrapes (when pacing is on)


class _CachedScrape:
    """At most one rendering of ``/metrics`` per interval, shared by every scraper (paced).

    The interval is ``min_scrape_interval``, lengthened to ``cost / RENDER_BUDGET`` after a
    rendering that took ``cost`` CPU seconds (its thread's CPU time), so rendering a large
    fleet costs processing at most ``RENDER_BUDGET`` of a core on average, whatever the scrape
    load and ``min_scrape_interval``; the page is then up to ``cost / RENDER_BUDGET`` old. A
    rendering whose state families were reused (unchanged state version) is cheap, so the next
    one may come after ``min_scrape_interval`` again: the operational families stay fresh.
    """

    def __init__(self, app: _App, interval: float, pacer: ScrapePacer | None = None,
                 budget: float = RENDER_BUDGET) -> None:
        self._app, self._interval, self._pacer, self._budget = app, interval, pacer, budget
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str, str], tuple[float, str, list[Any], bytes]] = {}

    def __call__(self, environ: dict[str, Any], start_response: _StartResponse) -> list[bytes]:
        if self._pacer is not None:
            self._pacer.wait()  # outside the lock: a waiting scraper holds a worker, not the CPU
        key = (str(environ.get("QUERY_STRING", "")), str(environ.get("HTTP_ACCEPT", "")),
               str(environ.get("HTTP_ACCEPT_ENCODING", "")))
        with self._lock:  # concurrent scrapers wait for one rendering
            hit = self._cache.get(key)
            if hit is None or time.monotonic() >= hit[0]:
                got: dict[str, Any] = {}

                def capture(status: str, headers: list[Any], *_: Any) -> None:
                    got["status"], got["headers"] = status, headers

                cpu = time.thread_time()
                body = b"".join(self._app(environ, capture))
                cost = time.thread_time() - cpu
                if len(self._cache) > 16:
                    self._cache.clear()
                fresh_until = time.monotonic() + max(self._interval, cost / self._budget)
                hit = self._cache[key] = (fresh_until, got["status"], got["headers"], body)
        start_response(hit[1], list(hit[2]))
        return [hit[3]]


def _app(registry: CollectorRegistry, ready_fn: Callable[[], bool] | None,
         limits: MetricsLimits) -> _App:
    # paced by the reception loop, before a worker is taken (see monitor.metrics.reception)
    scrape_app = _CachedScrape(metrics_app(registry), limits.min_scrape_interval)
    expected = None
    if limits.basic_auth is not None:
        user, password = limits.basic_auth
        expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    def app(environ: dict[str, Any], start_response: _StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if expected is not None and path != "/healthz" and not hmac.compare_digest(
                str(environ.get("HTTP_AUTHORIZATION", "")).encode(), expected.encode()):
            start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="certmon"'),
                                                ("Content-Type", "text/plain")])
            return [b"unauthorized\n"]
        if path in ("/healthz", "/readyz"):
            ok = path == "/healthz" or ready_fn is None or bool(ready_fn())
            status = "200 OK" if ok else "503 Service Unavailable"
            body = (b"ok\n" if path == "/healthz" else b"ready\n") if ok else b"not ready\n"
            start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
            return [body]
        return scrape_app(environ, start_response)

    return app


class _BoundedServer(WSGIServer):
    """A WSGI server: requests received by a :class:`Reception` loop, scrapes by workers.

    ``/metrics`` requests are answered by a fixed pool of workers, probes by the loop.
    """

    limits: MetricsLimits
    tls: ssl.SSLContext | None

    def start_workers(self) -> None:
        self._queue: queue.Queue[tuple[socket.socket, Any, bytes] | None] = queue.Queue()
        self._busy, self._busy_lock = 0, threading.Lock()
        self._stopped = threading.Event()
        self.reception = Reception(self.socket, self.limits, self.tls, self._hand_over,
                                   self._answer, self._in_workers)
        self.workers = [threading.Thread(target=self._work, name=f"certmon-metrics-{i}",
                                         daemon=True) for i in range(self.limits.workers)]
        for t in self.workers:
            t.start()

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Run the reception loop until :meth:`shutdown`."""
        try:
            self.reception.run()
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop the reception loop and wait for it (at most a few seconds)."""
        self.reception.stopping = True
        self._stopped.wait(5.0)

    def _in_workers(self) -> int:
        with self._busy_lock:
            return self._busy

    def _hand_over(self, sock: socket.socket, address: Any, head: bytes) -> None:
        with self._busy_lock:
            self._busy += 1
        self._queue.put((sock, address, head))

    def _answer(self, sock: socket.socket, address: Any, head: bytes) -> None:
        _QuietHandler(sock, address, self, head=head)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            request, address, head = item
            cpu = time.thread_time()
            try:
                _QuietHandler(request, address, self, head=head)
            except Exception:
                pass
            finally:
                # a large page costs CPU per answer (copying it): pace by that cost too
                self.reception.charge((time.thread_time() - cpu) / SERVE_BUDGET)
                self.shutdown_request(request)
                with self._busy_lock:
                    self._busy -= 1

    def stop_workers(self) -> None:
        for _ in self.workers:
            self._queue.put(None)


def serve_metrics(
    registry: CollectorRegistry,
    host: str = "127.0.0.1",
    port: int = 0,
    ready_fn: Callable[[], bool] | None = None,
    limits: MetricsLimits | None = None,
) -> tuple[WSGIServer, threading.Thread]:
    """Serve the registry over HTTP from a daemon thread and a bounded worker pool.

    Parameters
    ----------
    registry : CollectorRegistry
        The registry to expose (never the global default one).
    host : str, optional
        Address to bind (default loopback), ``"0.0.0.0"`` or ``"::"`` for every interface.
    port : int, optional
        TCP port; 0 picks a free one (read it back from ``server.server_port``).
    ready_fn : Callable[[], bool] or None, optional
        Readiness probe for ``/readyz`` (e.g. "checkpoint restored and source assigned");
        None means ready as soon as the server listens.
    limits : MetricsLimits, optional
        Workers, connection cap, idle and request timeouts, scrape interval, TLS, basic auth.

    Returns
    -------
    tuple of (WSGIServer, threading.Thread)
        The server and the thread running it; stop both with :func:`stop_metrics`.

    Raises
    ------
    CertmonError
        The address cannot be bound (a busy port): one line naming host and port.

    Notes
    -----
    ``/metrics`` (and every path other than the two probes) answers as prometheus_client's WSGI
    app does (text format, OpenMetrics on content negotiation, gzip when accepted), with the
    state families copied as pre-rendered text (:func:`monitor.metrics.exposition.metrics_app`).
    ``/healthz`` answers 200 while the server runs (and needs no credentials, for liveness
    probes); ``/readyz`` answers 200 or 503 from ``ready_fn``. Guarantee: the endpoint holds at most
    ``max_connections + 1`` sockets plus the listening one; no worker ever waits for a request
    (a connection is closed ``request_timeout`` seconds after it was accepted without its whole
    request, handshake included, whatever the client trickles); probes are answered by the
    reception loop, not behind scrapes; ``/metrics`` is rendered at most once per
    ``min_scrape_interval`` seconds and answered at most ``max_scrapes_per_second`` times per
    second on average. Assumption: a probe reaches the accept queue; with more looping clients
    than ``max_connections`` the kernel's queue is shared, and a probe waits for at most the
    clients ahead of it at 100 accepts per second.

    Examples
    --------
    >>> import urllib.request
    >>> from prometheus_client import CollectorRegistry, Gauge
    >>> registry = CollectorRegistry()
    >>> Gauge("certmon_up", "Up.", registry=registry).set(1)
    >>> server, thread = serve_metrics(registry, "127.0.0.1", 0)
    >>> base = f"http://127.0.0.1:{server.server_port}"
    >>> b"certmon_up 1.0" in urllib.request.urlopen(base + "/metrics", timeout=5).read()
    True
    >>> urllib.request.urlopen(base + "/healthz", timeout=5).status
    200
    >>> stop_metrics(server, thread)
    """
    lim = limits or MetricsLimits()
    tls = None
    if lim.tls_cert_file or lim.tls_key_file:
        if not (lim.tls_cert_file and lim.tls_key_file):
            raise CertmonError("metrics TLS needs both tls_cert_file and tls_key_file")
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            tls.load_cert_chain(lim.tls_cert_file, lim.tls_key_file)
        except (OSError, ssl.SSLError) as exc:
            raise CertmonError(f"cannot load the metrics TLS certificate or key: {exc}") from None
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, _, _, _, sockaddr = infos[0]

        class _Server(_BoundedServer):
            address_family = family
            allow_reuse_address = True
            request_queue_size = 64  # the kernel's backlog: no descriptor of ours

        server = _Server((str(sockaddr[0]), port), _QuietHandler)
    except OSError as exc:
        raise CertmonError(
            f"cannot serve metrics on {host}:{port}: {exc.strerror or exc} "
            "(set metrics.port, or metrics.enabled = false)"
        ) from None
    server.limits, server.tls = lim, tls
    server.set_app(_app(registry, ready_fn, lim))
    server.start_workers()
    thread = threading.Thread(target=server.serve_forever, name="certmon-metrics", daemon=True)
    thread.start()
    return server, thread


def stop_metrics(server: WSGIServer, thread: threading.Thread, timeout: float = 5.0) -> None:
    """Stop a server started by :func:`serve_metrics` and wait for its thread.

    Parameters
    ----------
    server : WSGIServer
        The server.
    thread : threading.Thread
        Its thread.
    timeout : float, optional
        Seconds to wait for the thread to end.
    """
    server.shutdown()
    server.server_close()
    if isinstance(server, _BoundedServer):
        server.stop_workers()
    thread.join(timeout)


def limits_from_config(metrics: Any, environ: dict[str, str] | None = None) -> MetricsLimits:
    r"""Build :class:`MetricsLimits` from a ``[metrics]`` config section.

    The basic-auth password comes from ``basic_auth_password_file`` or the
    ``CERTMON_METRICS_PASSWORD`` environment variable, never from the config file.

    Raises
    ------
    CertmonError
        A username without a password, or an unreadable password file (never printed).

    Examples
    --------
    >>> from monitor.config import parse_config
    >>> cfg = parse_config("[metrics]\nbasic_auth_username = 'prom'\n"
    ...                    "[[suites]]\n[[suites.certificates]]\nname='r'\nalpha=0.1\n"
    ...                    "delta=0.1\n")
    >>> limits_from_config(cfg.metrics, {"CERTMON_METRICS_PASSWORD": "pw"}).basic_auth
    ('prom', 'pw')
    """
    env = environ if environ is not None else {}
    auth = None
    if metrics.basic_auth_username:
        password = env.get("CERTMON_METRICS_PASSWORD")
        if metrics.basic_auth_password_file:
            try:
                with open(metrics.basic_auth_password_file, encoding="utf-8") as fh:
                    password = fh.read().strip()
            except OSError as exc:
                raise CertmonError(
                    f"cannot read metrics.basic_auth_password_file ({exc.strerror})") from None
        if not password:
            raise CertmonError("metrics.basic_auth_username needs a password: "
                               "metrics.basic_auth_password_file or CERTMON_METRICS_PASSWORD")
        auth = (str(metrics.basic_auth_username), password)
    return MetricsLimits(
        workers=metrics.workers, max_connections=metrics.max_connections,
        idle_timeout=metrics.idle_timeout, request_timeout=metrics.request_timeout,
        min_scrape_interval=metrics.min_scrape_interval,
        max_scrapes_per_second=metrics.max_scrapes_per_second,
        tls_cert_file=metrics.tls_cert_file, tls_key_file=metrics.tls_key_file, basic_auth=auth)
