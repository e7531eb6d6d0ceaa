"""OpenAI Agents SDK spans as Logfire exports them (``Function: name``, ``Handoff: a -> b``).

Logfire 5 names these spans by their message template (``Agent run: {name!r}``,
``Handoff: {from_agent} → {to_agent}``): the values are then in the attributes (``name``,
``from_agent``, ``to_agent``) and the formatted text in ``logfire.msg``. A name that is no
template (older versions, or a span named by hand) is read as before, with ``->`` or ``→``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from otel_loopguard.adapters import _keys as k
from otel_loopguard.adapters._build import HANDOFF, CallPlan, PlannedAdapter
from otel_loopguard.types import Handoff, SpanRecord

__all__ = ["LogfireAdapter", "agent_run_name"]

_ARROWS: Final = (" -> ", " → ")
_NULL: Final = ("", "null", "None")
"""What an agent attribute holds before the handoff is made (Logfire writes None as null)."""


class LogfireAdapter(PlannedAdapter):
    """Reads openai-agents function spans (``name``, ``input``, ``output``) and handoffs.

    Thread-safe: stateless.
    """

    name = "logfire"

    @staticmethod
    def plan(name: str, attrs: Mapping[str, Any]) -> CallPlan | None:
        """Return what ``to_event`` reads: a call plan, ``HANDOFF`` or None (see GenAI)."""
        if name.startswith(k.LOGFIRE_FUNCTION_PREFIX):
            tool = attrs.get(k.AGENTS_NAME) or name.removeprefix(k.LOGFIRE_FUNCTION_PREFIX)
            return (tool, k.AGENTS_INPUT, k.AGENTS_OUTPUT, None)
        if name.startswith(k.LOGFIRE_HANDOFF_PREFIX) and _handoff_agents(name, attrs) is not None:
            return HANDOFF
        return None

    def handoff(self, span: SpanRecord, agent: str | None = None) -> Handoff:
        """Return the handoff of a ``Handoff: a -> b`` span (it names its source)."""
        source, target = _handoff_agents(span.name, span.attributes) or ("", "")
        return Handoff(from_agent=source, to_agent=target, span_id=span.span_id,
                       end_time_ns=span.end_time_ns)


def agent_run_name(name: str, attrs: Mapping[str, Any]) -> str:
    """Return the agent of a span whose name starts with ``Agent run: ``.

    ``Agent run: 'triage'`` names it; ``Agent run: {name!r}`` leaves it to the attribute
    ``name``, else to ``logfire.msg`` (both set as the span starts).
    """
    body = name.removeprefix(k.LOGFIRE_AGENT_PREFIX)
    if "{" in body:
        found = attrs.get(k.AGENTS_NAME)
        if isinstance(found, str) and found:
            return found
        message = attrs.get(k.LOGFIRE_MSG)
        body = message.removeprefix(k.LOGFIRE_AGENT_PREFIX) if isinstance(message, str) \
            and message.startswith(k.LOGFIRE_AGENT_PREFIX) else ""
    return body.strip("'\" ")


def _handoff_agents(name: str, attrs: Mapping[str, Any]) -> tuple[str, str] | None:
    """Return ``(from, to)`` of a ``Handoff:`` span, or None when it names no two agents."""
    body = name.removeprefix(k.LOGFIRE_HANDOFF_PREFIX)
    if "{" not in body:
        return _split(body)
    if k.AGENTS_FROM_AGENT in attrs or k.AGENTS_TO_AGENT in attrs:
        source, target = attrs.get(k.AGENTS_FROM_AGENT), attrs.get(k.AGENTS_TO_AGENT)
        if isinstance(source, str) and isinstance(target, str) \
                and source not in _NULL and target not in _NULL:
            return source, target
        return None
    message = attrs.get(k.LOGFIRE_MSG)
    if isinstance(message, str) and message.startswith(k.LOGFIRE_HANDOFF_PREFIX):
        found = _split(message.removeprefix(k.LOGFIRE_HANDOFF_PREFIX))
        if found is not None and found[0] not in _NULL and found[1] not in _NULL:
            return found  # not "triage → None": the handoff is not made yet
    return None


def _split(body: str) -> tuple[str, str] | None:
    """Return ``(from, to)`` of ``a -> b`` or ``a → b``, or None."""
    for arrow in _ARROWS:
        source, sep, target = body.partition(arrow)
        source, target = source.strip(), target.strip()
        if sep and source and target:
            return source, target
    return None
