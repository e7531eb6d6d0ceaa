"""``roles_of``: the assembly's one read of a span's role equals the three questions it answers."""

from __future__ import annotations

from typing import Any

import pytest

from otel_loopguard.adapters import agent_of, is_model_turn, may_be_event, roles_of

SPANS: list[tuple[str, dict[str, Any]]] = [
    ("invoke_agent support", {"gen_ai.operation.name": "invoke_agent"}),
    ("invoke_agent", {"gen_ai.operation.name": "invoke_agent"}),
    ("create", {"gen_ai.operation.name": "create_agent", "gen_ai.agent.name": "maker"}),
    ("chat gpt-4o", {"gen_ai.operation.name": "chat"}),
    ("generate", {"gen_ai.operation.name": "generate_content"}),
    ("execute_tool search", {"gen_ai.operation.name": "execute_tool"}),
    ("handoff", {"gen_ai.operation.name": "handoff"}),
    ("Agent", {"openinference.span.kind": "AGENT", "agent.name": "triage"}),
    ("triage.I want a refund.execute", {"openinference.span.kind": "AGENT",
                                        "graph.node.id": "triage"}),
    ("ChatOpenAI", {"openinference.span.kind": "LLM"}),
    ("search", {"openinference.span.kind": "TOOL"}),
    ("chain", {"openinference.span.kind": "CHAIN"}),
    ("triage.agent", {"traceloop.span.kind": "agent"}),
    ("openai.chat", {"traceloop.span.kind": "llm"}),
    ("search.tool", {"traceloop.span.kind": "tool"}),
    ("Agent run: 'triage'", {}),
    ("Function: search", {}),
    ("Handoff: a -> b", {}),
    # Logfire 5 names by template; the values are attributes
    ("Agent run: {name!r}", {"name": "triage", "logfire.msg": "Agent run: 'triage'"}),
    ("Handoff: {from_agent} → {to_agent}", {"from_agent": "a", "to_agent": "b"}),
    ("GET /health", {"http.method": "GET"}),
    # Mixed conventions: an agent span that is also a model call, a tool span named like an
    # agent run, a model span with a Logfire function name.
    ("invoke_agent x", {"gen_ai.operation.name": "invoke_agent",
                        "openinference.span.kind": "LLM"}),
    ("Agent run: y", {"gen_ai.operation.name": "execute_tool"}),
    ("Function: z", {"gen_ai.operation.name": "chat"}),
    ("x", {"gen_ai.operation.name": "chat", "traceloop.span.kind": "agent",
           "traceloop.entity.name": "planner"}),
    ("Agent run: ", {}),
]


@pytest.mark.parametrize(("name", "attributes"), SPANS, ids=[name or "-" for name, _ in SPANS])
def test_roles_of_answers_agent_of_is_model_turn_and_may_be_event(
        name: str, attributes: dict[str, Any]) -> None:
    """Each span's agent, model-turn flag and event candidacy are those of the three functions
    (the candidacy is not asked of a model turn)."""
    model = is_model_turn(name, attributes)
    expected = (agent_of(name, attributes), model,
                False if model else may_be_event(name, attributes))
    assert roles_of(name, attributes) == expected


def test_a_crewai_agent_is_its_role_not_its_task() -> None:
    """OpenInference's CrewAI agent span is named ``<role>.<task description>.execute`` and has
    no ``agent.name``: its agent is the role of ``graph.node.id``, so one agent doing two tasks
    is one agent (it was the span's name, the user's task text in it)."""
    tasks = [f"triage.{task}.execute" for task in ("I want a refund", "Where is my order?")]
    agents = {agent_of(name, {"openinference.span.kind": "AGENT", "graph.node.id": "triage",
                              "input.value": "..."}) for name in tasks}
    assert agents == {"triage"}
    assert agent_of("triage.I want a refund.execute",
                    {"openinference.span.kind": "AGENT"}) == "triage.I want a refund.execute"
