"""What the LangChain integration's modules share: langchain-core, imported when it is there.

Also the forms of a call's arguments to precheck, and OpenInference's span of the current run.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

try:
    from langchain_core.messages import (  # type: ignore[import-not-found, unused-ignore]
        AIMessage,
        ToolMessage,
    )
    from langchain_core.tools import (  # type: ignore[import-not-found, unused-ignore]
        BaseTool,
        StructuredTool,
        Tool,
    )
except ImportError:  # the module stays importable; using it raises ImportError
    _HAVE_LANGCHAIN = False
else:
    _HAVE_LANGCHAIN = True

__all__ = ["AIMessage", "BaseTool", "StructuredTool", "Tool", "ToolMessage"]
"""The langchain-core names the integration uses (defined only when langchain-core is there)."""


def _require_langchain() -> None:
    if not _HAVE_LANGCHAIN:
        raise ImportError("otel_loopguard.integrations.langchain needs langchain-core: "
                          "pip install langchain")


def _argument_forms(arguments: Any) -> list[Any]:
    """Return the argument forms to precheck: the call's own, and what instrumentations record.

    OpenInference records a single-string-argument LangChain tool's input as the bare value.
    """
    forms = [arguments]
    if isinstance(arguments, Mapping) and len(arguments) == 1:
        (value,) = arguments.values()
        if isinstance(value, str):
            forms.append(value)
    return forms


def _openinference_span() -> Any:
    """Return OpenInference's span of the current LangChain run, when it is instrumented.

    OpenInference does not make its spans current; it offers this lookup instead.
    """
    module = sys.modules.get("openinference.instrumentation.langchain")
    if module is None:
        return None
    try:
        span = module.get_current_span()
    except Exception:
        return None
    return span if span is not None and span.is_recording() else None


def _response_message(response: Any) -> Any:
    """Return the ``AIMessage`` a model call answered (a middleware's ``ModelCallResult``)."""
    if isinstance(response, AIMessage):
        return response
    result = getattr(response, "result", None)
    if result is None:  # ExtendedModelResponse
        result = getattr(getattr(response, "model_response", None), "result", None)
    if isinstance(result, list):
        for message in reversed(result):
            if isinstance(message, AIMessage):
                return message
    return None


def _turn_attributes(message: Any, chat_model: Any) -> tuple[dict[str, Any], str | None]:
    """Return the GenAI attributes of a model call's turn, and the model's name.

    Whether the model asked for tools, its token usage and its model name, as the response
    says them: no content.
    """
    attributes: dict[str, Any] = {}
    model = None
    if message is not None:
        metadata = message.response_metadata or {}
        reason = metadata.get("finish_reason") or metadata.get("stop_reason")
        attributes["gen_ai.response.finish_reasons"] = (
            "tool_calls" if message.tool_calls else reason if isinstance(reason, str) and reason
            else "stop",)
        usage = message.usage_metadata
        if usage:
            attributes["gen_ai.usage.input_tokens"] = int(usage.get("input_tokens") or 0)
            attributes["gen_ai.usage.output_tokens"] = int(usage.get("output_tokens") or 0)
        found = metadata.get("model_name") or metadata.get("model")
        if isinstance(found, str) and found:
            model = attributes["gen_ai.response.model"] = found
    if model is None:
        found = getattr(chat_model, "model_name", None) or getattr(chat_model, "model", None)
        if isinstance(found, str) and found:
            model = attributes["gen_ai.request.model"] = found
    return attributes, model
