"""OpenAI Agents SDK spans as Logfire exports them (``Function: name``, ``Handoff: a -> b``)."""

from __future__ import annotations

from otel_loopguard.adapters import _keys as k
from otel_loopguard.adapters._build import build_tool_call
from otel_loopguard.types import Handoff, SpanRecord, ToolCall

__all__ = ["LogfireAdapter"]


class LogfireAdapter:
    """Reads openai-agents function spans (``name``, ``input``, ``output``) and handoffs.

    Thread-safe: stateless.
    """

    name = "logfire"

    def to_event(self, span: SpanRecord) -> ToolCall | Handoff | None:
        """Return the tool call or handoff of ``span``, or None."""
        if span.name.startswith(k.LOGFIRE_FUNCTION_PREFIX):
            tool = span.attributes.get(k.AGENTS_NAME) or \
                span.name.removeprefix(k.LOGFIRE_FUNCTION_PREFIX)
            return build_tool_call(span, tool, k.AGENTS_INPUT, k.AGENTS_OUTPUT)
        if span.name.startswith(k.LOGFIRE_HANDOFF_PREFIX):
            body = span.name.removeprefix(k.LOGFIRE_HANDOFF_PREFIX)
            source, sep, target = body.partition(" -> ")
            if sep and source and target:
                return Handoff(from_agent=source.strip(), to_agent=target.strip(),
                               span_id=span.span_id, end_time_ns=span.end_time_ns)
        return None
