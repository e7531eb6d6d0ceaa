"""The spans of one record of a trace file: an OTLP/JSON request, or a protobuf one.

A JSON record is a trace request, a logs request (the coding agents' events) or an array of
them; a protobuf record is one ``ExportTraceServiceRequest``. Good spans are kept and the
others reported (partial success); a record with none raises ``_BadRecord``. Also here, as
JSON parsing: whether a first line opens a JSON document that goes on (``_opens_document``).
"""

from __future__ import annotations

import contextlib
import importlib
import json
from typing import TYPE_CHECKING, Any

from otel_loopguard.coding_agents import AgentRecords
from otel_loopguard.otlp._json import decode_json_spans, loads_json
from otel_loopguard.otlp._logs import decode_json_logs, decode_proto_logs
from otel_loopguard.otlp._proto import decode_proto_spans, decode_wire_spans
from otel_loopguard.otlp._spans import DecodedSpans, FieldError

if TYPE_CHECKING:
    from otel_loopguard.types import SpanRecord

_UTF8_BOM = b"\xef\xbb\xbf"
_SPANS_KEYS = ("resourceSpans", "resource_spans")
_LOGS_KEYS = ("resourceLogs", "resource_logs")
_ELEMENTS_LISTED = 3
"""Bad elements of a JSON array named in its one error; the others are counted."""
_OTHER_SIGNALS = {"resourceMetrics": "metrics",
                  "resource_metrics": "metrics", "resourceProfiles": "profiles",
                  "resource_profiles": "profiles"}


class _BadRecord(Exception):
    """One line, document or message is bad; ``line_offset`` counts from its first line.

    ``extra_data``: the record is a whole JSON value followed by more (``split_documents``).
    """

    def __init__(self, message: str, line_offset: int = 0, *, extra_data: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.line_offset = line_offset
        self.extra_data = extra_data


def split_documents(data: bytes) -> tuple[list[tuple[int, bytes]], _BadRecord | None]:
    """Return the JSON values written one after another in ``data``, and what ends them early.

    ``jq . traces.jsonl`` and ``cat a.json b.json`` write pretty-printed requests back to back:
    one document each. Each value comes with the line it starts on, counted from 0; the error,
    if any, is that of the first text that is not a whole value (its ``line_offset`` counted
    the same way), and nothing after it is read. Only called once ``data`` failed as one value.
    """
    try:
        text = data.decode("utf-8").removeprefix("\ufeff").rstrip(" \t\r\n")
    except UnicodeDecodeError:
        return [], None
    decoder, pos, end = json.JSONDecoder(), 0, len(text)
    found: list[tuple[int, bytes]] = []
    line = counted = 0  # the newlines before ``counted``: each stretch is counted once
    while True:
        while pos < end and text[pos] in " \t\r\n":
            pos += 1
        if pos == end:
            return found, None
        line += text.count("\n", counted, pos)
        counted = pos
        try:
            _, stop = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            return found, _json_error(exc)
        except RecursionError:
            return found, _BadRecord("invalid JSON: nested too deeply", line)
        found.append((line, text[pos:stop].encode()))
        pos = stop


def _opens_document(line: bytes) -> bool:
    """Return True when ``line`` is the start of a JSON document that continues on later lines."""
    try:
        text = line.removeprefix(_UTF8_BOM).decode()
        json.loads(text)
    except json.JSONDecodeError as exc:
        return exc.pos >= len(text.rstrip())
    except (ValueError, RecursionError):
        return False
    return False


def _is_request_line(first: bytes, second: bytes) -> bool:
    """Return True when ``second`` (after a first line left open) is a whole OTLP request.

    The file is then JSON Lines whose first line was cut short, not a document: no line of
    a pretty-printed object is a whole request. A line of an array may be one, so a first
    line that opens an array stays a document.
    """
    if not first.removeprefix(_UTF8_BOM).lstrip().startswith(b"{"):
        return False
    try:
        doc = loads_json(second)
    except (ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and any(key in doc for key in (*_SPANS_KEYS, *_LOGS_KEYS))


def _json_error(exc: json.JSONDecodeError) -> _BadRecord:
    """Return the bad record the stdlib's JSON error words, on the line it names."""
    at = "" if exc.msg.endswith(" at") else " at"  # "Unterminated string starting at"
    return _BadRecord(f"invalid JSON: {exc.msg}{at} column {exc.colno}", exc.lineno - 1,
                      extra_data=exc.msg == "Extra data")


def _parse_json(data: bytes) -> Any:
    """Return the decoded JSON; on failure raise ``_BadRecord`` with the stdlib's message."""
    with contextlib.suppress(ValueError, RecursionError):
        return loads_json(data)  # orjson when it reads what json.loads would; the message below
    try:
        text = data.decode("utf-8")  # not json's own guess, which takes NUL bytes for UTF-16
    except UnicodeDecodeError as exc:
        raise _BadRecord(f"not JSON text: byte 0x{data[exc.start]:02x} at offset {exc.start} "
                         "is not UTF-8 (binary data?)") from None
    try:  # without the line's newline: a line cut short fails at its end, not on the next line
        return json.loads(text.removeprefix("\ufeff").rstrip(" \t\r\n"))
    except json.JSONDecodeError as exc:
        raise _json_error(exc) from None
    except RecursionError:
        raise _BadRecord("invalid JSON: nested too deeply") from None
    except ValueError as exc:
        raise _BadRecord(f"invalid JSON: {exc}") from None


def _decode_json(data: bytes, agents: AgentRecords) -> tuple[list[SpanRecord], str]:
    """Return the good spans of one OTLP/JSON request (or JSON array of them).

    A logs request gives the records of its coding-agent events (``coding_agents``); a trace
    request its spans, plus a session record for each coding-agent tool span. Also returns the
    problem with the others ("" when every span is good).
    """
    clean = _clean_trace_spans(data, agents)
    if clean is not None:
        return clean, ""
    doc = _parse_json(data)
    if not isinstance(doc, list):
        return _spans_of_json_request(doc, agents)
    spans, problems = [], []
    for index, request in enumerate(doc):  # a bad element loses itself, not its neighbours
        try:
            good, problem = _spans_of_json_request(request, agents)
        except _BadRecord as exc:
            good, problem = [], exc.message
        spans.extend(good)
        if problem:
            problems.append(f"element {index}: {problem}")
    listed = "; ".join(problems[:_ELEMENTS_LISTED]) + (
        f"; and {len(problems) - _ELEMENTS_LISTED} more bad elements"
        if len(problems) > _ELEMENTS_LISTED else "")
    if problems and not spans:
        raise _BadRecord(listed)
    return spans, listed


def _clean_trace_spans(data: bytes, agents: AgentRecords) -> list[SpanRecord] | None:
    """Return the spans of trace requests in which nothing is wrong, or None.

    The record is parsed without ``loads_json``'s test for integers beyond 64 bits (a tenth of
    the cost of reading a span): decoding that finds nothing wrong gives the same records
    either way (``loads_json``, ``exact_numbers``). None when anything is wrong or the record
    holds a logs request: ``_decode_json`` then reads it as before, exactly, and words it.
    The coding agents' records (which keep state) are taken only once all is known good.
    """
    decoded: list[list[SpanRecord]] = []
    try:
        doc = loads_json(data, exact_numbers=False)
        for request in doc if isinstance(doc, list) else (doc,):
            found = _trace_request(request)
            if found is None or found.rejected:
                return None
            decoded.append(found.spans)
    except Exception:  # whatever it is, the exact reading below decides and words it
        return None
    spans: list[SpanRecord] = []
    for good in decoded:
        spans += good
        spans += agents.from_spans(good)
    return spans


def _trace_request(request: Any) -> DecodedSpans | None:
    """Return the spans of a trace request, None for anything else (``{}`` holds none)."""
    if isinstance(request, dict) and (any(k in request for k in _LOGS_KEYS) or (
            request and not any(k in request for k in _SPANS_KEYS))):
        return None
    return decode_json_spans(request)


def _spans_of_json_request(request: Any, agents: AgentRecords) -> tuple[list[SpanRecord], str]:
    if isinstance(request, dict) and any(k in request for k in _LOGS_KEYS):
        return _records_of_json_logs(request, agents)
    if isinstance(request, dict) and request and not any(k in request for k in _SPANS_KEYS):
        raise _BadRecord(_not_a_trace_request(request))
    try:
        decoded = decode_json_spans(request)
    except FieldError as exc:
        raise _BadRecord(str(exc)) from None
    spans, problem = _partial(decoded)
    return spans + agents.from_spans(spans), problem


def _records_of_json_logs(request: dict[str, Any],
                          agents: AgentRecords) -> tuple[list[SpanRecord], str]:
    """Return the coding-agent records of an OTLP/JSON logs request (Collector file output)."""
    try:
        decoded = decode_json_logs(request)
    except FieldError as exc:
        raise _BadRecord(str(exc)) from None
    if decoded.rejected and not decoded.events:
        raise _BadRecord(f"all {decoded.rejected} log records rejected: {decoded.problem}")
    problem = (f"rejected {decoded.rejected} malformed log record(s), kept "
               f"{len(decoded.events)}; first: {decoded.problem}") if decoded.rejected else ""
    return agents.from_events(decoded.events), problem


def _not_a_trace_request(request: dict[str, Any]) -> str:
    """Word why a JSON object without ``resourceSpans`` is reported (``{}`` is an empty request)."""
    for key, signal in _OTHER_SIGNALS.items():
        if key in request:
            return f"an OTLP {signal} request, not traces ({key})"
    keys = ", ".join(repr(k) for k in list(request)[:3]) + (", ..." if len(request) > 3 else "")
    return f"not an OTLP trace request: no resourceSpans (keys: {keys})"


def _partial(decoded: DecodedSpans) -> tuple[list[SpanRecord], str]:
    """Keep the good spans of a partly malformed record (as serve's partial success does)."""
    spans, rejected = decoded.spans, decoded.rejected
    if not rejected:
        return spans, ""
    if not spans:
        raise _BadRecord(f"all {rejected} spans rejected: {decoded.problem}")
    return spans, (f"rejected {rejected} malformed span(s), kept {len(spans)}; first: "
                   f"{decoded.problem}")


def _decode_proto(data: bytes, agents: AgentRecords) -> tuple[list[SpanRecord], str]:
    """Return the spans of one serialized ``ExportTraceServiceRequest``.

    Plus a session record for each coding-agent tool span. A message none of whose spans has
    ids may be an ``ExportLogsServiceRequest`` (the two are alike on the wire: a logs
    pipeline's ``format: proto`` file): read as one, it gives its coding-agent events.

    Raises:
        ImportError: when opentelemetry-proto is not installed.
        _BadRecord: when the message does not parse or holds malformed ids.
    """
    spans = decode_wire_spans(data)  # the C decoder, for a well-formed message
    if spans is not None:
        return spans + agents.from_spans(spans), ""
    # Lazy: JSON files never need protobuf, so reading them never pays for its import.
    decode_error: type[Exception] = importlib.import_module("google.protobuf.message").DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    try:
        request = ExportTraceServiceRequest.FromString(data)
    except (decode_error, ValueError, RecursionError) as exc:
        raise _BadRecord(f"invalid protobuf: {exc}") from None
    decoded = decode_proto_spans(request)
    if decoded.rejected and not decoded.spans:
        logs = _proto_logs(data, decode_error, agents)
        if logs is not None:
            return logs
    spans, problem = _partial(decoded)
    return spans + agents.from_spans(spans), problem


def _proto_logs(data: bytes, decode_error: type[Exception],
                agents: AgentRecords) -> tuple[list[SpanRecord], str] | None:
    """Return the records of ``data`` read as an ``ExportLogsServiceRequest``, or None.

    None when it does not read as one whose every log record is good: a trace request whose
    spans are malformed is then reported as such.
    """
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    try:
        decoded = decode_proto_logs(ExportLogsServiceRequest.FromString(data))
    except (decode_error, ValueError, RecursionError, FieldError):
        return None
    if decoded.rejected or not decoded.events:
        return None
    return agents.from_events(decoded.events), ""
