"""Adapters on span shapes recorded from eight more frameworks (tests/recordings/).

The fixtures are ``tests/data/recorded/<framework>.jsonl``, written by
``tests/recordings/record_frameworks.py`` from the scripted agents of
``tests/frameworks/scripted_agents.py``; these tests need none of the frameworks.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from otel_loopguard import Checker, RunReport, ToolCall
from otel_loopguard.adapters import prompt_template_of, to_event
from otel_loopguard.assembly import AssembledTrace, assemble_trace
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.replay.tracefile import iter_spans
from otel_loopguard.signature import VolatileMatcher, analyze_result, canonical_args
from otel_loopguard.types import Handoff, SpanRecord

DATA = Path(__file__).parent / "data" / "recorded"
BASE = ["looping", "healthy", "failing"]
LINES = {
    "pydantic-ai": BASE,
    "google-adk": [*BASE, "parallel", "handoff", "there_and_back"],
    "strands": BASE,
    "strands-default": BASE,  # without its opt-in: arguments and results in span events
    "agent-framework": BASE,
    "smolagents": BASE,
    "llama-index": [*BASE, "handoff", "there_and_back"],
    "crewai": [*BASE, "cached"],
    "mcp": BASE,
}
"""Framework → scenario of each line of its fixture (tests/recordings/README.md)."""
FRAMEWORKS = sorted(LINES)
STAGNANT = [(3, "STAGNANT_RESULT", "warn"), (4, "STAGNANT_RESULT", "replan")]


def _spans(framework: str) -> list[SpanRecord]:
    return list(iter_spans(str(DATA / f"{framework}.jsonl"), strict=True))


def _trace_ids(framework: str) -> list[str]:
    return list(dict.fromkeys(s.trace_id for s in _spans(framework)))


def _reports(framework: str) -> dict[str, RunReport]:
    reports = {r.trace_ids[0]: r for r in Checker(LoopGuardConfig()).run(iter(_spans(framework)))}
    return {LINES[framework][i]: reports[t] for i, t in enumerate(_trace_ids(framework))}


def _assembled(framework: str, scenario: str) -> AssembledTrace:
    trace_id = _trace_ids(framework)[LINES[framework].index(scenario)]
    spans = [s for s in _spans(framework) if s.trace_id == trace_id]
    return assemble_trace(trace_id, spans, LoopGuardConfig())


def _calls(framework: str, scenario: str) -> list[ToolCall]:
    return [e.event for e in _assembled(framework, scenario).events
            if isinstance(e.event, ToolCall)]


def _handoffs(framework: str, scenario: str) -> list[Handoff]:
    """The trace's explicit handoffs (those its sibling agent spans imply come too, and count
    only until the run's first explicit one)."""
    return [e.event for e in _assembled(framework, scenario).events
            if isinstance(e.event, Handoff) and e.event.explicit]


def _findings(report: RunReport) -> list[tuple[int, str, str]]:
    return [(d.call_index, d.code, d.action.label) for d in report.findings]


class TestRecordedFrameworks:
    @pytest.mark.parametrize("framework", [f for f in FRAMEWORKS if f != "crewai"])
    def test_looping_agent_is_flagged(self, framework: str) -> None:
        """Four identical searches whose answers differ only in volatile fields: warn, replan."""
        report = _reports(framework)["looping"]
        assert report.tool_calls == 4
        assert _findings(report) == STAGNANT

    def test_crewai_cycle_is_flagged(self) -> None:
        """CrewAI's alternating searches with unchanged answers: a cycle that stops at call 6."""
        report = _reports("crewai")["looping"]
        assert report.tool_calls == 6
        assert report.action.label == "stop"
        assert ("CYCLE_DETECTED", "stop") in {(c, a) for _, c, a in _findings(report)}

    @pytest.mark.parametrize(("framework", "scenario"), [
        *((f, "healthy") for f in FRAMEWORKS),
        ("google-adk", "parallel"), ("google-adk", "there_and_back"),
        ("llama-index", "there_and_back")])
    def test_healthy_runs_are_quiet(self, framework: str, scenario: str) -> None:
        """Different searches, a parallel batch, a single there-and-back: no finding."""
        assert _reports(framework)[scenario].findings == []

    @pytest.mark.parametrize("framework", FRAMEWORKS)
    def test_failures_are_failures(self, framework: str) -> None:
        """401 twice (raised, an error result or is_error): failed calls, stop at the 2nd."""
        calls = _calls(framework, "failing")
        assert calls and all(c.error or "error" in str(c.result) for c in calls)
        assert _findings(_reports(framework)["failing"])[0] == (2, "PERMANENT_FAILURE", "stop")

    @pytest.mark.parametrize("framework", FRAMEWORKS)
    def test_arguments_are_unwrapped(self, framework: str) -> None:
        """Call envelopes (smolagents, LlamaIndex, MCP) give the tool's own arguments."""
        calls = _calls(framework, "looping")
        assert len(calls) >= 4  # the loop's calls are there to check
        for call in calls:
            assert call.tool == "search"
            assert canonical_args(call.arguments)[0] in ({"query": "refund policy"},
                                                         {"query": "refunds"})

    @pytest.mark.parametrize("framework", [f for f in FRAMEWORKS if f != "crewai"])
    def test_results_are_unwrapped_and_volatile_fields_stripped(self, framework: str) -> None:
        """Result envelopes open to the JSON text inside; without request_id/fetched_at the
        four answers are one."""
        calls = _calls(framework, "looping")
        volatile = VolatileMatcher()
        digests = {analyze_result(c.result, volatile).digest for c in calls}
        assert len(digests) == 1
        assert all(isinstance(c.result, str) and c.result.startswith('{"results"')
                   for c in calls), [c.result for c in calls]

    def test_crewai_tool_reminder_is_not_part_of_the_result(self) -> None:
        """CrewAI appends its tool list to some observations; the result is what came before."""
        results = [c.result for c in _calls("crewai", "looping")]
        assert all(r.endswith("}") for r in results), results

    def test_smolagents_final_answer_is_no_tool_call(self) -> None:
        """smolagents ends every run with a final_answer tool span: not a call."""
        assert [c.tool for c in _calls("smolagents", "healthy")] == ["search"] * 3

    def test_adk_merged_tools_span_is_no_tool_call(self) -> None:
        """ADK's ``(merged tools)`` span after a parallel batch is not a call."""
        calls = _calls("google-adk", "parallel")
        assert [c.tool for c in calls] == ["search"] * 4
        assert len({c.turn for c in calls}) == 2  # two model turns, two calls each

    @pytest.mark.parametrize(("framework", "first_stop"), [
        ("google-adk", 4), ("llama-index", 5)])
    def test_handoff_ping_pong_stops(self, framework: str, first_stop: int) -> None:
        """Handoff tools become handoffs; the ping-pong stops at the second closure.

        ADK names the agent handing off, so the cycle closes twice at the 4th handoff;
        LlamaIndex does not, so its first agent is unknown and it takes one more.
        """
        handoffs = _handoffs(framework, "handoff")
        assert [h.to_agent for h in handoffs] == ["billing", "triage"] * 2 + ["billing"]
        assert not _calls(framework, "handoff")  # transfer_to_agent / handoff are no calls
        report = _reports(framework)["handoff"]
        stops = [d for d in report.findings if d.code == "HANDOFF_LOOP"]
        assert stops and all(d.action.label == "stop" for d in stops)
        assert stops[0].evidence[0].count == 2
        assert len(stops) == len(handoffs) - first_stop + 1

    def test_handoff_arguments_carry_no_address(self) -> None:
        """LlamaIndex's handoff arguments hold ``ctx`` reprs whose addresses differ per call;
        masked, the two triage→billing handoffs sign the same."""
        spans = [s for s in _spans("llama-index")
                 if s.attributes.get("tool.name") == "handoff"
                 and '"billing"' in str(s.attributes.get("input.value"))]
        texts = {canonical_args(s.attributes["input.value"])[1] for s in spans}
        raw = {s.attributes["input.value"] for s in spans}
        assert len(spans) >= 2 and len(raw) == len(spans) and len(texts) == 1

    def test_strands_conversation_is_the_session(self) -> None:
        """Strands' ``trace_attributes`` session.id is the run's conversation."""
        assert _assembled("strands", "looping").conversation == "conv-looping"

    @pytest.mark.parametrize("framework", ["llama-index"])
    def test_template_text_gets_a_readable_label(self, framework: str) -> None:
        """A template known by its text: its first words and a hash, with its version."""
        labels = {_assembled(framework, s).prompt_template for s in LINES[framework]}
        assert len(labels) == 1
        label = labels.pop()
        assert label is not None
        assert label.startswith("tpl-you-are-support-triage-") and label.endswith("@v3")

    @pytest.mark.parametrize("framework", ["pydantic-ai", "smolagents", "crewai"])
    def test_template_name_inside_metadata(self, framework: str) -> None:
        """``metadata`` JSON (pydantic-ai's agent span, OpenInference's using_metadata) names
        the template, read by the default ``metadata.prompt_name`` key."""
        cfg = LoopGuardConfig()
        found = {prompt_template_of(s.attributes, cfg.prompt_name_keys, cfg.prompt_version_keys)
                 for s in _spans(framework)} - {None}
        assert found == {"support_triage@v3"}

    @pytest.mark.parametrize("framework", ["pydantic-ai", "crewai"])
    def test_template_of_every_run(self, framework: str) -> None:
        """Every run of the fixture gets its template from ``metadata``."""
        assert {r.prompt_template for r in _reports(framework).values()} == {
            "support_triage@v3"}

    def test_mcp_error_result(self) -> None:
        """MCP ``is_error`` results fail with the server's message."""
        calls = _calls("mcp", "failing")
        assert all(c.error and "401" in c.error_message for c in calls)

    @pytest.mark.parametrize("framework", FRAMEWORKS)
    def test_every_run_is_one_whole_tree(self, framework: str) -> None:
        """Each line is one complete run: one root span, and every parent span is in it (a
        span that ended after the recording read the exporter would leave an orphan)."""
        for trace_id in _trace_ids(framework):
            spans = [s for s in _spans(framework) if s.trace_id == trace_id]
            ids = {s.span_id for s in spans}
            assert len([s for s in spans if not s.parent_span_id]) == 1
            assert all(s.parent_span_id in ids for s in spans if s.parent_span_id)

    def test_every_tool_span_is_read(self) -> None:
        """No tool span of the fixtures is left unread by the default adapters."""
        for framework in FRAMEWORKS:
            for span in _spans(framework):
                attrs = span.attributes
                tool_span = (attrs.get("gen_ai.operation.name") == "execute_tool"
                             or attrs.get("openinference.span.kind") == "TOOL"
                             or attrs.get("traceloop.span.kind") == "tool")
                if tool_span and attrs.get("gen_ai.tool.name") != "(merged tools)" \
                        and attrs.get("tool.name") != "final_answer":
                    assert to_event(span) is not None, (framework, span.name)
