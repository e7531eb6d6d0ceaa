"""The assembly builds each tool call once, placed in its run: the same call as built, then placed.

``adapters.placed_event`` reads the default adapters' plans and builds the call with its agent
and model turn; it must give what ``to_event`` followed by ``ToolCall.in_context`` gives, on
every span shape the recorded frameworks produce. And the assembly reads the owner of a span
once per parent span, which must not change the events.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from otel_loopguard.adapters import DEFAULT_ADAPTERS, placed_event, to_event
from otel_loopguard.assembly import assemble_trace
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.replay.tracefile import iter_spans
from otel_loopguard.types import Handoff, ModelTurn, SpanRecord, ToolCall

_RECORDED = sorted((Path(__file__).parent / "data" / "recorded").glob("*.jsonl"))


def _spans(path: Path) -> list[SpanRecord]:
    return list(iter_spans(str(path)))


_TOOL_SPAN_KINDS = {("gen_ai.operation.name", "execute_tool"), ("openinference.span.kind", "TOOL"),
                    ("traceloop.span.kind", "tool")}


def _built_then_placed(span: SpanRecord, agent: str | None,
                       turn: int | None) -> ToolCall | Handoff | None:
    event = to_event(span)
    if isinstance(event, ToolCall):
        return event.in_context(event.agent or agent, turn)
    if isinstance(event, Handoff) and not event.from_agent and agent and any(
            span.attributes.get(key) == value for key, value in _TOOL_SPAN_KINDS):
        # a handoff tool (LlamaIndex's handoff) whose span names no source hands off from the
        # agent it is placed under; a handoff span keeps the source it names
        return dataclasses.replace(event, from_agent=agent)
    return event


@pytest.mark.parametrize("path", _RECORDED, ids=lambda p: p.stem)
def test_placed_event_is_the_call_built_then_placed(path: Path) -> None:
    spans = _spans(path)
    events = 0
    for span in spans:
        for agent, turn in ((None, None), ("planner", None), (None, 3), ("planner", 0)):
            expected = _built_then_placed(span, agent, turn)
            assert placed_event(span, DEFAULT_ADAPTERS, agent, turn) == expected, span.name
            events += expected is not None
    assert events  # every recording has tool calls or handoffs


def test_other_adapters_are_asked_through_to_event_and_placed_the_same() -> None:
    spans = _spans(_RECORDED[0])
    adapters = tuple(reversed(DEFAULT_ADAPTERS))  # not the default tuple: no plans read
    for span in spans:
        event = to_event(span, adapters)
        expected = event.in_context(event.agent or "planner", 2) \
            if isinstance(event, ToolCall) else event
        assert placed_event(span, adapters, "planner", 2) == expected


def _tool_span(span_id: str, parent: str | None, end: int) -> SpanRecord:
    return SpanRecord("ab" * 16, span_id, parent, "execute_tool search", end - 1, end,
                      {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                       "gen_ai.tool.call.arguments": '{"q": 1}'})


def test_each_call_gets_the_agent_above_its_own_parent() -> None:
    """Two agents, calls under each and under a span below one of them: owners by parent."""
    trace = "ab" * 16
    spans = [
        SpanRecord(trace, "a" * 16, None, "invoke_agent triage", 0, 100,
                   {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "triage"}),
        SpanRecord(trace, "b" * 16, "a" * 16, "invoke_agent billing", 10, 90,
                   {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing"}),
        SpanRecord(trace, "c" * 16, "b" * 16, "step", 11, 80, {}),
        SpanRecord(trace, "d" * 16, "b" * 16, "chat gpt", 12, 13,
                   {"gen_ai.operation.name": "chat"}),
        _tool_span("1" * 16, "a" * 16, 5),
        _tool_span("2" * 16, "b" * 16, 20),
        _tool_span("3" * 16, "c" * 16, 30),
        _tool_span("4" * 16, "c" * 16, 40),
        _tool_span("5" * 16, None, 50),
    ]
    assembled = assemble_trace(trace, spans, LoopGuardConfig(), model_turns=True)
    placed = [(type(item.event).__name__, item.agent_span_id,
               getattr(item.event, "agent", None), getattr(item.event, "turn", None))
              for item in assembled.events]
    assert placed == [
        ("ToolCall", "a" * 16, "triage", None),  # before the first model turn: no turn yet
        ("ModelTurn", "b" * 16, None, None),
        ("ToolCall", "b" * 16, "billing", 1),
        ("ToolCall", "b" * 16, "billing", 1),
        ("ToolCall", "b" * 16, "billing", 1),
        ("ToolCall", None, None, 1),
    ]
    assert assembled.unparented_tool_calls == 1
    assert isinstance(assembled.events[1].event, ModelTurn)


def test_the_service_name_is_the_first_resource_that_has_one() -> None:
    trace = "cd" * 16
    bare: dict[str, str] = {}
    named = {"service.name": "billing"}
    spans = [SpanRecord(trace, f"{i:016x}", None if i == 0 else "0" * 15 + "0", "x", i, i + 1,
                        {}, resource=resource)
             for i, resource in enumerate([bare, bare, named, {"service.name": "later"}])]
    assert assemble_trace(trace, spans, LoopGuardConfig()).service_name == "billing"
    assert assemble_trace(trace, spans[:2], LoopGuardConfig()).service_name is None
