"""Unwrap the envelopes real instrumentations put around tool arguments and results."""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["parse_maybe_json", "unwrap_arguments", "unwrap_result"]

_MAX_PARSE: Final = 1 << 20
_CALL_KEYS: Final = frozenset({"tool_call_id", "run_id", "callbacks", "run_manager", "metadata",
                               "tags", "config", "id", "call_id"})
"""Per-call ids and per-step metadata: never part of a signature."""
_ARG_MARKERS: Final = ('"input_str"', '"inputs"', "tool_call_id", '"run_id"', '"metadata"',
                       '"callbacks"', '"call_id"')
"""Substrings without which a JSON argument string cannot hold an envelope or call ids."""
_RESULT_MARKERS: Final = ("ToolMessage", '"tool_call_id"')
"""Substrings without which a result string cannot be a serialised ToolMessage."""
_A1, _A2, _A3, _A4, _A5, _A6, _A7 = _ARG_MARKERS
_R1, _R2 = _RESULT_MARKERS


def _has_arg_marker(text: str) -> bool:
    """Return ``any(m in text for m in _ARG_MARKERS)``, unrolled (the hot path, per span)."""
    return (_A1 in text or _A2 in text or _A3 in text or _A4 in text or _A5 in text
            or _A6 in text or _A7 in text)


def _has_result_marker(text: str) -> bool:
    """Return ``any(m in text for m in _RESULT_MARKERS)``, unrolled."""
    return _R1 in text or _R2 in text


def parse_maybe_json(value: Any) -> Any:
    """Return ``value`` parsed when it is a JSON (or Python-literal) object/array string."""
    if not isinstance(value, str) or len(value) > _MAX_PARSE:
        return value
    text = value.strip()
    if not text or text[0] not in "{[" or text[-1] not in "}]":
        return value
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    if len(text) <= 65536:
        try:
            return ast.literal_eval(text)  # LangChain's input_str is a Python repr
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return value
    return value


def unwrap_arguments(value: Any) -> Any:
    """Return the real arguments of a tool call.

    Handles Traceloop's LangChain envelope (``{"input_str":.., "inputs":.., "kwargs":..,
    "metadata":..}``), per-call ids inside it (``kwargs.tool_call_id``), and JSON strings. A
    bare value (OpenInference's single-argument LangChain tools) is returned as is.
    """
    if isinstance(value, str) and not _has_arg_marker(value):
        return value  # no envelope: the engine parses the JSON once, canonically
    parsed = parse_maybe_json(value)
    if not isinstance(parsed, Mapping):
        return parsed
    if "input_str" in parsed or "inputs" in parsed:
        inputs = parsed.get("inputs")
        if isinstance(inputs, Mapping) and inputs:
            return _strip_call_keys(inputs)
        inner = parse_maybe_json(parsed.get("input_str"))
        return _strip_call_keys(inner) if isinstance(inner, Mapping) else inner
    return _strip_call_keys(parsed) if _CALL_KEYS & parsed.keys() else parsed


def _strip_call_keys(mapping: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if k not in _CALL_KEYS}


def unwrap_result(value: Any) -> tuple[Any, bool]:
    """Return (the real result, whether the envelope says the call failed).

    Handles LangChain ToolMessages as OpenInference serialises them (``{"type": "tool",
    "data": {"content": .., "tool_call_id": .., "status": ..}}``) and as Traceloop does
    (``{"output": {"lc": 1, "id": [..., "ToolMessage"], "kwargs": {"content": ..}}, "kwargs":
    ..}``).
    """
    if isinstance(value, str) and not _has_result_marker(value):
        return value, False
    parsed = parse_maybe_json(value)
    if not isinstance(parsed, Mapping):
        return value, False
    if "output" in parsed and len(parsed) <= 3 and ("kwargs" in parsed or len(parsed) == 1):
        inner = parse_maybe_json(parsed["output"])
        if isinstance(inner, Mapping) and _is_tool_message(inner):
            return _message_content(inner)
        return (inner if inner is not None else value), False
    if _is_tool_message(parsed):
        return _message_content(parsed)
    return value, False


def _is_tool_message(mapping: Mapping[str, Any]) -> bool:
    ident = mapping.get("id")
    if mapping.get("lc") == 1 and isinstance(ident, list) and ident and ident[-1] == "ToolMessage":
        return True
    if mapping.get("type") != "tool":
        return False
    body = mapping.get("data", mapping)
    return isinstance(body, Mapping) and "content" in body and "tool_call_id" in body


def _message_content(message: Mapping[str, Any]) -> tuple[Any, bool]:
    body = message.get("kwargs") or message.get("data") or message
    if not isinstance(body, Mapping):
        return message, False
    return body.get("content"), body.get("status") == "error"
