"""Strands ``Swarm`` handoffs as Strands 1.62 writes them: ``handoff_to_agent`` tool spans.

A ``Swarm`` runs its agents as sibling ``invoke_agent`` spans under ``invoke_swarm``, and each
agent passes the task on by calling the tool ``handoff_to_agent(agent_name, message,
context)``, whose ``execute_tool`` span names no agent. That call is a handoff from the agent of
the enclosing agent span to ``agent_name``, not a tool call, for the live processor, ``serve``
and ``check`` alike.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from _otlp_files import json_line, live_run
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import Tracer

from otel_loopguard import LoopGuardConfig
from otel_loopguard.cli import main
from otel_loopguard.otlp._sdk import span_record_from_readable
from otel_loopguard.receiver import StreamingChecker
from otel_loopguard.replay import Checker

PING_PONG = [["researcher", "reviewer"] * 3 + ["researcher"]]
FAN_OUT = [["supervisor", "researcher"], ["supervisor", "writer"]] * 3


def _swarm_runs(routes: Sequence[Sequence[str]], *, drafts: bool = False) -> list[ReadableSpan]:
    """One trace of ``Swarm`` runs, each passing control along its route, under the live
    processor; with ``drafts``, each handoff hands over a new draft."""
    with live_run("strands.telemetry.tracer", "") as (tracer, spans):  # noqa: SIM117 (tracer)
        with tracer.start_as_current_span("session"):
            for route in routes:
                with tracer.start_as_current_span("invoke_swarm", attributes={
                        "gen_ai.operation.name": "invoke_swarm",
                        "gen_ai.provider.name": "strands-agents"}):
                    for turn, agent in enumerate(route):
                        _agent(tracer, agent, route[turn + 1] if turn + 1 < len(route) else None,
                               f"draft v{turn}" if drafts else "")
    return spans


def _agent(tracer: Tracer, agent: str, target: str | None, draft: str) -> None:
    """One agent's turn: a model call, then a handoff to ``target`` (handing over ``draft``)
    unless it is None."""
    start = tracer.start_as_current_span
    with start(f"invoke_agent {agent}", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": "strands-agents",
            "gen_ai.agent.name": agent}), start("execute_event_loop_cycle", attributes={
            "gen_ai.operation.name": "execute_event_loop_cycle"}):
        with start("chat", attributes={"gen_ai.operation.name": "chat"}):
            pass
        if target is None:
            return
        message = f"{target}, please take over."
        with start("execute_tool handoff_to_agent", attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.provider.name": "strands-agents",
                "gen_ai.tool.name": "handoff_to_agent", "gen_ai.tool.call.id": f"to-{target}",
                "gen_ai.tool.call.arguments": json.dumps(
                    {"agent_name": target, "message": message, "context": {"draft": draft}}),
                "gen_ai.tool.status": "success",
                "gen_ai.tool.call.result": json.dumps(
                    [{"text": f"Handing off to {target}: {message}"}])}):
            pass


def _findings(spans: list[ReadableSpan]) -> tuple[list[tuple[str, str, int]], ...]:
    """The findings live (on the spans), in ``check`` and in ``serve``'s streaming checker."""
    live = [(format(s.context.span_id, "016x"), str(s.attributes["loopguard.code"]),
             int(s.attributes["loopguard.call_index"])) for s in spans
            if s.attributes and "loopguard.code" in s.attributes]
    records = [span_record_from_readable(span) for span in spans]
    checked = [(d.span_id, d.code, d.call_index) for report in
               Checker(LoopGuardConfig()).run(iter(records)) for d in report.findings]
    streaming = StreamingChecker(LoopGuardConfig(), raise_internal_errors=True)
    served = [(d.span_id, d.code, d.call_index) for report in
              streaming.add(records) + streaming.flush() for d in report.findings]
    return live, checked, served


def test_ping_pong_stops_at_the_second_closed_cycle_everywhere(tmp_path: Path) -> None:
    """researcher → reviewer → … handing over the same message each way: HANDOFF_LOOP stops
    the 5th handoff and each one after, live, in ``serve`` and in ``check`` (the first two
    messages are new: work handed over), and no tool call is counted."""
    spans = _swarm_runs(PING_PONG)
    live, checked, served = _findings(spans)
    handoffs = [format(s.context.span_id, "016x") for s in spans
                if s.name == "execute_tool handoff_to_agent"]
    assert live == checked == served == [(span_id, "HANDOFF_LOOP", 0)
                                         for span_id in handoffs[4:]]
    records = [span_record_from_readable(span) for span in spans]
    (report,) = Checker(LoopGuardConfig()).run(iter(records))
    assert report.tool_calls == 0
    assert report.findings[0].evidence[0].details["cycle"] == ["reviewer", "researcher",
                                                               "reviewer"]
    trace_file = tmp_path / "swarm.jsonl"
    trace_file.write_text(json_line(spans) + "\n", encoding="utf-8")
    assert main(["check", str(trace_file)]) == 1


@pytest.mark.parametrize("routes", [[["researcher", "reviewer", "writer"]], FAN_OUT],
                         ids=["chain", "fan-out"])
def test_one_way_handoffs_stay_quiet(routes: list[list[str]]) -> None:
    """A → B → C once, and a supervisor handing the task out six times (to researcher, then
    writer, in turn), are no loop anywhere."""
    assert _findings(_swarm_runs(routes)) == ([], [], [])


def test_a_review_loop_handing_over_new_drafts_stays_quiet() -> None:
    """The same ping-pong, each handoff handing over a new draft (Strands' ``context``): the
    agents are revising, not handing the task back and forth. Before, it was stopped at the
    4th handoff, since Strands keeps the agents' messages in span events loopguard does not
    read."""
    assert _findings(_swarm_runs(PING_PONG, drafts=True)) == ([], [], [])
