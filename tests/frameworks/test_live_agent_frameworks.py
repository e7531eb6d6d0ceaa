"""LoopGuardSpanProcessor live inside eight more frameworks, on their own instrumentation.

The agents are those of ``scripted_agents.py`` (no LLM). Each family's venv has one
framework (``requirements-<family>.txt``); the others skip. A looping run is flagged on its
exported tool spans and a healthy one is not.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.processor import LoopGuardSpanProcessor

sys.path.insert(0, str(Path(__file__).parent))
from scripted_agents import FRAMEWORKS, Framework

FAMILIES = {"pydantic-ai": "pydantic-ai", "agent-framework": "agent-framework"}
"""Family (requirements file) → the framework its venv holds."""


class _Forward(SpanProcessor):
    """Span processor forwarding to the running test's processors (set once per process)."""

    def __init__(self) -> None:
        self.targets: tuple[Any, ...] = ()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        for target in self.targets:
            target.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        for target in self.targets:
            target.on_end(span)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


_FORWARD = _Forward()
_INSTRUMENTED: dict[str, Framework] = {}


def _framework(name: str) -> Framework:
    framework = FRAMEWORKS[name]
    if name not in _INSTRUMENTED:
        for module in framework.modules:
            if os.environ.get("LOOPGUARD_FRAMEWORK_FAMILY") == name:
                __import__(module)  # .ci/frameworks.sh: must be there
            else:
                pytest.importorskip(module, reason=f"{name} not installed")
        for key, value in framework.env.items():
            os.environ.setdefault(key, value)
        provider = TracerProvider()
        provider.add_span_processor(_FORWARD)
        framework.instrument(provider)
        _INSTRUMENTED[name] = framework
    return framework


@pytest.fixture(name="live")
def _live(request: pytest.FixtureRequest) -> Iterator[tuple[Framework, Any, Any]]:
    framework = _framework(request.param)
    exporter = InMemorySpanExporter()
    processor = LoopGuardSpanProcessor(LoopGuardConfig(), downstream=SimpleSpanProcessor(exporter),
                                       registry=CollectorRegistry(), raise_internal_errors=True)
    _FORWARD.targets = (processor,)
    try:
        yield framework, processor, exporter
    finally:
        _FORWARD.targets = ()


def _tool_spans(spans: Any) -> list[ReadableSpan]:
    return [s for s in spans if (s.attributes or {}).get("gen_ai.operation.name") == "execute_tool"
            or (s.attributes or {}).get("openinference.span.kind") == "TOOL"
            or (s.attributes or {}).get("traceloop.span.kind") == "tool"]


@pytest.mark.parametrize("live", sorted(FAMILIES.values()), indirect=True)
def test_looping_run_is_flagged(live: tuple[Framework, Any, Any]) -> None:
    """Four identical searches, answers differing only in volatile fields: warn, replan."""
    framework, processor, exporter = live
    framework.run("looping")
    processor.force_flush()  # detection runs on the processor's worker
    actions = [(s.attributes or {}).get("loopguard.action")
               for s in _tool_spans(exporter.get_finished_spans())]
    assert actions == [None, None, "warn", "replan"], actions
    assert processor.guard.errors == 0


@pytest.mark.parametrize("live", sorted(FAMILIES.values()), indirect=True)
def test_healthy_run_is_quiet(live: tuple[Framework, Any, Any]) -> None:
    """Three different searches: no span carries a loopguard attribute."""
    framework, processor, exporter = live
    framework.run("healthy")
    processor.force_flush()
    spans = exporter.get_finished_spans()
    assert len(_tool_spans(spans)) == 3
    assert not any(k.startswith("loopguard.") for s in spans for k in (s.attributes or {}))
    assert processor.guard.errors == 0


def test_every_family_has_a_requirements_file() -> None:
    """The CI script builds one venv per family from its pinned requirements file."""
    here = Path(__file__).parent
    for family in FAMILIES:
        assert (here / f"requirements-{family}.txt").is_file(), family
