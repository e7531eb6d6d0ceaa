"""assemble_trace: tool calls get their agent and model turn; template and conversation."""

from __future__ import annotations

from typing import Any

from otel_loopguard.adapters import DEFAULT_ADAPTERS
from otel_loopguard.assembly import assemble_trace
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.replay import Checker
from otel_loopguard.types import Handoff, SpanRecord, ToolCall

TRACE = "ab" * 16


def _span(span_id: int, parent: int | None, name: str, end: int, **attributes: Any) -> SpanRecord:
    """Keyword ``gen_ai_tool_name`` is attribute ``gen_ai.tool.name``."""
    keys = {key: "gen_ai." + key.removeprefix("gen_ai_").replace("_", ".", 1)
            for key in attributes}
    return SpanRecord(TRACE, f"{span_id:016x}", f"{parent:016x}" if parent else None, name,
                      end - 1, end, {keys[key]: value for key, value in attributes.items()})


def _agent_trace(*, models: bool) -> list[SpanRecord]:
    spans = [_span(1, None, "invoke_agent support", 100, gen_ai_operation_name="invoke_agent",
                   gen_ai_agent_name="support")]
    for turn in range(3):
        if models:
            spans.append(_span(10 + turn, 1, "chat", 10 * turn + 1,
                               gen_ai_operation_name="chat"))
        spans.append(_span(20 + turn, 1, "execute_tool search", 10 * turn + 2,
                           gen_ai_operation_name="execute_tool", gen_ai_tool_name="search"))
    spans[1].attributes["gen_ai.conversation.id"] = "conv-1"  # type: ignore[index]
    spans[-1].attributes["gen_ai.prompt.name"] = "tpl"  # type: ignore[index]
    return spans[::-1]  # any order in


def _calls(spans: list[SpanRecord], adapters: Any = DEFAULT_ADAPTERS) -> list[Any]:
    assembled = assemble_trace(TRACE, spans, LoopGuardConfig(), adapters)
    return [(item.event.tool, item.event.agent, item.event.turn, item.agent_span_id)
            if isinstance(item.event, ToolCall) else item.event for item in assembled.events]


def test_turns_agent_template_conversation() -> None:
    """Each tool call gets the model turns before it, its agent, and the trace's identity."""
    spans = _agent_trace(models=True)
    assert _calls(spans) == [("search", "support", turn, f"{1:016x}") for turn in (1, 2, 3)]
    assembled = assemble_trace(TRACE, spans, LoopGuardConfig())
    assert assembled.prompt_template == "tpl"
    assert assembled.conversation == "conv-1"
    assert assembled.first_start_ns == 0


def test_no_model_spans_no_turns() -> None:
    """Without model spans the turn of every call is unknown (None)."""
    assert [call[2] for call in _calls(_agent_trace(models=False))] == [None, None, None]


def test_custom_adapter_list_sees_every_span() -> None:
    """A custom adapter list is asked about every non-model span, not only likely ones."""
    seen: list[str] = []

    class Everything:
        name = "everything"

        def to_event(self, span: SpanRecord) -> ToolCall | None:
            seen.append(span.name)
            return ToolCall(tool=span.name, span_id=span.span_id, end_time_ns=span.end_time_ns)

    spans = _agent_trace(models=True)
    calls = _calls(spans, [Everything()])
    assert sorted(seen) == ["execute_tool search"] * 3 + ["invoke_agent support"]
    assert calls[-1] == ("invoke_agent support", None, 3, None)
    assert _calls(spans, list(DEFAULT_ADAPTERS)) == _calls(spans)


def test_sibling_agents_infer_a_handoff() -> None:
    """Two consecutive sibling agent spans (no explicit handoff) give an inferred handoff."""
    spans = [
        _span(1, None, "workflow", 100),
        _span(2, 1, "invoke_agent triage", 10, gen_ai_operation_name="invoke_agent",
              gen_ai_agent_name="triage"),
        _span(3, 1, "invoke_agent billing", 20, gen_ai_operation_name="invoke_agent",
              gen_ai_agent_name="billing"),
    ]
    (handoff,) = _calls(spans)
    assert isinstance(handoff, Handoff)
    assert (handoff.from_agent, handoff.to_agent, handoff.explicit) == ("triage", "billing", False)


def _adk_parallel_trace(turns: int) -> list[SpanRecord]:
    """Google ADK's nesting: ``generate_content`` stays open over the two calls it requested,
    which are its siblings under the agent span; one turn every 100 ns."""
    spans = [SpanRecord(TRACE, f"{1:016x}", None, "invoke_agent triage", 0, 10_000,
                        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "triage"})]
    for turn in range(turns):
        start = 100 * (turn + 1)
        spans.append(SpanRecord(TRACE, f"{10 + turn:016x}", f"{1:016x}",
                                "generate_content scripted", start, start + 90,
                                {"gen_ai.operation.name": "generate_content"}))
        for n, query in enumerate(("refund policy", "refunds")):
            spans.append(SpanRecord(
                TRACE, f"{100 + 2 * turn + n:016x}", f"{1:016x}", "execute_tool search",
                start + 10 + 30 * n, start + 30 + 30 * n,
                {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                 "gen_ai.tool.call.arguments": f'{{"query": "{query}"}}',
                 "gen_ai.tool.call.result": '{"results": []}'}))
    return spans


def test_a_call_under_an_open_model_span_is_in_its_turn() -> None:
    """ADK's model span ends after its tool calls: each call is in that span's turn, not the
    previous one, and the first turn's calls have a turn too."""
    assert [call[2] for call in _calls(_adk_parallel_trace(3))] == [1, 1, 2, 2, 3, 3]
    items = assemble_trace(TRACE, _adk_parallel_trace(2), LoopGuardConfig(),
                           model_turns=True).events
    assert [(type(i.event).__name__, i.turn_open) for i in items] == [
        ("ToolCall", True), ("ToolCall", True), ("ModelTurn", False),
        ("ToolCall", True), ("ToolCall", True), ("ModelTurn", False)]
    assert [i.event.index for i in items if not isinstance(i.event, ToolCall)] == [1, 2]


def test_a_model_span_that_ends_first_keeps_the_old_count() -> None:
    """A model span that ends before its calls (most frameworks), or one that is not the call's
    sibling, leaves the turn at the model turns that ended before the call."""
    spans = _adk_parallel_trace(2)
    moved = [SpanRecord(s.trace_id, s.span_id, f"{2:016x}" if "generate" in s.name else
                        s.parent_span_id, s.name, s.start_time_ns, s.end_time_ns, s.attributes)
             for s in spans]
    assert [call[2] for call in _calls(moved)] == [None, None, 1, 1]
    assert [call[2] for call in _calls(_agent_trace(models=True))] == [1, 2, 3]


def test_repeated_parallel_pair_is_a_batch_at_the_sixth_call() -> None:
    """``check`` on ADK's nesting: the same pair from three consecutive turns is a repeated
    batch at call 6 (it came at call 8 when each call was counted in the previous turn)."""
    reports = Checker(LoopGuardConfig()).run(iter(_adk_parallel_trace(5)))
    found = [d.call_index for report in reports for d in report.findings
             for e in d.evidence if e.detector == "batch"]
    assert found[0] == 6
