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
from collections.abc import Callable, Sequence, Sized
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from prometheus_client import REGISTRY

from otel_loopguard.adapters import (
    DEFAULT_ADAPTERS,
    EVENT,
    MODEL_SPAN,
    NOT_READ,
    OTHER,
    is_candidate,
    span_reading,
    template_key_roots,
)
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.engine import LoopEngine
from otel_loopguard.evidence import EVENT_NAME as EVENT_NAME  # importers of this module use it
from otel_loopguard.evidence import EvidenceLog, evidence_attributes
from otel_loopguard.exceptions import InternalErrorGuard
from otel_loopguard.metrics import LoopGuardMetrics
from otel_loopguard.metrics._otel import backends
from otel_loopguard.otlp._sdk import raw_attributes
from otel_loopguard.processor._agents import AgentStarts
from otel_loopguard.processor._calls import ToolCallChecks
from otel_loopguard.processor._deferred import BLANK_TURN_KEYS, DeferredTurns, _Deferred
from otel_loopguard.processor._guard_runs import GuardRuns, _Release
from otel_loopguard.processor._live import LiveSpans
from otel_loopguard.processor._report import with_evidence
from otel_loopguard.processor._runs import SpanRuns
from otel_loopguard.processor._worker import _SHUTDOWN_SECONDS, SpanWorker
from otel_loopguard.state import InMemoryRunStateStore, after_fork_in_child
from otel_loopguard.types import Decision, SpanAdapter

__all__ = ["LoopGuardSpanProcessor", "evidence_attributes", "install"]

logger = logging.getLogger(__name__)

_DEFAULT_MAX_QUEUE_SIZE: Final = 16_384
_NO_OP_STARTS: Final = frozenset({SpanProcessor.on_start, BatchSpanProcessor.on_start,
                                  SimpleSpanProcessor.on_start})
"""``on_start`` methods that do nothing: the processor does not call them on every span."""


class LoopGuardSpanProcessor(ToolCallChecks, AgentStarts, GuardRuns, DeferredTurns,
                             SpanProcessor):
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
            ``loopguard_skipped_spans_total{reason="queue_full"}`` (a span that ends once
            ``shutdown`` has begun: ``reason="shutdown"``).
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
        if config is not None and not isinstance(config, LoopGuardConfig):
            raise TypeError(f"LoopGuardSpanProcessor: config must be a LoopGuardConfig (e.g. "
                            f"LoopGuardConfig.create(mode='enforce')), got "
                            f"{type(config).__name__}; a span processor to hand spans to goes "
                            "in downstream=")
        self.config = config or LoopGuardConfig.load()
        self.engine = engine or LoopEngine(self.config, on_decision=on_decision)
        self.metrics = metrics if metrics is not None else self._default_metrics(
            registry, meter_provider)
        self._lazy_usage = self.config.run_key != "conversation"
        self._template_roots = template_key_roots(self.config.prompt_name_keys)
        self.adapters = tuple(adapters)
        if self.adapters == DEFAULT_ADAPTERS:
            self.adapters = DEFAULT_ADAPTERS  # the same tuple: ``_candidate`` tests it by identity
        self.guard = InternalErrorGuard(
            self.metrics.record_internal_error if self.metrics else None,
            raise_errors=raise_internal_errors)
        self._make_runs(clock)
        self._mode = self.config.mode
        self._span_evidence = self.config.evidence != "logs"
        self._log = EvidenceLog(logger_provider) if self.config.evidence != "spans" else None
        self._multiprocess = self.metrics is not None and self.metrics.multiprocess
        self._ended_agents = {}
        self._other_names = set()
        self._warned_unparented = False
        self._supplied = {}
        self._supplied_lock = threading.Lock()
        after_fork_in_child(self._forget_supplied)
        self.metrics_server: Any = None
        """The ``/metrics`` server ``install()`` started for this processor (None: none);
        ``shutdown`` stops it, so its port is free again."""
        self._closed = False
        """Whether ``shutdown`` was called: spans that end from then on are passed on unchecked."""
        self._twice = False
        """Whether this processor was seen added to a provider twice (``_added_twice``)."""
        self._last_ended = threading.local()
        self._hand_on_to(downstream, background, max_queue_size)

    def _make_runs(self, clock: Callable[[], int]) -> None:
        """Make the run store, the table of open spans and the runs of spans (``SpanRuns``)."""
        self.store = InMemoryRunStateStore(
            self.engine.new_run, max_runs=self.config.max_runs,
            ttl_seconds=self.config.run_ttl_seconds, clock=clock, on_evict=self._evicted)
        if self.metrics is not None:
            self.metrics.track_open_runs(self.store.__len__)
        self.live = LiveSpans(max_age_seconds=self.config.run_ttl_seconds)
        self._open = self.live.spans  # on_end pops from the table directly: it runs per span
        self._runs = SpanRuns(self.config, self.live)
        self._traces = self._runs.traces  # _release tests it directly: it runs per root span

    def _hand_on_to(self, downstream: SpanProcessor | None, background: bool | None,
                    max_queue_size: int) -> None:
        """Set up where checked spans go: to ``downstream``, from the worker or not."""
        if downstream is not None and not callable(getattr(downstream, "on_end", None)):
            kind = "the exporter" if callable(getattr(downstream, "export", None)) else "a"
            raise TypeError(f"downstream= takes a span processor, got {kind} "
                            f"{type(downstream).__name__}: wrap an exporter, as in "
                            "downstream=BatchSpanProcessor(exporter)")
        self.downstream = downstream
        self._downstream_start = None if downstream is None or (
            type(downstream).on_start in _NO_OP_STARTS) else downstream.on_start
        """``downstream.on_start``, or None when it is one of the SDK's empty ones."""
        self._downstream_end = None if downstream is None else downstream.on_end
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
        self._defer_turns(background and self.config.run_key == "trace",
                          BLANK_TURN_KEYS - self._template_roots)

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
            size = len(spans)
            spans[span_id] = span
            if len(spans) == size:  # this span again: the processor is on the provider twice
                self._added_twice()
                return  # its downstream had it too
            if size >= self.live.limit:
                self.live.bound()
            if name not in self._other_names:  # one lookup: span names repeat
                self._maybe_agent_started(span, name)
        except Exception as exc:
            self.guard.handle("on_start", exc)
        if self._downstream_start is not None:
            self._downstream_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        """Finish a span the worker need not check; queue any other, or check it here."""
        if self._twice and self._ended_again(span):
            return
        # While the worker has nothing queued, a span no adapter reads, or reads only as an
        # ancestor (an agent or chain span), is finished here, without a thread switch, and
        # so is a model span without content of a trace with no run (``DeferredTurns``). With
        # spans queued they wait their turn: those may need them as their ancestors, or as the
        # root that releases their run.
        if not self._pending:
            context: Any  # a tuple: [0] trace_id, [1] span_id, [2] is_remote
            try:  # the SDK span's own fields, as in ``_ended``
                parent, context = span._parent, span._context
                attrs = span._attributes._dict  # type: ignore[union-attr]
                reading = span_reading(span._name, attrs)
            except Exception:  # not an SDK span: the general path reads its properties
                reading = EVENT
            if (reading == NOT_READ or (reading == OTHER and self._finishes_here(context))) \
                    and not (self._deferred and context[0] in self._deferred
                             and self._queues_kept(context, parent)):
                self._open.pop(context[1], None)
                if parent is None or parent[2]:  # a root: its end releases its run, if any
                    self._release(context[0])
                if self._downstream_end is not None:
                    self._downstream_end(span)
                return
            if reading == MODEL_SPAN and self._defers and self._set_aside(span, context, parent,
                                                                         attrs):
                return
        worker = self._worker
        if worker is None:
            if self._closed:  # as the worker refuses spans once shutdown has begun
                self._pass_on(span, "shutdown")
            else:
                self._ended(span)
            return
        if self._deferred:
            self._kept_first(span)
        if not worker.submit(span):
            self._pass_on(span, "shutdown" if worker.stopped else "queue_full")

    def _added_twice(self) -> None:
        """Note that a span started twice here: the processor is on its provider twice.

        A setup that runs twice (a notebook cell run again, ``add_span_processor`` and
        ``install()`` both) would have every call counted twice, and healthy repetition stopped
        as a loop. From here on each span is handled once, and the setup is named once.
        """
        if not self._twice:
            self._twice = True
            logger.warning("otel-loopguard: this LoopGuardSpanProcessor was added to a tracer "
                           "provider twice; each span is handled once. Add it once.")

    def _ended_again(self, span: ReadableSpan) -> bool:
        """Return whether ``span`` is the span this thread just ended.

        That is the second call of a processor on its provider twice: the provider calls its
        processors one after another, on the thread that ends the span.
        """
        last = self._last_ended
        if getattr(last, "span", None) is span:
            last.span = None
            return True
        last.span = span
        return False

    def _finishes_here(self, context: Any) -> bool:
        """Return whether an agent or chain span (``OTHER``) needs nothing of the worker.

        The default adapters read it only as an ancestor; evidence of a handoff its start
        implied may wait for its copy (``_ended_agents``), which only the worker makes.
        """
        return self.adapters is DEFAULT_ADAPTERS and not (
            self._ended_agents and context[1] in self._ended_agents)

    def _queues_kept(self, context: Any, parent: Any) -> bool:
        """A span finished here ended in a trace with model spans kept aside.

        Return True when the span goes to the worker after them instead: it may be their
        ancestor, or the root whose end releases the run they made
        (``DeferredTurns._kept_at_root``).
        """
        if parent is not None and not parent[2]:
            self._release_kept(context[0])
            return True
        return not self._kept_at_root(context[0])

    def _kept_first(self, span: ReadableSpan) -> None:
        """Queue the model spans kept aside of ``span``'s trace before it (``DeferredTurns``).

        At its root, ``_kept_at_root`` drops them or queues them for the worker to decide,
        unless the root itself makes the run they belong to (``_root_checked``).
        """
        try:
            trace_id = span.context.trace_id
            if trace_id not in self._deferred:
                return
            parent = span.parent
            if (parent is not None and not parent.is_remote) or self._root_checked(span):
                self._release_kept(trace_id)
            else:
                self._kept_at_root(trace_id)
        except Exception as exc:
            self.guard.handle("on_end", exc)

    def _root_checked(self, span: ReadableSpan) -> bool:
        """Return whether a root's own check makes a run: a tool call, handoff, turn with content.

        The blank turns kept aside under it are then that run's, counted before it (the tool
        call's turn, an MCP server's tool span calling a model); only a root the worker reads
        as nothing (or as a blank turn) ends their run unmade.
        """
        attrs = span.attributes or {}
        reading = span_reading(span.name, attrs)
        return reading == EVENT or (reading == OTHER and self.adapters is not DEFAULT_ADAPTERS) \
            or (reading == MODEL_SPAN and not self._blank(attrs))

    def _pass_on(self, span: ReadableSpan, reason: str) -> None:
        """Hand ``span`` on unchecked, counted as skipped for ``reason``.

        The worker's queue is full (``queue_full``), or the processor was shut down before the
        span ended (``shutdown``, with or without a worker). Checking it here instead would put
        detection back on the agent's thread when the worker is already behind, and count its
        call before the calls still queued.
        """
        try:
            self._open.pop(span.context.span_id, None)
            if self.metrics is not None:
                self.metrics.record_skipped(reason)
        except Exception as exc:
            self.guard.handle("on_end", exc)
        if self._downstream_end is not None:
            self._downstream_end(span)

    def shutdown(self) -> None:
        """Check what is queued, then shut the downstream processor down.

        A metrics error (a multiprocess directory removed under a running worker) is contained:
        the downstream processor is shut down, and exports its queued spans, whatever happens.
        Called from ``on_decision`` in the background mode (the worker's thread, which cannot
        wait for itself), it returns at once: the worker checks what is queued, then shuts the
        downstream processor down.
        """
        self._closed = True
        self._defers = False  # nothing is set aside from now on: the worker stops
        if self._deferred:
            self._release_all_kept()
        worker = self._worker
        if worker is not None and worker.on_worker_thread():
            worker.stop_later(self._shut_down_downstream)
            return
        if worker is not None and not worker.shutdown(_SHUTDOWN_SECONDS):
            logger.warning("otel-loopguard: %d spans were still queued at shutdown", len(worker))
        self._shut_down_downstream()
        server, self.metrics_server = self.metrics_server, None
        if server is not None:
            try:
                server.shutdown()
                server.server_close()
            except Exception as exc:  # the spans are handed on already; only the port is left
                self.guard.handle("shutdown", exc)

    def _shut_down_downstream(self) -> None:
        """Stop counting this processor's runs as open; shut the downstream processor down."""
        if self.metrics is not None:  # its runs no longer count as open
            try:
                self.metrics.untrack_open_runs(self.store.__len__)
            except Exception as exc:
                self.guard.handle("shutdown", exc)
        if self.downstream is not None:
            self.downstream.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Check every queued span and hand it on, then flush the downstream processor."""
        deadline = time.monotonic() + timeout_millis / 1000
        if self._deferred:
            self._release_all_kept()
        flushed = self._worker.flush(timeout_millis / 1000) if self._worker else True
        if self.downstream is None:
            return flushed
        left = max(0, int((deadline - time.monotonic()) * 1000))
        return self.downstream.force_flush(left) and flushed

    def _handle(self, item: Any) -> None:
        """Handle one queued item on the worker thread: a span, an agent start, a release."""
        if type(item) is tuple:
            try:
                self._agent_started(item[0])
            except Exception as exc:
                self.guard.handle("on_start", exc)
        elif type(item) is _Release:
            self.store.release(item.run_id)
        elif type(item) is _Deferred:  # handed on when they ended: only their check is left
            self._check_kept(item)
        else:
            self._ended(item)

    def _ended(self, span: ReadableSpan, hand_on: bool = True) -> None:
        """Run the detectors on a finished tool span and pass the span on (``hand_on``)."""
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
                    out = with_evidence(out, self._ended_agents.pop(context[1]))
                if parent is None or parent[2]:
                    self._release(context[0])
                elif self._runs.root_has_ended(context[0]) and parent[1] not in self._open:
                    # its trace's root (and its parent) ended before it: the run its check
                    # opened has no root left to release it
                    self._release(context[0])
        except Exception as exc:
            self.guard.handle("on_end", exc)
        finally:  # handed on even past a BaseException of a callback (GeneratorExit, a cancel)
            if self.downstream is not None and hand_on:
                self.downstream.on_end(out)

    def _forget_supplied(self) -> None:
        """In a forked child: a new lock (another thread may have held it), no waiting calls."""
        self._supplied = {}
        self._supplied_lock = threading.Lock()

    # --- internals -------------------------------------------------------------------------
    def _release(self, trace_id: int) -> None:
        """Drop the runs of a trace whose root span ended; never raises.

        Only a trace noted by ``SpanRuns.run_id`` has any: the roots of other traces (HTTP
        requests, jobs) end here with one lookup, however many runs are open elsewhere, and
        one note that the root ended (``SpanRuns.root_ended``: a span of the trace that ends
        later, its parent gone too, releases the run its check opened).
        """
        self._runs.root_ended(trace_id)
        if trace_id not in self._traces:
            return
        try:
            for run_id in self._runs.pop(trace_id):
                self.store.release(run_id)
            if self._multiprocess:
                self.metrics.refresh_open_runs()  # type: ignore[union-attr]
        except Exception as exc:
            self.guard.handle("on_end", exc)

    def _evicted(self, reason: str, count: int) -> None:
        if self.metrics is not None:
            self.metrics.record_eviction(reason, count)


def install(config: LoopGuardConfig | None = None, *,
            tracer_provider: TracerProvider | None = None,
            downstream: SpanProcessor | None = None, **kwargs: Any) -> LoopGuardSpanProcessor:
    """Add a ``LoopGuardSpanProcessor`` to the global (or given) SDK tracer provider.

    Starts the ``/metrics`` server when ``metrics_port`` is configured
    (``LOOPGUARD_METRICS_PORT``), bound to ``metrics_addr`` (127.0.0.1 by default), unless
    ``metrics_exporter`` is ``otlp`` (no Prometheus metrics to serve). It serves the registry
    the processor counts into (``registry=``; the global one by default). When a
    ``LoopGuardSpanProcessor`` is already on the provider (``opentelemetry-instrument``
    installed one), that one is returned and ``downstream`` is added to the provider by itself,
    so its spans are still exported.

    Raises:
        TypeError: when the global provider is not an SDK ``TracerProvider``.
        OSError: when the ``/metrics`` server cannot bind its address, naming it (the
            processor is on the provider by then).
    """
    provider = tracer_provider or trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        raise TypeError("otel-loopguard needs the SDK TracerProvider; set one with "
                        "trace.set_tracer_provider(TracerProvider()) first")
    existing = _installed(provider)
    if existing is not None:  # a second install would watch (and count) every span twice
        logger.warning("otel-loopguard: a LoopGuardSpanProcessor is already on this tracer "
                       "provider; install() returns it instead of adding another%s",
                       "" if downstream is None else " (downstream= is added to the provider "
                       "by itself: its spans are exported, the evidence is the first one's)")
        if downstream is not None:  # dropping it would lose every span it was to export
            provider.add_span_processor(downstream)
        return existing
    processor = LoopGuardSpanProcessor(config, downstream=downstream, **kwargs)
    provider.add_span_processor(processor)
    cfg = processor.config
    if cfg.metrics_port is not None and cfg.metrics_exporter != "otlp":
        from otel_loopguard.metrics import start_metrics_server

        # the registry the processor counts into (registry= or metrics=), else the global one
        registry = getattr(processor.metrics, "registry", None) or REGISTRY
        server = start_metrics_server(cfg.metrics_port, cfg.metrics_addr, registry)
        processor.metrics_server = server  # stopped with the processor
        logger.info("otel-loopguard: serving /metrics on %s:%d", cfg.metrics_addr,
                    server.server_port)
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
