"""OTLP protobuf ``ExportTraceServiceRequest`` to ``SpanRecord`` (and, for forwarding, SDK spans).

One pass over the message: a malformed span (an id of the wrong length, a value nested too
deeply) is left out and counted, the others are kept (OTLP partial success). The parser has
already checked types, UTF-8 and ranges. Protobuf is imported only by the callers that parse,
so importing this module works without ``opentelemetry-proto``.

``decode_wire_spans`` is the fast way for the common case: the optional C decoder (``_wire.c``)
reads the records straight from the request's bytes, and leaves anything unusual (a malformed
span, bytes protobuf would refuse) to protobuf and ``decode_proto_spans``, which stay the
definition (``tests/test_wire.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from otel_loopguard._native import load
from otel_loopguard.otlp._spans import (
    MAX_VALUE_DEPTH,
    REMOTE_PARENT,
    SPAN_ID_BYTES,
    TRACE_ID_BYTES,
    DecodedSpans,
    FieldError,
    TooDeep,
    sdk_builders,
)
from otel_loopguard.types import SpanRecord

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

__all__ = ["decode_proto_spans", "decode_wire_spans", "proto_attributes"]

_ZERO_SPAN_ID: Final = bytes(SPAN_ID_BYTES)
WIRE: Final = load("otel_loopguard.otlp._wire")
"""The compiled decoder of serialized requests, when it is built and not turned off."""


def decode_wire_spans(body: bytes) -> list[SpanRecord] | None:
    """Return the records of a serialized ``ExportTraceServiceRequest``, read by the C decoder.

    The same records as ``decode_proto_spans`` of the parsed message, at a fraction of the cost
    (no protobuf objects). None when the decoder is not built or turned off, or leaves the
    request to the Python path: a malformed span (so none is ever rejected here), bytes protobuf
    refuses, a field it does not read.
    """
    if WIRE is None:
        return None
    spans: list[SpanRecord] | None = WIRE.decode_spans(body, SpanRecord)
    return spans


def decode_proto_spans(request: ExportTraceServiceRequest, *,
                       payloads: bool = False) -> DecodedSpans:
    """Return the spans of a parsed protobuf ``ExportTraceServiceRequest``.

    Args:
        request: the parsed message.
        payloads: also build the SDK span of each good span (``DecodedSpans.payloads``).

    Returns:
        The good spans in message order (ids as lower-case hex), and the count and first
        problem of the others, e.g.
        ``resource_spans[0].scope_spans[0].spans[2].trace_id: expected 16 bytes, got 3``.
    """
    out = DecodedSpans(payloads=[] if payloads else None)
    for index, resource_spans in enumerate(request.resource_spans):
        path = f"resource_spans[{index}]"
        resource: Any = None
        sdk: Any = None
        error: FieldError | None = None
        try:
            pairs = resource_spans.resource.attributes
            resource = _within("resource.attributes", proto_attributes, pairs)
            if payloads:
                sdk = sdk_builders().sdk_resource(_raw_attributes(pairs), resource_spans.schema_url)
        except FieldError as exc:
            error = exc.under(path)
        for scope_index, scope_spans in enumerate(resource_spans.scope_spans):
            _scope_spans(scope_spans, f"{path}.scope_spans[{scope_index}]", resource, sdk,
                         error, out)
    return out


def _scope_spans(scope_spans: Any, path: str, resource: Any, resource_sdk: Any,  # noqa: PLR0917
                 error: FieldError | None, out: DecodedSpans) -> None:
    spans = scope_spans.spans
    scope = scope_spans.scope
    scope_sdk: Any = None
    if error is None:
        try:
            _within("scope.attributes", proto_attributes, scope.attributes)  # forwarded
        except FieldError as exc:
            error = exc.under(path)
    if error is not None:
        out.reject(len(spans), error)
        return
    payloads = out.payloads
    if payloads is not None:
        scope_sdk = sdk_builders().sdk_scope(scope.name, scope.version, scope_spans.schema_url,
                              _raw_attributes(scope.attributes))
    out.take(spans, path, _span, resource, scope.name, _payload, (resource_sdk, scope_sdk))


def _within(path: str, decode: Callable[[Any], Any], value: Any) -> Any:
    try:
        return decode(value)
    except FieldError as exc:
        raise exc.under(path) from None


def _id(raw: bytes, size: int, name: str) -> bytes:
    if len(raw) != size:
        raise FieldError(name, f"expected {size} bytes, got {len(raw)}")
    return raw


def _span(span: Any, resource: Mapping[str, Any], scope: str) -> SpanRecord:
    """Return the record of one protobuf ``Span``; validate what only forwarding reads."""
    trace_id, span_id, parent = span.trace_id, span.span_id, span.parent_span_id
    if len(trace_id) != TRACE_ID_BYTES or len(span_id) != SPAN_ID_BYTES or (
            parent and len(parent) != SPAN_ID_BYTES):
        _id(trace_id, TRACE_ID_BYTES, "trace_id")
        _id(span_id, SPAN_ID_BYTES, "span_id")
        _id(parent, SPAN_ID_BYTES, "parent_span_id")
    try:
        attributes = proto_attributes(span.attributes)
    except FieldError as exc:
        raise exc.under("attributes") from None
    status = span.status
    events = span.events
    has_parent = bool(parent) and parent != _ZERO_SPAN_ID
    record = SpanRecord(
        trace_id.hex(), span_id.hex(), parent.hex() if has_parent else None, span.name,
        span.start_time_unix_nano, span.end_time_unix_nano, attributes, status.code,
        status.message, scope, resource, _events(events) if events else (),
        has_parent and span.flags & REMOTE_PARENT == REMOTE_PARENT)  # a root has no parent
    if span.links:
        _links(span.links, proto_attributes)
    return record


def _events(events: Any) -> tuple[tuple[str, dict[str, Any]], ...]:
    out = []
    for index, event in enumerate(events):
        out.append((event.name, _within(f"events[{index}].attributes", proto_attributes,
                                        event.attributes)))
    return tuple(out)


def _links(links: Any, attributes: Callable[[Any], dict[str, Any]],
           ) -> list[tuple[int, int, str, dict[str, Any], int, int]]:
    out = []
    for index, link in enumerate(links):
        try:
            out.append((int.from_bytes(_id(link.trace_id, TRACE_ID_BYTES, "trace_id"), "big"),
                        int.from_bytes(_id(link.span_id, SPAN_ID_BYTES, "span_id"), "big"),
                        link.trace_state, _within("attributes", attributes, link.attributes),
                        link.dropped_attributes_count, link.flags))
        except FieldError as exc:
            raise exc.under(f"links[{index}]") from None
    return out


def _payload(span: Any, record: SpanRecord, resource: Any, scope: Any) -> Any:
    """Return the SDK span of a span ``_span`` accepted (bytes values kept as bytes)."""
    return sdk_builders().readable_span(
        record, attributes=_raw_attributes(span.attributes), kind=span.kind,
        trace_state=span.trace_state, flags=span.flags,
        events=[(event.name, event.time_unix_nano, _raw_attributes(event.attributes),
                 event.dropped_attributes_count) for event in span.events],
        links=_links(span.links, _raw_attributes), resource=resource, scope=scope,
        dropped=(span.dropped_attributes_count, span.dropped_events_count,
                 span.dropped_links_count))


# --- values --------------------------------------------------------------------------------
class _Values:
    """The protobuf ``AnyValue`` decoder, and the repeated ``KeyValue`` made of them.

    Built twice: ``bytes_as`` makes bytes values hex text in records (as in OTLP/JSON), and
    keeps them bytes in the SDK spans ``serve`` forwards.
    """

    __slots__ = ("_bytes_as",)

    def __init__(self, bytes_as: Callable[[bytes], Any]) -> None:
        self._bytes_as = bytes_as

    def attributes(self, pairs: Any, depth: int = 0) -> dict[str, Any]:
        """Return repeated ``KeyValue`` as a dict (a repeated key keeps its first position).

        A pair with an empty key is left out (OTLP requires a key; the SDK drops it too).
        """
        out: dict[str, Any] = {}
        value = self.value
        index = 0
        try:
            for kv in pairs:
                raw = kv.value
                text = raw.string_value
                # A non-empty string_value is the oneof's string member; anything else
                # (another member, an empty string, nothing) takes the general path.
                if not text:
                    text = value(raw, depth)
                key = kv.key
                if key:
                    out[key] = text
                index += 1
        except TooDeep as exc:
            if depth:
                raise
            raise exc.under(f"[{index}].value") from None
        return out

    def value(self, raw: Any, depth: int = 0) -> Any:
        """Decode an ``AnyValue`` (unset is None)."""
        kind = raw.WhichOneof("value")
        if kind is None:
            return None
        if kind == "bytes_value":
            return self._bytes_as(raw.bytes_value)
        if kind not in ("array_value", "kvlist_value"):
            return getattr(raw, kind)
        if depth >= MAX_VALUE_DEPTH:
            raise TooDeep  # the only error inside a parsed value, named at its attribute
        if kind == "kvlist_value":
            return self.attributes(raw.kvlist_value.values, depth + 1)
        return tuple([self.value(item, depth + 1) for item in raw.array_value.values])


proto_attributes: Final = _Values(bytes.hex).attributes
"""Decode a repeated protobuf ``KeyValue`` (bytes values as hex text), errors with their path."""
_raw_attributes: Final = _Values(bytes).attributes
