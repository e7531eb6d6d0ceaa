"""How the processor checks an ended span that may be a tool call or handoff."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any, Final

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext

from otel_loopguard.adapters import (
    DEFAULT_ADAPTERS,
    agent_of,
    is_model_turn,
    may_be_event,
    placed_event,
    to_event,
)
from otel_loopguard.assembly import LONE_TOOL_CALL_HINT, template_in
from otel_loopguard.otlp._sdk import raw_attributes, span_record_from_readable
from otel_loopguard.processor._report import hex_trace
from otel_loopguard.processor._turns import ModelTurns
from otel_loopguard.state import RunEntry
from otel_loopguard.types import Action, Decision, Handoff, SpanAdapter, ToolCall
from otel_loopguard.waste import Waste

__all__ = ["ToolCallChecks"]

logger = logging.getLogger(__name__)

_MAX_SUPPLIED: Final = 4096
"""Guarded calls whose content waits for their span to end (``ToolCallChecks.supply``)."""
_UNSET: Final = object()


class ToolCallChecks(ModelTurns):
    """``LoopGuardSpanProcessor``'s check of an ended span: a model turn, tool call or handoff.

    A mixin: the attributes it declares are the processor's.
    """

    adapters: tuple[SpanAdapter, ...]
    _multiprocess: bool
    _warned_unparented: bool
    _supplied: dict[str, list[Any]]
    _supplied_lock: threading.Lock

    def supply(self, span_id: str, *, arguments: Any = _UNSET, result: Any = _UNSET) -> None:
        """Give the engine a guarded call's arguments or result that its span will not carry.

        A guard checks a call in a framework's tool span (``enforce._host``); with the
        framework's content capture off, that span records neither, and calls whose arguments
        and results are unknown are never the same call, so nothing is stopped. The guard has
        both: they reach the engine here, by the span's id (16 hex digits), and never the span,
        which exports what the user configured. Used only for what the span lacks; at most
        ``_MAX_SUPPLIED`` calls wait (the oldest dropped), each until its span ends.
        """
        with self._supplied_lock:
            entry = self._supplied.get(span_id)
            if entry is None:
                if len(self._supplied) >= _MAX_SUPPLIED:
                    del self._supplied[next(iter(self._supplied))]
                entry = self._supplied[span_id] = [_UNSET, _UNSET]
            if arguments is not _UNSET:
                entry[0] = arguments
            if result is not _UNSET:
                entry[1] = result

    def _with_supplied(self, call: ToolCall) -> ToolCall:
        """Complete ``call`` (fresh from its span) with what a guard supplied for it."""
        with self._supplied_lock:
            entry = self._supplied.pop(call.span_id, None)
        if entry is not None:
            arguments, result = entry
            if call.arguments is None and arguments is not _UNSET:
                call.arguments = arguments
            if not call.has_result and result is not _UNSET:
                call.result, call.has_result = result, True
        return call

    def _candidate(self, span: ReadableSpan, attrs: Mapping[str, Any], name: str,
                   context: SpanContext, parent: SpanContext | None) -> ReadableSpan | None:
        """Handle a span that may be a tool call, model turn or handoff (``on_end``'s reads).

        ``context`` and ``parent``: the span's, as ``_ended`` read them (tuples: [0] trace_id,
        [1] span_id, without their properties' calls).
        """
        if is_model_turn(name, attrs):
            return self._model_turn(span, attrs, context, parent)
        if attrs.get("loopguard.blocked"):
            return None  # the guard blocked it: the tool never ran
        if self.adapters is DEFAULT_ADAPTERS and not may_be_event(name, attrs):
            return None  # an agent, chain or other span: no record to build
        event = to_event(span_record_from_readable(span), self.adapters)
        if event is None:
            return None
        if self._supplied and type(event) is ToolCall:
            event = self._with_supplied(event)
        return self._event_span(span, attrs, event, context[0])

    def _event_span(self, span: ReadableSpan, attrs: Mapping[str, Any],
                    event: ToolCall | Handoff, trace_id: int) -> ReadableSpan | None:
        """Run a tool call or handoff from the configured adapters through the engine."""
        run_id = self._runs.run_id(span, attrs, trace_id)
        entry, created = self.store.get_or_create(run_id)
        if created and self._multiprocess:
            self.metrics.refresh_open_runs()  # type: ignore[union-attr]  # checked
        if entry.state.notifying and entry.state.in_callback():
            return None  # ended inside this run's on_decision, which holds its lock
        decision, previous, template, first, wasted = self._decide(entry, event, attrs, span)
        if isinstance(event, ToolCall):
            if span.parent is None and run_id == event.trace_id:
                self._unparented()
            if self.metrics is not None:
                self.metrics.record_call(template, event.tool, first=first)
                if wasted is not None:
                    self.metrics.record_waste(template, wasted, hex_trace(span))
        return self._finding(span, decision, previous, template, run_id)

    def _unparented(self) -> None:
        """Report a tool span with no parent and no conversation id (logged once)."""
        if self.metrics is not None:
            self.metrics.record_unparented(self.config.run_key)
        if not self._warned_unparented:
            self._warned_unparented = True
            logger.warning("otel-loopguard: %s", LONE_TOOL_CALL_HINT)

    def _decide(self, entry: RunEntry, event: ToolCall | Handoff, attrs: Mapping[str, Any],
                span: ReadableSpan) -> tuple[Decision, Action, str | None, bool, Waste | None]:
        parent_id = span.parent.span_id if span.parent is not None else None
        with entry.state.lock:
            want_agent = event.agent is None if isinstance(event, ToolCall) \
                else not event.from_agent
            if entry.template is None or want_agent:
                template, agent = self._ancestry(attrs, parent_id, entry.template is None,
                                                 want_agent)
                self._learn_template(entry, template)
            if isinstance(event, ToolCall):
                if entry.unfed is not None and entry.state.waste.found:
                    self._feed(entry)
                turn = entry.model_turns if entry.seen_model else event.turn
                if self.live.models and self.live.in_open_model(parent_id, span.start_time or 0):
                    turn = entry.model_turns + 1  # the turn its open model span will end
                if want_agent or turn != event.turn:
                    event = event.in_context(event.agent or agent, turn)
                entry.tool_calls += 1
                decision = self.engine.process(entry.state, event)
            else:
                if want_agent and agent:
                    event = self._placed_handoff(span, event, agent)
                decision = self.engine.process_handoff(entry.state, event)
            previous = entry.note_loop(decision)
            waste = entry.state.waste
            wasted = waste.take() if waste.looping else None
            return decision, previous, entry.template, entry.tool_calls == 1, wasted

    def _placed_handoff(self, span: ReadableSpan, handoff: Handoff, agent: str) -> Handoff:
        """Return ``handoff`` placed as the assembly places it (``placed_event``).

        A handoff tool whose span names no agent hands off from ``agent``, its nearest open
        agent ancestor's; a handoff span keeps the source it names.
        """
        placed = placed_event(span_record_from_readable(span), self.adapters, agent, None)
        return placed if isinstance(placed, Handoff) else handoff

    def _ancestry(self, attrs: Mapping[str, Any], parent_id: int | None, want_template: bool,
                  want_agent: bool) -> tuple[str | None, str | None]:
        """Return the run's template and the call's agent, by the assembly's rules.

        The template from the span itself or its nearest open ancestor naming one
        (``template_in``); the agent from its nearest open agent ancestor (``nearest_agent``).
        One walk up the open spans serves both.
        """
        cfg = self.config
        template = template_in(attrs, cfg) if want_template else None
        want_template = want_template and template is None
        if not (want_template or want_agent):
            return template, None
        agent = None
        for ancestor in self.live.ancestors(parent_id):
            ancestor_attrs = raw_attributes(ancestor)
            if want_template:
                template = template_in(ancestor_attrs, cfg)
                want_template = template is None
            if want_agent:
                agent = agent_of(ancestor.name, ancestor_attrs)
                want_agent = agent is None
            if not (want_template or want_agent):
                break
        return template, agent
