"""What a model turn cost: its token counts and model names, from each convention's keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from otel_loopguard.adapters import _keys as k

__all__ = ["TokenUsage", "usage_of"]

_INPUT_KEYS: Final = (k.GEN_AI_USAGE_INPUT_TOKENS, k.GEN_AI_USAGE_PROMPT_TOKENS,
                      k.OI_TOKEN_COUNT_PROMPT)
_OUTPUT_KEYS: Final = (k.GEN_AI_USAGE_OUTPUT_TOKENS, k.GEN_AI_USAGE_COMPLETION_TOKENS,
                       k.OI_TOKEN_COUNT_COMPLETION)
_MODEL_KEYS: Final = (k.GEN_AI_RESPONSE_MODEL, k.GEN_AI_REQUEST_MODEL, k.OI_MODEL_NAME)
_MAX_TOKENS: Final = 1 << 40
"""Larger counts are not a model turn's (a corrupt attribute): they count as not recorded."""
_MAX_TOKEN_DIGITS: Final = len(str(_MAX_TOKENS))
"""Longer digit strings are over ``_MAX_TOKENS`` (and int() refuses those over 4,300 digits)."""
_MAX_MODEL_CHARS: Final = 256

TokenUsage = tuple[int, int, tuple[str, ...]]
"""(input tokens, output tokens, model names: the response model first)."""
_NONE: Final[TokenUsage] = (0, 0, ())
_KEYS: Final = frozenset(_INPUT_KEYS + _OUTPUT_KEYS + _MODEL_KEYS)


def usage_of(attributes: Mapping[str, Any]) -> TokenUsage:
    """Return the input and output tokens and the model names a model span records.

    Reads the GenAI keys (``gen_ai.usage.input_tokens`` / ``output_tokens``, and the older
    ``prompt_tokens`` / ``completion_tokens`` that OpenLLMetry still sets) and OpenInference's
    ``llm.token_count.prompt`` / ``completion``; the first key present wins. A count that is
    not a non-negative integer (or a string of one) counts as 0. Models: ``gen_ai.response.model``,
    ``gen_ai.request.model``, ``llm.model_name``, in that order, each once.
    """
    present = _KEYS.intersection(attributes)  # one pass in C: only these keys are read
    if not present:  # a span that records no usage
        return _NONE
    tokens_in = 0 if present.isdisjoint(_INPUT_KEYS) else _count(attributes, _INPUT_KEYS)
    tokens_out = 0 if present.isdisjoint(_OUTPUT_KEYS) else _count(attributes, _OUTPUT_KEYS)
    models: tuple[str, ...] = ()
    for key in _MODEL_KEYS:
        if key in present:
            value = attributes[key]
            if isinstance(value, str) and value and value not in models:
                models += (value[:_MAX_MODEL_CHARS],)
    if not (tokens_in or tokens_out or models):
        return _NONE
    return tokens_in, tokens_out, models


def _count(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> int:
    for key in keys:
        value = attributes.get(key)
        if value is None:
            continue
        if type(value) is int:  # the usual shape, before the conversions below
            return value if 0 <= value <= _MAX_TOKENS else 0
        if isinstance(value, str):
            value = value.strip()
            if not value.isdecimal() or len(value) > _MAX_TOKEN_DIGITS:  # isdigit: '²' too,
                return 0  # which int() refuses; past 4,300 digits int() raises ValueError
            value = int(value)
        elif isinstance(value, float) and value.is_integer():
            value = int(value)
        if type(value) is not int or not 0 <= value <= _MAX_TOKENS:
            return 0
        return value
    return 0
