"""OpenLLMetry/Traceloop ``tool`` spans that carry no GenAI operation (decorator tools)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from otel_loopguard.adapters import _keys as k
from otel_loopguard.adapters._build import HANDOFF, CallPlan, PlannedAdapter, build_handoff
from otel_loopguard.adapters._rules import is_handoff_tool, is_non_call, is_plain_tool
from otel_loopguard.types import Handoff, SpanRecord

__all__ = ["OpenLLMetryAdapter"]


class OpenLLMetryAdapter(PlannedAdapter):
    """Reads ``traceloop.span.kind = tool`` spans (``@tool`` decorator: entity input/output).

    Spans that also carry ``gen_ai.operation.name = execute_tool`` are read by the GenAI
    adapter first. MCP client calls (``{"tool_name", "arguments"}`` in, ``{"result",
    "is_error"}`` out) are unwrapped by ``_unwrap``. Thread-safe: stateless.
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
            plan = (tool, k.GEN_AI_TOOL_CALL_ARGUMENTS, k.GEN_AI_TOOL_CALL_RESULT,
                    attrs.get(k.GEN_AI_AGENT_NAME))
        else:
            plan = (tool, k.TL_ENTITY_INPUT, k.TL_ENTITY_OUTPUT, attrs.get(k.GEN_AI_AGENT_NAME))
        if is_plain_tool(tool):
            return plan
        raw_args = attrs.get(plan[1])
        if is_non_call(tool, raw_args):
            return None
        return HANDOFF if is_handoff_tool(tool, raw_args) else plan

    def handoff(self, span: SpanRecord, agent: str | None = None) -> Handoff:
        """Return the handoff of a handoff tool's span."""
        attrs = span.attributes
        tool = attrs.get(k.GEN_AI_TOOL_NAME) or attrs.get(k.TL_ENTITY_NAME) or \
            span.name.removesuffix(".tool")
        key = k.GEN_AI_TOOL_CALL_ARGUMENTS if k.GEN_AI_TOOL_CALL_ARGUMENTS in attrs \
            else k.TL_ENTITY_INPUT
        return build_handoff(span, tool, key, attrs.get(k.GEN_AI_AGENT_NAME) or agent)
