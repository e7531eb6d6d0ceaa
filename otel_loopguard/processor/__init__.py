"""``LoopGuardSpanProcessor``: watch tool-call spans live and annotate them with loop evidence.

Install it with one line::

    provider.add_span_processor(
        LoopGuardSpanProcessor(downstream=BatchSpanProcessor(OTLPSpanExporter())))

With ``downstream=`` the flagged tool span reaches the exporter carrying ``loopguard.*``
attributes (SDK spans are immutable once ended, so loopguard hands the downstream processor a
copy). Without it, each finding is added as a ``loopguard.loop_detected`` event on the run's
still-open agent span. With ``evidence = "logs"`` (or ``"both"``) each finding is also, or
instead, a ``loopguard.loop_detected`` log event through the OpenTelemetry Logs API.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence, Sized
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.trace import SpanContext
from prometheus_client import REGISTRY

from otel_loopguard.adapters import (
    DEFAULT_ADAPTERS,
    agent_of,
    is_candidate,
    is_model_turn,
    may_be_event,
    may_name_agent,
    template_key_roots,
    to_event,
    usage_of,
)
from otel_loopguard.adapters._turns import NO_TURN, turn_of
from otel_loopguard.adapters._usage import TokenUsage
from otel_loopguard.assembly import LONE_TOOL_CALL_HINT, template_in
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.engine import LoopEngine
from otel_loopguard.evidence import EVENT_NAME, EvidenceLog, evidence_attributes
from otel_loopguard.exceptions import InternalErrorGuard, LoopGuardError
from otel_loopguard.metrics import LoopGuardMetrics, uncapped_label
from otel_loopguard.metrics._otel import backends
from otel_loopguard.otlp._sdk import raw_attributes, span_record_from_readable
from otel_loopguard.processor._live import LiveSpans
from otel_loopguard.processor._worker import SpanWorker
from otel_loopguard.state import InMemoryRunStateStore, RunEntry, after_fork_in_child
from otel_loopguard.types import Action, Decision, Handoff, ModelTurn, SpanAdapter, ToolCall
from otel_loopguard.waste import Waste

__all__ = ["LoopGuardSpanProcessor", "evidence_attributes", "install"]

logger = logging.getLogger(__name__)

_DEFAULT: Final = DEFAULT_ADAPTERS
_MAX_SPAN_NAMES: Final = 4096
_MAX_ENDED_AGENTS: Final = 1024
"""Evidence kept for ended agent spans whose end the worker has still to hand on."""
_NO_USAGE: Final[TokenUsage] = (0, 0, ())
_DEFAULT_MAX_QUEUE_SIZE: Final = 16_384
_SHUTDOWN_SECONDS: Final = 30.0
_NO_OP_STARTS: Final = frozenset({SpanProcessor.on_start, BatchSpanProcessor.on_start,
                                  SimpleSpanProcessor.on_start})
"""``on_start`` methods that do nothing: the processor does not call them on every span."""


class LoopGuardSpanProcessor(SpanProcessor):
    """Runs the loop detectors on tool-call spans as they end, inside the agent's process.

    Thread-safe: hooks run concurrently on the application's threads; per-run state is guarded
    by a per-run lock, the run store by one short lock. ``on_start`` and ``on_end`` never block
    on I/O and never raise into the application (internal errors are logged once per kind and
    counted in ``loopguard_internal_errors_total``), unless ``raise_internal_errors`` is set.

    Args:
        config: settings; default ``LoopGuardConfig.load()`` (``LOOPGUARD_*`` variables and
            ``LOOPGUARD_CONFIG_FILE``).
        downstream: the export processor to wrap (e.g. a ``BatchSpanProcessor``); flagged spans
            reach it with ``loopguard.*`` attributes. Default None: evidence goes on the open
            agent span as a ``loopguard.loop_detected`` event.
        metrics: a ``LoopGuardMetrics``; default one on ``registry``.
        registry: Prometheus registry for the default metrics; default the global REGISTRY.
            Pass None to disable metrics.
        engine: a ``LoopEngine``; default one built from ``config``.
        adapters: span adapters, in order; default GenAI, OpenInference, OpenLLMetry, Logfire.
        on_decision: called with every decision above continue; errors in it are contained.
            It runs on the thread that checks the span: the worker thread in the background
            mode, else the thread that ends the span (enforce mode: the tool's thread).
        clock: monotonic nanoseconds, for run TTLs; default ``time.monotonic_ns``.
        raise_internal_errors: let internal errors propagate (for tests). Default False.
        background: check spans on a worker thread instead of inside ``span.end()``. Default
            None: on in observe mode with a ``downstream`` (``on_end`` only queues the span;
            the worker checks spans in order and hands each to ``downstream``), off otherwise:
            enforce mode decides before the next call, so it checks every span as it ends;
            without ``downstream`` the evidence must reach the agent span before it ends; and a
            ``SimpleSpanProcessor`` downstream exports each span before ``span.end()``
            returns, which its users (tests reading an in-memory exporter) rely on.
        max_queue_size: ended spans waiting for the worker (16,384). When the queue is full a
            span goes to ``downstream`` unchecked, counted in
            ``loopguard_skipped_spans_total{reason="queue_full"}``.
        meter_provider: the OpenTelemetry ``MeterProvider`` of the default metrics when
            ``metrics_exporter`` is ``otlp`` or ``both``; default the global one, else one
            built for OTLP export from the ``OTEL_EXPORTER_OTLP_*`` variables.
        logger_provider: the OpenTelemetry ``LoggerProvider`` of the log events when
            ``evidence`` is ``logs`` or ``both``; default the global one.
    """

    def __init__(self, config: LoopGuardConfig | None = None, *,
                 downstream: SpanProcessor | None = None,
                 metrics: LoopGuardMetrics | None = None, registry: Any = "default",
                 engine: LoopEngine | None = None,
                 adapters: Sequence[SpanAdapter] = DEFAULT_ADAPTERS,
                 on_decision: Callable[[Decision], object] | None = None,
                 clock: Callable[[], int] = time.monotonic_ns,
                 raise_internal_errors: bool = False, background: bool | None = None,
                 max_queue_size: int = _DEFAULT_MAX_QUEUE_SIZE, meter_provider: Any = None,
                 logger_provider: Any = None) -> None:
        """Build the processor (see the class docstring for each argument)."""
        self.config = config or LoopGuardConfig.load()
        self.downstream = downstream
        self._downstream_start = None if downstream is None or (
            type(downstream).on_start in _NO_OP_STARTS) else downstream.on_start
        """``downstream.on_start``, or None when it is one of the SDK's empty ones."""
        self._downstream_end = None if downstream is None else downstream.on_end
        self.engine = engine or LoopEngine(self.config, on_decision=on_decision)
        self.metrics = metrics if metrics is not None else self._default_metrics(
            registry, meter_provider)
        self._lazy_usage = self.config.run_key != "conversation"
        """Keep a run's latest model turn's attributes for its usage (``_model_turn``): not for
        a conversation's run, which outlives its traces (up to the run TTL) and would keep
        them, prompts and all, that long."""
        self._template_roots = template_key_roots(self.config.prompt_name_keys)
        """Keys of which a span names a template only if it has one (``template_in``)."""
        self.adapters = tuple(adapters)
        if self.adapters == DEFAULT_ADAPTERS:
            self.adapters = _DEFAULT
        self.guard = InternalErrorGuard(
            self.metrics.record_internal_error if self.metrics else None,
            raise_errors=raise_internal_errors)
        self.store = InMemoryRunStateStore(
            self.engine.new_run, max_runs=self.config.max_runs,
            ttl_seconds=self.config.run_ttl_seconds, clock=clock, on_evict=self._evicted)
        if self.metrics is not None:
            self.metrics.track_open_runs(self.store.__len__)
        self.live = LiveSpans(max_age_seconds=self.config.run_ttl_seconds)
        self._open = self.live.spans  # on_end pops from the table directly: it runs per span
        self._traces: OrderedDict[int, _TraceRuns] = OrderedDict()
        """The traces with a run open, so a root's end finds its own runs (at most max_runs)."""
        self._trace_lock = threading.Lock()
        after_fork_in_child(self._forget_traces)
        self._mode = self.config.mode
        self._span_evidence = self.config.evidence != "logs"
        self._log = EvidenceLog(logger_provider) if self.config.evidence != "spans" else None
        self._multiprocess = self.metrics is not None and self.metrics.multiprocess
        self._ended_agents: dict[int, dict[str, Any]] = {}
        """Evidence for agent spans that ended before the worker took their start: their end is
        queued behind it, and the copy handed on carries it (the worker's alone)."""
        self._other_names: set[str] = set()
        """Span names that do not name an agent span (bounded; races only repeat work)."""
        self._warned_unparented = False
        if background is None:
            # A SimpleSpanProcessor promises the span is exported when span.end() returns
            # (tests read an InMemorySpanExporter right after a run): keep that promise.
            background = self._mode == "observe" and downstream is not None \
                and not isinstance(downstream, SimpleSpanProcessor)
        elif background and downstream is None:
            raise ValueError("background=True needs a downstream processor: without one, "
                             "evidence goes on the open agent span, which must not end first")
        self._worker = SpanWorker(self._handle, max_queue_size=max_queue_size) \
            if background else None
        self._pending: Sized = self._worker.queue if self._worker is not None else ()
        """What the worker has still to handle (never anything without a worker)."""

    def _default_metrics(self, registry: Any, meter_provider: Any) -> LoopGuardMetrics | None:
        if registry is None:
            return None
        registry, meter_provider = backends(self.config.metrics_exporter,
                                            REGISTRY if registry == "default" else registry,
                                            meter_provider)
        return LoopGuardMetrics.shared(registry, meter_provider=meter_provider,
                                       max_prompt_templates=self.config.max_prompt_templates,
                                       max_tools=self.config.max_tools)

    # --- SpanProcessor hooks ---------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Remember the open span (agent lookup, evidence events); infer sibling handoffs."""
        try:
            try:  # the SDK span's own fields: its properties cost a call each, on every span;
                # SpanContext is a tuple: [1] is span_id without the property's call
                span_id, name = span._context[1], span._name  # type: ignore[index]
            except AttributeError:
                span_id, name = span.context.span_id, span.name
            spans = self._open  # the open-span table's one writer (see LiveSpans)
            spans[span_id] = span
            if len(spans) > self.live.limit:
                self.live.bound()
            if name not in self._other_names:  # one lookup: span names repeat
                self._maybe_agent_started(span, name)
        except Exception as exc:
            self.guard.handle("on_start", exc)
        if self._downstream_start is not None:
            self._downstream_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        """Finish a span no adapter reads; queue any other for the worker, or check it here."""
        # A span no adapter reads is finished here, unless a queued span may still need it (as
        # its ancestor, or as the root that releases its run): it costs no thread switch.
        if not self._pending:
            try:  # the SDK span's own fields, as in ``_ended``
                parent, span_id = span._parent, span._context[1]  # type: ignore[index]
                read = is_candidate(span._name,
                                    span._attributes._dict)  # type: ignore[union-attr]
            except Exception:  # not an SDK span: the general path reads its properties
                read = True
            if not read:  # no tool, model or handoff markers: it only leaves the open spans
                self._open.pop(span_id, None)
                if parent is None or parent[2]:  # a root: its end releases its run, if any
                    self._release(span._context[0])  # type: ignore[index]
                if self._downstream_end is not None:
                    self._downstream_end(span)
                return
        worker = self._worker
        if worker is None:
            self._ended(span)
        elif not worker.submit(span):
            self._pass_on(span)

    def _pass_on(self, span: ReadableSpan) -> None:
        """Hand ``span`` on unchecked: the worker's queue is full (counted as skipped).

        Checking it here instead would put detection back on the agent's thread when the worker
        is already behind, and count its call before the calls still queued.
        """
        try:
            self._open.pop(span.context.span_id, None)
            if self.metrics is not None:
                self.metrics.record_skipped("queue_full")
        except Exception as exc:
            self.guard.handle("on_end", exc)
        if self._downstream_end is not None:
            self._downstream_end(span)

    def shutdown(self) -> None:
        """Check what is queued, then shut the downstream processor down."""
        if self._worker is not None and not self._worker.shutdown(_SHUTDOWN_SECONDS):
            logger.warning("otel-loopguard: %d spans were still queued at shutdown",
                           len(self._worker))
        if self.downstream is not None:
            self.downstream.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Check every queued span and hand it on, then flush the downstream processor."""
        deadline = time.monotonic() + timeout_millis / 1000
        flushed = self._worker.flush(timeout_millis / 1000) if self._worker else True
        if self.downstream is None:
            return flushed
        left = max(0, int((deadline - time.monotonic()) * 1000))
        return self.downstream.force_flush(left) and flushed

    def release_run(self, run_id: str) -> None:
        """Drop the state of a finished run that has no root span (whose end would drop it).

        In the background mode after the spans queued before this call are checked, so a
        run's last call, still queued, does not start the run anew.
        """
        worker = self._worker
        if worker is None or worker.caught_up() or not worker.submit(_Release(run_id)):
            self.store.release(run_id)

    def _handle(self, item: Any) -> None:
        """Handle one queued item on the worker thread: a span, an agent start, a release."""
        if type(item) is tuple:
            try:
                self._agent_started(item[0])
            except Exception as exc:
                self.guard.handle("on_start", exc)
        elif type(item) is _Release:
            self.store.release(item.run_id)
        else:
            self._ended(item)

    def _ended(self, span: ReadableSpan) -> None:
        """Run the detectors on a finished tool span and pass the span on."""
        out = span
        try:
            try:  # as in on_start; ``raw_attributes`` unrolled
                context, parent, name = span._context, span._parent, span._name
                attrs: Any = span._attributes._dict  # type: ignore[union-attr]
            except AttributeError:
                context, parent, name, attrs = span.context, span.parent, span.name, None
            if type(attrs) is not dict:
                attrs = raw_attributes(span)
            if context is not None:  # tuple indexes: [0] trace_id, [1] span_id, [2] is_remote
                self._open.pop(context[1], None)
                if is_candidate(name, attrs):
                    out = self._candidate(span, attrs, name, context, parent) or span
                if self._ended_agents and context[1] in self._ended_agents:
                    out = _with_evidence(out, self._ended_agents.pop(context[1]))
                if parent is None or parent[2]:
                    self._release(context[0])
        except Exception as exc:
            self.guard.handle("on_end", exc)
        if self.downstream is not None:
            self.downstream.on_end(out)

    # --- internals -------------------------------------------------------------------------
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
        if self.adapters is _DEFAULT and not may_be_event(name, attrs):
            return None  # an agent, chain or other span: no record to build
        event = to_event(span_record_from_readable(span), self.adapters)
        return None if event is None else self._event_span(span, attrs, event, context[0])

    def _event_span(self, span: ReadableSpan, attrs: Mapping[str, Any],
                    event: ToolCall | Handoff, trace_id: int) -> ReadableSpan | None:
        """Run a tool call or handoff from the configured adapters through the engine."""
        run_id = self._run_id(span, attrs, trace_id)
        entry, created = self.store.get_or_create(run_id)
        if created and self._multiprocess:
            self.metrics.set_open_runs(len(self.store))  # type: ignore[union-attr]  # checked
        if entry.state.notifying and entry.state.in_callback():
            return None  # ended inside this run's on_decision, which holds its lock
        decision, previous, template, first, wasted = self._decide(entry, event, attrs, span)
        if isinstance(event, ToolCall):
            if span.parent is None and run_id == event.trace_id:
                self._unparented()
            if self.metrics is not None:
                self.metrics.record_call(template, event.tool, first=first)
                if wasted is not None:
                    self.metrics.record_waste(template, wasted, _hex_trace(span))
        return self._finding(span, decision, previous, template, run_id)

    def _unparented(self) -> None:
        """Report a tool span with no parent and no conversation id (logged once)."""
        if self.metrics is not None:
            self.metrics.record_unparented(self.config.run_key)
        if not self._warned_unparented:
            self._warned_unparented = True
            logger.warning("otel-loopguard: %s", LONE_TOOL_CALL_HINT)

    def _model_turn(self, span: ReadableSpan, attrs: Mapping[str, Any], context: SpanContext,
                    parent: SpanContext | None) -> ReadableSpan | None:
        """Count a model turn of the span's run (the turns make batches) and judge it.

        A model span often carries the prompt template (``gen_ai.prompt.name``, Langfuse's and
        Traceloop's keys) that the tool spans after it lack; it becomes the run's template.
        Only what the run needs is read: with the ``idle_turns`` detector on, the turn's agent
        invocation, tool request and content (one set test when it has none; a blank turn,
        without content or a request for tools, only restarts the idle streak: the engine's
        ``process_blank_turn`` builds neither the turn nor a decision); its usage
        (tokens, models) only once the run's waste counts (``_feed``), which in most runs never
        happens: until then the run keeps a reference to the latest turn's attributes, which
        its trace's end releases (a conversation's run, which outlives its traces, reads the
        usage of every turn instead).
        """
        run_id = self._run_id(span, attrs, context[0])
        entry, _ = self.store.get_or_create(run_id)
        state = entry.state
        if state.notifying and state.in_callback():
            return None  # ended inside this run's on_decision, which holds its lock
        idle = self.engine.idle
        agent_span = None
        requested, last_input, output, from_user = NO_TURN
        if idle is not None:  # idle_turns: the turn, with its agent invocation
            agent_span = self.live.agent_span_id(parent[1] if parent is not None else None)
            requested, last_input, output, from_user = turn_of(attrs)
        with state.lock:
            index = entry.model_turns = entry.model_turns + 1
            entry.seen_model = True
            if entry.template is None and not self._template_roots.isdisjoint(attrs):
                self._learn_template(entry, template_in(attrs, self.config))
            waste = state.waste
            if self._lazy_usage and not waste.found:  # usage counts after a loop finding
                entry.unfed = (waste, index, attrs)
                if idle is None:
                    return None
                if requested is not True and not last_input and not output:
                    self.engine.process_blank_turn(state, context[1], span.start_time or 0,
                                                   span.end_time or 0, agent_span)
                    return None
                usage: TokenUsage = _NO_USAGE
                numbered = None
            else:
                entry.unfed = None
                usage, numbered = usage_of(attrs), index
            turn = ModelTurn(format(context[1], "016x"), span.start_time or 0,
                             span.end_time or 0, requested, agent_span, numbered, *usage,
                             last_input, output, from_user)
            decision = self.engine.process_model_turn(state, turn)
            if not decision.flagged and numbered is None:
                return None  # nothing to count: no finding, and the waste took no usage
            previous = entry.note_loop(decision)
            template = entry.template
            wasted = waste.take()
        if wasted is not None and self.metrics is not None:
            self.metrics.record_waste(template, wasted, _hex_trace(span))
        return self._finding(span, decision, previous, template, run_id)

    def _feed(self, entry: RunEntry) -> None:
        """Give the run's waste the usage of its latest model turn, once it counts (hold the lock).

        After the run's first loop finding a wasted call adds the tokens of the turn that
        issued it, the latest one: ``_model_turn`` left its attributes in ``entry.unfed``. The
        same ``RunWaste.turn`` the engine calls for a numbered turn, later, with the same
        figures: only for the waste it was left for (``LoopEngine.reset`` makes a new one).
        """
        waste, index, attrs = entry.unfed  # type: ignore[misc]  # the caller checked it
        entry.unfed = None
        if waste is entry.state.waste:
            tokens_in, tokens_out, models = usage_of(attrs)
            config = self.engine.config
            waste.turn(index, tokens_in, tokens_out,
                       config.price(models) if config.prices else None)

    def _learn_template(self, entry: RunEntry, template: str | None) -> None:
        """Make ``template`` the run's (hold its lock): labels, and the template's budgets."""
        if template is not None and entry.template is None:
            entry.template = template
            self.engine.set_template(entry.state, template)

    def _finding(self, span: ReadableSpan, decision: Decision, previous: Action,
                 template: str | None, run_id: str) -> ReadableSpan | None:
        if not decision.flagged:
            return None
        label = self._count(template, decision, previous, span)
        return self._annotate(span, decision, run_id, label)

    def _count(self, template: str | None, decision: Decision, previous: Action,
               span: ReadableSpan | Span) -> str:
        """Count a flagged decision, its span's trace the exemplar; return its template label."""
        if self.metrics is None:
            return uncapped_label(template)
        return self.metrics.record_decision(template, decision, self._mode, previous,
                                            trace_id=_hex_trace(span))

    def _decide(self, entry: RunEntry, event: ToolCall | Handoff, attrs: Mapping[str, Any],
                span: ReadableSpan) -> tuple[Decision, Action, str | None, bool, Waste | None]:
        parent_id = span.parent.span_id if span.parent is not None else None
        with entry.state.lock:
            want_agent = isinstance(event, ToolCall) and event.agent is None
            if entry.template is None or want_agent:
                template, agent = self._ancestry(attrs, parent_id, entry.template is None,
                                                 want_agent)
                self._learn_template(entry, template)
            if isinstance(event, ToolCall):
                if entry.unfed is not None and entry.state.waste.found:
                    self._feed(entry)
                if want_agent or entry.seen_model:
                    event = event.in_context(
                        event.agent or agent,
                        entry.model_turns if entry.seen_model else event.turn)
                entry.tool_calls += 1
                decision = self.engine.process(entry.state, event)
            else:
                decision = self.engine.process_handoff(entry.state, event)
            previous = entry.note_loop(decision)
            waste = entry.state.waste
            wasted = waste.take() if waste.looping else None
            return decision, previous, entry.template, entry.tool_calls == 1, wasted

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

    def _run_id(self, span: ReadableSpan, attrs: Mapping[str, Any], trace_id: int) -> str:
        """Return the run of ``span`` by ``run_key``, noted as its trace's unless it spans traces.

        A conversation's run outlives its traces (TTL and LRU end it); any other run, the
        trace's own or an agent invocation's, ends with the trace's root span (``_release``).
        """
        trace = self._trace(trace_id)
        key = self.config.run_key
        if key != "trace":
            parent_id = span.parent.span_id if span.parent is not None else None
            if key == "conversation":
                run_id = trace.conversation = trace.conversation or self._conversation(
                    attrs, parent_id)
            else:  # the agent invocation's run, named as ``check`` names it
                agent = self.live.agent_span_id(parent_id)
                run_id = trace.note(f"{trace_id:032x}/{agent}") if agent else None
            if run_id:
                return run_id
        # the trace; or, while the run key is not known yet (a chat span before the tool spans
        # that carry it), this span alone: a later one may find it
        return trace.own or trace.own_run(trace_id)

    def _trace(self, trace_id: int) -> _TraceRuns:
        """Return the note of a trace with a run open, made if new (the oldest past max_runs go)."""
        found = self._traces.get(trace_id)
        if found is not None:
            return found
        with self._trace_lock:
            trace = self._traces.setdefault(trace_id, _TraceRuns())
            while len(self._traces) > self.config.max_runs:
                self._traces.popitem(last=False)
        return trace

    def _conversation(self, attrs: Mapping[str, Any], parent_id: int | None) -> str | None:
        keys = self.config.conversation_keys
        for source in (attrs, *(s.attributes or {} for s in self.live.ancestors(parent_id))):
            for key in keys:
                value = source.get(key)
                if value:
                    return str(value)
        return None

    def _maybe_agent_started(self, span: Span, name: str) -> None:
        """Infer handoffs from an agent span's start; remember names of other spans.

        Agent spans by name alone (``may_name_agent``) are the only ones whose siblings imply
        handoffs, here and in ``check``.
        """
        if not may_name_agent(name):
            if len(self._other_names) < _MAX_SPAN_NAMES:
                self._other_names.add(name)
            return
        if span.parent is not None:
            # a sibling agent span may imply a handoff (a root one has no siblings);
            # in order with the ended spans, so the handoff falls between their calls
            worker = self._worker
            if worker is None or not worker.submit((span,)):
                self._agent_started(span)

    def _agent_started(self, span: Span) -> None:
        """Infer a handoff when a sibling agent span with another name starts.

        The handoff belongs to the run of the agent span's parent, as ``check`` places it: the
        trace's, the conversation's, or with ``run_key = "agent"`` the parent invocation's.
        """
        attrs = raw_attributes(span)
        name = agent_of(span.name, attrs)
        if name is None or span.parent is None:
            return
        if self.config.run_key == "agent":
            run_id = self._trace(span.context.trace_id).note(
                f"{span.context.trace_id:032x}/{span.parent.span_id:016x}")
        else:
            run_id = self._run_id(span, attrs, span.context.trace_id)
        entry, _ = self.store.get_or_create(run_id)
        if entry.state.notifying and entry.state.in_callback():
            return  # started inside this run's on_decision, which holds its lock
        with entry.state.lock:
            handoff = entry.siblings.started(format(span.parent.span_id, "016x"), name,
                                             format(span.context.span_id, "016x"),
                                             span.start_time or 0)
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

    def _annotate(self, span: ReadableSpan, decision: Decision, run_id: str,
                  template: str) -> ReadableSpan:
        evidence = evidence_attributes(decision, run_id, self._mode, template)
        self._emit(decision, evidence, span.context, span.end_time)
        if not self._span_evidence:
            return span
        if self.downstream is None:
            parent_id = span.parent.span_id if span.parent is not None else None
            target = self.live.agent_span(parent_id) or self.live.root_span(span)
            if target is not None:
                target.add_event(EVENT_NAME, {**evidence, "loopguard.span_id":
                                              format(span.context.span_id, "016x")})
            return span
        return _with_evidence(span, evidence)

    def _emit(self, decision: Decision, evidence: dict[str, Any], context: Any,
              timestamp: int | None) -> None:
        """Emit the finding as a log event (``evidence`` = logs or both); never raises."""
        if self._log is not None:
            try:
                self._log.emit(decision, evidence, context, timestamp)
            except Exception as exc:
                self.guard.handle("log_event", exc)

    def _forget_traces(self) -> None:
        """In a forked child: no trace has a run (the store starts empty), a new lock."""
        self._trace_lock = threading.Lock()
        self._traces.clear()

    def _release(self, trace_id: int) -> None:
        """Drop the runs of a trace whose root span ended; never raises.

        Only a trace noted by ``_run_id`` has any: the roots of other traces (HTTP requests,
        jobs) end here with one lookup, however many runs are open elsewhere.
        """
        if trace_id not in self._traces:
            return
        try:
            with self._trace_lock:
                trace = self._traces.pop(trace_id, None)
            for run_id in trace.runs if trace is not None else ():
                self.store.release(run_id)
            if self._multiprocess:
                self.metrics.set_open_runs(len(self.store))  # type: ignore[union-attr]
        except Exception as exc:
            self.guard.handle("on_end", exc)

    def run_for_span(self, span: Any) -> tuple[str, RunEntry]:
        """Return the run id and entry of a live span (used by the enforce-mode guard).

        In the background mode, the spans queued before are checked first, so the guard
        decides on every call that has ended.

        Raises:
            LoopGuardError: on the thread running ``on_decision`` for that run.
        """
        if self._worker is not None:
            self._worker.flush(_SHUTDOWN_SECONDS)
        attrs = span.attributes or {}
        run_id = self._run_id(span, attrs, span.context.trace_id if span.context else 0)
        entry, _ = self.store.get_or_create(run_id)
        if entry.state.notifying and entry.state.in_callback():
            raise LoopGuardError(
                f"on_decision must not make a guarded tool call in the run it was called for "
                f"(run {run_id}); do that work after the callback returns")
        with entry.state.lock:
            if entry.template is None:
                parent = span.parent.span_id if span.parent is not None else None
                self._learn_template(entry, self._ancestry(attrs, parent, True, False)[0])
        return run_id, entry

    def record_enforcement(self, entry: RunEntry, enforcement: str) -> None:
        """Count an enforcement action (``abort`` or ``hint``) for the run's template."""
        if self.metrics is not None:
            self.metrics.record_enforcement(entry.template, enforcement)

    def _evicted(self, reason: str, count: int) -> None:
        if self.metrics is not None:
            self.metrics.record_eviction(reason, count)


def _hex_trace(span: ReadableSpan | Span) -> str:
    """Return the span's trace id as 32 hex digits (an exemplar's ``trace_id``)."""
    return format(span.context.trace_id, "032x")


def _with_evidence(span: ReadableSpan, evidence: Mapping[str, Any]) -> ReadableSpan:
    """Return a copy of the ended ``span`` with the ``loopguard.*`` attributes added."""
    return ReadableSpan(
        name=span.name, context=span.context, parent=span.parent, resource=span.resource,
        attributes={**raw_attributes(span), **evidence}, events=span.events,
        links=span.links, kind=span.kind, status=span.status, start_time=span.start_time,
        end_time=span.end_time, instrumentation_scope=span.instrumentation_scope)


class _TraceRuns:
    """What the processor knows of a trace with a run open: its runs, its conversation."""

    __slots__ = ("conversation", "own", "runs")

    def __init__(self) -> None:
        self.own: str | None = None
        """The trace's own run id (32 hex digits), once ``own_run`` made it."""
        self.conversation: str | None = None
        """``run_key = "conversation"``: the trace's conversation id, once a span names it."""
        self.runs: list[str] = []
        """The runs its root's end drops: the trace's own, or its agent invocations' (a list:
        most traces have one, and a list of one is a third of a set's size)."""

    def own_run(self, trace_id: int) -> str:
        """Return the trace's own run id, noted as one of its runs (made once per trace)."""
        self.own = self.note(format(trace_id, "032x"))
        return self.own

    def note(self, run_id: str) -> str:
        """Note ``run_id`` as one of the runs the trace's root's end drops; return it."""
        if run_id not in self.runs:
            self.runs.append(run_id)
        return run_id


class _Release:
    """A queued request to drop a run's state, in order with the spans queued before it."""

    __slots__ = ("run_id",)

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id


def install(config: LoopGuardConfig | None = None, *,
            tracer_provider: TracerProvider | None = None,
            downstream: SpanProcessor | None = None, **kwargs: Any) -> LoopGuardSpanProcessor:
    """Add a ``LoopGuardSpanProcessor`` to the global (or given) SDK tracer provider.

    Starts the ``/metrics`` server when ``metrics_port`` is configured
    (``LOOPGUARD_METRICS_PORT``), bound to ``metrics_addr`` (127.0.0.1 by default), unless
    ``metrics_exporter`` is ``otlp`` (no Prometheus metrics to serve).

    Raises:
        TypeError: when the global provider is not an SDK ``TracerProvider``.
    """
    provider = tracer_provider or trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        raise TypeError("otel-loopguard needs the SDK TracerProvider; set one with "
                        "trace.set_tracer_provider(TracerProvider()) first")
    existing = _installed(provider)
    if existing is not None:  # a second install would watch (and count) every span twice
        logger.warning("otel-loopguard: a LoopGuardSpanProcessor is already on this tracer "
                       "provider; install() returns it instead of adding another")
        return existing
    processor = LoopGuardSpanProcessor(config, downstream=downstream, **kwargs)
    provider.add_span_processor(processor)
    cfg = processor.config
    if cfg.metrics_port is not None and cfg.metrics_exporter != "otlp":
        from otel_loopguard.metrics import start_metrics_server

        start_metrics_server(cfg.metrics_port, cfg.metrics_addr)
    return processor


def _installed(provider: TracerProvider) -> LoopGuardSpanProcessor | None:
    """Return the loopguard processor already added to ``provider``, if any.

    Reads the SDK's private processor list defensively: None when it is not there.
    """
    active = getattr(provider, "_active_span_processor", None)
    for processor in getattr(active, "_span_processors", ()):
        if isinstance(processor, LoopGuardSpanProcessor):
            return processor
    return None
