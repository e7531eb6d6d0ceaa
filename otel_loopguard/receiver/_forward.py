"""Forwarding for ``serve``: re-export received spans through the SDK's own OTLP exporter.

Received spans become SDK ``ReadableSpan`` objects (ids, kind, links, events, status, resource and
scope kept from the protobuf; OTLP/JSON is converted to protobuf first). When the trace has been
checked, flagged tool spans get the ``loopguard.*`` evidence attributes, and every span goes to a
``BatchSpanProcessor`` wrapping ``OTLPSpanExporter`` (gRPC or HTTP/protobuf), so the evidence
shows up next to the spans in Tempo or Jaeger.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

from otel_loopguard.otlp._request import Decoded
from otel_loopguard.receiver._stream import ClosedTrace
from otel_loopguard.types import STATUS_ERROR, SpanRecord

__all__ = ["Forwarder", "make_exporter"]

logger = logging.getLogger(__name__)

_DEFAULT_MAX_QUEUE_SIZE: Final = 65_536
_KINDS: Final = {1: SpanKind.INTERNAL, 2: SpanKind.SERVER, 3: SpanKind.CLIENT,
                 4: SpanKind.PRODUCER, 5: SpanKind.CONSUMER}
_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)
_PARENT_IS_REMOTE: Final = 0x200
"""``SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK`` of OTLP ``Span.flags``."""
_ID_KEYS: Final = ("traceId", "spanId", "parentSpanId")


def make_exporter(endpoint: str, protocol: Literal["grpc", "http"] = "grpc") -> SpanExporter:
    """Return the SDK's OTLP span exporter for ``endpoint``.

    gRPC endpoints are ``host:port`` or a URL; plaintext needs ``http://`` (anything else uses
    TLS). HTTP endpoints are URLs; ``/v1/traces`` is appended when the URL has no path.
    Headers, certificates and timeouts come from the exporter's ``OTEL_EXPORTER_OTLP_*``
    variables.
    """
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,  # only the chosen protocol's stack is imported
        )

        return GrpcExporter(endpoint=endpoint, insecure=endpoint.startswith("http://"))
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpExporter,
    )

    if urlsplit(endpoint).path in ("", "/"):
        endpoint = endpoint.rstrip("/") + "/v1/traces"
    return HttpExporter(endpoint=endpoint)


class Forwarder:
    """Turns received spans into SDK spans and exports them once their trace is checked.

    Thread-safe: ``payloads`` runs on the request threads, ``forward`` on the worker thread.
    Export runs on the ``BatchSpanProcessor`` thread; when the downstream is slower than the
    intake, its bounded queue drops spans (and logs) instead of blocking detection.

    Args:
        exporter: the span exporter, e.g. from :func:`make_exporter`.
        max_queue_size: spans waiting for export before new ones are dropped (65,536).
    """

    def __init__(self, exporter: SpanExporter, *,
                 max_queue_size: int = _DEFAULT_MAX_QUEUE_SIZE) -> None:
        self.processor = BatchSpanProcessor(exporter, max_queue_size=max_queue_size,
                                            schedule_delay_millis=200)

    def payloads(self, decoded: Decoded) -> list[ReadableSpan]:
        """Return an SDK span for each accepted span of ``decoded``, in the same order."""
        request = decoded.request
        if request is None and decoded.doc is not None and not decoded.rejected:
            request = _json_to_proto(decoded.doc)
        if request is not None and not decoded.rejected:
            spans = _from_proto(request)
            if len(spans) == len(decoded.spans):
                return spans
        return [_from_record(span) for span in decoded.spans]

    def forward(self, closed: ClosedTrace) -> None:
        """Export the spans of a checked trace, evidence added to the flagged ones."""
        if closed.payloads is None:
            return
        evidence = closed.evidence
        for record, span in zip(closed.spans, closed.payloads, strict=True):
            extra = evidence.get(record.span_id) if evidence else None
            self.processor.on_end(_with_attributes(span, extra) if extra else span)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export everything queued so far."""
        return self.processor.force_flush(timeout_millis)

    def shutdown(self) -> None:
        """Export what is queued and shut the exporter down."""
        self.processor.shutdown()  # type: ignore[no-untyped-call]  # unannotated in the SDK


def _with_attributes(span: ReadableSpan, extra: Mapping[str, Any]) -> ReadableSpan:
    return ReadableSpan(
        name=span.name, context=span.context, parent=span.parent, resource=span.resource,
        attributes={**(span.attributes or {}), **extra}, events=span.events, links=span.links,
        kind=span.kind, status=span.status, start_time=span.start_time, end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope)


def _json_to_proto(doc: Mapping[str, Any]) -> Any:
    """Return OTLP/JSON as a protobuf request (hex ids made base64), or None if it won't fit."""
    try:
        fixed = _base64_ids(doc)
        return json_format.ParseDict(fixed, trace_service_pb2.ExportTraceServiceRequest(),
                                     ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, AttributeError, RecursionError):
        return None


def _base64_ids(node: Any, key: str = "") -> Any:
    if isinstance(node, dict):
        return {k: _base64_ids(v, k) for k, v in node.items()}
    if isinstance(node, list):
        return [_base64_ids(v) for v in node]
    if key in _ID_KEYS and isinstance(node, str) and len(node) in (16, 32):
        try:
            return base64.b64encode(bytes.fromhex(node)).decode()
        except ValueError:
            return node
    return node


def _from_proto(request: Any) -> list[ReadableSpan]:
    out: list[ReadableSpan] = []
    for resource_spans in request.resource_spans:
        resource = Resource(_attributes(resource_spans.resource.attributes),
                            resource_spans.schema_url or None)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope
            sdk_scope = InstrumentationScope(scope.name, scope.version or None,
                                             scope_spans.schema_url or None,
                                             _attributes(scope.attributes))
            out.extend(_proto_span(span, resource, sdk_scope) for span in scope_spans.spans)
    return out


def _proto_span(span: Any, resource: Resource, scope: InstrumentationScope) -> ReadableSpan:
    trace_id = int.from_bytes(span.trace_id, "big")
    state = TraceState.from_header([span.trace_state]) if span.trace_state else None
    context = SpanContext(trace_id, int.from_bytes(span.span_id, "big"), is_remote=False,
                          trace_flags=TraceFlags((span.flags & 0xFF) | TraceFlags.SAMPLED),
                          trace_state=state)
    parent_id = int.from_bytes(span.parent_span_id, "big") if span.parent_span_id else 0
    parent = SpanContext(trace_id, parent_id, is_remote=bool(span.flags & _PARENT_IS_REMOTE),
                         trace_flags=_SAMPLED) if parent_id else None
    code = span.status.code
    return ReadableSpan(
        name=span.name, context=context, parent=parent, resource=resource,
        attributes=_attributes(span.attributes),
        events=tuple(Event(e.name, _attributes(e.attributes), e.time_unix_nano, limit=None)
                     for e in span.events),
        links=tuple(_link(link) for link in span.links), kind=_KINDS.get(span.kind,
                                                                         SpanKind.INTERNAL),
        status=Status(StatusCode(code if code in (0, 1, 2) else 0),
                      span.status.message if code == STATUS_ERROR else None),
        start_time=span.start_time_unix_nano, end_time=span.end_time_unix_nano,
        instrumentation_scope=scope)


def _link(link: Any) -> Link:
    state = TraceState.from_header([link.trace_state]) if link.trace_state else None
    context = SpanContext(int.from_bytes(link.trace_id, "big"), int.from_bytes(link.span_id,
                                                                                "big"),
                          is_remote=True, trace_flags=_SAMPLED, trace_state=state)
    return Link(context, _attributes(link.attributes))


def _attributes(pairs: Sequence[Any]) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return tuple(_value(v) for v in value.array_value.values)
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return getattr(value, kind)


def _from_record(span: SpanRecord) -> ReadableSpan:
    """Return an SDK span from the neutral record (kind and links are not known here)."""
    trace_id = int(span.trace_id, 16)
    context = SpanContext(trace_id, int(span.span_id, 16), is_remote=False,
                          trace_flags=_SAMPLED)
    parent = SpanContext(trace_id, int(span.parent_span_id, 16), is_remote=False,
                         trace_flags=_SAMPLED) if span.parent_span_id else None
    code = span.status_code if span.status_code in (0, 1, 2) else 0
    return ReadableSpan(
        name=span.name, context=context, parent=parent, resource=Resource(dict(span.resource)),
        attributes=dict(span.attributes),
        events=tuple(Event(name, dict(attrs), span.end_time_ns, limit=None)
                     for name, attrs in span.events),
        status=Status(StatusCode(code), span.status_message if code == STATUS_ERROR else None),
        start_time=span.start_time_ns, end_time=span.end_time_ns,
        instrumentation_scope=InstrumentationScope(span.scope_name))
