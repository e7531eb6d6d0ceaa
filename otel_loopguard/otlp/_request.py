"""Decoding of OTLP export requests for ``serve``: size caps, decompression, partial success.

Shared by the HTTP and gRPC front ends. Every failure is a :class:`RequestError` carrying the
HTTP status and gRPC code the OTLP specification asks for, and a message naming the problem.
A request whose spans are partly malformed is accepted with the good spans and reports the
others as rejected (OTLP partial success); one whose spans are all malformed is rejected.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from otel_loopguard.otlp._fast import json_spans, loads_json, proto_spans
from otel_loopguard.otlp._reference import spans_from_json_request, spans_from_proto_request
from otel_loopguard.types import SpanRecord

__all__ = ["Decoded", "RequestError", "decode_json", "decode_protobuf", "decompress",
           "error_body", "json_one_by_one", "proto_one_by_one", "success_body"]

GRPC_CODES: Final = {"INVALID_ARGUMENT": 3, "NOT_FOUND": 5, "RESOURCE_EXHAUSTED": 8,
                     "UNIMPLEMENTED": 12, "INTERNAL": 13, "UNAVAILABLE": 14,
                     "UNAUTHENTICATED": 16}
"""The ``google.rpc.Code`` values used in error bodies and gRPC statuses."""
_PROTO_MISSING: Final = ("receiving OTLP protobuf needs opentelemetry-proto, a dependency of "
                         "otel-loopguard: pip install opentelemetry-proto")
_WBITS: Final = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS,
                 "deflate": 32 + zlib.MAX_WBITS}
_ONE_PROTO_PREFIX: Final = "resource_spans[0].scope_spans[0].spans[0]"
_ONE_JSON_PREFIX: Final = "resourceSpans[0].scopeSpans[0].spans[0]"
_SCOPE_SPANS_KEYS: Final = ("scopeSpans", "scope_spans", "instrumentationLibrarySpans",
                            "instrumentation_library_spans")
_SCOPE_KEYS: Final = ("scope", "instrumentationLibrary", "instrumentation_library")
class RequestError(Exception):
    """A request the receiver refuses, with its HTTP status, gRPC code and message."""

    def __init__(self, http_status: int, grpc_code: str, message: str, *,
                 retry_after_seconds: float | None = None) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.grpc_code = grpc_code
        """Name of a ``grpc.StatusCode`` (a key of ``GRPC_CODES``)."""
        self.message = message
        self.retry_after_seconds = retry_after_seconds


def invalid(message: str) -> RequestError:
    """Return the error for a request that can never be accepted (HTTP 400, INVALID_ARGUMENT)."""
    return RequestError(400, "INVALID_ARGUMENT", message)


@dataclass(slots=True)
class Decoded:
    """The accepted spans of one request, and how many were rejected."""

    spans: list[SpanRecord]
    rejected: int = 0
    error_message: str = ""
    """Why spans were rejected (the first problem), for the partial-success response."""
    request: Any = None
    """The protobuf request, when the body was protobuf (for forwarding)."""
    doc: Any = None
    """The JSON document, when the body was OTLP/JSON (for forwarding)."""
    payloads: list[Any] | None = None
    """Forwarding copies of ``spans``, filled in by the receiver when it forwards."""
    received_ns: int = 0
    """When the receiver accepted the request (its clock)."""


def decompress(body: bytes, encoding: str, limit: int) -> bytes:
    """Return ``body`` decoded from its ``Content-Encoding``, never more than ``limit`` bytes.

    Raises:
        RequestError: 415 for an unknown encoding, 413 when the decompressed size would exceed
            ``limit`` (a gzip bomb stops after ``limit`` bytes), 400 for corrupt data.
    """
    name = encoding.strip().lower()
    if name in ("", "identity"):
        return body
    wbits = _WBITS.get(name)
    if wbits is None:
        raise RequestError(415, "UNIMPLEMENTED", f"unsupported Content-Encoding {encoding!r}; "
                           "use gzip, deflate or identity")
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise invalid(f"body is not valid {name} data: {exc}") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise RequestError(413, "RESOURCE_EXHAUSTED",
                           f"decompressed body exceeds the {limit}-byte limit")
    if not inflater.eof:
        raise invalid(f"{name} body is truncated")
    return out


def _proto_module() -> Any:
    try:
        from opentelemetry.proto.collector.trace.v1 import (
            trace_service_pb2,
        )
    except ImportError as exc:  # pragma: no cover - opentelemetry-proto is installed in CI
        raise RequestError(415, "UNIMPLEMENTED", _PROTO_MISSING) from exc
    return trace_service_pb2


def decode_protobuf(body: bytes) -> Decoded:
    """Return the spans of a protobuf ``ExportTraceServiceRequest``.

    Raises:
        RequestError: 400 when the body does not parse or every span is malformed.
    """
    pb = _proto_module()
    from google.protobuf.message import DecodeError

    request = pb.ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise invalid("body is not a valid OTLP protobuf ExportTraceServiceRequest: "
                      f"{exc or 'parse error'}") from None
    try:
        return Decoded(proto_spans(request), request=request)
    except ValueError:
        decoded = _checked(proto_one_by_one(request, pb))
        decoded.request = request
        return decoded


def decode_json(body: bytes) -> Decoded:
    """Return the spans of an OTLP/JSON ``ExportTraceServiceRequest`` (hex or base64 ids).

    Raises:
        RequestError: 400 when the body is not a JSON object, its structure is broken, or every
            span is malformed.
    """
    try:
        doc = loads_json(body)
    except (ValueError, RecursionError) as exc:
        raise invalid(f"body is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise invalid("body must be a JSON object (an OTLP ExportTraceServiceRequest), "
                      f"got {type(doc).__name__}")
    try:
        return Decoded(json_spans(doc), doc=doc)
    except ValueError as exc:
        decoded = _checked(json_one_by_one(doc, str(exc)))
        decoded.doc = doc
        return decoded


def _checked(decoded: Decoded) -> Decoded:
    """Reject the request when no span was good; else word the partial-success message."""
    if decoded.rejected and not decoded.spans:
        raise invalid(f"all {decoded.rejected} spans rejected: {decoded.error_message}")
    if decoded.rejected:
        decoded.error_message = f"rejected {decoded.rejected} malformed span(s); first: " \
                                f"{decoded.error_message}"
    return decoded


def _one_by_one(items: Iterator[tuple[str, Callable[[], list[SpanRecord]]]],
                prefix: str) -> Decoded:
    """Decode spans one at a time, keeping the good ones and the first problem."""
    out = Decoded([])
    for path, decode in items:
        try:
            out.spans.extend(decode())
        except ValueError as exc:
            out.rejected += 1
            if not out.error_message:
                out.error_message = path + str(exc).removeprefix(prefix)
    return out


def _records(decode: Callable[[Any], Iterator[SpanRecord]], request: Any) -> list[SpanRecord]:
    return list(decode(request))


def proto_one_by_one(request: Any, pb: Any) -> Decoded:
    def items() -> Iterator[tuple[str, Callable[[], list[SpanRecord]]]]:
        for i, resource_spans in enumerate(request.resource_spans):
            for j, scope_spans in enumerate(resource_spans.scope_spans):
                for k, span in enumerate(scope_spans.spans):
                    one = pb.ExportTraceServiceRequest()
                    rs = one.resource_spans.add()
                    rs.resource.CopyFrom(resource_spans.resource)
                    ss = rs.scope_spans.add()
                    ss.scope.CopyFrom(scope_spans.scope)
                    ss.spans.append(span)
                    yield (f"resource_spans[{i}].scope_spans[{j}].spans[{k}]",
                           partial(_records, spans_from_proto_request, one))

    return _one_by_one(items(), _ONE_PROTO_PREFIX)


def _json_list(obj: Any, keys: tuple[str, ...], problem: str) -> list[Any]:
    if not isinstance(obj, Mapping):
        raise invalid(problem)
    for key in keys:
        value = obj.get(key)
        if value is not None:
            if not isinstance(value, list):
                raise invalid(problem)
            return value
    return []


def json_one_by_one(doc: Mapping[str, Any], problem: str) -> Decoded:
    def items() -> Iterator[tuple[str, Callable[[], list[SpanRecord]]]]:
        for i, rs in enumerate(_json_list(doc, ("resourceSpans", "resource_spans"), problem)):
            for j, ss in enumerate(_json_list(rs, _SCOPE_SPANS_KEYS, problem)):
                scope = next((ss[k] for k in _SCOPE_KEYS if ss.get(k) is not None), None)
                for k, span in enumerate(_json_list(ss, ("spans",), problem)):
                    one = {"resourceSpans": [{"resource": rs.get("resource"), "scopeSpans": [
                        {"scope": scope, "spans": [span]}]}]}
                    yield (f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}]",
                           partial(_records, spans_from_json_request, one))

    return _one_by_one(items(), _ONE_JSON_PREFIX)


def success_body(decoded: Decoded | None, *, as_json: bool) -> bytes:
    """Return the ``ExportTraceServiceResponse`` body, with partial success when spans failed."""
    rejected = decoded.rejected if decoded is not None else 0
    message = decoded.error_message if decoded is not None else ""
    if as_json:
        doc: dict[str, Any] = {}
        if rejected:
            doc["partialSuccess"] = {"rejectedSpans": str(rejected), "errorMessage": message}
        return json.dumps(doc).encode()
    pb = _proto_module()
    response = pb.ExportTraceServiceResponse()
    if rejected:
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = message
    data: bytes = response.SerializeToString()
    return data


def error_body(error: RequestError, *, as_json: bool) -> bytes:
    """Return a ``google.rpc.Status`` body describing ``error`` (OTLP/HTTP 4xx and 5xx)."""
    code = GRPC_CODES.get(error.grpc_code, 2)
    if as_json:
        return json.dumps({"code": code, "message": error.message}).encode()
    try:
        # googleapis-common-protos comes with the OTLP exporters; it ships no type hints.
        from google.rpc import status_pb2  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - googleapis-common-protos comes with the exporters
        return error.message.encode()
    data: bytes = status_pb2.Status(code=code, message=error.message).SerializeToString()
    return data
