"""Gemini CLI: its ``gemini_cli.*`` log events and its tool spans.

Read from ``google-gemini/gemini-cli`` ``docs/cli/telemetry.md`` (stored commit 04bcbc6b, the
geminicli.com docs/cli/telemetry page) and ``packages/core/src/telemetry/types.ts``
(``ToolCallEvent``): logger (scope) ``gemini-cli``, the ``event.name`` attribute
``gemini_cli.tool_call``, a sentence as body; ``function_args`` is JSON (gated by
``logPrompts``, on by default), ``success`` a boolean, ``duration_ms`` a number; no output.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from otel_loopguard.coding_agents._model import AgentCall, AgentTurn, flag, number, text

__all__ = ["AGENT", "PREFIX", "read_event", "read_span"]

AGENT: Final = "gemini-cli"
PREFIX: Final = "gemini_cli."
_MS: Final = 1_000_000
_TOOL_OPERATIONS: Final = frozenset({"tool_call", "execute_tool"})


def read_event(name: str, attrs: Mapping[str, Any], end_ns: int) -> AgentCall | AgentTurn | None:
    """Return the tool call (``tool_call``) or model response (``api_response``) of an event."""
    session = text(attrs, "session.id")
    duration = int(number(attrs.get("duration_ms")) * _MS)
    if name == "gemini_cli.tool_call":
        failed = not flag(attrs.get("success"))
        return AgentCall(AGENT, session, text(attrs, "function_name") or "unknown",
                         text(attrs, "call_id"), end_ns, duration,
                         arguments=attrs.get("function_args") or None, failed=failed,
                         error=text(attrs, "error", "error.message", "error_type",
                                    "error.type") if failed else "",
                         model=text(attrs, "model"))
    if name == "gemini_cli.api_response":
        return AgentTurn(AGENT, session, end_ns, duration, text(attrs, "model"),
                         int(number(attrs.get("input_token_count"))),
                         int(number(attrs.get("output_token_count"))) +
                         int(number(attrs.get("thoughts_token_count"))))
    return None


def read_span(attrs: Mapping[str, Any], end_ns: int, duration_ns: int,
              failed: bool) -> AgentCall | None:
    """Return the tool call of a Gemini CLI tool span (``gen_ai.operation.name`` a tool call)."""
    if attrs.get("gen_ai.operation.name") not in _TOOL_OPERATIONS:
        return None
    tool = text(attrs, "gen_ai.tool.name", "function_name")
    if not tool:
        return None
    return AgentCall(AGENT, text(attrs, "gen_ai.conversation.id", "session.id"), tool,
                     text(attrs, "gen_ai.tool.call_id", "gen_ai.tool.call.id", "call_id"),
                     end_ns, duration_ns,
                     arguments=attrs.get("gen_ai.tool.call.arguments")
                     or attrs.get("function_args"), failed=failed)
