"""The scenario catalogue of the detection spec, through real spans, adapters and ``check``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from otel_loopguard import LoopGuardConfig
from otel_loopguard.testing import MISSING, AgentScript, LoopGuardHarness


@dataclass
class Scenario:
    script: Callable[[LoopGuardHarness], None]
    expect: dict[int, str] = field(default_factory=dict)
    """call index -> action of the decision on that call."""
    quiet_before: int = 0
    """All calls before this index must be continue."""
    detectors: frozenset[str] = frozenset()
    config: dict[str, Any] = field(default_factory=dict)
    run_action: str | None = None
    tool_calls: int | None = None


def _one_run(body: Callable[[AgentScript], None], **run: Any) -> Callable[[LoopGuardHarness], None]:
    def script(h: LoopGuardHarness) -> None:
        with h.run(**run) as agent:
            body(agent)

    return script


def _each(calls: list[tuple[Any, ...]]) -> Callable[[AgentScript], None]:
    def body(agent: AgentScript) -> None:
        for call in calls:
            agent.turn()
            agent.tool(*call[:3], error=call[3] if len(call) > 3 else None)

    return body


HEALTHY: dict[str, Scenario] = {
    "H1-distinct-queries": Scenario(_one_run(_each([
        ("search", {"q": c}, f"{c} facts") for c in ("paris", "london", "tokyo")]))),
    "H2-pagination": Scenario(_one_run(_each([
        ("search", {"q": "docs", "page": i}, {"items": [f"doc{i}a", f"doc{i}b"], "page": i})
        for i in range(1, 9)]))),
    "H3-polling-with-progress": Scenario(_one_run(_each(
        [("poll_job", {"id": 123}, s) for s in (
            {"status": "pending"}, {"status": "running"}, {"status": "running", "pct": 40},
            {"status": "running", "pct": 80}, {"status": "completed"})]
        + [("get_job_status", {"id": 7}, s) for s in (
            ["running step 2/4"] * 3 + ["running step 3/4", "done"])]))),
    "H4-retry-then-success": Scenario(_one_run(_each([
        ("fetch", {"id": 1}, "Too Many Requests", "HTTP 429 Too Many Requests"),
        ("fetch", {"id": 1}, {"status": 200, "ok": True, "body": "data"})]))),
    "H5-same-call-twice": Scenario(_one_run(_each([("search", {"q": "x"}, "r")] * 2))),
    "H6-pipeline": Scenario(_one_run(_each([
        ("web_search", {"q": "llm pricing"}, "3 results"),
        ("summarize", {"text": "3 results"}, "summary"),
        ("draft_report", {"summary": "summary"}, "report")]))),
    "H7-repeat-with-changing-results": Scenario(_one_run(_each([
        ("A", {"x": 1}, "r1"), ("A", {"x": 1}, "r2"), ("B", {"y": 1}, "r3"),
        ("A", {"x": 1}, "r4")]))),
    "H8-results-A-B-A": Scenario(_one_run(_each([
        ("check", {"k": 1}, "A"), ("check", {"k": 1}, "B"), ("check", {"k": 1}, "A")]))),
    "H9-alternation-with-progress": Scenario(_one_run(_each([
        ("A", {}, "r1"), ("B", {}, "r2"), ("A", {}, "r3"), ("B", {}, "r4")]))),
    "H10-batch-edits": Scenario(_one_run(_each([
        ("edit_file", {"path": f"f{i}.py", "old": "a", "new": "b"}, "ok")
        for i in range(1, 21)]))),
    "H13-word-error-in-success": Scenario(_one_run(_each([
        ("search", {"q": "error handling in go"}, "Go handles error values explicitly"),
        ("search", {"q": "rust result type"}, "Result<T, E> carries an error variant"),
        ("search", {"q": "python exceptions"}, "raise and except")]))),
    "H16-long-productive-run": Scenario(_one_run(_each([
        (["search", "fetch", "read_file", "summarize"][i % 4], {"n": i}, f"result {i}")
        for i in range(40)]))),
}


def _h11(agent: AgentScript) -> None:
    for i in range(4):
        agent.handoff("supervisor", "researcher")
        with agent.agent("researcher") as researcher:
            researcher.turn()
            researcher.tool("search", {"q": f"topic {i}"}, f"found {i}")


def _h12(agent: AgentScript) -> None:
    for i in range(200):
        agent.turn()
        if i % 10 == 0:
            agent.tool("lookup", {"id": i}, f"record {i}")
        else:
            agent.tool(f"tool_{i % 7}", {"n": i}, f"value {i}")


def _h14(h: LoopGuardHarness) -> None:
    for _ in range(3):
        with h.run() as agent:
            _each([("search", {"q": "x"}, "same")] * 2)(agent)


def _h15(agent: AgentScript) -> None:
    agent.turn()
    agent.batch([("read", {"f": "a"}, "A"), ("read", {"f": "b"}, "B"), ("read", {"f": "c"}, "C")])
    for state in ("queued", "running 10%", "running 60%", "done"):
        agent.turn()
        agent.batch([("job_status", {"job": "a"}, f"a {state}"),
                     ("job_status", {"job": "b"}, f"b {state}")])


def _h17(agent: AgentScript) -> None:
    content = "v0"
    for i in range(1, 4):
        agent.turn()
        agent.tool("edit_file", {"path": "app.py", "n": i}, "ok")
        content = f"v{i}"
        agent.turn()
        agent.tool("read_file", {"path": "app.py"}, content)


HEALTHY.update({
    "H11-one-way-handoffs": Scenario(_one_run(_h11, agent="supervisor")),
    "H12-spread-reuse": Scenario(_one_run(_h12), config={"max_tool_calls_warn": None}),
    "H14-separate-runs": Scenario(_h14),
    "H15-parallel-healthy": Scenario(_one_run(_h15)),
    "H17-reread-after-edit": Scenario(_one_run(_h17)),
})


def _h23(agent: AgentScript) -> None:
    for i in range(150):  # edit a file, view it, rerun the tests: each with its own outcome
        agent.turn(finish_reasons=["tool_calls"])
        if i % 3 == 0:
            agent.tool("str_replace_based_edit_tool", {"command": "str_replace",
                                                       "path": f"src/m{i}.py", "old_str": "a",
                                                       "new_str": "b"}, "The file was edited.")
        elif i % 3 == 1:
            agent.tool("str_replace_based_edit_tool", {"command": "view",
                                                       "path": f"src/m{i - 1}.py"}, f"b = {i}")
        else:
            agent.tool("bash", {"command": "pytest -q"}, f"{i} passed")
    agent.turn(finish_reasons=["stop"])


HEALTHY["H23-coding-session-with-template-budget"] = Scenario(
    _one_run(_h23, prompt="coding-agent"),
    config={"templates": {"coding-agent": {"max_tool_calls_warn": 200}}})


def _f6(agent: AgentScript) -> None:
    _each([("search", {"q": "claim"}, "none"), ("summarize", {"text": "none"}, "none")] * 3)(
        agent)


def _f9(agent: AgentScript) -> None:
    ranges = ["0-100", "100-200", "0-100", "200-300", "0-100"]
    _each([("read_file", {"path": "a.py", "range": r}, f"content {r}") for r in ranges])(agent)


def _f10(agent: AgentScript) -> None:
    for _ in range(3):
        agent.turn()
        agent.batch([("get_price", {"sku": "a"}, "12"), ("get_stock", {"sku": "a"}, "0")])


def _f11(agent: AgentScript) -> None:
    for source, target in [("triage", "billing"), ("billing", "triage")] * 2:
        agent.handoff(source, target)


def _f18(agent: AgentScript) -> None:
    failing = {"passed": False, "output": "FAILED test_total - assert 3 == 4"}
    _each([("run_tests", {}, failing), ("edit_file", {"path": "a.py", "v": 1}, "ok"),
           ("run_tests", {}, failing), ("edit_file", {"path": "a.py", "v": 2}, "ok"),
           ("run_tests", {}, failing)])(agent)


LOOPS: dict[str, Scenario] = {
    "F1-no-results": Scenario(_one_run(_each([("web_search", {"q": "pricing"}, "no results")] * 5)),
                              {3: "warn", 4: "replan", 5: "stop"}, 3, frozenset({"stagnation"})),
    "F2-volatile-timestamp": Scenario(_one_run(_each([
        ("web_search", {"q": "pricing"},
         {"results": [], "timestamp": f"2025-03-17T10:00:0{i}Z", "request_id": f"req-{i}"})
        for i in range(5)])), {3: "warn", 4: "replan", 5: "stop"}, 3,
        frozenset({"stagnation"})),
    "F3-no-results-captured": Scenario(_one_run(_each([("search", {"q": "x"}, MISSING)] * 5)),
                                       {3: "warn", 5: "replan"}, 3, frozenset({"repeat"})),
    "F4-permanent-401": Scenario(_one_run(_each(
        [("fetch", {"id": 1}, "Unauthorized", "HTTP 401 Unauthorized")] * 2)),
        {2: "stop"}, 2, frozenset({"failure"})),
    "F5-retryable-429": Scenario(_one_run(_each(
        [("fetch", {"id": 1}, "Too Many Requests", "HTTP 429 Too Many Requests")] * 5)),
        {3: "warn", 5: "stop"}, 3, frozenset({"failure"})),
    "F6-two-step-cycle": Scenario(_one_run(_f6), {4: "warn", 6: "stop"}, 4,
                                  frozenset({"cycle"})),
    "F7-three-step-cycle": Scenario(_one_run(_each([
        ("A", {"a": 1}, "ra"), ("B", {"b": 1}, "rb"), ("C", {"c": 1}, "rc")] * 3)),
        {6: "warn", 9: "stop"}, 6, frozenset({"cycle"})),
    "F8-edit-mismatch": Scenario(_one_run(_each([
        ("edit_file", {"path": "x.py", "old": "foo", "new": "bar"}, MISSING,
         "old_text does not match the file")] * 3)), {2: "warn", 3: "stop"}, 2,
        frozenset({"mutating_failure"})),
    "F9-reread": Scenario(_one_run(_f9), {5: "warn"}, 5, frozenset({"reread"})),
    "F10-repeated-batch": Scenario(_one_run(_f10), {6: "warn"}, 5, frozenset({"batch"})),
    "F11-handoff-ping-pong": Scenario(_one_run(_f11, agent="triage"), run_action="stop",
                                      detectors=frozenset({"handoff"})),
    "F12-near-duplicates": Scenario(_one_run(_each([
        ("search", {"q": q}, "no results")
        for q in ("weather in Paris", "Paris weather", "paris  weather today")])),
        {3: "replan"}, 3, frozenset({"near_duplicate"})),
    "F13-budget": Scenario(_one_run(_each([
        ("tool_" + str(i % 9), {"n": i}, f"r{i}") for i in range(60)])), {50: "warn"}, 50,
        frozenset({"budget"})),
    "F14-stuck-poll": Scenario(_one_run(_each([("poll_job", {"id": 123}, "pending")] * 10)),
                               {5: "warn", 10: "stop"}, 5, frozenset({"stagnation"})),
    "F15-exempt": Scenario(_one_run(_each([("heartbeat", {}, "ok")] * 10)),
                           config={"tools": {"heartbeat": {"kind": "exempt"}}},
                           run_action="continue", tool_calls=10),
    "F16-permanent-other-args": Scenario(_one_run(_each([
        ("write_file", {"path": "/etc/app.conf", "content": f"v{i}"}, MISSING,
         "EACCES: permission denied, open '/etc/app.conf'") for i in range(1, 4)])),
        {2: "warn", 3: "stop"}, 2, frozenset({"failure"})),
    "F17-structured-error": Scenario(_one_run(_each([
        ("crm_lookup", {"id": 42}, {"error": {"code": 401, "message": "unauthorized"}})] * 2)),
        {2: "stop"}, 2, frozenset({"failure"})),
    "F18-same-test-failure": Scenario(_one_run(_f18), {5: "warn"}, 5,
                                      frozenset({"stagnation"})),
}


def _run(scenario: Scenario) -> list[Any]:
    tools = scenario.config.get("tools", {})
    values = {k: v for k, v in scenario.config.items() if k != "tools"}
    harness = LoopGuardHarness(LoopGuardConfig.create(tools=tools, **values))
    try:
        scenario.script(harness)
        return harness.check()
    finally:
        harness.shutdown()


class TestHealthyScenarios:
    @pytest.mark.parametrize("name", list(HEALTHY), ids=list(HEALTHY))
    def test_stays_quiet(self, name: str) -> None:
        """Healthy repetition (polling, pagination, retries) produces no finding at all."""
        reports = _run(HEALTHY[name])
        assert reports, "the scenario produced no run"
        for report in reports:
            assert report.tool_calls > 0
            assert [(d.call_index, d.code) for d in report.findings] == []
            assert report.action.label == "continue"


class TestLoopScenarios:
    @pytest.mark.parametrize("name", list(LOOPS), ids=list(LOOPS))
    def test_flags_at_the_expected_calls(self, name: str) -> None:
        """Each loop is flagged with the expected action at the expected call, not earlier."""
        scenario = LOOPS[name]
        reports = _run(scenario)
        assert len(reports) == 1
        report = reports[0]
        actions: dict[int, str] = {}
        for decision in report.findings:
            if decision.tool != "handoff":
                actions[decision.call_index] = decision.action.label
        for index, action in scenario.expect.items():
            assert actions.get(index) == action, (index, actions)
        assert all(i >= scenario.quiet_before for i in actions), actions
        found = {e.detector for d in report.findings for e in d.evidence}
        assert scenario.detectors <= found, found
        if scenario.run_action is not None:
            assert report.action.label == scenario.run_action
        if scenario.tool_calls is not None:
            assert report.tool_calls == scenario.tool_calls

    def test_handoff_stop_lands_on_second_closed_cycle(self) -> None:
        """F11 stops exactly when triage→billing→triage closes for the second time."""
        reports = _run(LOOPS["F11-handoff-ping-pong"])
        handoffs = [d for d in reports[0].findings if d.code == "HANDOFF_LOOP"]
        assert handoffs and handoffs[0].action.label == "stop"
        assert handoffs[0].evidence[0].count == 2
        assert len(handoffs) == 1  # the 4th handoff is the first (and only) one flagged


class TestModelTurnScenarios:
    def test_f21_idle_turns_warn_at_the_fourth(self) -> None:
        """F21: 4 model turns in a row calling no tool (format errors): warn at the 4th turn."""
        def script(h: LoopGuardHarness) -> None:
            with h.run() as agent:
                agent.turn(finish_reasons=["tool_calls"])
                agent.tool("bash", {"command": "ls"}, "a.py")
                for _ in range(4):
                    agent.turn(finish_reasons=["stop"])

        reports = _run(Scenario(script))
        assert len(reports) == 1
        findings = reports[0].findings
        assert [(d.code, d.action.label, d.evidence[0].count) for d in findings] == [
            ("IDLE_TURNS", "warn", 4)]

    def test_h23_without_the_template_budget_warns_at_50(self) -> None:
        """H23's session without its template table gets the 50-call warn, nothing else."""
        reports = _run(Scenario(_one_run(_h23, prompt="coding-agent")))
        assert [(d.call_index, d.code) for d in reports[0].findings] == [(50, "BUDGET_WARNING")]
