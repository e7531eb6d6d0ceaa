"""Fast paths of ``serve`` and ``check``: OTLP protobuf to ``SpanRecord``, and record copies.

``proto_spans(request)`` returns exactly ``list(spans_from_proto_request(request))`` (the
reference decoder in ``_otlp``), about twice as fast: each protobuf field is read once, through
as few Python-level operations as possible, and records are built without the frozen
dataclass ``__init__``. When a span is malformed the reference decoder runs instead, so the
``ValueError`` and its message are the reference's own.

``make_record`` and ``with_fields`` build frozen, slotted dataclass instances by setting their
slots directly: the generated ``__init__`` of a frozen dataclass goes through
``object.__setattr__`` once per field, and ``dataclasses.replace`` re-reads the class's fields
on every call; both cost more than the work around them on the hot path.
"""

from __future__ import annotations

import dataclasses
import json
import operator
from collections.abc import Callable
from itertools import repeat
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Final, TypeVar

import orjson

from otel_loopguard.otlp._reference import spans_from_json_request, spans_from_proto_request
from otel_loopguard.types import SpanRecord, slot_setters

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

__all__ = ["json_spans", "loads_json", "make_record", "proto_spans", "slot_copier"]

_T = TypeVar("_T")


def _call(function: Callable[..., Any], /, *args: Any) -> Any:
    """``operator.call`` (Python 3.11+), for Python 3.10."""
    return function(*args)


call: Final[Callable[..., Any]] = getattr(operator, "call", _call)
_ZERO_SPAN_ID: Final = bytes(8)
_TRACE_ID_BYTES: Final = 16
_SPAN_ID_BYTES: Final = 8


# --- frozen dataclass construction ------------------------------------------------------------
def _record_maker() -> Callable[..., SpanRecord]:
    try:
        names, setters = slot_setters(SpanRecord)
    except TypeError:  # pragma: no cover - guards a future change of SpanRecord
        return SpanRecord
    if len(names) != 12:  # pragma: no cover - guards a future change of SpanRecord
        return SpanRecord
    s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11 = setters
    new = object.__new__

    def make(trace_id: str, span_id: str, parent_span_id: str | None, name: str,  # noqa: PLR0917
             start_time_ns: int, end_time_ns: int, attributes: Any, status_code: int,
             status_message: str, scope_name: str, resource: Any, events: Any) -> SpanRecord:
        record: SpanRecord = new(SpanRecord)
        s0(record, trace_id)
        s1(record, span_id)
        s2(record, parent_span_id)
        s3(record, name)
        s4(record, start_time_ns)
        s5(record, end_time_ns)
        s6(record, attributes)
        s7(record, status_code)
        s8(record, status_message)
        s9(record, scope_name)
        s10(record, resource)
        s11(record, events)
        return record

    return make


make_record: Final[Callable[..., SpanRecord]] = _record_maker()
"""``make_record(*fields)`` returns what ``SpanRecord(*fields)`` does (all 12, positional)."""


def slot_copier(cls: type[_T], *changed: str) -> Callable[..., _T]:
    """Return ``copy(obj, *values)``: ``dataclasses.replace`` of the ``changed`` fields.

    ``copy(obj, *values)`` equals ``dataclasses.replace(obj, **dict(zip(changed, values)))``
    for instances of exactly ``cls`` (a frozen, slotted dataclass without ``__post_init__``
    whose fields all take part in ``__init__``); anything else goes to ``dataclasses.replace``.
    All fields are read in one ``attrgetter`` call and set through ``map`` (no Python loop).
    """
    try:
        names, setters = slot_setters(cls)
    except TypeError:  # pragma: no cover - guards a future change of the class
        names, setters = (), ()
    plain = bool(names) and all(f.init for f in dataclasses.fields(cls))  # type: ignore[arg-type]
    if names and not set(changed) <= set(names):
        raise TypeError(f"{cls.__name__} has no field among {changed}")
    get_all = attrgetter(*names) if len(names) > 1 else None
    positions = tuple(names.index(name) for name in changed)
    size = len(names)
    new = object.__new__

    def copy(obj: _T, *values: Any) -> _T:
        if get_all is None or not plain or type(obj) is not cls:
            return dataclasses.replace(obj, **dict(zip(changed, values, strict=True)))  # type: ignore[type-var]
        fields = list(get_all(obj))
        for position, value in zip(positions, values, strict=True):
            fields[position] = value
        out: _T = new(cls)
        any(map(call, setters, repeat(out, size), fields))  # each setter returns None
        return out

    return copy


# --- OTLP protobuf ---------------------------------------------------------------------------
class _Malformed(Exception):
    """A span the reference decoder must word the error for."""


def proto_spans(request: ExportTraceServiceRequest) -> list[SpanRecord]:
    """Return ``list(spans_from_proto_request(request))``, faster.

    Raises:
        ValueError: when an id has the wrong length, with the reference decoder's message.
    """
    try:
        return _proto_spans(request)
    except _Malformed:
        return list(spans_from_proto_request(request))


def _proto_spans(request: Any) -> list[SpanRecord]:
    out: list[SpanRecord] = []
    append = out.append
    make = make_record
    value_of = _value
    zero = _ZERO_SPAN_ID
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope.name
            for span in scope_spans.spans:
                trace_id = span.trace_id
                span_id = span.span_id
                parent = span.parent_span_id
                if len(trace_id) != _TRACE_ID_BYTES or len(span_id) != _SPAN_ID_BYTES:
                    raise _Malformed
                if parent:
                    if len(parent) != _SPAN_ID_BYTES:
                        raise _Malformed
                    parent_id = None if parent == zero else parent.hex()
                else:
                    parent_id = None
                attributes: dict[str, Any] = {}
                for kv in span.attributes:
                    value = kv.value
                    text = value.string_value
                    # A non-empty string_value is the oneof's string member; anything else
                    # (another member, an empty string, nothing) takes the general path.
                    attributes[kv.key] = text if text else value_of(value)
                status = span.status
                events = span.events
                append(make(trace_id.hex(), span_id.hex(), parent_id, span.name,
                            span.start_time_unix_nano, span.end_time_unix_nano, attributes,
                            status.code, status.message, scope, resource,
                            tuple([(event.name, _attributes(event.attributes))
                                   for event in events]) if events else ()))
    return out


def _attributes(pairs: Any) -> dict[str, Any]:
    """Return repeated ``KeyValue`` as a dict (a repeated key keeps its first position)."""
    out: dict[str, Any] = {}
    for kv in pairs:
        out[kv.key] = _value(kv.value)
    return out


def _value(value: Any) -> Any:
    """Decode a protobuf ``AnyValue`` (unset is None)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return tuple([_value(item) for item in value.array_value.values])
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind)


# --- OTLP/JSON -------------------------------------------------------------------------------
class _Unusual(Exception):
    """JSON the fast path leaves to the reference decoder (rare shapes, and every error)."""


_UNUSUAL: Final = _Unusual()
_MAX_DIGITS: Final = 20
_SCOPE_SPANS_KEYS: Final = ("scope_spans", "instrumentationLibrarySpans",
                            "instrumentation_library_spans")


def json_spans(doc: Any) -> list[SpanRecord]:
    """Return ``list(spans_from_json_request(doc))``, faster.

    The fast path takes the shape OTLP/JSON exporters write (lowerCamelCase keys, hex ids,
    times as decimal strings, string, boolean, integer and double attribute values); any other
    shape, and any malformed field, goes to the reference decoder, which words the errors.

    Raises:
        ValueError: as ``spans_from_json_request`` does.
    """
    try:
        return _json_request(doc)
    except (_Unusual, OverflowError):
        return list(spans_from_json_request(doc))


def _json_request(doc: Any) -> list[SpanRecord]:
    if type(doc) is not dict:
        raise _UNUSUAL
    items = _first_of(doc, "resourceSpans", "resource_spans")
    if items is None:
        return []
    if type(items) is not list:
        raise _UNUSUAL
    out: list[SpanRecord] = []
    for resource_spans in items:
        if type(resource_spans) is not dict:
            raise _UNUSUAL
        resource = _json_resource(resource_spans.get("resource"))
        scopes = resource_spans.get("scopeSpans")
        if scopes is None:
            if any(resource_spans.get(key) is not None for key in _SCOPE_SPANS_KEYS):
                raise _UNUSUAL
            continue
        if type(scopes) is not list:
            raise _UNUSUAL
        for scope_spans in scopes:
            _json_scope_spans(scope_spans, resource, out)
    return out


def _first_of(obj: dict[str, Any], name: str, other: str) -> Any:
    """Return the first of two fields that is present and not null (None if neither is)."""
    value = obj.get(name)
    return obj.get(other) if value is None else value


def _json_resource(resource: Any) -> dict[str, Any]:
    if resource is None:
        return {}
    if type(resource) is not dict:
        raise _UNUSUAL
    return _json_attributes(resource.get("attributes"))


def _json_scope_spans(scope_spans: Any, resource: dict[str, Any],
                      out: list[SpanRecord]) -> None:
    if type(scope_spans) is not dict:
        raise _UNUSUAL
    scope = scope_spans.get("scope")
    if scope is None:
        if _first_of(scope_spans, "instrumentationLibrary", "instrumentation_library") \
                is not None:
            raise _UNUSUAL
        scope_name = ""
    elif type(scope) is dict:
        scope_name = _json_str(scope.get("name"))
    else:
        raise _UNUSUAL
    spans = scope_spans.get("spans")
    if spans is None:
        return
    if type(spans) is not list:
        raise _UNUSUAL
    append = out.append
    for span in spans:
        append(_json_span(span, resource, scope_name))


def _json_span(span: Any, resource: dict[str, Any], scope: str) -> SpanRecord:
    if type(span) is not dict:
        raise _UNUSUAL
    code, message = _json_status(span.get("status"))
    parent = _first_of(span, "parentSpanId", "parent_span_id")
    if parent:
        parent = _hex_id(parent, 16)
        if parent == _ZERO_HEX_SPAN_ID:
            parent = None
    else:
        parent = None
    events = span.get("events")
    return make_record(
        _hex_id(_first_of(span, "traceId", "trace_id"), 32),
        _hex_id(_first_of(span, "spanId", "span_id"), 16), parent, _json_str(span.get("name")),
        _json_time(_first_of(span, "startTimeUnixNano", "start_time_unix_nano")),
        _json_time(_first_of(span, "endTimeUnixNano", "end_time_unix_nano")),
        _json_attributes(span.get("attributes")), code, message, scope, resource,
        () if events is None else _json_events(events))


def _json_status(status: Any) -> tuple[int, str]:
    if status is None:
        return 0, ""
    if type(status) is not dict:
        raise _UNUSUAL
    code = status.get("code", 0)
    if type(code) is not int or code < 0:
        raise _UNUSUAL
    return code, _json_str(status.get("message"))


def _json_events(events: Any) -> tuple[tuple[str, dict[str, Any]], ...]:
    if type(events) is not list:
        raise _UNUSUAL
    return tuple([_json_event(event) for event in events])


_ZERO_HEX_SPAN_ID: Final = "0" * 16


def _hex_id(value: Any, digits: int) -> str:
    """Return a hex id of ``digits`` digits in lower case."""
    if type(value) is not str or len(value) != digits:
        raise _UNUSUAL
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raise _UNUSUAL from None
    if 2 * len(raw) != digits:  # fromhex skips spaces: "0a 1b..." is not an id
        raise _UNUSUAL
    return value.lower()


def _json_str(value: Any) -> str:
    if value is None:
        return ""
    if type(value) is not str:
        raise _UNUSUAL
    return value


def _json_time(value: Any) -> int:
    if value is None:
        return 0
    if type(value) is str:
        if len(value) <= _MAX_DIGITS and value.isascii() and value.isdigit():
            return int(value)
    elif type(value) is int and value >= 0:
        return value
    raise _UNUSUAL


def _json_event(event: Any) -> tuple[str, dict[str, Any]]:
    if type(event) is not dict:
        raise _UNUSUAL
    return _json_str(event.get("name")), _json_attributes(event.get("attributes"))


def _json_attributes(pairs: Any) -> dict[str, Any]:
    """Return a ``KeyValue`` list as a dict (a repeated key keeps its first position)."""
    out: dict[str, Any] = {}
    if pairs is None:
        return out
    if type(pairs) is not list:
        raise _UNUSUAL
    for pair in pairs:
        if type(pair) is not dict:
            raise _UNUSUAL
        key = pair.get("key")
        value = pair.get("value")
        if type(key) is str and type(value) is dict:
            text = value.get("stringValue")
            if type(text) is str:
                out[key] = text
                continue
        out[_json_str(key)] = _json_value(value)
    return out


def _json_value(value: Any) -> Any:
    """Decode the scalar ``AnyValue`` kinds (the first known member wins, as in the reference)."""
    if value is None:
        return None
    if type(value) is not dict:
        raise _UNUSUAL
    for kind, raw in value.items():
        decode = _JSON_VALUES.get(kind)
        if decode is not None:
            return decode(raw)
    return None


def _string_value(raw: Any) -> Any:
    if type(raw) is not str:
        raise _UNUSUAL
    return raw


def _bool_value(raw: Any) -> Any:
    if type(raw) is not bool:
        raise _UNUSUAL
    return raw


def _int_value(raw: Any) -> Any:
    if type(raw) is str and len(raw) <= _MAX_DIGITS and raw.isascii() and raw.isdigit():
        return int(raw)
    if type(raw) is not int:
        raise _UNUSUAL
    return raw


def _double_value(raw: Any) -> Any:
    if type(raw) is not float and type(raw) is not int:
        raise _UNUSUAL
    return float(raw)


def _other_value(raw: Any) -> Any:
    raise _UNUSUAL


_JSON_VALUES: Final[dict[str, Callable[[Any], Any]]] = {
    "stringValue": _string_value, "boolValue": _bool_value, "intValue": _int_value,
    "doubleValue": _double_value,
    **dict.fromkeys(("string_value", "bool_value", "int_value", "double_value", "bytesValue",
                     "bytes_value", "arrayValue", "array_value", "kvlistValue", "kvlist_value"),
                    _other_value)}
"""Decoders of the ``AnyValue`` members; snake_case, bytes, arrays and maps are left to the
reference decoder."""


_LONG_DIGITS: Final = 19
_DIGIT_RUNS: Final = bytes(ord("0") if chr(c) in "0123456789-" else ord('"') if chr(c) == '"'
                           else ord(" ") for c in range(256))
"""Maps digits and minus to ``0``, a quote to itself, all else to a space (``bytes.translate``)."""
_LONG_NUMBER: Final = b" " + b"0" * _LONG_DIGITS
"""19 digits after anything but a quote: maybe a long number token (numbers in strings, such as
OTLP/JSON's times, follow a quote)."""


def loads_json(body: bytes) -> Any:
    """Return ``json.loads(body)``, computed by orjson whenever the result is the same.

    orjson is strict RFC 8259 where the stdlib also takes NaN, Infinity, a BOM and UTF-16 (and
    words the errors): on any orjson error the stdlib decides. orjson also turns integers
    outside -2**63 .. 2**64-1 into floats where the stdlib keeps them exact, so a body that may
    hold a number of 19 digits or more goes to the stdlib.
    """
    runs = body.translate(_DIGIT_RUNS)
    if _LONG_NUMBER in runs or runs.startswith(_LONG_NUMBER[1:]):
        return json.loads(body)
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)
