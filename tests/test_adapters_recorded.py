"""Adapters on span shapes recorded from the real instrumentations (tests/recordings/)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from otel_loopguard import Checker, RunReport, ToolCall
from otel_loopguard.assembly import assemble_trace
from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.replay.tracefile import iter_spans
from otel_loopguard.signature import canonical_args

DATA = Path(__file__).parent / "data" / "recorded"

# family -> scenario per trace, in file order (tests/recordings/README.md)
LINES = {
    "agents-openinference": ["looping", "healthy", "failing", "handoff", "prompt_template"],
    "agents-traceloop": ["looping", "healthy", "failing", "handoff"],
    "agents-otel-genai": ["looping", "healthy", "failing", "handoff"],
    "langchain-openinference": ["looping", "healthy", "failing", "two_args", "prompt_template"],
    "langchain-traceloop": ["create_agent", "looping", "create_agent", "healthy", "create_agent",
                            "failing", "create_agent", "two_args"],
    "langchain-otel-genai": ["looping", "healthy", "failing", "two_args"],
}
FAMILIES = sorted(LINES)


def _reports(family: str) -> dict[str, RunReport]:
    reports = list(Checker(LoopGuardConfig()).run(iter_spans(str(DATA / f"{family}.jsonl"),
                                                             strict=True)))
    traces = _trace_order(family)
    by_trace = {r.trace_ids[0]: r for r in reports}
    return {LINES[family][i]: by_trace[t] for i, t in enumerate(traces)
            if LINES[family][i] != "create_agent"}


def _trace_order(family: str) -> list[str]:
    return list(dict.fromkeys(s.trace_id for s in iter_spans(str(DATA / f"{family}.jsonl"))))


def _tool_calls(family: str, scenario: str) -> Iterator[ToolCall]:
    spans = list(iter_spans(str(DATA / f"{family}.jsonl")))
    trace_id = _trace_order(family)[LINES[family].index(scenario)]
    assembled = assemble_trace(trace_id, [s for s in spans if s.trace_id == trace_id],
                               LoopGuardConfig())
    for item in assembled.events:
        if isinstance(item.event, ToolCall):
            yield item.event


class TestRecordedFamilies:
    @pytest.mark.parametrize("family", FAMILIES)
    def test_looping_agent_is_flagged(self, family: str) -> None:
        """Four identical searches with the same empty result: warn at 3, replan at 4."""
        report = _reports(family)["looping"]
        assert report.tool_calls == 4
        assert [(d.call_index, d.code, d.action.label) for d in report.findings] == [
            (3, "STAGNANT_RESULT", "warn"), (4, "STAGNANT_RESULT", "replan")]

    @pytest.mark.parametrize("family", FAMILIES)
    def test_healthy_agent_is_quiet(self, family: str) -> None:
        """Three different searches produce no finding."""
        report = _reports(family)["healthy"]
        assert report.tool_calls == 3
        assert report.findings == []

    @pytest.mark.parametrize("family", FAMILIES)
    def test_arguments_are_unwrapped_to_the_real_ones(self, family: str) -> None:
        """Envelopes (Traceloop's input_str/inputs/kwargs, bare values) give the real arguments."""
        calls = list(_tool_calls(family, "looping"))
        assert {c.tool for c in calls} == {"search"}
        for call in calls:
            args = canonical_args(call.arguments)[0]
            assert args in ({"query": "refund policy"}, "refund policy"), call.arguments
            assert call.has_result

    @pytest.mark.parametrize("family", FAMILIES)
    def test_results_are_unwrapped(self, family: str) -> None:
        """ToolMessage envelopes give the tool's own result, identical across the repeats."""
        calls = list(_tool_calls(family, "looping"))
        results = {str(c.result) for c in calls}
        assert len(results) == 1
        assert "no results" in results.pop()

    @pytest.mark.parametrize("family", [f for f in FAMILIES if f.startswith("langchain")])
    def test_two_argument_tools(self, family: str) -> None:
        """Multi-argument LangChain tools give a mapping without per-call ids or metadata."""
        calls = list(_tool_calls(family, "two_args"))
        assert [canonical_args(c.arguments)[0] for c in calls] == [
            {"city": "paris", "unit": "celsius"}] * 2

    @pytest.mark.parametrize("family", FAMILIES)
    def test_failures_are_failures(self, family: str) -> None:
        """Tool exceptions are seen as failed calls; a visible 401 stops at the 2nd call."""
        calls = list(_tool_calls(family, "failing"))
        assert len(calls) == 2 and all(c.error for c in calls)
        report = _reports(family)["failing"]
        if family.startswith("agents"):
            # the Agents SDK redacts the error text ("Please try again."): retryable, 2 < 3
            assert report.action.label == "continue"
        else:
            assert [(d.call_index, d.code, d.action.label) for d in report.findings] == [
                (2, "PERMANENT_FAILURE", "stop")]

    @pytest.mark.parametrize("family", [f for f in FAMILIES if f.startswith("agents")])
    def test_handoff_ping_pong_stops(self, family: str) -> None:
        """triage→billing→triage→billing→triage stops at the second closed cycle."""
        report = _reports(family)["handoff"]
        loops = [d for d in report.findings if d.code == "HANDOFF_LOOP"]
        assert len(loops) == 1 and loops[0].action.label == "stop"
        assert loops[0].evidence[0].details["cycle"] in (["triage", "billing", "triage"],
                                                          ["billing", "triage", "billing"])

    @pytest.mark.parametrize("family", ["agents-openinference", "langchain-openinference"])
    def test_prompt_template_text_is_hashed(self, family: str) -> None:
        """OpenInference's template text becomes tpl-<hash>@version, never the text."""
        report = _reports(family)["prompt_template"]
        assert report.prompt_template is not None
        assert report.prompt_template.startswith("tpl-")
        assert report.prompt_template.endswith("@v3")
