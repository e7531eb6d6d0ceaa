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

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry

from otel_loopguard.coding_agents import AgentRecords
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.exceptions import InternalErrorGuard
from otel_loopguard.metrics import LoopGuardMetrics
from otel_loopguard.metrics._otel import backends
from otel_loopguard.receiver._admission import Reservation as Reservation  # in __all__
from otel_loopguard.receiver._counters import QueueCollector, ReceiverCounters
from otel_loopguard.receiver._intake import STOP, Flush, IntakeWorker
from otel_loopguard.receiver._journal import open_journal
from otel_loopguard.receiver._options import ReceiverOptions
from otel_loopguard.receiver._requests import RequestIntake
from otel_loopguard.receiver._stream import StreamingChecker
from otel_loopguard.replay.checker import RunReport

__all__ = ["LoopGuardReceiver", "ReceiverOptions", "Reservation"]

logger = logging.getLogger(__name__)


class LoopGuardReceiver(IntakeWorker, RequestIntake):
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
        self._counters = ReceiverCounters(registry,
                                          forwarding=bool(self.options.forward_endpoint))
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=self.options.max_queue)
        if registry is not None:
            registry.register(QueueCollector(self._queue.qsize))
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
                         on_outcome=self._counters.count_forwarded)

    def _make_log_forwarder(self) -> Any:
        if self.options.forward_endpoint is None:
            return None
        from otel_loopguard.receiver._forward_logs import LogForwarder

        return LogForwarder(self.options.forward_endpoint, self.options.forward_protocol,
                            on_outcome=self._counters.count_forwarded_logs)

    def _forward(self, closed: Any) -> None:
        """Forward a checked trace's spans, and the findings on coding agents' calls as logs."""
        self.forwarder.forward(closed)
        self.log_forwarder.forward_findings(closed)

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
        if self.options.state_file is not None:
            self._journal = open_journal(self.options.state_file,
                                         self._counters.spans.labels("lost").inc)
        self._worker = threading.Thread(target=self._work, name="loopguard-serve-worker",
                                        daemon=True)
        self._worker.start()
        try:
            self._start_servers()
        except BaseException:
            self.shutdown()
            raise
        return self

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
        marker = Flush()
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
        deadline = time.monotonic() + timeout
        if self.forwarder is not None:  # a worker waiting for the downstream waits no longer
            self.forwarder.give_up_at(deadline)
        with self._inflight_cond:
            self._inflight_cond.wait_for(lambda: self._inflight == 0, timeout)
        for server in reversed(self._servers):
            _stop_server(server)
        self._servers.clear()
        worker = self._worker
        if worker is not None and worker.is_alive():
            # Until the deadline the worker may wait for the downstream; then it has ``timeout``
            # more to check what is queued and hand it over, before forwarding is shut down.
            try:
                self._queue.put(STOP, timeout=max(0.0, deadline - time.monotonic()) + timeout)
            except queue.Full:
                logger.error("otel-loopguard: the worker did not take its queue within %g s; "
                             "stopping without it", timeout)
            worker.join(max(0.0, deadline - time.monotonic()) + timeout)
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
