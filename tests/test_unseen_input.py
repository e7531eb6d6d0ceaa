"""A turn after an answer whose words were not captured follows new input, unknown: a new world.

An agent loop ends at an answer (a model turn that asks for no tool): only new input, the
user's reply or the harness's feedback, calls the model again. Without content capture that
input is unknown, and absent is not the same: a call repeated after it is a new observation,
as after a new user message. Here a customer-service conversation without content (GenAI model
spans with finish reasons only) looks a reservation up, fails with "not found", answers the
user, and looks the same reservation up again once the user replied: the failure ladder's stop
at the second identical resubmission does not apply. The same spans with the answer's words
captured, or with no answer between the calls, keep it. The live processor (on a real
``TracerProvider``, with a worker and without) and ``check`` on what it exported agree.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode
from prometheus_client import CollectorRegistry

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.otlp._sdk import span_record_from_readable
from otel_loopguard.processor import LoopGuardSpanProcessor
from otel_loopguard.replay import Checker

_ERROR = "Error: Reservation IFOYFZ not found"


def _chat(reason: str, words: str | None = None) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "m1",
        "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 10,
        "gen_ai.response.finish_reasons": (reason,)}
    if words is not None:
        attributes["gen_ai.output.messages"] = json.dumps([{
            "role": "assistant", "parts": [{"type": "text", "content": words}],
            "finish_reason": reason}])
    return attributes


def _conversation(answer: str | None) -> list[tuple[str, dict[str, Any]]]:
    """Model turns and tool calls in order; ``answer``: between the two look-ups, a turn that
    answers the user (``"blank"``: its words not captured; other text: captured), or None."""
    lookup = ("execute_tool get_reservation_details", {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_reservation_details",
        "gen_ai.tool.call.arguments": '{"reservation_id": "IFOYFZ"}'})
    steps = [("chat m1", _chat("tool_calls")), lookup]
    if answer is not None:
        steps.append(("chat m1", _chat("stop", None if answer == "blank" else answer)))
    return [*steps, ("chat m1", _chat("tool_calls")), lookup]


def _live(steps: list[tuple[str, dict[str, Any]]], *, background: bool
          ) -> tuple[set[tuple[str, str, int]], list[Any]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    processor = LoopGuardSpanProcessor(
        LoopGuardConfig(), downstream=SimpleSpanProcessor(exporter), background=background,
        registry=CollectorRegistry(), raise_internal_errors=True)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    ticks = itertools.count(1_000_000, 1_000)
    with tracer.start_as_current_span("invoke_agent airline", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "airline"},
            start_time=next(ticks), end_on_exit=False) as root:
        for name, attributes in steps:
            span = tracer.start_span(name, attributes=attributes, start_time=next(ticks))
            if name.startswith("execute_tool"):
                span.set_status(Status(StatusCode.ERROR, _ERROR))
            span.end(end_time=next(ticks))
    root.end(end_time=next(ticks))
    provider.shutdown()
    spans = list(exporter.get_finished_spans())
    found = {(str(s.attributes["loopguard.detector"]), str(s.attributes["loopguard.action"]),
              int(s.attributes["loopguard.call_index"]))
             for s in spans if s.attributes and "loopguard.action" in s.attributes}
    return found, spans


def _checked(spans: list[Any]) -> set[tuple[str, str, int]]:
    reports = Checker(LoopGuardConfig()).run(iter([span_record_from_readable(s) for s in spans]))
    return {(d.detector, d.action.label, d.call_index) for r in reports for d in r.findings}


@pytest.mark.parametrize("background", [False, True])
@pytest.mark.parametrize(("answer", "expected"), [
    ("blank", set()),
    (None, {("failure", "stop", 2)}),
    ("I could not find reservation IFOYFZ.", {("failure", "stop", 2)}),
])
def test_a_lookup_after_an_unseen_reply_is_a_new_observation(
        answer: str | None, expected: set[tuple[str, str, int]], background: bool) -> None:
    live, spans = _live(_conversation(answer), background=background)
    assert live == expected
    assert _checked(spans) == expected
