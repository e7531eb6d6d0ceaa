"""Span adapters: spans of each instrumentation convention → tool calls and handoffs.

``to_event(span)`` tries the adapters in a fixed order (GenAI, OpenInference, OpenLLMetry,
Logfire/openai-agents) and returns the first answer. Helpers here also find a span's agent,
whether it is a model turn (and whether that turn asked for tools), its prompt template and its
conversation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from otel_loopguard.adapters import _keys as k
from otel_loopguard.adapters._turns import tool_request_of
from otel_loopguard.adapters.genai import GenAIAdapter
from otel_loopguard.adapters.logfire import LogfireAdapter
from otel_loopguard.adapters.openinference import OpenInferenceAdapter
from otel_loopguard.adapters.openllmetry import OpenLLMetryAdapter
from otel_loopguard.signature import digest
from otel_loopguard.types import Handoff, SpanAdapter, SpanRecord, ToolCall

__all__ = [
    "DEFAULT_ADAPTERS",
    "GenAIAdapter",
    "LogfireAdapter",
    "OpenInferenceAdapter",
    "OpenLLMetryAdapter",
    "agent_of",
    "conversation_of",
    "is_candidate",
    "is_model_turn",
    "may_be_event",
    "prompt_template_of",
    "to_event",
    "tool_request_of",
]

DEFAULT_ADAPTERS: tuple[SpanAdapter, ...] = (
    GenAIAdapter(), OpenInferenceAdapter(), OpenLLMetryAdapter(), LogfireAdapter())


def is_candidate(name: str, attributes: Mapping[str, Any]) -> bool:
    """Return True when a span may be a tool call or handoff (the hot-path pre-filter)."""
    return (k.GEN_AI_OPERATION_NAME in attributes or k.OI_SPAN_KIND in attributes
            or k.TL_SPAN_KIND in attributes or name.startswith(("Function: ", "Handoff: ")))


def may_be_event(name: str, attributes: Mapping[str, Any]) -> bool:
    """Return True when a default adapter could turn the span into a tool call or handoff.

    Exactly the conditions the default adapters test first, so the hot path can skip building
    a ``SpanRecord`` for the many agent, chain and model spans.
    """
    return (attributes.get(k.GEN_AI_OPERATION_NAME) in (k.OP_EXECUTE_TOOL, k.OP_HANDOFF)
            or attributes.get(k.OI_SPAN_KIND) == "TOOL"
            or attributes.get(k.TL_SPAN_KIND) == "tool"
            or name.startswith((k.LOGFIRE_FUNCTION_PREFIX, k.LOGFIRE_HANDOFF_PREFIX)))


def to_event(span: SpanRecord,
             adapters: Sequence[SpanAdapter] = DEFAULT_ADAPTERS) -> ToolCall | Handoff | None:
    """Return the tool call or handoff ``span`` stands for, or None."""
    for adapter in adapters:
        event = adapter.to_event(span)
        if event is not None:
            return event
    return None


def agent_of(name: str, attributes: Mapping[str, Any]) -> str | None:
    """Return the agent name when the span is an agent span, else None."""
    op = attributes.get(k.GEN_AI_OPERATION_NAME)
    if op in (k.OP_INVOKE_AGENT, "create_agent"):
        found = attributes.get(k.GEN_AI_AGENT_NAME)
        return str(found) if found else name.removeprefix("invoke_agent").strip() or "agent"
    if attributes.get(k.OI_SPAN_KIND) == "AGENT":
        found = attributes.get(k.OI_AGENT_NAME) or attributes.get(k.GEN_AI_AGENT_NAME)
        return str(found) if found else name
    if attributes.get(k.TL_SPAN_KIND) == "agent":
        found = attributes.get(k.GEN_AI_AGENT_NAME) or attributes.get(k.TL_ENTITY_NAME)
        return str(found) if found else name.removesuffix(".agent")
    if name.startswith(k.LOGFIRE_AGENT_PREFIX):
        return name.removeprefix(k.LOGFIRE_AGENT_PREFIX).strip("'\" ")
    return None


def is_model_turn(name: str, attributes: Mapping[str, Any]) -> bool:
    """Return True when the span is a model call (its end separates batches of tool calls)."""
    if attributes.get(k.GEN_AI_OPERATION_NAME) in k.MODEL_OPERATIONS:
        return True
    if attributes.get(k.OI_SPAN_KIND) == "LLM":
        return True
    return attributes.get(k.TL_SPAN_KIND) == "llm"


def prompt_template_of(attributes: Mapping[str, Any], name_keys: Sequence[str],
                       version_keys: Sequence[str]) -> str | None:
    """Return ``name@version`` or ``name`` from the first name key present, or None.

    Template *text* (OpenInference's ``llm.prompt_template.template``) becomes a short stable
    hash ``tpl-1a2b3c4d``: text never reaches a metric label.
    """
    for position, key in enumerate(name_keys):
        value = attributes.get(key)
        if value is None or value == "":
            continue
        label = str(value)
        if key == k.OI_PROMPT_TEMPLATE or len(label) > 80 or "\n" in label or " " in label:
            label = "tpl-" + digest(label)[:8]
        paired = version_keys[position:position + 1] if len(version_keys) == len(name_keys) \
            else version_keys
        for vkey in paired:
            version = attributes.get(vkey)
            if version not in (None, ""):
                return f"{label}@{version}"
        return label
    return None


def conversation_of(attributes: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    """Return the conversation/session id carried by the span, if any."""
    for key in keys:
        value = attributes.get(key)
        if value not in (None, ""):
            return str(value)
    return None


