"""OpenLLMetry/Traceloop ``tool`` spans that carry no GenAI operation (decorator tools)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from otel_loopguard.adapters import _keys as k
from otel_loopguard.adapters._build import CallPlan, build_tool_call
from otel_loopguard.types import Handoff, SpanRecord, ToolCall

__all__ = ["OpenLLMetryAdapter"]


class OpenLLMetryAdapter:
    """Reads ``traceloop.span.kind = tool`` spans (``@tool`` decorator: entity input/output).

    Spans that also carry ``gen_ai.operation.name = execute_tool`` are read by the GenAI
    adapter first. Thread-safe: stateless.
    """

    name = "openllmetry"

    @staticmethod
    def plan(name: str, attrs: Mapping[str, Any]) -> CallPlan | None:
        """Return what ``to_event`` reads: a call plan or None (see GenAI)."""
        if attrs.get(k.TL_SPAN_KIND) != "tool":
            return None
        tool = attrs.get(k.GEN_AI_TOOL_NAME) or attrs.get(k.TL_ENTITY_NAME) or \
            name.removesuffix(".tool")
        if k.GEN_AI_TOOL_CALL_ARGUMENTS in attrs or k.GEN_AI_TOOL_CALL_RESULT in attrs:
            return (tool, k.GEN_AI_TOOL_CALL_ARGUMENTS, k.GEN_AI_TOOL_CALL_RESULT,
                    attrs.get(k.GEN_AI_AGENT_NAME))
        return (tool, k.TL_ENTITY_INPUT, k.TL_ENTITY_OUTPUT, attrs.get(k.GEN_AI_AGENT_NAME))

    def to_event(self, span: SpanRecord) -> ToolCall | Handoff | None:
        """Return the tool call of ``span``, or None."""
        plan = self.plan(span.name, span.attributes)
        return None if plan is None else build_tool_call(span, *plan)
