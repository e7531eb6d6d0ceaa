"""OpenAI Agents SDK spans as Logfire exports them (``Function: name``, ``Handoff: a -> b``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from otel_loopguard.adapters import _keys as k
from otel_loopguard.adapters._build import HANDOFF, CallPlan, PlannedAdapter
from otel_loopguard.types import Handoff, SpanRecord

__all__ = ["LogfireAdapter"]


class LogfireAdapter(PlannedAdapter):
    """Reads openai-agents function spans (``name``, ``input``, ``output``) and handoffs.

    Thread-safe: stateless.
    """

    name = "logfire"

    @staticmethod
    def plan(name: str, attrs: Mapping[str, Any]) -> CallPlan | None:
        """Return what ``to_event`` reads: a call plan, ``HANDOFF`` or None (see GenAI)."""
        if name.startswith(k.LOGFIRE_FUNCTION_PREFIX):
            tool = attrs.get(k.AGENTS_NAME) or name.removeprefix(k.LOGFIRE_FUNCTION_PREFIX)
            return (tool, k.AGENTS_INPUT, k.AGENTS_OUTPUT, None)
        if name.startswith(k.LOGFIRE_HANDOFF_PREFIX) and _handoff_agents(name) is not None:
            return HANDOFF
        return None

    def handoff(self, span: SpanRecord) -> Handoff:
        """Return the handoff of a ``Handoff: a -> b`` span."""
        source, target = _handoff_agents(span.name) or ("", "")
        return Handoff(from_agent=source, to_agent=target, span_id=span.span_id,
                       end_time_ns=span.end_time_ns)


def _handoff_agents(name: str) -> tuple[str, str] | None:
    """Return ``(from, to)`` of a ``Handoff: a -> b`` span name, or None."""
    body = name.removeprefix(k.LOGFIRE_HANDOFF_PREFIX)
    source, sep, target = body.partition(" -> ")
    if sep and source and target:
        return source.strip(), target.strip()
    return None
