"""The three ways in find the same loops in the same spans, for every run key.

The live processor (each span as it ends, on a real ``TracerProvider``), ``serve``'s streaming
checker and ``check`` (a saved trace) share one assembly of spans into runs; here they read the
real-agent corpus (its excerpts and its 2,866 whole runs), a request in
which two agents loop in turn, twice in one conversation, and
generated traces in the GenAI, OpenInference and Traceloop conventions (nested and sibling
agents, handoffs, model turns with token counts, failing and repeated calls), and must flag the
same calls of the same runs with the same detectors and actions, and on the generated traces count
the same waste (tool calls, model turns, tokens, cost) in their reports and metrics.

Not generated: a conversation id that first shows on a span after others of its trace ended.
The live processor cannot know it yet, and puts those spans in the trace's run
(docs/processor.md).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from _replay import replay_live
from corpus import replay
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode
from prometheus_client import CollectorRegistry

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.metrics import LoopGuardMetrics
from otel_loopguard.otlp._sdk import span_record_from_readable
from otel_loopguard.processor import LoopGuardSpanProcessor
from otel_loopguard.receiver import StreamingChecker
from otel_loopguard.replay import Checker, RunReport, iter_spans
from otel_loopguard.types import SpanRecord

CORPUS = Path(__file__).parent / "corpus" / "runs.jsonl.gz"

Finding = tuple[str, str, str, int]
"""A flagged call: run id, detector, action, the call's index in its run."""


def _two_agents() -> list[SpanRecord]:
    """Two requests of one conversation; in each, agents triage and billing repeat a search."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("two-agents")
    for _ in range(2):
        with tracer.start_as_current_span("POST /chat"):
            for name in ("triage", "billing"):
                with tracer.start_as_current_span(f"invoke_agent {name}", attributes={
                        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name,
                        "gen_ai.conversation.id": "conv-1"}):
                    for _ in range(4):
                        with tracer.start_as_current_span("chat", attributes={
                                "gen_ai.operation.name": "chat"}):
                            pass
                        with tracer.start_as_current_span("execute_tool search", attributes={
                                "gen_ai.operation.name": "execute_tool",
                                "gen_ai.tool.name": "search",
                                "gen_ai.tool.call.arguments": f'{{"q": "{name}"}}',
                                "gen_ai.tool.call.result": "no results"}):
                            pass
    provider.shutdown()
    return [span_record_from_readable(s) for s in exporter.get_finished_spans()]


@pytest.fixture(scope="module", name="records")
def _records() -> list[SpanRecord]:
    return list(iter_spans(str(CORPUS), strict=True)) + _two_agents()


def _from_reports(reports: list[RunReport]) -> set[Finding]:
    return {(r.run_id, d.detector, d.action.label, d.call_index)
            for r in reports for d in r.findings}


def _from_spans(spans: Sequence[ReadableSpan]) -> set[Finding]:
    return {(str(s.attributes["loopguard.run_id"]), str(s.attributes["loopguard.detector"]),
             str(s.attributes["loopguard.action"]), int(s.attributes["loopguard.call_index"]))
            for s in spans if s.attributes and "loopguard.action" in s.attributes}


@pytest.mark.parametrize("run_key", ["trace", "agent", "conversation"])
def test_live_serve_and_check_flag_the_same_calls(records: list[SpanRecord],
                                                  run_key: str) -> None:
    config = LoopGuardConfig.create(run_key=run_key)
    spans, _ = replay_live(records, config, downstream=True)  # new trace and span ids
    live = _from_spans(spans)
    exported = [span_record_from_readable(s) for s in spans]  # what a Collector receives
    checked = _from_reports(list(Checker(config).run(iter(exported))))
    streaming = StreamingChecker(config, raise_internal_errors=True)
    served = _from_reports(streaming.add(exported) + streaming.flush())
    assert len(checked) > 20  # the corpus loops, and so do both agents
    assert served == checked
    assert live == checked


def test_live_serve_and_check_flag_the_same_calls_of_whole_runs(tmp_path: Path) -> None:
    """The development corpus's whole runs (every family, 2,866 runs), as the live processor
    sees them span by span, and as ``serve``'s streaming checker and ``check`` read what it
    exported: the same calls of the same runs flagged, with the same detectors and actions."""
    path = tmp_path / "runs.jsonl"
    replay.write_otlp(list(replay.iter_runs(replay.RUNS)), path)
    config = LoopGuardConfig()
    spans, _ = replay_live(list(iter_spans(str(path), strict=True)), config, downstream=True)
    live = _from_spans(spans)
    exported = [span_record_from_readable(s) for s in spans]
    checked = _from_reports(list(Checker(config).run(iter(exported))))
    streaming = StreamingChecker(config, raise_internal_errors=True)
    served = _from_reports(streaming.add(exported) + streaming.flush())
    assert len({run_id for run_id, *_ in checked}) > 300  # loops and runs over budget
    assert live == checked
    assert served == checked


Span = tuple[str, dict[str, Any]]


class _GenAI:
    """The spans of the official GenAI conventions."""

    @staticmethod
    def chat() -> Span:
        return "chat", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m1",
                        "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 10}

    @staticmethod
    def content(text: str) -> dict[str, str]:
        return {"gen_ai.input.messages": json.dumps([{"role": "user", "content": text}])}

    @staticmethod
    def handoff(source: str, target: str) -> Span:
        return f"handoff {source} -> {target}", {
            "gen_ai.operation.name": "handoff", "gen_ai.handoff.from_agent": source,
            "gen_ai.handoff.to_agent": target}

    @staticmethod
    def tool(tool: str, arguments: str, result: str) -> Span:
        return f"execute_tool {tool}", {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
            "gen_ai.tool.call.arguments": arguments, "gen_ai.tool.call.result": result}

    @staticmethod
    def agent(name: str) -> Span:
        return f"invoke_agent {name}", {"gen_ai.operation.name": "invoke_agent",
                                        "gen_ai.agent.name": name}


class _OpenInference:
    """The spans of OpenInference: agents known by attributes alone, handoffs as tool spans."""

    @staticmethod
    def chat() -> Span:
        return "llm", {"openinference.span.kind": "LLM", "llm.model_name": "m1",
                       "llm.token_count.prompt": 100, "llm.token_count.completion": 10}

    @staticmethod
    def content(text: str) -> dict[str, str]:
        return {"llm.input_messages.0.message.content": text}

    @staticmethod
    def handoff(source: str, target: str) -> Span:
        return f"handoff to {target}", {"openinference.span.kind": "TOOL",
                                        "tool.name": f"transfer_to_{target}"}

    @staticmethod
    def tool(tool: str, arguments: str, result: str) -> Span:
        return tool, {"openinference.span.kind": "TOOL", "tool.name": tool,
                      "input.value": arguments, "output.value": result}

    @staticmethod
    def agent(name: str) -> Span:
        return name, {"openinference.span.kind": "AGENT", "agent.name": name}


class _Traceloop:
    """The spans of OpenLLMetry (Traceloop): agents named ``x.agent``, no handoff spans."""

    @staticmethod
    def chat() -> Span:
        return "openai.chat", {"traceloop.span.kind": "llm", "gen_ai.request.model": "m1",
                               "gen_ai.usage.prompt_tokens": 100,
                               "gen_ai.usage.completion_tokens": 10}

    @staticmethod
    def content(text: str) -> dict[str, str]:
        return {"gen_ai.prompt.0.content": text}

    @staticmethod
    def handoff(source: str, target: str) -> Span:
        return "step", {}  # the convention has none: a span no adapter reads

    @staticmethod
    def tool(tool: str, arguments: str, result: str) -> Span:
        return f"{tool}.tool", {"traceloop.span.kind": "tool", "traceloop.entity.name": tool,
                                "traceloop.entity.input": arguments,
                                "traceloop.entity.output": result}

    @staticmethod
    def agent(name: str) -> Span:
        return f"{name}.agent", {"traceloop.span.kind": "agent", "traceloop.entity.name": name}


def _agent_work(tracer: Any, rng: random.Random, spans: Any, depth: int) -> None:
    """Model turns, handoffs, tool calls (some failing, few distinct: some repeat), sub-agents."""
    for _ in range(rng.randint(2, 12)):
        pick = rng.random()
        if pick < 0.25:
            name, attrs = spans.chat()
            if rng.random() < 0.3:
                attrs["gen_ai.prompt.name"] = rng.choice(["p1", "p2"])
            if rng.random() < 0.9:  # content captured: a harness's feedback, or a user's reply
                attrs.update(spans.content("hello" if rng.random() < 0.1 else "rejected"))
            with tracer.start_as_current_span(name, attributes=attrs):
                pass
        elif pick < 0.32:
            name, attrs = spans.handoff(*rng.sample(["a", "b", "c"], 2))
            with tracer.start_as_current_span(name, attributes=attrs):
                pass
        elif pick < 0.85 or depth >= 2:
            tool = rng.choice(["search", "fetch", "bash"])
            key = {"search": "q", "fetch": "url", "bash": "command"}[tool]
            name, attrs = spans.tool(tool, f'{{"{key}": "{rng.randint(1, 2)}"}}',
                                     rng.choice(["r1", "none"]))
            with tracer.start_as_current_span(name, attributes=attrs) as span:
                if rng.random() < 0.2:
                    span.set_status(Status(StatusCode.ERROR, "boom"))
        else:
            name, attrs = spans.agent(rng.choice(["a", "b", "c"]))
            if rng.random() < 0.3:
                attrs["gen_ai.prompt.name"] = rng.choice(["p1", "p2"])
            with tracer.start_as_current_span(name, attributes=attrs):
                _agent_work(tracer, rng, spans, depth + 1)


def _generated(seed: int, config: LoopGuardConfig, spans: Any = _GenAI, *,
               background: bool = True
               ) -> tuple[set[Finding], list[SpanRecord], CollectorRegistry]:
    """Run 1 to 3 generated traces through the live processor; its findings, spans and metrics.

    ``background=False``: detection inside ``span.end()``, as in enforce mode.
    """
    rng = random.Random(seed)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    registry = CollectorRegistry()
    provider.add_span_processor(LoopGuardSpanProcessor(
        config, downstream=SimpleSpanProcessor(exporter), registry=registry,
        raise_internal_errors=True, background=background))
    tracer = provider.get_tracer("generated")
    for _ in range(rng.randint(1, 3)):
        root, attrs = ("POST /chat", {}) if rng.random() < 0.5 else spans.agent("a")
        if rng.random() < 0.5:
            attrs = {**attrs, "gen_ai.conversation.id": "c1"}
        with tracer.start_as_current_span(root, attributes=attrs):
            _agent_work(tracer, rng, spans, 0)
    provider.shutdown()
    ended = exporter.get_finished_spans()
    return _from_spans(ended), [span_record_from_readable(s) for s in ended], registry


@pytest.mark.parametrize(("spans", "background"), [
    (_GenAI, True), (_GenAI, False), (_OpenInference, True), (_Traceloop, True)],
    ids=["genai", "genai-in-span-end", "openinference", "traceloop"])
@pytest.mark.parametrize("run_key", ["trace", "agent", "conversation"])
def test_generated_traces_get_the_same_findings_everywhere(run_key: str, spans: Any,
                                                           background: bool) -> None:
    config = LoopGuardConfig.create(run_key=run_key, prices={
        "m1": {"input_per_million": 1000.0, "output_per_million": 2000.0}})
    findings = calls = turns = 0
    for seed in range(80):
        live, exported, registry = _generated(seed, config, spans, background=background)
        reports = list(Checker(config).run(iter(exported)))
        checked = _from_reports(reports)
        served = CollectorRegistry()
        streaming = StreamingChecker(config, metrics=LoopGuardMetrics(served),
                                     raise_internal_errors=True)
        streamed = streaming.add(exported) + streaming.flush()
        assert _from_reports(streamed) == checked, seed
        assert live == checked, seed
        waste = {r.run_id: r.waste for r in reports if r.waste}
        assert {r.run_id: r.waste for r in streamed if r.waste} == waste, seed
        assert _wasted(registry, by_template=False) == pytest.approx(
            _wasted(served, by_template=False)), seed
        findings += len(checked)
        calls += sum(w.tool_calls for w in waste.values())
        turns += sum(w.model_turns for w in waste.values())
    assert findings > 10  # the traces loop often enough to compare (12 or more per variant)
    assert calls > 1 and turns > 0  # and their loops waste calls, and the turns that made them


_WASTED = ("loopguard_wasted_tool_calls_total", "loopguard_wasted_tokens_total",
           "loopguard_wasted_cost_total")


def _wasted(registry: CollectorRegistry, *, by_template: bool = True
            ) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The waste counters' series (tool seconds left out), ``service_name`` dropped, and
    ``prompt_template`` too unless ``by_template`` (the processor may label a run's first
    calls ``unknown``: docs/architecture.md)."""
    dropped = {"service_name"} if by_template else {"service_name", "prompt_template"}
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for metric in registry.collect():
        for s in metric.samples:
            if s.name in _WASTED and s.value:
                key = (s.name, tuple(sorted((k, v) for k, v in s.labels.items()
                                            if k not in dropped)))
                out[key] = out.get(key, 0.0) + s.value
    return out


def test_a_conversation_wastes_the_same_tokens_everywhere() -> None:
    """A conversation's second request resumes with a call its first request's model asked for
    (a tool approved in between): the call is wasted, and so is the turn that issued it, the
    run's latest model turn, in another trace. ``check`` and ``serve`` numbered each trace's
    turns again, so the call had no turn there, while the live processor counted its tokens."""
    config = LoopGuardConfig.create(run_key="conversation", prices={
        "m1": {"input_per_million": 1000.0, "output_per_million": 2000.0}})
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    live = CollectorRegistry()
    provider.add_span_processor(LoopGuardSpanProcessor(
        config, downstream=SimpleSpanProcessor(exporter), registry=live,
        raise_internal_errors=True))
    tracer = provider.get_tracer("conversation")
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "triage",
             "gen_ai.conversation.id": "conv-1"}
    search = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
              "gen_ai.tool.call.arguments": '{"q": "refund"}',
              "gen_ai.tool.call.result": "no results"}
    for calls in ((True, True, True), (False, True)):  # a turn before each call, or none
        with tracer.start_as_current_span("invoke_agent triage", attributes=agent):
            for n, turn in enumerate(calls, 1):
                if turn:
                    with tracer.start_as_current_span("chat m1", attributes={
                            "gen_ai.operation.name": "chat", "gen_ai.request.model": "m1",
                            "gen_ai.usage.input_tokens": 100 * n,
                            "gen_ai.usage.output_tokens": 10 * n}):
                        pass
                with tracer.start_as_current_span("execute_tool search", attributes=search):
                    pass
    provider.shutdown()
    exported = [span_record_from_readable(s) for s in exporter.get_finished_spans()]
    (checked,) = Checker(config).run(iter(exported))
    served = CollectorRegistry()
    streaming = StreamingChecker(config, metrics=LoopGuardMetrics(served),
                                 raise_internal_errors=True)
    (report,) = streaming.add(exported) + streaming.flush()
    # warn at the 3rd call; the 4th (the resumed one: turn 3, 300 + 30 tokens) and the 5th
    # (turn 2 of the second request: 200 + 20 tokens) are wasted
    waste = checked.waste
    assert (waste.tool_calls, waste.model_turns, waste.input_tokens, waste.output_tokens) == (
        2, 2, 500, 50)
    assert waste.cost == pytest.approx({"USD": 0.6})
    assert report.waste == waste
    assert _wasted(live) == _wasted(served)
    assert _wasted(live)[("loopguard_wasted_tokens_total", (
        ("prompt_template", "unknown"), ("type", "input")))] == 500
