"""OpenInference's ``__REDACTED__`` placeholder is a value not captured, not the value.

With ``OPENINFERENCE_HIDE_INPUTS`` / ``OPENINFERENCE_HIDE_OUTPUTS`` every tool span carries the
same text in place of its arguments and result: read as content, three different searches
looked like one search returning the same result (stagnation at the third).
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor
from otel_loopguard.adapters.openinference import OpenInferenceAdapter
from otel_loopguard.otlp._sdk import span_record_from_readable
from otel_loopguard.replay import Checker
from otel_loopguard.types import Handoff

REDACTED = "__REDACTED__"


def _searches(values: list[tuple[str, str]], *, handoff: bool = False) -> tuple[list[Any], Any]:
    """An OpenInference agent run of ``search`` calls (input, output); the live decisions and
    the exported spans."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(LoopGuardSpanProcessor(
        LoopGuardConfig(), downstream=SimpleSpanProcessor(exporter),
        registry=CollectorRegistry(), raise_internal_errors=True))
    tracer = provider.get_tracer("openinference.instrumentation.openai_agents")
    with tracer.start_as_current_span("support", attributes={
            "openinference.span.kind": "AGENT", "agent.name": "support"}):
        for text_in, text_out in values:
            with tracer.start_as_current_span("search", attributes={
                    "openinference.span.kind": "TOOL", "tool.name": "search",
                    "input.value": text_in, "output.value": text_out}):
                pass
        if handoff:
            for _ in range(5):
                with tracer.start_as_current_span("handoff to billing", attributes={
                        "openinference.span.kind": "TOOL", "input.value": REDACTED,
                        "output.value": REDACTED}):
                    pass
    provider.shutdown()
    spans = exporter.get_finished_spans()
    live = [s.attributes.get("loopguard.action") for s in spans if s.name == "search"]
    return live, [span_record_from_readable(s) for s in spans]


def test_hidden_values_are_not_one_value_repeated() -> None:
    live, records = _searches([(REDACTED, REDACTED)] * 4)
    assert live == [None] * 4
    (report,) = Checker(LoopGuardConfig()).run(records)
    assert report.tool_calls == 4 and not report.findings


def test_the_same_calls_with_their_values_shown_are_still_a_loop() -> None:
    live, records = _searches([('{"q": "refund policy"}', "no results")] * 4)
    assert live[2:] == ["warn", "replan"]
    (report,) = Checker(LoopGuardConfig()).run(records)
    assert [d.action.label for d in report.findings][:2] == ["warn", "replan"]


def test_a_hidden_handoff_has_no_placeholder_for_an_agent() -> None:
    """OpenInference's ``handoff to X`` span keeps its source agent in ``input.value``: hidden,
    the source is unknown (as for a handoff without one), and the target comes from the name."""
    _, records = _searches([], handoff=True)
    handoffs = [OpenInferenceAdapter().to_event(r) for r in records if r.name.startswith("handoff")]
    assert handoffs and all(isinstance(h, Handoff) for h in handoffs)
    assert {(h.from_agent, h.to_agent) for h in handoffs} == {("", "billing")}
