"""Replay finished spans through the engine and report every run: ``otel-loopguard check``.

Spans are grouped by trace while they stream in; a trace is assembled when its root span has
been seen and ``grace_spans`` more spans have passed, when ``grace_spans`` spans have passed
without one of its own (its spans stopped arriving, root or not), or at the end of the input.
Memory is bounded by the open traces and runs (``max_runs``), not by the input size: a trace
stays open only while its spans keep arriving.
A span seen again within its trace (an exporter retry, overlapping dumps, a file passed twice)
is a copy: it is checked once, as ``serve`` does, and counted in ``duplicate_spans``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from otel_loopguard._findings import budget_part, loop_action
from otel_loopguard.adapters import DEFAULT_ADAPTERS
from otel_loopguard.assembly import AssembledTrace, TraceEvent, assemble_trace
from otel_loopguard.coding_agents._records import fill_copy, is_session_run
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.engine import LoopEngine, RunState
from otel_loopguard.replay._dedupe import SpanDeduplicator
from otel_loopguard.types import (
    Action,
    Decision,
    Handoff,
    ModelTurn,
    SpanAdapter,
    SpanRecord,
    ToolCall,
)
from otel_loopguard.waste import RunWaste, Waste

__all__ = ["Checker", "RunReport", "report_to_json"]

_CONTINUE = Action.CONTINUE
_DEFAULT_GRACE_SPANS = 10_000
_MAX_FINDINGS = 1000
_MAX_CLOSED_TRACES = 16_384
"""Trace ids of traces checked before the end of the input that a later span is looked up in
(``split_traces``); the oldest are forgotten."""


@dataclass(slots=True)
class RunReport:
    """What ``check`` found in one run (flagged or not)."""

    run_id: str
    trace_ids: list[str] = field(default_factory=list)
    prompt_template: str | None = None
    tool_calls: int = 0
    action: Action = Action.CONTINUE
    """The highest action of its loop findings (``continue``: no loop)."""
    budget: Action = Action.CONTINUE
    """The highest action of its budget findings (``continue``: within every budget); a run
    over budget is not a looping run (docs/detectors.md, "Budgets are not loops")."""
    findings: list[Decision] = field(default_factory=list)
    findings_dropped: int = 0
    service_name: str | None = None
    """The ``service.name`` resource attribute of the run's spans, when they carry one."""
    unparented_tool_calls: int = 0
    """Its tool calls with no parent span and no conversation id (each one a run of its own)."""
    waste: Waste = field(default_factory=Waste)
    """The tool calls it wasted continuing its loops after its first finding, and their cost
    (``otel_loopguard.waste``)."""

    @property
    def looping(self) -> bool:
        """Return True when a loop detector flagged the run (budget findings alone do not)."""
        return any(decision.loop for decision in self.findings)


@dataclass(slots=True)
class _OpenTrace:
    spans: list[SpanRecord] = field(default_factory=list)
    root_seen_at: int | None = None
    touched_at: int = 0
    split: bool = False
    """Spans of this trace were checked before (``Checker.split_traces``)."""


class Checker:
    """Feeds spans through the adapters and the engine, yielding a report per finished run.

    Not thread-safe: one checker per input stream.
    """

    def __init__(self, config: LoopGuardConfig | None = None, *,
                 adapters: Sequence[SpanAdapter] = DEFAULT_ADAPTERS,
                 engine: LoopEngine | None = None, grace_spans: int = _DEFAULT_GRACE_SPANS,
                 on_event: Callable[[RunReport, Decision, Any], object] | None = None,
                 clock: Callable[[], int] | None = None,
                 on_waste: Callable[[RunReport, Waste], object] | None = None) -> None:
        """Build a checker.

        ``on_event(report, decision, event)`` is called for every tool call, handoff and model
        turn, flagged or not, in run order (``serve`` feeds its metrics from it), and
        ``on_waste(report, waste)`` with what each of them added to the run's waste, when it
        added anything. With ``clock`` (monotonic nanoseconds), the checker remembers when each
        open run was last fed, for ``expire``.
        """
        self.config = config or LoopGuardConfig()
        self.engine = engine or LoopEngine(self.config)
        self.adapters = adapters
        self.grace_spans = grace_spans
        self.on_event = on_event
        self.on_waste = on_waste
        self._traces: OrderedDict[str, _OpenTrace] = OrderedDict()
        self._runs: OrderedDict[str, tuple[RunState, RunReport]] = OrderedDict()
        self._seen = 0
        self._clock = clock
        self._touched: dict[str, int] = {}
        """Run id → when it was last fed (``clock`` time), for ``expire``."""
        self._run_turns: dict[str, int] = {}
        """Run id → the model turns checked so far of a run that outlives a trace (a
        conversation's, a coding agent's session): the turns of its next trace or piece are
        numbered on from there, as the processor numbers them, so that a call made before its
        trace's first model span is the run's latest turn's (the turn that issued it, for its
        waste), and turns stay consecutive across traces (``batch``, ``idle_turns``)."""
        self._dedupe = SpanDeduplicator()
        self._is_new = self._dedupe.is_new
        self._last: tuple[str, _OpenTrace | None] = ("", None)
        """The trace of the span taken last (at the end of ``_traces``) and its id: a trace's
        spans mostly come together, and the next one needs no reordering."""
        self._due_at = 0
        """While no trace is added or reordered, ``_due`` is False until ``_seen`` reaches this
        (0: ask ``_due``)."""
        self._closed: dict[str, bool] = {}
        """Ids of the traces checked before the end of the input, latest last (bounded), and
        whether each was already in pieces."""
        self.split_traces = 0
        """Traces of which spans came after the trace was checked (released as idle, or as the
        oldest of more than ``max_runs``): each later piece is checked as a run of its own."""

    @property
    def open_runs(self) -> int:
        """Return how many runs stay open between traces (conversation runs)."""
        return len(self._runs)

    def feed_trace(self, trace_id: str, spans: list[SpanRecord]) -> Iterator[RunReport]:
        """Assemble one whole trace and run it; yield the runs it closes (``serve``)."""
        return self._finish_trace(trace_id, _OpenTrace(spans=spans))

    def expire(self, idle_since_ns: int) -> Iterator[RunReport]:
        """Close the open (conversation) runs last fed before ``idle_since_ns``.

        Needs ``clock``; runs are kept in the order they were last fed.
        """
        runs = self._runs
        while runs:
            run_id = next(iter(runs))
            if self._touched.get(run_id, idle_since_ns) > idle_since_ns:
                return
            yield self._close_run(run_id)

    def _close_run(self, run_id: str) -> RunReport:
        _, report = self._runs.pop(run_id)
        self._touched.pop(run_id, None)
        self._run_turns.pop(run_id, None)
        return report

    @property
    def duplicate_spans(self) -> int:
        """Return how many spans were dropped as copies of a span already taken."""
        return self._dedupe.duplicates

    def run(self, spans: Iterable[SpanRecord]) -> Iterator[RunReport]:
        """Yield the report of every run in ``spans`` (flagged or not), then flush.

        ``add`` without its generator per span: a trace is due only now and then, and while
        the spans of one trace follow each other, not before ``_due_at``.
        """
        if isinstance(spans, str | bytes):
            raise TypeError("Checker.run takes span records, e.g. iter_spans(path), not a path")
        take, due = self._take, self._due
        for span in spans:
            if take(span) and self._seen >= self._due_at and due():
                yield from self._close_due()
        yield from self.flush()

    def add(self, span: SpanRecord) -> Iterator[RunReport]:
        """Take one span (unless it is a copy); yield reports of runs that this span lets close."""
        if self._take(span):
            yield from self._close_due()

    def flush(self) -> Iterator[RunReport]:
        """Close every open trace and run (end of input)."""
        while self._traces:
            yield from self._finish_trace(*self._pop_oldest())
        while self._runs:
            yield self._close_run(next(iter(self._runs)))

    def _take(self, span: SpanRecord) -> bool:
        """Buffer ``span`` in its trace; return False (and drop it) when it is a copy."""
        trace_id = span.trace_id
        if not self._is_new(trace_id, span.span_id):
            if is_session_run(trace_id):  # a coding agent's call sent both ways: complete it
                self._fill_copy(trace_id, span)
            return False
        seen = self._seen = self._seen + 1
        last_id, trace = self._last
        if trace_id != last_id or trace is None:
            trace = self._traces.get(trace_id)
            if trace is None:
                trace = self._traces[trace_id] = _OpenTrace()
                if self._closed and trace_id in self._closed:  # it goes on: a piece more
                    self.split_traces += not self._closed.pop(trace_id)
                    trace.split = True
            else:
                self._traces.move_to_end(trace_id)
            self._last = (trace_id, trace)
            self._due_at = 0  # a trace more, or another one last: maybe another one oldest
        trace.spans.append(span)
        trace.touched_at = seen
        if span.parent_span_id is None:
            trace.root_seen_at = seen
        return True

    def _fill_copy(self, trace_id: str, copy: SpanRecord) -> None:
        """Complete the buffered record of ``copy``'s call with what ``copy`` carries."""
        trace = self._traces.get(trace_id)
        for kept in reversed(trace.spans) if trace is not None else ():
            if kept.span_id == copy.span_id:
                fill_copy(kept, copy)
                return

    def _due(self) -> bool:
        """Return whether the least recently touched trace is to close now.

        It is when ``grace_spans`` spans have passed since its last span or its root, or when
        more than ``max_runs`` traces are open. When it is not idle, none is. When it is not
        due, ``_due_at`` is set to when it will be if no other trace is touched meanwhile.
        """
        traces = self._traces
        if not traces:
            return False
        if len(traces) > self.config.max_runs:
            return True
        trace = next(iter(traces.values()))
        due_at = trace.touched_at + self.grace_spans
        if trace.root_seen_at is not None:
            due_at = min(due_at, trace.root_seen_at + self.grace_spans)
        self._due_at = due_at
        return self._seen >= due_at

    def _close_due(self) -> Iterator[RunReport]:
        while self._due():
            yield from self._finish_trace(*self._pop_oldest(), early=True)

    def _pop_oldest(self) -> tuple[str, _OpenTrace]:
        """Take the least recently touched trace out of the open ones."""
        self._last, self._due_at = ("", None), 0
        return self._traces.popitem(last=False)

    def _finish_trace(self, trace_id: str, trace: _OpenTrace, *,
                      early: bool = False) -> Iterator[RunReport]:
        """Check a trace and yield the runs it closes; ``early``: before the end of the input."""
        assembled = assemble_trace(trace_id, trace.spans, self.config, self.adapters,
                                   model_turns=True,
                                   tool_requests=self.engine.idle is not None)
        key = self.config.run_key
        # A coding agent's session comes in pieces (serve checks what arrived in each reorder
        # window): its run stays open across them, as a conversation's does across traces.
        session = is_session_run(trace_id)
        conversation = assembled.conversation if key == "conversation" else None
        if early and not session and not conversation:  # its run closes: a later piece is apart
            closed = self._closed
            closed[trace_id] = trace.split
            if len(closed) > _MAX_CLOSED_TRACES:
                del closed[next(iter(closed))]
        if key == "agent" and not session:
            yield from self._per_agent(assembled)
            return
        run_id = conversation or trace_id
        state, report = self._run(run_id)
        items = assembled.events
        if session or conversation:
            before = self._run_turns.get(run_id, 0)
            if before or session:
                items = _turns_of_run(items, before)
            self._run_turns[run_id] = before + sum(
                isinstance(item.event, ModelTurn) for item in items)
        self._feed(state, report, assembled, items)
        if not conversation and not session:
            finished = self._close_run(run_id)
            if items:  # a trace with no tool call, model turn or handoff is no agent's run
                yield finished  # (a service's own spans; a coding agent's, filed by session)
            return
        while len(self._runs) > self.config.max_runs:
            yield self._close_run(next(iter(self._runs)))

    def _per_agent(self, assembled: AssembledTrace) -> Iterator[RunReport]:
        groups: dict[str, list[Any]] = {}
        for item in assembled.events:
            if isinstance(item.event, Handoff) and not item.event.explicit:
                continue  # a sibling's start crosses invocations: no run of its own sees it
            groups.setdefault(item.agent_span_id or "", []).append(item)
        for owner, items in groups.items():
            run_id = f"{assembled.trace_id}/{owner}" if owner else assembled.trace_id
            state, report = self._run(run_id)
            self._feed(state, report, assembled, _turns_of_run(items))
            yield self._close_run(run_id)

    def _run(self, run_id: str) -> tuple[RunState, RunReport]:
        if self._clock is not None:
            self._touched[run_id] = self._clock()
        entry = self._runs.get(run_id)
        if entry is None:
            entry = self._runs[run_id] = (self.engine.new_run(), RunReport(run_id=run_id))
        else:
            self._runs.move_to_end(run_id)
        return entry

    def _feed(self, state: RunState, report: RunReport, assembled: AssembledTrace,
              items: Sequence[Any]) -> None:
        if assembled.trace_id not in report.trace_ids:
            report.trace_ids.append(assembled.trace_id)
        report.prompt_template = report.prompt_template or assembled.prompt_template
        report.service_name = report.service_name or assembled.service_name
        report.unparented_tool_calls += assembled.unparented_tool_calls
        engine, on_event = self.engine, self.on_event
        if report.prompt_template:
            engine.set_template(state, report.prompt_template)
        process, process_turn = engine.process, engine.process_model_turn
        for item in items:
            event = item.event
            turn = False
            if isinstance(event, ToolCall):
                decision = process(state, event)
                report.tool_calls += 1
            elif isinstance(event, ModelTurn):
                decision = process_turn(state, event)
                turn = True
            elif event.explicit or engine.counts_inferred_handoff(state):
                decision = engine.process_handoff(state, event)
            else:
                continue
            if decision.action > _CONTINUE:  # ``Decision.flagged``, without its frame
                self._record(report, decision)
            if on_event is not None:
                on_event(report, decision, event)
            waste = state.waste  # read afresh: ``LoopEngine.reset`` replaces it
            if turn or waste.looping:
                self._take_waste(report, waste)

    def _take_waste(self, report: RunReport, waste: RunWaste) -> None:
        """Put what the last event added to the run's ``waste`` into ``report`` and ``on_waste``."""
        wasted = waste.take()
        if wasted is not None:
            report.waste = waste.total()
            if self.on_waste is not None:
                self.on_waste(report, wasted)

    @staticmethod
    def _record(report: RunReport, decision: Decision) -> None:
        report.action = max(report.action, loop_action(decision))
        found = budget_part(decision)
        if found is not None:
            report.budget = max(report.budget, found.action)
        if len(report.findings) < _MAX_FINDINGS:
            report.findings.append(decision)
        else:
            report.findings_dropped += 1


def _turns_of_run(items: list[TraceEvent], start: int = 0) -> list[TraceEvent]:
    """Number one agent invocation's model turns from ``start + 1``, as the processor does.

    Each call gets the run's latest turn (none before its first), or the next one when its model
    span was still open (``TraceEvent.turn_open``). The assembly numbers a trace's
    turns; with ``run_key = "agent"`` a trace holds several runs, and a call's turn is its own
    agent's latest model call, not another agent's.
    """
    turns = start
    out: list[TraceEvent] = []
    for item in items:
        event = item.event
        if isinstance(event, ModelTurn):
            turns += 1
            event = replace(event, index=turns)
        elif isinstance(event, ToolCall):
            event = event.in_context(event.agent, turns + item.turn_open or None)
        out.append(TraceEvent(event, item.agent_span_id, item.turn_open))
    return out


def report_to_json(report: RunReport) -> dict[str, Any]:
    """Return the JSON shape of one run in ``check --format json``."""
    return {
        "run_id": report.run_id,
        "trace_ids": report.trace_ids,
        "prompt_template": report.prompt_template,
        "tool_calls": report.tool_calls,
        "action": report.action.label,
        "budget": report.budget.label,
        "waste": report.waste.to_json(),
        "findings": [{
            "detector": d.detector, "code": d.code, "action": d.action.label, "tool": d.tool,
            "call_index": d.call_index, "span_id": d.span_id, "hint": d.hint,
            "escalated": d.escalated,
            "evidence": {e.detector: {"code": e.code, "action": e.action.label,
                                      "count": e.count, **e.details} for e in d.evidence},
        } for d in report.findings],
        **({"findings_dropped": report.findings_dropped} if report.findings_dropped else {}),
    }
