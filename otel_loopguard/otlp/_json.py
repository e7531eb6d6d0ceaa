"""OTLP/JSON ``ExportTraceServiceRequest`` to ``SpanRecord`` (and, for forwarding, SDK spans).

One pass over the document: a malformed span is left out and counted, the others are kept
(OTLP partial success); a broken structure (a list or an object where the other is expected)
fails the whole request. Accepts lowerCamelCase and snake_case keys, hex or base64 ids, times
as strings or integers, status codes and span kinds as integers or enum names, and the legacy
``instrumentationLibrarySpans``. The bytes are parsed by ``otlp._json_read``, attribute values
decoded by ``otlp._json_values``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from otel_loopguard._native import load
from otel_loopguard.otlp._json_read import loads_json
from otel_loopguard.otlp._json_values import (
    _MAX_DIGITS,
    _b64decode,
    _list,
    _lookup,
    _object,
    _raw_attributes,
    _string,
    _type_name,
    json_attributes,
)
from otel_loopguard.otlp._spans import (
    INT32_MAX,
    INT32_MIN,
    REMOTE_PARENT,
    SPAN_ID_BYTES,
    TRACE_ID_BYTES,
    UINT32_MAX,
    UINT64_MAX,
    ZERO_SPAN_ID,
    DecodedSpans,
    FieldError,
    sdk_builders,
    short,
)
from otel_loopguard.types import STATUS_ERROR, STATUS_OK, STATUS_UNSET, SpanRecord

__all__ = ["decode_json_spans", "json_attributes", "loads_json"]

_RESOURCE_SPANS: Final = ("resourceSpans", "resource_spans")
_SCOPE_SPANS: Final = ("scopeSpans", "scope_spans", "instrumentationLibrarySpans",
                       "instrumentation_library_spans")
_SCOPE: Final = ("scope", "instrumentationLibrary", "instrumentation_library")
_STATUS_NAMES: Final = {"STATUS_CODE_UNSET": STATUS_UNSET, "STATUS_CODE_OK": STATUS_OK,
                        "STATUS_CODE_ERROR": STATUS_ERROR}
_KIND_NAMES: Final = {f"SPAN_KIND_{name}": number for number, name in enumerate(
    ("UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"))}
_JSON_SPANS: Final[Callable[..., tuple[list[SpanRecord | None], int] | None] | None] = getattr(
    load("otel_loopguard.otlp._wire"), "json_spans", None)
"""The optional C decoder of a scope's spans (``_wire.c``): the records ``_span`` builds, None
for each span it leaves to ``_span`` (anything but what exporters write, errors included).
``_span`` stays the definition; ``tests/test_wire_json.py`` compares them. ``check``'s reader
(parse and records) takes 0.60x to 0.65x of its CPU without it (``bench_json_decode.py``)."""


def decode_json_spans(doc: Any, *, payloads: bool = False) -> DecodedSpans:
    """Return the spans of an OTLP/JSON ``ExportTraceServiceRequest`` parsed from JSON.

    Args:
        doc: the parsed document (``{"resourceSpans": [...]}``).
        payloads: also build the SDK span of each good span (``DecodedSpans.payloads``).

    Returns:
        The good spans in document order, and the count and first problem of the others,
        e.g. ``resourceSpans[0].scopeSpans[1].spans[3].traceId: expected 32 hex digits, got
        'zz'``. A malformed resource or scope rejects the spans under it.

    Raises:
        FieldError: (a ``ValueError``) when the structure is broken, e.g.
            ``resourceSpans[0].scopeSpans[0]: expected an object, got null``.
    """
    out = DecodedSpans(payloads=[] if payloads else None)
    key, items = _list(_object(doc, ""), _RESOURCE_SPANS, "")
    for index, resource_spans in enumerate(items):
        path = f"{key}[{index}]"
        _resource_spans(_object(resource_spans, path), path, out)
    return out


def _resource_spans(obj: Mapping[str, Any], path: str, out: DecodedSpans) -> None:
    key, scopes = _list(obj, _SCOPE_SPANS, path)
    resource: Any = None
    sdk: Any = None
    error: FieldError | None = None
    try:
        raw = obj.get("resource")
        raw = {} if raw is None else _object(raw, "resource")
        resource = json_attributes(raw.get("attributes"), name="resource.attributes")
        schema = _string(_get(obj, "schemaUrl"), "schemaUrl")
        if out.payloads is not None:
            sdk = sdk_builders().sdk_resource(_raw_attributes(raw.get("attributes")), schema)
    except FieldError as exc:
        error = exc.under(path)
    for index, scope_spans in enumerate(scopes):
        scope_path = f"{path}.{key}[{index}]"
        _scope_spans(_object(scope_spans, scope_path), scope_path, resource, sdk, error, out)


def _scope_spans(obj: Mapping[str, Any], path: str, resource: Any, resource_sdk: Any,  # noqa: PLR0917
                 error: FieldError | None, out: DecodedSpans) -> None:
    spans = _list(obj, ("spans",), path)[1]
    if error is None:
        try:
            name, scope_sdk = _scope(obj, out.payloads is not None)
        except FieldError as exc:
            error = exc.under(path)
    if error is not None:
        out.reject(len(spans), error)
        return
    done = None
    if out.payloads is None and _JSON_SPANS is not None:  # the C decoder, where it is built
        native = _JSON_SPANS(spans, resource, name, SpanRecord)
        if native is not None:
            done, holes = native
            if not holes:
                out.spans.extend(done)  # type: ignore[arg-type]  # no None: no holes
                return
    out.take(spans, path, _span, resource, name, _payload, (resource_sdk, scope_sdk), done)


def _scope(obj: Mapping[str, Any], sdk: bool) -> tuple[str, Any]:
    """Return the scope's name, and its SDK scope when ``sdk`` is set."""
    key, scope = _lookup(obj, _SCOPE)
    scope = {} if scope is None else _object(scope, key)
    try:
        name = _string(scope.get("name"), "name")
        version = _string(scope.get("version"), "version")
        json_attributes(scope.get("attributes"), name="attributes")  # forwarded
    except FieldError as exc:
        raise exc.under(key) from None
    schema = _string(_get(obj, "schemaUrl"), "schemaUrl")
    if not sdk:
        return name, None
    return name, sdk_builders().sdk_scope(name, version, schema,
                                          _raw_attributes(scope.get("attributes")))


# --- spans ---------------------------------------------------------------------------------
_SNAKE: Final = {"traceId": "trace_id", "spanId": "span_id", "parentSpanId": "parent_span_id",
                 "startTimeUnixNano": "start_time_unix_nano",
                 "endTimeUnixNano": "end_time_unix_nano", "timeUnixNano": "time_unix_nano",
                 "traceState": "trace_state", "schemaUrl": "schema_url",
                 "droppedAttributesCount": "dropped_attributes_count",
                 "droppedEventsCount": "dropped_events_count",
                 "droppedLinksCount": "dropped_links_count"}
"""The snake_case spelling of each two-word field the decoder reads."""


def _get(obj: Mapping[str, Any], camel: str) -> Any:
    """Return the field ``camel``, or its snake_case spelling when that is the one present."""
    value = obj.get(camel)
    return obj.get(_SNAKE[camel]) if value is None else value


def _spelled(error: FieldError, obj: Mapping[str, Any]) -> FieldError:
    """Return ``error`` with its field named as ``obj`` spells it (camelCase or snake_case)."""
    head, dot, rest = error.path.partition(".")
    snake = _SNAKE.get(head.split("[", 1)[0])
    if snake is None or obj.get(head.split("[", 1)[0]) is not None or obj.get(snake) is None:
        return error
    return FieldError(snake + head[len(head.split("[", 1)[0]):] + dot + rest, error.problem)


def _span(obj: Any, resource: Mapping[str, Any], scope: str) -> SpanRecord:
    """Return the record of one OTLP/JSON ``Span``; validate what only forwarding reads.

    What exporters write (camelCase keys, decimal-string times, ids repeated from the spans
    before) is read inline, in the order the field readers would read it; anything else goes
    to those readers, which also word the errors.
    """
    if type(obj) is not dict:
        obj = _object(obj, "")
    get = obj.get
    try:
        status = get("status")
        code, message = (STATUS_UNSET, "") if status is None or status == {} \
            else _status(status)
        trace, parent = get("traceId"), get("parentSpanId")
        start, end = get("startTimeUnixNano"), get("endTimeUnixNano")
        events = get("events")
        flags = get("flags")  # validated below, with what only forwarding reads
        record = SpanRecord(
            _TRACE_IDS.get(trace) or _known_trace_id(trace) if type(trace) is str
            else _id(trace or _get(obj, "traceId"), TRACE_ID_BYTES, "traceId"),
            _id(get("spanId") or _get(obj, "spanId"), SPAN_ID_BYTES, "spanId"),
            _PARENT_IDS.get(parent) or _known_parent_id(parent)
            if parent and type(parent) is str else _any_parent(parent, obj),
            name if type(name := get("name")) is str else _string(name, "name"),
            int(start) if type(start) is str and start.isascii() and start.isdigit()
            and len(start) < _MAX_DIGITS  # fewer digits than 2**64 - 1: in range
            else _time(start or _get(obj, "startTimeUnixNano"), "startTimeUnixNano"),
            int(end) if type(end) is str and end.isascii() and end.isdigit()
            and len(end) < _MAX_DIGITS
            else _time(end or _get(obj, "endTimeUnixNano"), "endTimeUnixNano"),
            json_attributes(get("attributes"), name="attributes"),
            code, message, scope, resource, () if events is None else _events(events),
            False)
        if type(flags) is int and flags & REMOTE_PARENT == REMOTE_PARENT:  # a root has none
            record.parent_is_remote = record.parent_span_id is not None
        kind = get("kind")
        if not ((type(kind) is int and INT32_MIN <= kind <= INT32_MAX)
                or (type(kind) is str and kind in _KIND_NAMES)):
            _span_kind(kind)
        trace_state = get("traceState")
        if type(trace_state) is not str and (trace_state is not None or _SNAKE_STATE in obj):
            _string(trace_state or _get(obj, "traceState"), "traceState")
        if type(flags) is not int or not 0 <= flags <= UINT32_MAX:
            _uint32(flags, "flags")
        links = get("links")
        if links is not None:
            _links(links)
    except FieldError as exc:
        raise _spelled(exc, obj) from None
    return record


_TRACE_IDS: Final[dict[str, str]] = {}
"""Trace ids read lately, as written → lower-case hex: the spans of a request share theirs, so
each is validated once. Bounded (``_MAX_KNOWN_IDS``); a memo of a pure function, so threads
sharing it need no lock."""
_PARENT_IDS: Final[dict[str, str]] = {}
"""Parent span ids read lately, likewise: a trace's spans have a few parents."""
_MAX_KNOWN_IDS: Final = 4096
_SNAKE_STATE: Final = _SNAKE["traceState"]


def _known_trace_id(value: str) -> str:
    """Return ``_id`` of a trace id; one given in hex is remembered in ``_TRACE_IDS``."""
    found = _id(value, TRACE_ID_BYTES, "traceId")
    if len(value) == 2 * TRACE_ID_BYTES:
        _remember(_TRACE_IDS, value, found)
    return found


def _known_parent_id(value: str) -> str | None:
    """Return ``_parent_id`` of a parent span id; one given in hex is remembered."""
    found = _parent_id(value)
    if found is not None and len(value) == 2 * SPAN_ID_BYTES:
        _remember(_PARENT_IDS, value, found)
    return found


def _remember(known: dict[str, str], value: str, found: str) -> None:
    if len(known) >= _MAX_KNOWN_IDS:
        known.clear()
    known[value] = found


def _any_parent(parent: Any, obj: Mapping[str, Any]) -> str | None:
    """Return the parent span id however it is given (absent, empty or the zero id: None)."""
    parent = parent or _get(obj, "parentSpanId")
    return _parent_id(parent) if parent else None


def _payload(obj: Mapping[str, Any], record: SpanRecord, resource: Any, scope: Any) -> Any:
    """Return the SDK span of a span ``_span`` accepted (bytes values kept as bytes)."""
    get = obj.get
    return sdk_builders().readable_span(
        record, attributes=_raw_attributes(get("attributes")), kind=_span_kind(get("kind")),
        trace_state=_string(_get(obj, "traceState"), "traceState"),
        flags=_uint32(get("flags"), "flags"),
        events=[(_string(event.get("name"), "name"), _time(_get(event, "timeUnixNano"), ""),
                 _raw_attributes(event.get("attributes")), _dropped(event))
                for event in get("events") or ()],
        links=_links(get("links") or (), _raw_attributes), resource=resource, scope=scope,
        dropped=(_dropped(obj), _dropped(obj, "droppedEventsCount"),
                 _dropped(obj, "droppedLinksCount")))


def _dropped(obj: Mapping[str, Any], camel: str = "droppedAttributesCount") -> int:
    """Return a dropped count of ``obj`` for forwarding, as a number or a decimal string.

    Only forwarding reads it, so a count that is not an unsigned 32-bit number is forwarded
    as 0 rather than rejecting a span ``check`` accepts.
    """
    value = _get(obj, camel)
    if type(value) is str and value.isascii() and value.isdigit() and len(value) <= 10:
        value = int(value)
    return value if type(value) is int and 0 <= value <= UINT32_MAX else 0


def _id(value: Any, size: int, name: str) -> str:
    """Return an id given as hex (any case) or base64, as lower-case hex."""
    if type(value) is str:
        if len(value) == 2 * size:
            try:
                if len(bytes.fromhex(value)) == size:  # fromhex skips spaces: "0a 1b ..."
                    return value.lower()
            except ValueError:
                pass
        decoded = _b64decode(value)
        if decoded is not None and len(decoded) == size:
            return decoded.hex()
    raise FieldError(name, f"expected {2 * size} hex digits, got {short(value)}")


def _parent_id(value: Any) -> str | None:
    parent = _id(value, SPAN_ID_BYTES, "parentSpanId")
    return None if parent == ZERO_SPAN_ID else parent


def _time(value: Any, name: str) -> int:
    """Return a ``fixed64`` nanosecond timestamp given as a decimal string or a number."""
    if type(value) is str:
        if len(value) <= _MAX_DIGITS and value.isascii() and value.isdigit():
            number = int(value)
            if number <= UINT64_MAX:
                return number
    elif value is None:
        return 0
    elif type(value) is int:
        if 0 <= value <= UINT64_MAX:
            return value
    elif type(value) is float and value.is_integer() and 0 <= value <= UINT64_MAX:
        return int(value)
    raise FieldError(name, f"expected a non-negative 64-bit integer, got {short(value)}")


def _uint32(value: Any, name: str) -> int:
    if value is None:
        return 0
    if type(value) is int and 0 <= value <= UINT32_MAX:
        return value
    raise FieldError(name, f"expected an unsigned 32-bit integer, got {short(value)}")


def _enum(value: Any, names: Mapping[str, int]) -> int | None:
    """Return an enum given as a number, a decimal string or a name; None when it is none."""
    if type(value) is int:
        return value if INT32_MIN <= value <= INT32_MAX else None
    if type(value) is str:
        if value in names:
            return names[value]
        digits = value.removeprefix("-")
        if len(digits) <= _MAX_DIGITS and digits.isascii() and digits.isdigit():
            number = int(value)
            return number if INT32_MIN <= number <= INT32_MAX else None
    return None


def _status(status: Any) -> tuple[int, str]:
    """Return ``(code, message)`` of a ``Status`` object (absent is unset)."""
    if status is None:
        return STATUS_UNSET, ""
    status = _object(status, "status")
    code = status.get("code")
    number = STATUS_UNSET if code is None else _enum(code, _STATUS_NAMES)
    if number is None:
        raise FieldError("status.code",
                         f"expected STATUS_CODE_* or a 32-bit integer, got {short(code)}")
    return number, _string(status.get("message"), "status.message")


def _span_kind(kind: Any) -> int:
    number = 0 if kind is None else _enum(kind, _KIND_NAMES)
    if number is None:
        raise FieldError("kind", f"expected SPAN_KIND_* or a 32-bit integer, got {short(kind)}")
    return number


def _events(events: Any) -> tuple[tuple[str, dict[str, Any]], ...]:
    """Return ``(name, attributes)`` of each event (their times are validated)."""
    if type(events) is not list:
        raise FieldError("events", f"expected a list, got {_type_name(events)}")
    out = []
    for index, item in enumerate(events):
        try:
            event = _object(item, "")
            try:
                _time(_get(event, "timeUnixNano"), "timeUnixNano")
            except FieldError as exc:
                raise _spelled(exc, event) from None
            out.append((_string(event.get("name"), "name"),
                        json_attributes(event.get("attributes"), name="attributes")))
        except FieldError as exc:
            raise exc.under(f"events[{index}]") from None
    return tuple(out)


def _links(links: Any, attributes: Callable[..., dict[str, Any]] | None = None,
           ) -> list[tuple[int, int, str, dict[str, Any], int, int]]:
    """Return each link's fields (``LinkFields``: ids, trace state, attributes, counts)."""
    if type(links) not in (list, tuple):
        raise FieldError("links", f"expected a list, got {_type_name(links)}")
    decode = attributes or json_attributes
    out = []
    for index, item in enumerate(links):
        try:
            link = _object(item, "")
            try:
                out.append((int(_id(_get(link, "traceId"), TRACE_ID_BYTES, "traceId"), 16),
                            int(_id(_get(link, "spanId"), SPAN_ID_BYTES, "spanId"), 16),
                            _string(_get(link, "traceState"), "traceState"),
                            decode(link.get("attributes"), name="attributes"), _dropped(link),
                            _uint32(link.get("flags"), "flags")))
            except FieldError as exc:
                raise _spelled(exc, link) from None
        except FieldError as exc:
            raise exc.under(f"links[{index}]") from None
    return out
