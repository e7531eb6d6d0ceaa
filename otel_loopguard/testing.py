"""Test helpers for agents instrumented with OpenTelemetry.

Scripted spans, a fake clock, and the ``loopguard_harness`` pytest fixture (the plugin that
otel-loopguard installs registers it; ``-p no:otel_loopguard`` turns the plugin off, and
``from otel_loopguard.testing import loopguard_harness`` in a ``conftest.py`` brings it back).

Spans are made by a real ``TracerProvider`` in the OTel GenAI convention, with explicit times,
so tests are deterministic and go through the same adapters as production spans.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span, Status, StatusCode

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.otlp._sdk import span_record_from_readable
from otel_loopguard.replay.checker import Checker, RunReport
from otel_loopguard.types import SpanRecord

__all__ = ["MISSING", "AgentScript", "FakeClock", "LoopGuardHarness", "loopguard_harness"]

MISSING: Any = object()
"""Pass as ``result`` to emit a tool span whose result was not captured."""


class FakeClock:
    """A clock in nanoseconds that moves only when told. Thread-safe enough for tests."""

    def __init__(self, start_ns: int = 1_700_000_000_000_000_000) -> None:
        """Start at ``start_ns``."""
        self.now_ns = start_ns

    def __call__(self) -> int:
        """Return the current time."""
        return self.now_ns

    def advance(self, seconds: float) -> int:
        """Move forward and return the new time."""
        self.now_ns += int(seconds * 1e9)
        return self.now_ns


def _encode(value: Any) -> Any:
    if isinstance(value, str | bool | int | float):
        return value
    return json.dumps(value)


class AgentScript:
    """Emits the spans of one scripted agent run: tools, parallel batches, turns, handoffs."""

    def __init__(self, tracer: trace.Tracer, clock: FakeClock, root: Span) -> None:
        """Script spans under ``root`` (an ``invoke_agent`` span)."""
        self._tracer, self._clock, self._parent = tracer, clock, root
        self.agent_name = str(getattr(root, "attributes", {}).get("gen_ai.agent.name", ""))

    def _ctx(self) -> Any:
        return trace.set_span_in_context(self._parent)

    def tool(self, name: str, arguments: Any = None, result: Any = MISSING, *,
             error: str | None = None, seconds: float = 0.01) -> None:
        """Emit one ``execute_tool`` span; ``error`` sets status ERROR with that description."""
        self.batch([(name, arguments, result, error)], seconds=seconds)

    def batch(self, calls: Sequence[tuple[Any, ...]], *, seconds: float = 0.01) -> None:
        """Emit parallel tool calls of one model turn: (name, arguments, result[, error])."""
        start = self._clock()
        spans = []
        for call in calls:
            name, arguments, result = call[0], call[1], call[2]
            attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
            if arguments is not None:
                attrs["gen_ai.tool.call.arguments"] = _encode(arguments)
            if result is not MISSING:
                attrs["gen_ai.tool.call.result"] = _encode(result)
            span = self._tracer.start_span(f"execute_tool {name}", context=self._ctx(),
                                           attributes=attrs, start_time=start)
            if len(call) > 3 and call[3]:
                span.set_status(Status(StatusCode.ERROR, call[3]))
                span.set_attribute("error.type", "ToolError")
            spans.append(span)
        for span in spans:
            span.end(end_time=self._clock.advance(seconds))
        self._clock.advance(0.001)

    def turn(self, *, seconds: float = 0.05, finish_reasons: Sequence[str] | None = None,
             attributes: Mapping[str, Any] | None = None) -> None:
        """Emit one model call (``chat`` span): the next tool calls belong to a new batch.

        ``finish_reasons`` sets ``gen_ai.response.finish_reasons`` (``["tool_calls"]``: the
        model asked for tools, ``["stop"]``: it answered in text); ``attributes`` are added.
        """
        attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", **(attributes or {})}
        if finish_reasons is not None:
            attrs["gen_ai.response.finish_reasons"] = list(finish_reasons)
        span = self._tracer.start_span("chat model", context=self._ctx(), attributes=attrs,
                                       start_time=self._clock())
        span.end(end_time=self._clock.advance(seconds))

    def handoff(self, source: str, target: str) -> None:
        """Emit a handoff span (OpenLLMetry's ``gen_ai.handoff.*`` shape)."""
        span = self._tracer.start_span(f"{source} → {target}.handoff", context=self._ctx(),
                                       attributes={"gen_ai.operation.name": "handoff",
                                                   "gen_ai.handoff.from_agent": source,
                                                   "gen_ai.handoff.to_agent": target},
                                       start_time=self._clock())
        span.end(end_time=self._clock.advance(0.001))

    @contextmanager
    def agent(self, name: str) -> Iterator[AgentScript]:
        """Open a nested ``invoke_agent`` span, current inside, and script tools under it."""
        span = self._tracer.start_span(f"invoke_agent {name}", context=self._ctx(), attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name},
            start_time=self._clock())
        try:
            with trace.use_span(span, end_on_exit=False):
                yield AgentScript(self._tracer, self._clock, span)
        finally:
            span.end(end_time=self._clock.advance(0.001))


class LoopGuardHarness:
    """A real ``TracerProvider`` with an in-memory exporter, a fake clock and a checker.

    Extra span processors (e.g. a ``LoopGuardSpanProcessor``) can be added to ``provider``.
    """

    def __init__(self, config: LoopGuardConfig | None = None) -> None:
        """Build the provider and exporter."""
        self.config = config or LoopGuardConfig()
        self.clock = FakeClock()
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("otel_loopguard.testing")

    @contextmanager
    def run(self, agent: str = "agent", *, conversation: str | None = None,
            prompt: str | None = None, attributes: dict[str, Any] | None = None,
            ) -> Iterator[AgentScript]:
        """Open a root ``invoke_agent`` span (a new trace) and script the run inside it.

        The span is current inside, so an agent's own code, instrumented on ``provider``, calls
        its tools in this run too.
        """
        attrs: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent",
                                 "gen_ai.agent.name": agent, **(attributes or {})}
        if conversation:
            attrs["gen_ai.conversation.id"] = conversation
        if prompt:
            attrs["gen_ai.prompt.name"] = prompt
        root = self.tracer.start_span(f"invoke_agent {agent}", context=Context(),
                                      attributes=attrs, start_time=self.clock())
        try:
            with trace.use_span(root, end_on_exit=False):
                yield AgentScript(self.tracer, self.clock, root)
        finally:
            root.end(end_time=self.clock.advance(0.001))

    def spans(self) -> list[SpanRecord]:
        """Return every finished span as a ``SpanRecord``, in end order."""
        return [span_record_from_readable(s) for s in self.exporter.get_finished_spans()]

    def check(self, config: LoopGuardConfig | None = None) -> list[RunReport]:
        """Run every finished span through ``check`` and return the run reports."""
        return list(Checker(config or self.config).run(self.spans()))

    def shutdown(self) -> None:
        """Shut the provider down."""
        self.provider.shutdown()


def _fixture() -> Any:
    """Return the fixture for ``conftest.py`` files, or None without pytest.

    It is a function of its own, not the plugin's: a conftest importing it while the plugin is
    on would register that one function twice, and ``pytest --fixtures`` fails sorting two
    entries that differ only in their ``FixtureDef``.
    """
    try:
        import pytest
    except ImportError:  # pragma: no cover - pytest is only needed for the fixture
        return None

    @pytest.fixture(name="loopguard_harness")
    def fixture() -> Iterator[LoopGuardHarness]:
        """Yield a fresh ``LoopGuardHarness`` (its own provider, exporter and fake clock)."""
        harness = LoopGuardHarness()
        yield harness
        harness.shutdown()

    return fixture


loopguard_harness = _fixture()
"""Pytest fixture: a fresh ``LoopGuardHarness`` per test."""


