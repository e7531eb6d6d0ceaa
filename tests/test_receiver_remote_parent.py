"""A service whose agent runs under a propagated context sends no root span: ``serve`` closes its
traces on the local root whose parent is remote, within the reorder window, not after the TTL.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from prometheus_client import CollectorRegistry
from test_receiver import JSON, post, to_json_doc
from test_receiver_forward import Capture, _grpc_capture  # noqa: F401  # the fixture

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.otlp._json import decode_json_spans
from otel_loopguard.otlp._proto import decode_proto_spans, decode_wire_spans
from otel_loopguard.otlp._sdk import span_record_from_readable
from otel_loopguard.receiver import LoopGuardReceiver, ReceiverOptions
from otel_loopguard.receiver._stream import StreamingChecker
from otel_loopguard.replay.checker import RunReport
from otel_loopguard.testing import AgentScript, FakeClock
from otel_loopguard.types import SpanRecord

TRACE_ID = 0x5B8EFFF798038103D269B633813FC60C
UPSTREAM_SPAN_ID = 0xEEE19B7EC3C1B174
WINDOW_SECONDS = 0.2
DEADLINE_SECONDS = 10.0
"""Far below the run TTL (3600 s): the old code held these traces for the TTL."""
SECOND = 1_000_000_000


def remote_context(span_id: int = UPSTREAM_SPAN_ID) -> Any:
    """The context an HTTP server or a queue consumer extracts: an upstream service's span."""
    parent = SpanContext(TRACE_ID, span_id, is_remote=True, trace_flags=TraceFlags(1))
    return trace.set_span_in_context(NonRecordingSpan(parent))


def invoke(tracer: trace.Tracer, name: str, upstream: int = UPSTREAM_SPAN_ID) -> int:
    """Run one looping agent invocation under the remote parent; return its root's span id."""
    clock = FakeClock()
    root = tracer.start_span(f"invoke_agent {name}", context=remote_context(upstream),
                             attributes={"gen_ai.operation.name": "invoke_agent",
                                         "gen_ai.agent.name": name}, start_time=clock())
    agent = AgentScript(tracer, clock, root)
    for _ in range(6):
        agent.turn()
        agent.tool("search_kb", {"query": "refund policy"}, {"results": []})
    root.end(end_time=clock.advance(0.001))
    return int(root.get_span_context().span_id)


def receiving(endpoint: str) -> tuple[LoopGuardReceiver, list[RunReport]]:
    """A receiver with the default run TTL, a short reorder window, forwarding to ``endpoint``."""
    reports: list[RunReport] = []
    receiver = LoopGuardReceiver(
        LoopGuardConfig(), registry=CollectorRegistry(), on_report=reports.append,
        raise_internal_errors=True,
        options=ReceiverOptions(http_port=0, grpc_port=0, reorder_window_seconds=WINDOW_SECONDS,
                                forward_endpoint=endpoint, forward_protocol="grpc"))
    return receiver, reports


def wait_for(condition: Callable[[], bool]) -> None:
    """Wait (without flushing the receiver) until ``condition`` holds."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, "not checked within the reorder window"
        time.sleep(0.02)


def looping_runs(reports: list[RunReport]) -> int:
    return sum(report.looping and format(TRACE_ID, "032x") in report.trace_ids
               for report in list(reports))


def forwarded(capture: Capture) -> dict[str, Any]:
    """The spans the downstream got, by span id."""
    return {span_id: span for span_id, (span, _, _) in capture.spans().items()}


def flagged(spans: dict[str, Any]) -> int:
    return sum(any(kv.key == "loopguard.action" for kv in span.attributes)
               for span in spans.values())


@pytest.fixture(name="exporter_for", params=["http", "grpc"])
def _exporter_for(request: pytest.FixtureRequest) -> Callable[[LoopGuardReceiver], Any]:
    def make(receiver: LoopGuardReceiver) -> Any:
        if request.param == "http":
            return HttpExporter(endpoint=f"{receiver.http_url}/v1/traces")
        return GrpcExporter(endpoint=f"127.0.0.1:{receiver.grpc_port}", insecure=True)
    return make


class TestRealExporters:
    def test_checked_and_forwarded_within_the_window(
            self, grpc_capture: tuple[Capture, str],
            exporter_for: Callable[[LoopGuardReceiver], Any]) -> None:
        """An agent root started under a remote parent: its trace is checked and forwarded
        (evidence on its flagged spans, the remote flags kept) within the reorder window; a
        second invocation in the same trace is checked and forwarded too, not dropped late."""
        capture, endpoint = grpc_capture
        receiver, reports = receiving(endpoint)
        kept = InMemorySpanExporter()
        with receiver:
            provider = TracerProvider(resource=Resource.create({"service.name": "agent-svc"}))
            provider.add_span_processor(BatchSpanProcessor(exporter_for(receiver)))
            provider.add_span_processor(SimpleSpanProcessor(kept))
            tracer = provider.get_tracer("otel_loopguard.testing")
            first = invoke(tracer, "first")
            assert provider.force_flush()
            wait_for(lambda: looping_runs(reports) == 1
                     and len(capture.spans()) == len(kept.get_finished_spans()))
            spans = forwarded(capture)
            assert flagged(spans) > 0
            root = spans[format(first, "016x")]
            assert root.parent_span_id.hex() == format(UPSTREAM_SPAN_ID, "016x")
            assert root.flags & 0x300 == 0x300  # forwarded as remote-parented still

            invoke(tracer, "second", upstream=UPSTREAM_SPAN_ID + 1)
            assert provider.force_flush()
            wait_for(lambda: looping_runs(reports) == 2
                     and len(capture.spans()) == len(kept.get_finished_spans()))
            assert flagged(forwarded(capture)) == 2 * flagged(spans)
            assert receiver.stream.late_spans == 0
            provider.shutdown()


def test_otlp_json_with_the_flags_set_by_hand(grpc_capture: tuple[Capture, str]) -> None:
    """OTLP/JSON from a non-Python agent: the local root's ``flags`` (0x300) alone says its
    parent is remote; the trace is checked and forwarded within the window."""
    capture, endpoint = grpc_capture
    provider = TracerProvider()
    kept = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    root_id = format(invoke(provider.get_tracer("otel_loopguard.testing"), "json"), "016x")
    doc = to_json_doc(kept.get_finished_spans())
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                span.pop("flags", None)  # only the hand-set flags below say "remote"
                if span["spanId"] == root_id:
                    span["flags"] = 0x300
    receiver, reports = receiving(endpoint)
    with receiver:
        assert post(receiver.http_port, json.dumps(doc).encode(), JSON)[0] == 200
        wait_for(lambda: looping_runs(reports) == 1
                 and len(capture.spans()) == len(kept.get_finished_spans()))
        assert flagged(forwarded(capture)) > 0


def test_every_decoder_reads_the_flags() -> None:
    """The SDK span, OTLP protobuf (C and Python) and OTLP/JSON all say which parent is remote:
    the local root's, not its children's."""
    provider = TracerProvider()
    kept = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    root = format(invoke(provider.get_tracer("otel_loopguard.testing"), "a"), "016x")
    sent = kept.get_finished_spans()
    body = encode_spans(sent)
    wire = decode_wire_spans(body.SerializeToString())
    for records in ([span_record_from_readable(s) for s in sent], decode_proto_spans(body).spans,
                    decode_json_spans(to_json_doc(sent)).spans, wire if wire is not None else []):
        assert {r.span_id for r in records if r.parent_is_remote} == {root}


# --- the rules, on a fake clock ----------------------------------------------------------------
def record(span_id: str, parent: str | None, *, remote: bool = False,
           tool: str | None = None) -> SpanRecord:
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                  "gen_ai.tool.call.arguments": "{}"} if tool else {}
    return SpanRecord(format(TRACE_ID, "032x"), span_id, parent, tool or "work", 1, 2,
                      attributes, parent_is_remote=remote)


class Stream:
    """A ``StreamingChecker`` with a hand-driven clock (1 s window, 3600 s TTL)."""

    def __init__(self) -> None:
        self.now = 0
        self.closed: list[tuple[list[str], bool]] = []
        self.checker = StreamingChecker(
            reorder_window_seconds=1.0, clock=lambda: self.now, raise_internal_errors=True,
            on_trace=lambda t: self.closed.append(([s.span_id for s in t.spans], t.late)))

    def add(self, *spans: SpanRecord) -> None:
        self.checker.add(list(spans))

    def at(self, seconds: float) -> list[RunReport]:
        self.now = int(seconds * SECOND)
        return self.checker.poll()


def test_a_remote_parented_root_closes_its_trace() -> None:
    """The local root's arrival starts the window; its trace then closes, checked."""
    stream = Stream()
    stream.add(record("a1", "r1", tool="search"), record("r1", "up", remote=True))
    assert stream.at(0.5) == []
    reports = stream.at(1.0)
    assert [r.tool_calls for r in reports] == [1]
    assert stream.closed == [(["a1", "r1"], False)]


def test_later_calls_are_segments_and_stragglers_late() -> None:
    """After such a close, a copy or a child of a checked span is late; a second local root's
    spans are checked as a new segment of the trace."""
    stream = Stream()
    stream.add(record("r1", "up", remote=True), record("a1", "r1", tool="search"))
    assert len(stream.at(1.0)) == 1
    stream.add(record("a1", "r1", tool="search"), record("a2", "r1", tool="search"),
               record("b1", "r2", tool="fetch"))
    assert stream.closed[1:] == [(["a1", "a2"], True)]
    assert stream.checker.late_spans == 2
    assert stream.at(30.0) == []  # b1 waits for its parent: its call is still running
    stream.add(record("r2", "up2", remote=True))
    assert [r.tool_calls for r in stream.at(31.0)] == [1]
    assert stream.closed[2:] == [(["b1", "r2"], False)]


def test_a_downstream_services_span_waits_for_its_caller() -> None:
    """A remote-parented span whose trace still lacks a local parent (an MCP server called by
    the agent, both exporting here) does not close the agent's trace: its root does."""
    stream = Stream()
    stream.add(record("mcp", "srv"), record("t1", "root", tool="search"))
    stream.add(record("srv", "client", remote=True))
    assert stream.at(5.0) == []
    stream.add(record("client", "t1"))
    assert stream.at(10.0) == []  # t1's parent, the agent's root, is still running
    stream.add(record("root", None))
    assert stream.at(10.5) == []
    assert [r.tool_calls for r in stream.at(11.0)] == [1]
    assert stream.closed == [(["mcp", "t1", "srv", "client", "root"], False)]


def test_a_trace_closed_by_its_own_root_keeps_its_late_spans() -> None:
    """A trace with a root of its own: every later span is late, a remote-parented one too."""
    stream = Stream()
    stream.add(record("root", None), record("t1", "root", tool="search"))
    assert len(stream.at(1.0)) == 1
    stream.add(record("x", "up", remote=True), record("t1", "root", tool="search"))
    assert stream.at(5.0) == []
    assert stream.checker.late_spans == 2
    assert stream.closed[1:] == [(["x", "t1"], True)]
