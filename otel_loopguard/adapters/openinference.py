"""OpenInference ``TOOL`` spans (openai-agents, LangChain, smolagents, LlamaIndex, CrewAI)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from otel_loopguard.adapters import _keys as k
from otel_loopguard.adapters._build import (
    HANDOFF,
    REDACTED,
    CallPlan,
    PlannedAdapter,
    build_handoff,
)
from otel_loopguard.adapters._rules import is_handoff_tool, is_non_call, is_plain_tool
from otel_loopguard.types import Handoff, SpanRecord

__all__ = ["OpenInferenceAdapter"]

_HANDOFF_PREFIX = "handoff to "


_LC_AGENT: Final = '"lc_agent_name"'
"""LangChain's agent name (``create_agent(..., name=...)``), inside the JSON of ``metadata``."""
_MAX_METADATA: Final = 65536


def _agent(attrs: Mapping[str, Any]) -> Any:
    """Return the call's agent: ``agent.name``, else LangChain's ``lc_agent_name``.

    OpenInference writes no agent span for LangChain; it copies the run's ``metadata`` onto
    each span, with the agent's name (``create_agent(..., name=...)``) in it.
    """
    found = attrs.get(k.OI_AGENT_NAME)
    if found is None:
        metadata = attrs.get(k.OI_METADATA)
        if type(metadata) is str and _LC_AGENT in metadata and len(metadata) <= _MAX_METADATA:
            try:
                parsed = json.loads(metadata)
            except (ValueError, RecursionError):
                return None
            found = parsed.get("lc_agent_name") if type(parsed) is dict else None
            return found if type(found) is str and found else None
    return found


class OpenInferenceAdapter(PlannedAdapter):
    """Reads ``openinference.span.kind = TOOL`` spans; ``handoff to X`` TOOL spans are handoffs.

    Handoff tools (LlamaIndex's ``handoff``...) become handoffs and smolagents' ``final_answer``
    nothing, by the tables of ``otel_loopguard.adapters._rules``. Thread-safe: stateless.
    """

    name = "openinference"

    @staticmethod
    def plan(name: str, attrs: Mapping[str, Any]) -> CallPlan | None:
        """Return what ``to_event`` reads: a call plan, ``HANDOFF`` or None (see GenAI)."""
        if attrs.get(k.OI_SPAN_KIND) != "TOOL":
            return None
        if name.startswith(_HANDOFF_PREFIX):
            return HANDOFF if attrs.get(k.OI_INPUT_VALUE) else None
        tool = attrs.get(k.OI_TOOL_NAME) or name
        plan = (tool, k.OI_INPUT_VALUE, k.OI_OUTPUT_VALUE, _agent(attrs))
        if is_plain_tool(tool):
            return plan
        raw_args = attrs.get(k.OI_INPUT_VALUE)
        if is_non_call(tool, raw_args):
            return None
        return HANDOFF if is_handoff_tool(tool, raw_args) else plan

    def handoff(self, span: SpanRecord, agent: str | None = None) -> Handoff:
        """Return the handoff of a handoff tool's span or of a ``handoff to X`` span."""
        attrs = span.attributes
        if not span.name.startswith(_HANDOFF_PREFIX):
            tool = attrs.get(k.OI_TOOL_NAME) or span.name
            return build_handoff(span, tool, k.OI_INPUT_VALUE, _agent(attrs) or agent)
        target = attrs.get(k.OI_OUTPUT_VALUE)
        if not target or target == REDACTED:
            target = span.name.removeprefix(_HANDOFF_PREFIX)
        source = attrs.get(k.OI_INPUT_VALUE)
        if source == REDACTED:  # hidden: it leaves from the agent span it runs in
            source = agent or ""
        return Handoff(from_agent=str(source), to_agent=str(target),
                       span_id=span.span_id, end_time_ns=span.end_time_ns)
