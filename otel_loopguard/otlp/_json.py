"""OTLP/JSON ``ExportTraceServiceRequest`` to ``SpanRecord`` (and, for forwarding, SDK spans).

One pass over the document: a malformed span is left out and counted, the others are kept
(OTLP partial success); a broken structure (a list or an object where the other is expected)
fails the whole request. Accepts lowerCamelCase and snake_case keys, hex or base64 ids, times
as strings or integers, status codes and span kinds as integers or enum names, and the legacy
``instrumentationLibrarySpans``.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

from otel_loopguard.otlp._spans import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    MAX_VALUE_DEPTH,
    SPAN_ID_BYTES,
    TRACE_ID_BYTES,
    UINT32_MAX,
    UINT64_MAX,
    ZERO_SPAN_ID,
    DecodedSpans,
    FieldError,
    TooDeep,
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
_MAX_DIGITS: Final = 20
"""Digits of the largest unsigned 64-bit integer; longer strings are refused before ``int()``."""


# --- parsing -------------------------------------------------------------------------------
_LONG_DIGITS: Final = 19
_DIGIT_RUNS: Final = bytes(ord("0") if chr(c) in "0123456789" else ord('"') if chr(c) == '"'
                           else ord(" ") for c in range(256))
"""Maps digits to ``0``, a quote to itself, all else to a space (``bytes.translate``). A minus
is not a digit: a negative number's digits follow it, and tool output is full of ``-----``
rules, which must not send a document to the slower stdlib parser."""
_LONG_RUN: Final = b"0" * _LONG_DIGITS
_QUOTED_LONG_RUN: Final = b'"' + _LONG_RUN
"""19 digits after a quote: the start of a string, such as OTLP/JSON's times, not a number."""
_MAYBE_SURROGATE: Final = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]|\x00")
"""A surrogate escape, a UTF-8-encoded surrogate, or a NUL (UTF-16/32 text)."""


def loads_json(body: bytes, *, exact_numbers: bool = True) -> Any:
    r"""Return ``json.loads(body)``, computed by orjson whenever the result is the same.

    This is the one speed path of OTLP/JSON decoding: orjson parses export requests several
    times faster than the stdlib (``benchmarks/profile_serve.py``, ``decode_json``). orjson is
    strict RFC 8259 where the stdlib also takes NaN, Infinity, a BOM and UTF-16 (and words the
    errors): on any orjson error the stdlib decides. orjson also turns integers outside
    -2**63 .. 2**64-1 into floats where the stdlib keeps them exact, so a body that may hold a
    number of 19 digits or more goes to the stdlib: one that holds a run of 19 digits not
    right after a quote, or a run of 38 (rare: a quoted run that long takes the stdlib too). Two
    counts tell this; each skips 20 bytes at a time over the text between digits, where a search
    for a non-quote before 19 digits went byte by byte (73 MB of bench_check_parse's traces:
    39 ms against 84 ms, a third of ``json.loads``'s time).

    With ``exact_numbers=False`` that test is left out: an integer beyond 64 bits may come back
    as a float, the one ``float(n)`` gives (orjson rounds it correctly, as
    ``tests/test_otlp_fuzz.py`` checks; one beyond the double range it refuses). Every integer
    field of OTLP refuses such a number either way, with another message, and a
    ``doubleValue`` takes it as ``float(n)`` either way: decoding that finds nothing wrong gives
    the records the exact parse gives. ``check``'s trace reader parses again when it does.

    Lone UTF-16 surrogates (``"\\ud800"``), which the stdlib lets into strings and no protobuf
    or UTF-8 encoder can write, become U+FFFD.

    Raises:
        ValueError: when the body is not JSON; RecursionError when it nests too deeply.
    """
    runs = body.translate(_DIGIT_RUNS) if exact_numbers else b""
    if runs.count(_LONG_RUN) == runs.count(_QUOTED_LONG_RUN):
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
    doc = json.loads(body)
    return _replace_lone_surrogates(doc) if _MAYBE_SURROGATE.search(body) else doc


def _replace_lone_surrogates(doc: Any) -> Any:
    """Return ``doc`` with lone surrogates in its strings and keys replaced, in place."""
    if type(doc) is str:
        return _text(doc)
    stack = [doc]
    while stack:
        node = stack.pop()
        if type(node) is dict:
            items = list(node.items())
            node.clear()
            for key, value in items:
                if type(value) in (dict, list):
                    stack.append(value)
                node[_text(key)] = _text(value) if type(value) is str else value
        elif type(node) is list:
            for index, value in enumerate(node):
                if type(value) is str:
                    node[index] = _text(value)
                elif type(value) in (dict, list):
                    stack.append(value)
    return doc


def _text(text: str) -> str:
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


# --- structure -----------------------------------------------------------------------------
def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _object(value: Any, path: str) -> Mapping[str, Any]:
    """Return ``value`` if it is a JSON object, else raise ``FieldError`` at ``path``."""
    if type(value) is dict or isinstance(value, Mapping):
        return value
    raise FieldError(path, f"expected an object, got {_type_name(value)}")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _lookup(obj: Mapping[str, Any], names: tuple[str, ...]) -> tuple[str, Any]:
    """Return ``(key, value)`` of the first of ``names`` present in ``obj`` (``names[0]``, None)."""
    for name in names:
        value = obj.get(name)
        if value is not None:
            return name, value
    return names[0], None


def _list(obj: Mapping[str, Any], names: tuple[str, ...], path: str) -> tuple[str, list[Any]]:
    """Return ``(key, list)`` of the first of ``names`` present; an absent field is empty."""
    key, value = _lookup(obj, names)
    if value is None:
        return key, []
    if type(value) is not list:
        raise FieldError(_join(path, key), f"expected a list, got {_type_name(value)}")
    return key, value


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
    out.take(spans, path, _span, resource, name, _payload, (resource_sdk, scope_sdk))


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
                 "traceState": "trace_state", "schemaUrl": "schema_url"}
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
            code, message, scope, resource, () if events is None else _events(events))
        kind = get("kind")
        if not ((type(kind) is int and INT32_MIN <= kind <= INT32_MAX)
                or (type(kind) is str and kind in _KIND_NAMES)):
            _span_kind(kind)
        trace_state = get("traceState")
        if type(trace_state) is not str and (trace_state is not None or _SNAKE_STATE in obj):
            _string(trace_state or _get(obj, "traceState"), "traceState")
        flags = get("flags")
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
                 _raw_attributes(event.get("attributes"))) for event in get("events") or ()],
        links=_links(get("links") or (), _raw_attributes), resource=resource, scope=scope)


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


def _b64decode(text: str) -> bytes | None:
    """Return the bytes of standard or URL-safe base64 ``text``, or None if it is not base64."""
    try:
        return base64.b64decode(text.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        return None


def _string(value: Any, name: str) -> str:
    """Return a string field (absent is ``""``)."""
    if type(value) is str:
        return value
    if value is None:
        return ""
    raise FieldError(name, f"expected a string, got {short(value)}")


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
                         f"expected 0, 1, 2 or STATUS_CODE_*, got {short(code)}")
    return number, _string(status.get("message"), "status.message")


def _span_kind(kind: Any) -> int:
    number = 0 if kind is None else _enum(kind, _KIND_NAMES)
    if number is None:
        raise FieldError("kind", f"expected 0 to 5 or SPAN_KIND_*, got {short(kind)}")
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
           ) -> list[tuple[int, int, str, dict[str, Any]]]:
    """Return ``(trace id, span id, trace state, attributes)`` of each link."""
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
                            decode(link.get("attributes"), name="attributes")))
                _uint32(link.get("flags"), "flags")
            except FieldError as exc:
                raise _spelled(exc, link) from None
        except FieldError as exc:
            raise exc.under(f"links[{index}]") from None
    return out


# --- values --------------------------------------------------------------------------------
class _Values:
    """The OTLP/JSON ``AnyValue`` decoder, and the ``KeyValue`` lists made of them.

    Built twice: ``bytes_as`` makes bytesValue hex text in records (as the protobuf decoder
    does), and keeps it bytes in the SDK spans ``serve`` forwards.
    """

    __slots__ = ("_bytes_as", "_members")

    def __init__(self, bytes_as: Callable[[bytes], Any]) -> None:
        self._bytes_as = bytes_as
        self._members: dict[str, Callable[[Any, int], Any]] = {}
        for names, decode in ((("stringValue", "string_value"), _string_value),
                              (("boolValue", "bool_value"), _bool_value),
                              (("intValue", "int_value"), _int_value),
                              (("doubleValue", "double_value"), _double_value),
                              (("bytesValue", "bytes_value"), self._bytes),
                              (("arrayValue", "array_value"), self._array),
                              (("kvlistValue", "kvlist_value"), self._kvlist)):
            self._members.update(dict.fromkeys(names, decode))

    def attributes(self, pairs: Any, depth: int = 0, name: str = "") -> dict[str, Any]:
        """Return a ``KeyValue`` list as a dict (a repeated key keeps its first position).

        A pair with an empty key is left out (OTLP requires a key; the SDK drops it too).
        Errors name their path below ``name``.
        """
        out: dict[str, Any] = {}
        if pairs is None:
            return out
        if type(pairs) is not list:
            raise FieldError(name, f"expected a list, got {_type_name(pairs)}")
        for index, item in enumerate(pairs):
            if type(item) is dict:
                key, raw = item.get("key"), item.get("value")
                if type(key) is str and key and type(raw) is dict:
                    text = raw.get("stringValue")
                    if type(text) is str:
                        out[key] = text
                        continue
                    if len(raw) == 1 and depth < MAX_VALUE_DEPTH:
                        strings = _strings(raw.get("arrayValue"))
                        if strings is not None:
                            out[key] = strings
                            continue
            try:
                pair = _object(item, "")
                key = _string(pair.get("key"), "key")
                try:
                    decoded = self.value(pair.get("value"), depth)
                except FieldError as exc:
                    raise _inner(exc, depth) or exc.under("value") from None
            except FieldError as exc:
                raise _inner(exc, depth) or exc.under(f"{name}[{index}]") from None
            if key:
                out[key] = decoded
        return out

    def value(self, raw: Any, depth: int = 0) -> Any:
        """Decode an ``AnyValue`` (absent or empty is None; the first known member wins)."""
        if raw is None:
            return None
        for member, inner in _object(raw, "").items():
            decode = self._members.get(member)
            if decode is not None:
                try:
                    return decode(inner, depth)
                except FieldError as exc:
                    raise _inner(exc, depth) or exc.under(member) from None
        return None

    def _array(self, raw: Any, depth: int) -> tuple[Any, ...]:
        inner = _nested(depth)
        key, items = _list(_object(raw, ""), ("values",), "")
        out = []
        for index, item in enumerate(items):
            try:
                out.append(self.value(item, inner))
            except FieldError as exc:
                raise _inner(exc, inner) or exc.under(f"{key}[{index}]") from None
        return tuple(out)

    def _kvlist(self, raw: Any, depth: int) -> dict[str, Any]:
        return self.attributes(_object(raw, "").get("values"), _nested(depth), "values")

    def _bytes(self, raw: Any, depth: int) -> Any:
        return self._bytes_as(_bytes(raw))


def _strings(array: Any) -> tuple[str, ...] | None:
    """Return an ``ArrayValue`` of strings alone as ``_Values.value`` does, else None.

    The usual array attribute (GenAI's ``gen_ai.response.finish_reasons`` on every model span)
    read in one frame instead of a frame per level and per element; anything else (another
    member, a value of another kind, an error to word) is left to ``_Values.value``.
    """
    if type(array) is not dict:
        return None
    values = array.get("values")
    if type(values) is not list:
        return None
    out = []
    for item in values:
        text = item.get("stringValue") if type(item) is dict and len(item) == 1 else None
        if type(text) is not str:
            return None
        out.append(text)
    return tuple(out)


def _nested(depth: int) -> int:
    """Return the depth inside an array or map at ``depth``; refuse one level too deep."""
    if depth >= MAX_VALUE_DEPTH:
        raise TooDeep
    return depth + 1


def _inner(error: FieldError, depth: int) -> FieldError | None:
    """Return ``error`` as it is when it is too deep and still inside a value, else None."""
    return error if depth and isinstance(error, TooDeep) else None


def _string_value(raw: Any, depth: int) -> str:
    if type(raw) is not str:
        raise FieldError("", f"expected a string, got {short(raw)}")
    return raw


def _bool_value(raw: Any, depth: int) -> bool:
    if type(raw) is not bool:
        raise FieldError("", f"expected true or false, got {short(raw)}")
    return raw


def _int_value(raw: Any, depth: int) -> int:
    if type(raw) is int:
        number = raw
    elif type(raw) is str and 0 < len(raw) <= _MAX_DIGITS and raw.isascii() and (
            raw.isdigit() or (raw[0] == "-" and raw[1:].isdigit())):
        number = int(raw)
    else:
        raise FieldError("", f"expected an integer, got {short(raw)}")
    if not INT64_MIN <= number <= INT64_MAX:
        raise FieldError("", f"expected a signed 64-bit integer, got {short(raw)}")
    return number


def _double_value(raw: Any, depth: int) -> float:
    if type(raw) is float:
        if math.isfinite(raw):
            return raw
        # A JSON number the parser overflowed (1e999) or a bare NaN/Infinity token (not JSON):
        # out of range, like an integer over int64; the strings "Infinity"/"NaN" are the way.
        raise FieldError("", "expected a number in the double range (or the string "
                         f"'Infinity', '-Infinity' or 'NaN'), got {short(raw)}")
    if type(raw) is int:
        try:
            return float(raw)
        except OverflowError:
            raise FieldError("", f"expected a number in the double range, got {short(raw)}"
                             ) from None
    if raw in ("NaN", "Infinity", "-Infinity"):
        return float(raw)
    raise FieldError("", f"expected a number, got {short(raw)}")


def _bytes(raw: Any) -> bytes:
    if type(raw) is str:
        decoded = _b64decode(raw)
        if decoded is not None:
            return decoded
        if len(raw) % 2 == 0:
            try:
                return bytes.fromhex(raw)
            except ValueError:
                pass
    raise FieldError("", f"expected base64 bytes, got {short(raw)}")


json_attributes: Final = _Values(bytes.hex).attributes
"""Decode an OTLP/JSON ``KeyValue`` list (bytes values as hex text), errors with their path."""
_raw_attributes: Final = _Values(bytes).attributes
