"""Record real OpenTelemetry span shapes from real agent frameworks + real instrumentations.

Usage:
    python tests/recordings/record.py <family> <outdir>

Writes ``<outdir>/<family>.jsonl``: one OTLP/JSON ``ExportTraceServiceRequest`` per line (the
format the OpenTelemetry Collector's file exporter writes), one line per trace, one trace per
scenario, in the order the scenarios ran (see SCENARIOS; langchain-traceloop also writes a
one-span ``create_agent`` trace before each scenario).

Nothing in the output is written by hand: the agents run offline against scripted fake models
(openai-agents ``agents.testing.ScriptedModel``; LangChain ``FakeMessagesListChatModel`` driving
LangChain 1.x ``create_agent``, a LangGraph graph), the instrumentation under test builds the
spans, an ``InMemorySpanExporter`` collects them, and ``encode_spans`` + ``MessageToDict`` turn
them into OTLP/JSON (ids converted to lower-case hex as OTLP/JSON requires).

Each family needs its own virtualenv because the instrumentations conflict; see README.md in this
directory for the exact package sets and versions. This file is not a test (pytest does not
collect ``record.py``) and imports nothing from otel_loopguard.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
from collections import OrderedDict

FAMILIES = {
    "agents-openinference": ("agents", "openinference"),
    "agents-traceloop": ("agents", "traceloop"),
    "agents-otel-genai": ("agents", "otel-genai"),
    "langchain-openinference": ("langchain", "openinference"),
    "langchain-traceloop": ("langchain", "traceloop"),
    "langchain-otel-genai": ("langchain", "otel-genai"),
}

# Scenario order == line order in the output file.
SCENARIOS = {
    "agents": ["looping", "healthy", "failing", "handoff"],
    "langchain": ["looping", "healthy", "failing", "two_args"],
}

LOOP_QUERY = {"query": "refund policy"}
LOOP_RESULT = json.dumps({"results": [], "note": "no results"})
HEALTHY_RESULTS = {
    "paris": {"results": ["Paris: Eiffel Tower, Louvre"]},
    "london": {"results": ["London: Big Ben, British Museum"]},
    "tokyo": {"results": ["Tokyo: Shibuya, Senso-ji"]},
}

# scenario -> (tool name, arguments of each call, final answer, user question)
PLANS = {
    "looping": (
        "search",
        [LOOP_QUERY] * 4,
        "I could not find the refund policy.",
        "I want a refund",
    ),
    "healthy": (
        "search",
        [{"query": q} for q in ("paris", "london", "tokyo")],
        "Paris, London and Tokyo all have great sights.",
        "Sights in three cities?",
    ),
    "failing": (
        "fetch_account",
        [{"account_id": 42}] * 2,
        "I cannot access your account right now.",
        "Show my account 42",
    ),
    "two_args": (
        "lookup",
        [{"city": "paris", "unit": "celsius"}] * 2,
        "It is 21 celsius in Paris.",
        "Temperature in Paris?",
    ),
    "prompt_template": (
        "search",
        [LOOP_QUERY] * 2,
        "I could not find the refund policy.",
        "I want a refund",
    ),
}


def scenarios_for(family: str) -> list[str]:
    framework, instr = FAMILIES[family]
    names = list(SCENARIOS[framework])
    if instr == "openinference":
        names.append("prompt_template")
    return names


# ------------------------------------------------------------------- provider / instrumentors


def setup(family: str):
    framework, instr = FAMILIES[family]
    if instr == "otel-genai":
        # The official GenAI instrumentations only capture tool arguments/results when asked to.
        os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
        os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": f"loopguard-recording-{family}"})
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    if framework == "agents":
        if instr == "openinference":
            from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
        elif instr == "traceloop":
            from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor
        else:
            from opentelemetry.instrumentation.genai.openai_agents import OpenAIAgentsInstrumentor
        OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
    else:
        if instr == "openinference":
            from openinference.instrumentation.langchain import LangChainInstrumentor
        elif instr == "traceloop":
            from opentelemetry.instrumentation.langchain import (
                LangchainInstrumentor as LangChainInstrumentor,
            )
        else:
            from opentelemetry.instrumentation.genai.langchain import LangChainInstrumentor
        LangChainInstrumentor().instrument(tracer_provider=provider)
    return provider, exporter


def scenario_context(scenario: str):
    """OpenInference context managers for the prompt_template scenario; a no-op otherwise."""
    from contextlib import ExitStack

    stack = ExitStack()
    if scenario == "prompt_template":
        from openinference.instrumentation import using_prompt_template, using_session

        stack.enter_context(using_prompt_template(template="support_triage", version="v3"))
        stack.enter_context(using_session("sess-9"))
    return stack


# --------------------------------------------------------------------------- openai-agents


def run_agents(family: str) -> None:
    from agents import Agent, RunConfig, Runner, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    @function_tool
    def search(query: str) -> str:
        """Search the knowledge base."""
        return json.dumps(HEALTHY_RESULTS[query]) if query in HEALTHY_RESULTS else LOOP_RESULT

    @function_tool
    def fetch_account(account_id: int) -> str:
        """Fetch an account record."""
        raise PermissionError("401 unauthorized")

    tools = {"search": search, "fetch_account": fetch_account}

    def run(agent, scenario: str, question: str) -> None:
        cfg = RunConfig(workflow_name=f"support-{scenario}", group_id=f"conv-{scenario}")
        with scenario_context(scenario):
            res = asyncio.run(Runner.run(agent, question, run_config=cfg, max_turns=20))
        print(f"  [{scenario}] final_output={res.final_output!r}", file=sys.stderr)

    def handoff_agents():
        # triage -> billing -> triage -> billing -> triage (the SDK allows handoff cycles).
        def scripted(steps):
            return ScriptedModel(steps, emit_traces=True)

        triage = Agent(
            name="triage",
            instructions="You are support triage.",
            model=scripted(
                [
                    [function_call("transfer_to_billing", {}, call_id="call_h1")],
                    [function_call("transfer_to_billing", {}, call_id="call_h3")],
                    [assistant_message("Back at triage; stopping here.")],
                ]
            ),
        )
        billing = Agent(
            name="billing",
            instructions="You handle billing.",
            model=scripted(
                [
                    [function_call("transfer_to_triage", {}, call_id="call_h2")],
                    [function_call("transfer_to_triage", {}, call_id="call_h4")],
                ]
            ),
        )
        triage.handoffs = [billing]
        billing.handoffs = [triage]
        return triage

    for scenario in scenarios_for(family):
        if scenario == "handoff":
            run(handoff_agents(), scenario, "I was double charged")
            continue
        tool_name, args_list, answer, question = PLANS[scenario]
        steps = [
            [function_call(tool_name, args, call_id=f"call_{i}")]
            for i, args in enumerate(args_list, 1)
        ]
        steps.append([assistant_message(answer)])
        agent = Agent(
            name="triage",
            instructions="You are support triage.",
            tools=[tools[tool_name]],
            model=ScriptedModel(steps, emit_traces=True),
        )
        run(agent, scenario, question)


# --------------------------------------------------------------------------- LangChain / LangGraph


def run_langchain(family: str) -> None:
    from langchain.agents import create_agent
    from langchain.agents.middleware import ToolErrorMiddleware
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool

    class ScriptedChat(FakeMessagesListChatModel):
        """FakeMessagesListChatModel that accepts bind_tools (create_agent calls it)."""

        def bind_tools(self, tools, **kwargs):
            return self

    @tool
    def search(query: str) -> str:
        """Search the knowledge base."""
        return json.dumps(HEALTHY_RESULTS[query]) if query in HEALTHY_RESULTS else LOOP_RESULT

    @tool
    def lookup(city: str, unit: str) -> str:
        """Look up the current temperature of a city in a unit."""
        return json.dumps({"city": city, "temp": 21, "unit": unit})

    @tool
    def fetch_account(account_id: int) -> str:
        """Fetch an account record."""
        raise PermissionError("401 unauthorized")

    tools = {"search": search, "lookup": lookup, "fetch_account": fetch_account}

    def on_tool_error(exc, request):
        # Hand a raising tool's exception back to the model as an error ToolMessage
        # (status="error") instead of aborting the run.
        return f"{type(exc).__name__}: {exc}"

    for scenario in scenarios_for(family):
        tool_name, args_list, answer, question = PLANS[scenario]
        responses = [
            AIMessage(
                content="",
                tool_calls=[
                    {"name": tool_name, "args": args, "id": f"call_{i}", "type": "tool_call"}
                ],
            )
            for i, args in enumerate(args_list, 1)
        ]
        responses.append(AIMessage(answer))
        # Any middleware adds before_agent/before_model/after_model graph nodes, which Traceloop
        # records as extra execute_task spans, so only the failing scenario gets one.
        middleware = [ToolErrorMiddleware(on_error=on_tool_error)] if scenario == "failing" else []
        agent = create_agent(
            ScriptedChat(responses=responses),
            tools=[tools[tool_name]],
            system_prompt="You are support triage.",
            middleware=middleware,
            name="triage",
        )
        config = {"recursion_limit": 30}
        if scenario != "prompt_template":
            # LangChain metadata session_id -> session.id / gen_ai.conversation.id /
            # traceloop.association.properties.session_id. Left out of prompt_template
            # because metadata session_id overrides OpenInference's using_session("sess-9").
            config["metadata"] = {"session_id": f"conv-{scenario}"}
        with scenario_context(scenario):
            out = agent.invoke({"messages": [("user", question)]}, config=config)
        print(f"  [{scenario}] final={out['messages'][-1].content!r}", file=sys.stderr)


# --------------------------------------------------------------------------- OTLP/JSON encoding


def _b64_to_hex(value: str) -> str:
    return base64.b64decode(value).hex() if value else value


def _hexify_ids(obj):
    """OTLP/JSON uses lower-case hex for trace/span ids, not protobuf-JSON base64."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str):
                out[k] = _b64_to_hex(v)
            else:
                out[k] = _hexify_ids(v)
        return out
    if isinstance(obj, list):
        return [_hexify_ids(v) for v in obj]
    return obj


def to_otlp_json_lines(spans) -> list[str]:
    """One ExportTraceServiceRequest JSON document per trace, traces in start-time order."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    by_trace: OrderedDict[int, list] = OrderedDict()
    for span in sorted(spans, key=lambda s: s.start_time):
        by_trace.setdefault(span.context.trace_id, []).append(span)
    lines = []
    for trace_spans in by_trace.values():
        msg = encode_spans(sorted(trace_spans, key=lambda s: s.start_time))
        doc = MessageToDict(msg, use_integers_for_enums=True)
        lines.append(json.dumps(_hexify_ids(doc), separators=(",", ":"), sort_keys=False))
    return lines


def record(family: str, outdir: str) -> str:
    framework, _ = FAMILIES[family]
    provider, exporter = setup(family)
    if framework == "agents":
        run_agents(family)
    else:
        run_langchain(family)
    provider.force_flush()
    spans = exporter.get_finished_spans()
    lines = to_otlp_json_lines(spans)
    expected = scenarios_for(family)
    # Traceloop's LangChain instrumentation also wraps create_agent(): building the agent emits a
    # one-span "create_agent triage" trace of its own, just before each scenario's run trace.
    per_scenario = 2 if family == "langchain-traceloop" else 1
    if len(lines) != per_scenario * len(expected):
        raise SystemExit(
            f"{family}: expected {per_scenario * len(expected)} traces for {expected}, "
            f"got {len(lines)}"
        )
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, f"{family}.jsonl")
    with open(path, "w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(line + "\n")
    print(
        f"{family}: {len(spans)} spans in {len(lines)} traces ({', '.join(expected)}) -> {path}",
        file=sys.stderr,
    )
    return path


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in FAMILIES:
        print(f"usage: {argv[0]} <{'|'.join(FAMILIES)}> <outdir>", file=sys.stderr)
        return 2
    record(argv[1], argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
