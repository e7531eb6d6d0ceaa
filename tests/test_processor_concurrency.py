"""The processor under many threads ending spans at once."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_loopguard import LoopGuardConfig
from otel_loopguard.processor import LoopGuardSpanProcessor

THREADS = 32
RUNS_PER_THREAD = 5


@pytest.fixture(name="tiny_switch_interval")
def _tiny_switch_interval() -> Iterator[None]:
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


class TestConcurrency:
    @pytest.mark.usefixtures("tiny_switch_interval")
    def test_exact_counts_and_no_cross_talk(self) -> None:
        """32 threads of independent runs: exact counts, and each run's findings are its own."""
        registry = CollectorRegistry()
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(LoopGuardSpanProcessor(
            LoopGuardConfig(), downstream=SimpleSpanProcessor(exporter), registry=registry,
            raise_internal_errors=True))
        tracer = provider.get_tracer("t")
        barrier = threading.Barrier(THREADS)

        def worker(n: int) -> None:
            barrier.wait()
            for run in range(RUNS_PER_THREAD):
                with tracer.start_as_current_span("invoke_agent a", attributes={
                        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a",
                        "gen_ai.prompt.name": f"tpl{n % 4}"}):
                    # looping threads repeat one call 5 times; healthy ones vary it
                    for i in range(5):
                        q = "same" if n % 2 == 0 else f"q{n}-{run}-{i}"
                        with tracer.start_as_current_span("execute_tool s", attributes={
                                "gen_ai.operation.name": "execute_tool",
                                "gen_ai.tool.name": "search",
                                "gen_ai.tool.call.arguments": f'{{"q": "{q}"}}'}) as span:
                            span.set_attribute("gen_ai.tool.call.result", f"r-{q}")

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        provider.force_flush()
        runs = THREADS * RUNS_PER_THREAD
        total = sum(registry.get_sample_value("loopguard_tool_calls_total", {
            "prompt_template": f"tpl{i}", "tool": "search"}) or 0 for i in range(4))
        assert total == runs * 5
        assert sum(registry.get_sample_value("loopguard_runs_total", {
            "prompt_template": f"tpl{i}"}) or 0 for i in range(4)) == runs
        flagged = [s for s in exporter.get_finished_spans() if "loopguard.action" in s.attributes]
        looping_runs = runs // 2
        assert len(flagged) == looping_runs * 3  # warn, replan, stop in each looping run
        for span in flagged:  # no cross-talk: evidence only points into the span's own trace
            assert span.attributes["loopguard.run_id"] == format(span.context.trace_id, "032x")
        by_run: dict[str, list[int]] = {}
        for span in flagged:
            by_run.setdefault(span.attributes["loopguard.run_id"], []).append(
                span.attributes["loopguard.call_index"])
        assert all(sorted(v) == [3, 4, 5] for v in by_run.values())
        assert len(by_run) == looping_runs
