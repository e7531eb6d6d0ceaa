"""The span processor's hot path stays bounded on hostile input: what it keeps after a trace,
what a late span leaves open, what a huge number or text costs (docs/processor.md)."""

from __future__ import annotations

import gc
import sys
import tracemalloc

import pytest
from opentelemetry import trace as api
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor
from otel_loopguard.adapters import usage_of
from otel_loopguard.signature import VolatileMatcher, analyze_result

TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
        "gen_ai.tool.call.arguments": '{"q": "x"}', "gen_ai.tool.call.result": "no results"}
AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}


class _Drop(SpanProcessor):
    def on_end(self, span: ReadableSpan) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _setup(config: LoopGuardConfig | None = None, background: bool | None = None,
           downstream: SpanProcessor | None = None,
           ) -> tuple[TracerProvider, LoopGuardSpanProcessor, CollectorRegistry]:
    registry = CollectorRegistry()
    processor = LoopGuardSpanProcessor(config or LoopGuardConfig(), registry=registry,
                                       downstream=downstream or _Drop(), background=background)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return provider, processor, registry


def _total(registry: CollectorRegistry, name: str) -> float:
    return sum(s.value for m in registry.collect() for s in m.samples if s.name == name)


@pytest.mark.parametrize("background", [True, False], ids=["background", "inline"])
def test_a_span_ending_after_its_root_leaves_no_run_open(background: bool) -> None:
    """A streamed answer or a late tool span ends after its trace's root: the run its check
    opened is released, not left for the TTL (3,000 such requests filled a store of 1,000)."""
    provider, processor, registry = _setup(background=background)
    tracer = provider.get_tracer("t")
    for _ in range(3):
        root = tracer.start_span("invoke_agent a", attributes=AGENT)
        late = tracer.start_span("execute_tool search", context=api.set_span_in_context(root),
                                 attributes=TOOL)
        root.end()
        late.end()
    provider.force_flush()
    assert len(processor.store) == 0
    assert _total(registry, "loopguard_open_runs") == 0
    assert _total(registry, "loopguard_tool_calls_total") == 3
    provider.shutdown()


def test_the_note_of_ended_roots_is_bounded_and_keeps_the_newest() -> None:
    """Every root span's end is noted for late spans; the note keeps at least the newest
    ``_MAX_ENDED`` roots and at most twice that, however many roots end."""
    from otel_loopguard.processor._runs import _MAX_ENDED

    provider, processor, _ = _setup(background=False)
    tracer = provider.get_tracer("t")
    ids = []
    for _ in range(3 * _MAX_ENDED + 5):
        root = tracer.start_span("GET /health")
        root.end()
        ids.append(root.get_span_context().trace_id)
    runs = processor._runs
    assert _MAX_ENDED <= len(runs.ended) + len(runs.ended_before) <= 2 * _MAX_ENDED
    assert all(runs.root_has_ended(t) for t in ids[-_MAX_ENDED:])
    assert not any(runs.root_has_ended(t) for t in ids[:_MAX_ENDED])
    provider.shutdown()


def test_a_token_count_of_5000_digits_counts_as_not_recorded() -> None:
    """int() refuses more than 4,300 digits: such a count is corrupt, not an error."""
    assert usage_of({"gen_ai.usage.input_tokens": "9" * 5000}) == (0, 0, ())


def test_a_huge_token_count_loses_no_tool_call() -> None:
    """The ValueError it raised dropped the next tool call (warn, -, replan instead of
    warn, replan, stop)."""
    exporter = InMemorySpanExporter()
    provider, _, registry = _setup(downstream=SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent a", attributes=AGENT):
        with tracer.start_as_current_span("chat m", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": "9" * 5000}):
            pass
        for _ in range(5):
            with tracer.start_as_current_span("execute_tool search", attributes=TOOL):
                pass
    provider.force_flush()
    assert _total(registry, "loopguard_tool_calls_total") == 5
    assert _total(registry, "loopguard_internal_errors_total") == 0
    actions = [(s.attributes or {}).get("loopguard.action")
               for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")]
    assert actions == [None, None, "warn", "replan", "stop"]
    provider.shutdown()


def _conversation(conversation: str, name: str, attributes: dict[str, str],
                  ) -> tuple[TracerProvider, LoopGuardSpanProcessor, CollectorRegistry]:
    """One span ``name`` under an agent span of ``conversation``, runs keyed by conversation."""
    provider, processor, registry = _setup(LoopGuardConfig.create(run_key="conversation"),
                                           background=False)
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent a", attributes={
            **AGENT, "gen_ai.conversation.id": conversation}), \
            tracer.start_as_current_span(name, attributes=attributes):
        pass
    return provider, processor, registry


def test_a_flattened_prompt_index_of_5000_digits_keeps_the_turn() -> None:
    provider, processor, registry = _conversation("c1", "chat", {
        "traceloop.span.kind": "llm", "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.{}.content".format("1" * 5000): "hi"})
    entry = processor.store.get("c1")
    assert entry is not None and entry.model_turns == 1
    assert _total(registry, "loopguard_internal_errors_total") == 0
    provider.shutdown()


def test_a_long_tool_name_is_not_kept_after_its_trace_ends() -> None:
    """Five caches kept the raw name: 200 traces with a 200 KB name held 40 MB."""
    provider, _, _ = _setup(background=False)
    tracer = provider.get_tracer("t")
    name = "x" * 200_000 + "!"
    gc.collect()
    before = sys.getrefcount(name)
    with tracer.start_as_current_span("invoke_agent a", attributes=AGENT), \
            tracer.start_as_current_span("execute_tool", attributes={**TOOL,
                                                                    "gen_ai.tool.name": name}):
        pass
    gc.collect()
    assert sys.getrefcount(name) == before
    provider.shutdown()


def test_a_long_conversation_id_is_not_a_run_key_as_it_is() -> None:
    provider, processor, _ = _conversation("c" * 100_000, "execute_tool", TOOL)
    assert processor.store._runs and all(len(run_id) <= 256 for run_id in processor.store._runs)
    provider.shutdown()


def test_a_long_text_result_is_read_without_a_copy_of_it() -> None:
    """A plain text of megabytes is signed by its raw text: no canonical copy (a 100 M-char
    log cost +195 MB and 0.9 s in span.end()), and the same text signs the same."""
    text = "ligne é 12345 took 0.5s\n" * 350_000  # 8.4 M characters, not ASCII
    matcher = VolatileMatcher()
    tracemalloc.start()
    try:
        first = analyze_result(text, matcher)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # hashing it encodes it once (2 bytes a character here); its canonical form took 3.5
    assert peak < 2.5 * len(text)
    assert analyze_result("".join([text]), matcher).digest == first.digest
    assert analyze_result(text + "x", matcher).digest != first.digest


