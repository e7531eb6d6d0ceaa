"""The ``/metrics`` HTTP server of ``start_metrics_server``.

prometheus-client's WSGI app, with ``HEAD`` answered like ``GET`` and ``OPTIONS`` naming the
methods it takes.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any, Final
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

__all__ = ["serve_metrics"]

ALLOW: Final = "GET, HEAD, OPTIONS"


class _SilentHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Stay silent: a line per scrape would flood the application's stderr."""


_App = Callable[..., Iterable[bytes]]


def answer_head_and_options(app: _App) -> _App:
    """Return ``app`` answering ``HEAD`` and ``OPTIONS``.

    ``HEAD`` gets what ``GET`` would, without the body; ``OPTIONS`` gets 200 and an ``Allow``
    header; every ``Allow`` header (a 405's too) names the three methods.
    """

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        if method == "OPTIONS":
            start_response("200 OK", [("Allow", ALLOW), ("Content-Length", "0")])
            return [b""]
        answered: list[tuple[str, list[tuple[str, str]]]] = []

        def keep(status: str, headers: list[tuple[str, str]], *_: Any) -> None:
            answered.append((status, [(k, ALLOW if k.lower() == "allow" else v)
                                      for k, v in headers]))

        body = b"".join(app({**environ, "REQUEST_METHOD": "GET"} if method == "HEAD"
                            else environ, keep))
        status, headers = answered[0]
        if not any(k.lower() == "content-length" for k, _ in headers):
            headers.append(("Content-Length", str(len(body))))
        start_response(status, headers)
        return [b"" if method == "HEAD" else body]

    return wrapped


def serve_metrics(port: int, addr: str, registry: CollectorRegistry) -> Any:
    """Serve ``registry`` on ``addr:port`` from a daemon thread; return the WSGI server.

    Raises:
        OSError: when ``addr:port`` cannot be bound (a busy port, an unknown address), of the
            socket's errno, its ``strerror`` naming the address:
            ``cannot serve /metrics on 127.0.0.1:9464 (Address already in use)``.
    """

    class Server(ThreadingWSGIServer):
        """A copy of the threading server whose address family suits ``addr`` (IPv4 or 6)."""

    try:
        family, _, _, _, sockaddr = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM,
                                                       flags=socket.AI_PASSIVE)[0]
        Server.address_family = family
        server = make_server(str(sockaddr[0]), port,
                             answer_head_and_options(make_wsgi_app(registry)), Server,
                             handler_class=_SilentHandler)
    except OSError as exc:  # the socket's own text names no address: say which one it was
        raise OSError(exc.errno, f"cannot serve /metrics on {addr}:{port} "
                                 f"({exc.strerror or exc})") from exc
    threading.Thread(target=server.serve_forever, name="loopguard-metrics", daemon=True).start()
    return server
