"""Enforce mode inside LangChain / LangGraph: ``LoopGuardMiddleware`` and ``guard_tool``, live.

Runs where LangChain 1.x is installed (``/work/rec-venvs/langchain-*``, or the venvs that
``.ci/frameworks.sh`` builds); skips elsewhere. The agent is LangChain's ``create_agent`` (a
LangGraph graph) driven offline by ``FakeMessagesListChatModel``, scripted to loop: it asks for
``search(query="refund policy")`` again and again, and each call returns the same empty result.

Most tests run LangChain *uninstrumented*: the guard records each call in its own spans.
``test_instrumented_*`` run the same scenarios in a subprocess with each installed
instrumentation (OpenInference, OpenLLMetry, official GenAI) on the provider that holds the
processor, where the instrumentation's spans are used instead; a subprocess because an
instrumentor patches LangChain for the whole process (see ``test_live_frameworks.py``).

The model-turn tests script a model that asks for two lookups in parallel each turn: the two
calls of a turn must be one batch, with one model span per model call (the instrumentation's,
or else the middleware's own), whatever the instrumentation.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any

import pytest

FAMILY = os.environ.get("LOOPGUARD_FRAMEWORK_FAMILY", "")
if FAMILY.startswith("langchain-"):
    importlib.import_module("langchain.agents")  # .ci/frameworks.sh: must be there
else:
    pytest.importorskip("langchain.agents", reason="langchain 1.x not installed "
                                                   "(tests/frameworks/requirements-langchain-*)")

from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import ToolErrorMiddleware  # noqa: E402
from langchain.tools import InjectedState, ToolRuntime  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage  # noqa: E402
from langchain_core.tools import BaseTool, InjectedToolCallId, tool  # noqa: E402
from opentelemetry.context import Context  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from prometheus_client import CollectorRegistry  # noqa: E402

from otel_loopguard import Action, LoopGuardConfig, LoopGuardSpanProcessor, ToolLoopError  # noqa: E402
from otel_loopguard.integrations.langchain import (  # noqa: E402
    RUN_KEY,
    LoopGuardMiddleware,
    LoopGuardToolCallWrapper,
    guard_tool,
)

sys.path.insert(0, str(Path(__file__).parent))
from _langchain_chat import ScriptedChat  # noqa: E402

LOOP_QUERY = {"query": "refund policy"}
LOOP_RESULT = json.dumps({"results": [], "note": "no results"})
STOP_AT_3 = {"stagnation_warn": 2, "stagnation_replan": 2, "stagnation_stop": 3}
"""The 3rd identical call with the same result is the one too many: 2 calls run."""
WARN_ON = {"mode": "enforce", "enforcement": "hint", "hint_on_warn": True,
           "stagnation_warn": 2, "stagnation_replan": 3, "stagnation_stop": 4}
"""``hint_on_warn``: the 2nd and 3rd identical calls get a warning, the 4th is stopped."""
INSTRUMENTATIONS = {
    "openinference": ("openinference.instrumentation.langchain", "LangChainInstrumentor"),
    "traceloop": ("opentelemetry.instrumentation.langchain", "LangchainInstrumentor"),
    "otel-genai": ("opentelemetry.instrumentation.genai.langchain", "LangChainInstrumentor"),
}
_GENAI_ENV = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
              "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}


# ----------------------------------------------------------------------------- harness
class Harness:
    """Loopguard on a provider, and a scripted looping agent whose tool counts its executions."""

    def __init__(self, provider: TracerProvider | None = None, **config: Any) -> None:
        self.registry = CollectorRegistry()
        self.exporter = InMemorySpanExporter()
        self.provider = provider or TracerProvider()
        self.processor = LoopGuardSpanProcessor(
            LoopGuardConfig.create(**config), downstream=SimpleSpanProcessor(self.exporter),
            registry=self.registry, raise_internal_errors=True)
        if provider is None:
            self.provider.add_span_processor(self.processor)
        self.executions: list[str] = []
        self.model: ScriptedChat | None = None

    def search_tool(self) -> BaseTool:
        executions = self.executions

        @tool
        def search(query: str) -> str:
            """Search the knowledge base."""
            executions.append(query)
            return LOOP_RESULT

        return search

    def agent(self, calls: Sequence[dict[str, Any]], *, how: str = "middleware",
              tools: list[Any] | None = None, tool_name: str = "search",
              middleware: Sequence[Any] = ()) -> Any:
        responses: list[Any] = [
            AIMessage(content="", tool_calls=[{"name": tool_name, "args": args,
                                               "id": f"call_{i}", "type": "tool_call"}])
            for i, args in enumerate(calls, 1)]
        responses.append(AIMessage("Done."))
        self.model = ScriptedChat(responses=responses)
        tools = tools if tools is not None else [self.search_tool()]
        extra = list(middleware)
        if how == "middleware":
            extra.insert(0, LoopGuardMiddleware(self.processor, tracer_provider=self.provider))
        elif how == "guard_tool":
            tools = [guard_tool(t, self.processor, tracer_provider=self.provider)
                     for t in tools]
        return create_agent(self.model, tools=tools, system_prompt="You are support triage.",
                            middleware=extra, name="triage")

    def run(self, calls: Sequence[dict[str, Any]], **kwargs: Any) -> list[BaseMessage]:
        out = self.agent(calls, **kwargs).invoke({"messages": [("user", "I want a refund")]},
                                                 config={"recursion_limit": 60})
        return list(out["messages"])

    def received_tool_messages(self) -> list[ToolMessage]:
        """The tool results the model was sent in its last call."""
        assert self.model is not None and self.model.received
        return [m for m in self.model.received[-1] if isinstance(m, ToolMessage)]

    def sample(self, name: str, **labels: str) -> float:
        self.processor.force_flush()  # detection runs on the processor's worker thread
        return self.registry.get_sample_value(name, labels) or 0.0

    def settled_sample(self, name: str, expected: float, **labels: str) -> float:
        """``sample``, read again for up to 5 s until it is ``expected``: LangChain may end a
        run's last span on a callback thread after ``invoke`` returns, so it can reach the
        processor's worker after the first flush."""
        deadline = time.monotonic() + 5
        value = self.sample(name, **labels)
        while value != expected and time.monotonic() < deadline:
            time.sleep(0.05)
            value = self.sample(name, **labels)
        return value

    def finished_spans(self) -> list[ReadableSpan]:
        """The exported spans, once the processor has checked and passed on every one."""
        self.processor.force_flush()
        return list(self.exporter.get_finished_spans())

    def enforced(self, enforcement: str) -> float:
        return self.sample("loopguard_enforced_total", prompt_template="unknown",
                           enforcement=enforcement)

    def tool_spans(self, name: str = "search") -> list[ReadableSpan]:
        return sorted((s for s in self.finished_spans()
                       if (s.attributes or {}).get("gen_ai.tool.name") == name),
                      key=lambda s: s.start_time or 0)


@pytest.fixture
def make() -> Iterator[Any]:
    made: list[Harness] = []

    def factory(**config: Any) -> Harness:
        made.append(Harness(**config))
        return made[-1]

    yield factory
    for harness in made:
        harness.provider.shutdown()


def _contents(messages: Sequence[BaseMessage]) -> list[Any]:
    return [m.content for m in messages if isinstance(m, ToolMessage)]


HOWS = ["middleware", "guard_tool"]


# ----------------------------------------------------------------------------- hint
@pytest.mark.parametrize(("config", "runs"), [(STOP_AT_3, 2), ({}, 4)],
                         ids=["stagnation_stop=3", "defaults"])
def test_looping_model_stops_executing_the_tool_after_the_configured_calls(
        make: Any, config: dict[str, Any], runs: int) -> None:
    h = make(mode="enforce", enforcement="hint", **config)
    messages = h.run([LOOP_QUERY] * 7)
    assert len(h.executions) == runs
    contents = _contents(messages)
    assert len(contents) == 7
    assert contents[:runs] == [LOOP_RESULT] * runs
    assert all(c.startswith("[loop-detected] ") for c in contents[runs:])
    assert messages[-1].content == "Done."


@pytest.mark.parametrize("how", HOWS)
def test_hint_mode_gives_the_model_the_hint_as_the_tool_result(make: Any, how: str) -> None:
    h = make(mode="enforce", enforcement="hint", **STOP_AT_3)
    tracer = h.provider.get_tracer("app")
    with tracer.start_as_current_span("invoke_agent triage"):  # guard_tool needs a run span
        h.run([LOOP_QUERY] * 4, how=how)
    assert len(h.executions) == 2
    received = h.received_tool_messages()
    assert [m.content for m in received][:2] == [LOOP_RESULT] * 2
    for message in received[2:]:
        assert message.content.startswith(
            '[loop-detected] You have called "search" with the same arguments 3 times')
        assert message.tool_call_id in ("call_3", "call_4")
        if how == "middleware":
            assert message.status == "error"
            assert message.artifact["error"] == "loop-detected"
            assert message.artifact["code"] == "STAGNANT_RESULT"


def test_hint_then_abort(make: Any) -> None:
    h = make(mode="enforce", enforcement="hint_then_abort", **STOP_AT_3)
    agent = h.agent([LOOP_QUERY] * 5)
    with pytest.raises(ToolLoopError):
        agent.invoke({"messages": [("user", "I want a refund")]})
    assert len(h.executions) == 2
    assert h.received_tool_messages()[-1].content.startswith("[loop-detected] ")
    assert h.enforced("hint") == 1 and h.enforced("abort") == 1


@pytest.mark.parametrize("how", HOWS)
def test_hint_on_warn_appends_the_hint_to_the_real_result(make: Any, how: str) -> None:
    h = make(mode="enforce", enforcement="hint", hint_on_warn=True)  # warn 3, replan 4, stop 5
    with h.provider.get_tracer("app").start_as_current_span("invoke_agent triage"):
        contents = _contents(h.run([LOOP_QUERY] * 4, how=how))
    assert len(h.executions) == 4
    assert contents[:2] == [LOOP_RESULT] * 2
    for content in contents[2:]:
        real, _, warning = content.partition("\n\n[loop-warning] ")
        assert real == LOOP_RESULT
        assert warning.startswith('You have called "search"')


# ----------------------------------------------------------------------------- abort
@pytest.mark.parametrize("how", HOWS)
def test_abort_mode_ends_the_run_with_tool_loop_error(make: Any, how: str) -> None:
    h = make(mode="enforce", enforcement="abort", **STOP_AT_3)
    with h.provider.get_tracer("app").start_as_current_span("invoke_agent triage"), \
            pytest.raises(ToolLoopError) as info:
        h.run([LOOP_QUERY] * 5, how=how)
    assert len(h.executions) == 2
    error = info.value
    assert error.tool_name == "search" and error.repeats == 3
    assert str(error) == ('Tool "search" was called 3 times with identical arguments'
                          " - aborting to prevent a loop")
    assert error.decision.action is Action.STOP
    assert error.decision.code == "STAGNANT_RESULT"
    assert h.model is not None and len(h.model.received) == 3  # stopped at that turn


def test_a_tool_failing_the_same_way_is_blocked_at_the_second_call(make: Any) -> None:
    h = make(mode="enforce", enforcement="abort")
    attempts: list[int] = []

    @tool
    def fetch_account(account_id: int) -> str:
        """Fetch an account record."""
        attempts.append(account_id)
        raise PermissionError("401 unauthorized")

    def on_error(exc: Exception, request: Any) -> str:
        return f"{type(exc).__name__}: {exc}"

    # LoopGuardMiddleware first (outermost): the error middleware inside it turns the tool's
    # exception into an error ToolMessage, which loopguard records as a failure.
    with pytest.raises(ToolLoopError) as info:
        h.run([{"account_id": 42}] * 3, tools=[fetch_account], tool_name="fetch_account",
              middleware=[ToolErrorMiddleware(on_error=on_error)])
    assert attempts == [42]
    assert info.value.decision.code == "PERMANENT_FAILURE"
    failed = h.tool_spans("fetch_account")[0]
    assert failed.status.description == "PermissionError: 401 unauthorized"


# ----------------------------------------------------------------------------- observe
def test_observe_mode_changes_nothing_and_reports_what_enforce_would_do(make: Any) -> None:
    calls = [LOOP_QUERY] * 6
    bare = make(mode="observe")
    baseline = bare.run(calls, how="none")
    observe = make(mode="observe", enforcement="abort")
    messages = observe.run(calls)
    assert observe.executions == bare.executions and len(bare.executions) == 6
    assert _contents(messages) == _contents(baseline) == [LOOP_RESULT] * 6
    assert [m.content for m in messages[-1:]] == [m.content for m in baseline[-1:]]

    spans = observe.tool_spans()
    assert [s.attributes.get("loopguard.precheck.action") for s in spans] == [
        None, None, "warn", "replan", "stop", "stop"]
    assert {s.attributes.get("loopguard.precheck.mode") for s in spans[2:]} == {"observe"}
    assert [s.attributes.get("loopguard.would_block") for s in spans] == [None] * 4 + [True] * 2
    assert not any("loopguard.blocked" in s.attributes for s in spans)
    assert observe.settled_sample("loopguard_loop_detected_total", 2, prompt_template="unknown",
                                  detector="stagnation", action="stop", mode="observe") == 2
    assert observe.enforced("abort") == observe.enforced("hint") == 0

    enforce = make(mode="enforce", enforcement="hint")
    enforce.run(calls)
    assert [s.attributes.get("loopguard.precheck.action") for s in enforce.tool_spans()][:5] == [
        s.attributes.get("loopguard.precheck.action") for s in spans][:5]


# ----------------------------------------------------------------------------- metrics, spans
def test_enforcements_are_counted_and_the_blocked_span_says_why(make: Any) -> None:
    h = make(mode="enforce", enforcement="hint", **STOP_AT_3)
    h.run([LOOP_QUERY] * 5)
    assert h.enforced("hint") == 3
    assert h.sample("loopguard_tool_calls_total", prompt_template="unknown",
                    tool="search") == 2
    spans = h.tool_spans()
    assert len(spans) == 5 and len({s.context.trace_id for s in spans}) == 1
    for span in spans[2:]:
        attrs = span.attributes
        assert attrs["loopguard.blocked"] is True
        assert attrs["loopguard.enforcement"] == "hint"
        assert attrs["loopguard.precheck.code"] == "STAGNANT_RESULT"
        assert "same arguments 3 times" in attrs["loopguard.hint"]
        assert "gen_ai.tool.call.result" not in attrs
    assert all(s.attributes["gen_ai.tool.call.result"] == LOOP_RESULT for s in spans[:2])

    abort = make(mode="enforce", enforcement="abort", **STOP_AT_3)
    with pytest.raises(ToolLoopError):
        abort.run([LOOP_QUERY] * 5)
    last = abort.tool_spans()[-1]
    assert last.attributes["loopguard.enforcement"] == "abort"
    assert last.status.status_code.name == "ERROR"
    assert abort.enforced("abort") == 1


# ----------------------------------------------------------------------------- runs
def test_each_invocation_is_a_run_and_is_released(make: Any) -> None:
    h = make(mode="enforce", enforcement="hint", **STOP_AT_3)
    agent = h.agent([LOOP_QUERY] * 2)
    for _ in range(2):  # the scripted model (it cycles) asks for 2 calls, then says "Done."
        agent.invoke({"messages": [("user", "I want a refund")]})
    # ...and each invocation is its own run: no hint at its 2nd call of the same search.
    assert len(h.executions) == 4
    assert h.enforced("hint") == 0
    spans = h.tool_spans()
    assert len({s.context.trace_id for s in spans}) == 2
    synthetic = all(s.parent is not None and s.parent.span_id == (
        (s.context.trace_id >> 64) ^ s.context.trace_id) & ((1 << 64) - 1) for s in spans)
    if synthetic:  # (not when another test module's instrumentation is active in-process)
        assert len(h.processor.store) == 0  # after_agent released both synthetic runs


def test_async_agent(make: Any) -> None:
    h = make(mode="enforce", enforcement="hint", **STOP_AT_3)
    agent = h.agent([LOOP_QUERY] * 4)
    out = asyncio.run(agent.ainvoke({"messages": [("user", "I want a refund")]}))
    assert len(h.executions) == 2
    assert [c.startswith("[loop-detected]") for c in _contents(out["messages"])] == [
        False, False, True, True]


def test_concurrent_invocations_do_not_share_state(make: Any) -> None:
    h = make(mode="enforce", enforcement="hint", **STOP_AT_3)
    agents = [h.agent([LOOP_QUERY] * 3) for _ in range(2)]

    async def both() -> list[Any]:
        return list(await asyncio.gather(*(
            a.ainvoke({"messages": [("user", "I want a refund")]}) for a in agents)))

    for out in asyncio.run(both()):
        assert [c.startswith("[loop-detected]") for c in _contents(out["messages"])] == [
            False, False, True]
    assert len(h.executions) == 4


def test_langgraph_tool_node_with_the_wrapper(make: Any) -> None:
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    h = make(mode="enforce", enforcement="hint", **STOP_AT_3)
    search = h.search_tool()
    responses: list[Any] = [
        AIMessage(content="", tool_calls=[{"name": "search", "args": LOOP_QUERY,
                                           "id": f"call_{i}", "type": "tool_call"}])
        for i in range(4)] + [AIMessage("Done.")]
    model = ScriptedChat(responses=responses)
    wrapper = LoopGuardToolCallWrapper(h.processor, tracer_provider=h.provider)

    graph = StateGraph(MessagesState)
    graph.add_node("model", lambda state: {"messages": [model.invoke(state["messages"])]})
    graph.add_node("tools", ToolNode([search], wrap_tool_call=wrapper,
                                     awrap_tool_call=wrapper.awrap))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    graph.add_edge("model", END)
    out = graph.compile().invoke({"messages": [("user", "I want a refund")]})
    assert len(h.executions) == 2  # the run is the message thread (no span, no middleware)
    assert [c.startswith("[loop-detected]") for c in _contents(out["messages"])] == [
        False, False, True, True]


def _injected_search(executions: list[str], injected: str) -> BaseTool:
    """A looping ``search`` with one argument LangChain fills in, not the model."""
    if injected == "runtime":
        @tool
        def search(query: str, runtime: ToolRuntime) -> str:
            """Search the knowledge base."""
            executions.append(query)
            return LOOP_RESULT
    elif injected == "state":
        @tool
        def search(query: str, state: Annotated[dict[str, Any], InjectedState]) -> str:
            """Search the knowledge base."""
            executions.append(query)
            return LOOP_RESULT
    else:
        @tool
        def search(query: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
            """Search the knowledge base."""
            executions.append(query)
            return LOOP_RESULT
    return search


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("injected", ["runtime", "state", "tool_call_id"])
def test_injected_arguments_are_not_the_call_s_arguments(make: Any, how: str,
                                                          injected: str) -> None:
    # guard_tool recorded every parameter of the tool's function, the ToolRuntime, the agent
    # state or the tool call id LangChain injects included: they differ from call to call, so
    # the identical calls of a loop never matched (5 of 5 ran; 3 with the tool call id).
    h = make(mode="enforce", enforcement="hint", **STOP_AT_3)
    search = _injected_search(h.executions, injected)
    with h.provider.get_tracer("app").start_as_current_span("invoke_agent triage"):
        contents = _contents(h.run([LOOP_QUERY] * 5, how=how, tools=[search]))
    assert len(h.executions) == 2
    assert [c.startswith("[loop-detected]") for c in contents] == [False, False, True, True, True]
    assert [json.loads(s.attributes["gen_ai.tool.call.arguments"])  # type: ignore[index, arg-type]
            for s in h.tool_spans() if not s.attributes.get("loopguard.blocked")] == [
        LOOP_QUERY] * 2


def test_guard_tool_keeps_the_tool_and_rejects_other_tools(make: Any) -> None:
    h = make(mode="enforce")
    search = h.search_tool()
    guarded = guard_tool(search, h.processor)
    assert (guarded.name, guarded.description, guarded.args) == (
        search.name, search.description, search.args)
    assert guarded is not search

    class Custom(BaseTool):
        name: str = "custom"
        description: str = "custom"

        def _run(self, *args: Any, **kwargs: Any) -> str:
            return "x"

    with pytest.raises(TypeError, match="StructuredTool"):
        guard_tool(Custom(), h.processor)
    assert RUN_KEY == "loopguard_run_id"


# ----------------------------------------------------------------------------- model turns
PAIR_TURNS = 4
"""Turns in which the model asks for the same two lookups in parallel (then it answers)."""


class NamedChat(ScriptedChat):
    """A scripted chat model with a model name, which the official GenAI instrumentation needs
    to write a model span (it skips a model it cannot name)."""

    model_name: str | None = None

    def _get_invocation_params(self, stop: list[str] | None = None,
                               **kwargs: Any) -> dict[str, Any]:
        params = super()._get_invocation_params(stop=stop, **kwargs)
        if self.model_name:
            params["model_name"] = self.model_name
        return params


def _pair_run(h: Harness, *, advancing: bool, model_name: str | None = None,
              chat: type[NamedChat] = NamedChat) -> dict[str, Any]:
    """Run an agent that asks for ``lookup_order`` and ``lookup_stock`` together each turn.

    ``advancing``: the lookups' results change every second turn (a healthy agent polling two
    things); else they never change (a loop of the same batch). Returns the findings of the
    live processor and of ``check`` on the exported spans, and the model spans' scopes.
    """
    from otel_loopguard.adapters import is_model_turn
    from otel_loopguard.otlp._sdk import span_record_from_readable
    from otel_loopguard.replay import Checker

    counts = {"lookup_order": 0, "lookup_stock": 0}

    def lookup(tool_name: str, **args: str) -> str:
        done = counts[tool_name]
        counts[tool_name] += 1
        h.executions.append(tool_name)
        return json.dumps({**args, "revision": done // 2 if advancing else 0})

    @tool
    def lookup_order(order_id: str) -> str:
        """Look up an order."""
        return lookup("lookup_order", order_id=order_id)

    @tool
    def lookup_stock(sku: str) -> str:
        """Look up a product's stock."""
        return lookup("lookup_stock", sku=sku)

    responses: list[Any] = [AIMessage(content="", tool_calls=[
        {"name": "lookup_order", "args": {"order_id": "A1"}, "id": f"call_{i}a",
         "type": "tool_call"},
        {"name": "lookup_stock", "args": {"sku": "X-1"}, "id": f"call_{i}b",
         "type": "tool_call"}]) for i in range(PAIR_TURNS)]
    responses.append(AIMessage("Done."))
    h.model = chat(responses=responses, model_name=model_name)
    agent = create_agent(h.model, tools=[lookup_order, lookup_stock],
                         middleware=[LoopGuardMiddleware(h.processor, tracer_provider=h.provider)],
                         name="triage")
    agent.invoke({"messages": [("user", "Where is my order?")]})
    spans = h.finished_spans()
    live = sorted((a["loopguard.call_index"], a["loopguard.detector"], a["loopguard.action"])
                  for s in spans if (a := s.attributes or {}).get("loopguard.detector"))
    reports = list(Checker(h.processor.config).run(
        [span_record_from_readable(s) for s in spans]))
    findings = [d for r in reports for d in r.findings]
    return {
        "executions": len(h.executions),
        "live": live,
        "check": sorted((d.call_index, d.detector, d.action.label) for d in findings),
        "evidence": sorted({e.detector for d in findings for e in d.evidence}),
        "model_spans": sorted(s.instrumentation_scope.name if s.instrumentation_scope else ""
                              for s in spans if is_model_turn(s.name, s.attributes or {})),
    }


def _assert_batched(healthy: dict[str, Any], loop: dict[str, Any]) -> None:
    """Each model turn's two calls are one batch: the live processor and ``check`` agree."""
    assert healthy["executions"] == loop["executions"] == 2 * PAIR_TURNS
    # Two identical turns, then new results: polling, not a cycle. As separate calls the
    # two turns read lookup_order, lookup_stock, lookup_order, lookup_stock: a cycle warned.
    assert healthy["live"] == healthy["check"] == []
    # The same batch turn after turn: the batch detector sees it; no cycle of single calls.
    assert [tuple(f) for f in loop["live"]] == [tuple(f) for f in loop["check"]] != []
    assert "batch" in loop["evidence"] and "cycle" not in loop["evidence"]


@pytest.mark.parametrize("config", [{}, {"run_key": "agent"}, {"mode": "enforce"}],
                         ids=["observe", "run_key=agent", "enforce"])
def test_parallel_tool_calls_of_one_model_call_are_one_batch(make: Any,
                                                             config: dict[str, Any]) -> None:
    # Uninstrumented: the middleware records each model call in a chat span of its own.
    healthy = _pair_run(make(**config), advancing=True)
    loop = _pair_run(make(**config), advancing=False)
    _assert_batched(healthy, loop)
    assert healthy["model_spans"] == ["otel_loopguard.enforce"] * (PAIR_TURNS + 1)


def test_a_model_span_of_a_model_client_is_not_counted_twice(make: Any) -> None:
    # A model client's instrumentation (here: a chat span the model opens under the current
    # span) already makes each model call a turn: the middleware adds no span of its own.
    h = make()
    tracer = h.provider.get_tracer("model-client")

    class ClientChat(NamedChat):
        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            with tracer.start_as_current_span("chat scripted-1", attributes={
                    "gen_ai.operation.name": "chat"}):
                return super()._generate(*args, **kwargs)

    with h.provider.get_tracer("app").start_as_current_span("agent run"):
        loop = _pair_run(h, advancing=False, chat=ClientChat)
    assert loop["model_spans"] == ["model-client"] * (PAIR_TURNS + 1)
    assert "batch" in loop["evidence"] and "cycle" not in loop["evidence"]


def test_concurrent_agents_in_one_run_each_record_every_model_call(make: Any) -> None:
    # Two agents under one span (one run): a chat span one of them records while the other's
    # model call runs is not the other's model span; each model call gets one span.
    h = make()
    agents = [h.agent([LOOP_QUERY] * 3) for _ in range(2)]

    async def both() -> None:
        await asyncio.gather(*(a.ainvoke({"messages": [("user", "I want a refund")]})
                               for a in agents))

    with h.provider.get_tracer("app").start_as_current_span("two agents"):
        asyncio.run(both())
    chats = [s for s in h.finished_spans() if (s.attributes or {}).get(
        "gen_ai.operation.name") == "chat"]
    assert len(chats) == 2 * 4
    assert len(h.executions) == 6


def test_the_own_model_span_says_what_the_response_says(make: Any) -> None:
    h = make()
    responses: list[Any] = [
        AIMessage(content="", tool_calls=[{"name": "search", "args": LOOP_QUERY, "id": "call_1",
                                           "type": "tool_call"}],
                  usage_metadata={"input_tokens": 120, "output_tokens": 8, "total_tokens": 128},
                  response_metadata={"model_name": "gpt-test"}),
        AIMessage("Done.", response_metadata={"finish_reason": "length"})]
    agent = create_agent(ScriptedChat(responses=responses), tools=[h.search_tool()],
                         middleware=[LoopGuardMiddleware(h.processor, tracer_provider=h.provider)])
    agent.invoke({"messages": [("user", "I want a refund")]})
    first, last = [s for s in h.finished_spans() if s.name.startswith("chat")]
    assert first.name == "chat gpt-test"
    assert dict(first.attributes or {}) == {
        "gen_ai.operation.name": "chat", "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 8,
        "gen_ai.response.model": "gpt-test"}
    assert (last.attributes or {})["gen_ai.response.finish_reasons"] == ("length",)


def test_a_failed_model_call_is_a_failed_turn(make: Any) -> None:
    h = make()

    class Failing(ScriptedChat):
        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            raise ValueError("model unavailable")

    agent = create_agent(Failing(responses=[AIMessage("unused")]), tools=[h.search_tool()],
                         middleware=[LoopGuardMiddleware(h.processor, tracer_provider=h.provider)])
    with pytest.raises(ValueError, match="model unavailable"):
        agent.invoke({"messages": [("user", "I want a refund")]})
    (chat,) = [s for s in h.finished_spans() if s.name == "chat"]
    assert chat.status.description == "ValueError"
    assert "gen_ai.response.finish_reasons" not in (chat.attributes or {})


# ----------------------------------------------------------------------------- instrumented
class _Slot(SpanProcessor):
    """Forwards to the processor of the current scenario (one instrumented provider)."""

    def __init__(self) -> None:
        self.target: SpanProcessor | None = None

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self.target is not None:
            self.target.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self.target is not None:
            self.target.on_end(span)


def _is_search_span(span: ReadableSpan) -> bool:
    attrs = span.attributes or {}
    return attrs.get("gen_ai.tool.name") == "search" or attrs.get("tool.name") == "search" or (
        attrs.get("openinference.span.kind") == "TOOL" and span.name == "search")


_NO_CONTENT_ENV = {"openinference": {"OPENINFERENCE_HIDE_INPUTS": "true",
                                      "OPENINFERENCE_HIDE_OUTPUTS": "true"},
                   "traceloop": {"TRACELOOP_TRACE_CONTENT": "false"},
                   "otel-genai": {}}  # its default: no content unless _GENAI_ENV
"""Each instrumentation with its content capture off (the ``no-content`` subprocess)."""


def _scenarios(instrumentation: str, content: bool = True) -> dict[str, Any]:
    """Run hint, abort and observe under ``instrumentation``; return what was seen (JSON).

    Without ``content``, only the hints (the middleware's and ``guard_tool``'s), with the
    instrumentation's content capture off.
    """
    module, name = INSTRUMENTATIONS[instrumentation]
    if not content:
        os.environ.update(_NO_CONTENT_ENV[instrumentation])
    elif instrumentation == "otel-genai":
        os.environ.update(_GENAI_ENV)
    slot = _Slot()
    provider = TracerProvider()
    provider.add_span_processor(slot)
    getattr(importlib.import_module(module), name)().instrument(tracer_provider=provider)
    out: dict[str, Any] = {}
    scenarios = (
        ("hint", "middleware", {"mode": "enforce", "enforcement": "hint"}),
        ("hint_tool", "guard_tool", {"mode": "enforce", "enforcement": "hint"}),
        ("abort", "middleware", {"mode": "enforce", "enforcement": "abort"}),
        ("abort_tool", "guard_tool", {"mode": "enforce", "enforcement": "abort"}),
        ("observe", "middleware", {"mode": "observe"}),
        ("warn", "middleware", WARN_ON),
        ("warn_tool", "guard_tool", WARN_ON))
    for scenario, how, config in scenarios if content else scenarios[:2]:
        h = Harness(provider, **{**STOP_AT_3, **config})
        slot.target = h.processor
        seen: dict[str, Any] = {}
        try:
            seen["contents"] = _contents(h.run([LOOP_QUERY] * (5 if config is WARN_ON else 4),
                                               how=how))
        except ToolLoopError as exc:
            seen["error"] = str(exc)
        tools = [s for s in h.finished_spans() if _is_search_span(s)]
        seen.update(
            executions=len(h.executions),
            own_spans=sum(1 for s in tools if s.instrumentation_scope is not None
                          and s.instrumentation_scope.name == "otel_loopguard.enforce"),
            blocked=sum(1 for s in tools if (s.attributes or {}).get("loopguard.blocked")),
            tool_calls=h.sample("loopguard_tool_calls_total", prompt_template="unknown",
                                tool="search"),
            enforced=h.enforced("hint") + h.enforced("abort"),
            observe_stops=h.sample("loopguard_loop_detected_total", prompt_template="unknown",
                                   detector="stagnation", action="stop", mode="observe"))
        out[scenario] = seen
        slot.target = None
    return out


def _turn_scenarios(instrumentation: str) -> dict[str, Any]:
    """Run the parallel lookups under ``instrumentation``; return what was seen (JSON)."""
    module, name = INSTRUMENTATIONS[instrumentation]
    if instrumentation == "otel-genai":
        os.environ.update(_GENAI_ENV)
    slot = _Slot()
    provider = TracerProvider()
    provider.add_span_processor(slot)
    getattr(importlib.import_module(module), name)().instrument(tracer_provider=provider)
    out: dict[str, Any] = {}
    for model_name in (None, "scripted-1"):
        for advancing in (True, False):
            h = Harness(provider)
            slot.target = h.processor
            out[f"{model_name}/{'healthy' if advancing else 'loop'}"] = _pair_run(
                h, advancing=advancing, model_name=model_name)
            slot.target = None
    return out


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def _in_subprocess(instrumentation: str, *args: str) -> dict[str, Any]:
    module = INSTRUMENTATIONS[instrumentation][0]
    if not _installed(module):
        if f"langchain-{instrumentation}" == FAMILY:
            pytest.fail(f"{module} is missing in the {FAMILY} venv")
        pytest.skip(f"{module} not installed")
    proc = subprocess.run([sys.executable, str(Path(__file__)), instrumentation, *args],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module", params=sorted(INSTRUMENTATIONS))
def instrumented(request: pytest.FixtureRequest) -> dict[str, Any]:
    return _in_subprocess(request.param)


@pytest.mark.parametrize("instrumentation", sorted(INSTRUMENTATIONS))
def test_instrumented_parallel_tool_calls_are_one_batch_per_model_call(
        instrumentation: str) -> None:
    seen = _in_subprocess(instrumentation, "turns")
    for model_name in ("None", "scripted-1"):
        healthy, loop = seen[f"{model_name}/healthy"], seen[f"{model_name}/loop"]
        _assert_batched(healthy, loop)
        # One model span per model call: the instrumentation's, or else the middleware's.
        # The official GenAI one writes none for a model it cannot name.
        writes = instrumentation != "otel-genai" or model_name != "None"
        for run in (healthy, loop):
            assert len(run["model_spans"]) == PAIR_TURNS + 1
            assert ("otel_loopguard.enforce" in run["model_spans"]) is not writes


@pytest.mark.parametrize("scenario", ["hint", "hint_tool"])
def test_instrumented_hint_uses_the_instrumentation_spans(instrumented: dict[str, Any],
                                                          scenario: str) -> None:
    hint = instrumented[scenario]
    assert hint["executions"] == 2
    assert hint["contents"][:2] == [LOOP_RESULT] * 2
    assert all(c.startswith("[loop-detected] ") for c in hint["contents"][2:])
    assert hint["tool_calls"] == 2  # every executed call counted once, by the instrumentation
    assert hint["enforced"] == 2
    if scenario == "hint":  # the middleware: the blocked calls get a span of loopguard's own
        assert hint["own_spans"] == hint["blocked"] == 2
    else:  # guard_tool runs inside the instrumentation's tool span and marks it
        assert hint["own_spans"] == 0 and hint["blocked"] == 2


@pytest.mark.parametrize("scenario", ["abort", "abort_tool"])
def test_instrumented_abort(instrumented: dict[str, Any], scenario: str) -> None:
    abort = instrumented[scenario]
    assert abort["executions"] == 2
    assert abort["error"].startswith('Tool "search" was called 3 times')
    assert abort["blocked"] == 1 and abort["enforced"] == 1


def test_instrumented_observe_changes_nothing(instrumented: dict[str, Any]) -> None:
    observe = instrumented["observe"]
    assert observe["executions"] == 4
    assert observe["contents"] == [LOOP_RESULT] * 4
    assert observe["own_spans"] == 0 and observe["blocked"] == 0 and observe["enforced"] == 0
    assert observe["tool_calls"] == 4
    assert observe["observe_stops"] == 2


@pytest.mark.parametrize("scenario", ["warn", "warn_tool"])
def test_instrumented_hint_on_warn_still_stops_the_loop(instrumented: dict[str, Any],
                                                        scenario: str) -> None:
    # guard_tool appends the warning inside the tool's function, so the instrumentation's tool
    # span records the result with it; each warning names the call's count, so every warned
    # call used to look like a new result and the loop was stopped only at the 6th call.
    warn = instrumented[scenario]
    assert warn["executions"] == 3
    contents = warn["contents"]
    assert contents[0] == LOOP_RESULT
    assert [c.partition("\n\n[loop-warning] ")[0] for c in contents[1:3]] == [LOOP_RESULT] * 2
    assert all(c.startswith("[loop-detected] ") for c in contents[3:])
    assert warn["tool_calls"] == 3 and warn["enforced"] == 2


@pytest.mark.parametrize("instrumentation", sorted(INSTRUMENTATIONS))
@pytest.mark.parametrize("scenario", ["hint", "hint_tool"])
def test_the_loop_is_stopped_with_the_instrumentation_content_off(instrumentation: str,
                                                                  scenario: str) -> None:
    """With its content capture off, the instrumentation's tool spans carry no arguments and no
    results: calls of unknown content are never the same, and nothing was stopped (the tool ran
    every time). Inside that span, ``guard_tool`` and the middleware's copy of the tool hand
    the engine the call's own arguments and result by its span id, the exported span
    untouched."""
    hint = _in_subprocess(instrumentation, "no-content")[scenario]
    assert hint["executions"] == 2
    assert hint["contents"][:2] == [LOOP_RESULT] * 2
    assert all(c.startswith("[loop-detected] ") for c in hint["contents"][2:])
    assert hint["tool_calls"] == 2 and hint["enforced"] == 2


if __name__ == "__main__":  # the subprocess of ``_in_subprocess``
    print(json.dumps(_turn_scenarios(sys.argv[1]) if sys.argv[2:] == ["turns"]
                     else _scenarios(sys.argv[1], content=sys.argv[2:] != ["no-content"])))
