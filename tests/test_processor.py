"""LoopGuardSpanProcessor on a real TracerProvider."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_loopguard import LoopGuardConfig
from otel_loopguard.otlp._sdk import span_record_from_readable
from otel_loopguard.processor import EVENT_NAME, LoopGuardSpanProcessor
from otel_loopguard.replay import Checker
from otel_loopguard.testing import FakeClock

AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "triage",
         "gen_ai.prompt.name": "support", "gen_ai.prompt.version": "v3"}


class Setup:
    def __init__(self, *, downstream: bool = True, **config: Any) -> None:
        self.registry = CollectorRegistry()
        self.exporter = InMemorySpanExporter()
        self.clock = FakeClock()
        self.provider = TracerProvider()
        export = SimpleSpanProcessor(self.exporter)
        self.processor = LoopGuardSpanProcessor(
            LoopGuardConfig.create(**config), downstream=export if downstream else None,
            registry=self.registry, clock=self.clock, raise_internal_errors=True)
        self.provider.add_span_processor(self.processor)
        if not downstream:
            self.provider.add_span_processor(export)
        self.tracer = self.provider.get_tracer("test")

    def tool(self, name: str, args: Any, result: Any = None, **extra: Any) -> None:
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                 "gen_ai.tool.call.arguments": args, **extra}
        with self.tracer.start_as_current_span(f"execute_tool {name}", attributes=attrs) as span:
            if result is not None:
                span.set_attribute("gen_ai.tool.call.result", result)

    def sample(self, name: str, **labels: str) -> float:
        self.provider.force_flush()  # detection runs on the processor's worker thread
        return self.registry.get_sample_value(name, labels) or 0.0

    def spans(self) -> list[ReadableSpan]:
        self.provider.force_flush()
        return list(self.exporter.get_finished_spans())


@pytest.fixture(name="setup")
def _setup() -> Iterator[Setup]:
    s = Setup()
    yield s
    s.provider.shutdown()


def _one_search(provider: TracerProvider) -> None:
    """End one ``search`` tool span (no arguments or result) under an agent span."""
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent a", attributes={
            "gen_ai.operation.name": "invoke_agent"}), tracer.start_as_current_span(
            "execute_tool search", attributes={"gen_ai.operation.name": "execute_tool",
                                               "gen_ai.tool.name": "search"}):
        pass


def _loop(setup: Setup, n: int = 5, attrs: dict[str, Any] | None = None) -> None:
    with setup.tracer.start_as_current_span("invoke_agent triage", attributes=attrs or AGENT):
        for _ in range(n):
            setup.tool("search", '{"q": "refund policy"}', "no results")


class TestEvidenceOnSpans:
    def test_flagged_tool_span_carries_evidence(self, setup: Setup) -> None:
        """With downstream=, the flagged tool span reaches the exporter with loopguard.* attrs."""
        _loop(setup)
        tools = [s for s in setup.spans() if s.name == "execute_tool search"]
        actions = [s.attributes.get("loopguard.action") for s in tools]
        assert actions == [None, None, "warn", "replan", "stop"]
        third = tools[2].attributes
        assert third["loopguard.code"] == "STAGNANT_RESULT"
        assert third["loopguard.detector"] == "stagnation"
        assert third["loopguard.count"] == 3
        assert list(third["loopguard.repeats_span_ids"]) == [
            format(s.context.span_id, "016x") for s in tools[:2]]
        evidence = {k: v for k, v in third.items() if k.startswith("loopguard.")}
        assert "refund" not in str(evidence)  # no raw arguments or results in the evidence

    def test_flagged_span_keeps_what_the_span_limits_dropped(self) -> None:
        """The flagged span's copy reports the attributes, events and links the SDK's span
        limits dropped from it, as the unflagged spans do."""
        from opentelemetry.sdk.trace import SpanLimits
        from opentelemetry.trace import Link, SpanContext

        exporter = InMemorySpanExporter()
        provider = TracerProvider(span_limits=SpanLimits(max_attributes=12, max_events=2,
                                                         max_links=1))
        provider.add_span_processor(LoopGuardSpanProcessor(
            LoopGuardConfig(), downstream=SimpleSpanProcessor(exporter),
            registry=CollectorRegistry(), raise_internal_errors=True))
        tracer = provider.get_tracer("test")
        links = [Link(SpanContext(1, 2, is_remote=True)), Link(SpanContext(1, 3, is_remote=True))]
        with tracer.start_as_current_span("invoke_agent triage", attributes=AGENT):
            for _ in range(3):  # the 10 extra attributes first: the SDK drops the oldest
                with tracer.start_as_current_span("execute_tool search", links=links, attributes={
                        **{f"app.{i}": i for i in range(10)},
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                        "gen_ai.tool.call.arguments": "{}", "gen_ai.tool.call.result": "none"}
                        ) as span:
                    for i in range(4):
                        span.add_event(f"step {i}")
        tools = [s for s in exporter.get_finished_spans() if s.name == "execute_tool search"]
        assert [s.attributes.get("loopguard.action") for s in tools] == [None, None, "warn"]
        assert [(s.dropped_attributes, s.dropped_events, s.dropped_links) for s in tools] == [
            (2, 2, 1)] * 3
        provider.shutdown()

    def test_unflagged_spans_pass_unchanged_and_in_order(self, setup: Setup) -> None:
        """Spans that are not flagged are the very same objects, in end order."""
        _loop(setup, n=2)
        spans = setup.spans()
        assert [s.name for s in spans] == ["execute_tool search"] * 2 + ["invoke_agent triage"]
        assert all(not any(k.startswith("loopguard.") for k in s.attributes) for s in spans)

    def test_event_on_agent_span_without_downstream(self) -> None:
        """Without downstream=, each finding becomes an event on the open agent span."""
        setup = Setup(downstream=False)
        _loop(setup)
        agent = next(s for s in setup.spans() if s.name == "invoke_agent triage")
        events = [e for e in agent.events if e.name == EVENT_NAME]
        assert [e.attributes["loopguard.action"] for e in events] == ["warn", "replan", "stop"]
        assert all(e.attributes["loopguard.span_id"] for e in events)

    def test_healthy_agent_is_not_flagged(self, setup: Setup) -> None:
        """Different queries with different results produce no evidence and no finding."""
        with setup.tracer.start_as_current_span("invoke_agent triage", attributes=AGENT):
            for city in ("paris", "london", "tokyo"):
                setup.tool("search", f'{{"q": "{city}"}}', f"{city} facts")
        assert not any("loopguard.action" in s.attributes for s in setup.spans())
        assert setup.sample("loopguard_tool_calls_total", prompt_template="support@v3",
                            tool="search") == 3


class TestMetricsFromProcessor:
    def test_counts_runs_calls_and_findings(self, setup: Setup) -> None:
        """One looping run: 5 calls, 3 findings, flagged once per reached action."""
        _loop(setup)
        assert setup.sample("loopguard_runs_total", prompt_template="support@v3") == 1
        assert setup.sample("loopguard_loop_detected_total", prompt_template="support@v3",
                            detector="stagnation", action="stop", mode="observe") == 1
        for action in ("warn", "replan", "stop"):
            assert setup.sample("loopguard_runs_flagged_total", prompt_template="support@v3",
                                action=action) == 1

    def test_template_cardinality_is_capped(self) -> None:
        """Past max_prompt_templates, templates count under 'other' and the overflow counter."""
        setup = Setup(max_prompt_templates=2)
        for i in range(4):
            _loop(setup, n=1, attrs={**AGENT, "gen_ai.prompt.name": f"t{i}"})
        assert setup.sample("loopguard_runs_total", prompt_template="other") == 2
        assert setup.sample("loopguard_label_overflow_total", label="prompt_template") == 2


class TestRunStore:
    def test_run_released_when_root_ends(self, setup: Setup) -> None:
        """A run's state is dropped when its root span ends."""
        _loop(setup, n=2)
        assert len(setup.processor.store) == 0
        assert setup.sample("loopguard_open_runs") == 0

    @pytest.mark.parametrize("downstream", [True, False])
    def test_a_plain_root_ends_its_own_run_only(self, downstream: bool) -> None:
        """A root without markers (an HTTP request) ends its trace's run, and no other."""
        from opentelemetry import trace

        setup = Setup(downstream=downstream)
        agent = setup.tracer.start_span("invoke_agent triage", attributes=AGENT)
        with trace.use_span(agent):
            setup.tool("search", '{"q": 1}', "r")
        setup.provider.force_flush()
        with setup.tracer.start_as_current_span("GET /health"):
            pass
        assert len(setup.processor.store) == 1  # another trace's root: the agent's run stays
        request = setup.tracer.start_span("POST /chat")
        with trace.use_span(request):
            setup.tool("search", '{"q": 1}', "r")
        setup.provider.force_flush()
        assert len(setup.processor.store) == 2
        request.end()  # nothing queued: handled inside span.end()
        assert len(setup.processor.store) == 1
        agent.end()
        setup.provider.force_flush()
        assert len(setup.processor.store) == 0
        setup.provider.shutdown()

    def test_capacity_evictions_are_counted(self) -> None:
        """Past max_runs open runs, the least recently used is evicted and counted."""
        setup = Setup(max_runs=2)
        roots = [setup.tracer.start_span("invoke_agent triage", attributes=AGENT)
                 for _ in range(3)]
        from opentelemetry import trace

        for root in roots:
            with trace.use_span(root):
                setup.tool("search", '{"q": 1}', "r")
        setup.provider.force_flush()
        assert len(setup.processor.store) == 2
        assert setup.sample("loopguard_evicted_runs_total", reason="capacity") == 1
        for root in roots:
            root.end()

    def test_idle_runs_expire(self) -> None:
        """Runs idle longer than run_ttl_seconds are dropped and counted as ttl evictions."""
        setup = Setup(run_ttl_seconds=10.0)
        from opentelemetry import trace

        root = setup.tracer.start_span("invoke_agent triage", attributes=AGENT)
        with trace.use_span(root):
            setup.tool("search", '{"q": 1}', "r")
        setup.provider.force_flush()
        setup.clock.advance(11)
        setup.processor.store.expire()
        assert len(setup.processor.store) == 0
        assert setup.sample("loopguard_evicted_runs_total", reason="ttl") == 1
        root.end()

    def test_conversation_runs_span_traces(self) -> None:
        """With run_key=conversation, calls of two traces sharing a conversation add up."""
        setup = Setup(run_key="conversation")
        for _ in range(2):
            with setup.tracer.start_as_current_span("invoke_agent triage", attributes={
                    **AGENT, "gen_ai.conversation.id": "conv-1"}):
                for _ in range(2):
                    setup.tool("search", '{"q": "x"}', "none")
        flagged = [s for s in setup.spans() if "loopguard.action" in s.attributes]
        assert [s.attributes["loopguard.call_index"] for s in flagged] == [3, 4]
        assert flagged[0].attributes["loopguard.run_id"] == "conv-1"

    def test_agent_runs_in_one_trace_stay_apart(self) -> None:
        """With run_key=agent, two agent invocations in one trace are two runs, as ``check``
        groups them; the handoff between them (a sibling's start) crosses runs and counts in
        none; the root's end drops both, and a root of another trace none."""
        from opentelemetry import trace

        setup = Setup(run_key="agent")
        root = setup.tracer.start_span("POST /chat")
        with trace.use_span(root):
            for name in ("triage", "billing"):
                with setup.tracer.start_as_current_span(f"invoke_agent {name}", attributes={
                        **AGENT, "gen_ai.agent.name": name}):
                    for _ in range(3):
                        setup.tool("search", '{"q": "x"}', "none")
        setup.provider.force_flush()
        runs = setup.processor.store._runs.values()
        assert sorted((e.tool_calls, list(e.state.handoff_state.agents)) for e in runs) == [
            (3, []), (3, [])]
        with setup.tracer.start_as_current_span("GET /health"):
            pass
        assert len(setup.processor.store) == 2
        root.end()
        setup.provider.force_flush()
        assert len(setup.processor.store) == 0
        live = {s.attributes["loopguard.run_id"] for s in setup.spans()
                if "loopguard.run_id" in s.attributes}
        records = [span_record_from_readable(s) for s in setup.spans()]
        checked = {r.run_id for r in Checker(LoopGuardConfig.create(run_key="agent")).run(
            iter(records)) if r.findings}
        assert len(live) == 2 and live == checked
        setup.provider.shutdown()

    def test_a_trace_of_many_agent_invocations_notes_a_bounded_number(self) -> None:
        """With run_key=agent, a root open through 1,100 agent invocations (a batch job) keeps
        the latest 1,024 noted for its end, which drops their runs; the oldest are left to
        the TTL instead of every invocation growing the trace's note for as long as it runs."""
        from opentelemetry import trace

        setup = Setup(run_key="agent")
        root = setup.tracer.start_span("batch job")
        with trace.use_span(root):
            for _ in range(1100):
                with setup.tracer.start_as_current_span("invoke_agent triage", attributes=AGENT):
                    setup.tool("search", '{"q": "x"}', "none")
        setup.provider.force_flush()
        assert len(setup.processor.store) == 1100  # each invocation's
        noted = setup.processor._runs.traces[root.get_span_context().trace_id].runs
        assert len(noted) == 1024
        root.end()
        setup.provider.force_flush()
        assert len(setup.processor.store) == 1100 - 1024
        setup.provider.shutdown()

    def test_conversation_found_only_on_tool_spans(self) -> None:
        """When only the tool spans carry the conversation id, a chat span that ends first
        must not pin the trace to a run of its own: both traces' calls add up in conv-1."""
        setup = Setup(run_key="conversation")
        chat = {"gen_ai.operation.name": "chat"}
        for _ in range(2):
            with setup.tracer.start_as_current_span("invoke_agent triage", attributes={
                    "gen_ai.operation.name": "invoke_agent"}):
                for _ in range(2):
                    with setup.tracer.start_as_current_span("chat gpt-4o", attributes=chat):
                        pass
                    setup.tool("search", '{"q": "x"}', "none",
                               **{"gen_ai.conversation.id": "conv-1"})
        flagged = [s for s in setup.spans() if "loopguard.action" in s.attributes]
        assert [s.attributes["loopguard.call_index"] for s in flagged] == [3, 4]
        assert {s.attributes["loopguard.run_id"] for s in flagged} == {"conv-1"}
        setup.provider.shutdown()

    def test_template_from_the_model_spans(self) -> None:
        """A template named only on the chat spans (as Langfuse and GenAI prompt management
        put it) labels the run's tool calls, as ``check`` reports it."""
        setup = Setup()
        with setup.tracer.start_as_current_span("invoke_agent triage", attributes={
                "gen_ai.operation.name": "invoke_agent"}):
            for city in ("paris", "london"):
                with setup.tracer.start_as_current_span("chat gpt-4o", attributes={
                        "gen_ai.operation.name": "chat", "gen_ai.prompt.name": "support",
                        "gen_ai.prompt.version": "v3"}):
                    pass
                setup.tool("search", f'{{"q": "{city}"}}', f"{city} facts")
        assert setup.sample("loopguard_tool_calls_total", prompt_template="support@v3",
                            tool="search") == 2
        assert setup.sample("loopguard_tool_calls_total", prompt_template="unknown",
                            tool="search") == 0
        setup.provider.shutdown()

    @pytest.mark.skipif(sys.platform == "win32", reason="fork")
    def test_store_is_empty_in_a_forked_child(self, setup: Setup) -> None:
        """After os.fork the child starts with an empty store (no inherited runs), no trace
        noted as having one, and a free lock even if a thread held it at the fork."""
        from opentelemetry import trace

        root = setup.tracer.start_span("invoke_agent triage", attributes=AGENT)
        with trace.use_span(root):
            setup.tool("search", '{"q": 1}', "r")
        setup.processor.force_flush()  # the parent's worker has taken the call into its run
        read, write = os.pipe()
        with setup.processor._runs.lock:  # as a worker in the middle of a release would
            pid = os.fork()
            if pid == 0:  # pragma: no cover - child
                processor = setup.processor
                os.write(write, f"{len(processor.store)} {len(processor._traces)} "
                                f"{processor._runs.lock.locked()}".encode())
                os._exit(0)
        os.waitpid(pid, 0)
        assert os.read(read, 32) == b"0 0 False"
        assert len(setup.processor.store) == 1
        root.end()
        setup.processor.force_flush()
        assert len(setup.processor.store) == 0


    @pytest.mark.skipif(sys.platform == "win32", reason="fork")
    def test_locks_held_at_a_fork_are_free_in_the_child(self, setup: Setup) -> None:
        """The error guard's and the label caps' locks, the shared metrics' one and the one of
        the guards' supplied content, held by another thread at the fork (a contained error, a
        new tool label, a guard's hand-over), were copied held: the child's first contained
        error, new label or tool span hung it. The child starts with no supplied content."""
        from otel_loopguard import metrics as metrics_module
        from otel_loopguard.metrics import _otel

        processor = setup.processor
        caps = [cap for cap in vars(processor.metrics).values() if hasattr(cap, "limit")]
        processor.supply("00000000000000aa", arguments="{}")  # a guarded call waiting
        held = [processor.guard._lock, _otel._BUILT_LOCK, metrics_module._SHARED_LOCK,
                processor._supplied_lock, *(cap._lock for cap in caps)]
        assert len(held) >= 5
        read, write = os.pipe()
        for lock in held:
            lock.acquire()
        try:
            pid = os.fork()
            if pid == 0:  # pragma: no cover - child
                states = [processor.guard._lock.locked(), _otel._BUILT_LOCK.locked(),
                          metrics_module._SHARED_LOCK.locked(), processor._supplied_lock.locked(),
                          bool(processor._supplied), *(cap._lock.locked() for cap in caps)]
                os.write(write, str(sum(states)).encode())
                os._exit(0)
        finally:
            for lock in held:
                lock.release()
        os.waitpid(pid, 0)
        assert os.read(read, 32) == b"0"


class TestRunSummary:
    def test_the_current_run_is_summarised_until_it_ends(self, setup: Setup) -> None:
        """Inside the agent span the summary counts its calls; once the run ended: None."""
        with setup.tracer.start_as_current_span("invoke_agent triage", attributes=AGENT) as agent:
            for _ in range(4):
                setup.tool("search", '{"q": "refund policy"}', "no results")
            summary = setup.processor.run_summary()
        assert summary is not None
        assert (summary["tool_calls"], summary["unique_call_signatures"], summary["action"]) == (
            4, 1, "replan")
        assert setup.processor.run_summary(agent.get_span_context()) is None
        assert setup.processor.run_summary() is None  # no span open

    def test_a_run_of_model_spans_alone_has_zero_counts(self) -> None:
        """Before any span of the run, None; after its model spans alone, a summary of 0 calls
        (processor.md says which)."""
        setup = Setup()
        with setup.tracer.start_as_current_span("invoke_agent triage", attributes=AGENT):
            assert setup.processor.run_summary() is None
            with setup.tracer.start_as_current_span("chat gpt-4o", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 10,
                    "gen_ai.response.finish_reasons": ["stop"]}):
                pass
            summary = setup.processor.run_summary()
        assert summary is not None
        assert (summary["tool_calls"], summary["action"]) == (0, "continue")
        setup.provider.shutdown()

    def test_each_agent_invocation_with_run_key_agent(self) -> None:
        """With ``run_key = "agent"`` the summary is the current agent invocation's."""
        setup = Setup(run_key="agent")
        with setup.tracer.start_as_current_span("chat request"):
            with setup.tracer.start_as_current_span("invoke_agent triage", attributes=AGENT):
                for i in range(3):
                    setup.tool("search", f'{{"q": {i}}}', "r")
            with setup.tracer.start_as_current_span("invoke_agent billing", attributes=AGENT):
                setup.tool("refund", '{"id": 1}', "ok")
                summary = setup.processor.run_summary()
        assert summary is not None and summary["tool_calls"] == 1
        setup.provider.shutdown()

    def test_queued_spans_are_counted_first(self) -> None:
        """In the background mode the spans still queued count before the summary is made."""
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider = TracerProvider()
        processor = LoopGuardSpanProcessor(
            LoopGuardConfig(), downstream=BatchSpanProcessor(InMemorySpanExporter()),
            registry=None, raise_internal_errors=True)
        assert processor._worker is not None
        provider.add_span_processor(processor)
        tracer = provider.get_tracer("t")
        with tracer.start_as_current_span("invoke_agent a", attributes=AGENT):
            for i in range(5):
                with tracer.start_as_current_span("execute_tool s", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "s",
                        "gen_ai.tool.call.arguments": f'{{"i": {i}}}'}):
                    pass
            summary = processor.run_summary()
        assert summary is not None and summary["tool_calls"] == 5
        provider.shutdown()

    def test_on_decision_may_summarise_its_own_run(self) -> None:
        """Called from on_decision for the same run, it returns at once (no deadlock)."""
        summaries: list[Any] = []
        setup = Setup()
        setup.processor.engine.on_decision = lambda d: summaries.append(
            setup.processor.run_summary())
        _loop(setup, n=3)
        assert [s["tool_calls"] for s in summaries] == [3]
        assert setup.processor.engine.callback_errors == 0
        setup.provider.shutdown()


class TestNeverBreaksTheAgent:
    @pytest.mark.parametrize("value", [
        b"\xff\xfe", 12345, 3.5, True, ["a", "b"], "{not json", "x" * 5_000_000, "", "[" * 5000,
    ], ids=["bytes", "int", "float", "bool", "list", "bad-json", "5MB", "empty", "deep"])
    def test_malformed_attribute_values(self, setup: Setup, value: Any) -> None:
        """Odd argument/result values are signed, never raised, and detection keeps working."""
        with setup.tracer.start_as_current_span("invoke_agent triage", attributes=AGENT):
            for _ in range(3):
                setup.tool("search", value, value)
        assert setup.processor.guard.errors == 0
        assert setup.sample("loopguard_tool_calls_total", prompt_template="support@v3",
                            tool="search") == 3
        # the third identical call is flagged, whatever its value
        third = [s for s in setup.exporter.get_finished_spans()
                 if s.name == "execute_tool search"][2]
        assert (third.attributes or {}).get("loopguard.action") == "warn"

    def test_long_span_names_are_not_kept(self) -> None:
        """Spans named by their content (a SQL statement, a URL with its query) end without the
        processor keeping their names: 5,000 names of 2,000 characters leave under 1 MB."""
        import gc
        import tracemalloc

        provider = TracerProvider()  # no exporter: it would keep the spans
        provider.add_span_processor(LoopGuardSpanProcessor(
            LoopGuardConfig(), registry=CollectorRegistry(), raise_internal_errors=True))
        tracer = provider.get_tracer("test")
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for i in range(5000):
                with tracer.start_as_current_span(f"SELECT {i:05d} " + "x" * 2000):
                    pass
            gc.collect()
            kept = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert kept < 1_000_000
        provider.shutdown()

    def test_internal_errors_are_contained_and_counted(self) -> None:
        """A failing adapter never reaches the application; it is counted once per call."""

        class Broken:
            name = "broken"

            def to_event(self, span: Any) -> Any:
                raise RuntimeError("adapter bug")

        registry = CollectorRegistry()
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(LoopGuardSpanProcessor(
            LoopGuardConfig(), downstream=SimpleSpanProcessor(exporter), registry=registry,
            adapters=[Broken()]))
        tracer = provider.get_tracer("t")
        for _ in range(3):
            with tracer.start_as_current_span("execute_tool x", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "x"}):
                pass
        provider.force_flush()
        assert len(exporter.get_finished_spans()) == 3  # export not lost
        assert registry.get_sample_value("loopguard_internal_errors_total",
                                         {"kind": "on_end:RuntimeError"}) == 3

    def test_system_exit_in_on_decision_stays_in_the_callback(self) -> None:
        """sys.exit() in on_decision neither escapes span.end() nor keeps the span from the
        downstream processor; it is counted with the callback's errors."""
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        processor = LoopGuardSpanProcessor(
            LoopGuardConfig(), downstream=SimpleSpanProcessor(exporter),
            registry=CollectorRegistry(), on_decision=lambda decision: sys.exit(3),
            raise_internal_errors=True)
        provider.add_span_processor(processor)
        tracer = provider.get_tracer("test")
        with tracer.start_as_current_span("invoke_agent triage", attributes=AGENT):
            for _ in range(5):
                with tracer.start_as_current_span("execute_tool search", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                        "gen_ai.tool.call.arguments": "{}", "gen_ai.tool.call.result": "none"}):
                    pass
        provider.force_flush()  # detection runs on the processor's worker
        assert len(exporter.get_finished_spans()) == 6
        assert processor.engine.callback_errors == 3  # warn, replan, stop

    def test_raise_internal_errors_surfaces_bugs(self) -> None:
        """With raise_internal_errors=True a bug propagates, so tests see it."""

        class Broken:
            name = "broken"

            def to_event(self, span: Any) -> Any:
                raise RuntimeError("adapter bug")

        provider = TracerProvider()
        provider.add_span_processor(LoopGuardSpanProcessor(
            LoopGuardConfig(), registry=CollectorRegistry(), adapters=[Broken()],
            raise_internal_errors=True))
        with pytest.raises(RuntimeError, match="adapter bug"), \
                provider.get_tracer("t").start_as_current_span("execute_tool x", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "x"}):
            pass


class TestDownstreamStart:
    def test_a_downstream_with_its_own_on_start_sees_every_start(self) -> None:
        """on_start is skipped only for the SDK's empty ones; a real one sees every span."""
        from opentelemetry.sdk.trace import SpanProcessor

        started: list[str] = []

        class Recording(SpanProcessor):
            def on_start(self, span: Any, parent_context: Any = None) -> None:
                started.append(span.name)

        provider = TracerProvider()
        provider.add_span_processor(LoopGuardSpanProcessor(
            LoopGuardConfig(), downstream=Recording(), registry=CollectorRegistry()))
        tracer = provider.get_tracer("test")
        with tracer.start_as_current_span("invoke_agent a"), \
                tracer.start_as_current_span("execute_tool t"):
            pass
        provider.shutdown()
        assert started == ["invoke_agent a", "execute_tool t"]


def test_signature_hooks_through_the_processor() -> None:
    """The engine's signature hooks see the span's JSON text and decide what repeats: a nonce
    in the arguments and a server name in the result no longer hide a stagnant call."""
    import json

    from otel_loopguard import LoopEngine

    def fields(value: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value

    config = LoopGuardConfig.create()
    engine = LoopEngine(
        config, signature=lambda tool, args: str(fields(args).get("customer_id")),
        result_signature=lambda tool, result: json.dumps(fields(result).get("items")))
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(LoopGuardSpanProcessor(
        config, engine=engine, downstream=SimpleSpanProcessor(exporter),
        registry=CollectorRegistry(), raise_internal_errors=True))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("invoke_agent a",
                                      attributes={"gen_ai.operation.name": "invoke_agent"}):
        for n in range(3):
            with tracer.start_as_current_span("execute_tool crm", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "crm",
                    "gen_ai.tool.call.arguments": json.dumps({"customer_id": 42, "nonce": n}),
                    "gen_ai.tool.call.result": json.dumps({"items": [], "served_by": f"n{n}"})}):
                pass
    provider.force_flush()
    codes = [(s.attributes or {}).get("loopguard.code") for s in exporter.get_finished_spans()
             if s.name == "execute_tool crm"]
    assert codes == [None, None, "STAGNANT_RESULT"]
    assert engine.callback_errors == 0
    provider.shutdown()


def test_install_twice_keeps_one_processor(caplog: pytest.LogCaptureFixture) -> None:
    """A second ``install()`` on the same provider returns the first processor (with a
    warning) instead of watching every span twice or failing to register metrics again."""
    from otel_loopguard.processor import install

    provider = TracerProvider()
    registry = CollectorRegistry()
    first = install(tracer_provider=provider, registry=registry)
    with caplog.at_level("WARNING", logger="otel_loopguard.processor"):
        second = install(tracer_provider=provider, registry=registry)
    assert second is first
    assert "already on this tracer provider" in caplog.text
    processors = provider._active_span_processor._span_processors
    assert sum(isinstance(p, LoopGuardSpanProcessor) for p in processors) == 1
    provider.shutdown()


def test_install_twice_still_exports_through_the_second_downstream() -> None:
    """Under ``opentelemetry-instrument`` loopguard is already installed when the application
    calls ``install(downstream=...)``: the processor there is returned, and the downstream
    processor is added to the provider by itself instead of being dropped with its spans."""
    from otel_loopguard.processor import install

    provider = TracerProvider()
    registry = CollectorRegistry()
    first = install(tracer_provider=provider, registry=registry)  # as post_instrument does
    exporter = InMemorySpanExporter()
    assert install(tracer_provider=provider, registry=registry,
                   downstream=SimpleSpanProcessor(exporter)) is first
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
            "gen_ai.tool.call.arguments": '{"q": 1}', "gen_ai.tool.call.result": "none"}
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent triage", attributes=AGENT):
        for _ in range(3):
            with tracer.start_as_current_span("execute_tool search", attributes=tool):
                pass
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["execute_tool search"] * 3 + ["invoke_agent triage"]
    assert [e.name for e in spans[-1].events] == [EVENT_NAME]  # the first one's evidence
    processors = provider._active_span_processor._span_processors
    assert sum(isinstance(p, LoopGuardSpanProcessor) for p in processors) == 1
    provider.shutdown()


def test_install_serves_the_registry_the_processor_counts_into() -> None:
    """``install(registry=...)`` with a metrics port serves that registry on ``/metrics``,
    not the global one the processor does not count into."""
    import socket
    import urllib.request

    from otel_loopguard.processor import install

    with socket.socket() as probe:  # a free port (metrics_port 0 would not say which)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = TracerProvider()
    registry = CollectorRegistry()
    install(LoopGuardConfig.create(metrics_port=port), tracer_provider=provider,
            registry=registry)
    _one_search(provider)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        body = answer.read().decode()
    assert 'loopguard_tool_calls_total{prompt_template="unknown",tool="search"} 1.0' in body
    provider.shutdown()


def test_the_metrics_server_of_install_stops_with_the_processor() -> None:
    """``install()``'s ``/metrics`` server could not be stopped: after the provider's shutdown
    its port stayed bound, and a second ``install()`` on it failed. It is the processor's now
    (``metrics_server``, port 0 picks one), stopped by its shutdown."""
    import socket

    from otel_loopguard.processor import install

    provider = TracerProvider()
    processor = install(LoopGuardConfig.create(metrics_port=0), tracer_provider=provider,
                        registry=CollectorRegistry())
    port = processor.metrics_server.server_port
    assert port > 0
    provider.shutdown()
    assert processor.metrics_server is None
    with socket.socket() as again:
        again.bind(("127.0.0.1", port))  # free again


def test_a_busy_metrics_port_is_named_by_install_and_start_metrics_server() -> None:
    """``install()`` with ``LOOPGUARD_METRICS_PORT`` on a busy port, and
    ``start_metrics_server`` on one, raise an ``OSError`` naming the address, not only the
    socket's "[Errno 98] Address already in use"; an unknown address is named too."""
    import errno
    import socket

    from otel_loopguard import start_metrics_server
    from otel_loopguard.processor import install

    provider = TracerProvider()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        expected = f"cannot serve /metrics on 127.0.0.1:{port} (Address already in use)"
        with pytest.raises(OSError) as raised:
            install(LoopGuardConfig.create(metrics_port=port), tracer_provider=provider,
                    registry=CollectorRegistry())
        assert (raised.value.errno, raised.value.strerror) == (errno.EADDRINUSE, expected)
        assert str(raised.value) == f"[Errno {errno.EADDRINUSE}] {expected}"
        with pytest.raises(OSError, match=re.escape(f"/metrics on 127.0.0.1:{port} (")):
            start_metrics_server(port, registry=CollectorRegistry())
    with pytest.raises(OSError, match=re.escape("/metrics on nowhere.invalid:0 (")):
        start_metrics_server(0, "nowhere.invalid", registry=CollectorRegistry())
    provider.shutdown()


def test_a_processor_built_by_hand_serves_no_metrics_port() -> None:
    """``metrics_port`` (``LOOPGUARD_METRICS_PORT``) is read by ``install()``, as
    configuration.md says: a processor constructed directly binds no port, whatever its
    config, so its application serves /metrics with ``start_metrics_server``."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    provider = TracerProvider()
    provider.add_span_processor(LoopGuardSpanProcessor(
        LoopGuardConfig.create(metrics_port=port), registry=CollectorRegistry()))
    _one_search(provider)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))  # free: nothing listens there
    provider.shutdown()
    page = (Path(__file__).resolve().parent.parent / "docs" / "configuration.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("| `LOOPGUARD_METRICS_PORT`"))
    assert "`install()`" in row and "start_metrics_server" in row


def test_processors_on_one_registry_share_its_metrics() -> None:
    """Two processors on one Prometheus registry count into the same series."""
    registry = CollectorRegistry()
    tracer_calls = []
    for _ in range(2):
        provider = TracerProvider()
        provider.add_span_processor(LoopGuardSpanProcessor(
            LoopGuardConfig.create(), registry=registry, raise_internal_errors=True))
        _one_search(provider)
        tracer_calls.append(registry.get_sample_value(
            "loopguard_tool_calls_total", {"prompt_template": "unknown", "tool": "search"}))
        provider.shutdown()
    assert tracer_calls == [1.0, 2.0]
