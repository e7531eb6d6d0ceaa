"""A run's prompt template is the same live and in ``check``: only its calls and turns name it.

The official ``mcp`` package (2.x) traces its own calls; its server's ``prompts/get`` span joins
the client's trace and carries ``gen_ai.prompt.name`` of the prompt it served. ``check`` and
``serve`` took the template from any span of the trace, so that span, ending first, renamed the
run (``summarize``, its version lost) where the live processor counted the calls under the
template their agent span names. Real parts: the SDK's TracerProvider with the live processor,
the spans shaped as mcp 2.3.0 writes them, and ``check``'s reader of the exported spans.
"""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor
from otel_loopguard.otlp._sdk import span_record_from_readable
from otel_loopguard.replay import Checker


@pytest.mark.parametrize("root_names_it", [True, False])
def test_a_served_prompts_span_does_not_rename_the_run(root_names_it: bool) -> None:
    """The run's template is its agent span's (``support_triage@v3``), live and in check; with
    no span of the run naming one, it is none in both (not the served prompt's name)."""
    registry = CollectorRegistry()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(LoopGuardSpanProcessor(
        LoopGuardConfig(), downstream=SimpleSpanProcessor(exporter), registry=registry,
        raise_internal_errors=True))
    tracer = provider.get_tracer("mcp", "2.3.0")
    root = {"gen_ai.prompt.name": "support_triage", "gen_ai.prompt.version": "v3"} \
        if root_names_it else {}
    with tracer.start_as_current_span("prompt support_triage", attributes=root):
        with tracer.start_as_current_span("prompts/get summarize", attributes={
                "mcp.method.name": "prompts/get", "gen_ai.prompt.name": "summarize"}):
            pass
        for _ in range(5):
            with tracer.start_as_current_span("tools/call search", attributes={
                    "mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "search",
                    "gen_ai.tool.call.arguments": json.dumps({"q": "refund policy"}),
                    "gen_ai.tool.call.result": "no match"}):
                pass
    provider.shutdown()
    live = {s.labels["prompt_template"] for m in registry.collect() for s in m.samples
            if s.name == "loopguard_tool_calls_total" and s.value}
    [report] = Checker(LoopGuardConfig()).run(
        span_record_from_readable(s) for s in exporter.get_finished_spans())
    expected = "support_triage@v3" if root_names_it else None
    assert report.prompt_template == expected
    assert live == {expected or "unknown"}
    assert report.findings  # the five identical searches are a loop either way
