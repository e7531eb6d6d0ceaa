"""The OpenHands SDK's event list as corpus turns: shared by the two OpenHands SDK converters.

``function_openhands_oas.py`` and ``function_openhands_sdk_swebench.py`` read histories of the
same SDK events; their docstrings describe the mapping (``turns_of``) and the results
(``result_and_error``, capped by ``cap``). Standard library only, like every converter.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["text_of", "turns_of"]


def cap(text: str) -> str:
    """Results over 4,000 characters: first 2,000 and the hash and length of the whole."""
    if len(text) <= 4000:
        return text
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return text[:2000] + f"\n[... sha256:{digest} len={len(text)}]"


def first_line(text: str) -> str:
    stripped = text.strip()
    return stripped.splitlines()[0] if stripped else text


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part.get("text", "") for part in content if isinstance(part, dict) and part.get("text")
        )
    return ""


def result_and_error(observation: dict[str, Any]) -> tuple[str, str | None]:
    kind = observation.get("kind", "")
    error: str | None = None
    if kind == "ExecuteBashObservation":
        meta = observation.get("metadata") or {}
        text = (
            (meta.get("prefix") or "")
            + (observation.get("output") or "")
            + (meta.get("suffix") or "")
        )
        code = observation.get("exit_code")
        if code is None:
            code = meta.get("exit_code")
        if observation.get("error") is True:
            error = "error: true"
        elif code not in (0, None):
            error = f"exit code {code}"
        return text, error
    if isinstance(observation.get("error"), str) and observation["error"]:
        return observation["error"], first_line(observation["error"])
    for key in ("output", "content", "message"):
        if isinstance(observation.get(key), str):
            text = observation[key]
            break
    else:
        text = ""
    if observation.get("error") is True:
        error = "error: true"
    return text, error


def arguments(tool_call: dict[str, Any]) -> dict[str, Any]:
    raw = tool_call.get("arguments", (tool_call.get("function") or {}).get("arguments"))
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {"_unparsed_arguments": raw}
    return parsed if isinstance(parsed, dict) else {"_arguments": parsed}


def turns_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    calls_by_id: dict[str, dict[str, Any]] = {}
    pending_input: str | None = None
    current_response: str | None = None
    for event in events:
        kind = event.get("kind")
        if kind == "MessageEvent":
            text = text_of((event.get("llm_message") or {}).get("content"))
            if event.get("source") == "user":
                pending_input = text if pending_input is None else pending_input + "\n" + text
            else:
                turns.append({"agent": None, "input": pending_input, "output": text, "calls": []})
                pending_input = None
            current_response = None
        elif kind == "ActionEvent":
            response = event.get("llm_response_id")
            thought = text_of(event.get("thought"))
            if event.get("reasoning_content"):
                thought = (event["reasoning_content"] + "\n" + thought).strip()
            if response is None or response != current_response or not turns:
                turns.append(
                    {"agent": None, "input": pending_input, "output": thought or None, "calls": []}
                )
                pending_input = None
                current_response = response
            elif thought:
                previous = turns[-1]["output"]
                turns[-1]["output"] = thought if not previous else previous + "\n" + thought
            tool_call = event.get("tool_call") or {}
            call = {
                "tool": tool_call.get("name")
                or (tool_call.get("function") or {}).get("name")
                or event.get("tool_name"),
                "args": arguments(tool_call),
                "result": None,
                "error": None,
            }
            turns[-1]["calls"].append(call)
            calls_by_id[event.get("tool_call_id") or tool_call.get("id")] = call
        elif kind == "ObservationEvent":
            call = calls_by_id.get(event.get("tool_call_id"))
            if call is not None:
                text, error = result_and_error(event.get("observation") or {})
                call["result"] = cap(text)
                call["error"] = error
        elif kind == "AgentErrorEvent":
            call = calls_by_id.get(event.get("tool_call_id"))
            if call is not None:
                call["result"] = cap(event.get("error") or "")
                call["error"] = first_line(event.get("error") or "agent error")
    return turns
