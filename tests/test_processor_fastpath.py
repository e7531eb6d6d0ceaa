"""The processor's pre-filter for the default adapters (``may_be_event``: no record built for
agent, chain and model spans) gives the engine exactly what asking every adapter gives it."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import SpanContext, Status, StatusCode
from prometheus_client import CollectorRegistry

from otel_loopguard import LoopGuardConfig
from otel_loopguard.adapters import (
    DEFAULT_ADAPTERS,
    GenAIAdapter,
    LogfireAdapter,
    OpenInferenceAdapter,
    OpenLLMetryAdapter,
)
from otel_loopguard.adapters._unwrap import (
    _ARG_MARKERS,
    _RESULT_MARKERS,
    _has_arg_marker,
    _has_result_marker,
)
from otel_loopguard.metrics import LoopGuardMetrics
from otel_loopguard.processor import LoopGuardSpanProcessor
from otel_loopguard.types import Action, Decision, ToolCall

CLEAN = Decision(Action.CONTINUE)


class _Pair:
    """Two processors on one provider: default adapters (fast path) and equal copies
    of them (the general path); each records what its engine is given."""

    def __init__(self, **config: Any) -> None:
        self.provider = TracerProvider()
        self.seen: dict[str, list[Any]] = {"fast": [], "general": []}
        self.processors = {}
        for label, adapters in (("fast", DEFAULT_ADAPTERS), ("general", (
                GenAIAdapter(), OpenInferenceAdapter(), OpenLLMetryAdapter(), LogfireAdapter()))):
            processor = LoopGuardSpanProcessor(
                LoopGuardConfig.create(**config), registry=CollectorRegistry(),
                adapters=adapters, raise_internal_errors=True)
            seen = self.seen[label]

            def process(state: Any, event: Any, seen: list[Any] = seen) -> Decision:
                seen.append(event)
                return CLEAN

            processor.engine.process = process  # type: ignore[method-assign]
            processor.engine.process_handoff = process  # type: ignore[method-assign]
            self.provider.add_span_processor(processor)
            self.processors[label] = processor
        assert self.processors["fast"].adapters is DEFAULT_ADAPTERS
        assert self.processors["general"].adapters is not DEFAULT_ADAPTERS
        self.tracer = self.provider.get_tracer("test")


_NAMES = st.sampled_from([
    "execute_tool search", "execute_tool", "search", "search.tool", "Function: lookup",
    "Function: ", "Handoff: triage -> billing", "Handoff: triage", "Handoff:  -> b",
    "handoff to billing", "invoke_agent triage", "chat gpt", "x.agent", "Agent run: 'a'"])
_VALUES = st.one_of(
    st.none(), st.sampled_from(["", "unknown", "x", "triage", "search", "0"]),
    st.integers(-2, 2), st.booleans(),
    st.sampled_from([
        '{"q": "refund"}', '{"input_str": "{\'q\': 1}", "inputs": {"q": 1}, "run_id": 2}',
        '{"q": 1, "tool_call_id": "c1"}', "[1, 2]", "not json {",
        json.dumps({"type": "tool", "data": {"content": "boom", "tool_call_id": "c",
                                             "status": "error"}}),
        json.dumps({"output": {"lc": 1, "id": ["x", "ToolMessage"],
                               "kwargs": {"content": "ok"}}, "kwargs": {}}),
    ]))
_KEYS = [
    "gen_ai.operation.name", "gen_ai.tool.name", "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result", "gen_ai.agent.name", "gen_ai.handoff.from_agent",
    "gen_ai.handoff.to_agent", "openinference.span.kind", "tool.name", "input.value",
    "output.value", "agent.name", "traceloop.span.kind", "traceloop.entity.name",
    "traceloop.entity.input", "traceloop.entity.output", "name", "input", "output",
    "error.type", "loopguard.blocked", "gen_ai.prompt.name", "gen_ai.prompt.version"]
_KINDS = {"gen_ai.operation.name": ["execute_tool", "handoff", "chat", "invoke_agent"],
          "openinference.span.kind": ["TOOL", "LLM", "AGENT", "CHAIN"],
          "traceloop.span.kind": ["tool", "llm", "agent", "task"]}


@st.composite
def _span(draw: Any) -> dict[str, Any]:
    attrs = {}
    for key in draw(st.lists(st.sampled_from(_KEYS), max_size=8, unique=True)):
        choices = _KINDS.get(key)
        value = draw(st.sampled_from(choices) if choices and draw(st.booleans()) else _VALUES)
        if value is not None:
            attrs[key] = value
    status = draw(st.sampled_from([None, "", "failed: timeout"]))
    exception = draw(st.booleans())
    return {"name": draw(_NAMES), "attrs": attrs, "status": status, "exception": exception}


def _emit(pair: _Pair, spans: list[dict[str, Any]], agent: dict[str, Any],
          chain: dict[str, Any] | None = None) -> None:
    tracer = pair.tracer
    with tracer.start_as_current_span("invoke_agent triage", attributes=agent), \
            tracer.start_as_current_span("chain", attributes=chain) if chain is not None \
            else contextlib.nullcontext():
        for spec in spans:
            with tracer.start_as_current_span(spec["name"], attributes=spec["attrs"]) as span:
                if spec["exception"]:
                    span.add_event("exception", {"exception.type": "ValueError",
                                                 "exception.message": "bad"})
                if spec["status"] is not None:
                    span.set_status(Status(StatusCode.ERROR, spec["status"] or None))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spans=st.lists(_span(), min_size=1, max_size=6),
       agent=st.sampled_from([{}, {"gen_ai.operation.name": "invoke_agent"},
                              {"gen_ai.operation.name": "invoke_agent",
                               "gen_ai.agent.name": "triage", "gen_ai.prompt.name": "p"}]),
       chain=st.sampled_from([None, {}, {"traceloop.prompt.key": "k", "session.id": "s"},
                              {"openinference.span.kind": "AGENT", "agent.name": "inner"}]),
       run_key=st.sampled_from(["trace", "agent", "conversation"]))
def test_fast_path_gives_the_engine_the_same_events(
        spans: list[dict[str, Any]], agent: dict[str, Any], chain: dict[str, Any] | None,
        run_key: str) -> None:
    pair = _Pair(run_key=run_key)
    _emit(pair, spans, agent, chain)
    assert pair.seen["fast"] == pair.seen["general"]
    fast, general = ([(e.run_id, e.template, e.tool_calls, e.model_turns)
                      for e in p.store._runs.values()]
                     for p in (pair.processors["fast"], pair.processors["general"]))
    assert fast == general


def test_spans_without_the_sdk_fields() -> None:
    """A ``ReadableSpan`` built by hand over a plain dict takes the public-property path."""
    pair = _Pair()
    context = SpanContext(trace_id=7, span_id=9, is_remote=False)
    span = ReadableSpan(name="execute_tool search", context=context, parent=None,
                        attributes={"gen_ai.operation.name": "execute_tool",
                                    "gen_ai.tool.name": "search"}, start_time=1, end_time=2)
    for processor in pair.processors.values():
        processor.on_end(span)
    assert pair.seen["fast"] == pair.seen["general"] == [ToolCall(
        "search", None, None, False, False, "", None, f"{9:016x}", f"{7:032x}", 1, 2, None)]


@pytest.mark.parametrize("run_key", ["trace", "agent", "conversation"])
def test_fast_path_run_keys_and_turns(run_key: str) -> None:
    """Model turns, agents from open spans, templates and run keys match too."""
    pair = _Pair(run_key=run_key)
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
            "gen_ai.tool.call.arguments": '{"q": 1}', "gen_ai.tool.call.result": "none",
            "session.id": "s1"}
    tracer = pair.tracer
    for _ in range(2):
        with tracer.start_as_current_span("invoke_agent triage", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.prompt.name": "p"}):
            with tracer.start_as_current_span("chat", attributes={
                    "gen_ai.operation.name": "chat"}):
                pass
            for _ in range(3):
                with tracer.start_as_current_span("execute_tool search", attributes=tool):
                    pass
    assert pair.seen["fast"] == pair.seen["general"]
    calls = pair.seen["fast"]
    assert len(calls) == 6 and all(isinstance(c, ToolCall) for c in calls)
    assert {c.agent for c in calls} == {"triage"}
    if run_key == "trace":
        assert [c.turn for c in calls] == [1] * 6  # one model turn in each trace's run
    fast, general = ([(e.template, e.tool_calls, e.model_turns) for e in p.store._runs.values()]
                     for p in (pair.processors["fast"], pair.processors["general"]))
    assert fast == general
    if run_key == "conversation":  # the session id is on the tool spans only: the chat
        # spans' runs were released with their roots; the conversation's run stays open
        assert fast == [("p", 6, 0)]


@given(st.text(alphabet=st.sampled_from('abc"_ ' + "".join(_ARG_MARKERS + _RESULT_MARKERS))))
def test_unrolled_markers(text: str) -> None:
    assert _has_arg_marker(text) == any(m in text for m in _ARG_MARKERS)
    assert _has_result_marker(text) == any(m in text for m in _RESULT_MARKERS)
    for marker in _ARG_MARKERS:
        assert _has_arg_marker(text + marker)
    for marker in _RESULT_MARKERS:
        assert _has_result_marker(marker + text)


class TestCachedCallCounters:
    """record_call caches labelled children, but folded values are counted every time."""

    def test_overflow_counted_on_every_call(self) -> None:
        registry = CollectorRegistry()
        metrics = LoopGuardMetrics(registry, max_prompt_templates=1, max_tools=1)
        for _ in range(3):
            metrics.record_call("t1", "a", first=True)
            metrics.record_call("t1", "b", first=False)
            metrics.record_call("t2", "a", first=True)
            metrics.record_call(None, "other", first=False)

        def value(name: str, **labels: str) -> float:
            return registry.get_sample_value(name, labels) or 0.0

        assert value("loopguard_tool_calls_total", prompt_template="t1", tool="a") == 3
        assert value("loopguard_tool_calls_total", prompt_template="t1", tool="other") == 3
        assert value("loopguard_tool_calls_total", prompt_template="other", tool="a") == 3
        assert value("loopguard_tool_calls_total", prompt_template="unknown",
                     tool="other") == 3
        assert value("loopguard_runs_total", prompt_template="t1") == 3
        assert value("loopguard_runs_total", prompt_template="other") == 3
        assert value("loopguard_label_overflow_total", label="tool") == 3
        assert value("loopguard_label_overflow_total", label="prompt_template") == 3
        # a run counter appears only once a run's first call is seen
        assert registry.get_sample_value("loopguard_runs_total",
                                          {"prompt_template": "unknown"}) is None
