"""Turn the finished spans of one trace into ordered tool calls and handoffs.

Spans are walked in end-time order. Each tool call gets its agent (from the span, or the
nearest agent ancestor) and its model turn (model spans that ended before it), so the parallel
calls of one turn form a batch. The trace's prompt template and conversation are picked up
from any of its spans.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Final

from otel_loopguard.adapters import (
    DEFAULT_ADAPTERS,
    agent_of,
    conversation_of,
    is_model_turn,
    may_be_event,
    prompt_template_of,
    to_event,
)
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.types import Handoff, SpanAdapter, SpanRecord, ToolCall, slot_setters

__all__ = ["AssembledTrace", "TraceEvent", "assemble_trace"]

_MAX_ANCESTRY = 64


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """A tool call or handoff of a trace, with the agent span that owns it."""

    event: ToolCall | Handoff
    agent_span_id: str | None


@dataclass(slots=True)
class AssembledTrace:
    """The tool calls and handoffs of one trace, in end-time order, and its run identity."""

    trace_id: str
    events: list[TraceEvent] = field(default_factory=list)
    prompt_template: str | None = None
    conversation: str | None = None
    first_start_ns: int = 0


def assemble_trace(trace_id: str, spans: Sequence[SpanRecord], config: LoopGuardConfig,
                   adapters: Sequence[SpanAdapter] = DEFAULT_ADAPTERS) -> AssembledTrace:
    """Return the ordered events of one trace's spans (any order in, end order out)."""
    ordered = sorted(spans, key=_END_START)
    agents: dict[str, str] = {}
    # With the default adapters, spans that none of them can turn into an event are skipped
    # without asking each adapter in turn.
    candidate = may_be_event if adapters is DEFAULT_ADAPTERS else None
    pending: list[tuple[SpanRecord, int]] = []  # maybe events, with the model turns before them
    turns = 0
    has_model = False
    template_keys = frozenset(config.prompt_name_keys)
    conversation_keys = frozenset(config.conversation_keys)
    template = conversation = None
    for s in ordered:
        name, attributes = s.name, s.attributes
        agent = agent_of(name, attributes)
        if agent:
            agents[s.span_id] = agent
        if is_model_turn(name, attributes):
            turns += 1
            has_model = True
        elif candidate is None or candidate(name, attributes):
            pending.append((s, turns))
        # Only spans holding one of the keys can name a template or a conversation.
        if template is None and not template_keys.isdisjoint(attributes):
            template = prompt_template_of(attributes, config.prompt_name_keys,
                                          config.prompt_version_keys) or None
        if conversation is None and not conversation_keys.isdisjoint(attributes):
            conversation = conversation_of(attributes, config.conversation_keys) or None
    out = AssembledTrace(trace_id=trace_id,
                         first_start_ns=min(map(_START, ordered), default=0))
    out.prompt_template = template
    out.conversation = conversation
    by_id: dict[str, SpanRecord] | None = None
    events = out.events
    for span, turn in pending:
        event = to_event(span, adapters)
        if event is None:
            continue
        if by_id is None:
            by_id = dict(zip(map(_SPAN_ID, ordered), ordered, strict=True))
        owner, owner_name = _owning_agent(span, by_id, agents)
        if isinstance(event, ToolCall):
            event = _copy_call(event, event.agent or owner_name, turn if has_model else None)
        events.append(_trace_event(event, owner))
    if not any(isinstance(item.event, Handoff) for item in events):
        _add_sibling_handoffs(out, ordered, agents)
    return out


def _trace_event_maker() -> Callable[[ToolCall | Handoff, str | None], TraceEvent]:
    """Return ``make(event, agent_span_id)``, equal to ``TraceEvent(event, agent_span_id)``."""
    try:
        names, (set_event, set_agent) = slot_setters(TraceEvent)
    except (TypeError, ValueError):  # pragma: no cover - guards a future change of TraceEvent
        return TraceEvent
    if names != ("event", "agent_span_id"):  # pragma: no cover - as above
        return TraceEvent
    new = object.__new__

    def make(event: ToolCall | Handoff, agent_span_id: str | None) -> TraceEvent:
        out: TraceEvent = new(TraceEvent)
        set_event(out, event)
        set_agent(out, agent_span_id)
        return out

    return make


_trace_event: Final = _trace_event_maker()
_END_START: Final = attrgetter("end_time_ns", "start_time_ns")
_START: Final = attrgetter("start_time_ns")
_SPAN_ID: Final = attrgetter("span_id")


def _copy_call(call: ToolCall, agent: str | None, turn: int | None) -> ToolCall:
    return dataclasses.replace(call, agent=agent, turn=turn)


def _add_sibling_handoffs(out: AssembledTrace, spans: Sequence[SpanRecord],
                          agents: dict[str, str]) -> None:
    """Infer handoffs from consecutive sibling agent spans (triage, then billing, ...).

    Used only when the trace has no explicit handoff: the official GenAI instrumentations emit
    none, and Traceloop's handoff spans do not name the target. Nested agent spans are
    delegation, not handoffs, so only siblings count.
    """
    siblings: dict[str | None, list[SpanRecord]] = {}
    for span in spans:
        if span.span_id in agents:
            siblings.setdefault(span.parent_span_id, []).append(span)
    inferred: list[tuple[int, TraceEvent]] = []
    for group in siblings.values():
        group.sort(key=lambda s: s.start_time_ns)
        for before, after in itertools.pairwise(group):
            source, target = agents[before.span_id], agents[after.span_id]
            if source != target:
                handoff = Handoff(from_agent=source, to_agent=target, span_id=after.span_id,
                                  end_time_ns=after.start_time_ns, explicit=False)
                inferred.append((after.start_time_ns, TraceEvent(handoff, before.parent_span_id)))
    if inferred:
        timed = [(_event_time(item), item) for item in out.events] + inferred
        timed.sort(key=lambda pair: pair[0])
        out.events = [item for _, item in timed]


def _event_time(item: TraceEvent) -> int:
    return item.event.end_time_ns


def _first(values: Iterable[str | None]) -> str | None:
    return next((v for v in values if v), None)


def _first_template(spans: Sequence[SpanRecord], config: LoopGuardConfig) -> str | None:
    keys, versions = config.prompt_name_keys, config.prompt_version_keys
    return _first(prompt_template_of(s.attributes, keys, versions) for s in spans)


def _owning_agent(span: SpanRecord, by_id: dict[str, SpanRecord],
                  agents: dict[str, str]) -> tuple[str | None, str | None]:
    parent = span.parent_span_id
    for _ in range(_MAX_ANCESTRY):
        if parent is None:
            return None, None
        if parent in agents:
            return parent, agents[parent]
        record = by_id.get(parent)
        parent = record.parent_span_id if record is not None else None
    return None, None
