"""What a model span says about its turn: whether it asked for tool calls, and its content."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import orjson

from otel_loopguard.adapters import _keys as k
from otel_loopguard.signature import digest
from otel_loopguard.types import REPLY_MARK

__all__ = ["NO_TURN", "asks_by_reason", "has_content", "not_from_user", "tool_request_of",
           "turn_content_of", "turn_input_of", "turn_of", "turn_output_of", "user_input_of"]

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
_OI_ROLE: Final = k.OI_OUTPUT_MESSAGES_PREFIX + "0.message.role"
_OI_TOOL_CALL: Final = (k.OI_OUTPUT_MESSAGES_PREFIX
                        + "0.message.tool_calls.0.tool_call.function.name")
_TL_TOOL_CALL: Final = k.GEN_AI_COMPLETION_PREFIX + "0.tool_calls.0.name"
_TL_FUNCTION_CALL: Final = k.GEN_AI_COMPLETION_PREFIX + "0.function_call.name"
_TL_FINISH_REASON: Final = k.GEN_AI_COMPLETION_PREFIX + "0.finish_reason"
_TL_CAPTURED: Final = frozenset(k.GEN_AI_COMPLETION_PREFIX + "0." + key
                                for key in ("role", "content", "finish_reason"))
"""Keys of which OpenLLMetry sets at least one when it captured the first completion."""


def tool_request_of(attributes: Mapping[str, Any]) -> bool | None:
    """Return whether a model span asked for tool calls: True, False, or None when unknown.

    Reads the GenAI finish reasons and output messages, OpenInference's flattened output
    messages and OpenLLMetry's flattened completions (their first message or choice). A finish
    reason of ``stop`` from a provider that also reports it for function calls (Gemini, Vertex
    AI, Ollama) says nothing. A few dictionary lookups unless output messages must be parsed.
    """
    reasons = _reasons(attributes.get(k.GEN_AI_RESPONSE_FINISH_REASONS))
    if not reasons.isdisjoint(_TOOL_REASONS):
        return True
    messages = attributes.get(k.GEN_AI_OUTPUT_MESSAGES)
    return _tool_request(attributes, reasons, messages, _UNPARSED)


def turn_of(attributes: Mapping[str, Any]) -> tuple[bool | None, str, str, bool]:
    """Return ``tool_request_of`` and ``turn_content_of`` of a model span in one read.

    The GenAI output messages, which both read, are parsed once. A span with none of the keys
    either reads but the flattened prompts (a model span without content, as most are) costs
    one set test and the prompts' search.
    """
    if _TURN_KEYS.isdisjoint(attributes):  # then no tool request and no output is known
        if not _has_prompts(attributes):  # and no content at all: most model spans
            return NO_TURN
        last, from_user = _last_prompt(attributes)
        return None, last, "", from_user
    messages = attributes.get(k.GEN_AI_OUTPUT_MESSAGES)
    parsed = _parse(messages) if isinstance(messages, str | bytes) else messages
    reasons = _reasons(attributes.get(k.GEN_AI_RESPONSE_FINISH_REASONS))
    requested = True if not reasons.isdisjoint(_TOOL_REASONS) \
        else _tool_request(attributes, reasons, messages, parsed)
    last, from_user = turn_input_of(attributes)
    return requested, last, _output(attributes, messages, parsed), from_user


_UNPARSED: Final = object()
"""``_tool_request``'s ``parsed`` when the output messages are still to be parsed."""


def _tool_request(attributes: Mapping[str, Any], reasons: frozenset[str], messages: Any,
                  parsed: Any) -> bool | None:
    """``tool_request_of`` once the finish reasons name no tool call.

    ``messages``: the GenAI output messages attribute; ``parsed``: it parsed, or ``_UNPARSED``.
    """
    found = None
    if messages is not None:
        if parsed is _UNPARSED:
            parsed = _parse(messages) if isinstance(messages, str | bytes) else messages
        found = _messages_request_tools(parsed)
    if found is None:
        found = _flattened(attributes)
    if found is not None:
        return found
    return _answered(attributes, reasons)


def asks_by_reason(attributes: Mapping[str, Any]) -> bool:
    """Return True when a model span's finish reasons say it asked for tool calls.

    ``tool_request_of`` is then True, and ``turn_of`` answers True with ``turn_input_of`` and
    ``turn_output_of``: the output messages need be read only for the output's digest.
    """
    value = attributes.get(k.GEN_AI_RESPONSE_FINISH_REASONS)
    return value is not None and not _reasons(value).isdisjoint(_TOOL_REASONS)


def request_by_reason(attributes: Mapping[str, Any]) -> bool | None:
    """Return ``tool_request_of`` of a model span without content, by its finish reasons alone.

    True: it asked for tools; False: it answered; None: unknown. The same answer for a span
    with none of the content keys (``has_content`` False), with fewer reads.
    """
    value = attributes.get(k.GEN_AI_RESPONSE_FINISH_REASONS)
    if value is None:
        return None
    reasons = _reasons(value)
    return True if not reasons.isdisjoint(_TOOL_REASONS) else _answered(attributes, reasons)


def _answered(attributes: Mapping[str, Any], reasons: frozenset[str]) -> bool | None:
    """Return what finish reasons naming no tool call say: False (it answered) or None.

    False when every reason is an answer's and the provider's ``stop`` tells one.
    """
    return False if reasons and reasons <= _ANSWER_REASONS and not _untelling(attributes) \
        else None


def _reasons(value: Any) -> frozenset[str]:
    """Return the lower-case finish reasons of the attribute ``value``.

    One reason (a one-string array, the usual shape) or a short string is looked up in
    ``_KNOWN_REASONS``: every model span carries one, and they take a handful of values.
    """
    if (type(value) is tuple and len(value) == 1 and type(value[0]) is str
            and len(value[0]) <= _MAX_KNOWN_REASON) \
            or (type(value) is str and len(value) <= _MAX_KNOWN_REASON):
        found = _KNOWN_REASONS.get(value)
        if found is None:
            if len(_KNOWN_REASONS) >= _MAX_KNOWN_REASONS:
                _KNOWN_REASONS.clear()
            found = _KNOWN_REASONS[value] = _read_reasons(value)
        return found
    return _read_reasons(value)


def _read_reasons(value: Any) -> frozenset[str]:
    if type(value) is tuple or type(value) is list:  # the usual shape: a string array
        return frozenset(str(v).strip().lower() for v in value)
    if isinstance(value, str):
        return frozenset(w.lower() for w in _WORD.findall(value))
    return frozenset()


_KNOWN_REASONS: Final[dict[tuple[str] | str, frozenset[str]]] = {}
"""Finish-reasons values read lately → ``_read_reasons`` of them (bounded: cleared when full; a
memo of a pure function, so threads sharing it need no lock)."""
_MAX_KNOWN_REASONS: Final = 256
_MAX_KNOWN_REASON: Final = 64
"""Longer values are read each time (a memo holds short ones only)."""


def _messages_request_tools(messages: Any) -> bool | None:
    """Return whether parsed GenAI output messages hold a tool call (None when unreadable)."""
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
    """Return what OpenInference's or OpenLLMetry's first output says (None: not captured)."""
    if _OI_TOOL_CALL in attributes:
        return True
    if not _TL_CAPTURED.isdisjoint(attributes):
        return (_TL_TOOL_CALL in attributes or _TL_FUNCTION_CALL in attributes
                or str(attributes.get(_TL_FINISH_REASON, "")).lower() in _TOOL_REASONS)
    return False if _OI_ROLE in attributes else None


def _untelling(attributes: Mapping[str, Any]) -> bool:
    """Return whether the span's provider reports ``stop`` for function calls too."""
    provider = attributes.get(k.GEN_AI_PROVIDER_NAME) or attributes.get(k.GEN_AI_SYSTEM)
    return bool(provider) and _UNTELLING.search(str(provider)) is not None


_UNTELLING: Final = re.compile("|".join(_UNTELLING_PROVIDERS), re.IGNORECASE | re.ASCII)
"""Any of ``_UNTELLING_PROVIDERS`` in a provider's name, in any case (ASCII letters)."""


_CONTENT_SUFFIXES: Final = ((k.GEN_AI_PROMPT_PREFIX, ".content"),
                            (k.OI_INPUT_MESSAGES_PREFIX, ".message.content"))
_CONTENT_PREFIXES: Final = tuple(prefix for prefix, _ in _CONTENT_SUFFIXES)
_PROMPT_FIELDS: Final = (("role", "content"), ("message.role", "message.content"))
"""Each convention's role and content keys after ``<prefix><n>.``."""
_OI_CONTENTS: Final = "message.contents."
_OI_CONTENT_TEXT: Final = ".message_content.text"
_GENAI_PROMPTS, _OI_INPUTS = _CONTENT_PREFIXES
_OUTPUT_CONTENT: Final = (k.GEN_AI_COMPLETION_PREFIX + "0.content",
                          k.OI_OUTPUT_MESSAGES_PREFIX + "0.message.content",
                          k.OI_OUTPUT_MESSAGES_PREFIX + "0.message.contents.0.message_content.text")
_TURN_KEYS: Final = frozenset({k.GEN_AI_OUTPUT_MESSAGES, k.GEN_AI_RESPONSE_FINISH_REASONS,
                               k.GEN_AI_INPUT_MESSAGES, _OI_TOOL_CALL, _OI_ROLE, *_TL_CAPTURED,
                               *_OUTPUT_CONTENT})
"""Every key ``turn_of`` reads by name; without them only the flattened prompts can say
anything (the tool request is unknown, the output empty)."""
_CONTENT_KEYS: Final = _TURN_KEYS - {k.GEN_AI_RESPONSE_FINISH_REASONS}
"""``_TURN_KEYS`` but the finish reasons, which a model span carries without its content."""
NO_TURN: Final[tuple[bool | None, str, str, bool]] = (None, "", "", False)
"""``turn_of`` of a model span without any of its keys and without flattened prompts (most
model spans: content is opt-in), and what a caller that does not read the turn uses."""


def turn_content_of(attributes: Mapping[str, Any]) -> tuple[str, str, bool]:
    """Return digests of a model span's last input message and output, and who sent the input.

    Each digest is ``""`` when absent; the flag says whether the last input message is the
    user's (a reply in a conversation). The last input message is what reached the model
    since its previous turn: a tool result, the harness's feedback, a user's reply. Reads
    GenAI's ``gen_ai.input.messages`` and ``gen_ai.output.messages``, OpenLLMetry's flattened
    prompts and first completion, and OpenInference's flattened input messages and first output
    message. Content is opt-in in most instrumentations: without it both digests are empty,
    and ``idle_turns`` stays quiet.
    """
    messages = attributes.get(k.GEN_AI_OUTPUT_MESSAGES)
    parsed = _parse(messages) if isinstance(messages, str | bytes) else messages
    last, from_user = turn_input_of(attributes)
    return last, _output(attributes, messages, parsed), from_user


def turn_output_of(attributes: Mapping[str, Any]) -> str:
    """Return the digest of the output: what ``turn_content_of`` says of it, input unread."""
    messages = attributes.get(k.GEN_AI_OUTPUT_MESSAGES)
    return _output(attributes, messages,
                   _parse(messages) if isinstance(messages, str | bytes) else messages)


def not_from_user(attributes: Mapping[str, Any]) -> bool:
    r"""Return True when ``turn_input_of`` surely says the user did not send the last input.

    Without parsing: the GenAI input messages are a text in which no JSON string can be
    ``user`` (a string is spelled as it reads but for escapes, and only a ``\u00`` escape
    spells a letter: without one, ``"user"`` would be in the text), and no flattened prompt can
    name a role instead. False says nothing: ask ``turn_input_of``.
    """
    messages = attributes.get(k.GEN_AI_INPUT_MESSAGES)
    return type(messages) is str and '"user"' not in messages and "\\u00" not in messages \
        and '"human"' not in messages and not _has_prompts(attributes)


def turn_input_of(attributes: Mapping[str, Any]) -> tuple[str, bool]:
    """Return the digest of the last input message and whether the user sent it.

    What ``turn_content_of`` says of the input, without reading the output.
    """
    messages = attributes.get(k.GEN_AI_INPUT_MESSAGES)
    if messages is not None:
        parsed = _parse(messages) if isinstance(messages, str | bytes) else messages
        if isinstance(parsed, list) and parsed:
            message = parsed[-1]
            if len(parsed) > 1:
                message = _unquoted(message, parsed)
            if not _from_user(message):
                return _digest_of(_without_call_ids(message)), False
            return _user_digest(_without_call_ids(message), _text_of(message)), True
    return _last_prompt(attributes) if _has_prompts(attributes) else ("", False)


_REPLY_WORDS: Final = 3
_REPLY_CHARS: Final = 32
"""A user's message of at most this many words and characters is a reply (``REPLY_MARK``)."""


def _user_digest(message: Any, text: str) -> str:
    """Return the digest of a user's message whose text is ``text``, marked if a short reply."""
    found = _digest_of(message)
    if found and len(text) <= _REPLY_CHARS and 0 < len(text.split()) <= _REPLY_WORDS:
        return REPLY_MARK + found
    return found


_MIN_QUOTED_CHARS: Final = 32
"""The shortest answer a feedback message is read as quoting (shorter text is not telling)."""
_QUOTED_PREFIX_CHARS: Final = 64
"""A quote of an answer cut short counts when the answer's first characters are quoted."""
_QUOTED: Final = "\x00[the answer it replies to]"


def _unquoted(message: Any, history: list[Any]) -> Any:
    """Return the last input ``message`` with the answer it quotes taken out.

    A harness that rejects an answer often quotes it back ("Could not parse LLM output: ...",
    smolagents' "Here is your code snippet: ..."): the same feedback each time, but for the
    answer in it. When the message's text holds the text of the assistant's message before it
    (whitespace aside; its first characters, if the quote was cut), that text is replaced by one
    placeholder, so the feedback is the same whatever the answer was. Anything else: ``message``.
    """
    if not isinstance(message, dict) or message.get("role") == "assistant":
        return message
    answer = next((m for m in reversed(history[:-1])
                   if isinstance(m, dict) and m.get("role") == "assistant"), None)
    said = " ".join(_text_of(answer).split()) if answer is not None else ""
    if len(said) < _MIN_QUOTED_CHARS:
        return message
    parts = message.get("parts")
    if isinstance(parts, list):
        new_parts = [{**part, "content": _without(part["content"], said)}
                     if isinstance(part, dict) and isinstance(part.get("content"), str) else part
                     for part in parts]
        return message if new_parts == parts else {**message, "parts": new_parts}
    content = message.get("content")
    if isinstance(content, str):
        stripped = _without(content, said)
        return message if stripped == content else {**message, "content": stripped}
    return message


def _without(text: str, said: str) -> str:
    """Return ``text`` (whitespace folded) without the quote of ``said``; ``text`` if none."""
    folded = " ".join(text.split())
    at = folded.find(said)
    if at >= 0:
        return folded[:at] + _QUOTED + folded[at + len(said):]
    at = folded.find(said[:_QUOTED_PREFIX_CHARS])
    if at < 0:
        return text
    end = at + _QUOTED_PREFIX_CHARS
    while end < len(folded) and end - at < len(said) and folded[end] == said[end - at]:
        end += 1
    return folded[:at] + _QUOTED + folded[end:]


def _text_of(message: dict[str, Any]) -> str:
    """Return the text of a GenAI message: its text parts' content, or its ``content``."""
    parts = message.get("parts")
    if isinstance(parts, list):
        return " ".join(text for text in map(_part_text, parts) if text is not None)
    content = message.get("content")
    return content if isinstance(content, str) else ""


def user_input_of(attributes: Mapping[str, Any]) -> str:
    """Return the digest of the last input message when the user sent it, else ``""``.

    All a run needs of a model turn when the ``idle_turns`` detector is off: a new message
    from the user changes the agent's world (``heard``) whatever detectors are on.
    """
    if k.GEN_AI_INPUT_MESSAGES not in attributes and not _has_prompts(attributes):
        return ""  # no content: most model spans
    if not_from_user(attributes):
        return ""
    last, from_user = turn_input_of(attributes)
    return last if from_user else ""


def has_content(attributes: Mapping[str, Any]) -> bool:
    """Return whether a model span may carry content: messages, prompts or a completion.

    False for most model spans (content is opt-in): their turn has no input and no output, and
    only their finish reasons can say whether they asked for tools (``asks_by_reason``). One set
    test and one search of the keys, where ``turn_of`` reads every key it knows.
    """
    return not _CONTENT_KEYS.isdisjoint(attributes) or _has_prompts(attributes)


def _has_prompts(attributes: Mapping[str, Any]) -> bool:
    """Return whether any key is a flattened prompt's (OpenLLMetry's or OpenInference's)."""
    keys = "\n".join(attributes)  # one pass in C: most model spans have no flattened prompts
    return _GENAI_PROMPTS in keys or _OI_INPUTS in keys


def _last_prompt(attributes: Mapping[str, Any]) -> tuple[str, bool]:
    """Return the digest of the last flattened prompt's content and whether it is the user's.

    OpenLLMetry writes ``gen_ai.prompt.<n>.content``; OpenInference ``llm.input_messages.<n>
    .message.content``, or its text parts as ``.message.contents.<m>.message_content.text``
    (smolagents). The last message with content counts, its quote of the assistant message
    before it taken out, as ``_unquoted`` does for GenAI messages.
    """
    for messages in _prompt_messages(attributes):
        said = [(index, entry) for index, entry in messages.items()
                if entry[1] is not None or entry[2]]
        if not said:
            continue
        last, (role, content, parts) = max(said, key=lambda item: item[0])
        if content is None:
            content = " ".join(str(parts[n]) for n in sorted(parts))
        answer = next((_flat_text(entry) for index, entry in sorted(said, reverse=True)
                       if index < last and entry[0] == "assistant"), "")
        if role != "assistant" and isinstance(content, str) and len(answer) >= _MIN_QUOTED_CHARS:
            content = _without(content, answer)
        if role != "user":
            return _digest_of(content), False
        return _user_digest(content, content if isinstance(content, str) else ""), True
    return "", False


_MAX_INDEX_DIGITS: Final = 9
"""Longest message index read from a flattened key (no span has a billion messages)."""


def _prompt_messages(attributes: Mapping[str, Any]) -> tuple[dict[int, list[Any]], ...]:
    """Return OpenLLMetry's and OpenInference's flattened prompts, in that order.

    Each is index → ``[role, content, {part index: text}]`` (what is absent is ``None``).
    One pass over the keys.
    """
    found: tuple[dict[int, list[Any]], dict[int, list[Any]]] = ({}, {})
    for key, value in attributes.items():  # one pass for both conventions
        if not key.startswith(_CONTENT_PREFIXES):
            continue
        at = 0 if key.startswith(_GENAI_PROMPTS) else 1
        index, dot, field = key[len(_CONTENT_PREFIXES[at]):].partition(".")
        if not dot or not index.isdecimal() or len(index) > _MAX_INDEX_DIGITS:  # isdigit: '²'
            # too, int() refuses it; a 4,301-digit index makes int() raise ValueError
            continue
        role_field, content_field = _PROMPT_FIELDS[at]
        if field == content_field:
            found[at].setdefault(int(index), [None, None, None])[1] = value
        elif field == role_field:
            found[at].setdefault(int(index), [None, None, None])[0] = value
        elif at and field.startswith(_OI_CONTENTS) and field.endswith(_OI_CONTENT_TEXT):
            part = field[len(_OI_CONTENTS):-len(_OI_CONTENT_TEXT)]
            if part.isdecimal() and len(part) <= _MAX_INDEX_DIGITS:
                entry = found[at].setdefault(int(index), [None, None, None])
                if entry[2] is None:
                    entry[2] = {}
                entry[2][int(part)] = value
    return found


def _flat_text(entry: list[Any]) -> str:
    """Return a flattened prompt's text, whitespace folded (``_last_prompt``'s entries)."""
    _, content, parts = entry
    text = content if content is not None else " ".join(str(parts[n]) for n in sorted(parts))
    return " ".join(text.split()) if isinstance(text, str) else ""


_USER_ROLES: Final = frozenset({"user", "human"})
"""The user's role: the GenAI conventions' ``user``, LangChain's ``human`` where a message is
recorded as LangChain names it."""


def _from_user(message: Any) -> bool:
    """Whether a GenAI message is the user's own words, not tool results sent in its name.

    Gemini and pydantic-ai send a function's response as a ``user`` message; its parts say so.
    """
    if not isinstance(message, dict) or message.get("role") not in _USER_ROLES:
        return False
    parts = message.get("parts")
    return not isinstance(parts, list) or all(
        not isinstance(part, dict) or part.get("type") == "text" or _part_text(part) is not None
        for part in parts)


def _part_text(part: Any) -> str | None:
    """Return the text of a message part that is text, else None.

    A GenAI text part (``{"type": "text", "content": ...}``), or one written as Gemini writes
    it, with no type (``{"text": ...}``; its function calls and responses have no text).
    """
    if not isinstance(part, dict):
        return None
    if part.get("type") == "text":
        text = part.get("content")
    elif "type" not in part:
        text = part.get("text")
    else:
        return None
    return text if isinstance(text, str) else None


def _output(attributes: Mapping[str, Any], messages: Any, parsed: Any) -> str:
    """Return the digest of the output: ``parsed``, the output ``messages`` parsed, if any.

    Messages that hold nothing (``"parts": []``, a finish reason alone) are no output: two of
    them are not the same answer, since what the model said was not captured.
    """
    if messages is not None:
        if isinstance(parsed, list):
            if all(type(m) is dict and not m.get("parts") and not m.get("content")
                   and not m.get("tool_calls") for m in parsed):
                return ""
            return _digest_of([_without_call_ids(m) for m in parsed])
        return _digest_of(parsed)
    for key in _OUTPUT_CONTENT:
        if key in attributes:
            return _digest_of(attributes[key])
    return ""


_CALL_PARTS: Final = frozenset({"tool_call", "tool_call_response"})
_CALL_ID_KEYS: Final = frozenset({"id", "tool_call_id"})


def _without_call_ids(message: Any) -> Any:
    """Return a GenAI message without its tool calls' ids (``message`` itself if it has none).

    A provider names each tool call anew (``call_8f3a...``), and its response repeats the
    name: with it, a model asking for the same call the harness rejects again, and the same
    rejection coming back, would never repeat. The ids of ``tool_call`` and
    ``tool_call_response`` parts, an OpenAI-style message's ``tool_call_id`` and its
    ``tool_calls``' ids are left out.
    """
    if not isinstance(message, dict):
        return message
    parts = message.get("parts")
    if isinstance(parts, list) and any(isinstance(part, dict) and part.get("type") in _CALL_PARTS
                                       and "id" in part for part in parts):
        message = {**message, "parts": [
            {key: value for key, value in part.items() if key != "id"}
            if isinstance(part, dict) and part.get("type") in _CALL_PARTS else part
            for part in parts]}
    calls = message.get("tool_calls")
    if isinstance(calls, list) and any(isinstance(call, dict) and "id" in call for call in calls):
        message = {**message, "tool_calls": [
            {key: value for key, value in call.items() if key not in _CALL_ID_KEYS}
            if isinstance(call, dict) else call for call in calls]}
    if "tool_call_id" in message:
        message = {key: value for key, value in message.items() if key != "tool_call_id"}
    return message


def _digest_of(value: Any) -> str:
    """Return a digest of a message or its content, "" when there is none."""
    if value is None or value == "":
        return ""
    if isinstance(value, str):
        return digest(" ".join(value.split()))
    try:
        return digest(orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode())
    except TypeError:
        return digest(repr(value))
