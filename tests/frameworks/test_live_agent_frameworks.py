"""LoopGuardSpanProcessor live inside eight more frameworks, on their own instrumentation.

The agents are those of ``scripted_agents.py`` (no LLM, no network). Each family's venv holds
its frameworks (``requirements-<family>.txt``, ``FAMILIES``); the others skip, except that the
family named by ``LOOPGUARD_FRAMEWORK_FAMILY`` (set by ``.ci/frameworks.sh``) must be there.

For each framework: a looping run is flagged on its exported tool spans by the expected
detector, a healthy run is not, and every scenario's live spans still have the shape its
fixture ``tests/data/recorded/<framework>.jsonl`` recorded (the same span names and attribute
keys, and the same reading by the adapters), so that a fixture drifting from the framework it
stands for fails here.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_loopguard.assembly import assemble_trace
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.processor import LoopGuardSpanProcessor
from otel_loopguard.replay import Checker
from otel_loopguard.replay.tracefile import iter_spans
from otel_loopguard.signature import VolatileMatcher, analyze_result, canonical_args
from otel_loopguard.types import SpanRecord, ToolCall

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "recordings"))
from record import to_otlp_json_lines
from scripted_agents import (
    ANSWER,
    FAMILIES,
    FORWARD,
    FRAMEWORKS,
    Framework,
    make_pydantic_ai_agent,
    run_strands_swarm,
)

HERE = Path(__file__).parent

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::ImportWarning")]
"""The frameworks' own warnings (llama-index on pydantic, CrewAI's lazy imports) are not ours
to fail on."""

RECORDED = HERE.parent / "data" / "recorded"
ALL = sorted(name for names in FAMILIES.values() for name in names)
STAGNANT = [(None, None), (None, None), ("warn", "stagnation"), ("replan", "stagnation")]
LOOPING: dict[str, list[tuple[str | None, str | None]]] = {
    "crewai": [(None, None)] * 3 + [("warn", "cycle"), ("warn", "stagnation"), ("stop", "cycle")],
}
"""Framework → (``loopguard.action``, ``loopguard.detector``) of each looping tool call, when
not ``STAGNANT``. CrewAI answers a repeat of the call just before itself, so its loop
alternates two queries: a cycle (closed at the 4th call, stopped at the 6th; the 5th is the
third unchanged answer in a row)."""


_FORWARD = FORWARD
_INSTRUMENTED: dict[str, Framework] = {}


def _required(name: str) -> bool:
    """Whether the family .ci/frameworks.sh runs holds framework ``name``."""
    return name in FAMILIES.get(os.environ.get("LOOPGUARD_FRAMEWORK_FAMILY", ""), ())


def _framework(name: str) -> Framework:
    framework = FRAMEWORKS[name]
    if name not in _INSTRUMENTED:
        for module in framework.modules:
            if _required(name):
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


def _run(name: str, scenario: str, *targets: Any) -> None:
    """Run one scenario of framework ``name`` with ``targets`` getting its spans."""
    framework = _framework(name)
    _FORWARD.targets = targets
    try:
        framework.run(scenario)
    finally:
        _FORWARD.targets = ()
    for target in targets:
        target.force_flush()  # the processor decides on its worker thread


def _live(name: str, scenario: str) -> tuple[LoopGuardSpanProcessor, list[ReadableSpan]]:
    """Run a scenario under a LoopGuardSpanProcessor; return it and the spans it passed on."""
    exporter = InMemorySpanExporter()
    registry = CollectorRegistry()
    processor = LoopGuardSpanProcessor(LoopGuardConfig(), downstream=SimpleSpanProcessor(exporter),
                                       registry=registry, raise_internal_errors=True)
    _run(name, scenario, processor)
    assert processor.guard.errors == 0
    assert registry.get_sample_value("loopguard_internal_errors_total") in (None, 0.0)
    return processor, list(exporter.get_finished_spans())


def _records(spans: list[ReadableSpan], tmp_path: Path) -> list[SpanRecord]:
    """The spans as a trace file gives them back: the path the fixtures were written by."""
    path = tmp_path / "live.jsonl"
    path.write_text("".join(line + "\n" for line in to_otlp_json_lines(spans)), encoding="utf-8")
    return list(iter_spans(str(path), strict=True))


def _tool_calls(records: list[SpanRecord]) -> list[ToolCall]:
    trace_ids = list(dict.fromkeys(r.trace_id for r in records))
    assert len(trace_ids) == 1, f"one run, one trace: got {len(trace_ids)}"
    trace = assemble_trace(trace_ids[0], records, LoopGuardConfig())
    return [e.event for e in trace.events if isinstance(e.event, ToolCall)]


def _shape(records: list[SpanRecord]) -> dict[str, Any]:
    """What a fixture must keep of a run: span names with their attribute keys, the run's
    identity and each event as the adapters read it (volatile result fields stripped)."""
    trace_id = records[0].trace_id
    trace = assemble_trace(trace_id, records, LoopGuardConfig())
    volatile = VolatileMatcher()
    events: list[tuple[Any, ...]] = []
    for item in trace.events:
        event = item.event
        if isinstance(event, ToolCall):
            events.append(("call", event.tool, canonical_args(event.arguments)[1],
                           analyze_result(event.result, volatile).digest, event.error,
                           event.agent))
        else:
            events.append(("handoff", event.from_agent, event.to_agent))
    spans = Counter((r.name, tuple(sorted(k for k in r.attributes
                                          if not k.startswith("loopguard.")))) for r in records)
    return {"events": events, "conversation": trace.conversation,
            "prompt_template": trace.prompt_template, "spans": spans}


@pytest.mark.parametrize("name", ALL)
def test_looping_run_is_flagged(name: str, tmp_path: Path) -> None:
    """Repeated searches whose answers differ only in volatile fields are flagged on the tool
    spans (four identical ones: warn, replan; CrewAI's alternating six: a cycle)."""
    _, spans = _live(name, "looping")
    by_id = {format(s.context.span_id, "016x"): s.attributes or {} for s in spans}
    marks = [(by_id[c.span_id].get("loopguard.action"), by_id[c.span_id].get("loopguard.detector"))
             for c in _tool_calls(_records(spans, tmp_path))]
    assert marks == LOOPING.get(name, STAGNANT)
    flagged = {c.span_id for c in _tool_calls(_records(spans, tmp_path))
               if "loopguard.action" in by_id[c.span_id]}
    assert {i for i, a in by_id.items() if "loopguard.action" in a} == flagged  # tool spans only


@pytest.mark.parametrize("name", ALL)
def test_healthy_run_is_quiet(name: str, tmp_path: Path) -> None:
    """Three different searches: three tool calls, and no span carries a loopguard mark."""
    _, spans = _live(name, "healthy")
    assert [c.tool for c in _tool_calls(_records(spans, tmp_path))] == ["search"] * 3
    assert not any(k.startswith("loopguard.") for s in spans for k in (s.attributes or {}))
    assert not any(e.name.startswith("loopguard.") for s in spans for e in s.events)


@pytest.mark.parametrize(("name", "scenario"),
                         [(n, s) for n in ALL for s in FRAMEWORKS[n].scenarios])
def test_live_spans_have_the_recorded_shape(name: str, scenario: str, tmp_path: Path) -> None:
    """The fixture of each scenario still stands for the framework: same span names and
    attribute keys, same run identity, same calls and handoffs as the adapters read them."""
    exporter = InMemorySpanExporter()
    _run(name, scenario, SimpleSpanProcessor(exporter))
    live = _shape(_records(list(exporter.get_finished_spans()), tmp_path))
    fixture = list(iter_spans(str(RECORDED / f"{name}.jsonl"), strict=True))
    trace_id = list(dict.fromkeys(r.trace_id for r in fixture))[
        FRAMEWORKS[name].scenarios.index(scenario)]
    recorded = _shape([r for r in fixture if r.trace_id == trace_id])
    assert live["events"] == recorded["events"]
    assert (live["conversation"], live["prompt_template"]) == (
        recorded["conversation"], recorded["prompt_template"])
    assert live["spans"] == recorded["spans"], (
        f"only live: {sorted(live['spans'] - recorded['spans'])}; "
        f"only recorded: {sorted(recorded['spans'] - live['spans'])}")


def _swarm(scenario: str, tmp_path: Path) -> tuple[list[ReadableSpan], CollectorRegistry, Path]:
    """Run a Strands ``Swarm`` scenario live; return its spans, registry and trace file."""
    _framework("strands")
    exporter, registry = InMemorySpanExporter(), CollectorRegistry()
    processor = LoopGuardSpanProcessor(LoopGuardConfig(), downstream=SimpleSpanProcessor(exporter),
                                       registry=registry, raise_internal_errors=True)
    _FORWARD.targets = (processor,)
    try:
        run_strands_swarm(scenario)
    finally:
        _FORWARD.targets = ()
    processor.force_flush()
    assert processor.guard.errors == 0
    spans = list(exporter.get_finished_spans())
    path = tmp_path / "swarm.jsonl"
    path.write_text("".join(line + "\n" for line in to_otlp_json_lines(spans)), encoding="utf-8")
    return spans, registry, path


def test_strands_swarm_ping_pong_is_a_handoff_loop(tmp_path: Path) -> None:
    """researcher → reviewer → researcher → … through ``handoff_to_agent``, the same message
    each way, are handoffs, no tool calls: HANDOFF_LOOP stops the 5th (the first message each
    way is new: work handed over), live and in ``check``."""
    from otel_loopguard.cli import main
    from otel_loopguard.replay import Checker

    spans, registry, path = _swarm("ping_pong", tmp_path)
    handoffs = [s for s in spans if s.name == "execute_tool handoff_to_agent"]
    marks = [(s.attributes.get("loopguard.action"), s.attributes.get("loopguard.code"))
             for s in handoffs]
    assert marks == [(None, None)] * 4 + [("stop", "HANDOFF_LOOP")] * 2
    assert registry.get_sample_value("loopguard_tool_calls_total", {
        "prompt_template": "unknown", "tool": "handoff_to_agent"}) is None
    assert registry.get_sample_value("loopguard_loop_detected_total", {
        "prompt_template": "unknown", "detector": "handoff", "action": "stop",
        "mode": "observe"}) == 2
    (report,) = Checker(LoopGuardConfig()).run(iter_spans(str(path), strict=True))
    first = report.findings[0]
    assert (report.tool_calls, first.code, first.evidence[0].details["cycle"]) == (
        0, "HANDOFF_LOOP", ["reviewer", "researcher", "reviewer"])
    assert first.span_id == format(handoffs[4].context.span_id, "016x")
    assert main(["check", str(path)]) == 1


@pytest.mark.parametrize("scenario", ["chain", "fan_out", "review"])
def test_strands_swarm_one_way_handoffs_are_quiet(scenario: str, tmp_path: Path) -> None:
    """A → B → C once, a supervisor handing the task out six times, and two agents handing a
    new draft back and forth (revising, not ping-pong) are no loop."""
    from otel_loopguard.cli import main

    spans, _, path = _swarm(scenario, tmp_path)
    assert not any(k.startswith("loopguard.") for s in spans for k in (s.attributes or {}))
    assert main(["check", str(path)]) == 0


def test_every_family_has_a_requirements_file() -> None:
    """The CI script builds one venv per family from its pinned requirements file, and every
    framework is in one family."""
    for family in FAMILIES:
        assert (HERE / f"requirements-{family}.txt").is_file(), family
    assert sorted(ALL) == sorted(FRAMEWORKS)


def _doc_blocks() -> tuple[str, dict[str, str]]:
    """Return docs/frameworks.md's ``loopguard_naming.py`` block and its Python examples, by
    the module each requires (``<!-- example: requires=... -->``)."""
    page = (HERE.parent.parent / "docs" / "frameworks.md").read_text(encoding="utf-8")
    blocks = re.findall(r"(?:<!-- example: requires=([\w.,]+) -->\n)?```python\n(.*?)```",
                        page, re.DOTALL)
    helper = next(code for _, code in blocks if code.startswith("# loopguard_naming.py"))
    return helper, {requires.split(",")[0]: code for requires, code in blocks if requires}


@pytest.fixture(name="naming")
def _naming(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """docs/frameworks.md's ``loopguard_naming`` module, its spans fed to this test's
    processors (the helper takes the global provider; here one whose spans reach
    ``_FORWARD``, as the frameworks' own do)."""
    helper, _ = _doc_blocks()
    (tmp_path / "loopguard_naming.py").write_text(helper)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "loopguard_naming", raising=False)
    import loopguard_naming

    provider = TracerProvider()
    provider.add_span_processor(_FORWARD)
    monkeypatch.setattr(loopguard_naming, "trace", SimpleNamespace(get_tracer=provider.get_tracer))
    return loopguard_naming


def _documented_run(name: str, naming: Any) -> Callable[[int], None]:
    """Return a function playing run ``n`` of ``looping`` the way docs/frameworks.md names its
    template: pydantic-ai through the page's own example; the others (whose examples wrap a
    framework object the scripted agents build) by running it inside ``prompt_template``."""
    if name == "pydantic-ai":
        namespace: dict[str, Any] = {}
        exec(compile(_doc_blocks()[1]["pydantic_ai"], "docs/frameworks.md", "exec"), namespace)

        def run(n: int) -> None:
            agent = make_pydantic_ai_agent("looping", metadata=False)  # the doc's way alone
            assert namespace["run_triage"](agent, "I want a refund", f"conv-{n}") == ANSWER
        return run

    def wrapped(_n: int) -> None:
        with naming.prompt_template("support_triage", "v3"):
            FRAMEWORKS[name].run("looping")
    return wrapped


WRAPPED_LABEL = "support_triage@v3"
"""The label of ``prompt_template("support_triage", "v3")``."""
OWN_LABEL = {"llama-index": "tpl-you-are-support-triage-81bda73f@v3"}
"""Frameworks whose scripted run names its template closer to the tool calls than the span of
``prompt_template`` (LlamaIndex: ``using_prompt_template`` on every span): that name wins."""


@pytest.mark.parametrize("name", ALL)
def test_documented_template_naming_gives_one_label(name: str, naming: Any,
                                                    tmp_path: Path) -> None:
    """The way docs/frameworks.md names a run's template counts every tool call, run and
    finding of 20 live runs under one label, every flagged span says that label, and check
    reads the same template from the exported spans."""
    _framework(name)
    run = _documented_run(name, naming)
    exporter, registry = InMemorySpanExporter(), CollectorRegistry()
    processor = LoopGuardSpanProcessor(LoopGuardConfig(), downstream=SimpleSpanProcessor(exporter),
                                       registry=registry, raise_internal_errors=True)
    _FORWARD.targets = (processor,)
    try:
        for n in range(20):
            run(n)
    finally:
        _FORWARD.targets = ()
    processor.force_flush()
    counted: Counter[tuple[str, str]] = Counter()
    for family in registry.collect():
        for sample in family.samples:
            if "prompt_template" in sample.labels and sample.name.endswith("_total"):
                counted[(sample.name, sample.labels["prompt_template"])] += int(sample.value)
    label = OWN_LABEL.get(name, WRAPPED_LABEL)
    assert {template for _, template in counted} == {label}
    assert counted[("loopguard_runs_total", label)] == 20
    per_run = len(LOOPING.get(name, STAGNANT))
    assert counted[("loopguard_tool_calls_total", label)] == 20 * per_run
    flagged = [s for s in exporter.get_finished_spans() if s.attributes.get("loopguard.action")]
    expected = sum(action is not None for action, _ in LOOPING.get(name, STAGNANT))
    assert counted[("loopguard_loop_detected_total", label)] == len(flagged) == 20 * expected
    assert {s.attributes["loopguard.prompt_template"] for s in flagged} == {label}
    records = _records(list(exporter.get_finished_spans()), tmp_path)
    traces = {r.trace_id for r in records}
    assert len(traces) == 20  # one trace per run
    assert {assemble_trace(t, [r for r in records if r.trace_id == t],
                           LoopGuardConfig()).prompt_template for t in traces} == {label}


class _OnEnd(SpanProcessor):
    """A span processor calling ``hook`` with each span that ends, on the ending thread."""

    def __init__(self, hook: Callable[[ReadableSpan], None]) -> None:
        self.hook = hook

    def on_end(self, span: ReadableSpan) -> None:
        self.hook(span)


def test_crewai_tool_spans_reach_the_processor_in_call_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CrewAI's instrumentation ends each tool span on one of CrewAI's handler threads. The
    first tool span's end is held on its thread until the agent waits for those handlers (or,
    with an agent that does not wait, until the second tool span has been checked): the
    scripted agent waits before each model turn, so the processor checks the calls in the
    order they ran and flags them as on a quiet machine and as ``check`` does."""
    _framework("crewai")  # skips where CrewAI is not installed: import it after
    import scripted_agents
    from crewai.events.event_bus import crewai_event_bus

    ran: list[str] = []
    release = threading.Event()
    held: list[ReadableSpan] = []
    checked: list[ReadableSpan] = []

    def search_result(query: str) -> str:  # the tool itself, on the agent's thread
        ran.append(query)
        return original_result(query)

    def flush(*args: Any, **kwargs: Any) -> bool:  # the agent waits for CrewAI's handlers
        if ran:
            release.set()
        return original_flush(*args, **kwargs)

    def hold_first(span: ReadableSpan) -> None:
        if span.name == "search.run" and not held:
            held.append(span)
            release.wait(60)  # one of the two comes at once: 60 s only bounds a hang

    def note_checked(span: ReadableSpan) -> None:
        checked.append(span)
        if sum(s.name == "search.run" for s in checked) == 2:
            release.set()

    original_result, original_flush = scripted_agents.search_result, crewai_event_bus.flush
    monkeypatch.setattr(scripted_agents, "search_result", search_result)
    monkeypatch.setattr(crewai_event_bus, "flush", flush)
    exporter = InMemorySpanExporter()
    processor = LoopGuardSpanProcessor(LoopGuardConfig(), downstream=SimpleSpanProcessor(exporter),
                                       registry=CollectorRegistry(), raise_internal_errors=True)
    _run("crewai", "looping", _OnEnd(hold_first), processor, _OnEnd(note_checked))
    starts = [s.start_time for s in checked if s.name == "search.run"]
    assert [sorted(starts).index(t) for t in starts] == list(range(len(ran)))  # call order
    spans = list(exporter.get_finished_spans())
    by_id = {format(s.context.span_id, "016x"): s.attributes or {} for s in spans}
    marks = [(by_id[c.span_id].get("loopguard.action"), by_id[c.span_id].get("loopguard.detector"))
             for c in _tool_calls(_records(spans, tmp_path))]
    assert marks == LOOPING["crewai"]


def test_adk_parallel_calls_are_in_the_turn_of_their_open_model_span(tmp_path: Path) -> None:
    """Google ADK ends its ``generate_content`` span after the tools it requested: the same two
    parallel searches from consecutive turns are a repeated batch at call 6 (the third turn),
    live and in ``check``, as they are for frameworks whose model span ends first."""
    decisions: list[Any] = []
    exporter = InMemorySpanExporter()
    processor = LoopGuardSpanProcessor(LoopGuardConfig(), downstream=SimpleSpanProcessor(exporter),
                                       registry=CollectorRegistry(), raise_internal_errors=True,
                                       on_decision=decisions.append)
    _run("google-adk", "parallel_loop", processor)
    assert processor.guard.errors == 0
    live = [d.call_index for d in decisions if any(e.detector == "batch" for e in d.evidence)]
    records = _records(list(exporter.get_finished_spans()), tmp_path)
    checked = [d.call_index for report in Checker(LoopGuardConfig()).run(iter(records))
               for d in report.findings if any(e.detector == "batch" for e in d.evidence)]
    assert live[0] == 6
    assert live == checked


_INSTRUMENTED_MCP_SERVER = '''
import sys
sys.path[:0] = [{here!r}, {recordings!r}]
from opentelemetry.instrumentation.mcp import McpInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from record import to_otlp_json_lines

class FileExporter(SpanExporter):
    def export(self, spans):
        with open({out!r}, "a", encoding="utf-8") as f:
            f.writelines(line + "\\n" for line in to_otlp_json_lines(list(spans)))
        return SpanExportResult.SUCCESS

provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(FileExporter()))
McpInstrumentor().instrument(tracer_provider=provider)
'''


def test_mcp_instrumented_server_adds_no_tool_call(tmp_path: Path) -> None:
    """The server instrumented too: its spans join the client's trace (the instrumentation
    propagates the context) but are ``ResponseStreamWriter`` spans with no tool marker, so each
    call is read once, from the client's ``<tool>.tool`` span, and ``check`` on client and
    server spans together finds what the live processor found (docs/frameworks.md)."""
    import asyncio

    _framework("mcp")  # before importing stdio_client, which the instrumentation wraps
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from scripted_agents import _MCP_TRACER, MCP_SERVER

    out = tmp_path / "server.jsonl"
    here = str(HERE)
    code = _INSTRUMENTED_MCP_SERVER.format(here=here, recordings=str(HERE.parent / "recordings"),
                                           out=str(out)) + MCP_SERVER.format(here=here)
    params = StdioServerParameters(command=sys.executable, args=["-c", code],
                                   env={**os.environ, "TRACELOOP_TRACE_CONTENT": "true"})

    async def go() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for _ in range(4):
                await session.call_tool("search", {"query": "refund policy"})

    exporter = InMemorySpanExporter()
    processor = LoopGuardSpanProcessor(LoopGuardConfig(), downstream=SimpleSpanProcessor(exporter),
                                       registry=CollectorRegistry(), raise_internal_errors=True)
    _FORWARD.targets = (processor,)
    try:
        with _MCP_TRACER["tracer"].start_as_current_span("support-server"):
            asyncio.run(go())
    finally:
        _FORWARD.targets = ()
    processor.force_flush()
    client = _records(list(exporter.get_finished_spans()), tmp_path)
    server = list(iter_spans(str(out), strict=True))
    assert server and {r.trace_id for r in server} == {r.trace_id for r in client}
    live = [(r.attributes.get("loopguard.action"), r.attributes.get("loopguard.detector"))
            for r in client if r.name == "search.tool"]
    assert live == STAGNANT
    (report,) = Checker(LoopGuardConfig()).run(client + server)
    assert report.tool_calls == 4
    assert [(d.call_index, d.action.label, d.detector) for d in report.findings] == [
        (3, "warn", "stagnation"), (4, "replan", "stagnation")]
