"""Whether a model span asked for tool calls, from what each convention puts on it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import orjson

from otel_loopguard.adapters import _keys as k

__all__ = ["tool_request_of"]

_TOOL_REASONS: Final = frozenset({"tool_calls", "tool_call", "tool_use", "function_call",
                                  "tool-calls", "tool-call", "function_calls"})
"""Finish reasons that mean the model asked for tools (OpenAI, Anthropic, Bedrock, Cohere...)."""
_ANSWER_REASONS: Final = frozenset({"stop", "end_turn", "stop_sequence", "length", "max_tokens",
                                    "max_output_tokens", "content_filter", "eos", "refusal",
                                    "safety", "error", "end"})
"""Finish reasons that mean the model answered in text (other values say nothing)."""
_UNTELLING_PROVIDERS: Final = ("gemini", "vertex", "google", "ollama")
"""Providers whose finish reason is ``stop`` even when the model called a function."""
_WORD: Final = re.compile(r"[\w-]+")
_MAX_MESSAGES_CHARS: Final = 1 << 20
"""Longer output messages are not parsed (the finish reasons still count)."""


def tool_request_of(attributes: Mapping[str, Any]) -> bool | None:
    """Return whether a model span asked for tool calls: True, False, or None when unknown.

    Reads the GenAI finish reasons and output messages, OpenInference's flattened output
    messages and OpenLLMetry's flattened completions. A finish reason of ``stop`` from a
    provider that also reports it for function calls (Gemini, Vertex AI, Ollama) says nothing.
    """
    reasons = _reasons(attributes.get(k.GEN_AI_RESPONSE_FINISH_REASONS))
    if reasons & _TOOL_REASONS:
        return True
    messages = attributes.get(k.GEN_AI_OUTPUT_MESSAGES)
    if messages is not None:
        found = _messages_request_tools(messages)
        if found is not None:
            return found
    flattened = _flattened(attributes)
    if flattened is not None:
        return flattened
    if reasons and reasons <= _ANSWER_REASONS and not _untelling(attributes):
        return False
    return None


def _reasons(value: Any) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(w.lower() for w in _WORD.findall(value))
    if isinstance(value, list | tuple):
        return frozenset(str(v).strip().lower() for v in value)
    return frozenset()


def _messages_request_tools(messages: Any) -> bool | None:
    """Return whether GenAI output messages hold a tool call (None when unreadable)."""
    if isinstance(messages, str | bytes):
        messages = _parse(messages)
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        return None
    return any(_asks_for_tools(message) for message in messages)


def _parse(text: str | bytes) -> Any:
    if len(text) > _MAX_MESSAGES_CHARS:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def _asks_for_tools(message: dict[str, Any]) -> bool:
    parts = message.get("parts")
    if isinstance(parts, list) and any(
            isinstance(p, dict) and p.get("type") == "tool_call" for p in parts):
        return True
    return str(message.get("finish_reason", "")).lower() in _TOOL_REASONS


def _flattened(attributes: Mapping[str, Any]) -> bool | None:
    """Return what OpenInference's or OpenLLMetry's flattened output says (None: nothing)."""
    found: bool | None = None
    for key in attributes:
        if key.startswith(k.OI_OUTPUT_MESSAGES_PREFIX):
            if ".message.tool_calls." in key:
                return True
            found = False
        elif key.startswith(k.GEN_AI_COMPLETION_PREFIX):
            if ".tool_calls." in key or ".function_call." in key:
                return True
            if key.endswith(".finish_reason") and \
                    str(attributes[key]).lower() in _TOOL_REASONS:
                return True
            found = False
    return found


def _untelling(attributes: Mapping[str, Any]) -> bool:
    provider = str(attributes.get(k.GEN_AI_PROVIDER_NAME) or attributes.get(k.GEN_AI_SYSTEM)
                   or "").lower()
    return any(name in provider for name in _UNTELLING_PROVIDERS)
