"""Build a ``ToolCall`` from a span once an adapter has picked the keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from otel_loopguard.adapters import _keys as k
from otel_loopguard.adapters._rules import handoff_note, handoff_target
from otel_loopguard.adapters._unwrap import unwrap_arguments, unwrap_result
from otel_loopguard.types import STATUS_ERROR, Handoff, SpanRecord, ToolCall

__all__ = ["HANDOFF", "REDACTED", "CallPlan", "PlannedAdapter", "build_handoff",
           "build_tool_call", "error_message"]

_MISSING = object()

CallPlan = tuple[Any, str, str, Any]
"""What an adapter reads for a tool call: ``(tool, arguments key, result key, agent)``."""

HANDOFF: Final[CallPlan] = ("", "", "", None)
"""The plan (compared by identity) of a span the adapter turns into a ``Handoff``."""

REDACTED: Final = "__REDACTED__"
"""What OpenInference writes in place of a value it hides (``OPENINFERENCE_HIDE_INPUTS``,
``OPENINFERENCE_HIDE_OUTPUTS``...): a value not captured, never the call's arguments or result
(every call's would be the same text)."""


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


def build_tool_call(span: SpanRecord, tool: Any, args_key: str, result_key: str,  # noqa: PLR0917
                    agent: Any = None, turn: int | None = None) -> ToolCall:
    """Return the tool call of ``span`` reading arguments and result from the given keys.

    ``agent`` and ``turn`` place it in its run (``ToolCall.in_context``) when known. The call
    failed when the span's status is ERROR, when its attributes say so (``error.type`` is set
    only on failure, in OTel and as ``tool_error`` in the MCP conventions; Strands writes
    ``gen_ai.tool.status = "error"``) or when the result's envelope does (``is_error``); a
    failure only the envelope reports is described by the result. One frame for what every
    tool span needs: the assembly builds a call per tool span it reads.
    """
    attrs = span.attributes
    raw_result = attrs.get(result_key, _MISSING)
    if raw_result == REDACTED:  # hidden: as if not captured
        raw_result = _MISSING
    raw_args = attrs.get(args_key)
    if (raw_result is _MISSING or raw_args is None) and span.events:
        raw_args, raw_result = _event_content(span.events, raw_args, raw_result)
    has_result = raw_result is not _MISSING
    result, envelope_error = unwrap_result(raw_result) if has_result else (None, False)
    if span.status_code == STATUS_ERROR or k.ERROR_TYPE in attrs \
            or attrs.get(k.GEN_AI_TOOL_STATUS) == "error":
        failed, message = True, error_message(span)
    else:
        failed, message = envelope_error, ""
    if envelope_error and not message:
        message = str(result)[:500]
    # Positional, in field order: every tool span read builds one (``ToolCall.in_context``).
    return ToolCall(str(tool), unwrap_arguments(None if raw_args == REDACTED else raw_args),
                    result, has_result,
                    failed, message, str(agent) if agent else None, span.span_id,
                    span.trace_id, span.start_time_ns, span.end_time_ns, turn)


def _event_content(events: Any, raw_args: Any, raw_result: Any) -> tuple[Any, Any]:
    """Return the arguments and result a span's events give where its attributes give none.

    The GenAI conventions' events, as Strands writes them without the
    ``gen_ai_latest_experimental`` opt-in: ``gen_ai.tool.message`` with the arguments as its
    ``content``, ``gen_ai.choice`` with the result as its ``message``.
    """
    for name, event_attrs in events:
        if name == _TOOL_MESSAGE_EVENT and raw_args is None:
            raw_args = event_attrs.get("content")
        elif name == _CHOICE_EVENT and raw_result is _MISSING and "message" in event_attrs:
            raw_result = event_attrs["message"]
    return raw_args, raw_result


_TOOL_MESSAGE_EVENT: Final = "gen_ai.tool.message"
_CHOICE_EVENT: Final = "gen_ai.choice"


def build_handoff(span: SpanRecord, tool: Any, args_key: str, agent: Any = None) -> Handoff:
    """Return the handoff of a handoff tool's span (see ``_rules``): to its target agent."""
    arguments = span.attributes.get(args_key)
    return Handoff(from_agent=str(agent) if agent else "",
                   to_agent=handoff_target(str(tool), arguments),
                   span_id=span.span_id, end_time_ns=span.end_time_ns,
                   note=handoff_note(str(tool), arguments))


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

    def handoff(self, span: SpanRecord, agent: str | None = None) -> Handoff | None:
        """Return the handoff of a span that ``plan`` calls one.

        ``agent``: the enclosing agent span's, the source of a handoff tool whose span names
        none (Strands' ``handoff_to_agent``); a handoff span says its own source.
        """
        raise NotImplementedError

    def to_event(self, span: SpanRecord) -> ToolCall | Handoff | None:
        """Return the tool call or handoff of ``span``, or None."""
        plan = self.plan(span.name, span.attributes)
        if plan is None:
            return None
        if plan is HANDOFF:
            return self.handoff(span)
        return build_tool_call(span, *plan)
