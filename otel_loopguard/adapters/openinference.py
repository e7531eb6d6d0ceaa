"""OpenInference ``TOOL`` spans (openai-agents, LangChain/LangGraph instrumentations)."""

from __future__ import annotations

from otel_loopguard.adapters import _keys as k
from otel_loopguard.adapters._build import build_tool_call
from otel_loopguard.types import Handoff, SpanRecord, ToolCall

__all__ = ["OpenInferenceAdapter"]

_HANDOFF_PREFIX = "handoff to "


class OpenInferenceAdapter:
    """Reads ``openinference.span.kind = TOOL`` spans; ``handoff to X`` TOOL spans are handoffs.

    Thread-safe: stateless.
    """

    name = "openinference"

    def to_event(self, span: SpanRecord) -> ToolCall | Handoff | None:
        """Return the tool call or handoff of ``span``, or None."""
        attrs = span.attributes
        if attrs.get(k.OI_SPAN_KIND) != "TOOL":
            return None
        if span.name.startswith(_HANDOFF_PREFIX):
            target = attrs.get(k.OI_OUTPUT_VALUE) or span.name.removeprefix(_HANDOFF_PREFIX)
            source = attrs.get(k.OI_INPUT_VALUE)
            if not source:
                return None
            return Handoff(from_agent=str(source), to_agent=str(target), span_id=span.span_id,
                           end_time_ns=span.end_time_ns)
        tool = attrs.get(k.OI_TOOL_NAME) or span.name
        return build_tool_call(span, tool, k.OI_INPUT_VALUE, k.OI_OUTPUT_VALUE,
                               attrs.get(k.OI_AGENT_NAME))
