"""``loopguard_receiver_spans_total`` counts the spans senders sent, not what loopguard makes.

``serve`` turns a coding agent's log events, and its tool spans, into records of the agent's
session run, which it checks with the rest. Those records are loopguard's: counted as
``accepted`` (or ``late``, ``duplicate``), they made ``accepted - duplicate - forwarded -
failures`` stay above zero for ever once forwarding is on, and made a logs-only deployment
look like one receiving spans.
"""

from __future__ import annotations

import json

from _agent_sessions import emit, sessions
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from prometheus_client import CollectorRegistry

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.receiver import LoopGuardReceiver, ReceiverOptions
from otel_loopguard.replay.checker import RunReport


def _spans(registry: CollectorRegistry, outcome: str) -> float:
    return registry.get_sample_value("loopguard_receiver_spans_total",
                                     {"outcome": outcome}) or 0.0


def test_log_events_are_checked_but_are_no_received_spans() -> None:
    reports: list[RunReport] = []
    registry = CollectorRegistry()
    options = ReceiverOptions(http_port=0, grpc_port=None)
    with LoopGuardReceiver(LoopGuardConfig(), options=options, registry=registry,
                           on_report=reports.append, raise_internal_errors=True) as receiver:
        exporter = OTLPLogExporter(endpoint=f"{receiver.http_url}/v1/logs")
        try:
            assert emit(sessions(), exporter) > 0
        finally:
            exporter.shutdown()
        assert receiver.flush(30)
    assert any(report.findings for report in reports)  # the events were read and checked
    assert [_spans(registry, o) for o in ("accepted", "late", "duplicate")] == [0, 0, 0]


def test_a_coding_agents_spans_are_counted_once_and_all_forwarded() -> None:
    """Claude Code's tool spans: each is forwarded as it came and checked through a record of
    its session; the spans counted are the spans sent, and every one ends forwarded."""
    registry = CollectorRegistry()
    with LoopGuardReceiver(LoopGuardConfig(), registry=CollectorRegistry(),
                           options=ReceiverOptions(http_port=0, grpc_port=None)) as downstream, \
            LoopGuardReceiver(LoopGuardConfig(), registry=registry,
                              raise_internal_errors=True,
                              options=ReceiverOptions(http_port=0, grpc_port=None,
                                                      reorder_window_seconds=0,
                                                      forward_endpoint=downstream.http_url,
                                                      forward_protocol="http")) as receiver:
        provider = TracerProvider(resource=Resource.create({"service.name": "claude-code"}))
        provider.add_span_processor(SimpleSpanProcessor(
            OTLPSpanExporter(endpoint=f"{receiver.http_url}/v1/traces")))
        tracer = provider.get_tracer("com.anthropic.claude_code.tracing")
        for n in range(5):
            with tracer.start_as_current_span("claude_code.interaction",
                                              attributes={"session.id": "s1"}), \
                    tracer.start_as_current_span("claude_code.tool", attributes={
                        "session.id": "s1", "tool_name": "Bash", "tool_use_id": f"tu{n}",
                        "tool_input": json.dumps({"command": "ls"})}):
                pass
        provider.shutdown()
        assert receiver.flush(30)
        receiver.forwarder.force_flush(30_000)
        forwarded = registry.get_sample_value("loopguard_receiver_forwarded_spans_total")
    assert _spans(registry, "accepted") == 10
    assert forwarded == 10
