"""OTel GenAI ``execute_tool`` spans (official instrumentations, Traceloop, ADK, Strands...)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from otel_loopguard.adapters import _keys as k
from otel_loopguard.adapters._build import HANDOFF, CallPlan, PlannedAdapter, build_handoff
from otel_loopguard.adapters._rules import is_handoff_tool, is_non_call, is_plain_tool
from otel_loopguard.types import Handoff, SpanRecord

__all__ = ["GenAIAdapter"]

_ADK_PLACEHOLDER = "{}"
"""What ADK's legacy schema writes for the response when content capture is off."""


def _call_plan(name: str, attrs: Mapping[str, Any]) -> CallPlan:
    """Return ``(tool, arguments key, result key, agent)`` of an ``execute_tool`` span."""
    tool = attrs.get(k.GEN_AI_TOOL_NAME) or attrs.get(k.TL_ENTITY_NAME) or \
        name.removeprefix("execute_tool").strip() or "unknown"
    args_key, result_key = k.GEN_AI_TOOL_CALL_ARGUMENTS, k.GEN_AI_TOOL_CALL_RESULT
    if args_key not in attrs:
        if attrs.get(k.ADK_TOOL_RESPONSE, _ADK_PLACEHOLDER) != _ADK_PLACEHOLDER:
            args_key, result_key = k.ADK_TOOL_CALL_ARGS, k.ADK_TOOL_RESPONSE
        elif k.PAI_TOOL_ARGUMENTS in attrs or k.PAI_TOOL_RESPONSE in attrs:
            args_key, result_key = k.PAI_TOOL_ARGUMENTS, k.PAI_TOOL_RESPONSE
    return tool, args_key, result_key, attrs.get(k.GEN_AI_AGENT_NAME)


class GenAIAdapter(PlannedAdapter):
    """Reads ``gen_ai.operation.name = execute_tool`` spans and Traceloop ``handoff`` spans.

    Handoff tools (ADK's ``transfer_to_agent``, Strands' ``handoff_to_agent``...) become
    handoffs and summary spans (ADK's ``(merged tools)``) nothing, by the tables of
    ``otel_loopguard.adapters._rules``.
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
            plan = _call_plan(name, attrs)
            if is_plain_tool(plan[0]):
                return plan
            raw_args = attrs.get(plan[1])
            if is_non_call(plan[0], raw_args):
                return None
            return HANDOFF if is_handoff_tool(plan[0], raw_args) else plan
        if op == k.OP_HANDOFF:
            source = attrs.get(k.GEN_AI_HANDOFF_FROM)
            target = attrs.get(k.GEN_AI_HANDOFF_TO)
            if source and target and target != "unknown":
                return HANDOFF
        return None

    def handoff(self, span: SpanRecord, agent: str | None = None) -> Handoff:
        """Return the handoff of a handoff tool's span or of a Traceloop ``handoff`` span."""
        attrs = span.attributes
        if attrs.get(k.GEN_AI_OPERATION_NAME) == k.OP_EXECUTE_TOOL:
            tool, args_key, _, own_agent = _call_plan(span.name, attrs)
            return build_handoff(span, tool, args_key, own_agent or agent)
        return Handoff(from_agent=str(attrs.get(k.GEN_AI_HANDOFF_FROM)),
                       to_agent=str(attrs.get(k.GEN_AI_HANDOFF_TO)),
                       span_id=span.span_id, end_time_ns=span.end_time_ns)
