"""``serve`` under faults: spans it cannot forward, stalled and slow clients, hostile bodies.

Every server binds 127.0.0.1 and port 0. Nothing here asserts a duration: waits are generous
upper bounds for things that must happen, and the checks are on what happened.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags
from test_receiver import (  # noqa: F401 - _fleet is the fleet fixture
    EXPORT,
    JSON,
    PROTOBUF,
    TOKEN,
    Served,
    _fleet,
    export,
    get,
    post,
)
from test_receiver_forward import Capture, _grpc_capture  # noqa: F401 - the fixture

from otel_loopguard.cli import main

TRACE = "ab" * 16


def json_span(index: int, trace: str = TRACE, **fields: Any) -> dict[str, Any]:
    """Return an OTLP/JSON tool span of ``trace`` (hex ids), with extra ``fields``."""
    return {"traceId": trace, "spanId": f"{index + 1:016x}", "parentSpanId": "f" * 16,
            "name": "execute_tool search", "startTimeUnixNano": str(1000 + index),
            "endTimeUnixNano": str(2000 + index), "attributes": [
                {"key": "gen_ai.tool.name", "value": {"stringValue": "search"}}], **fields}


def json_body(spans: list[dict[str, Any]]) -> bytes:
    return json.dumps({"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "agent"}}]},
        "scopeSpans": [{"scope": {"name": "s"}, "spans": spans}]}]}).encode()


def partial_success(body: bytes) -> tuple[int, str]:
    doc = json.loads(body).get("partialSuccess", {})
    return int(doc.get("rejectedSpans", 0)), str(doc.get("errorMessage", ""))


# --- 1. forwarding loses nothing it accepted -----------------------------------------------------
class TestForwardingLosesNothing:
    def test_what_cannot_be_forwarded_is_refused_and_the_rest_all_arrive(
            self, grpc_capture: tuple[Capture, str]) -> None:
        """A 20-digit end time and a link with a 17-byte trace id are refused (partial
        success); a lone surrogate in a name is replaced; the 400 other spans all arrive."""
        capture, endpoint = grpc_capture
        good = [json_span(i) for i in range(400)]
        odd = [json_span(500, endTimeUnixNano="9" * 20),
               json_span(501, links=[{"traceId": "ab" * 17, "spanId": "cd" * 8}]),
               json_span(502, name="tool \ud800")]
        served = Served(forward_endpoint=endpoint, grpc_port=None)
        with served.receiver as receiver:
            status, _, reply = post(receiver.http_port, json_body(good + odd), JSON)
            assert receiver.flush(10)
            rejected, message = partial_success(reply)
            accepted = served.value("loopguard_receiver_spans_total", outcome="accepted")
            forwarded = served.value("loopguard_receiver_forwarded_spans_total")
        assert status == 200 and rejected == 2
        assert "endTimeUnixNano: expected a non-negative 64-bit integer" in message
        got = capture.spans()
        assert len(got) == accepted == forwarded == 401
        assert got[f"{503:016x}"][0].name == "tool \ufffd"

    def test_protobuf_links_of_the_wrong_size_are_refused(
            self, grpc_capture: tuple[Capture, str]) -> None:
        """Over protobuf, a link with a 17-byte trace id or a 9-byte span id rejects its span;
        the others are forwarded."""
        capture, endpoint = grpc_capture
        request = ExportTraceServiceRequest()
        scope_spans = request.resource_spans.add().scope_spans.add()
        for index in range(10):
            span = scope_spans.spans.add(trace_id=bytes.fromhex(TRACE),
                                         span_id=(index + 1).to_bytes(8, "big"), name="s")
            if index == 3:
                span.links.add(trace_id=b"\x01" * 17, span_id=b"\x02" * 8)
            if index == 4:
                span.links.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 9)
        served = Served(forward_endpoint=endpoint, grpc_port=None)
        with served.receiver as receiver:
            status, _, reply = post(receiver.http_port, request.SerializeToString(), PROTOBUF)
            assert receiver.flush(10)
        partial = ExportTraceServiceResponse.FromString(reply).partial_success
        assert (status, partial.rejected_spans) == (200, 2)
        assert "spans[3].links[0].trace_id: expected 16 bytes, got 17" in partial.error_message
        assert len(capture.spans()) == 8

    def test_an_unencodable_span_is_dropped_alone_and_counted(
            self, grpc_capture: tuple[Capture, str]) -> None:
        """A span the exporter cannot encode no longer takes its batch with it."""
        from otel_loopguard.receiver._forward import Forwarder
        from otel_loopguard.receiver._stream import ClosedTrace
        from otel_loopguard.types import SpanRecord

        capture, endpoint = grpc_capture
        outcomes: dict[str, int] = {}
        forwarder = Forwarder(GrpcExporter(endpoint=endpoint, insecure=True),
                              on_outcome=lambda what, n: outcomes.update(
                                  {what: outcomes.get(what, 0) + n}))
        sampled = TraceFlags(TraceFlags.SAMPLED)
        spans = [ReadableSpan(name=f"s{i}", context=SpanContext(1, i + 1, False, sampled),
                              start_time=1, end_time=2**64 if i == 7 else 2) for i in range(20)]
        records = [SpanRecord(TRACE, f"{i + 1:016x}", None, "s", 1, 2, {}) for i in range(20)]
        forwarder.forward(ClosedTrace(TRACE, records, spans))
        forwarder.shutdown()
        assert len(capture.spans()) == 19
        assert outcomes == {"exported": 19, "unencodable": 1}


# --- 2. gRPC intake cannot be stalled ------------------------------------------------------------
def _stalled_calls(port: int, count: int, metadata: tuple[tuple[str, str], ...] = (),
                   ) -> tuple[list[Any], threading.Event, grpc.Channel]:
    """Open ``count`` Export calls that send headers and never a message."""
    release = threading.Event()

    def never() -> Iterator[bytes]:
        release.wait(30)
        return
        yield b""  # a generator that sends nothing

    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    call = channel.stream_unary(EXPORT)
    return [call.future(never(), metadata=metadata) for _ in range(count)], release, channel


class TestGrpcStalls:
    def test_calls_without_the_token_are_refused_before_their_message(
            self, fleet: tuple[ReadableSpan, ...]) -> None:
        """Calls that send no message and no token get UNAUTHENTICATED at once, and a real
        exporter with the token gets through while they are open."""
        served = Served(token=TOKEN, grpc_workers=2)
        with served.receiver as receiver:
            calls, release, channel = _stalled_calls(receiver.grpc_port, 8)
            try:
                codes = [call.exception(timeout=10) for call in calls]
                export(GrpcExporter(endpoint=f"127.0.0.1:{receiver.grpc_port}", insecure=True,
                                    headers={"authorization": f"Bearer {TOKEN}"}), fleet[:6])
                assert receiver.flush(10)
            finally:
                release.set()
                channel.close()
            accepted = served.value("loopguard_receiver_spans_total", outcome="accepted")
        assert {error.code() for error in codes} == {grpc.StatusCode.UNAUTHENTICATED}
        assert accepted == 6

    def test_calls_that_never_send_a_message_cannot_keep_exporters_out(
            self, fleet: tuple[ReadableSpan, ...]) -> None:
        """More stalled calls (with the token) than there are slots: the longest waiting is
        refused to make room, the rest time out, and the exporter's spans are all taken."""
        served = Served(token=TOKEN, grpc_workers=1, request_timeout_seconds=2.0)
        auth = (("authorization", f"Bearer {TOKEN}"),)
        with served.receiver as receiver:
            calls, release, channel = _stalled_calls(receiver.grpc_port, 12, auth)
            try:
                time.sleep(0.2)  # let them all start waiting (the outcome does not depend on it)
                export(GrpcExporter(endpoint=f"127.0.0.1:{receiver.grpc_port}", insecure=True,
                                    headers={"authorization": f"Bearer {TOKEN}"}), fleet[:6])
                assert receiver.flush(10)
                codes = {call.exception(timeout=20).code() for call in calls}
            finally:
                release.set()
                channel.close()
            accepted = served.value("loopguard_receiver_spans_total", outcome="accepted")
        assert accepted == 6
        assert codes <= {grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED}
        assert grpc.StatusCode.RESOURCE_EXHAUSTED in codes


# --- 3. HTTP: memory and threads bounded, slow clients cut off -----------------------------------
def _connect(port: int, data: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    sock.sendall(data)
    return sock


def _status(sock: socket.socket) -> int:
    """Return the status of the response on ``sock``; 0 when the server closed it silently."""
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        return 0
    return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0


def _post_head(length: int, extra: str = "") -> bytes:
    return (f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            f"Content-Length: {length}\r\n{extra}\r\n").encode()


class TestHttpLimits:
    def test_bodies_in_flight_are_capped_before_they_are_read(self) -> None:
        """Eight 8 MiB bodies in flight take the whole budget: the ninth gets 429 before it
        sends a byte of its body, and /readyz says 503 until the bodies are done."""
        served = Served(max_request_bytes=8 << 20, grpc_port=None)
        with served.receiver as receiver:
            port = receiver.http_port
            holders = [_connect(port, _post_head(8 << 20) + b"\x0a") for _ in range(8)]
            try:
                time.sleep(0.3)  # the holders' headers are read; the result does not depend on it
                late = _connect(port, _post_head(8 << 20))
                status = _status(late)
                late.close()
                ready = get(port, "/readyz")[0]
            finally:
                for sock in holders:
                    sock.close()
            throttled = served.value("loopguard_receiver_requests_total", protocol="http",
                                     outcome="throttled")
        assert (status, ready, throttled) == (429, 503, 1)

    def test_slowloris_connections_do_not_pin_a_thread_each(
            self, fleet: tuple[ReadableSpan, ...]) -> None:
        """300 connections that never finish their headers keep at most max_connections
        threads (the longest waiting are closed), and an exporter still gets through."""
        served = Served(grpc_port=None)
        before = threading.active_count()
        with served.receiver as receiver:
            port = receiver.http_port
            slow = [_connect(port, b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n") for _ in range(300)]
            try:
                time.sleep(0.5)
                threads = threading.active_count() - before
                status = post(port, encode_spans(fleet[:6]).SerializeToString(), PROTOBUF)[0]
            finally:
                for sock in slow:
                    sock.close()
        assert threads <= served.receiver.options.max_connections + 8
        assert status == 200

    def test_headers_sent_a_byte_at_a_time_time_out(self) -> None:
        """The request line and headers must arrive within the request timeout as a whole."""
        served = Served(grpc_port=None, request_timeout_seconds=0.5)
        with served.receiver as receiver:
            sock = _connect(receiver.http_port, b"P")
            closed = False
            try:
                for byte in b"OST /v1/traces HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 200:
                    time.sleep(0.05)
                    sock.sendall(bytes([byte]))
            except OSError:
                closed = True
            if not closed:
                sock.settimeout(10)
                try:
                    closed = sock.recv(1) == b""
                except OSError:
                    closed = True
            sock.close()
        assert closed

    def test_the_token_is_checked_before_the_body(self) -> None:
        """A wrong token gets 401 without the server waiting for the 8 MiB body."""
        served = Served(token=TOKEN, max_request_bytes=8 << 20, grpc_port=None)
        with served.receiver as receiver:
            sock = _connect(receiver.http_port,
                            _post_head(8 << 20, "Authorization: Bearer nope\r\n"))
            status = _status(sock)
            sock.close()
        assert status == 401

    def test_a_non_ascii_token_matches(self, fleet: tuple[ReadableSpan, ...]) -> None:
        """A UTF-8 bearer token matches when the client sends it as UTF-8 bytes."""
        token = "tök€n-ü"
        served = Served(token=token, grpc_port=None)
        body = encode_spans(fleet[:6]).SerializeToString()
        with served.receiver as receiver:
            head = _post_head(len(body))[:-2] + b"Authorization: Bearer " + token.encode()
            sock = _connect(receiver.http_port, head + b"\r\n\r\n" + body)
            status = _status(sock)
            sock.close()
            wrong = post(receiver.http_port, body, {**PROTOBUF, "Authorization": "Bearer tok"})
        assert (status, wrong[0]) == (200, 401)

    @pytest.mark.parametrize("headers", [
        "Content-Length: +2\r\n", "Content-Length: 1_1\r\n", "Content-Length: 0x2\r\n",
        "Content-Length: 2\r\nContent-Length: 2\r\n", "Content-Length: 2\r\nContent-Length: 3\r\n",
    ], ids=["plus", "underscore", "hex", "twice", "two-values"])
    def test_lenient_or_repeated_content_length_is_refused(self, headers: str) -> None:
        """Only one Content-Length of plain digits is taken (anything else smuggles)."""
        served = Served(grpc_port=None)
        with served.receiver as receiver:
            sock = _connect(receiver.http_port, (
                "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + headers + "\r\n{}").encode())
            status = _status(sock)
            sock.close()
        assert status == 400


# --- 5. inputs that crashed the request (and check) ----------------------------------------------
BAD_BODIES = {
    "null-scope-spans": b'{"resourceSpans":[{"scopeSpans":[null]}]}',
    "huge-double": json_body([json_span(0, attributes=[{"key": "d", "value": {
        "doubleValue": 0}}])]).replace(b'"doubleValue": 0', b'"doubleValue": 1' + b"0" * 400),
    "surrogate-kind": json_body([json_span(0, kind="\ud800")]),
}


class TestInputsThatCrashed:
    @pytest.mark.parametrize("name", list(BAD_BODIES))
    def test_serve_answers_400(self, name: str, grpc_capture: tuple[Capture, str]) -> None:
        """Each gets a 400 naming the field (forwarding on), and the next request is fine."""
        served = Served(forward_endpoint=grpc_capture[1], grpc_port=None)
        with served.receiver as receiver:
            status, _, reply = post(receiver.http_port, BAD_BODIES[name], JSON)
            after = post(receiver.http_port, json_body([json_span(1)]), JSON)[0]
        assert (status, after) == (400, 200)
        assert json.loads(reply)["message"]

    @pytest.mark.parametrize("name", list(BAD_BODIES))
    def test_check_exits_2(self, name: str, tmp_path: Any, capsys: Any) -> None:
        """check reports the bad record and exits 2 (bad input), not 1 (loops found)."""
        path = tmp_path / "traces.jsonl"
        path.write_bytes(BAD_BODIES[name] + b"\n")
        assert main(["check", str(path)]) == 2
        assert f"{path}:1: " in capsys.readouterr().err


class TestErrorPaths:
    def test_a_value_nested_too_deeply_is_named_at_its_attribute(self) -> None:
        """The path names the attribute, dot-separated, whatever the depth (JSON)."""
        from otel_loopguard.otlp._request import decode_json

        deep: dict[str, Any] = {"stringValue": "x"}
        for _ in range(250):
            deep = {"arrayValue": {"values": [deep]}}
        body = json_body([json_span(0), json_span(1, attributes=[{"key": "d", "value": deep}])])
        decoded = decode_json(body)
        assert (len(decoded.spans), decoded.rejected) == (1, 1)
        assert decoded.error_message == (
            "rejected 1 malformed span(s); first: resourceSpans[0].scopeSpans[0].spans[1]"
            ".attributes[0].value.arrayValue: nested deeper than 32 levels")

    def test_protobuf_values_nested_too_deeply(self) -> None:
        """A protobuf value 40 arrays deep (the parser allows 47) is refused the same way."""
        from otel_loopguard.otlp._request import decode_protobuf

        request = ExportTraceServiceRequest()
        scope_spans = request.resource_spans.add().scope_spans.add()
        scope_spans.spans.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
        value = scope_spans.spans.add(trace_id=b"\x01" * 16, span_id=b"\x03" * 8).attributes.add(
            key="d").value
        for _ in range(40):
            value = value.array_value.values.add()
        value.string_value = "x"
        decoded = decode_protobuf(request.SerializeToString())
        assert decoded.error_message.endswith(
            "first: resource_spans[0].scope_spans[0].spans[1].attributes[0].value: nested "
            "deeper than 32 levels")


def test_serve_exports_every_receiver_metric(grpc_capture: tuple[Capture, str]) -> None:
    """Every name in RECEIVER_METRIC_NAMES (what the dashboard may use) is on serve's registry."""
    from otel_loopguard.metrics._names import RECEIVER_METRIC_NAMES

    served = Served(forward_endpoint=grpc_capture[1])
    with served.receiver:
        names = {f"{family.name}_total" if family.type == "counter" else family.name
                 for family in served.registry.collect()}
    assert names >= RECEIVER_METRIC_NAMES


def test_a_bug_in_decoding_is_a_500_not_a_dropped_connection(
        fleet: tuple[ReadableSpan, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    """An unexpected exception while decoding answers 500 / INTERNAL, counted in
    loopguard_internal_errors_total{kind="intake:..."}, and the receiver keeps serving."""
    from otel_loopguard.receiver import LoopGuardReceiver, ReceiverOptions, _http

    def broken(body: bytes, *, payloads: bool = False) -> Any:
        raise KeyError("a bug")

    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    receiver = LoopGuardReceiver(options=ReceiverOptions(http_port=0, grpc_port=None),
                                 registry=registry)  # errors contained, as in production
    body = encode_spans(fleet[:2]).SerializeToString()
    with receiver:
        monkeypatch.setattr(_http, "decode_protobuf", broken)
        status = post(receiver.http_port, body, PROTOBUF)[0]
        monkeypatch.undo()
        after = post(receiver.http_port, body, PROTOBUF)[0]
        errors = registry.get_sample_value("loopguard_internal_errors_total",
                                           {"kind": "intake:KeyError"})
    assert (status, after, errors) == (500, 200, 1)
