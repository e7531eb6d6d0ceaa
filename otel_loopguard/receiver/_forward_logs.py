"""Forwarding of the logs signal for ``serve``: the agents' log events, and the findings on them.

A logs request is forwarded as it came (as protobuf) to the downstream's logs endpoint, at once:
the agents' events are not held back until their session is checked, since no attribute is
added to them. A finding on a session of a coding agent, which has no span to carry it, goes
out as a log event of its own, ``loopguard.loop_detected``, under the agent's resource, with
the ``loopguard.*`` attributes of the finding and the session id and call id it is about.

One daemon thread sends, from a bounded queue (a full queue drops the newest request and
says so in the log): over OTLP/HTTP (``/v1/logs``) or OTLP/gRPC (``LogsService/Export``), with
the settings the SDK's span exporter takes for the spans: headers, CA certificate, client key
and certificate (mTLS), compression and timeout from the ``OTEL_EXPORTER_OTLP_LOGS_*``
variables, else the ``OTEL_EXPORTER_OTLP_*`` ones (the timeout in seconds, as the Python SDK
reads it).
"""

from __future__ import annotations

import gzip
import logging
import os
import queue
import ssl
import threading
import time
import urllib.request
import zlib
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal
from urllib.parse import unquote, urlsplit

from otel_loopguard.coding_agents import AGENT_KEY, CALL_ID_KEY
from otel_loopguard.evidence import EVENT_NAME, LOGGER_NAME
from otel_loopguard.exceptions import ConfigError
from otel_loopguard.receiver._stream import ClosedTrace

__all__ = ["LogForwarder", "findings_request"]

logger = logging.getLogger(__name__)

_DEFAULT_MAX_QUEUE: Final = 1024
_METHOD: Final = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
_TIMEOUT_SECONDS: Final = 10.0
_SEVERITY_WARN: Final = 13
_STOP: Final = object()


class LogForwarder:
    """Sends logs requests (serialized protobuf) to the downstream, in order, from one thread.

    Thread-safe: ``send`` is called on the receiver's server and worker threads.

    Args:
        endpoint: as ``--forward-endpoint``: ``host:port`` or a URL for gRPC; a URL for HTTP
            (``/v1/logs`` replaces a ``/v1/traces`` path, or is added to an empty one).
        protocol: ``grpc`` or ``http``.
        on_outcome: called with ``(outcome, records)``: ``exported``, ``export_failed`` or
            ``queue_full``, on the thread that saw it.
        max_queue: requests waiting before new ones are dropped (1,024).
    """

    def __init__(self, endpoint: str, protocol: Literal["grpc", "http"] = "grpc", *,
                 on_outcome: Callable[[str, int], None] | None = None,
                 max_queue: int = _DEFAULT_MAX_QUEUE) -> None:
        self._send = _grpc_sender(endpoint) if protocol == "grpc" else _http_sender(endpoint)
        self._on_outcome = on_outcome or (lambda outcome, count: None)
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max_queue)
        self._stopping = False
        """Set when a shutdown ran out of time: what is still queued is counted, not sent."""
        self._thread = threading.Thread(target=self._work, name="loopguard-forward-logs",
                                        daemon=True)
        self._thread.start()

    @property
    def full(self) -> bool:
        """Return True while the queue has no room (new logs requests should be refused)."""
        return self._queue.full()

    def send(self, body: bytes, records: int = 1) -> None:
        """Queue one serialized ``ExportLogsServiceRequest``; never blocks."""
        try:
            self._queue.put_nowait((body, records))
        except queue.Full:
            self._on_outcome("queue_full", records)
            logger.warning("otel-loopguard: log forwarding queue full; a request of %s "
                           "records dropped", records)

    def forward_findings(self, closed: ClosedTrace) -> None:
        """Send a ``loopguard.loop_detected`` event per finding on a coding agent's call."""
        body, count = findings_request(closed)
        if count:
            self.send(body, count)

    def force_flush(self, timeout: float = 30.0) -> bool:
        """Wait until every queued request was sent (or failed); False on timeout."""
        deadline = time.monotonic() + timeout
        done = threading.Event()
        try:
            self._queue.put(done, timeout=timeout)
        except queue.Full:
            return False
        return done.wait(max(0.0, deadline - time.monotonic()))

    def shutdown(self, timeout: float = 30.0) -> None:
        """Send what is queued within ``timeout`` seconds, then stop the thread.

        What is still queued then is counted as ``export_failed`` and not sent (a request
        being sent finishes or fails on its own, within its 10 s timeout): a downstream that
        does not answer cannot hold the shutdown past ``timeout``.
        """
        deadline = time.monotonic() + timeout
        if not self.force_flush(timeout):
            self._stopping = True
            self._drop_queued()
        try:
            self._queue.put(_STOP, timeout=max(0.0, deadline - time.monotonic()))
        except queue.Full:  # the worker is stuck in a send: it is a daemon thread
            self._drop_queued()
        self._thread.join(max(0.0, deadline - time.monotonic()))

    def _drop_queued(self) -> None:
        """Count every request still queued as not forwarded, and take it off the queue."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, threading.Event):
                item.set()
            elif item is not _STOP:
                self._on_outcome("export_failed", item[1])

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if isinstance(item, threading.Event):
                item.set()
                continue
            body, records = item
            if self._stopping:  # the shutdown gave up on the downstream
                self._on_outcome("export_failed", records)
                continue
            try:
                self._send(body)
            except Exception as exc:  # the downstream's failure is counted, never raised
                logger.warning("otel-loopguard: forwarding %s log records failed: %s",
                               records, exc)
                self._on_outcome("export_failed", records)
            else:
                self._on_outcome("exported", records)


def _setting(name: str) -> str:
    """Return ``OTEL_EXPORTER_OTLP_LOGS_<name>``, else ``OTEL_EXPORTER_OTLP_<name>``, else ""."""
    return os.environ.get(_variable(name), "").strip()


def _variable(name: str) -> str:
    """Return the variable that sets ``name`` for the logs: the signal's own when set."""
    own = f"OTEL_EXPORTER_OTLP_LOGS_{name}"
    return own if os.environ.get(own) else f"OTEL_EXPORTER_OTLP_{name}"


def _file(name: str) -> tuple[str, bytes] | None:
    """Return the path and bytes of the file a ``*_CERTIFICATE`` or ``*_CLIENT_KEY`` names.

    Raises:
        ConfigError: when it cannot be read (at start, not at the first export).
    """
    path = _setting(name)
    if not path:
        return None
    try:
        with open(path, "rb") as handle:
            return path, handle.read()
    except OSError as exc:
        raise ConfigError(f"{_variable(name)}: {exc.strerror}: {path}") from None


def _timeout() -> float:
    raw = _setting("TIMEOUT")
    try:
        seconds = float(raw) if raw else _TIMEOUT_SECONDS
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        logger.warning("otel-loopguard: %s %r is not a positive number of seconds; "
                       "forwarding logs with %g s", _variable("TIMEOUT"), raw, _TIMEOUT_SECONDS)
        return _TIMEOUT_SECONDS
    return seconds


def _compression() -> str:
    """Return ``gzip``, ``deflate`` or "" (``none`` or unset), as the SDK's exporters take them.

    Raises:
        ConfigError: for any other compression.
    """
    raw = _setting("COMPRESSION").lower()
    if raw not in ("", "none", "gzip", "deflate"):
        raise ConfigError(f"{_variable('COMPRESSION')} {raw!r}: forwarding logs takes gzip, "
                          "deflate or none")
    return "" if raw == "none" else raw


def _headers() -> dict[str, str]:
    raw = _setting("HEADERS")
    out = {}
    for pair in raw.split(","):
        key, sep, value = pair.partition("=")
        if sep and key.strip():
            out[unquote(key.strip()).lower()] = unquote(value.strip())
    return out


def _http_sender(endpoint: str) -> Callable[[bytes], None]:
    parts = urlsplit(endpoint)
    path = parts.path.rstrip("/")
    path = path.removesuffix("/v1/traces") + "/v1/logs" if not path.endswith("/v1/logs") \
        else path
    url = parts._replace(path=path).geturl()
    headers = {"Content-Type": "application/x-protobuf", **_headers()}
    compression, timeout = _compression(), _timeout()
    if compression:
        headers["Content-Encoding"] = compression
    context = _ssl_context() if parts.scheme == "https" else None

    def send(body: bytes) -> None:
        data = body if not compression else gzip.compress(body) if compression == "gzip" \
            else zlib.compress(body)
        request = urllib.request.Request(url, data=data, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            response.read()

    return send


def _ssl_context() -> ssl.SSLContext:
    """Return the TLS context of ``*_CERTIFICATE`` (the CA) and the client's key and certificate.

    Raises:
        ConfigError: when a file cannot be read or is not what it should be.
    """
    ca, key, chain = _file("CERTIFICATE"), _file("CLIENT_KEY"), _file("CLIENT_CERTIFICATE")
    try:
        context = ssl.create_default_context(
            cadata=ca[1].decode("ascii", "replace") if ca is not None else None)
    except ssl.SSLError as exc:
        where = ca[0] if ca is not None else "the system's certificate store"
        raise ConfigError(f"{_variable('CERTIFICATE')}: no PEM certificate in {where}: "
                          f"{exc.reason}") from None
    if chain is not None:
        try:
            context.load_cert_chain(chain[0], key[0] if key is not None else None)
        except ssl.SSLError as exc:
            raise ConfigError("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and _CLIENT_KEY: "
                              f"not a matching PEM certificate and key: {exc.reason}") from None
    return context


def _grpc_sender(endpoint: str) -> Callable[[bytes], None]:
    import grpc

    parts = urlsplit(endpoint if "://" in endpoint else f"//{endpoint}")
    target = parts.netloc or endpoint
    compression = {"gzip": grpc.Compression.Gzip, "deflate": grpc.Compression.Deflate}.get(
        _compression())
    if endpoint.startswith("http://"):
        channel = grpc.insecure_channel(target, compression=compression)
    else:
        ca, key, chain = _file("CERTIFICATE"), _file("CLIENT_KEY"), _file("CLIENT_CERTIFICATE")
        channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(
            root_certificates=ca[1] if ca else None, private_key=key[1] if key else None,
            certificate_chain=chain[1] if chain else None), compression=compression)
    export = channel.unary_unary(_METHOD)  # raw bytes in and out: the request is serialized
    metadata = tuple(_headers().items())
    timeout = _timeout()

    def send(body: bytes) -> None:
        export(body, timeout=timeout, metadata=metadata)

    return send


def findings_request(closed: ClosedTrace) -> tuple[bytes, int]:
    """Return the ``ExportLogsServiceRequest`` of the findings on the agents' calls, and count.

    One log record per flagged call, under the resource the agent sent, correlated by
    ``session.id`` and ``loopguard.call_id`` (and the agent's own id key).
    """
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    request = ExportLogsServiceRequest()
    by_resource: dict[int, Any] = {}
    count = 0
    for span in closed.spans:
        found = closed.evidence.get(span.span_id) if closed.evidence else None
        if found is None or AGENT_KEY not in span.attributes:
            continue
        scope_logs = by_resource.get(id(span.resource))
        if scope_logs is None:
            resource_logs = request.resource_logs.add()
            _put(resource_logs.resource.attributes, span.resource)
            scope_logs = by_resource[id(span.resource)] = resource_logs.scope_logs.add()
            scope_logs.scope.name = LOGGER_NAME
        record = scope_logs.log_records.add()
        record.time_unix_nano = record.observed_time_unix_nano = span.end_time_ns
        record.severity_number = _SEVERITY_WARN
        record.severity_text = "WARN"
        record.event_name = EVENT_NAME
        record.body.string_value = f"loop detected by {found.get('loopguard.detector')}: " \
            f"{found.get('loopguard.action')}"
        attrs = span.attributes
        _put(record.attributes, {"event.name": EVENT_NAME, **found,
                                 "session.id": attrs.get("session.id", ""),
                                 AGENT_KEY: attrs[AGENT_KEY],
                                 CALL_ID_KEY: attrs.get(CALL_ID_KEY, span.span_id),
                                 "gen_ai.tool.name": attrs.get("gen_ai.tool.name", "")})
        count += 1
    return request.SerializeToString(), count


def _put(target: Any, values: Mapping[str, Any]) -> None:
    """Append ``values`` to a repeated ``KeyValue``."""
    for key, value in values.items():
        pair = target.add()
        pair.key = key
        _set(pair.value, value)


def _set(any_value: Any, value: Any) -> None:
    if isinstance(value, bool):
        any_value.bool_value = value
    elif isinstance(value, int):
        any_value.int_value = value
    elif isinstance(value, float):
        any_value.double_value = value
    elif isinstance(value, list | tuple):
        for item in value:
            _set(any_value.array_value.values.add(), item)
    elif isinstance(value, Mapping):
        _put(any_value.kvlist_value.values, value)
    else:
        any_value.string_value = str(value)
