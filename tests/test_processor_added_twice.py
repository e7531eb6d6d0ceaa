"""A processor added to its provider twice handles each span once, and says so once.

A setup that runs twice (a notebook cell run again, ``add_span_processor`` as well as
``install()``) put the same processor on the provider twice: every ``span.end()`` reached it
twice, each call counted twice, so a healthy agent's 3rd identical lookup was stopped as a loop
("called 5 times"), and every span was exported twice. Real parts: the SDK's TracerProvider,
its SimpleSpanProcessor and an in-memory exporter, and the ``ToolGuard`` of enforce mode.
"""

from __future__ import annotations

import json
import logging

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor, ToolGuard, ToolLoopError


def _lookups(times_added: int, calls: int,
             caplog: pytest.LogCaptureFixture) -> tuple[int, str, int, list[str]]:
    """Run ``calls`` identical lookups under a processor added ``times_added`` times.

    Returns the calls that ran, the error (or ""), the spans exported and the warnings logged.
    """
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    processor = LoopGuardSpanProcessor(LoopGuardConfig.create(mode="enforce"),
                                       downstream=SimpleSpanProcessor(exporter),
                                       registry=CollectorRegistry())
    for _ in range(times_added):
        provider.add_span_processor(processor)
    guard = ToolGuard(processor, tracer_provider=provider)

    @guard.tool
    def lookup(order_id: str) -> str:
        return json.dumps({"order": order_id, "status": "shipped"})

    ran, error = 0, ""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="otel_loopguard"):
        try:
            with provider.get_tracer("agent").start_as_current_span("invoke_agent support"):
                for _ in range(calls):
                    lookup("A1")
                    ran += 1
        except ToolLoopError as exc:
            error = str(exc)
    warnings = [r.getMessage() for r in caplog.records if "added to a tracer provider twice"
                in r.getMessage()]
    provider.shutdown()
    return ran, error, len(exporter.get_finished_spans()), warnings


@pytest.mark.parametrize("calls", [2, 4, 5])
def test_added_twice_acts_as_added_once(calls: int, caplog: pytest.LogCaptureFixture) -> None:
    """The same calls run, the same error (the 5th identical lookup, "called 5 times"), the
    same spans exported, once each; the second registration is named in one warning."""
    once = _lookups(1, calls, caplog)
    twice = _lookups(2, calls, caplog)
    assert twice[:3] == once[:3]
    assert (once[3], len(twice[3])) == ([], 1)
    assert once[0] == min(calls, 4)
    assert ("called 5 times" in once[1]) == (calls == 5)


def test_an_exporter_as_downstream_is_named() -> None:
    """An exporter given where a span processor goes: a TypeError that says how to wrap it,
    not an AttributeError on ``on_start`` at the first span."""
    with pytest.raises(TypeError, match=r"^downstream= takes a span processor, got the exporter "
                       r"InMemorySpanExporter: wrap an exporter, as in "
                       r"downstream=BatchSpanProcessor\(exporter\)$"):
        LoopGuardSpanProcessor(downstream=InMemorySpanExporter(),  # type: ignore[arg-type]
                               registry=CollectorRegistry())
    processor = LoopGuardSpanProcessor(downstream=BatchSpanProcessor(InMemorySpanExporter()),
                                       registry=CollectorRegistry())
    processor.shutdown()
