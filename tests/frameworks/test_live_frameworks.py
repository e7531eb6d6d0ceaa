"""LoopGuardSpanProcessor live, under real agent frameworks and their real instrumentations.

Each family (framework x instrumentation) needs its own virtualenv because the instrumentations
conflict, so every test here is parametrized over the six families and skips, with
``pytest.importorskip``, the families whose packages are not installed. ``.ci/frameworks.sh``
builds one venv per family from ``tests/frameworks/requirements-<family>.txt`` and runs this
module in each; in the main venv every test skips. See ``tests/frameworks/README.md``.

The agents are the ones of ``tests/recordings/record.py``, driven offline by scripted fake models:

- openai-agents: ``agents.testing.ScriptedModel`` (no network, no API key);
- LangChain 1.x ``create_agent`` (a LangGraph graph) over ``FakeMessagesListChatModel``.

Scenarios: *looping* calls ``search({"query": "refund policy"})`` four times, each returning the
same empty result; *healthy* searches three different cities.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_loopguard.assembly import assemble_trace
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.processor import EVENT_NAME, LoopGuardSpanProcessor
from otel_loopguard.replay.tracefile import iter_spans
from otel_loopguard.types import ToolCall

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "recordings"))
from record import to_otlp_json_lines
from scripted_agents import FAMILIES as AGENT_FAMILIES

LOOP_QUERY = {"query": "refund policy"}
LOOP_RESULT = json.dumps({"results": [], "note": "no results"})
HEALTHY_RESULTS = {
    "paris": {"results": ["Paris: Eiffel Tower, Louvre"]},
    "london": {"results": ["London: Big Ben, British Museum"]},
    "tokyo": {"results": ["Tokyo: Shibuya, Senso-ji"]},
}
LOOPING = [LOOP_QUERY] * 4
HEALTHY = [{"query": q} for q in HEALTHY_RESULTS]


@dataclass(frozen=True)
class Family:
    """One framework under one instrumentation."""

    name: str
    framework: str  # "agents" or "langchain"
    modules: tuple[str, ...]  # importorskip'd, in order; the last one holds the instrumentor
    instrumentor: str  # class name in modules[-1]
    agent_span: str  # the open span that receives the loopguard.loop_detected event
    env: tuple[tuple[str, str], ...] = ()


_GENAI_ENV = (("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY"),
              ("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental"))

FAMILIES = [
    Family("agents-openinference", "agents",
           ("agents", "openinference.instrumentation.openai_agents"),
           "OpenAIAgentsInstrumentor", agent_span="triage"),
    Family("agents-traceloop", "agents",
           ("agents", "opentelemetry.instrumentation.openai_agents"),
           "OpenAIAgentsInstrumentor", agent_span="triage.agent"),
    Family("agents-otel-genai", "agents",
           ("agents", "opentelemetry.instrumentation.genai.openai_agents"),
           "OpenAIAgentsInstrumentor", agent_span="invoke_agent triage", env=_GENAI_ENV),
    Family("langchain-openinference", "langchain",
           ("langchain.agents", "openinference.instrumentation.langchain"),
           "LangChainInstrumentor", agent_span="triage"),
    Family("langchain-traceloop", "langchain",
           ("langchain.agents", "opentelemetry.instrumentation.langchain"),
           "LangchainInstrumentor", agent_span="triage.workflow"),
    Family("langchain-otel-genai", "langchain",
           ("langchain.agents", "opentelemetry.instrumentation.genai.langchain"),
           "LangChainInstrumentor", agent_span="invoke_agent triage", env=_GENAI_ENV),
]
BY_NAME = {f.name: f for f in FAMILIES}


# ----------------------------------------------------------------------------- harness


class _Slot(SpanProcessor):
    """Forwards every hook to the processors of the running test.

    Each family is instrumented once per module, on one real ``TracerProvider`` whose only
    processor is this slot: re-instrumenting per test is not reliable (Traceloop's openai-agents
    ``uninstrument()`` leaves its Agents SDK processor registered, and after an
    uninstrument/instrument cycle Traceloop's LangChain spans keep going to the first provider).
    Each test plugs its own ``LoopGuardSpanProcessor`` (and registry and exporter) in here.
    """

    def __init__(self) -> None:
        self.targets: tuple[SpanProcessor, ...] = ()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        for target in self.targets:
            target.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        for target in self.targets:
            target.on_end(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return all(target.force_flush(timeout_millis) for target in self.targets)


@dataclass
class _Instrumented:
    provider: TracerProvider
    slot: _Slot
    instrumentor: Any
    restore: Any = None  # undoes what uninstrument() leaves behind


def _agents_processors_restorer() -> Any:
    """Snapshot the Agents SDK's trace processors; return a callable that puts them back.

    Traceloop's openai-agents ``uninstrument()`` leaves its processor registered, which would
    send later modules' agent spans to this module's (shut down) provider.
    """
    from agents import set_trace_processors
    from agents.tracing import get_trace_provider

    multi = getattr(get_trace_provider(), "_multi_processor", None)
    before = list(getattr(multi, "_processors", ()))
    return lambda: set_trace_processors(before)


class _Session:
    """Family name -> its instrumented provider, created on first use; the env it needs.

    Module-scoped: the instrumentors patch the frameworks for the whole process, so they are
    undone when this module is done, before any other module runs.
    """

    def __init__(self) -> None:
        self.cache: dict[str, _Instrumented] = {}
        self.env = pytest.MonkeyPatch()
        self.env.setenv("OPENAI_API_KEY", "")  # the Agents SDK's own exporter stays idle

    def close(self) -> None:
        for instrumented in self.cache.values():
            instrumented.instrumentor.uninstrument()
            if instrumented.restore is not None:
                instrumented.restore()
            instrumented.provider.shutdown()
        self.env.undo()


@pytest.fixture(scope="module")
def _instrumented() -> Iterator[_Session]:
    session = _Session()
    try:
        yield session
    finally:
        session.close()


def _instrument(session: _Session, family: Family) -> _Instrumented:
    cache = session.cache
    if family.name not in cache:
        module = None
        for name in family.modules:
            if os.environ.get("LOOPGUARD_FRAMEWORK_FAMILY") == family.name:
                module = importlib.import_module(name)  # .ci/frameworks.sh: must be there
            else:
                module = pytest.importorskip(
                    name, reason=f"{family.name} not installed "
                                 f"(tests/frameworks/requirements-{family.name}.txt)")
        for key, value in family.env:
            session.env.setenv(key, value)  # read by the official GenAI instrumentations
        slot = _Slot()
        provider = TracerProvider()
        provider.add_span_processor(slot)
        restore = _agents_processors_restorer() if family.framework == "agents" else None
        instrumentor = getattr(module, family.instrumentor)()
        instrumentor.instrument(tracer_provider=provider)
        cache[family.name] = _Instrumented(provider, slot, instrumentor, restore)
    return cache[family.name]


@dataclass
class Live:
    """Loopguard installed on a family's instrumented provider, for one test."""

    family: Family
    processor: LoopGuardSpanProcessor
    registry: CollectorRegistry
    exporter: InMemorySpanExporter
    provider: TracerProvider

    def run(self, calls: Sequence[dict[str, Any]]) -> list[ReadableSpan]:
        """Run the scripted agent through ``calls`` and return every exported span."""
        run = _run_agents if self.family.framework == "agents" else _run_langchain
        run(calls)
        self.provider.force_flush()
        return sorted(self.exporter.get_finished_spans(), key=lambda s: s.start_time or 0)

    def internal_errors(self) -> float:
        """Sum of ``loopguard_internal_errors_total`` over its labels."""
        return sum(sample.value for metric in self.registry.collect()
                   if metric.name == "loopguard_internal_errors"
                   for sample in metric.samples if sample.name.endswith("_total"))


def _live(request: pytest.FixtureRequest, session: _Session,
          downstream: bool) -> Iterator[Live]:
    family = BY_NAME[request.param]
    instrumented = _instrument(session, family)
    registry = CollectorRegistry()
    exporter = InMemorySpanExporter()
    if downstream:
        processor = LoopGuardSpanProcessor(
            LoopGuardConfig(), downstream=SimpleSpanProcessor(exporter), registry=registry,
            raise_internal_errors=True)
        instrumented.slot.targets = (processor,)
    else:
        processor = LoopGuardSpanProcessor(LoopGuardConfig(), registry=registry,
                                           raise_internal_errors=True)
        instrumented.slot.targets = (processor, SimpleSpanProcessor(exporter))
    try:
        yield Live(family, processor, registry, exporter, instrumented.provider)
    finally:
        instrumented.slot.targets = ()
        processor.shutdown()


@pytest.fixture
def live(request: pytest.FixtureRequest, _instrumented: _Session) -> Iterator[Live]:
    """Loopguard with ``downstream=SimpleSpanProcessor(InMemorySpanExporter())``."""
    yield from _live(request, _instrumented, downstream=True)


@pytest.fixture
def live_events(request: pytest.FixtureRequest,
                _instrumented: _Session) -> Iterator[Live]:
    """Loopguard without downstream: evidence goes to the open agent span as an event."""
    yield from _live(request, _instrumented, downstream=False)


# ----------------------------------------------------------------------------- the agents


def _search_result(query: str) -> str:
    return json.dumps(HEALTHY_RESULTS[query]) if query in HEALTHY_RESULTS else LOOP_RESULT


def _agents_agent(calls: Sequence[dict[str, Any]]) -> Any:
    """The scripted ``triage`` agent of the Agents SDK, making ``calls`` then answering."""
    from agents import Agent, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    @function_tool
    def search(query: str) -> str:
        """Search the knowledge base."""
        return _search_result(query)

    steps = [[function_call("search", args, call_id=f"call_{i}")]
             for i, args in enumerate(calls, 1)]
    steps.append([assistant_message("Done.")])
    return Agent(name="triage", instructions="You are support triage.", tools=[search],
                 model=ScriptedModel(steps, emit_traces=True))


def _run_agents(calls: Sequence[dict[str, Any]]) -> None:
    from agents import RunConfig, Runner

    agent = _agents_agent(calls)
    result = asyncio.run(Runner.run(agent, "I want a refund", max_turns=20,
                                    run_config=RunConfig(workflow_name="support",
                                                         group_id="conv-live")))
    assert result.final_output == "Done."


def _langchain_agent(calls: Sequence[dict[str, Any]], *, tools: list[Any] | None = None,
                     tool_name: str = "search") -> Any:
    """The scripted ``triage`` agent of LangChain (``create_agent``), making ``calls`` (to
    ``search``, or to ``tool_name`` among ``tools``)."""
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool

    class ScriptedChat(FakeMessagesListChatModel):
        """FakeMessagesListChatModel that accepts bind_tools (create_agent calls it)."""

        def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:
            return self

    @tool
    def search(query: str) -> str:
        """Search the knowledge base."""
        return _search_result(query)

    responses: list[Any] = [
        AIMessage(content="", tool_calls=[{"name": tool_name, "args": args, "id": f"call_{i}",
                                           "type": "tool_call"}])
        for i, args in enumerate(calls, 1)]
    responses.append(AIMessage("Done."))
    return create_agent(ScriptedChat(responses=responses), tools=tools or [search],
                        system_prompt="You are support triage.", name="triage")


def _run_langchain(calls: Sequence[dict[str, Any]]) -> None:
    agent = _langchain_agent(calls)
    out = agent.invoke({"messages": [("user", "I want a refund")]},
                       config={"recursion_limit": 30, "metadata": {"session_id": "conv-live"}})
    assert out["messages"][-1].content == "Done."


# ----------------------------------------------------------------------------- helpers


def _tool_spans(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    """The ``search`` tool spans, in start order (name attribute differs per convention)."""
    return [s for s in spans
            if (s.attributes or {}).get("gen_ai.tool.name") == "search"
            or (s.attributes or {}).get("tool.name") == "search"]


def _loopguard_attrs(span: ReadableSpan) -> dict[str, Any]:
    return {k: v for k, v in (span.attributes or {}).items() if k.startswith("loopguard.")}


def _describe(spans: Sequence[ReadableSpan]) -> str:
    """One line per span (values cut: LangGraph node spans carry the whole message state)."""
    def short(value: Any) -> Any:
        return value[:80] + "..." if isinstance(value, str) and len(value) > 80 else value

    return "\n".join(
        f"{s.name}: { {k: short(v) for k, v in (s.attributes or {}).items()} } "
        f"events={[e.name for e in s.events]}" for s in spans)


def _hex(span: ReadableSpan) -> str:
    assert span.context is not None
    return format(span.context.span_id, "016x")


ALL = [f.name for f in FAMILIES]


# ----------------------------------------------------------------------------- tests


@pytest.mark.parametrize("live", ALL, indirect=True)
def test_looping_agent_is_flagged_on_the_exported_tool_spans(live: Live) -> None:
    """4x the same search with the same empty result: warn on the 3rd, replan on the 4th."""
    spans = live.run(LOOPING)
    tools = _tool_spans(spans)
    assert len(tools) == 4, _describe(spans)
    evidence = [_loopguard_attrs(s) for s in tools]
    assert [e.get("loopguard.action") for e in evidence] == [None, None, "warn", "replan"], \
        _describe(tools)
    for index, found in ((3, evidence[2]), (4, evidence[3])):
        assert found["loopguard.code"] == "STAGNANT_RESULT"
        assert found["loopguard.detector"] == "stagnation"
        assert found["loopguard.call_index"] == index
        assert found["loopguard.count"] == index
        assert found["loopguard.mode"] == "observe"
        assert found["loopguard.run_id"]
    # the earlier identical calls are named as evidence
    assert set(evidence[3]["loopguard.repeats_span_ids"]) == {_hex(s) for s in tools[:3]}
    others = [s for s in spans if s not in tools]
    assert not any(_loopguard_attrs(s) for s in others), _describe(others)
    assert live.internal_errors() == 0
    assert live.processor.guard.errors == 0


@pytest.mark.parametrize("live", ALL, indirect=True)
def test_healthy_agent_is_not_flagged(live: Live) -> None:
    """Three different searches with different results: no loopguard attribute or event."""
    spans = live.run(HEALTHY)
    assert len(_tool_spans(spans)) == 3, _describe(spans)
    assert not any(_loopguard_attrs(s) for s in spans), _describe(spans)
    assert not any(e.name == EVENT_NAME for s in spans for e in s.events)
    assert live.internal_errors() == 0
    assert live.processor.guard.errors == 0


@pytest.mark.parametrize("live_events", ALL, indirect=True)
def test_without_downstream_the_agent_span_gets_the_event(live_events: Live) -> None:
    """No downstream: the findings become loopguard.loop_detected events on the agent span."""
    spans = live_events.run(LOOPING)
    tools = _tool_spans(spans)
    assert len(tools) == 4, _describe(spans)
    assert not any(_loopguard_attrs(s) for s in spans), _describe(spans)
    carriers = [s for s in spans if any(e.name == EVENT_NAME for e in s.events)]
    assert [s.name for s in carriers] == [live_events.family.agent_span], _describe(spans)
    events = [e for e in carriers[0].events if e.name == EVENT_NAME]
    assert [(e.attributes or {}).get("loopguard.action") for e in events] == ["warn", "replan"]
    assert [(e.attributes or {}).get("loopguard.span_id") for e in events] == [
        _hex(tools[2]), _hex(tools[3])]
    assert all((e.attributes or {}).get("loopguard.code") == "STAGNANT_RESULT" for e in events)
    assert live_events.internal_errors() == 0
    assert live_events.processor.guard.errors == 0


@pytest.mark.parametrize("calls", [LOOPING, HEALTHY], ids=["looping", "healthy"])
@pytest.mark.parametrize("family", ALL)
def test_model_spans_set_aside_change_no_finding(family: str, calls: Sequence[dict[str, Any]],
                                                 _instrumented: _Session) -> None:
    """The same spans go to a processor checking them inside ``span.end()`` and to one in the
    background mode, which finishes agent and chain spans there and sets model spans without
    content of a trace with no run aside (``processor._deferred``): both flag the same spans
    with the same evidence."""
    family_ = BY_NAME[family]
    instrumented = _instrument(_instrumented, family_)
    inline, background = InMemorySpanExporter(), InMemorySpanExporter()
    checked = LoopGuardSpanProcessor(LoopGuardConfig(), downstream=SimpleSpanProcessor(inline),
                                     registry=CollectorRegistry(), raise_internal_errors=True,
                                     background=False)
    aside = LoopGuardSpanProcessor(LoopGuardConfig(), downstream=SimpleSpanProcessor(background),
                                   registry=CollectorRegistry(), raise_internal_errors=True,
                                   background=True)
    instrumented.slot.targets = (checked, aside)
    try:
        (_run_agents if family_.framework == "agents" else _run_langchain)(calls)
        instrumented.provider.force_flush()
    finally:
        instrumented.slot.targets = ()
        checked.shutdown()
        aside.shutdown()
    found = {s.context.span_id: _loopguard_attrs(s) for s in inline.get_finished_spans()}
    assert {s.context.span_id: _loopguard_attrs(s)
            for s in background.get_finished_spans()} == found
    assert any(found.values()) == (calls is LOOPING)


def _doc_example(framework: str) -> tuple[str, str]:
    """Return docs/frameworks.md's ``loopguard_naming.py`` block and its example for
    ``framework`` (the block marked ``<!-- example: requires=agents -->`` or ``langchain``)."""
    page = (Path(__file__).parents[2] / "docs" / "frameworks.md").read_text(encoding="utf-8")
    blocks = re.findall(r"(?:<!-- example: requires=([\w.,]+) -->\n)?```python\n(.*?)```",
                        page, re.DOTALL)
    helper = next(code for _, code in blocks if code.startswith("# loopguard_naming.py"))
    return helper, next(code for requires, code in blocks if requires.split(",")[0] == framework)


def _counted(registry: CollectorRegistry) -> Counter[tuple[str, str]]:
    """``(sample name, prompt_template)`` -> the sum of its ``_total`` samples."""
    counted: Counter[tuple[str, str]] = Counter()
    for family in registry.collect():
        for sample in family.samples:
            if "prompt_template" in sample.labels and sample.name.endswith("_total"):
                counted[(sample.name, sample.labels["prompt_template"])] += int(sample.value)
    return counted


@pytest.mark.parametrize("live", ALL, indirect=True)
def test_documented_run_gives_one_label_and_the_conversation(
        live: Live, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/frameworks.md's example for the framework, run 20 times on looping agents: every
    tool call, run and finding is counted under its one label, and check reads the same label
    and each run's conversation from the exported spans."""
    helper, example = _doc_example(live.family.framework)
    (tmp_path / "loopguard_naming.py").write_text(helper)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "loopguard_naming", raising=False)
    import loopguard_naming

    # the helper takes the global provider; here the family's, which feeds this test's processor
    monkeypatch.setattr(loopguard_naming, "trace",
                        SimpleNamespace(get_tracer=live.provider.get_tracer))
    namespace: dict[str, Any] = {}
    exec(compile(example, "docs/frameworks.md", "exec"), namespace)
    make = _agents_agent if live.family.framework == "agents" else _langchain_agent
    for n in range(20):
        namespace["run_triage"](make(LOOPING), "I want a refund", f"conv-{n}")
    live.provider.force_flush()
    label = "support_triage@v3"
    counted = _counted(live.registry)
    assert {template for _, template in counted} == {label}
    assert counted[("loopguard_runs_total", label)] == 20
    assert counted[("loopguard_tool_calls_total", label)] == 20 * 4
    assert counted[("loopguard_loop_detected_total", label)] == 20 * 2  # warn, replan
    path = tmp_path / "spans.jsonl"
    path.write_text("".join(line + "\n" for line in
                            to_otlp_json_lines(list(live.exporter.get_finished_spans()))))
    records = list(iter_spans(str(path), strict=True))
    runs = [assemble_trace(t, [r for r in records if r.trace_id == t], LoopGuardConfig())
            for t in dict.fromkeys(r.trace_id for r in records)]
    runs = [run for run in runs if any(isinstance(e.event, ToolCall) for e in run.events)]
    assert [(run.prompt_template, run.conversation) for run in runs] == [
        (label, f"conv-{n}") for n in range(20)]
    assert live.internal_errors() == 0


def test_every_family_has_a_requirements_file() -> None:
    """The CI script builds one venv per family from its pinned requirements file."""
    here = Path(__file__).parent
    for family in FAMILIES:
        assert (here / f"requirements-{family.name}.txt").is_file(), family.name


def test_the_family_named_by_the_ci_script_exists() -> None:
    """``LOOPGUARD_FRAMEWORK_FAMILY`` (set by .ci/frameworks.sh) must name a known family."""
    family = os.environ.get("LOOPGUARD_FRAMEWORK_FAMILY")
    known = set(BY_NAME) | set(AGENT_FAMILIES)  # test_live_agent_frameworks
    if family is not None:
        assert family in known, f"unknown family {family!r}; known: {sorted(known)}"



AGENTS = [f.name for f in FAMILIES if f.framework == "agents"]


@pytest.mark.parametrize("family", AGENTS)
@pytest.mark.parametrize("named", [False, True], ids=["group_id", "span_around_the_run"])
def test_agents_conversation_is_seen_live_only_on_a_span_around_the_run(
        family: str, named: bool, _instrumented: _Session, tmp_path: Path) -> None:
    """``run_key = "conversation"``: three runs of one conversation, two identical searches
    each. Named on a span opened around each run, the conversation is one run live: its 3rd
    call is the stagnation warning. ``RunConfig(group_id=...)`` alone is not seen live under any
    of the three instrumentations: OpenInference and OpenLLMetry do not record it, and the
    official one writes ``gen_ai.conversation.id`` when the agent span ends, after the tool
    calls were decided, so each run stays one of its own; ``check`` merges them
    (docs/frameworks.md)."""
    instrumented = _instrument(_instrumented, BY_NAME[family])  # skips when not installed
    from agents import RunConfig, Runner

    from otel_loopguard.replay.checker import Checker

    config = LoopGuardConfig.create(run_key="conversation")
    exporter = InMemorySpanExporter()
    processor = LoopGuardSpanProcessor(config, downstream=SimpleSpanProcessor(exporter),
                                       registry=CollectorRegistry(), raise_internal_errors=True)
    instrumented.slot.targets = (processor,)
    tracer = instrumented.provider.get_tracer("test")
    # A loop of the test's own, not asyncio.run: that one unsets the thread's current loop, and
    # a loop an earlier test left current would then be collected unclosed (ResourceWarning).
    loop = asyncio.new_event_loop()
    try:
        for _ in range(3):
            agent = _agents_agent([LOOP_QUERY] * 2)
            run_config = RunConfig(workflow_name="support", group_id="conv-7")
            run = Runner.run(agent, "I want a refund", run_config=run_config)
            if named:
                with tracer.start_as_current_span(
                        "conversation", attributes={"gen_ai.conversation.id": "conv-7"}):
                    loop.run_until_complete(run)
            else:
                loop.run_until_complete(run)
        instrumented.provider.force_flush()
    finally:
        loop.close()
        instrumented.slot.targets = ()
        processor.shutdown()
    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    live = [_loopguard_attrs(s).get("loopguard.action") for s in _tool_spans(spans)]
    assert live == ([None, None, "warn", "replan", "stop", "stop"] if named else [None] * 6)
    path = tmp_path / "spans.jsonl"
    path.write_text("".join(line + "\n" for line in to_otlp_json_lines(list(spans))))
    reports = [r for r in Checker(config).run(iter_spans(str(path), strict=True))
               if r.tool_calls]
    if named or family == "agents-otel-genai":  # check reads the official group_id too
        assert [(r.run_id, r.tool_calls, r.action.name) for r in reports] == [
            ("conv-7", 6, "STOP")]
    else:
        assert [r.action.name for r in reports] == ["CONTINUE"] * 3


LANGCHAIN = [f.name for f in FAMILIES if f.framework == "langchain"]


@pytest.mark.parametrize("family", LANGCHAIN)
@pytest.mark.parametrize("named", [False, True], ids=["session_id", "span_around_the_run"])
def test_langchain_conversation_is_seen_live_unless_written_at_the_end(
        family: str, named: bool, _instrumented: _Session, tmp_path: Path) -> None:
    """``run_key = "conversation"``: three runs of one conversation (``session_id`` metadata),
    two identical searches each. OpenInference and OpenLLMetry put it on the spans as they
    start, so it is one run live; the official instrumentation writes ``gen_ai.conversation.id``
    when the agent span ends, after the tool calls were decided: live, each run stays one of
    its own unless the conversation is also named on a span around the run, while ``check``
    merges them either way (docs/frameworks.md)."""
    instrumented = _instrument(_instrumented, BY_NAME[family])  # skips when not installed
    from otel_loopguard.replay.checker import Checker

    config = LoopGuardConfig.create(run_key="conversation")
    exporter = InMemorySpanExporter()
    processor = LoopGuardSpanProcessor(config, downstream=SimpleSpanProcessor(exporter),
                                       registry=CollectorRegistry(), raise_internal_errors=True)
    instrumented.slot.targets = (processor,)
    tracer = instrumented.provider.get_tracer("test")
    try:
        for _ in range(3):
            agent = _langchain_agent([LOOP_QUERY] * 2)
            run = {"messages": [("user", "I want a refund")]}
            options = {"recursion_limit": 30, "metadata": {"session_id": "conv-7"}}
            if named:
                with tracer.start_as_current_span(
                        "conversation", attributes={"gen_ai.conversation.id": "conv-7"}):
                    agent.invoke(run, config=options)
            else:
                agent.invoke(run, config=options)
        instrumented.provider.force_flush()
    finally:
        instrumented.slot.targets = ()
        processor.shutdown()
    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    live = [_loopguard_attrs(s).get("loopguard.action") for s in _tool_spans(spans)]
    merged = [None, None, "warn", "replan", "stop", "stop"]
    assert live == (merged if named or family != "langchain-otel-genai" else [None] * 6)
    path = tmp_path / "spans.jsonl"
    path.write_text("".join(line + "\n" for line in to_otlp_json_lines(list(spans))))
    reports = [r for r in Checker(config).run(iter_spans(str(path), strict=True))
               if r.tool_calls]
    assert [(r.run_id, r.tool_calls, r.action.name) for r in reports] == [
        ("conv-7", 6, "STOP")]


@pytest.mark.parametrize("live", LANGCHAIN, indirect=True)
def test_langchain_transfer_tool_leaves_from_the_agent_the_instrumentation_names(
        live: Live, tmp_path: Path) -> None:
    """A ``transfer_to_billing`` tool of ``create_agent(..., name="triage")`` is a handoff to
    billing; it leaves from triage under OpenLLMetry and GenAI (whose agent span names it) and
    under OpenInference, which writes no agent span but copies LangChain's ``lc_agent_name``
    into each span's ``metadata`` (it left from no agent)."""
    from langchain_core.tools import tool

    from otel_loopguard.types import Handoff

    @tool
    def transfer_to_billing() -> str:
        """Hand the conversation to billing."""
        return "Transferred to billing"

    agent = _langchain_agent([{}, {}], tools=[transfer_to_billing],
                             tool_name="transfer_to_billing")
    agent.invoke({"messages": [("user", "I want a refund")]})
    live.provider.force_flush()
    path = tmp_path / "spans.jsonl"
    path.write_text("".join(line + "\n" for line in
                            to_otlp_json_lines(list(live.exporter.get_finished_spans()))))
    records = list(iter_spans(str(path), strict=True))
    handoffs = [(e.event.from_agent, e.event.to_agent)
                for t in dict.fromkeys(r.trace_id for r in records)
                for e in assemble_trace(t, [r for r in records if r.trace_id == t],
                                        LoopGuardConfig()).events
                if isinstance(e.event, Handoff)]
    assert handoffs == [("triage", "billing")] * 2
    assert live.internal_errors() == 0


def _ping_pong_graph(round_trips: int) -> Any:
    """Two ``create_agent`` agents, nodes of a ``StateGraph``, handing the conversation back
    and forth ``round_trips`` times with swarm-style ``transfer_to_<agent>`` tools."""
    from typing import Annotated

    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import InjectedToolCallId, tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.types import Command

    class ScriptedChat(FakeMessagesListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:
            return self

    def transfer(to: str) -> Any:
        def hand_over(tool_call_id: str) -> Command:
            """Hand the conversation over."""
            return Command(goto=to, graph=Command.PARENT, update={"messages": [
                ToolMessage(f"Transferred to {to}", tool_call_id=tool_call_id)]})

        # the objects, not this module's postponed strings, which name a local import
        hand_over.__annotations__ = {"tool_call_id": Annotated[str, InjectedToolCallId],
                                     "return": Command}
        return tool(f"transfer_to_{to}")(hand_over)

    def agent(name: str, to: str, answer: bool) -> Any:
        responses: list[Any] = [AIMessage(content="", tool_calls=[{
            "name": f"transfer_to_{to}", "args": {}, "id": f"call_{name}_{i}",
            "type": "tool_call"}]) for i in range(round_trips)]
        responses += [AIMessage("Done.")] if answer else []
        return create_agent(ScriptedChat(responses=responses), tools=[transfer(to)], name=name,
                            system_prompt=f"You are {name}.")

    graph = StateGraph(MessagesState)
    graph.add_node("triage", agent("triage", "billing", True), destinations=("billing",))
    graph.add_node("billing", agent("billing", "triage", False), destinations=("triage",))
    graph.add_edge(START, "triage")
    return graph.compile()


@pytest.mark.parametrize("live", LANGCHAIN, indirect=True)
def test_langgraph_agents_as_nodes_hand_off_from_their_own_agent(live: Live,
                                                                tmp_path: Path) -> None:
    """Two agents as nodes of a graph of one's own, handing the task back and forth: each
    handoff leaves from the agent whose node runs it, so the ping-pong stops at the 4th handoff
    live and in check (under OpenLLMetry, whose agent span sits beside the node's spans, every
    handoff left from the outer graph and none was flagged); under OpenInference the agent is
    LangChain's ``lc_agent_name`` in each span's ``metadata`` (it named no source agent, and the
    cycle closed one handoff later)."""
    from otel_loopguard.types import Handoff

    out = _ping_pong_graph(3).invoke({"messages": [("user", "I want a refund")]},
                                     {"recursion_limit": 80})
    assert out["messages"][-1].content == "Done."
    live.provider.force_flush()
    spans = sorted(live.exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    actions = [_loopguard_attrs(s).get("loopguard.action") for s in spans
               if s.name.startswith("execute_tool transfer_to_") or (s.attributes or {}).get(
                   "openinference.span.kind") == "TOOL"]
    assert actions[3] == "stop" and None not in actions[3:], _describe(spans)
    assert set(actions[:3]) == {None}, _describe(spans)
    path = tmp_path / "spans.jsonl"
    path.write_text("".join(line + "\n" for line in to_otlp_json_lines(list(spans))))
    records = list(iter_spans(str(path), strict=True))
    handoffs = [(e.event.from_agent, e.event.to_agent)
                for t in dict.fromkeys(r.trace_id for r in records)
                for e in assemble_trace(t, [r for r in records if r.trace_id == t],
                                        LoopGuardConfig()).events
                if isinstance(e.event, Handoff) and e.event.explicit]  # not a sibling's start
    assert handoffs == [("triage", "billing"), ("billing", "triage")] * 3
    assert live.internal_errors() == 0
