"""Forwarding: ``serve`` re-exports spans, with loopguard evidence, through the OTLP exporter."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
import pytest
from _otlp_files import hex_ids
from google.protobuf.json_format import MessageToDict
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from prometheus_client import CollectorRegistry
from test_receiver import JSON, PROTOBUF, post, to_json_doc

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.receiver import LoopGuardReceiver, ReceiverOptions
from otel_loopguard.replay.checker import RunReport
from otel_loopguard.testing import LoopGuardHarness


class Capture:
    """A downstream OTLP endpoint (gRPC or HTTP) that keeps every request it gets."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.lock = threading.Lock()

    def keep(self, body: bytes) -> bytes:
        with self.lock:
            self.requests.append(ExportTraceServiceRequest.FromString(body))
        data: bytes = ExportTraceServiceResponse().SerializeToString()
        return data

    def spans(self) -> dict[str, tuple[Any, Any, Any]]:
        """Return (span, resource, scope) by hex span id."""
        out = {}
        for request in self.requests:
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        out[span.span_id.hex()] = (span, rs.resource, ss.scope)
        return out


@pytest.fixture(name="grpc_capture")
def _grpc_capture() -> Iterator[tuple[Capture, str]]:
    capture = Capture()
    server = grpc.server(ThreadPoolExecutor(2))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "opentelemetry.proto.collector.trace.v1.TraceService",
        {"Export": grpc.unary_unary_rpc_method_handler(lambda body, _: capture.keep(body))}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield capture, f"http://127.0.0.1:{port}"
    server.stop(None)


@pytest.fixture(name="http_capture")
def _http_capture() -> Iterator[tuple[Capture, str]]:
    capture = Capture()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = capture.keep(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield capture, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def looping_trace() -> tuple[ReadableSpan, ...]:
    """A looping run plus a CLIENT span with a link, an event and an error status."""
    harness = LoopGuardHarness()
    with harness.run("a", prompt="tpl") as agent:
        for _ in range(5):
            agent.tool("search", {"q": 1}, {"r": []})
        root = agent._parent
        other = trace.SpanContext(0xABC, 0xDEF, is_remote=True)
        span = harness.tracer.start_span("GET /api", context=trace.set_span_in_context(root),
                                         kind=SpanKind.CLIENT, links=[Link(other, {"l": 1})],
                                         attributes={"http.method": "GET", "sizes": [1, 2]})
        span.add_event("retry", {"attempt": 2})
        span.set_status(Status(StatusCode.ERROR, "boom"))
        span.end()
    harness.shutdown()
    return harness.exporter.get_finished_spans()


def forwarding(endpoint: str, protocol: str) -> tuple[LoopGuardReceiver, list[RunReport]]:
    reports: list[RunReport] = []
    receiver = LoopGuardReceiver(
        LoopGuardConfig(), registry=CollectorRegistry(), on_report=reports.append,
        raise_internal_errors=True,
        options=ReceiverOptions(http_port=0, grpc_port=None, reorder_window_seconds=0.05,
                                forward_endpoint=endpoint,
                                forward_protocol=protocol))  # type: ignore[arg-type]
    return receiver, reports


def check_forwarded(capture: Capture, sent: tuple[ReadableSpan, ...],
                    reports: list[RunReport]) -> None:
    got = capture.spans()
    assert set(got) == {format(s.context.span_id, "016x") for s in sent}
    flagged = {d.span_id: d for r in reports for d in r.findings}
    assert len(flagged) == 3
    for span_id, (span, resource, scope) in got.items():
        attrs = {kv.key: kv.value for kv in span.attributes}
        if span_id in flagged:
            assert attrs["loopguard.action"].string_value == flagged[span_id].action.label
            assert attrs["loopguard.detector"].string_value == "stagnation"
            assert attrs["loopguard.run_id"].string_value == span.trace_id.hex()
        else:
            assert not any(key.startswith("loopguard.") for key in attrs)
        assert scope.name == "otel_loopguard.testing"
        assert any(kv.key == "service.name" for kv in resource.attributes)
    client = next(s for s, _, _ in got.values() if s.name == "GET /api")
    assert client.kind == 3  # SPAN_KIND_CLIENT
    assert (client.status.code, client.status.message) == (2, "boom")
    assert client.links[0].span_id.hex() == format(0xDEF, "016x")
    assert client.events[0].name == "retry" and client.events[0].time_unix_nano > 0
    assert [v.int_value for v in next(kv.value for kv in client.attributes
                                      if kv.key == "sizes").array_value.values] == [1, 2]
    original = {format(s.context.span_id, "016x"): s for s in sent}
    for span_id, (span, _, _) in got.items():
        parent = original[span_id].parent
        assert span.parent_span_id.hex() == (format(parent.span_id, "016x") if parent else "")
        assert span.start_time_unix_nano == original[span_id].start_time


class TestForwarding:
    def test_grpc_downstream_gets_evidence(self, grpc_capture: tuple[Capture, str]) -> None:
        """Spans sent as protobuf reach a gRPC downstream with evidence on flagged spans."""
        capture, endpoint = grpc_capture
        sent = looping_trace()
        receiver, reports = forwarding(endpoint, "grpc")
        with receiver:
            assert post(receiver.http_port, encode_spans(sent).SerializeToString(),
                        PROTOBUF)[0] == 200
            assert receiver.flush(10)
        check_forwarded(capture, sent, reports)

    def test_http_downstream_from_json(self, http_capture: tuple[Capture, str]) -> None:
        """Spans sent as OTLP/JSON reach an OTLP/HTTP downstream with kinds, links, events."""
        capture, endpoint = http_capture
        sent = looping_trace()
        receiver, reports = forwarding(endpoint, "http")
        with receiver:
            doc = json.dumps(to_json_doc(sent)).encode()
            assert post(receiver.http_port, doc, JSON)[0] == 200
        check_forwarded(capture, sent, reports)

    @pytest.mark.parametrize("as_json", [False, True], ids=["protobuf", "json"])
    def test_dropped_counts_and_link_flags_are_forwarded_as_sent(
            self, grpc_capture: tuple[Capture, str], as_json: bool) -> None:
        """What the sender's limits dropped (attributes, events, links; an event's and a
        link's attributes) is forwarded as counted, on flagged spans too, and a link the
        sender marks local stays local (the SDK's own spans forwarded 0 and remote)."""
        capture, endpoint = grpc_capture
        request = encode_spans(looping_trace())
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    span.dropped_attributes_count, span.dropped_events_count = 3, 4
                    span.dropped_links_count = 5
                    for event in span.events:
                        event.dropped_attributes_count = 1
                    for link in span.links:
                        link.dropped_attributes_count, link.flags = 2, 0x100  # known: local
        body = json.dumps(hex_ids(MessageToDict(request))).encode() if as_json \
            else request.SerializeToString()
        receiver, reports = forwarding(endpoint, "grpc")
        with receiver:
            assert post(receiver.http_port, body, JSON if as_json else PROTOBUF)[0] == 200
            assert receiver.flush(10)
        got = [span for span, _, _ in capture.spans().values()]
        flagged = {d.span_id for r in reports for d in r.findings}
        assert len(flagged) == 3 and flagged <= {span.span_id.hex() for span in got}
        assert {(s.dropped_attributes_count, s.dropped_events_count, s.dropped_links_count)
                for s in got} == {(3, 4, 5)}
        client = next(span for span in got if span.name == "GET /api")
        assert [event.dropped_attributes_count for event in client.events] == [1]
        assert [(link.dropped_attributes_count, link.flags) for link in client.links] == \
            [(2, 0x100)]

    def test_late_spans_are_forwarded_without_evidence(
            self, grpc_capture: tuple[Capture, str]) -> None:
        """A span that arrives after its trace was checked still reaches the downstream."""
        capture, endpoint = grpc_capture
        sent = looping_trace()
        receiver, _ = forwarding(endpoint, "grpc")
        with receiver:
            body = encode_spans(sent[1:]).SerializeToString()
            assert post(receiver.http_port, body, PROTOBUF)[0] == 200
            assert receiver.flush(10)
            assert post(receiver.http_port, encode_spans(sent[:1]).SerializeToString(),
                        PROTOBUF)[0] == 200
        assert len(capture.spans()) == len(sent)


@pytest.fixture(name="refusing")
def _refusing() -> Iterator[str]:
    """A gRPC downstream that refuses every export (INVALID_ARGUMENT: the SDK does not retry)."""
    server = grpc.server(ThreadPoolExecutor(2))

    def refuse(body: bytes, context: Any) -> bytes:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "refused")
        return b""

    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "opentelemetry.proto.collector.trace.v1.TraceService",
        {"Export": grpc.unary_unary_rpc_method_handler(refuse)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop(None)


def _counts(receiver: LoopGuardReceiver) -> tuple[float | None, float | None, float | None]:
    registry = receiver.registry
    assert registry is not None
    return (registry.get_sample_value("loopguard_receiver_spans_total",
                                      {"outcome": "accepted"}),
            registry.get_sample_value("loopguard_receiver_forwarded_spans_total"),
            registry.get_sample_value("loopguard_receiver_forward_failures_total",
                                      {"reason": "export_failed"}))


def test_spans_given_up_at_shutdown_are_all_counted(refusing: str) -> None:
    """A downstream that refuses every export: when the shutdown's deadline passes, every span
    of the batch being exported counts as ``export_failed`` (before, the halves not yet tried
    when the first lone span was given up vanished from both counters)."""
    sent = looping_trace()
    receiver, reports = forwarding(refusing, "grpc")
    receiver.start()
    assert post(receiver.http_port, encode_spans(sent).SerializeToString(), PROTOBUF)[0] == 200
    receiver.flush(0.5)  # the trace is checked; its spans cannot be exported
    assert reports
    receiver.shutdown(timeout=1)
    assert _counts(receiver) == (len(sent), 0, len(sent))


def test_a_worker_waiting_for_the_downstream_does_not_break_the_shutdown(
        refusing: str) -> None:
    """The downstream refuses everything, the forwarding buffer is full, the worker waits for
    room and its queue is full: the shutdown still ends, and every accepted span is counted
    (before, it raised queue.Full, since the worker was freed only after the STOP was put)."""
    receiver = LoopGuardReceiver(
        LoopGuardConfig(), registry=CollectorRegistry(), raise_internal_errors=True,
        options=ReceiverOptions(http_port=0, grpc_port=None, reorder_window_seconds=0,
                                max_queue=1, forward_buffer_bytes=1, forward_endpoint=refusing))
    sent = looping_trace()
    other = trace.SpanContext(0xF00D, 0xBEEF, is_remote=False)
    second = ReadableSpan(name="root", context=other, parent=None,  # a trace of its own
                          resource=sent[0].resource, start_time=1, end_time=2)
    receiver.start()
    try:
        body = encode_spans((*sent, second)).SerializeToString()
        assert post(receiver.http_port, body, PROTOBUF)[0] == 200
        deadline = time.monotonic() + 10
        while not receiver.forwarder.full and time.monotonic() < deadline:
            time.sleep(0.01)  # the second trace waits for room the first one holds
        assert not receiver.flush(0.2)  # its marker now fills the queue
        assert receiver._queue.full()
    finally:
        receiver.shutdown(timeout=1)
    assert _counts(receiver) == (len(sent) + 1, 0, len(sent) + 1)
