"""tau2-bench messages as corpus turns: shared by the three tau2-bench converters.

The ``conversation_tau2_*.py`` converters read simulations of the same message format; their
docstrings describe the mapping (``turns_of``) and the results (``result_text``, ``error_of``,
capped by ``cap``). Standard library only, like every converter.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

__all__ = ["turns_of"]


def cap(text: str) -> str:
    """FORMAT.md's cap on long results."""
    if len(text) <= 4000:
        return text
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return f"{text[:2000]}\n[... sha256:{digest} len={len(text)}]"


def result_text(content: object) -> str | None:
    if content is None:
        return None
    return content if isinstance(content, str) else json.dumps(content, sort_keys=True)


def error_of(message: dict, text: str | None) -> str | None:
    if message.get("error") is True:
        first = (text or "").strip().splitlines()
        return first[0][:200] if first else "error: true"
    if text is not None and text.startswith("Error:"):
        return text.splitlines()[0][:200]
    return None


def capped(text: str | None) -> str | None:
    """A result as the licensed sources keep it: the text, capped (``cap``)."""
    return cap(text) if text is not None else None


def turns_of(messages: list[dict],
             store: Callable[[str | None], str | None] = capped) -> list[dict]:
    """Return the corpus turns of one simulation's messages.

    ``store`` makes a tool message's text (None: it has no content) the call's ``result``:
    ``capped`` by default; a source without a licence stores digests instead.
    """
    messages = sorted(messages, key=lambda m: m.get("turn_idx", 0))
    results = {m["id"]: m for m in messages if m["role"] == "tool" and m.get("id")}
    turns: list[dict] = []
    pending: list[str] = []
    for message in messages:
        role = message["role"]
        if role == "user":
            if message.get("content"):
                pending.append(message["content"])
        elif role == "assistant":
            calls = []
            for call in message.get("tool_calls") or []:
                tool_message = results.get(call.get("id"))
                text = result_text(tool_message.get("content")) if tool_message else None
                calls.append(
                    {
                        "tool": call["name"],
                        "args": call.get("arguments") or {},
                        "result": store(text) if tool_message else None,
                        "error": error_of(tool_message, text) if tool_message else None,
                    }
                )
            turns.append(
                {
                    "agent": None,
                    "input": "\n\n".join(pending) if pending else None,
                    "output": message.get("content")
                    if message.get("content") is not None
                    else None,
                    "calls": calls,
                }
            )
            pending = []
    return turns
