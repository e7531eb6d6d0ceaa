"""Google ADK's agent spans as ADK 2.13 writes them: named first, attributes set after start.

ADK starts ``invoke_agent <name>`` with no attribute and sets ``gen_ai.operation.name``,
``gen_ai.agent.name`` and ``gen_ai.conversation.id`` right after (``trace_agent_invocation``).
A transfer between sub-agents makes the agent spans siblings under ``invoke_workflow``; without
content capture (ADK's default) ``transfer_to_agent`` has no arguments, so the sibling agent
spans are the only sign of the handoffs. The live processor reads the agent from the span's
name as it starts, and stops at the same agent spans as ``check``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from _otlp_files import json_line, live_run
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor
from otel_loopguard.cli import main
from otel_loopguard.otlp._sdk import span_record_from_readable
from otel_loopguard.replay import Checker
from otel_loopguard.types import Decision

PING_PONG = ["triage", "billing", "triage", "billing", "triage", "billing"]


def _adk_run(agents: Sequence[str]) -> list[ReadableSpan]:
    """One ADK run transferring along ``agents``, content capture off, live processor on."""
    with live_run("gcp.vertex.agent", "2.13.0") as (tracer, spans):  # noqa: SIM117 (tracer)
        with tracer.start_as_current_span("invoke_workflow triage", attributes={
                "gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "triage",
                "gen_ai.conversation.id": "conv-1"}):
            for turn, agent in enumerate(agents):
                with tracer.start_as_current_span(f"invoke_agent {agent}") as span:
                    span.set_attributes({"gen_ai.operation.name": "invoke_agent",
                                         "gen_ai.agent.description": f"The {agent} agent.",
                                         "gen_ai.agent.name": agent,
                                         "gen_ai.conversation.id": "conv-1"})
                    with tracer.start_as_current_span("generate_content scripted", attributes={
                            "gen_ai.operation.name": "generate_content", "gen_ai.agent.name": agent,
                            "gen_ai.request.model": "scripted"}):
                        if turn < len(agents) - 1:
                            with tracer.start_as_current_span(
                                    "execute_tool transfer_to_agent", attributes={
                                        "gen_ai.operation.name": "execute_tool",
                                        "gen_ai.tool.name": "transfer_to_agent",
                                        "gen_ai.tool.type": "TransferToAgentTool",
                                        "gen_ai.agent.name": agent,
                                        "gen_ai.tool.call.id": f"call_{turn}"}):
                                pass
    return spans


def test_sibling_adk_agents_stop_live_where_check_stops(tmp_path: Path) -> None:
    """triage → billing → triage → billing → triage → billing: two HANDOFF_LOOP stops, on the
    same agent spans live and in ``check``."""
    spans = _adk_run(PING_PONG)
    live = [(format(s.context.span_id, "016x"), s.attributes["loopguard.code"],
             s.attributes["loopguard.call_index"]) for s in spans
            if s.attributes and "loopguard.code" in s.attributes]
    records = [span_record_from_readable(span) for span in spans]
    checked = [(d.span_id, d.code, d.call_index) for report in
               Checker(LoopGuardConfig()).run(iter(records)) for d in report.findings]
    assert live == checked
    assert [code for _, code, _ in live] == ["HANDOFF_LOOP"] * 2
    names = {format(s.context.span_id, "016x"): s.name for s in spans}
    assert [names[span_id] for span_id, _, _ in live] == ["invoke_agent triage",
                                                          "invoke_agent billing"]
    trace_file = tmp_path / "adk.jsonl"
    trace_file.write_text(json_line(spans) + "\n", encoding="utf-8")
    assert main(["check", str(trace_file)]) == 1


def test_there_and_back_stays_quiet_live() -> None:
    """A single triage → billing → triage is no loop."""
    spans = _adk_run(["triage", "billing", "triage"])
    assert not any(k.startswith("loopguard.") for s in spans for k in (s.attributes or {}))


def _adk_parallel_run(turns: int, *, background: bool) -> tuple[list[int], list[ReadableSpan]]:
    """ADK's model turns: ``generate_content`` (attributes set after its start) stays open over
    the two searches it requested, its siblings; return the calls with batch evidence, live."""
    decisions: list[Decision] = []
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(LoopGuardSpanProcessor(
        LoopGuardConfig(), downstream=SimpleSpanProcessor(exporter), background=background,
        registry=CollectorRegistry(), raise_internal_errors=True,
        on_decision=decisions.append))
    tracer = provider.get_tracer("gcp.vertex.agent", "2.13.0")
    with tracer.start_as_current_span("invoke_agent triage", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "triage"}):
        for _ in range(turns):
            model = tracer.start_span("generate_content scripted")
            model.set_attributes({"gen_ai.operation.name": "generate_content",
                                  "gen_ai.agent.name": "triage"})
            for query in ("refund policy", "refunds"):
                with tracer.start_as_current_span("execute_tool search", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                        "gen_ai.agent.name": "triage",
                        "gen_ai.tool.call.arguments": f'{{"query": "{query}"}}',
                        "gen_ai.tool.call.result": '{"results": []}'}):
                    pass
            model.end()
    provider.shutdown()
    batch = [d.call_index for d in decisions if any(e.detector == "batch" for e in d.evidence)]
    return batch, list(exporter.get_finished_spans())


@pytest.mark.parametrize("background", [False, True], ids=["inline", "worker"])
def test_parallel_calls_are_in_the_turn_of_their_open_model_span(background: bool) -> None:
    """The same pair of parallel searches from three consecutive ADK turns is a repeated batch
    at call 6, live and in ``check`` (at call 8 when each call counted in the previous turn)."""
    live, spans = _adk_parallel_run(5, background=background)
    records = [span_record_from_readable(span) for span in spans]
    checked = [d.call_index for report in Checker(LoopGuardConfig()).run(iter(records))
               for d in report.findings if any(e.detector == "batch" for e in d.evidence)]
    assert live[0] == 6
    assert live == checked
