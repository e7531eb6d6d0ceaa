"""The OpenAI Agents SDK as Logfire 5.4 exports it: spans named by their message template.

``logfire.instrument_openai_agents()`` names an agent span ``Agent run: {name!r}`` and a
handoff span ``Handoff: {from_agent} → {to_agent}``: the agent is in the attribute ``name``,
the handoff's agents in ``from_agent`` and ``to_agent`` (``to_agent`` is ``null`` until the
handoff is made, then set before the span ends), the formatted text in ``logfire.msg``. The
spans below are shaped as Logfire 5.4 writes them (recorded from a real run), on a real
``TracerProvider`` with the live processor; ``check`` and ``serve`` read the exported spans.
Older Logfire names (``Agent run: 'triage'``, ``Handoff: a -> b``) still read as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from _otlp_files import json_line, live_run
from opentelemetry.sdk.trace import ReadableSpan

from otel_loopguard import LoopGuardConfig
from otel_loopguard.adapters import agent_of, roles_of, to_event
from otel_loopguard.assembly import assemble_trace
from otel_loopguard.cli import main
from otel_loopguard.otlp._sdk import span_record_from_readable
from otel_loopguard.receiver import StreamingChecker
from otel_loopguard.replay import Checker, RunReport
from otel_loopguard.types import Handoff, SpanRecord, ToolCall

AGENT_TEMPLATE = "Agent run: {name!r}"
HANDOFF_TEMPLATE = "Handoff: {from_agent} → {to_agent}"
FUNCTION_TEMPLATE = "Function: {name}"
PING_PONG = ["triage", "billing", "triage", "billing", "triage", "billing"]


def _logfire(template: str, message: str, **values: Any) -> dict[str, Any]:
    return {"logfire.msg_template": template, "logfire.span_type": "span", **values,
            "gen_ai.system": "openai", "logfire.msg": message}


def _run(agents: Sequence[str], *, handoff_spans: bool, calls: bool) -> list[ReadableSpan]:
    """One ``Runner.run`` handing over along ``agents``, through the live processor.

    Each agent's turn has a model span and either a handoff span to the next agent or (with
    ``calls``) a ``search`` call of its own; the agent runs are siblings under the task span.
    """
    with live_run("logfire.openai_agents", "5.4.0") as (tracer, spans):  # noqa: SIM117 (tracer)
        with tracer.start_as_current_span("OpenAI Agents trace: {name}", attributes=_logfire(
                "OpenAI Agents trace: {name}", "OpenAI Agents trace: support", name="support",
                group_id="conv-42")), \
                tracer.start_as_current_span("Task: support", attributes=_logfire(
                    "Task: support", "Task: support", type="custom", name="support")):
            for turn, agent in enumerate(agents, 1):
                with tracer.start_as_current_span(AGENT_TEMPLATE, attributes=_logfire(
                        AGENT_TEMPLATE, f"Agent run: {agent!r}", name=agent, output_type="str")), \
                        tracer.start_as_current_span(f"Turn {{turn}} for agent {agent}",
                                                     attributes=_logfire(
                            f"Turn {{turn}} for agent {agent}", f"Turn {turn} for agent {agent}",
                            name="turn", turn=turn, agent_name=agent)):
                    with tracer.start_as_current_span(
                            "Chat completion with {gen_ai.request.model!r}", attributes=_logfire(
                                "Chat completion with {gen_ai.request.model!r}",
                                "Chat completion with {gen_ai.request.model!r}", model="null")):
                        pass
                    if calls:
                        with tracer.start_as_current_span(FUNCTION_TEMPLATE, attributes=_logfire(
                                FUNCTION_TEMPLATE, "Function: search", name="search",
                                input=f'{{"query":"{agent} {turn}"}}', output=f"found {turn}")):
                            pass
                    if handoff_spans and turn < len(agents):
                        target = agents[turn]
                        with tracer.start_as_current_span(HANDOFF_TEMPLATE, attributes=_logfire(
                                HANDOFF_TEMPLATE, f"Handoff: {agent} → None", from_agent=agent,
                                to_agent="null")) as span:
                            span.set_attributes({"to_agent": target,
                                                 "logfire.msg": f"Handoff: {agent} → {target}"})
    return spans


def _live(spans: Sequence[ReadableSpan]) -> list[tuple[str, str]]:
    return [(span.name, str(span.attributes["loopguard.code"])) for span in spans
            if span.attributes and "loopguard.code" in span.attributes]


def _codes(reports: Sequence[RunReport]) -> list[str]:
    return [d.code for report in reports for d in report.findings]


def _check_and_serve(spans: Sequence[ReadableSpan]) -> tuple[list[str], list[str]]:
    records = [span_record_from_readable(span) for span in spans]
    checked = _codes(list(Checker(LoopGuardConfig()).run(iter(records))))
    streaming = StreamingChecker(LoopGuardConfig(), raise_internal_errors=True)
    served = _codes(streaming.add(records) + streaming.flush())
    return checked, served


def _records(spans: Sequence[ReadableSpan]) -> list[SpanRecord]:
    return [span_record_from_readable(span) for span in spans]


def test_handoff_ping_pong_stops_live_in_check_and_in_serve(tmp_path: Path) -> None:
    """Five handoffs between triage and billing stop at the 4th, as under OpenInference."""
    spans = _run(PING_PONG, handoff_spans=True, calls=False)
    records = _records(spans)
    handoffs = [to_event(r) for r in records if r.name == HANDOFF_TEMPLATE]
    assert [(h.from_agent, h.to_agent) for h in handoffs if isinstance(h, Handoff)] == \
        list(pairwise(PING_PONG))
    assert _live(spans) == [(HANDOFF_TEMPLATE, "HANDOFF_LOOP")] * 2
    checked, served = _check_and_serve(spans)
    assert checked == served == ["HANDOFF_LOOP"] * 2
    trace_file = tmp_path / "logfire.jsonl"
    trace_file.write_text(json_line(spans) + "\n", encoding="utf-8")
    assert main(["check", str(trace_file)]) == 1  # the command: a run stopped


def test_agents_of_tool_calls_are_the_agent_names() -> None:
    """Calls under ``Agent run: {name!r}`` belong to the agent its ``name`` attribute names."""
    spans = _run(PING_PONG, handoff_spans=False, calls=True)
    records = _records(spans)
    trace = assemble_trace(records[0].trace_id, records, LoopGuardConfig())
    agents = [item.event.agent for item in trace.events if isinstance(item.event, ToolCall)]
    assert agents == PING_PONG


def test_sibling_agent_runs_alone_stop_live_in_check_and_in_serve() -> None:
    """With no handoff span, the sibling agent runs imply the handoffs: the live processor
    reads the agent of each as it starts (``name`` is set then), ``check`` and ``serve`` as
    they read the trace, and all three stop at the same agent runs."""
    spans = _run(PING_PONG, handoff_spans=False, calls=False)
    assert _live(spans) == [(AGENT_TEMPLATE, "HANDOFF_LOOP")] * 2
    checked, served = _check_and_serve(spans)
    assert checked == served == ["HANDOFF_LOOP"] * 2


SPANS: list[tuple[str, dict[str, Any], str | None, tuple[str, str] | None]] = [
    # Logfire 5: template names, values in attributes (and in logfire.msg)
    (AGENT_TEMPLATE, {"name": "triage", "logfire.msg": "Agent run: 'triage'"}, "triage", None),
    (AGENT_TEMPLATE, {"logfire.msg": "Agent run: 'triage'"}, "triage", None),
    (HANDOFF_TEMPLATE, {"from_agent": "a", "to_agent": "b"}, None, ("a", "b")),
    (HANDOFF_TEMPLATE, {"logfire.msg": "Handoff: a → b"}, None, ("a", "b")),
    (HANDOFF_TEMPLATE, {"from_agent": "a", "to_agent": "null",
                        "logfire.msg": "Handoff: a → None"}, None, None),  # not yet made
    (HANDOFF_TEMPLATE, {}, None, None),
    # formatted names (older versions), with either arrow; the attributes are not asked
    ("Agent run: 'triage'", {"name": "other"}, "triage", None),
    ("Handoff: a -> b", {"from_agent": "x", "to_agent": "y"}, None, ("a", "b")),
    ("Handoff: a → b", {}, None, ("a", "b")),
]


@pytest.mark.parametrize(("name", "attributes", "agent", "handoff"), SPANS)
def test_agent_and_handoff_of_a_logfire_span(name: str, attributes: dict[str, Any],
                                             agent: str | None,
                                             handoff: tuple[str, str] | None) -> None:
    record = SpanRecord(trace_id="0" * 31 + "1", span_id="0" * 15 + "2", parent_span_id=None,
                        name=name, start_time_ns=1, end_time_ns=2, attributes=attributes)
    event = to_event(record)
    assert not isinstance(event, ToolCall)
    assert (None if event is None else (event.from_agent, event.to_agent)) == handoff
    if name.startswith("Agent run"):
        assert agent_of(name, attributes) == agent
        assert roles_of(name, attributes)[0] == agent
