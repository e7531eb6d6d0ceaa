"""Handoff detection must tell handing a task back and forth from delegation and parallel work.

Each case reproduces, without a framework, the spans a real run wrote (see the audit scripts):
the OpenAI Agents SDK under the official GenAI instrumentation running two sub-agents with
``asyncio.gather`` in three rounds; an orchestrator calling a sub-agent as a tool
(``Agent.as_tool``, ADK's ``AgentTool``) with content capture off; a function tool named
``transfer_to_savings``.
"""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_loopguard.adapters import to_event
from otel_loopguard.assembly import assemble_trace
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.engine import LoopEngine
from otel_loopguard.processor import LoopGuardSpanProcessor
from otel_loopguard.types import Handoff, SpanRecord, ToolCall

TRACE = "ab" * 16


def _agent_span(span_id: int, name: str, start: int, end: int) -> SpanRecord:
    return SpanRecord(TRACE, f"{span_id:016x}", f"{1:016x}", f"invoke_agent {name}", start, end,
                      {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name})


def _root() -> SpanRecord:
    return SpanRecord(TRACE, f"{1:016x}", None, "invoke_workflow fanout", 0, 1_000,
                      {"gen_ai.operation.name": "invoke_workflow"})


def test_parallel_sibling_agents_are_no_handoffs_in_check() -> None:
    """Two sub-agents run side by side in three rounds: each round's second agent starts while
    the first still runs. No handoff, so no HANDOFF_LOOP (today: stop at the 5th agent)."""
    spans = [_root()]
    for rnd in range(3):
        base = 100 + rnd * 100
        spans += [_agent_span(10 + 2 * rnd, "analyst_a", base, base + 40),
                  _agent_span(11 + 2 * rnd, "analyst_b", base + 5, base + 45)]
    trace = assemble_trace(TRACE, spans, LoopGuardConfig())
    assert not [e for e in trace.events if isinstance(e.event, Handoff)]


def test_sequential_sibling_agents_still_hand_off() -> None:
    """The same agents one after another: a handoff at each start, as before."""
    spans = [_root()] + [_agent_span(10 + i, ("triage", "billing")[i % 2], 100 + i * 50,
                                     140 + i * 50) for i in range(5)]
    trace = assemble_trace(TRACE, spans, LoopGuardConfig())
    assert len([e for e in trace.events if isinstance(e.event, Handoff)]) == 4


def test_parallel_sibling_agents_are_no_handoffs_live() -> None:
    """The same, live: spans started together under one parent, ended together."""
    exporter = InMemorySpanExporter()
    processor = LoopGuardSpanProcessor(LoopGuardConfig(), downstream=SimpleSpanProcessor(exporter),
                                       registry=CollectorRegistry(), raise_internal_errors=True)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")

    def attrs(name: str) -> dict[str, Any]:
        return {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}

    with tracer.start_as_current_span("invoke_workflow fanout",
                                      attributes={"gen_ai.operation.name": "invoke_workflow"}):
        for _ in range(3):
            a = tracer.start_span("invoke_agent analyst_a", attributes=attrs("analyst_a"))
            b = tracer.start_span("invoke_agent analyst_b", attributes=attrs("analyst_b"))
            a.end()
            b.end()
    processor.force_flush()
    assert not any(k.startswith("loopguard.") for s in exporter.get_finished_spans()
                   for k in (s.attributes or {}))
    provider.shutdown()


def test_sub_agent_called_as_a_tool_is_no_handoff() -> None:
    """An orchestrator calls a sub-agent as a tool (its ``search`` runs inside the outer call),
    then another tool, three times with different tasks, results not captured. The agent of the
    calls changes researcher → orchestrator → researcher..., but nested calls are delegation
    (today: HANDOFF_LOOP stop at the 7th call)."""
    engine = LoopEngine(LoopGuardConfig())
    run = engine.new_run()
    t = 0
    actions = []
    for i in range(3):
        calls = [ToolCall("search", agent="researcher", span_id=f"{3 * i + 1:016x}",
                          start_time_ns=t + 20, end_time_ns=t + 30),
                 ToolCall("research", agent="orchestrator", span_id=f"{3 * i + 2:016x}",
                          start_time_ns=t + 10, end_time_ns=t + 40),
                 ToolCall("summarize", agent="orchestrator", span_id=f"{3 * i + 3:016x}",
                          start_time_ns=t + 50, end_time_ns=t + 60)]
        t += 100
        actions += [engine.process(run, call).action.label for call in calls]
    assert set(actions) == {"continue"}, actions


def test_agent_change_between_sequential_calls_still_hands_off() -> None:
    """Calls of two agents one after another, the same call with the same result each time
    (nothing new): a ping-pong, stopped. Results not captured, each call may have brought
    something new (absent is not the same): no ping-pong is known, and the same call again is
    ``repeat``'s, which never stops by itself."""
    def actions(arguments: dict[str, Any] | None, result: str | None) -> list[str]:
        engine = LoopEngine(LoopGuardConfig())
        run = engine.new_run()
        return [engine.process(run, ToolCall(
            "lookup", arguments=arguments, result=result, has_result=result is not None,
            agent=("triage", "billing")[i % 2], span_id=f"{i + 1:016x}",
            start_time_ns=100 * i, end_time_ns=100 * i + 50)).action.label for i in range(5)]

    assert actions({"q": "card 4411"}, "no card 4411")[-1] == "stop"
    assert actions({"q": "card 4411"}, None) == ["continue", "continue", "warn", "warn", "replan"]
    assert set(actions(None, None)) == {"continue"}


def test_transfer_named_business_tool_is_a_tool_call() -> None:
    """``transfer_to_savings(amount=100)`` is an application tool, not a handoff to an agent
    named "savings"; LangGraph's ``transfer_to_billing`` (no arguments) stays a handoff."""
    def span(tool: str, args: dict[str, Any]) -> SpanRecord:
        return SpanRecord(TRACE, "1" * 16, None, f"execute_tool {tool}", 0, 1, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
            "gen_ai.tool.call.arguments": json.dumps(args),
            "gen_ai.tool.call.result": json.dumps({"error": {"code": 401}})})
    assert isinstance(to_event(span("transfer_to_savings", {"amount": 100})), ToolCall)
    assert isinstance(to_event(span("transfer_to_billing", {})), Handoff)
    assert isinstance(to_event(span("transfer_to_billing", {"task_description": "refund"})),
                      Handoff)


def test_run_key_agent_counts_no_handoff_across_invocations() -> None:
    """With run_key=agent, a planner handing work to a researcher three times, the researcher
    finding something new each time (in its own runs), is not a handoff loop of the parent's
    run (today: HANDOFF_LOOP stop at the 4th agent span, live and in check)."""
    from otel_loopguard.replay import Checker

    spans = [_root()]
    for i in range(7):
        name = ("planner", "researcher")[i % 2]
        spans.append(_agent_span(10 + i, name, 100 * (i + 1), 100 * (i + 1) + 50))
        if name == "researcher":
            spans.append(SpanRecord(TRACE, f"{100 + i:016x}", f"{10 + i:016x}",
                                    "execute_tool search", 100 * (i + 1) + 10,
                                    100 * (i + 1) + 20, {
                                        "gen_ai.operation.name": "execute_tool",
                                        "gen_ai.tool.name": "search",
                                        "gen_ai.tool.call.arguments": json.dumps({"q": i}),
                                        "gen_ai.tool.call.result": f"result {i}"}))
    reports = list(Checker(LoopGuardConfig.create(run_key="agent")).run(iter(spans)))
    assert not [f for r in reports for f in r.findings]


def _delegations(worker_calls: list[ToolCall | None]) -> list[str]:
    """A manager handing a task to its worker and taking it back, the worker's call between;
    return the handoff decisions' actions."""
    engine = LoopEngine(LoopGuardConfig())
    run = engine.new_run()
    actions = []
    for n, work in enumerate(worker_calls):
        t = 100 * n
        actions.append(engine.process_handoff(run, Handoff(
            "manager", "researcher", f"{t + 1:016x}", t + 1)).action.label)
        if work is not None:
            engine.process(run, ToolCall(work.tool, arguments=work.arguments,
                                         result=work.result, has_result=work.has_result,
                                         agent="researcher", span_id=f"{t + 2:016x}",
                                         start_time_ns=t + 2, end_time_ns=t + 3))
        actions.append(engine.process_handoff(run, Handoff(
            "researcher", "manager", f"{t + 4:016x}", t + 4)).action.label)
    return actions


def test_a_worker_reading_other_pages_without_results_is_delegation() -> None:
    """A hierarchical crew at ``arguments`` capture: each delegation the worker reads another
    page, its result not captured. Absent is not the same: a call not made before may have
    done new work, so control coming back is no ping-pong (a stop on 4 healthy crews in an
    unseen CrewAI audit)."""
    pages = [ToolCall(tool="read_website", arguments={"url": f"https://example.com/{n}"})
             for n in range(4)]
    assert set(_delegations(pages)) == {"continue"}


def test_handing_back_and_forth_with_nothing_new_between_is_still_a_loop() -> None:
    """No call between, or the same call with the same result each time (nothing new):
    stopped (F11)."""
    assert "stop" in _delegations([None] * 3)
    same = ToolCall(tool="read_website", arguments={"url": "https://example.com/a"},
                    result="the same page", has_result=True)
    assert "stop" in _delegations([same] * 4)


def test_the_same_call_between_handoffs_without_its_result_may_be_new_work() -> None:
    """Two agents taking turns at arguments capture (a game-playing harness: one agent sends
    the move, the other reads the game's recent turns with the same arguments each time): the
    reader's result is not captured, and the game moved on since its last call, so it may be
    new (absent is not the same). A stop on 4 healthy runs of an unseen audit."""
    reads = ToolCall(tool="get_recent_turns", arguments={"n": 5})
    assert "stop" not in _delegations([reads] * 5)
