"""The OTLP/HTTP front end of ``serve``: ``/v1/traces``, ``/metrics``, ``/healthz``, ``/readyz``.

A stdlib ``ThreadingHTTPServer`` (HTTP/1.1 keep-alive, one thread per connection) with three
bounds a slow or hostile client cannot get around:

* **time**: a request's line and headers, then its body, must each arrive within
  ``request_timeout_seconds`` (a deadline for the whole, not per read, so a byte now and then
  does not keep it open); an idle connection is closed after the same time;
* **connections**: at most ``max_connections`` are served at once; past it the connection
  that has waited longest for its request (idle, or still sending it) is closed to make room,
  and when every connection is busy with a request the new one gets 503;
* **memory**: the token is checked, and the body's share of ``max_bytes_in_flight`` taken,
  before the body is read; a larger ``Content-Length`` than ``max_request_bytes`` is refused
  unread, and the connection is closed whenever a body is left unread. A chunked body (as
  OpenTelemetry JS and Java exporters send) has no length up front: it takes
  ``max_request_bytes`` of the bytes in flight while it is read, and is refused as soon as its
  chunks pass that cap.
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from prometheus_client.exposition import choose_encoder

from otel_loopguard.otlp._request import (
    Decoded,
    RequestError,
    decode_json,
    decode_json_logs_request,
    decode_protobuf,
    decode_protobuf_logs,
    decompress,
    error_body,
    success_body,
)
from otel_loopguard.otlp._request_error import invalid

if TYPE_CHECKING:
    from otel_loopguard.receiver import LoopGuardReceiver

__all__ = ["start_http_server"]

logger = logging.getLogger(__name__)

TRACES_PATH: Final = "/v1/traces"
LOGS_PATH: Final = "/v1/logs"
_PROTOBUF: Final = "application/x-protobuf"
_JSON: Final = "application/json"
_MAX_LENGTH_DIGITS: Final = 18
_MAX_CHUNK_LINE: Final = 4096
"""Longest chunk-size line (with its extensions) or trailer line of a chunked body."""
_MAX_TRAILER_LINES: Final = 64
_FULL: Final = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
                b"Content-Length: 22\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
                b"too many connections\r\n")
_IDLE, _READING, _BUSY = "idle", "reading", "busy"
_GET_PATHS: Final = frozenset({"/healthz", "/readyz", "/metrics"})


class _Slot:
    """One served connection: what it is doing and since when (guarded by the server lock)."""

    __slots__ = ("since", "sock", "state")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.state = _IDLE
        self.since = time.monotonic()


_LINGER_SECONDS: Final = 1.0
_LINGER_BYTES: Final = 1 << 22
"""How long, and how much, an unread request body is drained before its connection closes."""


def _drain(sock: socket.socket) -> None:
    """Stop sending on ``sock`` and read what the client still sends, for a bounded time."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(_LINGER_SECONDS)
        deadline, drained = time.monotonic() + _LINGER_SECONDS, 0
        while drained < _LINGER_BYTES and time.monotonic() < deadline:
            data = sock.recv(65536)
            if not data:
                break
            drained += len(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    """The listen backlog (socketserver's default, 5, drops connections of a burst of exporters
    before they can be answered, even with 429)."""
    receiver: LoopGuardReceiver

    def __init__(self, address: tuple[str, int], receiver: LoopGuardReceiver) -> None:
        super().__init__(address, _Handler)
        self.receiver = receiver
        self.max_connections = receiver.options.max_connections
        self.timeout_seconds = receiver.options.request_timeout_seconds
        self._lock = threading.Lock()
        """Held only to read or change ``_slots`` and their states; never while blocking."""
        self._slots: dict[int, _Slot] = {}

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the connection on a thread of its own, or refuse it when all are busy."""
        with self._lock:
            served = sum(slot.state != "evicted" for slot in self._slots.values())
            admitted = served < self.max_connections or self._evict_oldest()
            if admitted:
                self._slots[id(request)] = _Slot(request)
        if admitted:
            super().process_request(request, client_address)
            return
        self.receiver.refused("http", RequestError(503, "UNAVAILABLE", "too many connections"))
        with contextlib.suppress(OSError):
            request.settimeout(1.0)
            request.sendall(_FULL)
        self.shutdown_request(request)

    def _evict_oldest(self) -> bool:
        """Close the connection that has waited longest for its request; hold ``_lock``."""
        waiting = [slot for slot in self._slots.values() if slot.state in (_IDLE, _READING)]
        if not waiting:
            return False
        oldest = min(waiting, key=lambda slot: slot.since)
        oldest.state = "evicted"
        with contextlib.suppress(OSError):
            oldest.sock.shutdown(socket.SHUT_RDWR)  # its thread's read returns at once
        return True

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._slots.pop(id(request), None)

    def set_state(self, request: Any, state: str) -> None:
        """Record what a connection does now (``idle``, ``reading`` or ``busy``)."""
        with self._lock:
            slot = self._slots.get(id(request))
            if slot is not None and slot.state != "evicted":
                slot.state, slot.since = state, time.monotonic()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet about clients that went away (or were closed) mid-request."""
        logger.debug("otel-loopguard: HTTP connection from %s failed", client_address,
                     exc_info=True)


class _Server6(_Server):
    address_family = socket.AF_INET6


def start_http_server(receiver: LoopGuardReceiver, host: str, port: int) -> ThreadingHTTPServer:
    """Bind ``host:port`` (0 picks a free port) and serve on a daemon thread.

    Raises:
        OSError: when the address cannot be bound.
    """
    server_class: type[_Server] = _Server6 if ":" in host else _Server
    server = server_class((host, port), receiver)
    threading.Thread(target=server.serve_forever, args=(0.1,), name="loopguard-serve-http",
                     daemon=True).start()
    return server


class _DeadlineReader(io.RawIOBase):
    """The connection's socket, read against a deadline for a whole request (not per read)."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self._sock = sock
        self.deadline = 0.0

    def readable(self) -> bool:
        """Return True: this stream is readable."""
        return True

    def readinto(self, buffer: Any) -> int:
        """Receive into ``buffer``, or raise ``TimeoutError`` once the deadline has passed."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the request did not arrive in time")
        self._sock.settimeout(remaining)
        return self._sock.recv_into(buffer)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "otel-loopguard"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Stay silent: one line per request would flood the log at OTLP rates."""

    def setup(self) -> None:
        """Read the connection through a deadline."""
        super().setup()
        self._reader = _DeadlineReader(self.connection)
        self.rfile = self._buffered = io.BufferedReader(self._reader)

    def handle_one_request(self) -> None:
        """Wait (as long as an idle connection is kept) for a request, then read it in time."""
        self.server.set_state(self.request, _IDLE)
        self._reader.deadline = time.monotonic() + self.server.timeout_seconds
        try:
            if not self._buffered.peek(1):
                self.close_connection = True
                return
        except (TimeoutError, OSError, ValueError):
            self.close_connection = True
            return
        self.server.set_state(self.request, _READING)
        self._reader.deadline = time.monotonic() + self.server.timeout_seconds
        super().handle_one_request()

    def finish(self) -> None:
        """Send what is left of the answer; then, if a request's body was left unread, drain it.

        A connection closed with unread bytes in it is reset, and a reset can reach the client
        before the answer it has not read yet: a 413 for a body over the limit would read as a
        dropped connection, which an exporter retries, instead of a refusal it does not.
        """
        super().finish()
        if self.command == "POST" and not getattr(self, "_body_read", True):
            _drain(self.connection)

    # --- routes --------------------------------------------------------------------------------
    def do_GET(self) -> None:
        """Serve ``/metrics``, ``/healthz`` and ``/readyz`` (``HEAD`` too)."""
        path = urlsplit(self.path).path
        receiver = self.server.receiver
        self.server.set_state(self.request, _BUSY)
        if path == "/healthz":
            self._send(200, b"ok\n", "text/plain; charset=utf-8")
        elif path == "/readyz":
            ready = receiver.ready
            self._send(200 if ready else 503, b"ready\n" if ready else b"not ready\n",
                       "text/plain; charset=utf-8")
        elif path == "/metrics":
            self._metrics()
        elif path in (TRACES_PATH, LOGS_PATH):
            self._send(405, b"use POST\n", "text/plain; charset=utf-8",
                       {"Allow": "POST, OPTIONS"})
        else:
            self._send(404, b"not found\n", "text/plain; charset=utf-8")

    def do_HEAD(self) -> None:
        """Answer as ``GET`` would, without the body."""
        self.do_GET()

    def do_OPTIONS(self) -> None:
        """Say which methods a path takes (204 with ``Allow``); no CORS is offered."""
        self.server.set_state(self.request, _BUSY)
        path = urlsplit(self.path).path
        if path in (TRACES_PATH, LOGS_PATH):
            allow = "POST, OPTIONS"
        elif path in _GET_PATHS or path == "*":
            allow = "GET, HEAD, OPTIONS"
        else:
            self._send(404, b"not found\n", "text/plain; charset=utf-8")
            return
        self._send(204, b"", "text/plain; charset=utf-8", {"Allow": allow})

    def _not_allowed(self) -> None:
        """Answer a method no path takes (405, never 501) and close the connection."""
        self.close_connection = True  # a body, if any, is left unread
        path = urlsplit(self.path).path
        allow = "POST, OPTIONS" if path in (TRACES_PATH, LOGS_PATH) else "GET, HEAD, OPTIONS"
        self._send(405, f"method {self.command} not allowed\n".encode(),
                   "text/plain; charset=utf-8", {"Allow": allow})

    do_PUT = do_DELETE = do_PATCH = do_TRACE = do_CONNECT = _not_allowed

    def do_POST(self) -> None:
        """Accept an OTLP export request on ``/v1/traces`` or ``/v1/logs``."""
        self._body_read = False
        path = urlsplit(self.path).path
        if path not in (TRACES_PATH, LOGS_PATH):
            self._send(404, b"not found; OTLP traces go to /v1/traces, logs to /v1/logs\n",
                       "text/plain; charset=utf-8")
            return
        logs = path == LOGS_PATH
        media = self.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        as_json = media == _JSON
        try:
            decoded = self.server.receiver.handle(
                "http", self._authorization(),
                lambda reserve: self._decode(media, reserve, logs=logs))
        except RequestError as error:
            headers = {"Retry-After": str(int(error.retry_after_seconds))} \
                if error.retry_after_seconds else {}
            if error.http_status == 401:
                headers["WWW-Authenticate"] = "Bearer"
            self._send(error.http_status, error_body(error, as_json=as_json),
                       _JSON if as_json else _PROTOBUF, headers)
            return
        self._send(200, success_body(decoded, as_json=as_json, logs=logs),
                   _JSON if as_json else _PROTOBUF)

    def _metrics(self) -> None:
        receiver = self.server.receiver
        try:
            receiver.authorize(self._authorization())
        except RequestError as error:
            self._send(401, error.message.encode() + b"\n", "text/plain; charset=utf-8",
                       {"WWW-Authenticate": "Bearer"})
            return
        registry = receiver.registry
        # OpenMetrics when the scraper asks for it (Prometheus does): only that format carries
        # the trace_id exemplars of the loop and waste counters
        encode, content_type = choose_encoder(self.headers.get("Accept", ""))
        body = encode(registry) if registry is not None else b""
        self._send(200, body, content_type)

    # --- helpers -------------------------------------------------------------------------------
    def _authorization(self) -> bytes | None:
        """Return the ``Authorization`` header as sent (http.server decodes it as Latin-1)."""
        value = self.headers.get("Authorization")
        return None if value is None else value.encode("latin-1", "replace")

    def _decode(self, media: str, reserve: Callable[[int], None], *, logs: bool = False
                ) -> Decoded:
        if media not in (_PROTOBUF, _JSON):
            raise RequestError(415, "INVALID_ARGUMENT",
                               f"unsupported Content-Type {media or '(none)'!r}; use "
                               f"{_PROTOBUF} or {_JSON}")
        receiver = self.server.receiver
        limit = receiver.options.max_request_bytes
        length = self._content_length(limit)
        if length is None:  # chunked: its length is known once read
            reserve(limit)
            body = self._read_chunked(limit)
            reserve(len(body) - limit)  # give back what it did not take
        else:
            reserve(length)
            body = self._read_body(length)
        self.server.set_state(self.request, _BUSY)
        encoding = self.headers.get("Content-Encoding", "")
        if encoding.strip().lower() not in ("", "identity"):
            reserve(limit)  # inflating may take up to the limit
            body = decompress(body, encoding, limit)
            reserve(len(body) - limit)  # give back what it did not take
        forwarding = receiver.forwarding
        if logs:
            return decode_json_logs_request(body, receiver.agents, forward=forwarding) \
                if media == _JSON else decode_protobuf_logs(body, receiver.agents,
                                                            forward=forwarding)
        return decode_json(body, payloads=forwarding) if media == _JSON \
            else decode_protobuf(body, payloads=forwarding)

    def _content_length(self, limit: int) -> int | None:
        """Return the one ``Content-Length`` given, as plain decimal digits; None: chunked.

        Raises:
            RequestError: 411 with neither, 400 when it is given twice, is not plain digits or
                comes with a ``Transfer-Encoding`` (RFC 9112 lets a server refuse both, the
                framing of request smuggling), 501 for a transfer coding other than
                ``chunked`` alone, 413 when it is over ``limit``.
        """
        codings = self.headers.get_all("Transfer-Encoding")
        if codings is not None:
            named = [c.strip().lower() for value in codings for c in value.split(",")]
            if named != ["chunked"]:
                raise RequestError(501, "UNIMPLEMENTED",
                                   f"Transfer-Encoding {', '.join(codings)!r} is not supported; "
                                   "send the body chunked or with a Content-Length")
            if self.headers.get("Content-Length") is not None:
                raise invalid("both Content-Length and Transfer-Encoding given")
            return None
        values = self.headers.get_all("Content-Length") or []
        if not values:
            raise RequestError(411, "INVALID_ARGUMENT", "Content-Length is required")
        if len(values) > 1:
            raise invalid(f"Content-Length given {len(values)} times")
        raw = values[0].strip(" \t")
        if not (raw.isascii() and raw.isdigit()) or len(raw) > _MAX_LENGTH_DIGITS:
            raise invalid(f"bad Content-Length {values[0]!r}")
        length = int(raw)
        if length > limit:
            raise RequestError(413, "RESOURCE_EXHAUSTED",
                               f"body of {length} bytes exceeds the {limit}-byte limit")
        return length

    def _read_body(self, length: int) -> bytes:
        self._reader.deadline = time.monotonic() + self.server.timeout_seconds
        try:
            body = self.rfile.read(length)
        except TimeoutError:
            raise RequestError(408, "DEADLINE_EXCEEDED", "the body did not arrive within "
                               f"{self.server.timeout_seconds:g} s") from None
        except OSError:
            body = b""
        self._body_read = True
        if len(body) < length:
            self.close_connection = True
            raise invalid(f"body ended after {len(body)} of {length} bytes")
        return body

    def _read_chunked(self, limit: int) -> bytes:
        """Read a chunked body (RFC 9112 7.1) of at most ``limit`` bytes; trailers are dropped.

        Raises:
            RequestError: 413 as soon as the chunks pass ``limit`` (the rest is left unread and
                the connection closed), 408 past the deadline, 400 for broken framing.
        """
        self._reader.deadline = time.monotonic() + self.server.timeout_seconds
        chunks: list[bytes] = []
        size = 0
        try:
            while True:
                line = self._chunk_line("chunk size")
                field = line.split(b";", 1)[0].strip(b" \t\r\n")
                if not field or len(field) > 16 or field.strip(b"0123456789abcdefABCDEF"):
                    raise invalid(f"bad chunk size {field[:32]!r}")
                length = int(field, 16)
                if length == 0:
                    break
                size += length
                if size > limit:
                    raise RequestError(413, "RESOURCE_EXHAUSTED",
                                       f"chunked body exceeds the {limit}-byte limit")
                data = self.rfile.read(length)
                if len(data) < length:
                    raise invalid("chunked body ended inside a chunk, after "
                                  f"{size - length + len(data)} bytes")
                chunks.append(data)
                if self._chunk_line("chunk end").strip(b"\r\n"):
                    raise invalid("chunk longer than its size")
            for _ in range(_MAX_TRAILER_LINES):
                if not self._chunk_line("trailer").strip(b"\r\n"):
                    break
            else:
                raise invalid(f"more than {_MAX_TRAILER_LINES} trailer lines")
        except TimeoutError:
            raise RequestError(408, "DEADLINE_EXCEEDED", "the body did not arrive within "
                               f"{self.server.timeout_seconds:g} s") from None
        except OSError:
            raise invalid(f"chunked body ended after {size} bytes") from None
        self._body_read = True
        return b"".join(chunks)

    def _chunk_line(self, what: str) -> bytes:
        """Return the next line of a chunked body's framing, its line end included.

        Raises:
            RequestError: 400 when the body ends first or the line is too long.
        """
        line = self.rfile.readline(_MAX_CHUNK_LINE + 1)
        if not line.endswith(b"\n"):
            raise invalid(f"{what} line over {_MAX_CHUNK_LINE} bytes" if len(line) > _MAX_CHUNK_LINE
                          else f"chunked body ended before its {what} line")
        return line

    def _send(self, status: int, body: bytes, content_type: str,
              headers: dict[str, str] | None = None) -> None:
        if self.command == "POST" and not getattr(self, "_body_read", False):
            self.close_connection = True  # the unread body would be parsed as the next request
        self.connection.settimeout(self.server.timeout_seconds)  # a client must read it in time
        self.send_response(status)
        if status != 204:  # RFC 9110: a 204 carries no content, nor its length
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD" and status != 204:
            self.wfile.write(body)
