"""How spans become runs: the rules every path applies, and the assembly of a whole trace.

The rules, shared by the live processor (spans as they start and end), ``check`` and ``serve``
(whole traces, ``assemble_trace``):

* **tool calls and handoffs** come from the span adapters (``adapters.to_event``); a span an
  enforce-mode guard stopped (``loopguard.blocked``) is none: its tool never ran;
* **agent**: the tool span's own agent, else its nearest agent ancestor (``nearest_agent``);
* **model turn**: the model (chat) spans of the run that ended before the tool span, plus one
  when a sibling ``generate_content`` model span (``may_name_model``) started before it and
  ends after it (Google ADK's stays open over the calls it requested): the call is that
  span's; the parallel calls of one turn form a batch;
* **prompt template**: the first event or model span of the run, in end order, that names one
  (``template_in``): a tool (or handoff) span or its nearest ancestor naming one, or a model
  span; never another span of the trace (an MCP server's ``prompts/get`` span names the prompt
  it served, not the run's template);
* **sibling handoffs**: consecutive sibling agent spans with different agents (spans named as
  agents, ``may_name_agent``), counted until the run reports a handoff span of its own
  (``SiblingAgents``, ``LoopEngine.counts_inferred_handoff``).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Final, TypeVar

from otel_loopguard.adapters import (
    DEFAULT_ADAPTERS,
    conversation_of,
    may_name_agent,
    may_name_model,
    placed_event,
    prompt_template_of,
    roles_of,
    template_key_roots,
    usage_of,
)
from otel_loopguard.adapters._turns import (
    asks_by_reason,
    not_from_user,
    turn_input_of,
    turn_of,
    turn_output_of,
    user_input_of,
)
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.types import Handoff, ModelTurn, SpanAdapter, SpanRecord, ToolCall

__all__ = ["AssembledTrace", "SiblingAgents", "TraceEvent", "assemble_trace", "nearest_agent",
           "template_in"]

MAX_ANCESTRY: Final = 64
"""How far ``nearest_agent`` walks up (a cycle or a very deep tree stops there)."""
_MAX_PARENTS: Final = 4096
_BLOCKED: Final = "loopguard.blocked"
"""Set by the enforce-mode guards on the span of a call they stopped (the tool never ran)."""
_K = TypeVar("_K")


def template_in(attributes: Mapping[str, Any], config: LoopGuardConfig) -> str | None:
    """Return the prompt template these attributes name, or None."""
    return _template_in(attributes, config, _key_roots(tuple(config.prompt_name_keys)))


def _template_in(attributes: Mapping[str, Any], config: LoopGuardConfig,
                 roots: frozenset[str]) -> str | None:
    """``template_in``, with the roots of ``config``'s keys (``_key_roots``) already found."""
    if roots.isdisjoint(attributes):
        return None  # ``prompt_template_of`` finds nothing without one of the keys' roots
    return prompt_template_of(attributes, config.prompt_name_keys,
                              config.prompt_version_keys) or None


@functools.lru_cache(maxsize=16)
def _key_roots(keys: tuple[str, ...]) -> frozenset[str]:
    """``template_key_roots``, once per configuration's keys (it is asked for every span)."""
    return template_key_roots(keys)


LONE_TOOL_CALL_HINT: Final = (
    "a tool span with no parent span and no conversation id is a run of its own, so no loop "
    "can be detected across such calls: wrap an agent run in a parent span (the framework's "
    "agent span, or your own), or set gen_ai.conversation.id (or session.id) on the tool spans "
    "with run_key = \"conversation\"; see docs/getting-started.md")
"""What the processor logs, ``check`` prints and ``serve`` logs once, on the first such call."""


def nearest_agent(parent: _K | None, step: Callable[[_K], tuple[str | None, _K | None] | None]
                  ) -> tuple[_K, str] | None:
    """Return the id and agent name of the nearest agent ancestor, starting at ``parent``.

    ``step(id)`` returns the span's agent name (None when it is not an agent span) and its
    parent's id, or None when the span is unknown (not seen, or no longer open).
    """
    for _ in range(MAX_ANCESTRY):
        if parent is None:
            return None
        found = step(parent)
        if found is None:
            return None
        agent, up = found
        if agent is not None:
            return parent, agent
        parent = up
    return None


class SiblingAgents:
    """Infers handoffs from sibling agent spans, fed in start order (triage, then billing).

    Nested agent spans are delegation, not handoffs, so only siblings count. The official
    GenAI instrumentations emit no handoff spans, and Traceloop's do not name the target.
    Not thread-safe: used under the run's lock (live) or on one thread (replay). Bounded.
    """

    __slots__ = ("_latest",)

    def __init__(self) -> None:
        self._latest: dict[str | None, tuple[str, Any, bool]] = {}
        """Parent span id → the agent of the latest agent span started under it, that span
        (when given), and whether it started while its previous sibling still ran."""

    def started(self, parent: str | None, agent: str, span_id: str,
                start_time_ns: int, span: Any = None) -> Handoff | None:
        """Take an agent span that started; return the handoff it implies, if any.

        ``span``: the agent span itself (a weak reference to the SDK span live, so that an
        ended span is not kept from being freed; a ``SpanRecord`` in ``check``). A
        sibling still running when this one starts is parallel work (sub-agents fanned out
        together), not control passed on: no handoff, and none from the last agent of such a
        group to the next span either (control came back to the parent).
        """
        previous = self._latest.get(parent)
        parallel = previous is not None and previous[1] is not None \
            and _ran_until(previous[1], start_time_ns)
        self._latest[parent] = (agent, span, parallel)
        if len(self._latest) > _MAX_PARENTS:
            del self._latest[next(iter(self._latest))]
        if previous is None or previous[0] == agent or parallel or previous[2]:
            return None
        return Handoff(from_agent=previous[0], to_agent=agent, span_id=span_id,
                       end_time_ns=start_time_ns, explicit=False)


def _ran_until(span: Any, start_time_ns: int) -> bool:
    """Return whether ``span`` was still open at ``start_time_ns`` (its end unknown: no)."""
    if isinstance(span, weakref.ref):
        span = span()
        if span is None:  # freed: it ended (and was exported) long ago
            return False
    end = getattr(span, "end_time_ns", None)
    if end is None:
        end = getattr(span, "end_time", None)
        if end is None:  # a live SDK span not yet ended
            return True
    return bool(end) and end > start_time_ns


@dataclass(slots=True)
class TraceEvent:
    """A tool call, handoff or model turn of a trace, with the agent span that owns it."""

    event: ToolCall | Handoff | ModelTurn
    agent_span_id: str | None
    turn_open: bool = False
    """A tool call whose model span was still open when it ended: its turn is that span's."""


@dataclass(slots=True)
class AssembledTrace:
    """The tool calls and handoffs of one trace, in end-time order, and its run identity."""

    trace_id: str
    events: list[TraceEvent] = field(default_factory=list)
    prompt_template: str | None = None
    conversation: str | None = None
    first_start_ns: int = 0
    service_name: str | None = None
    """``service.name`` of the first span whose resource has one."""
    unparented_tool_calls: int = 0
    """Tool calls with no parent span, unless the run is keyed by a conversation id they have."""


def assemble_trace(trace_id: str, spans: Sequence[SpanRecord], config: LoopGuardConfig,
                   adapters: Sequence[SpanAdapter] = DEFAULT_ADAPTERS, *,
                   model_turns: bool = False, tool_requests: bool = True) -> AssembledTrace:
    """Return the ordered events of one trace's spans (any order in, end order out).

    With ``model_turns``, each model span is an event too (a ``ModelTurn`` numbered as the
    ``turn`` of the calls it issued, with its token usage), for the ``idle_turns`` detector
    and the run's waste; with ``tool_requests`` (the ``idle_turns`` detector's need), each
    turn also says whether it asked for tools.
    """
    ordered = sorted(spans, key=_END_START)
    agents: dict[str, str] = {}
    # With the default adapters, spans that none of them can turn into an event are skipped
    # without asking each adapter in turn.
    every = adapters is not DEFAULT_ADAPTERS
    pending: list[tuple[SpanRecord, int]] = []  # maybe events, with the model turns before them
    open_models: dict[str | None, list[SpanRecord]] = {}  # parent → its model-named model spans
    turns = 0
    template_roots = _key_roots(tuple(config.prompt_name_keys))
    conversation_keys = frozenset(config.conversation_keys)
    conversation = None
    naming: list[tuple[SpanRecord, bool]] = []  # (span, its ancestors too) that may name one
    agent_spans: list[SpanRecord] = []
    for s in ordered:
        attributes = s.attributes
        agent, model_turn, maybe_event = roles_of(s.name, attributes)
        if agent:
            agents[s.span_id] = agent
            agent_spans.append(s)
        if model_turn:
            turns += 1
            if s.parent_span_id is not None and may_name_model(s.name):
                open_models.setdefault(s.parent_span_id, []).append(s)
            if model_turns:
                pending.append((s, -turns))  # negative: the span is model turn number -n
            naming.append((s, False))
        elif (maybe_event or every) and not attributes.get(_BLOCKED):
            pending.append((s, turns))  # a blocked call never ran: the live processor skips it
            naming.append((s, True))
        # Only spans holding one of the keys can name a conversation.
        if conversation is None and not conversation_keys.isdisjoint(attributes):
            conversation = conversation_of(attributes, config.conversation_keys) or None
    out = AssembledTrace(trace_id=trace_id,
                         first_start_ns=min(map(_START, ordered), default=0))
    out.conversation = conversation
    out.service_name = _service_name(spans)
    by_id = dict(zip(map(_SPAN_ID, ordered), ordered, strict=True)) if naming else {}
    out.prompt_template = _run_template(naming, by_id, config, template_roots)
    opened = _in_open_models(pending, open_models) if open_models else frozenset()
    out.events, lone = _events(pending, by_id, agents, adapters, opened,
                               tool_requests=tool_requests)
    if conversation is None or config.run_key != "conversation":
        out.unparented_tool_calls = lone
    _add_sibling_handoffs(out, agent_spans, agents)  # they count until the run reports its own
    return out


def _run_template(naming: Sequence[tuple[SpanRecord, bool]], by_id: Mapping[str, SpanRecord],
                  config: LoopGuardConfig, roots: frozenset[str]) -> str | None:
    """Return the template of the first of ``naming`` that names one, as the processor does.

    A model span names it by its own attributes, an event by its own or its nearest ancestor's
    naming one (the live processor's ``_ancestry``). Only spans holding one of the keys' roots
    can name a template. An ancestor already read without one is not read again, nor are its
    own ancestors.
    """
    if not roots:
        return None
    walked: set[str] = set()  # read, and their ancestors too
    for span, with_ancestors in naming:
        node: SpanRecord | None = span
        while node is not None and node.span_id not in walked:
            if not roots.isdisjoint(node.attributes):
                template = _template_in(node.attributes, config, roots)
                if template is not None:
                    return template
            if not with_ancestors:
                break
            walked.add(node.span_id)
            node = by_id.get(node.parent_span_id) if node.parent_span_id else None
    return None


def _service_name(spans: Sequence[SpanRecord]) -> str | None:
    """Return ``service.name`` of the first span whose resource has one, or None.

    The spans of one resource share its attributes (one mapping): each is read once.
    """
    last: Mapping[str, Any] | None = None
    for span in spans:
        resource = span.resource
        if resource is last:
            continue
        last = resource
        service = resource.get("service.name")
        if service:
            return str(service)
    return None


def _in_open_models(pending: Sequence[tuple[SpanRecord, int]],
                    open_models: Mapping[str | None, Sequence[SpanRecord]]) -> frozenset[int]:
    """Return the indexes in ``pending`` of the calls whose sibling model span was still open.

    Open: started by the call's start, and after the call in end order (``_END_START``), as the
    live processor finds it (``LiveSpans.in_open_model``).
    """
    found = set()
    for index, (span, turn) in enumerate(pending):
        siblings = open_models.get(span.parent_span_id) if turn >= 0 else None
        if siblings and any(m.start_time_ns <= span.start_time_ns
                            and _END_START(m) > _END_START(span) for m in siblings):
            found.add(index)
    return frozenset(found)


def _events(pending: Sequence[tuple[SpanRecord, int]], by_id: Mapping[str, SpanRecord],
            agents: dict[str, str], adapters: Sequence[SpanAdapter], opened: frozenset[int], *,
            tool_requests: bool) -> tuple[list[TraceEvent], int]:
    """Return the events of the candidate spans (each with its owning agent span), and the lone.

    The lone: how many of the events are tool calls whose span has no parent.
    ``pending`` holds each candidate with the model turns before it (-n: model turn n). A call
    before the trace's first model turn has no turn (its batch goes by time), as the live
    processor, which cannot see later spans, places it; one of ``opened`` is in the turn its
    open model span ends (one more). The owner depends on the parent alone,
    so it is looked up once per parent span. A tool call with no parent span is a run of its
    own unless its run is keyed by a conversation id: no repetition can be seen across such
    calls (``AssembledTrace.unparented_tool_calls``).

    With ``tool_requests``, a turn's content is read only where the engine reads it
    (``_Unread``): not for a turn that asked for tools and is followed by a tool call of its
    agent before its agent's next turn (most turns of an agent at work), unless it is the
    user's input.
    """
    owners: dict[str | None, tuple[str | None, str | None]] = {}
    events: list[TraceEvent] = []
    unread = _Unread()
    lone = 0
    for index, (span, turn) in enumerate(pending):
        is_open = index in opened
        parent = span.parent_span_id
        found = owners.get(parent)
        if found is None:
            found = owners[parent] = _owning_agent(parent, by_id, agents)
        owner, owner_name = found
        event: ToolCall | Handoff | ModelTurn | None
        if turn < 0:
            attributes = span.attributes
            waits = inputs_wait = False
            if len(attributes) == 1:  # only the model marker: no usage, no content to read
                event = ModelTurn(span.span_id, span.start_time_ns, span.end_time_ns, None,
                                  owner, -turn)
            else:
                tokens_in, tokens_out, models = usage_of(attributes)
                if not tool_requests:  # only a user's new message (it changes the world)
                    requested, inputs, output, from_user = _NO_CONTENT
                    inputs = user_input_of(attributes)
                    from_user = bool(inputs)
                elif asks_by_reason(attributes):  # its content waits (``_Unread``)
                    requested, output, waits = True, "", True
                    inputs_wait = not_from_user(attributes)
                    inputs, from_user = ("", False) if inputs_wait \
                        else turn_input_of(attributes)
                else:
                    requested, inputs, output, from_user = turn_of(attributes)
                event = ModelTurn(span.span_id, span.start_time_ns, span.end_time_ns,
                                  requested, owner, -turn, tokens_in, tokens_out, models,
                                  inputs, output, from_user)
            if tool_requests:
                unread.turn(owner, event if waits else None, span, inputs_wait)
        else:
            event = placed_event(span, adapters, owner_name, turn + is_open or None)
            if event is None:
                continue
            if isinstance(event, ToolCall):
                record = by_id.get(event.span_id)  # its own span, unless an adapter says other
                lone += record is not None and record.parent_span_id is None
                unread.called(owner)
        events.append(TraceEvent(event, owner, is_open))
    unread.read_all()
    return events, lone


class _Unread:
    """The model turns of a trace whose content is not read yet, one per agent at most.

    The engine reads a turn's ``output_sig`` and ``input_sig`` when the turn asked for no tool
    call (the ``idle_turns`` detector counts it idle at once, a handoff loop hears its output as
    work) or, for a turn that asked for tools, when no tool call or handoff of its run follows
    it before the run's next turn (the detector then counts it idle after all); and the input
    of a user's message always (``LoopEngine`` hears it even when a call follows). A turn that
    asked for tools (by its finish reasons) waits here; a tool call of its agent, which lands
    in the same run after it whatever the run key, drops it unread; its agent's next turn, or
    the end of the trace, reads it. Its input is read at once unless it is surely not the
    user's (``not_from_user``).
    """

    __slots__ = ("waiting",)

    def __init__(self) -> None:
        self.waiting: dict[str | None, tuple[ModelTurn, SpanRecord, bool]] = {}
        """Agent span id → its waiting turn, the turn's span, and whether its input waits too."""

    def turn(self, owner: str | None, waiting: ModelTurn | None, span: SpanRecord,
             inputs_wait: bool) -> None:
        """Take the next turn of ``owner``: ``waiting``, or None when it was read whole."""
        if self.waiting:
            self._read(owner)
        if waiting is not None:
            self.waiting[owner] = (waiting, span, inputs_wait)

    def called(self, owner: str | None) -> None:
        """Take a tool call of ``owner``: its waiting turn, if any, is never read."""
        if self.waiting:
            self.waiting.pop(owner, None)

    def read_all(self) -> None:
        """Read every turn still waiting (the trace ends)."""
        for owner in list(self.waiting):
            self._read(owner)

    def _read(self, owner: str | None) -> None:
        waiting = self.waiting.pop(owner, None)
        if waiting is not None:
            turn, span, inputs_wait = waiting
            attributes = span.attributes
            turn.output_sig = turn_output_of(attributes)
            if inputs_wait:  # not the user's: the flag stays False
                turn.input_sig = turn_input_of(attributes)[0]


_NO_CONTENT: Final = (None, "", "", False)
"""``turn_of`` of a model turn whose content is not read (no ``idle_turns`` detector)."""
_END_START: Final = attrgetter("end_time_ns", "start_time_ns")
_START: Final = attrgetter("start_time_ns")
_SPAN_ID: Final = attrgetter("span_id")


def _add_sibling_handoffs(out: AssembledTrace, agent_spans: Sequence[SpanRecord],
                          agents: dict[str, str]) -> None:
    """Add the handoffs ``SiblingAgents`` infers, in time order among the trace's events.

    ``agent_spans``: the trace's spans that ``agents`` names (a span id seen twice names the
    agent of its last copy in end order).
    """
    siblings = SiblingAgents()
    inferred: list[tuple[int, TraceEvent]] = []
    for span in sorted((s for s in agent_spans if may_name_agent(s.name)), key=_START):
        handoff = siblings.started(span.parent_span_id, agents[span.span_id], span.span_id,
                                   span.start_time_ns, span)
        if handoff is not None:
            inferred.append((span.start_time_ns, TraceEvent(handoff, span.parent_span_id)))
    if inferred:
        timed = [(_event_time(item), item) for item in out.events] + inferred
        timed.sort(key=lambda pair: pair[0])
        out.events = [item for _, item in timed]


def _event_time(item: TraceEvent) -> int:
    return item.event.end_time_ns


def _owning_agent(parent: str | None, by_id: Mapping[str, SpanRecord],
                  agents: dict[str, str]) -> tuple[str | None, str | None]:
    """Return the id and name of the nearest agent span at or above ``parent``."""
    def step(span_id: str) -> tuple[str | None, str | None] | None:
        record = by_id.get(span_id)
        return None if record is None else (agents.get(span_id), record.parent_span_id)

    found = nearest_agent(parent, step)
    return (None, None) if found is None else found
