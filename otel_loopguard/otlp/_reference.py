"""Conversion of OTLP trace data (JSON, protobuf, SDK spans) to :class:`SpanRecord`.

Three producers, one shape: ``spans_from_json_request`` reads an OTLP/JSON
``ExportTraceServiceRequest`` already parsed into Python objects, ``spans_from_proto_request``
reads the protobuf message, and ``span_record_from_readable`` reads the SDK's own spans.

Protobuf is imported only inside the functions that need it, so importing this module stays
cheap and works without ``opentelemetry-proto``.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from otel_loopguard.types import STATUS_ERROR, STATUS_OK, STATUS_UNSET, SpanRecord

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["span_record_from_readable", "spans_from_json_request", "spans_from_proto_request"]

_T = TypeVar("_T")
_TRACE_ID_BYTES = 16
_SPAN_ID_BYTES = 8
_HEX_RE = re.compile(r"[0-9a-fA-F]*")
_STATUS_NAMES = {
    "STATUS_CODE_UNSET": STATUS_UNSET,
    "STATUS_CODE_OK": STATUS_OK,
    "STATUS_CODE_ERROR": STATUS_ERROR,
}
_ZERO_SPAN_ID = "0" * (2 * _SPAN_ID_BYTES)
_MAX_REPR = 40
_MAX_DIGITS = 20
"""Digits of the largest 64-bit integer; longer strings are rejected before ``int()``."""
_LEGACY_SCOPE_SPANS = "instrumentation_library_spans"


class _FieldError(ValueError):
    """A malformed OTLP/JSON or protobuf field; ``str()`` gives ``path: problem``."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}" if path else problem)
        self.path = path
        self.problem = problem

    def under(self, prefix: str) -> _FieldError:
        """Return the same error with ``prefix`` prepended to its field path."""
        if not self.path:
            return _FieldError(prefix, self.problem)
        sep = "" if self.path.startswith("[") else "."
        return _FieldError(f"{prefix}{sep}{self.path}", self.problem)


def _short(value: Any) -> str:
    """Return a repr of ``value`` cut to 40 characters, for error messages."""
    text = repr(value)
    return text if len(text) <= _MAX_REPR else text[: _MAX_REPR - 3] + "..."


def _lookup(obj: Mapping[str, Any], *names: str) -> tuple[str, Any]:
    """Return ``(key, value)`` of the first of ``names`` present in ``obj`` (``names[0]``, None)."""
    for name in names:
        value = obj.get(name)
        if value is not None:
            return name, value
    return names[0], None


def _as_mapping(value: Any) -> Mapping[str, Any]:
    """Return ``value`` if it is a JSON object, else raise a path-less ``_FieldError``."""
    if type(value) is not dict and not isinstance(value, Mapping):
        raise _FieldError("", f"expected an object, got {type(value).__name__}")
    return value


def _as_list(obj: Mapping[str, Any], *names: str) -> tuple[str, list[Any]]:
    """Return ``(key, list)`` of the first of ``names`` present; an absent field is empty."""
    key, value = _lookup(obj, *names)
    if value is None:
        return key, []
    if not isinstance(value, list):
        raise _FieldError(key, f"expected a list, got {type(value).__name__}")
    return key, value


def _items(
    obj: Mapping[str, Any], decode: Callable[[Mapping[str, Any]], _T], *names: str
) -> list[_T]:
    """Return ``decode(item)`` for each object of a list field; errors get the item's path."""
    key, items = _as_list(obj, *names)
    result = []
    for index, item in enumerate(items):
        try:
            result.append(decode(_as_mapping(item)))
        except _FieldError as exc:
            raise exc.under(f"{key}[{index}]") from None
    return result


def _within(path: str, decode: Callable[[Any], _T], value: Any) -> _T:
    """Return ``decode(value)``; errors get ``path`` as prefix."""
    try:
        return decode(value)
    except _FieldError as exc:
        raise exc.under(path) from None


# --- OTLP/JSON -----------------------------------------------------------------------------


def spans_from_json_request(doc: Mapping[str, Any]) -> Iterator[SpanRecord]:
    """Yield the spans of an OTLP/JSON ``ExportTraceServiceRequest`` already parsed from JSON.

    Accepts lowerCamelCase and snake_case keys, hex or base64 ids, times as strings or
    integers, status codes as integers or enum names, and the legacy
    ``instrumentationLibrarySpans``. Spans are decoded one ``ResourceSpans`` at a time.

    Args:
        doc: the decoded JSON object (``{"resourceSpans": [...]}``).

    Yields:
        One record per span, in document order.

    Raises:
        ValueError: when a field is malformed; the message starts with its path, e.g.
            ``resourceSpans[0].scopeSpans[1].spans[3].traceId: expected 32 hex digits, got 'zz'``.
    """
    try:
        key, items = _as_list(_as_mapping(doc), "resourceSpans", "resource_spans")
        for index, item in enumerate(items):
            yield from _within(f"{key}[{index}]", _json_resource_spans, item)
    except _FieldError as exc:
        raise ValueError(str(exc)) from None
    except RecursionError:
        raise ValueError("attribute values nested too deeply") from None


def _json_resource_spans(obj: Any) -> list[SpanRecord]:
    """Return the spans of one ``ResourceSpans`` object."""
    obj = _as_mapping(obj)
    resource = _within("resource", _json_attributes, _as_mapping_or_empty(obj.get("resource")))
    names = ("scopeSpans", "scope_spans", "instrumentationLibrarySpans", _LEGACY_SCOPE_SPANS)
    per_scope = _items(obj, lambda scope_spans: _json_scope_spans(scope_spans, resource), *names)
    return [span for spans in per_scope for span in spans]


def _json_scope_spans(obj: Mapping[str, Any], resource: Mapping[str, Any]) -> list[SpanRecord]:
    """Return the spans of one ``ScopeSpans`` object."""
    key, scope = _lookup(obj, "scope", "instrumentationLibrary", "instrumentation_library")
    name = _within(key, lambda value: _json_str(_as_mapping_or_empty(value), "name"), scope)
    return _items(obj, lambda span: _json_span(span, resource, name), "spans")


def _as_mapping_or_empty(value: Any) -> Mapping[str, Any]:
    """Return ``value`` as a JSON object, None being an empty one."""
    return {} if value is None else _as_mapping(value)


def _json_span(obj: Mapping[str, Any], resource: Mapping[str, Any], scope: str) -> SpanRecord:
    """Return the record of one OTLP/JSON ``Span`` object."""
    status_code, status_message = _within("status", _json_status, obj.get("status"))
    return SpanRecord(
        trace_id=_json_id(obj, _TRACE_ID_BYTES, "traceId", "trace_id"),
        span_id=_json_id(obj, _SPAN_ID_BYTES, "spanId", "span_id"),
        parent_span_id=_json_parent_id(obj),
        name=_json_str(obj, "name"),
        start_time_ns=_json_time(obj, "startTimeUnixNano", "start_time_unix_nano"),
        end_time_ns=_json_time(obj, "endTimeUnixNano", "end_time_unix_nano"),
        attributes=_json_attributes(obj),
        status_code=status_code,
        status_message=status_message,
        scope_name=scope,
        resource=resource,
        events=tuple(_items(obj, _json_event, "events")),
    )


def _json_id(obj: Mapping[str, Any], size: int, *names: str) -> str:
    """Return the id field as lower-case hex; accepts hex or base64."""
    key, value = _lookup(obj, *names)
    if isinstance(value, str):
        if len(value) == 2 * size and _HEX_RE.fullmatch(value):
            return value.lower()
        decoded = _b64decode(value)
        if decoded is not None and len(decoded) == size:
            return decoded.hex()
    raise _FieldError(key, f"expected {2 * size} hex digits, got {_short(value)}")


def _json_parent_id(obj: Mapping[str, Any]) -> str | None:
    """Return the parent span id as hex, or None when absent, empty or all zeros."""
    _, value = _lookup(obj, "parentSpanId", "parent_span_id")
    if not value:
        return None
    parent = _json_id(obj, _SPAN_ID_BYTES, "parentSpanId", "parent_span_id")
    return None if parent == _ZERO_SPAN_ID else parent


def _b64decode(text: str) -> bytes | None:
    """Return the bytes of standard or URL-safe base64 ``text``, or None if it is not base64."""
    try:
        return base64.b64decode(text.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        return None


def _json_str(obj: Mapping[str, Any], name: str) -> str:
    """Return the string field ``name`` (absent is ``""``)."""
    value = obj.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _FieldError(name, f"expected a string, got {_short(value)}")
    return value


def _json_time(obj: Mapping[str, Any], *names: str) -> int:
    """Return a ``fixed64`` nanosecond timestamp given as a decimal string or an integer."""
    key, value = _lookup(obj, *names)
    if value is None:
        return 0
    if isinstance(value, str) and _is_digits(value):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    raise _FieldError(key, f"expected a non-negative integer, got {_short(value)}")


def _is_digits(text: str) -> bool:
    """Return True for a non-empty string of at most 20 ASCII digits."""
    return len(text) <= _MAX_DIGITS and text.isascii() and text.isdigit()


def _json_status(status: Any) -> tuple[int, str]:
    """Return ``(code, message)`` of a ``Status`` object (absent is unset)."""
    status = _as_mapping_or_empty(status)
    code = status.get("code", STATUS_UNSET)
    if isinstance(code, str):
        code = _STATUS_NAMES.get(code, int(code) if _is_digits(code) else -1)
    if not isinstance(code, int) or isinstance(code, bool) or code < 0:
        raise _FieldError("code", f"expected 0, 1, 2 or STATUS_CODE_*, got {_short(code)}")
    return code, _json_str(status, "message")


def _json_event(event: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """Return ``(name, attributes)`` of one span event."""
    return _json_str(event, "name"), _json_attributes(event)


def _json_attributes(obj: Mapping[str, Any], name: str = "attributes") -> dict[str, Any]:
    """Return the ``KeyValue`` list field ``name`` of ``obj`` as a dict."""
    return dict(_items(obj, _json_key_value, name))


def _json_key_value(pair: Mapping[str, Any]) -> tuple[str, Any]:
    """Return ``(key, value)`` of one ``KeyValue`` object, string values taking a fast path."""
    key, value = pair.get("key"), pair.get("value")
    if type(key) is str and type(value) is dict and type(value.get("stringValue")) is str:
        return key, value["stringValue"]
    return _json_str(pair, "key"), _within("value", _json_value, value)


def _json_value(value: Any) -> Any:
    """Decode an OTLP/JSON ``AnyValue`` (absent or empty is None)."""
    for key, raw in _as_mapping_or_empty(value).items():
        decode = _JSON_VALUE_DECODERS.get(key)
        if decode is not None:
            return _within(key, decode, raw)
    return None


def _expect(kind: type[_T], label: str) -> Callable[[Any], _T]:
    """Return a decoder that accepts only values of ``kind``."""

    def decode(raw: Any) -> _T:
        if not isinstance(raw, kind):
            raise _FieldError("", f"expected {label}, got {_short(raw)}")
        return raw

    return decode


def _decode_int(raw: Any) -> int:
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and _is_digits(raw.removeprefix("-")):
        return int(raw)
    raise _FieldError("", f"expected an integer, got {_short(raw)}")


def _decode_double(raw: Any) -> float:
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return float(raw)
    if raw in ("NaN", "Infinity", "-Infinity"):
        return float(raw)
    raise _FieldError("", f"expected a number, got {_short(raw)}")


def _decode_bytes(raw: Any) -> str:
    if isinstance(raw, str):
        decoded = _b64decode(raw)
        if decoded is not None:
            return decoded.hex()
        if len(raw) % 2 == 0 and _HEX_RE.fullmatch(raw):
            return raw.lower()
    raise _FieldError("", f"expected base64 bytes, got {_short(raw)}")


_JSON_VALUE_DECODERS: dict[str, Callable[[Any], Any]] = {
    name: decoder
    for names, decoder in (
        (("stringValue", "string_value"), _expect(str, "a string")),
        (("boolValue", "bool_value"), _expect(bool, "true or false")),
        (("intValue", "int_value"), _decode_int),
        (("doubleValue", "double_value"), _decode_double),
        (("bytesValue", "bytes_value"), _decode_bytes),
        (
            ("arrayValue", "array_value"),
            lambda raw: tuple(_items(_as_mapping(raw), _json_value, "values")),
        ),
        (("kvlistValue", "kvlist_value"), lambda raw: _json_attributes(_as_mapping(raw), "values")),
    )
    for name in names
}


# --- OTLP protobuf -------------------------------------------------------------------------


def spans_from_proto_request(req: ExportTraceServiceRequest) -> Iterator[SpanRecord]:
    """Yield the spans of a protobuf ``ExportTraceServiceRequest``.

    Args:
        req: the parsed message (``trace_service_pb2.ExportTraceServiceRequest``).

    Yields:
        One record per span, in message order; ids become lower-case hex.

    Raises:
        ValueError: when an id has the wrong length; the message starts with the field path,
            e.g. ``resource_spans[0].scope_spans[0].spans[2].trace_id: expected 16 bytes, got 3``.
    """
    for i, resource_spans in enumerate(req.resource_spans):
        resource = _proto_attributes(resource_spans.resource.attributes)
        for j, scope_spans in enumerate(resource_spans.scope_spans):
            scope_name = scope_spans.scope.name
            for k, span in enumerate(scope_spans.spans):
                try:
                    yield _proto_span(span, resource, scope_name)
                except _FieldError as exc:
                    path = f"resource_spans[{i}].scope_spans[{j}].spans[{k}]"
                    raise ValueError(str(exc.under(path))) from None


def _proto_span(span: ProtoSpan, resource: Mapping[str, Any], scope: str) -> SpanRecord:
    """Return the record of one protobuf ``Span``."""
    parent = span.parent_span_id
    return SpanRecord(
        trace_id=_proto_id(span.trace_id, _TRACE_ID_BYTES, "trace_id"),
        span_id=_proto_id(span.span_id, _SPAN_ID_BYTES, "span_id"),
        parent_span_id=_proto_parent_id(parent) if parent else None,
        name=span.name,
        start_time_ns=span.start_time_unix_nano,
        end_time_ns=span.end_time_unix_nano,
        attributes=_proto_attributes(span.attributes),
        status_code=span.status.code,
        status_message=span.status.message,
        scope_name=scope,
        resource=resource,
        events=tuple((e.name, _proto_attributes(e.attributes)) for e in span.events),
    )


def _proto_id(raw: bytes, size: int, name: str) -> str:
    """Return a bytes id as lower-case hex."""
    if len(raw) != size:
        raise _FieldError(name, f"expected {size} bytes, got {len(raw)}")
    return raw.hex()


def _proto_parent_id(raw: bytes) -> str | None:
    """Return a non-empty parent span id as hex, or None when it is all zeros."""
    parent = _proto_id(raw, _SPAN_ID_BYTES, "parent_span_id")
    return None if parent == _ZERO_SPAN_ID else parent


def _proto_attributes(pairs: Any) -> dict[str, Any]:
    """Return repeated ``KeyValue`` as a dict."""
    return {kv.key: _proto_value(kv.value) for kv in pairs}


def _proto_value(value: AnyValue) -> Any:
    """Decode a protobuf ``AnyValue`` (unset is None)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return tuple(_proto_value(v) for v in value.array_value.values)
    if kind == "kvlist_value":
        return _proto_attributes(value.kvlist_value.values)
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind)


# --- SDK -----------------------------------------------------------------------------------


def raw_attributes(span: Any) -> Mapping[str, Any]:
    """Return a span's attributes as a plain ``dict`` when the SDK allows, for fast reads.

    ``span.attributes`` is a ``MappingProxyType`` over ``BoundedAttributes``, whose ``in`` and
    ``get`` run Python code (``collections.abc.Mapping``); the hot path reads several keys of
    every span. The SDK keeps the values in ``BoundedAttributes._dict`` (a private name, checked
    at run time: any other shape falls back to the public property). Callers only read it.
    """
    try:
        inner = span._attributes._dict
    except AttributeError:
        inner = None
    if isinstance(inner, dict):
        return inner
    attributes: Mapping[str, Any] = span.attributes or {}
    return attributes


def span_record_from_readable(span: ReadableSpan) -> SpanRecord:
    """Return the record of a finished SDK span without copying its attributes.

    The record shares the span's read-only attribute views, which never change once the span
    has ended.

    Args:
        span: a span handed to ``SpanProcessor.on_end``.

    Returns:
        The record; a span without a context (never the case for SDK spans) gets zero ids.
    """
    context = span.context
    parent = span.parent
    scope = span.instrumentation_scope
    return SpanRecord(
        trace_id=format(context.trace_id if context else 0, "032x"),
        span_id=format(context.span_id if context else 0, "016x"),
        parent_span_id=format(parent.span_id, "016x") if parent else None,
        name=span.name,
        start_time_ns=span.start_time or 0,
        end_time_ns=span.end_time or 0,
        attributes=raw_attributes(span),
        status_code=span.status.status_code.value,
        status_message=span.status.description or "",
        scope_name=scope.name if scope else "",
        resource=span.resource.attributes,
        events=tuple((e.name, e.attributes or {}) for e in span.events),
    )
