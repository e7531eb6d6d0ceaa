"""Scripted agents for eight more frameworks, each run through its own instrumentation.

No LLM: every framework is driven by its own test or custom model (pydantic-ai
``FunctionModel``, a Google ADK ``BaseLlm``, a Strands ``Model``, an Agent Framework chat
client, a smolagents ``Model``, llama-index ``MockFunctionCallingLLM``, a CrewAI ``BaseLLM``
answering in ReAct text) or, for MCP, a local stdio server that a client session calls.

Used by ``tests/recordings/record_frameworks.py`` (which writes the fixtures under
``tests/data/recorded/``) and by ``tests/frameworks/test_live_agent_frameworks.py`` (which runs
loopguard live inside them). Not a test module: pytest does not collect it, and it imports a
framework only when asked to run it.

Scenarios (one trace each):

- ``looping``: ``search({"query": "refund policy"})`` four times. Each answer is JSON text
  ``{"results": [], "note": "no results", "request_id": "req-N", "fetched_at": "..."}``, so
  the answers differ only in volatile fields.
- ``healthy``: ``search`` of ``paris``, ``london``, ``tokyo``, three different answers.
- ``failing``: ``fetch_account({"account_id": 42})`` twice, failing with "401 unauthorized"
  (raised, or for ADK returned as ``{"status": "error", "error_message": ...}``).
- ``handoff`` (ADK, LlamaIndex): triage → billing → triage → billing → triage → billing.
- ``there_and_back`` (ADK, LlamaIndex): triage → billing → triage, then an answer.
- ``parallel`` (ADK): two searches in one model turn, twice, different arguments.
- ``parallel_loop`` (ADK, live only: no fixture): the same two searches in one model turn,
  five turns running.
- ``cached`` (CrewAI): ``looping`` with CrewAI's tool cache on (the default).

Strands ``Swarm`` runs (``run_strands_swarm``, not recorded): agents handing the task on with
``handoff_to_agent``, back and forth (``ping_pong``) or one way (``chain``, ``fan_out``).

CrewAI answers a call identical to the one just before it itself, without running the tool or
recording a span, so its ``looping`` alternates ``search("refund policy")`` and
``search("refunds")`` (three times each, the same empty answers): a cycle.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import SpanProcessor

LOOP_QUERY = {"query": "refund policy"}
HEALTHY_RESULTS = {
    "paris": {"results": ["Paris: Eiffel Tower, Louvre"]},
    "london": {"results": ["London: Big Ben, British Museum"]},
    "tokyo": {"results": ["Tokyo: Shibuya, Senso-ji"]},
}
TEMPLATE_NAME = "support_triage"
TEMPLATE_VERSION = "v3"
TEMPLATE_TEXT = "You are support triage. Answer the customer's question: {question}"
ANSWER = "Done."

Step = list[tuple[str, dict[str, Any]]] | str
"""One model turn: the tool calls it asks for, or its final text."""

_counter = {"n": 0}


def search_result(query: str) -> str:
    """Return the JSON text ``search`` answers: per-request fields change on every call."""
    if query in HEALTHY_RESULTS:
        return json.dumps(HEALTHY_RESULTS[query])
    _counter["n"] += 1
    n = _counter["n"]
    return json.dumps({"results": [], "note": "no results", "request_id": f"req-{n:04d}",
                       "fetched_at": f"2026-01-01T10:00:{n % 60:02d}Z"})


def _calls(tool: str, args_list: list[dict[str, Any]]) -> list[Step]:
    steps: list[Step] = [[(tool, args)] for args in args_list]
    steps.append(ANSWER)
    return steps


PLANS: dict[str, list[Step]] = {
    "looping": _calls("search", [LOOP_QUERY] * 4),
    "cached": _calls("search", [LOOP_QUERY] * 4),
    "healthy": _calls("search", [{"query": q} for q in HEALTHY_RESULTS]),
    "failing": _calls("fetch_account", [{"account_id": 42}] * 2),
    "parallel": [[("search", {"query": "paris"}), ("search", {"query": "london"})],
                 [("search", {"query": "tokyo"}), ("search", {"query": "rome"})], ANSWER],
    "parallel_loop": [[("search", LOOP_QUERY), ("search", {"query": "refunds"})]] * 5 + [ANSWER],
}
CREWAI_PLANS: dict[str, list[Step]] = {
    name: _calls("search", [LOOP_QUERY, {"query": "refunds"}] * 3) for name in ("looping", "cached")
}
"""CrewAI refuses a call identical to the one before it (no span), so its loop alternates."""
HANDOFFS = {
    "handoff": ["billing", "triage", "billing", "triage", "billing"],
    "there_and_back": ["billing", "triage"],
}
"""Scenario → the agent each handoff goes to, in order (the first leaves from triage)."""


def agent_plans(scenario: str, tool: str, target_arg: str,
                extra: dict[str, Any] | None = None) -> dict[str, list[Step]]:
    """Return each agent's turns for a handoff scenario (``tool(target_arg=...)`` hands off)."""
    plans: dict[str, list[Step]] = {"triage": [], "billing": []}
    current = "triage"
    for target in HANDOFFS[scenario]:
        plans[current].append([(tool, {target_arg: target, **(extra or {})})])
        current = target
    plans[current].append(ANSWER)
    return plans


@dataclass
class Framework:
    """How to instrument one framework and run a scenario through it."""

    name: str
    modules: tuple[str, ...]
    """Imported before running: their absence means the framework is not installed."""
    scenarios: tuple[str, ...]
    instrument: Callable[[Any], Callable[[], None]]
    """``instrument(tracer_provider)`` → undo."""
    run: Callable[[str], None]
    env: dict[str, str] = field(default_factory=dict)
    """Environment the instrumentation reads (content capture), set before instrumenting."""


BASE = ("looping", "healthy", "failing")


# ----------------------------------------------------------------------------- pydantic-ai


def _instrument_pydantic_ai(provider: Any) -> Callable[[], None]:
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings

    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))
    return lambda: Agent.instrument_all(False)


def _run_pydantic_ai(scenario: str) -> None:
    result = make_pydantic_ai_agent(scenario).run_sync("I want a refund",
                                                       conversation_id=f"conv-{scenario}")
    assert result.output == ANSWER, result.output


def make_pydantic_ai_agent(scenario: str, *, metadata: bool = True) -> Any:
    """Return the pydantic-ai agent that plays ``scenario`` once (its model is scripted).

    With ``metadata``, the agent names its template the way pydantic-ai offers
    (``Agent(metadata=...)``, written on the agent span when the run ends).
    """
    from pydantic_ai import Agent, ModelRetry
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    steps = list(PLANS[scenario])

    def model(messages: Any, info: AgentInfo) -> ModelResponse:
        step = steps.pop(0)
        if isinstance(step, str):
            return ModelResponse(parts=[TextPart(step)])
        return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call_{len(steps)}_{i}")
                                    for i, (name, args) in enumerate(step)])

    agent = Agent(FunctionModel(model), name="triage", instructions="You are support triage.",
                  metadata={"prompt_name": TEMPLATE_NAME, "prompt_version": TEMPLATE_VERSION}
                  if metadata else None)

    @agent.tool_plain
    def search(query: str) -> str:
        """Search the knowledge base."""
        return search_result(query)

    @agent.tool_plain(retries=3)
    def fetch_account(account_id: int) -> str:
        """Fetch an account record."""
        raise ModelRetry("401 unauthorized")  # pydantic-ai's way back to the model

    return agent


# ----------------------------------------------------------------------------- Google ADK


class Forward(SpanProcessor):
    """Span processor forwarding to the running test's processors.

    ADK, Strands and Agent Framework write to the global tracer provider, which is set once per
    process: the test modules share this one forwarder on it (whichever sets the provider),
    and point ``targets`` at their processors while a test runs.
    """

    def __init__(self) -> None:
        self.targets: tuple[Any, ...] = ()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        for target in self.targets:
            target.on_start(span, parent_context=parent_context)

    def on_end(self, span: Any) -> None:
        for target in self.targets:
            target.on_end(span)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


FORWARD = Forward()


def _instrument_global(provider: Any) -> Callable[[], None]:
    """ADK, Strands and Agent Framework take the global tracer provider."""
    from opentelemetry import trace

    trace.set_tracer_provider(provider)  # first call wins: record once per process
    return lambda: None


def _adk_model(steps: list[Step]) -> Any:
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_response import LlmResponse
    from google.genai import types

    class ScriptedLlm(BaseLlm):
        """Answers each model call with the next scripted turn."""

        script: list[Any] = []  # noqa: RUF012 - a pydantic field (BaseLlm is a model)

        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            step = self.script.pop(0)
            if isinstance(step, str):
                parts = [types.Part(text=step)]
            else:
                parts = [types.Part(function_call=types.FunctionCall(
                    name=name, args=args, id=f"call_{len(self.script)}_{i}"))
                    for i, (name, args) in enumerate(step)]
            yield LlmResponse(content=types.Content(role="model", parts=parts))

    return ScriptedLlm(model="scripted", script=list(steps))


def _run_adk(scenario: str) -> None:
    from google.adk.agents import LlmAgent
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    def search(query: str) -> str:
        """Search the knowledge base."""
        return search_result(query)

    def fetch_account(account_id: int) -> dict[str, Any]:
        """Fetch an account record."""
        return {"status": "error", "error_message": "401 unauthorized"}

    if scenario in HANDOFFS:
        plans = agent_plans(scenario, "transfer_to_agent", "agent_name")
        billing = LlmAgent(name="billing", description="Handles billing.",
                           model=_adk_model(plans["billing"]))
        root = LlmAgent(name="triage", description="Support triage.",
                        model=_adk_model(plans["triage"]), sub_agents=[billing])
    else:
        root = LlmAgent(name="triage", description="Support triage.",
                        model=_adk_model(PLANS[scenario]), tools=[search, fetch_account])
    runner = InMemoryRunner(agent=root, app_name="support")

    async def go() -> None:
        session_id = f"conv-{scenario}"
        await runner.session_service.create_session(app_name="support", user_id="u",
                                                    session_id=session_id)
        message = types.Content(role="user", parts=[types.Part(text="I want a refund")])
        async for _ in runner.run_async(user_id="u", session_id=session_id,
                                        new_message=message):
            pass

    asyncio.run(go())


# ----------------------------------------------------------------------------- Strands


def _strands_model(steps: list[Step]) -> Any:
    """Return a Strands ``Model`` streaming each scripted turn as Bedrock-style events."""
    from strands.models import Model

    steps = list(steps)

    class ScriptedModel(Model):
        """Streams each scripted turn as Bedrock-style events."""

        def update_config(self, **config: Any) -> None:
            pass

        def get_config(self) -> Any:
            return {}

        def structured_output(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

        async def stream(self, *args: Any, **kwargs: Any) -> Any:
            step = steps.pop(0)
            yield {"messageStart": {"role": "assistant"}}
            if isinstance(step, str):
                yield {"contentBlockStart": {"start": {}}}
                yield {"contentBlockDelta": {"delta": {"text": step}}}
                yield {"contentBlockStop": {}}
                yield {"messageStop": {"stopReason": "end_turn"}}
                return
            for i, (name, args) in enumerate(step):
                use_id = f"call_{len(steps)}_{i}"
                yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": use_id,
                                                                   "name": name}}}}
                yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(args)}}}}
                yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}

    return ScriptedModel()


def _run_strands(scenario: str) -> None:
    from strands import Agent, tool

    @tool
    def search(query: str) -> str:
        """Search the knowledge base.

        Args:
            query: what to look for.
        """
        return search_result(query)

    @tool
    def fetch_account(account_id: int) -> str:
        """Fetch an account record.

        Args:
            account_id: the account.
        """
        raise PermissionError("401 unauthorized")

    agent = Agent(model=_strands_model(PLANS[scenario]), name="triage",
                  tools=[search, fetch_account],
                  system_prompt="You are support triage.", callback_handler=None,
                  trace_attributes={"session.id": f"conv-{scenario}"})
    result = agent("I want a refund")
    assert str(result).strip() == ANSWER, str(result)


SWARM_ROUTES: dict[str, list[list[str]]] = {
    "ping_pong": [["researcher", "reviewer"] * 3 + ["researcher"]],
    "review": [["researcher", "reviewer"] * 3 + ["researcher"]],
    "chain": [["researcher", "reviewer", "writer"]],
    "fan_out": [["supervisor", "researcher"], ["supervisor", "writer"]] * 3,
}
"""Strands ``Swarm`` scenarios: the agents control passes through in each ``Swarm`` run (one
run each, in one trace), each move a ``handoff_to_agent`` call. ``fan_out`` hands the task out
one way six times, from the same supervisor (the spec's one-way handoffs). ``review`` is
``ping_pong`` handing over a new draft each time (``context``), where the others hand over
the same one."""


def run_strands_swarm(scenario: str) -> None:
    """Run the ``Swarm`` runs of ``SWARM_ROUTES[scenario]`` under one span (one trace)."""
    from opentelemetry import trace
    from strands import Agent
    from strands.multiagent import Swarm

    with trace.get_tracer("loopguard.scripted.swarm").start_as_current_span(f"swarm-{scenario}"):
        for route in SWARM_ROUTES[scenario]:
            plans: dict[str, list[Step]] = {name: [] for name in route}
            for number, (source, target) in enumerate(itertools.pairwise(route)):
                draft = f"v{number + 1}" if scenario == "review" else "v1"
                plans[source] += [[("handoff_to_agent", {
                    "agent_name": target, "message": f"{target}, please take over.",
                    "context": {"draft": draft}})], "Handed off."]
            plans[route[-1]].append(ANSWER)
            agents = [Agent(model=_strands_model(steps), name=name, callback_handler=None,
                            system_prompt=f"You are the {name}.") for name, steps in plans.items()]
            result = Swarm(agents, max_handoffs=50, max_iterations=50)("Write the report")
            assert [node.node_id for node in result.node_history] == route, result


# ----------------------------------------------------------------------------- Agent Framework


def _instrument_agent_framework(provider: Any) -> Callable[[], None]:
    undo = _instrument_global(provider)
    from agent_framework.observability import enable_instrumentation

    enable_instrumentation(enable_sensitive_data=True)
    return undo


def _run_agent_framework(scenario: str) -> None:
    from agent_framework import Agent, BaseChatClient, ChatResponse, Content, Message, tool
    from agent_framework._middleware import ChatMiddlewareLayer
    from agent_framework._tools import FunctionInvocationLayer
    from agent_framework.observability import ChatTelemetryLayer

    steps = list(PLANS[scenario])

    class ScriptedClient(ChatMiddlewareLayer, FunctionInvocationLayer,  # type: ignore[misc]
                         ChatTelemetryLayer, BaseChatClient):
        """A chat client with the public clients' layers whose answers are scripted."""

        OTEL_PROVIDER_NAME = "scripted"

        async def _inner_get_response(self, *, messages: Any, stream: bool, options: Any,
                                      **kwargs: Any) -> Any:
            step = steps.pop(0)
            if isinstance(step, str):
                contents = [Content.from_text(step)]
            else:
                contents = [Content.from_function_call(call_id=f"call_{len(steps)}_{i}",
                                                       name=name, arguments=args)
                            for i, (name, args) in enumerate(step)]
            return ChatResponse(messages=[Message(role="assistant", contents=contents)],
                                response_id=f"resp_{len(steps)}")

    @tool
    def search(query: str) -> str:
        """Search the knowledge base."""
        return search_result(query)

    @tool
    def fetch_account(account_id: int) -> str:
        """Fetch an account record."""
        raise PermissionError("401 unauthorized")

    agent = Agent(client=ScriptedClient(), name="triage", instructions="You are support triage.",
                  tools=[search, fetch_account])
    result = asyncio.run(agent.run("I want a refund"))
    assert result.text == ANSWER, result.text


# ----------------------------------------------------------------------------- smolagents


def _instrument_openinference(module: str, name: str,
                              **options: Any) -> Callable[[Any], Callable[[], None]]:
    def instrument(provider: Any) -> Callable[[], None]:
        import importlib

        instrumentor = getattr(importlib.import_module(module), name)()
        instrumentor.instrument(tracer_provider=provider, **options)
        return instrumentor.uninstrument  # type: ignore[no-any-return]

    return instrument


@contextmanager
def _openinference_context(scenario: str, *, metadata: bool = False,
                           template: bool = False) -> Iterator[None]:
    """Name the conversation (``session.id``) and the template the OpenInference way."""
    from openinference.instrumentation import (
        using_metadata,
        using_prompt_template,
        using_session,
    )

    with ExitStack() as stack:
        stack.enter_context(using_session(f"conv-{scenario}"))
        if metadata:
            stack.enter_context(using_metadata({"prompt_name": TEMPLATE_NAME,
                                                "prompt_version": TEMPLATE_VERSION}))
        if template:
            stack.enter_context(using_prompt_template(template=TEMPLATE_TEXT,
                                                      version=TEMPLATE_VERSION))
        yield


def _run_smolagents(scenario: str) -> None:
    from smolagents import Model, ToolCallingAgent, tool
    from smolagents.models import (
        ChatMessage,
        ChatMessageToolCall,
        ChatMessageToolCallFunction,
        MessageRole,
    )

    steps = list(PLANS[scenario])

    class ScriptedModel(Model):
        """Answers each step with the next scripted turn; the answer is a final_answer call."""

        def generate(self, messages: Any, stop_sequences: Any = None,
                     response_format: Any = None, tools_to_call_from: Any = None,
                     **kwargs: Any) -> ChatMessage:
            step = steps.pop(0)
            if isinstance(step, str):
                step = [("final_answer", {"answer": step})]
            return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=[
                ChatMessageToolCall(id=f"call_{len(steps)}_{i}", type="function",
                                    function=ChatMessageToolCallFunction(name=name,
                                                                         arguments=args))
                for i, (name, args) in enumerate(step)])

    @tool
    def search(query: str) -> str:
        """Search the knowledge base.

        Args:
            query: what to look for.
        """
        return search_result(query)

    @tool
    def fetch_account(account_id: int) -> str:
        """Fetch an account record.

        Args:
            account_id: the account.
        """
        raise PermissionError("401 unauthorized")

    agent = ToolCallingAgent(tools=[search, fetch_account], model=ScriptedModel(model_id="s"),
                             name="triage", max_steps=10, verbosity_level=0)
    with _openinference_context(scenario, metadata=True):
        answer = agent.run("I want a refund")
    assert answer == ANSWER, answer


# ----------------------------------------------------------------------------- LlamaIndex


def _llama_llm(steps: list[Step]) -> Any:
    from llama_index.core.base.llms.types import ToolCallBlock
    from llama_index.core.llms import ChatMessage, MessageRole
    from llama_index.core.llms.mock import MockFunctionCallingLLM

    script = list(steps)

    def answer(messages: Any, **kwargs: Any) -> Any:
        step = script.pop(0)
        if isinstance(step, str):
            return ChatMessage(role=MessageRole.ASSISTANT, content=step)
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=[
            ToolCallBlock(tool_call_id=f"call_{len(script)}_{i}", tool_name=name,
                          tool_kwargs=args) for i, (name, args) in enumerate(step)])

    return MockFunctionCallingLLM(response_generator=answer, is_chat_model=True)


def _run_llama_index(scenario: str) -> None:
    from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent

    def search(query: str) -> str:
        """Search the knowledge base."""
        return search_result(query)

    def fetch_account(account_id: int) -> str:
        """Fetch an account record."""
        raise PermissionError("401 unauthorized")

    if scenario in HANDOFFS:
        plans = agent_plans(scenario, "handoff", "to_agent", {"reason": "billing question"})
        agents = [FunctionAgent(name=name, description=f"The {name} agent.",
                                system_prompt=f"You are {name}.", tools=[search],
                                llm=_llama_llm(plans[name]),
                                can_handoff_to=[other for other in plans if other != name])
                  for name in plans]
        workflow: Any = AgentWorkflow(agents=agents, root_agent="triage")
    else:
        workflow = FunctionAgent(name="triage", description="Support triage.",
                                 system_prompt="You are support triage.",
                                 tools=[search, fetch_account], llm=_llama_llm(PLANS[scenario]))

    async def go() -> Any:
        return await workflow.run(user_msg="I want a refund")

    with _openinference_context(scenario, template=True):
        result = asyncio.run(go())
    assert str(result).strip() == ANSWER, str(result)


# ----------------------------------------------------------------------------- CrewAI


def _run_crewai(scenario: str) -> None:
    from crewai import Agent, Crew, Task
    from crewai.events.event_bus import crewai_event_bus
    from crewai.llms.base_llm import BaseLLM
    from crewai.tools import tool

    steps = list(CREWAI_PLANS.get(scenario, PLANS[scenario]))

    class ScriptedLLM(BaseLLM):
        """Answers in CrewAI's ReAct text format, one scripted turn per call."""

        def call(self, messages: Any, *args: Any, **kwargs: Any) -> str:
            # The instrumentation ends each tool span on one of CrewAI's handler threads (a
            # pool of ten), with the time of CrewAI's event: a tool's span may end after the
            # next tool's, a few milliseconds on. A real model takes far longer than a
            # handler, a scripted one does not: wait for the handlers, so spans end in call
            # order (the processor checks calls in the order their spans end).
            crewai_event_bus.flush()
            step = steps.pop(0)
            if isinstance(step, str):
                return f"Thought: I now know the final answer\nFinal Answer: {step}"
            name, args_ = step[0]
            return (f"Thought: I should use a tool\nAction: {name}\n"
                    f"Action Input: {json.dumps(args_)}")

        def supports_function_calling(self) -> bool:
            return False

        def supports_stop_words(self) -> bool:
            return False

        def get_context_window_size(self) -> int:
            return 8192

    @tool("search")
    def search(query: str) -> str:
        """Search the knowledge base."""
        return search_result(query)

    @tool("fetch_account")
    def fetch_account(account_id: int) -> str:
        """Fetch an account record."""
        raise PermissionError("401 unauthorized")

    agent = Agent(role="triage", goal="Answer the customer.", backstory="Support triage.",
                  llm=ScriptedLLM(model="scripted"), tools=[search, fetch_account],
                  cache=scenario == "cached", allow_delegation=False, max_iter=10, verbose=False)
    task = Task(description="I want a refund", expected_output="An answer.", agent=agent)
    with _openinference_context(scenario, metadata=True):
        result = Crew(agents=[agent], tasks=[task], verbose=False).kickoff()
    # The same for the agent, task and crew spans: or the run's last span (``crew.kickoff``)
    # may end after the run has returned.
    crewai_event_bus.flush()
    assert str(result).strip() == ANSWER, str(result)


# ----------------------------------------------------------------------------- MCP


MCP_SERVER = '''
import json, sys
from mcp.server.fastmcp import FastMCP
sys.path.insert(0, {here!r})
from scripted_agents import search_result, _counter
server = FastMCP("support")

@server.tool()
def search(query: str) -> str:
    """Search the knowledge base."""
    return search_result(query)

@server.tool()
def fetch_account(account_id: int) -> str:
    """Fetch an account record."""
    raise PermissionError("401 unauthorized")

server.run("stdio")
'''


def _instrument_mcp(provider: Any) -> Callable[[], None]:
    from opentelemetry.instrumentation.mcp import McpInstrumentor

    instrumentor = McpInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    _MCP_TRACER["tracer"] = provider.get_tracer("loopguard.scripted.mcp")
    return instrumentor.uninstrument  # type: ignore[no-any-return]


_MCP_TRACER: dict[str, Any] = {}


def _run_mcp(scenario: str) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    here = os.path.dirname(os.path.abspath(__file__))
    params = StdioServerParameters(command=sys.executable,
                                   args=["-c", MCP_SERVER.format(here=here)])
    tracer = _MCP_TRACER["tracer"]

    async def go() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for step in PLANS[scenario]:
                if isinstance(step, str):
                    continue
                for name, args in step:
                    await session.call_tool(name, args)

    # The client session is the agent: its run is one trace under one span.
    with tracer.start_as_current_span(f"support-{scenario}"):
        asyncio.run(go())


FRAMEWORKS: dict[str, Framework] = {f.name: f for f in (
    Framework("pydantic-ai", ("pydantic_ai",), BASE, _instrument_pydantic_ai, _run_pydantic_ai),
    Framework("google-adk", ("google.adk",), (*BASE, "parallel", "handoff", "there_and_back"),
              _instrument_global, _run_adk,
              env={"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"}),
    Framework("strands", ("strands",), BASE, _instrument_global, _run_strands,
              env={"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}),
    Framework("agent-framework", ("agent_framework",), BASE, _instrument_agent_framework,
              _run_agent_framework),
    Framework("smolagents", ("smolagents", "openinference.instrumentation.smolagents"), BASE,
              _instrument_openinference("openinference.instrumentation.smolagents",
                                        "SmolagentsInstrumentor"), _run_smolagents),
    Framework("llama-index", ("llama_index.core", "openinference.instrumentation.llama_index"),
              (*BASE, "handoff", "there_and_back"),
              _instrument_openinference("openinference.instrumentation.llama_index",
                                        "LlamaIndexInstrumentor"), _run_llama_index),
    Framework("crewai", ("crewai", "openinference.instrumentation.crewai"), (*BASE, "cached"),
              _instrument_openinference("openinference.instrumentation.crewai",
                                        "CrewAIInstrumentor", use_event_listener=True),
              _run_crewai,
              env={"CREWAI_DISABLE_TELEMETRY": "true", "OTEL_SDK_DISABLED": "false"}),
    Framework("mcp", ("mcp", "opentelemetry.instrumentation.mcp"), BASE, _instrument_mcp,
              _run_mcp, env={"TRACELOOP_TRACE_CONTENT": "true"}),
)}
FAMILIES: dict[str, tuple[str, ...]] = {
    "pydantic-ai": ("pydantic-ai",),
    "agent-framework": ("agent-framework",),
    "adk-strands": ("google-adk", "strands"),
    "openinference": ("crewai", "llama-index", "smolagents"),
    "mcp": ("mcp",),
}
"""Family (``tests/frameworks/requirements-<family>.txt``, one venv) → the frameworks it holds."""
