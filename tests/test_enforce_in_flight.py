"""Enforce mode counts the guarded calls still running: parallel calls meet the limits together.

A guarded call counts toward its run's budget and repetition ladders when it starts, not when
its span ends, so 32 calls started at once cannot all slip under a limit that one call after
another would have hit.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_loopguard import (
    LoopDetectedResult,
    LoopGuardConfig,
    LoopGuardSpanProcessor,
    ToolGuard,
    ToolLoopError,
)
from otel_loopguard.engine import LoopEngine
from otel_loopguard.types import Action, ToolCall

PARALLEL = 32


def _guarded(**config: Any) -> tuple[LoopGuardSpanProcessor, ToolGuard, TracerProvider]:
    provider = TracerProvider()
    processor = LoopGuardSpanProcessor(
        LoopGuardConfig.create(mode="enforce", **config),
        downstream=SimpleSpanProcessor(InMemorySpanExporter()), registry=CollectorRegistry(),
        raise_internal_errors=True)
    provider.add_span_processor(processor)
    return processor, ToolGuard(processor, tracer_provider=provider), provider


class TestParallelThreads:
    def test_budget_counts_the_calls_still_running(self) -> None:
        """With max_tool_calls_stop=5, 32 calls of one run started together run 5 bodies."""
        _, guard, provider = _guarded(enforcement="abort", max_tool_calls_warn=None,
                                      max_tool_calls_stop=5)
        release, lock = threading.Event(), threading.Lock()
        started, outcomes = [], []

        @guard.tool
        def fetch(page: int) -> str:
            with lock:
                started.append(page)
            release.wait(20)
            return f"page {page}"

        def call(page: int, ctx: Any) -> None:
            token = otel_context.attach(ctx)
            try:
                outcomes.append(fetch(page))
            except ToolLoopError as error:
                outcomes.append(error.decision.code)
            finally:
                otel_context.detach(token)

        with provider.get_tracer("app").start_as_current_span("invoke_agent a"):
            ctx = otel_context.get_current()
            threads = [threading.Thread(target=call, args=(page, ctx)) for page in range(PARALLEL)]
            for thread in threads:
                thread.start()
            while True:  # every call either runs its body (and waits) or was refused
                with lock:
                    settled = len(started) + outcomes.count("BUDGET_EXHAUSTED")
                if settled == PARALLEL:
                    break
                threading.Event().wait(0.01)
            release.set()
            for thread in threads:
                thread.join(20)
            after = None
            try:
                fetch(99)
            except ToolLoopError as error:
                after = error.decision.code
        provider.shutdown()
        assert len(started) == 5
        assert outcomes.count("BUDGET_EXHAUSTED") == PARALLEL - 5
        assert after == "BUDGET_EXHAUSTED"  # the stop holds once the 5 have finished


class TestAsyncGather:
    def test_identical_calls_started_together_meet_the_stagnation_ladder(self) -> None:
        """asyncio.gather of 32 identical calls with stagnation_stop=4: 3 bodies run, the
        other 29 get the hint, and a 33rd identical call after they finished is refused too."""
        _, guard, provider = _guarded(enforcement="hint", stagnation_stop=4)
        bodies = []

        @guard.tool
        async def search(query: str) -> str:
            bodies.append(query)
            await asyncio.sleep(0.01)
            return "no results"

        async def agent() -> tuple[list[Any], Any]:
            results = await asyncio.gather(*(search("same") for _ in range(PARALLEL)))
            return list(results), await search("same")

        with provider.get_tracer("app").start_as_current_span("invoke_agent a"):
            results, after = asyncio.run(agent())
        provider.shutdown()
        hinted = [r for r in results if isinstance(r, LoopDetectedResult)]
        assert len(bodies) == 3
        assert len(hinted) == PARALLEL - 3
        assert {r.decision.code for r in hinted} == {"STAGNANT_RESULT"}
        assert isinstance(after, LoopDetectedResult)

    def test_different_calls_in_parallel_are_not_repeats(self) -> None:
        """Parallel calls with different arguments are no repetition: all 32 run."""
        _, guard, provider = _guarded(enforcement="hint", stagnation_stop=4)

        @guard.tool
        async def search(query: str) -> str:
            await asyncio.sleep(0.01)
            return f"results for {query}"

        async def agent() -> list[Any]:
            return list(await asyncio.gather(*(search(f"q{i}") for i in range(PARALLEL))))

        with provider.get_tracer("app").start_as_current_span("invoke_agent a"):
            results = asyncio.run(agent())
        provider.shutdown()
        assert not any(isinstance(r, LoopDetectedResult) for r in results)


class TestInFlightCounter:
    """The engine's counter of running calls: what precheck consults."""

    def test_started_calls_count_until_processed(self) -> None:
        """call_started counts a call; process of its span id, or call_finished, uncounts it."""
        engine = LoopEngine(LoopGuardConfig.create(max_tool_calls_warn=None,
                                                   max_tool_calls_stop=3))
        run = engine.new_run()
        engine.call_started(run, "t", {"a": 1}, "00000000000000a1")
        engine.call_started(run, "t", {"a": 1}, "00000000000000a2")
        engine.call_started(run, "t", {"a": 1}, "00000000000000a2")  # a span two calls share
        assert run.in_flight.calls == 3
        assert [step.tool for step in run.in_flight.steps()] == ["t", "t", "t"]
        assert engine.precheck(run, "t", {"a": 2}).action is Action.STOP  # 0 done + 3 + this
        engine.process(run, ToolCall(tool="t", arguments={"a": 1}, span_id="00000000000000a1"))
        engine.call_finished(run, "00000000000000a1")  # process already did: nothing more
        engine.call_finished(run, "00000000000000a2")
        assert run.in_flight.calls == 1 and list(run.in_flight.by_key) == ["00000000000000a2"]
        engine.call_finished(run, "00000000000000a2")
        engine.call_finished(run, "00000000000000a2")
        assert (run.calls, run.in_flight.calls, run.in_flight.by_key) == (1, 0, {})
        assert engine.precheck(run, "t", {"a": 2}).action is Action.CONTINUE


    def test_calls_started_before_the_first_ended_repeat_its_outcome(self) -> None:
        """Three identical calls start before any has ended (their result not known yet); once
        the first has ended, the two still running are predicted to repeat its outcome, so a
        fourth meets ``stagnation_stop = 4``. They kept the unknown result, and the count
        restarted: with 32 threads, 4 or 5 identical calls ran where 3 should."""
        engine = LoopEngine(LoopGuardConfig.create(mode="enforce", stagnation_stop=4))
        run = engine.new_run()
        keys = [f"00000000000000b{i}" for i in range(3)]
        for key in keys:  # the third is warned, as the third identical call is
            assert engine.precheck(run, "search", {"q": "same"}).action < Action.STOP
            engine.call_started(run, "search", {"q": "same"}, key)
        assert engine.precheck(run, "search", {"q": "same"}).action is Action.STOP
        engine.process(run, ToolCall(tool="search", arguments={"q": "same"}, span_id=keys[0],
                                     result="same-result", has_result=True))
        decision = engine.precheck(run, "search", {"q": "same"})
        assert (decision.action, decision.code) == (Action.STOP, "STAGNANT_RESULT")


class TestOnDecisionAndOtherThreads:
    def test_a_call_of_the_run_on_another_thread_waits_for_the_callback(self) -> None:
        """on_decision runs under its run's lock: a guarded call of that run on another thread
        completes once the callback has returned (documented in processor.md), not before."""
        during: list[bool] = []
        done = threading.Event()
        holder: dict[str, Any] = {}

        def on_decision(decision: Any) -> None:
            if during:
                return
            thread = threading.Thread(target=holder["call"])
            thread.start()
            during.append(done.wait(0.2))
            holder["thread"] = thread

        provider = TracerProvider()
        processor = LoopGuardSpanProcessor(
            LoopGuardConfig.create(mode="enforce", enforcement="hint"),
            downstream=SimpleSpanProcessor(InMemorySpanExporter()), registry=CollectorRegistry(),
            on_decision=on_decision, raise_internal_errors=True)
        provider.add_span_processor(processor)
        guard = ToolGuard(processor, tracer_provider=provider)

        @guard.tool
        def search(query: str) -> str:
            return "no results"

        with provider.get_tracer("app").start_as_current_span("invoke_agent a"):
            ctx = otel_context.get_current()

            def call() -> None:
                token = otel_context.attach(ctx)
                try:
                    search("other")
                finally:
                    otel_context.detach(token)
                    done.set()

            holder["call"] = call
            for _ in range(3):  # the third identical call warns
                search("same")
        holder["thread"].join(10)
        provider.shutdown()
        assert during == [False]
        assert done.is_set()


class TestIntegrationsCheck:
    def test_calls_checked_against_a_shared_span_count_until_finished(self) -> None:
        """Framework integrations may check calls against a span around the tool's own (a
        LangChain chain span), which parallel calls share and whose end says nothing about
        them: each counts as running until the integration says it finished."""
        from otel_loopguard.enforce._verdict import check
        from otel_loopguard.integrations._common import finished

        processor, _, provider = _guarded(enforcement="abort", max_tool_calls_warn=None,
                                          max_tool_calls_stop=3)
        tracer = provider.get_tracer("langchain.instrumentation")
        with tracer.start_as_current_span("invoke_agent a"), \
                tracer.start_as_current_span("tools") as chain:
            first = check(processor, chain, "search", [{"q": 1}])
            second = check(processor, chain, "search", [{"q": 2}])
            third = check(processor, chain, "search", [{"q": 3}])
            fourth = check(processor, chain, "search", [{"q": 4}])
            for verdict in (first, second, third):
                finished(processor, verdict)
            after = check(processor, chain, "search", [{"q": 5}])
            finished(processor, after)
        provider.shutdown()
        assert [v.blocked for v in (first, second, third, fourth, after)] == \
            [False, False, False, True, False]
        assert processor.store.get_or_create(first.run_id)[0].state.in_flight.calls == 0
