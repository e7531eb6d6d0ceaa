"""``@guard.tool`` on framework tools that take what the framework passes them, live.

A tool function may ask its framework for a context object: pydantic-ai's ``RunContext``,
Google ADK's and Strands' ``ToolContext`` (and Strands' ``agent``), LlamaIndex's workflow
``Context``, an MCP server's ``Context``. The model never gives those, and their text changes
from call to call (or is a memory address), so ``ToolGuard`` recording them made the identical
calls of a loop look new: pydantic-ai and Strands ran every call, the others one call too many.

Each test runs the framework's own agent (or, for MCP, a client session with a FastMCP server
in this process) driven by a scripted model that asks for ``search(query="refund policy")``
six times and then answers. The guard is in hint mode with the default ``stagnation_stop = 5``:
the tool runs 4 times, the 5th and 6th calls get the ``[loop-detected]`` hint as their result
(the run goes on and ends with the answer), and every call's recorded arguments are the
model's, ``{"query": "refund policy"}``.

The pydantic-ai, Google ADK and Strands tests run twice: uninstrumented, the guard's own
``execute_tool`` spans are the calls; with the framework's instrumentation on the processor's
provider (``instrumented``), the framework's tool span is current when the guarded function
runs, and the guard prechecks and marks that span instead of opening one: each call counts
once. (The guard used to add its span inside the framework's, so every call counted twice and
the loop was stopped at the 3rd call, after 2 runs.)

The frameworks come from the family venvs of ``scripted_agents.FAMILIES``; the family named by
``LOOPGUARD_FRAMEWORK_FAMILY`` must be installed, the others skip. The guard's spans go to a
provider of the test's own (the global one for ADK and Strands instrumented: they write only
there), under a span the test opens around the run.
"""

# No ``from __future__ import annotations``: the frameworks read the tools' annotations
# (``RunContext``, ``Context``...) and these are imported inside the tests.
import asyncio
import importlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor, ToolGuard

sys.path.insert(0, str(Path(__file__).parent))
from scripted_agents import ANSWER, FAMILIES, FORWARD, FRAMEWORKS, LOOP_QUERY, Step

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::ImportWarning")]

LOOP: list[Step] = [[("search", LOOP_QUERY)]] * 6 + [ANSWER]
NO_RESULTS = "no results"
OWN_SCOPE = "otel_loopguard.enforce"


def _require(framework: str, *modules: str) -> None:
    """Import ``modules``; skip when absent, unless the running family holds ``framework``.

    The framework's environment is set as ``test_live_agent_frameworks.py`` sets it, first:
    Strands reads its semantic-conventions opt-in once, when its first agent is made.
    """
    for key, value in FRAMEWORKS[framework].env.items():
        os.environ.setdefault(key, value)
    family = os.environ.get("LOOPGUARD_FRAMEWORK_FAMILY", "")
    for module in modules:
        if framework in FAMILIES.get(family, ()):
            importlib.import_module(module)  # .ci/frameworks.sh: must be there
        else:
            pytest.importorskip(module, reason=f"{framework} not installed")


class Guarded:
    """A processor in enforce mode (hint) on a provider of its own, and its ``ToolGuard``.

    ``on_global``: the processor gets the global provider's spans instead (through
    ``scripted_agents.FORWARD``), and the guard uses that provider.
    """

    def __init__(self, *, on_global: bool = False) -> None:
        self.exporter = InMemorySpanExporter()
        self.registry = CollectorRegistry()
        self.processor = LoopGuardSpanProcessor(
            LoopGuardConfig.create(mode="enforce", enforcement="hint"),
            downstream=SimpleSpanProcessor(self.exporter), registry=self.registry,
            raise_internal_errors=True)
        self.on_global = on_global
        if on_global:
            provider = trace.get_tracer_provider()
            assert isinstance(provider, TracerProvider), "instrument the framework first"
            self.provider = provider
            FORWARD.targets = (self.processor,)
        else:
            self.provider = TracerProvider()
            self.provider.add_span_processor(self.processor)
        self.guard = ToolGuard(self.processor, tracer_provider=self.provider)
        self.instrumented = False
        """Whether the framework's instrumentation writes to the processor's provider."""
        self.ran: list[str] = []
        self.injected: list[str] = []

    def search(self, query: str, *injected: Any) -> str:
        """The tool's body: note the call and what the framework passed."""
        self.ran.append(query)
        self.injected.append(",".join(type(value).__name__ for value in injected))
        return NO_RESULTS

    def run(self, agent_run: Callable[[], Any]) -> Any:
        """Run the agent under one span (the run), and check what the guard did."""
        try:
            with self.provider.get_tracer("app").start_as_current_span(
                    "invoke_agent triage") as root:
                answer = agent_run()
            self.provider.force_flush()
        finally:
            if self.on_global:
                FORWARD.targets = ()
        run_id = format(root.get_span_context().trace_id, "032x")
        spans = [s for s in self.exporter.get_finished_spans()
                 if (s.attributes or {}).get("gen_ai.operation.name") == "execute_tool"]
        assert self.ran == ["refund policy"] * 4
        # One span per call: the guard's own, or the framework's when it is instrumented.
        assert [_scope(s) == OWN_SCOPE for s in spans] == [not self.instrumented] * 6
        assert [_blocked(s) for s in spans] == [False] * 4 + [True] * 2
        assert [json.loads(str((s.attributes or {})["gen_ai.tool.call.arguments"]))
                for s in spans] == [LOOP_QUERY] * 6
        assert [(s.attributes or {}).get("gen_ai.tool.call.result") is not None
                for s in spans[:4]] == [True] * 4
        assert {(s.attributes or {}).get("loopguard.precheck.run_id")
                for s in spans[2:]} == {run_id}
        assert self.processor.guard.errors == 0
        assert self.registry.get_sample_value("loopguard_enforced_total",
                                              {"prompt_template": "unknown",
                                               "enforcement": "hint"}) == 2.0
        assert self.registry.get_sample_value("loopguard_tool_calls_total",
                                              {"prompt_template": "unknown",
                                               "tool": "search"}) == 4.0
        if self.on_global:
            self.processor.shutdown()
        else:
            self.provider.shutdown()
        return answer


def _scope(span: ReadableSpan) -> str:
    return span.instrumentation_scope.name if span.instrumentation_scope else ""


def _blocked(span: ReadableSpan) -> bool:
    return bool((span.attributes or {}).get("loopguard.blocked"))


@pytest.fixture
def guarded() -> Guarded:
    return Guarded()


def _global_guarded(framework: str, instrumented: bool) -> Guarded:
    """Return the ``Guarded`` of an ADK or Strands test: on the global provider, instrumented."""
    if not instrumented:
        return Guarded()
    provider = TracerProvider()
    provider.add_span_processor(FORWARD)
    FRAMEWORKS[framework].instrument(provider)  # sets the global provider, once per process
    guarded = Guarded(on_global=True)
    guarded.instrumented = True
    return guarded


# ----------------------------------------------------------------------------- pydantic-ai


@pytest.mark.parametrize("instrumented", [False, True], ids=["own-spans", "instrumented"])
def test_pydantic_ai_run_context_is_not_an_argument(guarded: Guarded,
                                                    instrumented: bool) -> None:
    _require("pydantic-ai", "pydantic_ai")
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    steps = list(LOOP)

    def model(messages: Any, info: AgentInfo) -> ModelResponse:
        step = steps.pop(0)
        if isinstance(step, str):
            return ModelResponse(parts=[TextPart(step)])
        return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call_{len(steps)}")
                                    for name, args in step])

    agent = Agent(FunctionModel(model), name="triage")
    agent.instrument = InstrumentationSettings(tracer_provider=guarded.provider) \
        if instrumented else False
    guarded.instrumented = instrumented

    @agent.tool
    @guarded.guard.tool
    def search(ctx: RunContext[None], query: str) -> str:
        """Search the knowledge base."""
        return guarded.search(query, ctx)

    result = guarded.run(lambda: agent.run_sync("I want a refund"))
    assert result.output == ANSWER
    assert guarded.injected == ["RunContext"] * 4
    returns = [part.content for message in result.all_messages() for part in message.parts
               if isinstance(part, ToolReturnPart)]
    assert returns[:4] == [NO_RESULTS] * 4
    assert [str(r).startswith("[loop-detected]") for r in returns[4:]] == [True, True]


# ----------------------------------------------------------------------------- Google ADK


@pytest.mark.parametrize("instrumented", [False, True], ids=["own-spans", "instrumented"])
def test_adk_tool_context_is_not_an_argument(instrumented: bool) -> None:
    _require("google-adk", "google.adk")
    guarded = _global_guarded("google-adk", instrumented)
    from google.adk.agents import LlmAgent
    from google.adk.runners import InMemoryRunner
    from google.adk.tools import ToolContext
    from google.genai import types
    from scripted_agents import _adk_model

    @guarded.guard.tool
    def search(query: str, tool_context: ToolContext) -> str:
        """Search the knowledge base."""
        return guarded.search(query, tool_context)

    runner = InMemoryRunner(agent=LlmAgent(name="triage", description="Support triage.",
                                           model=_adk_model(LOOP), tools=[search]),
                            app_name="support")
    responses: list[Any] = []

    async def go() -> None:
        await runner.session_service.create_session(app_name="support", user_id="u",
                                                    session_id="guarded")
        message = types.Content(role="user", parts=[types.Part(text="I want a refund")])
        async for event in runner.run_async(user_id="u", session_id="guarded",
                                            new_message=message):
            responses.extend(event.get_function_responses())

    guarded.run(lambda: asyncio.run(go()))
    assert guarded.injected == ["Context"] * 4  # ADK's ToolContext is its Context
    assert [str(r.response["result"]).startswith("[loop-detected]")
            for r in responses] == [False] * 4 + [True] * 2


# ----------------------------------------------------------------------------- Strands


@pytest.mark.parametrize("instrumented", [False, True], ids=["own-spans", "instrumented"])
def test_strands_tool_context_and_agent_are_not_arguments(instrumented: bool) -> None:
    _require("strands", "strands")
    guarded = _global_guarded("strands", instrumented)
    from scripted_agents import _strands_model
    from strands import Agent, ToolContext, tool

    @tool(context=True)
    @guarded.guard.tool
    def search(query: str, tool_context: ToolContext, agent: Agent) -> str:
        """Search the knowledge base.

        Args:
            query: what to look for.
        """
        return guarded.search(query, tool_context, agent)

    agent = Agent(model=_strands_model(LOOP), name="triage", tools=[search],
                  callback_handler=None)
    result = guarded.run(lambda: agent("I want a refund"))
    assert str(result).strip() == ANSWER
    assert guarded.injected == ["ToolContext,Agent"] * 4
    results = [block["toolResult"]["content"][0]["text"] for message in agent.messages
               for block in message["content"] if "toolResult" in block]
    assert [r.startswith("[loop-detected]") for r in results] == [False] * 4 + [True] * 2


# ----------------------------------------------------------------------------- LlamaIndex


def test_llama_index_context_is_not_an_argument(guarded: Guarded) -> None:
    _require("llama-index", "llama_index.core")
    from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
    from llama_index.core.workflow import Context
    from scripted_agents import _llama_llm

    @guarded.guard.tool
    async def search(ctx: Context, query: str) -> str:
        """Search the knowledge base."""
        return guarded.search(query, ctx)

    agent = FunctionAgent(name="triage", description="Support triage.",
                          system_prompt="You are support triage.", tools=[search],
                          llm=_llama_llm(LOOP))
    outputs: list[str] = []

    async def go() -> Any:
        handler = agent.run(user_msg="I want a refund")
        async for event in handler.stream_events():
            if isinstance(event, ToolCallResult):
                outputs.append(str(event.tool_output.content))
        return await handler

    result = guarded.run(lambda: asyncio.run(go()))
    assert str(result).strip() == ANSWER
    assert guarded.injected == ["Context"] * 4
    assert [o.startswith("[loop-detected]") for o in outputs] == [False] * 4 + [True] * 2


# ----------------------------------------------------------------------------- MCP


def test_mcp_server_context_is_not_an_argument(guarded: Guarded) -> None:
    _require("mcp", "mcp.server.fastmcp")
    from mcp.server.fastmcp import Context, FastMCP
    from mcp.shared.memory import create_connected_server_and_client_session

    server = FastMCP("support")

    @server.tool()
    @guarded.guard.tool
    async def search(query: str, ctx: Context) -> str:  # type: ignore[type-arg]
        """Search the knowledge base."""
        return guarded.search(query, ctx)

    texts: list[str] = []

    async def go() -> None:
        async with create_connected_server_and_client_session(
                server._mcp_server) as session:  # the client session is the agent
            for step in LOOP:
                for name, args in step if not isinstance(step, str) else ():
                    result = await session.call_tool(name, args)
                    assert not result.isError, result
                    texts.append(result.content[0].text)  # type: ignore[union-attr]

    guarded.run(lambda: asyncio.run(go()))
    assert guarded.injected[0].startswith("Context")
    assert texts[:4] == [NO_RESULTS] * 4
    assert [t.startswith("[loop-detected]") for t in texts[4:]] == [True, True]
