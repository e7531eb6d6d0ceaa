"""OTel GenAI ``execute_tool`` spans (official instrumentations, Traceloop 0.62, hand-made)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from otel_loopguard.adapters import _keys as k
from otel_loopguard.adapters._build import HANDOFF, CallPlan, build_tool_call
from otel_loopguard.types import Handoff, SpanRecord, ToolCall

__all__ = ["GenAIAdapter"]


class GenAIAdapter:
    """Reads ``gen_ai.operation.name = execute_tool`` spans and Traceloop ``handoff`` spans.

    Thread-safe: stateless.
    """

    name = "genai"

    @staticmethod
    def plan(name: str, attrs: Mapping[str, Any]) -> CallPlan | None:
        """Return what ``to_event`` reads from a span with this name and these attributes.

        ``(tool, arguments key, result key, agent)`` for a tool call, ``HANDOFF`` for a
        handoff, None when the span is neither.
        """
        op = attrs.get(k.GEN_AI_OPERATION_NAME)
        if op == k.OP_EXECUTE_TOOL:
            tool = attrs.get(k.GEN_AI_TOOL_NAME) or attrs.get(k.TL_ENTITY_NAME) or \
                name.removeprefix("execute_tool").strip() or "unknown"
            return (tool, k.GEN_AI_TOOL_CALL_ARGUMENTS, k.GEN_AI_TOOL_CALL_RESULT,
                    attrs.get(k.GEN_AI_AGENT_NAME))
        if op == k.OP_HANDOFF:
            source = attrs.get(k.GEN_AI_HANDOFF_FROM)
            target = attrs.get(k.GEN_AI_HANDOFF_TO)
            if source and target and target != "unknown":
                return HANDOFF
        return None

    def to_event(self, span: SpanRecord) -> ToolCall | Handoff | None:
        """Return the tool call or handoff of ``span``, or None."""
        attrs = span.attributes
        plan = self.plan(span.name, attrs)
        if plan is None:
            return None
        if plan is HANDOFF:
            return Handoff(from_agent=str(attrs.get(k.GEN_AI_HANDOFF_FROM)),
                           to_agent=str(attrs.get(k.GEN_AI_HANDOFF_TO)),
                           span_id=span.span_id, end_time_ns=span.end_time_ns)
        return build_tool_call(span, *plan)
