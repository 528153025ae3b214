"""HTTP endpoint serving ``/metrics`` from a given registry, plus ``/healthz`` and ``/readyz``."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

__all__ = ["serve_metrics", "stop_metrics"]

_StartResponse = Callable[..., Any]


class _QuietHandler(WSGIRequestHandler):
    """Request handler that does not log every request to stderr."""

    def log_message(self, format: str, *args: Any) -> None:
        """Log nothing."""


def _app(
    registry: CollectorRegistry, ready_fn: Callable[[], bool] | None
) -> Callable[[dict[str, Any], _StartResponse], Iterable[bytes]]:
    metrics_app = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: _StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path in ("/healthz", "/readyz"):
            ok = path == "/healthz" or ready_fn is None or bool(ready_fn())
            status = "200 OK" if ok else "503 Service Unavailable"
            body = (b"ok\n" if path == "/healthz" else b"ready\n") if ok else b"not ready\n"
            start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
            return [body]
        result: Iterable[bytes] = metrics_app(environ, start_response)
        return result

    return app


def serve_metrics(
    registry: CollectorRegistry,
    host: str = "127.0.0.1",
    port: int = 0,
    ready_fn: Callable[[], bool] | None = None,
) -> tuple[WSGIServer, threading.Thread]:
    """Serve the registry over HTTP from a daemon thread.

    Parameters
    ----------
    registry : CollectorRegistry
        The registry to expose (never the global default one).
    host : str, optional
        Address to bind, ``"0.0.0.0"`` or ``"::"`` for every interface.
    port : int, optional
        TCP port; 0 picks a free one (read it back from ``server.server_port``).
    ready_fn : Callable[[], bool] or None, optional
        Readiness probe for ``/readyz`` (e.g. "checkpoint restored and source assigned");
        None means ready as soon as the server listens.

    Returns
    -------
    tuple of (WSGIServer, threading.Thread)
        The server and the thread running it; stop both with :func:`stop_metrics`.

    Notes
    -----
    ``/metrics`` (and every path other than the two probes) is prometheus_client's WSGI app:
    text format, OpenMetrics on content negotiation, gzip when accepted. ``/healthz`` answers
    200 while the server thread runs (liveness); ``/readyz`` answers 200 or 503 from
    ``ready_fn`` (readiness). Requests are served one thread each.

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
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, sockaddr = infos[0]

    class _Server(ThreadingWSGIServer):
        address_family = family

    server = make_server(
        str(sockaddr[0]), port, _app(registry, ready_fn), _Server, handler_class=_QuietHandler
    )
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
    thread.join(timeout)
