r"""Unwrap the envelopes real instrumentations put around tool arguments and results.

Each rule is matched by shape, wherever the value comes from, and only when the whole value
has that shape (no other keys), so a tool's own result that merely contains such a key is
left alone. Unwrapping keeps two results equal exactly when their contents are equal; JSON
text found inside is signed like any result (parsed, volatile fields stripped).

Argument envelopes:

========================  =====================================================  ===========
rule                      shape                                                  seen from
========================  =====================================================  ===========
LangChain callback        ``{"input_str": .., "inputs": {..}, "kwargs", ..}``    Traceloop
call envelope             ``{"args": [], "kwargs": {..}}`` (+ smolagents'        smolagents,
                          ``sanitize_inputs_outputs``) → the keyword arguments   LlamaIndex
MCP request               ``{"tool_name": .., "arguments": {..}}`` → arguments   OpenLLMetry
========================  =====================================================  ===========

Per-call ids (``tool_call_id``, ``run_id``, ``callbacks``…) are dropped from arguments.

Result envelopes (→ the tool's own answer, and whether the envelope says it failed):

==================  ================================================  =====================
rule                shape                                             seen from
==================  ================================================  =====================
ToolMessage         LangChain ``ToolMessage`` (``status: error``)     OpenInference,
                                                                      Traceloop (LangChain)
result object       ``{"result": X}`` (+ ``is_error``)                Google ADK, OpenLLMetry
                                                                      MCP
text blocks         ``[{"text": ..}, ..]``                            Strands
MCP result          ``{"content": [{"type": "text", "text": ..}],     MCP ``CallToolResult``
                    "isError": .., "structuredContent": ..}``
ToolOutput          ``{"blocks": [..], "raw_input": .., "raw_output":  LlamaIndex
                    .., "is_error": ..}`` → ``raw_output``
tool reminder       text, then ``\n\nYou ONLY have access to the    CrewAI (every few
                    following tools`` ... → the text before it        observations)
loop warning        text, then ``\n\n[loop-warning] <hint>`` → the    loopguard's own
                    text before it (also inside the envelopes above)  ``hint_on_warn``
==================  ================================================  =====================

The loop warning is what enforce mode's ``hint_on_warn`` appends to a tool's result for the
model. Where it appends it after the tool returned (an OpenAI Agents SDK output guardrail, a
LangChain tool wrapped by ``guard_tool``), an instrumentation records the result with it, and
each warning names the call's count: without this rule, every warned call had a new result, so
a loop no longer looked like one and was never stopped.
"""

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
                       '"callbacks"', '"call_id"', '"kwargs"', '"tool_name"')
"""Substrings without which a JSON argument string cannot hold an envelope or call ids."""
_RESULT_MARKERS: Final = ("ToolMessage", '"tool_call_id"', '"is_error"', '"isError"')
"""Substrings without which a result string cannot be a ToolMessage, ToolOutput or MCP result."""
_RESULT_HEADS: Final = ('{"result"', '[{"text"', '{"content"')
"""How the other result envelopes start (``json.dumps`` keeps the keys in this order)."""
_HEAD_CHARS: Final = max(map(len, _RESULT_HEADS))
_A1, _A2, _A3, _A4, _A5, _A6, _A7, _A8, _A9 = _ARG_MARKERS
_R1, _R2, _R3, _R4 = _RESULT_MARKERS
_CALL_ENVELOPE: Final = frozenset({"args", "kwargs", "sanitize_inputs_outputs"})
_MCP_REQUEST: Final = frozenset({"tool_name", "arguments"})
_RESULT_OBJECT: Final = frozenset({"result", "is_error"})
_MCP_RESULT: Final = frozenset({"content", "isError", "structuredContent", "meta", "_meta"})
_TOOL_OUTPUT: Final = frozenset({"blocks", "content", "tool_name", "raw_input", "raw_output",
                                 "is_error"})
_TEXT_BLOCK: Final = frozenset({"text", "type", "annotations", "_meta", "meta"})
"""The keys of a text block: MCP's ``TextContent`` has ``annotations`` and ``_meta`` besides its
text (its Python SDK writes them, ``null`` when unset), which say who it is for, not what."""
_TOOL_REMINDER: Final = "\nYou ONLY have access to the following tools"
"""How CrewAI's reminder of the tool list, appended to some observations, begins."""
_LOOP_WARNING: Final = "\n\n[loop-warning] "
"""How the ``hint_on_warn`` warning enforce mode appends to a tool's result begins."""


def _has_arg_marker(text: str) -> bool:
    """Return ``any(m in text for m in _ARG_MARKERS)``, unrolled (the hot path, per span).

    The markers with an underscore are searched for only when ``text`` has one (a ``memchr``).
    """
    return (_A2 in text or _A5 in text or _A6 in text or _A8 in text
            or ("_" in text and (_A1 in text or _A3 in text or _A4 in text or _A7 in text
                                 or _A9 in text)))


def _has_result_marker(text: str) -> bool:
    """Return whether ``text`` may hold a result envelope (C-speed tests only).

    Each search for a marker waits on a search for one of its characters that text seldom
    holds (``M``, ``_``, ``E``): one ``memchr``, several times cheaper than the search.
    """
    return (("M" in text and _R1 in text) or ("_" in text and (_R2 in text or _R3 in text))
            or ("E" in text and _R4 in text)
            or text.lstrip()[:_HEAD_CHARS].startswith(_RESULT_HEADS))


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

    Applies the argument envelope rules of the module docstring, drops per-call ids, and
    parses JSON strings that hold an envelope. A bare value (OpenInference's single-argument
    LangChain tools) is returned as is.
    """
    if isinstance(value, str) and not _has_arg_marker(value):
        return value  # no envelope: the engine parses the JSON once, canonically
    parsed = parse_maybe_json(value)
    return _unwrap_argument_mapping(parsed) if isinstance(parsed, Mapping) else parsed


def _unwrap_argument_mapping(parsed: Mapping[str, Any]) -> Any:
    """``unwrap_arguments`` of a parsed mapping: the envelope rules, then call ids dropped."""
    if "input_str" in parsed or "inputs" in parsed:
        inputs = parsed.get("inputs")
        if isinstance(inputs, Mapping) and inputs:
            return _strip_call_keys(inputs)
        inner = parse_maybe_json(parsed.get("input_str"))
        return _strip_call_keys(inner) if isinstance(inner, Mapping) else inner
    keys = parsed.keys()
    if "kwargs" in parsed and keys <= _CALL_ENVELOPE and isinstance(parsed["kwargs"], Mapping):
        args = parsed.get("args")
        kwargs = _strip_call_keys(parsed["kwargs"])
        return {**kwargs, "args": args} if args else kwargs
    if keys == _MCP_REQUEST:
        parsed = parse_maybe_json(parsed["arguments"])
        if not isinstance(parsed, Mapping):
            return parsed
    return _strip_call_keys(parsed) if _CALL_KEYS & parsed.keys() else parsed


def _strip_call_keys(mapping: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if k not in _CALL_KEYS}


def unwrap_result(value: Any) -> tuple[Any, bool]:
    """Return (the real result, whether the envelope says the call failed).

    Applies the result envelope rules of the module docstring. LangChain ToolMessages come
    as OpenInference serialises them (``{"type": "tool", "data": {"content": ..,
    "tool_call_id": .., "status": ..}}``) and as Traceloop does (``{"output": {"lc": 1, "id":
    [..., "ToolMessage"], "kwargs": {"content": ..}}, "kwargs": ..}``).
    """
    if isinstance(value, str):
        if "\n" in value:  # one memchr spares most searches
            value = _strip_notes(value)
        if not _has_result_marker(value):
            return value, False
    result, failed = _unwrap_envelope(value)
    if isinstance(result, str) and "\n" in result and _LOOP_WARNING in result:
        result = result[:result.rindex(_LOOP_WARNING)]
    return result, failed


def _strip_notes(text: str) -> str:
    """Return ``text`` without CrewAI's tool reminder and loopguard's loop warning."""
    if _TOOL_REMINDER in text:
        text = text[:text.index(_TOOL_REMINDER)].rstrip()
    if _LOOP_WARNING in text:
        text = text[:text.rindex(_LOOP_WARNING)]
    return text


def _unwrap_envelope(value: Any) -> tuple[Any, bool]:
    """``unwrap_result`` of a value that may be an envelope (else ``value``)."""
    parsed = parse_maybe_json(value)
    if isinstance(parsed, list):
        texts = _block_texts(parsed)
        return (value, False) if texts is None else (texts, False)
    if not isinstance(parsed, Mapping):
        return value, False
    unwrapped = _unwrap_object(parsed)
    return unwrapped if unwrapped is not None else _unwrap_message(parsed, value)


def _unwrap_message(parsed: Mapping[str, Any], value: Any) -> tuple[Any, bool]:
    """``unwrap_result`` of a mapping that may be a LangChain ToolMessage (else ``value``)."""
    if "output" in parsed and len(parsed) <= 3 and ("kwargs" in parsed or len(parsed) == 1):
        inner = parse_maybe_json(parsed["output"])
        if isinstance(inner, Mapping) and _is_tool_message(inner):
            return _message_content(inner)
        return (inner if inner is not None else value), False
    if _is_tool_message(parsed):
        return _message_content(parsed)
    return value, False


def _unwrap_object(parsed: Mapping[str, Any]) -> tuple[Any, bool] | None:
    """Return (answer, failed) of a result object, MCP result or ToolOutput, else None."""
    keys = parsed.keys()
    failed = parsed.get("is_error") is True or parsed.get("isError") is True
    if "result" in parsed and keys <= _RESULT_OBJECT:
        return parsed["result"], failed
    if "raw_output" in parsed and keys <= _TOOL_OUTPUT:
        return parsed["raw_output"], failed
    if "content" in parsed and keys <= _MCP_RESULT and ("isError" in parsed or len(keys) == 1):
        texts = _block_texts(parsed["content"])
        if texts is not None:
            structured = parsed.get("structuredContent")
            return (structured if structured is not None else texts), failed
    return None


def _block_texts(blocks: Any) -> Any:
    """Return the text of a list of text blocks (one string, or a list of them), else None."""
    if not isinstance(blocks, list) or not blocks or len(blocks) > 64:
        return None
    texts = []
    for block in blocks:
        if not isinstance(block, Mapping) or "text" not in block or not block.keys() <= _TEXT_BLOCK:
            return None
        texts.append(block["text"])
    return texts[0] if len(texts) == 1 else texts


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
