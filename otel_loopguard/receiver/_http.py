"""The OTLP/HTTP front end of ``serve``: ``/v1/traces``, ``/metrics``, ``/healthz``, ``/readyz``.

A stdlib ``ThreadingHTTPServer`` (HTTP/1.1 keep-alive, one thread per connection). Request
bodies are never read past ``max_request_bytes``: a larger ``Content-Length`` is refused before
reading, and the connection is closed whenever a body is left unread.
"""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from otel_loopguard.otlp._request import (
    Decoded,
    RequestError,
    decode_json,
    decode_protobuf,
    decompress,
    error_body,
    invalid,
    success_body,
)

if TYPE_CHECKING:
    from otel_loopguard.receiver import LoopGuardReceiver

__all__ = ["start_http_server"]

TRACES_PATH: Final = "/v1/traces"
_PROTOBUF: Final = "application/x-protobuf"
_JSON: Final = "application/json"
_SOCKET_TIMEOUT_SECONDS: Final = 30.0
"""Idle or slow connections are dropped after this long, so they cannot pin threads."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    """The listen backlog (socketserver's default, 5, drops connections of a burst of exporters
    before they can be answered, even with 429)."""
    receiver: LoopGuardReceiver


class _Server6(_Server):
    address_family = socket.AF_INET6


def start_http_server(receiver: LoopGuardReceiver, host: str, port: int) -> ThreadingHTTPServer:
    """Bind ``host:port`` (0 picks a free port) and serve on a daemon thread.

    Raises:
        OSError: when the address cannot be bound.
    """
    server_class: type[_Server] = _Server6 if ":" in host else _Server
    server = server_class((host, port), _Handler)
    server.receiver = receiver
    threading.Thread(target=server.serve_forever, args=(0.1,), name="loopguard-serve-http",
                     daemon=True).start()
    return server


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "otel-loopguard"
    timeout = _SOCKET_TIMEOUT_SECONDS
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Stay silent: one line per request would flood the log at OTLP rates."""

    # --- routes --------------------------------------------------------------------------------
    def do_GET(self) -> None:
        """Serve ``/metrics``, ``/healthz`` and ``/readyz``."""
        path = urlsplit(self.path).path
        receiver = self.server.receiver
        if path == "/healthz":
            self._send(200, b"ok\n", "text/plain; charset=utf-8")
        elif path == "/readyz":
            ready = receiver.ready
            self._send(200 if ready else 503, b"ready\n" if ready else b"not ready\n",
                       "text/plain; charset=utf-8")
        elif path == "/metrics":
            self._metrics()
        elif path == TRACES_PATH:
            self._send(405, b"use POST\n", "text/plain; charset=utf-8", {"Allow": "POST"})
        else:
            self._send(404, b"not found\n", "text/plain; charset=utf-8")

    def do_POST(self) -> None:
        """Accept an OTLP export request on ``/v1/traces``."""
        self._body_read = False
        if urlsplit(self.path).path != TRACES_PATH:
            self._send(404, b"not found; OTLP traces go to /v1/traces\n",
                       "text/plain; charset=utf-8")
            return
        media = self.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        as_json = media == _JSON
        try:
            decoded = self.server.receiver.handle("http", self.headers.get("Authorization"),
                                                  lambda: self._decode(media))
        except RequestError as error:
            headers = {"Retry-After": str(int(error.retry_after_seconds))} \
                if error.retry_after_seconds else {}
            if error.http_status == 401:
                headers["WWW-Authenticate"] = "Bearer"
            self._send(error.http_status, error_body(error, as_json=as_json),
                       _JSON if as_json else _PROTOBUF, headers)
            return
        self._send(200, success_body(decoded, as_json=as_json), _JSON if as_json else _PROTOBUF)

    def _metrics(self) -> None:
        receiver = self.server.receiver
        try:
            receiver.authorize(self.headers.get("Authorization"))
        except RequestError as error:
            self._send(401, error.message.encode() + b"\n", "text/plain; charset=utf-8",
                       {"WWW-Authenticate": "Bearer"})
            return
        registry = receiver.registry
        body = generate_latest(registry) if registry is not None else b""
        self._send(200, body, CONTENT_TYPE_LATEST)

    # --- helpers -------------------------------------------------------------------------------
    def _decode(self, media: str) -> Decoded:
        if media not in (_PROTOBUF, _JSON):
            raise RequestError(415, "INVALID_ARGUMENT",
                               f"unsupported Content-Type {media or '(none)'!r}; use "
                               f"{_PROTOBUF} or {_JSON}")
        limit = self.server.receiver.options.max_request_bytes
        body = decompress(self._read_body(limit), self.headers.get("Content-Encoding", ""),
                          limit)
        return decode_json(body) if media == _JSON else decode_protobuf(body)

    def _read_body(self, limit: int) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raise RequestError(411, "INVALID_ARGUMENT",
                               "chunked request bodies are not supported; send Content-Length")
        raw = self.headers.get("Content-Length")
        if raw is None:
            raise RequestError(411, "INVALID_ARGUMENT", "Content-Length is required")
        try:
            length = int(raw)
        except ValueError:
            raise invalid(f"bad Content-Length {raw!r}") from None
        if length < 0:
            raise invalid(f"bad Content-Length {raw!r}")
        if length > limit:
            raise RequestError(413, "RESOURCE_EXHAUSTED",
                               f"body of {length} bytes exceeds the {limit}-byte limit")
        body = self.rfile.read(length)
        self._body_read = True
        if len(body) < length:
            raise invalid(f"body ended after {len(body)} of {length} bytes")
        return body

    def _send(self, status: int, body: bytes, content_type: str,
              headers: dict[str, str] | None = None) -> None:
        if self.command == "POST" and not getattr(self, "_body_read", False):
            self.close_connection = True  # the unread body would be parsed as the next request
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
