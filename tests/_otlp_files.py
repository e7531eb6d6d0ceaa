"""Trace files as the Collector writes them, from runs scripted on a real ``TracerProvider``."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer
from prometheus_client import CollectorRegistry

from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor
from otel_loopguard.testing import AgentScript, LoopGuardHarness

Script = tuple[dict[str, Any], Callable[[AgentScript], None]]


@contextmanager
def live_run(scope: str, version: str) -> Iterator[tuple[Tracer, list[ReadableSpan]]]:
    """A tracer of ``scope`` under the live processor (default settings); on exit, the spans.

    The list it yields is filled with every exported span once the provider has shut down.
    """
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(LoopGuardSpanProcessor(
        LoopGuardConfig(), downstream=SimpleSpanProcessor(exporter),
        registry=CollectorRegistry(), raise_internal_errors=True))
    spans: list[ReadableSpan] = []
    yield provider.get_tracer(scope, version), spans
    provider.shutdown()
    spans.extend(exporter.get_finished_spans())


def hex_ids(node: Any) -> Any:
    """Turn the base64 ids of protobuf's JSON mapping into the hex ids OTLP/JSON uses."""
    if isinstance(node, dict):
        return {k: (base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId")
                    else hex_ids(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [hex_ids(v) for v in node]
    return node


def scripted_spans(*runs: Script) -> list[ReadableSpan]:
    """Return the finished spans of the scripted runs (``(run options, body)`` each)."""
    harness = LoopGuardHarness()
    try:
        for options, body in runs:
            with harness.run(**options) as agent:
                body(agent)
        return list(harness.exporter.get_finished_spans())
    finally:
        harness.shutdown()


def json_line(spans: Sequence[ReadableSpan]) -> str:
    """Return one ``ExportTraceServiceRequest`` as an OTLP/JSON line (no newline)."""
    doc = hex_ids(MessageToDict(encode_spans(spans)))
    return json.dumps(doc, separators=(",", ":"))


def proto_message(spans: Sequence[ReadableSpan]) -> bytes:
    """Return one serialized ``ExportTraceServiceRequest``."""
    return encode_spans(spans).SerializeToString()  # type: ignore[no-any-return]


def export_looping_run(url: str, service: str, template: str | None = None) -> None:
    """Export, over OTLP/HTTP to ``url``, one run of ``service`` that searches the same thing
    three times (a ``repeat`` warning), under prompt template ``template`` when given."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces")))
    tracer = provider.get_tracer("app")
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "triage"}
    if template:
        agent["gen_ai.prompt.name"] = template
    with tracer.start_as_current_span("invoke_agent triage", attributes=agent):
        for _ in range(3):
            with tracer.start_as_current_span("execute_tool search", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                    "gen_ai.tool.call.arguments": '{"q": "x"}',
                    "gen_ai.tool.call.result": "no results"}):
                pass
    provider.shutdown()
