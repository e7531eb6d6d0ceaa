"""How the processor infers handoffs from agent spans as they start, and where the evidence goes."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Final

from opentelemetry.sdk.trace import Span

from otel_loopguard.adapters import (
    MAX_KEPT_NAME_CHARS,
    agent_of,
    may_name_agent,
    may_name_model,
)
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.engine import LoopEngine
from otel_loopguard.evidence import evidence_attributes
from otel_loopguard.otlp._sdk import raw_attributes
from otel_loopguard.processor._report import FindingReports
from otel_loopguard.processor._runs import SpanRuns
from otel_loopguard.processor._worker import SpanWorker
from otel_loopguard.state import InMemoryRunStateStore

__all__ = ["AgentStarts"]

_INVOKE_AGENT: Final = "invoke_agent "
"""GenAI agent span name prefix: ``invoke_agent <agent>``."""
_MAX_SPAN_NAMES: Final = 4096
_MAX_ENDED_AGENTS: Final = 1024
"""Evidence kept for ended agent spans whose end the worker has still to hand on."""


class AgentStarts(FindingReports):
    """``LoopGuardSpanProcessor``'s agent span starts: a sibling agent span may imply a handoff.

    A mixin: the attributes it declares are the processor's.
    """

    config: LoopGuardConfig
    engine: LoopEngine
    store: InMemoryRunStateStore
    _runs: SpanRuns
    _worker: SpanWorker | None
    _other_names: set[str]
    """Span names that do not name an agent span (bounded; races only repeat work)."""
    _deferred: dict[int, Any]
    _ended_agents: dict[int, dict[str, Any]]
    """Evidence for agent spans that ended before the worker took their start: their end is
    queued behind it, and the copy handed on carries it (the worker's alone)."""

    if TYPE_CHECKING:  # DeferredTurns'
        def _release_kept(self, trace_id: int) -> None: ...

    def _maybe_agent_started(self, span: Span, name: str) -> None:
        """Infer handoffs from an agent span's start; remember names of other spans.

        Agent spans by name alone (``may_name_agent``) are the only ones whose siblings imply
        handoffs, here and in ``check``. A ``generate_content`` span (``may_name_model``) is
        noted at every start (``LiveSpans.model_started``): Google ADK's ends after the tool
        calls it requested.
        """
        if not may_name_agent(name):
            if may_name_model(name):
                self.live.model_started(span)
            elif len(self._other_names) < _MAX_SPAN_NAMES and len(name) <= MAX_KEPT_NAME_CHARS:
                self._other_names.add(name)
            return
        if span.parent is not None:
            # a sibling agent span may imply a handoff (a root one has no siblings);
            # in order with the ended spans, so the handoff falls between their calls
            worker = self._worker
            if self._deferred:
                self._release_kept(span.context.trace_id)  # model spans kept aside go first
            if worker is None or not worker.submit((span,)):
                self._agent_started(span)

    def _agent_started(self, span: Span) -> None:
        """Infer a handoff when a sibling agent span with another name starts.

        The handoff belongs to the run of the agent span's parent, as ``check`` places it: the
        trace's or the conversation's (none with ``run_key = "agent"``).
        """
        attrs = raw_attributes(span)
        name = agent_of(span.name, attrs)
        if name is None and span.name.startswith(_INVOKE_AGENT):
            # Google ADK sets the attributes (operation, agent name) after starting the span:
            # its name names the agent, as gen_ai.agent.name will when check reads it.
            name = span.name.removeprefix(_INVOKE_AGENT).strip() or None
        if name is None or span.parent is None or self.config.run_key == "agent":
            # a run per agent invocation: control passing between invocations crosses runs,
            # whose work (the progress that tells delegation from ping-pong) it cannot see
            return
        run_id = self._runs.run_id(span, attrs, span.context.trace_id)
        entry, _ = self.store.get_or_create(run_id)
        if entry.state.notifying and entry.state.in_callback():
            return  # started inside this run's on_decision, which holds its lock
        with entry.state.lock:
            handoff = entry.siblings.started(format(span.parent.span_id, "016x"), name,
                                             format(span.context.span_id, "016x"),
                                             span.start_time or 0, weakref.ref(span))
            if handoff is None or not self.engine.counts_inferred_handoff(entry.state):
                return
            decision = self.engine.process_handoff(entry.state, handoff)
            old = entry.note_loop(decision)
        if decision.flagged:
            label = self._count(entry.template, decision, old, span)
            evidence = evidence_attributes(decision, run_id, self._mode, label)
            if self._span_evidence:
                self._evidence_on_agent(span, evidence)
            self._emit(decision, evidence, span.context, span.start_time)

    def _evidence_on_agent(self, span: Span, evidence: dict[str, Any]) -> None:
        """Put a handoff's evidence on the agent span whose start implied it.

        On the worker, the span may have ended since it started (or end while this runs): its
        end is then queued behind its start, and ``_ended`` adds the evidence to the copy it
        hands on, since an ended SDK span takes no attributes.
        """
        if span.end_time is None:
            span.set_attributes(evidence)
            if span.attributes is not None and \
                    span.attributes.get("loopguard.call_index") == evidence["loopguard.call_index"]:
                return
        if self._worker is not None:
            self._ended_agents[span.context.span_id] = evidence
            while len(self._ended_agents) > _MAX_ENDED_AGENTS:
                del self._ended_agents[next(iter(self._ended_agents))]
