"""``ReceiverOptions``: how ``serve`` listens, what it takes in, and where it forwards."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal
from urllib.parse import urlsplit

from otel_loopguard.config._fields import MAX_SECONDS

__all__ = ["ReceiverOptions"]

_DEFAULT_MAX_REQUEST_BYTES: Final = 8 << 20
_DEFAULT_MAX_BYTES_IN_FLIGHT: Final = 64 << 20
_DEFAULT_MAX_QUEUE: Final = 64
_DEFAULT_MAX_PENDING_BYTES: Final = 128 << 20
_DEFAULT_FORWARD_BUFFER_BYTES: Final = 64 << 20
_DEFAULT_FORWARD_MAX_BATCH_BYTES: Final = 4 << 20

@dataclass(frozen=True, slots=True, kw_only=True)
class ReceiverOptions:
    """How ``serve`` listens and buffers. Ports: None turns a protocol off, 0 picks a free one."""

    host: str = "127.0.0.1"
    """Address both servers bind; ``0.0.0.0`` (or ``::``) only behind a trusted network."""
    grpc_port: int | None = 4317
    """OTLP/gRPC port."""
    http_port: int | None = 4318
    """OTLP/HTTP port (also ``/metrics``, ``/healthz``, ``/readyz``)."""
    max_request_bytes: int = _DEFAULT_MAX_REQUEST_BYTES
    """Largest request body, compressed and decompressed (8 MiB)."""
    max_bytes_in_flight: int = _DEFAULT_MAX_BYTES_IN_FLIGHT
    """Request bytes (compressed and decompressed) being read, decoded or waiting in the
    queue, over both protocols, before requests get 429 / RESOURCE_EXHAUSTED (64 MiB). A gRPC
    call takes ``max_request_bytes`` of it before its message is read (the size is not known
    before), and gives back the difference once it is."""
    max_connections: int = 128
    """HTTP connections served at once (one thread each); past it the connection that has
    waited longest for its request is closed to make room."""
    request_timeout_seconds: float = 30.0
    """Time a request may take to arrive once begun: the HTTP request line and headers, then
    the body, each; the gRPC request message. Also how long an idle HTTP connection is kept."""
    max_queue: int = _DEFAULT_MAX_QUEUE
    """Decoded batches waiting for the worker before requests get 429 / RESOURCE_EXHAUSTED."""
    token: str | None = None
    """Bearer token required on export requests and ``/metrics``; None turns auth off."""
    reorder_window_seconds: float = 5.0
    """How long after its root span arrived a trace waits for late spans."""
    max_buffered_spans: int = 1_000_000
    """Buffered spans before the least recently touched trace is checked early."""
    max_pending_bytes: int = _DEFAULT_MAX_PENDING_BYTES
    """Bytes of spans buffered in open traces (as the receiver counts them: their text, and
    their forwarded copy) before the least recently touched trace is checked and forwarded
    early (128 MiB)."""
    retry_after_seconds: int = 1
    """Retry delay sent with backpressure responses."""
    grpc_workers: int = 8
    """Threads decoding gRPC requests; ``4 * grpc_workers`` calls may be open at once (past it
    the call that has waited longest for its message is refused)."""
    forward_endpoint: str | None = None
    """Downstream OTLP endpoint that receives the spans with loopguard evidence; None: off."""
    forward_protocol: Literal["grpc", "http"] = "grpc"
    """Protocol of ``forward_endpoint``."""
    forward_buffer_bytes: int = _DEFAULT_FORWARD_BUFFER_BYTES
    """Bytes of checked spans waiting for the downstream; while it is full (the downstream
    is slow or away) new requests get 429 / RESOURCE_EXHAUSTED (64 MiB)."""
    state_file: str | None = None
    """File where acknowledged and finished span counts are kept, so that the next start
    counts what a hard kill lost (``loopguard_receiver_spans_total{outcome="lost"}``)."""
    forward_max_batch_bytes: int = _DEFAULT_FORWARD_MAX_BATCH_BYTES
    """Largest export request sent downstream; keep it under the downstream's message limit
    (4 MiB, the Collector's gRPC default). A larger span is sent alone."""

    def __post_init__(self) -> None:
        """Validate sizes and ports."""
        for name in ("max_request_bytes", "max_queue", "max_buffered_spans", "grpc_workers",
                     "retry_after_seconds", "max_connections", "max_pending_bytes",
                     "forward_buffer_bytes", "forward_max_batch_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_bytes_in_flight < self.max_request_bytes:
            raise ValueError(f"max_bytes_in_flight ({self.max_bytes_in_flight}) must be >= "
                             f"max_request_bytes ({self.max_request_bytes})")
        if not 0 < self.request_timeout_seconds <= MAX_SECONDS:  # a socket timeout overflows
            raise ValueError(f"request_timeout_seconds must be > 0 and <= {MAX_SECONDS} (one "
                             f"year), got {self.request_timeout_seconds}")
        for name in ("grpc_port", "http_port"):
            port = getattr(self, name)
            if port is not None and not 0 <= port <= 65535:
                raise ValueError(f"{name} must be 0-65535 or None, got {port}")
        if not 0 <= self.reorder_window_seconds <= MAX_SECONDS:
            raise ValueError(f"reorder_window_seconds must be >= 0 and <= {MAX_SECONDS} (one "
                             f"year), got {self.reorder_window_seconds}")
        if self.token is not None and not self.token:
            raise ValueError("token must not be empty")
        if self.forward_endpoint is not None:
            _check_endpoint(self.forward_endpoint, self.forward_protocol)


def _check_endpoint(endpoint: str, protocol: str) -> None:
    """Refuse an endpoint the exporter could never reach (every export would fail, forever).

    HTTP needs an ``http://`` or ``https://`` URL; gRPC takes ``host:port`` too (TLS).
    """
    try:
        parts = urlsplit(endpoint)
    except ValueError as exc:
        raise ValueError(f"forward_endpoint {endpoint!r}: {exc}") from None
    if protocol == "http" or "://" in endpoint:
        if parts.scheme not in ("http", "https") or not parts.hostname:
            need = "an http:// or https:// URL" if protocol == "http" \
                else "host:port, or an http:// or https:// URL"
            raise ValueError(f"forward_endpoint must be {need} for protocol {protocol}, "
                             f"got {endpoint!r}")
    elif not endpoint.strip():
        raise ValueError("forward_endpoint must not be empty")
    elif not _host_and_port(endpoint):  # 'http:/tempo:4317', 'tempo', 'tempo:4317/v1/traces'
        raise ValueError("forward_endpoint must be host:port, or an http:// or https:// URL, "
                         f"got {endpoint!r}")


def _host_and_port(endpoint: str) -> bool:
    """Return True when ``endpoint`` is ``host:port`` and nothing else (gRPC's plain form)."""
    try:
        parts = urlsplit(f"//{endpoint}")
        port = parts.port
    except ValueError:  # a port that is not a number, a bad IPv6 address
        return False
    return bool(parts.hostname) and port is not None and not (
        parts.path or parts.query or parts.fragment or parts.username)
