"""Build a ``ToolCall`` from a span once an adapter has picked the keys."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from otel_loopguard.adapters import _keys as k
from otel_loopguard.adapters._rules import handoff_target
from otel_loopguard.adapters._unwrap import unwrap_arguments, unwrap_result
from otel_loopguard.types import STATUS_ERROR, Handoff, SpanRecord, ToolCall

__all__ = ["HANDOFF", "CallPlan", "PlannedAdapter", "build_handoff", "build_tool_call",
           "error_message", "failed_by_attributes", "tool_call_values"]

_MISSING = object()

CallPlan = tuple[Any, str, str, Any]
"""What an adapter reads for a tool call: ``(tool, arguments key, result key, agent)``."""

HANDOFF: Final[CallPlan] = ("", "", "", None)
"""The plan (compared by identity) of a span the adapter turns into a ``Handoff``."""


def error_message(span: SpanRecord) -> str:
    """Return the best description of a failed span: status, exception event, ``error.type``."""
    if span.status_message:
        return span.status_message
    for name, attrs in span.events:
        if name == "exception":
            text = f"{attrs.get('exception.type', '')}: {attrs.get('exception.message', '')}"
            return text.strip(": ")
    etype = span.attributes.get(k.ERROR_TYPE)
    return str(etype) if etype and etype != "_OTHER" else ""


def failed_by_attributes(attrs: Mapping[str, Any]) -> bool:
    """Return True when the span's attributes say the tool failed, whatever its status.

    ``error.type`` is set only on failure (OTel; ``tool_error`` in the MCP conventions), and
    Strands writes ``gen_ai.tool.status = "error"``.
    """
    return k.ERROR_TYPE in attrs or attrs.get(k.GEN_AI_TOOL_STATUS) == "error"


def tool_call_values(attrs: Mapping[str, Any], args_key: str, result_key: str,
                     status_error: bool, message_of: Callable[[], str],
                     ) -> tuple[Any, Any, bool, bool, str]:
    """Return ``(arguments, result, has_result, error, error_message)`` of a tool span.

    ``status_error`` tells whether the span's status is ERROR; ``message_of()`` is called only
    when the span failed (status, ``failed_by_attributes``), for the description of the failure.
    A failure the result envelope reports (``is_error``) is described by the result.
    """
    raw_args = attrs.get(args_key)
    raw_result = attrs.get(result_key, _MISSING)
    has_result = raw_result is not _MISSING
    result, envelope_error = unwrap_result(raw_result) if has_result else (None, False)
    span_error = status_error or failed_by_attributes(attrs)
    failed = span_error or envelope_error
    message = message_of() if span_error else ""
    if envelope_error and not message:
        message = str(result)[:500]
    return unwrap_arguments(raw_args), result, has_result, failed, message


def build_tool_call(span: SpanRecord, tool: Any, args_key: str, result_key: str,  # noqa: PLR0917
                    agent: Any = None, turn: int | None = None) -> ToolCall:
    """Return the tool call of ``span`` reading arguments and result from the given keys.

    ``agent`` and ``turn`` place it in its run (``ToolCall.in_context``) when known.
    """
    arguments, result, has_result, failed, message = tool_call_values(
        span.attributes, args_key, result_key, span.status_code == STATUS_ERROR,
        lambda: error_message(span))
    # Positional, in field order: every tool span read builds one (``ToolCall.in_context``).
    return ToolCall(str(tool), arguments, result, has_result, failed, message,
                    str(agent) if agent else None, span.span_id, span.trace_id,
                    span.start_time_ns, span.end_time_ns, turn)


def build_handoff(span: SpanRecord, tool: Any, args_key: str, agent: Any = None) -> Handoff:
    """Return the handoff of a handoff tool's span (see ``_rules``): to its target agent."""
    return Handoff(from_agent=str(agent) if agent else "",
                   to_agent=handoff_target(str(tool), span.attributes.get(args_key)),
                   span_id=span.span_id, end_time_ns=span.end_time_ns)


class PlannedAdapter:
    """A span adapter in two steps: ``plan`` picks what to read, then the event is built.

    Subclasses give ``plan(name, attributes)`` (a ``CallPlan``, ``HANDOFF`` or None) and
    ``handoff(span)``, the ``Handoff`` of a span planned as one; ``to_event`` is the same for
    all. ``adapters.placed_event`` uses the plan to build a call already placed in its run.
    """

    name: str
    """The adapter's name (``genai``, ``openinference``...)."""

    @staticmethod
    def plan(name: str, attrs: Mapping[str, Any]) -> CallPlan | None:
        """Return what ``to_event`` reads from a span with this name and these attributes.

        ``(tool, arguments key, result key, agent)`` for a tool call, ``HANDOFF`` for a
        handoff, None when the span is neither.
        """
        raise NotImplementedError

    def handoff(self, span: SpanRecord) -> Handoff | None:
        """Return the handoff of a span that ``plan`` calls one."""
        raise NotImplementedError

    def to_event(self, span: SpanRecord) -> ToolCall | Handoff | None:
        """Return the tool call or handoff of ``span``, or None."""
        plan = self.plan(span.name, span.attributes)
        if plan is None:
            return None
        if plan is HANDOFF:
            return self.handoff(span)
        return build_tool_call(span, *plan)
