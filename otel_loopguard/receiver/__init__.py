"""The OTLP receiver behind ``otel-loopguard serve``: agents in any language send spans here.

OTLP/gRPC and OTLP/HTTP (``/v1/traces``, protobuf or JSON, gzip) feed a bounded queue of decoded
span batches; one worker thread groups them into runs (see ``reorder_window_seconds``) and runs
the same engine as ``check``. The HTTP port also serves ``/metrics``, ``/healthz`` and
``/readyz``. Safe by default: bound to 127.0.0.1; the token (when set) checked before a body is
read; request sizes, the bytes of requests in flight, the connections and the time a request
may take to arrive all capped; a full queue answered with backpressure (HTTP 429 / gRPC
``RESOURCE_EXHAUSTED`` with a retry delay); and a graceful shutdown that finishes every
accepted batch.

Example::

    with LoopGuardReceiver(options=ReceiverOptions(http_port=0, grpc_port=0)) as receiver:
        print(receiver.http_url, receiver.grpc_port)
"""

from __future__ import annotations

import contextlib
import functools
import hmac
import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal

from prometheus_client import REGISTRY, CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from otel_loopguard.coding_agents import AgentRecords
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.exceptions import ConfigError, InternalErrorGuard
from otel_loopguard.metrics import LoopGuardMetrics
from otel_loopguard.metrics._names import (
    FORWARD_FAILURES,
    FORWARD_REASONS,
    FORWARDED,
    FORWARDED_LOG_RECORDS,
    LOG_FORWARD_FAILURES,
    LOG_FORWARD_REASONS,
    RECEIVER_QUEUE,
    RECEIVER_REQUESTS,
    RECEIVER_SPANS,
)
from otel_loopguard.metrics._otel import backends
from otel_loopguard.otlp._request import Decoded, RequestError
from otel_loopguard.receiver._stream import StreamingChecker
from otel_loopguard.replay.checker import RunReport

__all__ = ["LoopGuardReceiver", "ReceiverOptions", "Reservation"]

logger = logging.getLogger(__name__)

_DEFAULT_MAX_REQUEST_BYTES: Final = 8 << 20
_DEFAULT_MAX_BYTES_IN_FLIGHT: Final = 64 << 20
_DEFAULT_MAX_QUEUE: Final = 64
_DEFAULT_MAX_PENDING_BYTES: Final = 128 << 20
_DEFAULT_FORWARD_BUFFER_BYTES: Final = 64 << 20
_DEFAULT_FORWARD_MAX_BATCH_BYTES: Final = 4 << 20
_OUTCOMES: Final = {400: "invalid", 401: "unauthenticated", 408: "timeout", 411: "invalid",
                    413: "too_large", 415: "unsupported", 429: "throttled", 500: "internal",
                    503: "unavailable"}
REQUESTS: Final = RECEIVER_REQUESTS
"""Counter {protocol, outcome}: export requests by result (ok, partial, throttled, ...)."""
SPANS: Final = RECEIVER_SPANS
"""Counter {outcome}: spans accepted, rejected (malformed), late (their trace had closed) or
duplicate (a span id seen twice in a trace, e.g. an exporter retry), or lost (acknowledged by a
previous run that was killed; counted at start with ``state_file``)."""
QUEUE: Final = RECEIVER_QUEUE
"""Gauge: decoded batches waiting for the worker."""


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
        if not 0 < self.request_timeout_seconds < math.inf:
            raise ValueError("request_timeout_seconds must be > 0, "
                             f"got {self.request_timeout_seconds}")
        for name in ("grpc_port", "http_port"):
            port = getattr(self, name)
            if port is not None and not 0 <= port <= 65535:
                raise ValueError(f"{name} must be 0-65535 or None, got {port}")
        if self.reorder_window_seconds < 0:
            raise ValueError("reorder_window_seconds must be >= 0, "
                             f"got {self.reorder_window_seconds}")
        if self.token is not None and not self.token:
            raise ValueError("token must not be empty")


class _Flush:
    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


_STOP: Final = object()


class _QueueCollector(Collector):
    def __init__(self, size: Callable[[], int]) -> None:
        self._size = size

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(QUEUE, "Decoded batches waiting for the worker.",
                                value=self._size())


class LoopGuardReceiver:
    """Receives OTLP spans, groups them into runs and detects loops; a context manager.

    Thread-safe. Requests are decoded on the server threads; one worker thread owns the run
    state, so detection never runs concurrently. ``on_report`` is called on the worker thread
    with every finished run (flagged or not); errors in it are contained.

    Args:
        config: detector and run settings; default ``LoopGuardConfig.load()``.
        options: listening, limits and forwarding; default ``ReceiverOptions()``.
        registry: Prometheus registry for every metric; default the global ``REGISTRY``. Pass
            a fresh ``CollectorRegistry()`` in tests, or None for no metrics.
        on_report: called with each finished ``RunReport``.
        clock: monotonic nanoseconds for the reorder window and TTLs; default
            ``time.monotonic_ns``.
        raise_internal_errors: let internal errors propagate (tests). Default False.
    """

    def __init__(self, config: LoopGuardConfig | None = None, *,
                 options: ReceiverOptions | None = None,
                 registry: CollectorRegistry | None = REGISTRY,
                 on_report: Callable[[RunReport], object] | None = None,
                 clock: Callable[[], int] = time.monotonic_ns,
                 raise_internal_errors: bool = False) -> None:
        self.config = config or LoopGuardConfig.load()
        self.options = options or ReceiverOptions()
        self.registry = registry
        self.on_report = on_report
        self.metrics = None
        if registry is not None:  # LOOPGUARD_METRICS_EXPORTER: Prometheus, OTLP or both
            own_registry, meter_provider = backends(self.config.metrics_exporter, registry)
            self.metrics = LoopGuardMetrics(
                own_registry, max_prompt_templates=self.config.max_prompt_templates,
                max_tools=self.config.max_tools, meter_provider=meter_provider,
                service_label=True, max_services=self.config.max_services)
        self._requests = Counter(REQUESTS[:-6], "OTLP export requests by protocol and outcome.",
                                 ["protocol", "outcome"], registry=registry)
        self._spans = Counter(SPANS[:-6], "Received spans by outcome (accepted, rejected, "
                              "late, duplicate).", ["outcome"], registry=registry)
        self._forwarded = Counter(FORWARDED[:-6], "Spans forwarded to --forward-endpoint.",
                                  registry=registry)
        self._forward_failures = Counter(
            FORWARD_FAILURES[:-6], "Spans not forwarded, by reason (export_failed, queue_full, "
            "unencodable).", ["reason"], registry=registry)
        self._forwarded_logs = Counter(
            FORWARDED_LOG_RECORDS[:-6], "Log records forwarded to --forward-endpoint.",
            registry=registry)
        self._log_forward_failures = Counter(
            LOG_FORWARD_FAILURES[:-6], "Log records not forwarded, by reason (export_failed, "
            "queue_full).", ["reason"], registry=registry)
        if self.options.forward_endpoint:
            for reason in FORWARD_REASONS:  # a series per reason from the start, for rate()
                self._forward_failures.labels(reason)
            for reason in LOG_FORWARD_REASONS:
                self._log_forward_failures.labels(reason)
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=self.options.max_queue)
        if registry is not None:
            registry.register(_QueueCollector(self._queue.qsize))
        self.forwarder = self._make_forwarder()
        self.log_forwarder = self._make_log_forwarder()
        self.agents = AgentRecords(clock=clock, pause_seconds=self.config.run_ttl_seconds / 2)
        """The coding agents' sessions (``otel_loopguard.coding_agents``): their log events
        and tool spans become records of the session's run."""
        self.stream = StreamingChecker(
            self.config, metrics=self.metrics,
            reorder_window_seconds=self.options.reorder_window_seconds,
            max_spans=self.options.max_buffered_spans,
            max_bytes=self.options.max_pending_bytes, clock=clock,
            on_trace=self._forward if self.forwarder is not None else None,
            raise_internal_errors=raise_internal_errors)
        if self.metrics is not None:
            self.metrics.track_open_runs(lambda: self.stream.open_runs)
        self.guard = InternalErrorGuard(
            self.metrics.record_internal_error if self.metrics else None,
            raise_errors=raise_internal_errors)
        self._clock = clock
        self._last_received_ns = 0
        self._late_seen = self._duplicates_seen = 0
        self._worker: threading.Thread | None = None
        self._servers: list[Any] = []
        self._draining = self._stopped = False
        self._inflight = 0
        self._inflight_cond = threading.Condition()
        self._taken_spans = 0
        """Spans the worker has taken off the queue (worker thread only)."""
        self._journal: Any = None
        self._bytes_in_flight = 0
        self._bytes_lock = threading.Lock()
        """Held only to read and change ``_bytes_in_flight``."""
        self.http_port: int | None = None
        self.grpc_port: int | None = None

    def _make_forwarder(self) -> Any:
        if self.options.forward_endpoint is None:
            return None
        from otel_loopguard.receiver._forward import (
            Forwarder,
            make_exporter,
        )

        return Forwarder(make_exporter(self.options.forward_endpoint,
                                       self.options.forward_protocol),
                         max_buffer_bytes=self.options.forward_buffer_bytes,
                         max_batch_bytes=self.options.forward_max_batch_bytes,
                         on_outcome=self._count_forwarded)

    def _make_log_forwarder(self) -> Any:
        if self.options.forward_endpoint is None:
            return None
        from otel_loopguard.receiver._forward_logs import LogForwarder

        return LogForwarder(self.options.forward_endpoint, self.options.forward_protocol,
                            on_outcome=self._count_forwarded_logs)

    def _forward(self, closed: Any) -> None:
        """Forward a checked trace's spans, and the findings on coding agents' calls as logs."""
        self.forwarder.forward(closed)
        self.log_forwarder.forward_findings(closed)

    def _count_forwarded(self, outcome: str, spans: int) -> None:
        if outcome == "exported":
            self._forwarded.inc(spans)
        else:
            self._forward_failures.labels(outcome).inc(spans)

    def _count_forwarded_logs(self, outcome: str, records: int) -> None:
        if outcome == "exported":
            self._forwarded_logs.inc(records)
        else:
            self._log_forward_failures.labels(outcome).inc(records)

    @property
    def forwarding(self) -> bool:
        """Return True when received spans are forwarded (the decoders then build SDK spans)."""
        return self.forwarder is not None

    # --- lifecycle -----------------------------------------------------------------------------
    def start(self) -> LoopGuardReceiver:
        """Start the worker and the servers; return self.

        Raises:
            OSError: when a port cannot be bound.
        """
        self._open_journal()
        self._worker = threading.Thread(target=self._work, name="loopguard-serve-worker",
                                        daemon=True)
        self._worker.start()
        try:
            self._start_servers()
        except BaseException:
            self.shutdown()
            raise
        return self

    def _open_journal(self) -> None:
        if self.options.state_file is None:
            return
        from otel_loopguard.receiver._journal import Journal

        try:
            self._journal = Journal(self.options.state_file)
        except OSError as exc:
            raise ConfigError(f"state_file: {exc.strerror or exc}: "
                              f"{self.options.state_file}") from None
        lost = self._journal.lost_before
        if lost:
            self._spans.labels("lost").inc(lost)
            logger.warning("otel-loopguard serve: the previous run did not shut down (killed?) "
                           "and lost up to %d acknowledged span(s) it had not checked or "
                           "forwarded (counted in loopguard_receiver_spans_total"
                           "{outcome=\"lost\"})", lost)

    def _start_servers(self) -> None:
        opts = self.options
        if opts.http_port is not None:
            from otel_loopguard.receiver._http import start_http_server

            server = start_http_server(self, opts.host, opts.http_port)
            self._servers.append(server)
            self.http_port = server.server_address[1]
        if opts.grpc_port is not None:
            from otel_loopguard.receiver._grpc import start_grpc_server

            grpc_server, self.grpc_port = start_grpc_server(self, opts.host, opts.grpc_port)
            self._servers.append(grpc_server)

    def __enter__(self) -> LoopGuardReceiver:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    @property
    def http_url(self) -> str:
        """Return the base URL of the HTTP server (``http://127.0.0.1:4318``)."""
        host = self.options.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.http_port}"

    def flush(self, timeout: float = 30.0) -> bool:
        """Check every queued batch and every open trace now; return False on timeout.

        Runs on the worker thread (this call waits for it). Forwarded spans are flushed too.
        """
        marker = _Flush()
        try:
            self._queue.put(marker, timeout=timeout)
        except queue.Full:
            return False
        done = marker.done.wait(timeout)
        if done and self.forwarder is not None:
            self.forwarder.force_flush(int(timeout * 1000))
            self.log_forwarder.force_flush(timeout)
        return done

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop taking requests, finish the accepted ones, check every open trace, stop.

        New requests get 503 / UNAVAILABLE while in-flight ones complete; then the servers
        stop, the worker drains the queue and flushes, and forwarding is flushed.
        """
        if self._stopped:
            return
        self._stopped = self._draining = True
        with self._inflight_cond:
            self._inflight_cond.wait_for(lambda: self._inflight == 0, timeout)
        for server in reversed(self._servers):
            _stop_server(server)
        self._servers.clear()
        worker = self._worker
        if worker is not None and worker.is_alive():
            self._queue.put(_STOP, timeout=timeout)
            worker.join(timeout)
        self._worker = None
        if self.forwarder is not None:
            self.forwarder.shutdown(timeout)
            self.log_forwarder.shutdown(timeout)
        if self._journal is not None:
            self._journal.close()

    @property
    def ready(self) -> bool:
        """Return True when a request of ``max_request_bytes`` would be taken now.

        That is: the worker runs, the queue and the forwarding buffer have room, the bytes in
        flight leave room for it, and no shutdown started.
        """
        worker = self._worker
        options = self.options
        return worker is not None and worker.is_alive() and not self._draining \
            and not self._queue.full() \
            and not (self.forwarder is not None and self.forwarder.full) \
            and self._bytes_in_flight + options.max_request_bytes <= options.max_bytes_in_flight

    # --- intake (called by the HTTP and gRPC servers, on their threads) ---------------------
    def handle(self, protocol: str, authorization: str | bytes | None,
               decode: Callable[[Callable[[int], None]], Decoded], *,
               held: Reservation | None = None) -> Decoded:
        """Authorize, admit, decode and queue one export request.

        ``decode(reserve)`` reads and decodes the request; it calls ``reserve(n)`` before it
        holds ``n`` more bytes (the body, then its decompressed form), which raises 429 /
        RESOURCE_EXHAUSTED when the bytes in flight would pass ``max_bytes_in_flight``
        (``reserve(-n)`` gives ``n`` back). What is reserved stays taken while the decoded
        batch waits in the queue, and is given back when the worker has taken it in (or when
        the request is refused).

        Args:
            protocol: ``http`` or ``grpc``, for the metrics.
            authorization: the ``Authorization`` value sent, if any.
            decode: reads and decodes the request.
            held: bytes the front end reserved already (gRPC reserves a message's worth
                before it reads the message); handed over to this request.

        Raises:
            RequestError: with the HTTP status and gRPC code to answer.
        """
        reservation = held if held is not None else self.reservation()
        with self._tracked():
            try:
                self.authorize(authorization)
                self._admit()
                decoded = self._decoded(decode, reservation.take)
                decoded.held_bytes = reservation.hand_over()
                self._enqueue(decoded)
            except RequestError as error:
                reservation.release()
                self.refused(protocol, error)
                raise
            except BaseException:
                reservation.release()
                raise
        self._requests.labels(protocol, "partial" if decoded.rejected else "ok").inc()
        self._spans.labels("accepted").inc(len(decoded.spans))
        if decoded.rejected:
            self._spans.labels("rejected").inc(decoded.rejected)
        return decoded

    def reservation(self) -> Reservation:
        """Return an empty share of ``max_bytes_in_flight`` for one request."""
        return Reservation(self)

    def _take_bytes(self, size: int) -> None:
        """Count ``size`` more bytes in flight (negative gives back); refuse past the limit."""
        with self._bytes_lock:
            if size > 0 and self._bytes_in_flight + size > self.options.max_bytes_in_flight:
                raise self.busy(f"{self._bytes_in_flight} bytes of requests in flight "
                                f"(limit {self.options.max_bytes_in_flight})")
            self._bytes_in_flight += size

    @property
    def bytes_in_flight(self) -> int:
        """Return the request bytes being read, decoded or waiting for the worker."""
        return self._bytes_in_flight

    def _decoded(self, decode: Callable[[Callable[[int], None]], Decoded],
                 reserve: Callable[[int], None]) -> Decoded:
        """Return ``decode(reserve)``; a bug in it is a 500 / INTERNAL answer.

        Not a dropped connection: the bug is contained and counted like any internal error.
        """
        try:
            return decode(reserve)
        except (RequestError, TimeoutError, OSError):
            raise
        except Exception as exc:
            self.guard.handle("intake", exc)
            raise RequestError(500, "INTERNAL", "internal error while decoding the request "
                               "(counted in loopguard_internal_errors_total)") from None

    def refused(self, protocol: str, error: RequestError) -> None:
        """Count a request answered with ``error``.

        ``handle`` counts its own; the front ends call this for what they refuse before it.
        """
        self._requests.labels(protocol, _OUTCOMES.get(error.http_status, "error")).inc()

    def authorize(self, authorization: str | bytes | None) -> None:
        """Check an ``Authorization`` value against the token (constant-time compare).

        Args:
            authorization: the header's value; bytes as they came off the wire (HTTP header
                values are bytes, so a UTF-8 token matches), or text (gRPC metadata).

        Raises:
            RequestError: 401 / UNAUTHENTICATED when a token is required and not matched.
        """
        token = self.options.token
        if token is None:
            return
        raw = authorization.encode() if isinstance(authorization, str) else authorization or b""
        scheme, _, credentials = raw.strip().partition(b" ")
        given = credentials.strip() if scheme.lower() == b"bearer" else b""
        if not hmac.compare_digest(given, token.encode()):
            raise RequestError(401, "UNAUTHENTICATED", "missing or wrong bearer token "
                               "(send 'Authorization: Bearer <token>')")

    def _admit(self) -> None:
        if self._draining:
            raise RequestError(503, "UNAVAILABLE", "shutting down; send to another instance",
                               retry_after_seconds=self.options.retry_after_seconds)
        if self._queue.full():
            raise self.busy(f"intake queue full ({self.options.max_queue} batches)")
        if self.forwarder is not None and self.forwarder.full:
            raise self.busy("forwarding buffer full (the downstream is slow or unreachable; "
                            f"{self.options.forward_buffer_bytes} bytes waiting)")

    def busy(self, why: str) -> RequestError:
        """Return the backpressure answer (429 / RESOURCE_EXHAUSTED with a retry delay)."""
        return RequestError(429, "RESOURCE_EXHAUSTED",
                            f"{why}; retry after {self.options.retry_after_seconds} s",
                            retry_after_seconds=self.options.retry_after_seconds)

    def _enqueue(self, decoded: Decoded) -> None:
        if decoded.forward_body is not None and self.log_forwarder is not None:
            self.log_forwarder.send(decoded.forward_body, decoded.log_records)  # at once
        elif not decoded.logs:
            copies = self.agents.from_spans(decoded.spans)  # coding agents' tool spans
            if copies:
                decoded.spans += copies
                if decoded.payloads is not None:
                    decoded.payloads += [None] * len(copies)
        if not decoded.spans:
            self._take_bytes(-decoded.held_bytes)
            return
        decoded.received_ns = self._clock()
        if self._journal is not None:
            self._journal.accept(len(decoded.spans))  # before it is acknowledged
        try:
            self._queue.put_nowait(decoded)
        except queue.Full:
            self._take_bytes(-decoded.held_bytes)
            if self._journal is not None:
                self._journal.accept(-len(decoded.spans))
            raise self.busy(f"intake queue full ({self.options.max_queue} batches)") from None

    @contextlib.contextmanager
    def _tracked(self) -> Iterator[None]:
        with self._inflight_cond:
            self._inflight += 1
        try:
            yield
        finally:
            with self._inflight_cond:
                self._inflight -= 1
                self._inflight_cond.notify_all()

    # --- worker --------------------------------------------------------------------------------
    def _work(self) -> None:
        tick = min(0.25, max(0.01, self.options.reorder_window_seconds / 4))
        while True:
            try:
                item = self._queue.get(timeout=tick)
            except queue.Empty:
                item = None
            if item is _STOP:
                self._step(self.stream.flush)
                return
            if isinstance(item, _Flush):
                self._step(self.stream.flush)
                item.done.set()
            elif item is not None:
                self._last_received_ns = item.received_ns
                self._taken_spans += len(item.spans)
                self._step(functools.partial(self.stream.add, item.spans, item.payloads,
                                             received_ns=item.received_ns))
                self._take_bytes(-item.held_bytes)
            # With a backlog, time stands at the arrival of the last batch taken: a trace's
            # window only counts arrivals, never the worker's lag behind them.
            now = self._clock() if self._queue.empty() else self._last_received_ns
            self._step(functools.partial(self.stream.poll, now))

    def _step(self, action: Callable[[], list[RunReport]]) -> None:
        try:
            reports = action()
        except Exception as exc:
            self.guard.handle("serve", exc)
            return
        if self._journal is not None:
            waiting = self.forwarder.pending_spans if self.forwarder is not None else 0
            self._journal.settle(self._taken_spans - self.stream.buffered_spans - waiting)
        late = self.stream.late_spans - self._late_seen
        if late:
            self._late_seen += late
            self._spans.labels("late").inc(late)
        duplicates = self.stream.duplicate_spans - self._duplicates_seen
        if duplicates:
            self._duplicates_seen += duplicates
            self._spans.labels("duplicate").inc(duplicates)
        if self.on_report is None:
            return
        for report in reports:
            try:
                self.on_report(report)
            except Exception as exc:
                self.guard.handle("on_report", exc)


class Reservation:
    """One request's share of ``max_bytes_in_flight``; taken on any thread, given back once.

    Thread-safe through the receiver's byte lock (a request uses its own from one thread at
    a time, but a gRPC call can be evicted, and its share given back, from the event loop).
    """

    __slots__ = ("_lock", "_receiver", "held")

    def __init__(self, receiver: LoopGuardReceiver) -> None:
        self._receiver = receiver
        self._lock = threading.Lock()
        self.held = 0
        """Bytes taken and not yet given back or handed over."""

    def take(self, size: int) -> None:
        """Take ``size`` more bytes (negative gives back).

        Raises:
            RequestError: 429 / RESOURCE_EXHAUSTED when they would pass the limit.
        """
        with self._lock:
            self._receiver._take_bytes(size)
            self.held += size

    def hand_over(self) -> int:
        """Return the bytes held and stop tracking them here (the queued batch carries them)."""
        with self._lock:
            held, self.held = self.held, 0
        return held

    def release(self) -> None:
        """Give back whatever is held; safe to call twice."""
        self._receiver._take_bytes(-self.hand_over())


def _stop_server(server: Any) -> None:
    """Stop the gRPC or the HTTP server; never raise."""
    try:
        if hasattr(server, "stop"):
            server.stop()
        else:
            server.shutdown()
            server.server_close()
    except Exception:
        logger.exception("otel-loopguard: error while stopping %r", server)
