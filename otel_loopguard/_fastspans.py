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
import operator
from collections.abc import Callable
from itertools import repeat
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Final, TypeVar

from otel_loopguard._otlp import spans_from_proto_request
from otel_loopguard.types import SpanRecord

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

__all__ = ["make_record", "proto_spans", "slot_copier", "slot_setters"]

_T = TypeVar("_T")


def _call(function: Callable[..., Any], /, *args: Any) -> Any:
    """``operator.call`` (Python 3.11+), for Python 3.10."""
    return function(*args)


call: Final[Callable[..., Any]] = getattr(operator, "call", _call)
_ZERO_SPAN_ID: Final = bytes(8)
_TRACE_ID_BYTES: Final = 16
_SPAN_ID_BYTES: Final = 8


# --- frozen dataclass construction ------------------------------------------------------------
def slot_setters(cls: type) -> tuple[tuple[str, ...], tuple[Callable[[Any, Any], None], ...]]:
    """Return the field names of a slotted dataclass and the setters of their slots.

    Raises:
        TypeError: when ``cls`` is not a plain slotted dataclass whose slots are its fields.
    """
    names = tuple(f.name for f in dataclasses.fields(cls))
    if getattr(cls, "__slots__", None) != names or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} is not a plain slotted dataclass")
    return names, tuple(cls.__dict__[name].__set__ for name in names)


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
