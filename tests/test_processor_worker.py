"""The processor's background mode: detection on a worker thread, spans handed on in order."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor
from otel_loopguard.processor._worker import SpanWorker

TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
        "gen_ai.tool.call.arguments": '{"q": "refund"}', "gen_ai.tool.call.result": "none"}


class Gate(SpanProcessor):
    """A downstream that blocks in on_end until released, recording the thread and order."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.entered = threading.Event()
        self.names: list[str] = []
        self.threads: set[int] = set()
        self.actions: list[Any] = []

    def on_end(self, span: ReadableSpan) -> None:
        if threading.current_thread().name == "otel-loopguard":
            self.entered.set()
            self.open.wait(10)  # hold the worker; spans handed on directly pass
        self.threads.add(threading.get_ident())
        self.names.append(span.name)
        self.actions.append((span.attributes or {}).get("loopguard.action"))


def _provider(downstream: SpanProcessor, **kwargs: Any) -> tuple[TracerProvider, Any]:
    provider = TracerProvider()
    registry = CollectorRegistry()
    processor = LoopGuardSpanProcessor(LoopGuardConfig(), downstream=downstream,
                                       registry=registry, **kwargs)
    provider.add_span_processor(processor)
    return provider, registry


def _loop(provider: TracerProvider, n: int) -> None:
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent a", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}):
        for _ in range(n):
            with tracer.start_as_current_span("execute_tool search", attributes=TOOL):
                pass


def test_span_end_returns_before_detection_and_flush_hands_everything_on_in_order() -> None:
    """span.end() only queues: the downstream is still blocked when the agent's loop is done;
    force_flush then checks every span on one other thread, in the order they ended."""
    gate = Gate()
    provider, _ = _provider(gate)
    _loop(provider, 5)  # returns although the downstream blocks
    assert gate.names == []
    gate.open.set()
    assert provider.force_flush(10_000)
    assert gate.names == ["execute_tool search"] * 5 + ["invoke_agent a"]
    assert gate.actions[:5] == [None, None, "warn", "replan", "stop"]
    assert gate.threads and threading.get_ident() not in gate.threads
    provider.shutdown()


def test_a_span_that_ends_after_shutdown_is_counted_apart_from_a_full_queue() -> None:
    """A normal exit, with a span still open, does not look like a worker falling behind."""
    gate = Gate()
    gate.open.set()
    provider, registry = _provider(gate)
    tracer = provider.get_tracer("t")
    late = tracer.start_span("execute_tool search", attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"})
    provider.shutdown()
    late.end()
    assert registry.get_sample_value("loopguard_skipped_spans_total",
                                     {"reason": "shutdown"}) == 1
    assert registry.get_sample_value("loopguard_skipped_spans_total",
                                     {"reason": "queue_full"}) == 0


def test_a_span_that_ends_while_shutdown_drains_the_queue_is_still_exported() -> None:
    """Shutdown drains the queue before it shuts the downstream down, which can take long: a
    span ending meanwhile (another thread of the application) goes to the downstream processor
    unchecked, counted under reason="shutdown", instead of queueing behind the worker's last
    item, never handed on."""
    exporter = InMemorySpanExporter()
    entered, release = threading.Event(), threading.Event()

    def busy(_: Any) -> None:  # holds the worker on the first finding
        entered.set()
        release.wait(10)

    provider = TracerProvider()
    registry = CollectorRegistry()
    processor = LoopGuardSpanProcessor(LoopGuardConfig(), downstream=BatchSpanProcessor(
        exporter), registry=registry, on_decision=busy)
    provider.add_span_processor(processor)
    _loop(provider, 3)
    assert entered.wait(10)
    shutdown = threading.Thread(target=provider.shutdown)
    shutdown.start()
    worker = processor._worker
    assert worker is not None
    while not any(getattr(item, "stop", False) for item in list(worker.queue)):
        time.sleep(0.001)  # the shutdown is draining the queue
    provider.get_tracer("t").start_span("execute_tool late", attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "late"}).end()
    release.set()
    shutdown.join(10)
    assert "execute_tool late" in [s.name for s in exporter.get_finished_spans()]
    assert registry.get_sample_value("loopguard_skipped_spans_total",
                                     {"reason": "shutdown"}) == 1


def test_a_full_queue_hands_spans_on_unchecked_and_counts_them() -> None:
    """Past max_queue_size the span goes to the downstream directly: nothing is lost."""
    gate = Gate()
    provider, registry = _provider(gate, max_queue_size=2)
    _loop(provider, 5)
    skipped = registry.get_sample_value("loopguard_skipped_spans_total",
                                        {"reason": "queue_full"})
    passed_on = len(gate.names)
    gate.open.set()
    provider.force_flush(10_000)
    assert len(gate.names) == 6  # every span reached the exporter
    # two wait, the one the worker handles among them: the others were passed on at once,
    # without evidence (checked here, the fourth call would have been flagged)
    assert skipped == passed_on >= 3
    assert gate.actions[:passed_on] == [None] * passed_on
    provider.shutdown()


def test_a_plain_span_waits_its_turn_while_the_worker_handles_a_span() -> None:
    """The span the worker is handling may need an open ancestor: a plain span that ends
    meanwhile is not handed on at once, but after it, in order."""
    gate = Gate()
    provider, _ = _provider(gate)
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent a", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}):
        with tracer.start_as_current_span("step"):  # no markers: the tool span's parent
            with tracer.start_as_current_span("execute_tool search", attributes=TOOL):
                pass
            assert gate.entered.wait(10)  # the worker is inside the tool span, blocked
        assert gate.names == []  # "step" ended while it was: queued behind it
    gate.open.set()
    assert provider.force_flush(10_000)
    assert gate.names == ["execute_tool search", "step", "invoke_agent a"]
    provider.shutdown()


def test_shutdown_checks_what_is_queued() -> None:
    """Shutdown checks the spans still queued before the downstream shuts down."""
    exporter = InMemorySpanExporter()
    provider, _ = _provider(SimpleSpanProcessor(exporter), background=True)
    _loop(provider, 3)
    provider.shutdown()
    actions = [(s.attributes or {}).get("loopguard.action")
               for s in exporter.get_finished_spans() if s.name == "execute_tool search"]
    assert actions == [None, None, "warn"]


def test_a_simple_span_processor_downstream_has_every_span_when_span_end_returns() -> None:
    """A SimpleSpanProcessor downstream keeps its meaning: the flagged span is in its exporter,
    with its evidence, as soon as span.end() returns, with no flush."""
    exporter = InMemorySpanExporter()
    provider, _ = _provider(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent a", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}):
        for count in range(1, 4):
            with tracer.start_as_current_span("execute_tool search", attributes=TOOL):
                pass
            assert len(exporter.get_finished_spans()) == count
    actions = [(s.attributes or {}).get("loopguard.action")
               for s in exporter.get_finished_spans()]
    assert actions == [None, None, "warn", None]
    provider.shutdown()


def test_enforce_mode_and_no_downstream_check_inside_span_end() -> None:
    """Enforce mode decides before the next call, and without a downstream the evidence goes
    on the open agent span: both check in span.end()."""
    assert LoopGuardSpanProcessor(LoopGuardConfig.create(mode="enforce"), registry=None,
                                  downstream=SimpleSpanProcessor(InMemorySpanExporter())
                                  )._worker is None
    assert LoopGuardSpanProcessor(LoopGuardConfig(), registry=None)._worker is None
    with pytest.raises(ValueError, match="needs a downstream"):
        LoopGuardSpanProcessor(LoopGuardConfig(), registry=None, background=True)


def test_worker_survives_a_failing_item_and_flushes_from_its_own_thread() -> None:
    seen: list[Any] = []
    flushed: list[bool] = []
    worker: SpanWorker

    def handle(item: Any) -> None:
        if item == "boom":
            raise RuntimeError("bug")
        if item == "flush":
            flushed.append(worker.flush(1))  # from the worker itself: returns at once
        seen.append(item)

    worker = SpanWorker(handle, max_queue_size=10)
    for item in ("a", "boom", "flush", "b"):
        assert worker.submit(item)
    assert worker.flush(10)
    assert seen == ["a", "flush", "b"]
    assert flushed == [True]
    assert worker.shutdown(10)
    assert not worker.submit("late")


def test_a_downstream_failing_on_every_span_is_logged_once(
        caplog: pytest.LogCaptureFixture) -> None:
    """A downstream processor that raises on every span the worker hands it is logged once,
    with its traceback, not once per span; the worker keeps handing spans on."""

    class Failing(SpanProcessor):
        def __init__(self) -> None:
            self.ended = 0

        def on_end(self, span: ReadableSpan) -> None:
            self.ended += 1
            raise RuntimeError("exporter bug")

    downstream = Failing()
    provider, _ = _provider(downstream, background=True)
    with caplog.at_level(logging.ERROR, logger="otel_loopguard"):
        for _ in range(20):
            _loop(provider, 2)
        provider.force_flush()
    assert downstream.ended == 20 * 3
    failures = [r for r in caplog.records if r.exc_info and "exporter bug" in str(r.exc_info[1])]
    assert len(failures) == 1
    provider.shutdown()


def test_flush_waits_for_queued_items_only() -> None:
    """An idle worker flushes at once, even with no time to wait; a busy one until it is done."""
    release, started = threading.Event(), threading.Event()

    def handle(item: Any) -> None:
        started.set()
        release.wait(10)

    worker = SpanWorker(handle, max_queue_size=10)
    assert worker.flush(0)
    assert worker.submit("slow")
    assert worker.flush(0.01) is False  # the item is being handled, or about to be
    assert started.wait(10)  # a loaded machine may not run the woken thread within 10 ms
    release.set()
    assert worker.flush(10)
    assert worker.flush(0) and len(worker) == 0
    assert worker.shutdown(10)


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="needs fork")
def test_a_forked_child_gets_its_own_worker() -> None:
    """After fork the child's processor checks spans again (the parent's thread is gone)."""
    exporter = InMemorySpanExporter()
    provider, _ = _provider(SimpleSpanProcessor(exporter), background=True)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            _loop(provider, 3)
            provider.force_flush(5_000)
            actions = [(s.attributes or {}).get("loopguard.action")
                       for s in exporter.get_finished_spans()]
            os.write(write, repr(actions).encode())
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    out = os.read(read, 1000).decode()
    os.close(read)
    assert status == 0
    assert out == repr([None, None, "warn", None])
    provider.shutdown()


def test_open_spans_the_app_never_ends_are_bounded_by_age_and_count() -> None:
    """Spans started and never ended are forgotten past the run TTL, and past max_open: the
    table is looked at once it outgrows 1,024 spans, then twice what a look left, oldest first."""
    import time

    processor = LoopGuardSpanProcessor(LoopGuardConfig.create(run_ttl_seconds=60), registry=None)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    now = time.time_ns()
    for i in range(1000):  # started two minutes ago and never ended
        tracer.start_span("leaked", start_time=now - 120 * 10**9 + i)
    assert len(processor.live) == 1000  # not looked at yet
    young = [tracer.start_span("open").context.span_id for _ in range(100)]
    assert list(processor.live.spans) == young  # the 1,025th start forgot the stale ones
    assert processor.live.limit == 1024
    processor.live.max_open = processor.live.limit = 1000
    young += [tracer.start_span("open").context.span_id for _ in range(2000)]
    kept = list(processor.live.spans)  # the newest ones: past 1,000 the oldest eighth goes
    assert 875 <= len(kept) <= 1000 and kept == young[-len(kept):]


def test_tool_spans_without_parent_or_conversation_are_reported_once(
        caplog: pytest.LogCaptureFixture) -> None:
    """Each parentless tool span is a run of one under run_key trace, with a conversation id or
    not: counted every time, logged once with what to set; a parent span makes it quiet."""
    import logging

    exporter = InMemorySpanExporter()
    provider, registry = _provider(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with caplog.at_level(logging.WARNING, logger="otel_loopguard"):
        for _ in range(3):
            with tracer.start_as_current_span("execute_tool search", attributes=TOOL):
                pass
        with tracer.start_as_current_span("execute_tool search", attributes={
                **TOOL, "gen_ai.conversation.id": "c1"}):
            pass
        _loop(provider, 2)
        provider.force_flush()
    assert registry.get_sample_value("loopguard_unparented_tool_calls_total",
                                     {"run_key": "trace"}) == 4
    lines = [r.getMessage() for r in caplog.records if "no parent span" in r.getMessage()]
    assert len(lines) == 1 and "gen_ai.conversation.id" in lines[0]
    provider.shutdown()


def test_check_and_serve_report_unparented_tool_calls() -> None:
    """The shared assembly counts them for check and serve too."""
    from otel_loopguard.assembly import assemble_trace
    from otel_loopguard.types import SpanRecord

    def tool(span_id: str, parent: str | None, **extra: Any) -> SpanRecord:
        return SpanRecord(trace_id="a" * 32, span_id=span_id, parent_span_id=parent,
                          name="execute_tool search", start_time_ns=1, end_time_ns=2,
                          attributes={**TOOL, **extra})

    config = LoopGuardConfig()
    assert assemble_trace("a" * 32, [tool("1" * 16, None)], config).unparented_tool_calls == 1
    assert assemble_trace("a" * 32, [tool("1" * 16, "2" * 16)],
                          config).unparented_tool_calls == 0
    by_conversation = LoopGuardConfig.create(run_key="conversation")
    assert assemble_trace("a" * 32, [tool("1" * 16, None, **{"session.id": "s"})],
                          by_conversation).unparented_tool_calls == 0
    assert assemble_trace("a" * 32, [tool("1" * 16, None, **{"session.id": "s"})],
                          config).unparented_tool_calls == 1


def test_a_plain_span_is_handed_on_at_once_when_nothing_is_queued() -> None:
    """A span no adapter reads skips the worker when it has caught up (no thread switch); with
    calls still queued it waits its turn, so the calls still find it as their ancestor."""
    seen: list[tuple[str, bool]] = []

    class Record(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            seen.append((span.name, threading.current_thread() is threading.main_thread()))

    provider, _ = _provider(Record())
    provider.force_flush()
    with provider.get_tracer("t").start_as_current_span("GET /health"):
        pass
    assert seen == [("GET /health", True)]
    provider.shutdown()


def test_spans_under_a_root_agent_span_without_calls_never_reach_the_worker() -> None:
    """A root agent span has no siblings, so its start queues nothing: the plain spans under it
    and the root itself are handed on at once, on the thread that ends them."""
    seen: list[tuple[str, bool]] = []

    class Record(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            seen.append((span.name, threading.current_thread() is threading.main_thread()))

    provider, _ = _provider(Record())
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent a"):
        for _ in range(3):
            with tracer.start_as_current_span("GET /orders"):
                pass
    assert seen == [("GET /orders", True)] * 3 + [("invoke_agent a", True)]
    provider.shutdown()


def test_a_released_synthetic_run_keeps_its_queued_calls() -> None:
    """release_run (the integrations' runs without a root span) takes effect after the spans
    queued before it: the run's last call is counted in the run, and no run is left open."""
    from otel_loopguard.integrations._common import release_run, synthetic_context

    gate = Gate()
    provider, registry = _provider(gate)
    processor = next(p for p in provider._active_span_processor._span_processors
                     if isinstance(p, LoopGuardSpanProcessor))
    tracer = provider.get_tracer("t")
    trace_id = 0x1234
    for _ in range(3):
        with tracer.start_as_current_span("execute_tool search", attributes=TOOL,
                                          context=synthetic_context(trace_id)):
            pass
    release_run(processor, trace_id)  # the worker is held: all three calls are still queued
    assert len(processor.store) == 0
    gate.open.set()
    provider.force_flush()
    assert len(processor.store) == 0  # released after its calls, not re-created by them
    assert registry.get_sample_value("loopguard_tool_calls_total",
                                     {"prompt_template": "unknown", "tool": "search"}) == 3
    assert gate.actions == [None, None, "warn"]  # one run: the third identical call warns
    provider.shutdown()


def test_handoff_evidence_reaches_an_agent_span_that_ended_before_its_start_was_checked(
        caplog: pytest.LogCaptureFixture) -> None:
    """Sibling agent spans triage, billing, triage, billing, triage, each ending at once: the
    worker takes their starts after they ended. The ping-pong's evidence still reaches the
    exported agent span that closed it, and the SDK never warns of an ended span."""
    exporter = InMemorySpanExporter()
    provider, _ = _provider(SimpleSpanProcessor(exporter), background=True)
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("POST /chat"):
        for name in ("triage", "billing") * 2 + ("triage",):
            with tracer.start_as_current_span(f"invoke_agent {name}", attributes={
                    "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}):
                pass
    provider.force_flush()
    flagged = [s for s in exporter.get_finished_spans()
               if (s.attributes or {}).get("loopguard.detector") == "handoff"]
    assert [(s.name, s.attributes["loopguard.action"]) for s in flagged] == [
        ("invoke_agent triage", "stop")]
    assert "ended span" not in caplog.text
    provider.shutdown()


def test_a_shutdown_from_on_decision_hands_the_queued_spans_on_and_stops_the_worker() -> None:
    """on_decision runs on the worker's thread, which cannot wait for itself: a shutdown there
    (an application that shuts telemetry down on a stop finding) lets the worker check what is
    queued behind the finding, then shut the downstream down, and then stop; a later shutdown
    (the application's own, at exit) returns once that is done, instead of waiting 30 s for a
    worker that never stopped, with the spans queued behind the finding lost."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    stopped: list[Any] = []
    queued = threading.Event()

    def shut_down_on_stop(decision: Any) -> None:
        queued.wait(10)  # every span has ended: they all queue behind the finding
        if decision.action.label == "stop" and not stopped:
            stopped.append(decision)
            provider.shutdown()

    processor = LoopGuardSpanProcessor(LoopGuardConfig(), downstream=BatchSpanProcessor(
        exporter), registry=CollectorRegistry(), on_decision=shut_down_on_stop)
    provider.add_span_processor(processor)
    _loop(provider, 7)  # the fifth call stops; two calls and the agent span queue behind it
    queued.set()
    worker = processor._worker
    assert worker is not None
    worker._thread.join(10)
    assert stopped and not worker._thread.is_alive()
    assert [s.name for s in exporter.get_finished_spans()] == \
        ["execute_tool search"] * 7 + ["invoke_agent a"]
    provider.shutdown()  # returns at once: the worker has stopped


@pytest.mark.parametrize("downstream", ["simple", "none"])
def test_a_span_that_ends_after_shutdown_is_not_checked_when_spans_end_inside_span_end(
        downstream: str) -> None:
    """Without a worker (a SimpleSpanProcessor downstream, or none) a span that ends once the
    processor is shut down is passed on unchecked and counted under reason="shutdown", as the
    worker's spans are: it does not count calls into metrics still served, call on_decision or
    add evidence, after the application shut telemetry down."""
    exporter = InMemorySpanExporter()
    decisions: list[Any] = []
    provider = TracerProvider()
    registry = CollectorRegistry()
    processor = LoopGuardSpanProcessor(
        LoopGuardConfig(), registry=registry, on_decision=decisions.append,
        downstream=SimpleSpanProcessor(exporter) if downstream == "simple" else None)
    assert processor._worker is None
    provider.add_span_processor(processor)
    processor.shutdown()
    _loop(provider, 5)
    assert decisions == []
    assert registry.get_sample_value("loopguard_tool_calls_total", {
        "prompt_template": "unknown", "tool": "search"}) is None
    assert registry.get_sample_value("loopguard_skipped_spans_total",
                                     {"reason": "shutdown"}) == 5  # the agent span needs no check
    assert len(processor.store) == 0


def test_a_callback_raising_a_base_exception_loses_no_span() -> None:
    """An ``on_decision`` that raises what is no ``Exception`` (``GeneratorExit``, a green
    thread's or a task's cancellation) still lets every span reach the exporter: the flagged
    spans were dropped, silently, in background mode."""
    exporter = InMemorySpanExporter()

    def on_decision(decision: Any) -> None:
        raise GeneratorExit

    provider = TracerProvider()
    provider.add_span_processor(LoopGuardSpanProcessor(
        LoopGuardConfig(), downstream=BatchSpanProcessor(exporter), registry=CollectorRegistry(),
        on_decision=on_decision))
    for _ in range(3):
        _loop(provider, 6)  # flagged from the 3rd call on
    provider.force_flush()
    assert len(exporter.get_finished_spans()) == 3 * 7
    provider.shutdown()


def test_errors_of_more_kinds_than_the_cap_are_logged_once_more(
        caplog: pytest.LogCaptureFixture) -> None:
    """Past 64 kinds of error, a new kind is counted and logged as ``where:other``, once: it
    was logged with its traceback at every occurrence."""
    from otel_loopguard.exceptions import InternalErrorGuard

    counted: list[str] = []
    guard = InternalErrorGuard(counted.append)
    kinds = [type(f"Error{n}", (Exception,), {}) for n in range(70)]
    with caplog.at_level(logging.ERROR, logger="otel_loopguard"):
        for kind in kinds:
            guard.handle("on_end", kind())
        for _ in range(100):
            guard.handle("on_end", kinds[-1]())
    assert len(caplog.records) == 65
    assert counted[-1] == "on_end:other" and counted[0] == "on_end:Error0"
