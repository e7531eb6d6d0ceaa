"""Budgets per prompt template: the ``templates`` tables, the engine and the budget detector."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from otel_loopguard import ConfigError, LoopEngine, LoopGuardConfig, ToolCall
from otel_loopguard.detectors import BudgetDetector
from otel_loopguard.processor import LoopGuardSpanProcessor
from otel_loopguard.testing import LoopGuardHarness

CODING = {"coding-agent": {"max_tool_calls_warn": 200, "max_tool_calls_stop": 400}}

TOML = """
[loopguard]
max_tool_calls_warn = 50

[loopguard.templates."coding-agent"]
max_tool_calls_warn = 200
max_tool_calls_stop = 400

[loopguard.templates."triage@v3"]
max_run_seconds_warn = 30.0
"""


def _session(count: int) -> list[ToolCall]:
    """A productive coding session: edits, views and test reruns, each with its own outcome."""
    calls = []
    for i in range(count):
        step = i % 3
        if step == 0:
            call = ToolCall("str_replace_based_edit_tool", {
                "command": "str_replace", "path": f"src/m{i}.py", "old_str": "a", "new_str": "b"},
                "The file has been edited.", True)
        elif step == 1:
            call = ToolCall("str_replace_based_edit_tool", {"command": "view",
                                                            "path": f"src/m{i - 1}.py"},
                            f"1\tb = {i}", True)
        else:
            call = ToolCall("bash", {"command": "pytest -q"}, f"{i} passed", True)
        calls.append(call)
    return calls


def _budget_actions(config: LoopGuardConfig, calls: list[ToolCall],
                    template: str | None = None, known_at: int = 0) -> dict[int, str]:
    engine = LoopEngine(config)
    run = engine.new_run()
    found: dict[int, str] = {}
    for index, call in enumerate(calls, 1):
        if template is not None and index == known_at + 1:
            engine.set_template(run, template)
        decision = engine.process(run, call)
        if any(e.detector == "budget" for e in decision.evidence):
            found[index] = decision.action.label
        assert all(e.detector == "budget" for e in decision.evidence), decision
    return found


class TestEngine:
    def test_h23_raised_budget_keeps_a_150_call_session_quiet(self) -> None:
        """150 productive calls of a template whose warn budget is 200: no finding at all."""
        config = LoopGuardConfig.create(templates=CODING)
        assert _budget_actions(config, _session(150), "coding-agent") == {}

    def test_h23_without_the_template_budget_warns_at_50(self) -> None:
        """The same session without a template table warns once, at the 50th call."""
        assert _budget_actions(LoopGuardConfig(), _session(150), "coding-agent") == {50: "warn"}

    def test_versioned_template_uses_the_name_table(self) -> None:
        """A run of coding-agent@7 gets the coding-agent table."""
        config = LoopGuardConfig.create(templates=CODING)
        assert _budget_actions(config, _session(150), "coding-agent@7") == {}

    def test_exact_identity_wins_over_the_name(self) -> None:
        """A table for name@version wins over the table for the name."""
        config = LoopGuardConfig.create(templates={
            **CODING, "coding-agent@7": {"max_tool_calls_warn": 10}})
        assert _budget_actions(config, _session(60), "coding-agent@7") == {10: "warn"}
        assert config.template_table("coding-agent@8") == "coding-agent"
        assert config.template_table("other@1") is None

    def test_unknown_template_keeps_the_global_budgets(self) -> None:
        """A template without a table, or no template, runs on the global budgets."""
        config = LoopGuardConfig.create(templates=CODING)
        assert _budget_actions(config, _session(60), "support") == {50: "warn"}
        assert _budget_actions(config, _session(60)) == {50: "warn"}

    def test_template_learned_late_applies_from_that_call(self) -> None:
        """The template becomes known after 30 calls: its budget governs the rest of the run."""
        config = LoopGuardConfig.create(templates=CODING)
        assert _budget_actions(config, _session(150), "coding-agent", known_at=30) == {}

    def test_template_learned_after_the_global_warn_warns_again_at_its_own(self) -> None:
        """Warned at 50 before the template was known, the run warns again at the template's 100."""
        config = LoopGuardConfig.create(templates={"coding-agent": {"max_tool_calls_warn": 100}})
        actions = _budget_actions(config, _session(120), "coding-agent", known_at=60)
        assert actions == {50: "warn", 100: "warn"}

    def test_template_learned_past_its_lower_warn_warns_on_the_next_call(self) -> None:
        """A template warn of 20 learned at call 30 warns at call 31, once."""
        config = LoopGuardConfig.create(templates={"quick": {"max_tool_calls_warn": 20}})
        assert _budget_actions(config, _session(60), "quick", known_at=30) == {31: "warn"}

    def test_template_stop_budget(self) -> None:
        """A template's stop budget lets its calls run and stops every call past it."""
        config = LoopGuardConfig.create(templates={"quick": {"max_tool_calls_warn": 5,
                                                             "max_tool_calls_stop": 8}})
        assert _budget_actions(config, _session(10), "quick") == {
            5: "warn", 9: "stop", 10: "stop"}

    def test_other_budgets_per_template(self) -> None:
        """Steps and per-tool budgets can be set per template too."""
        config = LoopGuardConfig.create(templates={"t": {
            "max_steps_warn": 7, "max_calls_per_tool_stop": 6}})
        actions = _budget_actions(config, _session(20), "t")
        # the editor makes calls 1, 2, 4, 5, 7, 8, 10...: its 7th call (10) and every later
        # one stop; bash makes calls 3, 6, ... 18: six, none past the budget
        assert actions == {7: "warn"} | {i: "stop" for i in range(10, 21) if i % 3}

    def test_a_tools_own_budget_wins_over_the_template(self) -> None:
        """A per-tool table's budget beats the template's for that tool."""
        config = LoopGuardConfig.create(
            templates={"t": {"max_calls_per_tool_stop": 3}},
            tools={"bash": {"max_calls_per_tool_stop": 50}})
        actions = _budget_actions(config, _session(12), "t")
        assert actions == {5: "stop", 7: "stop", 8: "stop", 10: "stop", 11: "stop"}

    def test_seconds_budget_per_template(self) -> None:
        """A template's wall-clock warn fires once, on the first call at or past it."""
        config = LoopGuardConfig.create(templates={"t": {"max_run_seconds_warn": 2.0}})
        calls = [ToolCall("search", {"q": i}, f"r{i}", True, start_time_ns=i * 10**9,
                          end_time_ns=i * 10**9 + 1) for i in range(5)]
        assert _budget_actions(config, calls, "t") == {3: "warn"}

    def test_precheck_and_summary_use_the_template(self) -> None:
        """The enforce-mode precheck and summary() count against the template's budget."""
        engine = LoopEngine(LoopGuardConfig.create(
            mode="enforce",
            templates={"t": {"max_tool_calls_warn": 2, "max_tool_calls_stop": 3}}))
        run = engine.new_run()
        engine.set_template(run, "t")
        for call in _session(2):
            engine.process(run, call)
        assert engine.precheck(run, "search", {"q": "new"}).code == "OK"  # the 3rd may run
        assert engine.summary(run)["budget_remaining"] == 1
        engine.process(run, _session(3)[2])
        assert engine.precheck(run, "search", {"q": "new"}).code == "BUDGET_EXHAUSTED"
        assert engine.summary(run)["budget_remaining"] == 0
        assert engine.summary(run)["max_tool_calls"] == 3
        assert engine.summary(engine.new_run())["max_tool_calls"] == 50

    def test_reset_keeps_the_template(self) -> None:
        """reset() forgets the calls, not what the run is: the template's budget still holds."""
        engine = LoopEngine(LoopGuardConfig.create(templates={"t": {"max_tool_calls_warn": 3}}))
        run = engine.new_run()
        engine.set_template(run, "t")
        engine.reset(run)
        assert run.template == "t"
        decisions = [engine.process(run, call) for call in _session(3)]
        assert decisions[2].code == "BUDGET_WARNING"

    def test_template_names_create_no_state(self) -> None:
        """Thousands of distinct template names leave the detector's tables as configured."""
        engine = LoopEngine(LoopGuardConfig.create(templates=CODING))
        budget = next(d for d in engine.detectors if isinstance(d, BudgetDetector))
        for i in range(5000):
            engine.set_template(engine.new_run(), f"tpl-{i:08x}")
        assert list(budget._templates) == ["coding-agent"]


class TestConfig:
    def test_toml_tables(self, tmp_path: Path) -> None:
        """[loopguard.templates."name"] tables load as the template's budgets."""
        path = tmp_path / "c.toml"
        path.write_text(TOML, encoding="utf-8")
        config = LoopGuardConfig.from_file(path)
        assert dict(config.templates["coding-agent"]) == CODING["coding-agent"]
        assert config.budget("coding-agent@2", "max_tool_calls_warn") == 200
        assert config.budget("triage@v3", "max_run_seconds_warn") == 30.0
        assert config.budget("triage@v4", "max_run_seconds_warn") is None
        assert config.budget(None, "max_tool_calls_warn") == 50

    def test_code_and_toml_agree(self, tmp_path: Path) -> None:
        """create(templates=...) builds the same config as the TOML file."""
        path = tmp_path / "c.toml"
        path.write_text(TOML, encoding="utf-8")
        assert LoopGuardConfig.from_file(path) == LoopGuardConfig.create(
            max_tool_calls_warn=50,
            templates={**CODING, "triage@v3": {"max_run_seconds_warn": 30.0}})

    def test_load_merges_file_and_argument_tables(self, tmp_path: Path) -> None:
        """load(): a templates= argument replaces that template's table from the file."""
        path = tmp_path / "c.toml"
        path.write_text(TOML, encoding="utf-8")
        config = LoopGuardConfig.load(path, environ={}, templates={
            "coding-agent": {"max_tool_calls_warn": 300}})
        assert dict(config.templates["coding-agent"]) == {"max_tool_calls_warn": 300}
        assert "triage@v3" in config.templates

    def test_replace_keeps_the_tables(self) -> None:
        """replace() keeps the templates unless given new ones."""
        config = LoopGuardConfig.create(templates=CODING)
        assert config.replace(stagnation_warn=4).templates == config.templates
        assert config.replace(templates={}).templates == {}

    def test_tables_are_read_only(self) -> None:
        """The templates mapping and each table are read-only."""
        config = LoopGuardConfig.create(templates=CODING)
        with pytest.raises(TypeError):
            config.templates["x"] = {}  # type: ignore[index]
        with pytest.raises(TypeError):
            config.templates["coding-agent"]["max_tool_calls_warn"] = 1  # type: ignore[index]

    @pytest.mark.parametrize(("templates", "message"), [
        ({"t": {"stagnation_warn": 4}},
         "templates.t: unknown setting 'stagnation_warn'; per-template settings are "
         "max_calls_per_tool_stop, max_calls_per_tool_warn, max_run_seconds_stop, "
         "max_run_seconds_warn, max_steps_stop, max_steps_warn, max_tool_calls_stop, "
         "max_tool_calls_warn"),
        ({"t": {"max_tool_calls_warn": 0}},
         "templates.t.max_tool_calls_warn must be an integer >= 1 (or \"off\"), "
         "got 0"),
        ({"t": {"max_run_seconds_warn": "soon"}},
         "templates.t.max_run_seconds_warn must be a number >= 0 and <= 31536000 (or \"off\"), "
         "got 'soon'"),
        ({"t": {"max_tool_calls_warn": 200, "max_tool_calls_stop": 100}},
         "templates.t.max_tool_calls_stop must be >= max_tool_calls_warn (200), got 100"),
        ({"t": {"max_tool_calls_stop": 30}},
         "templates.t.max_tool_calls_stop must be >= max_tool_calls_warn (50), got 30 (the "
         "global max_tool_calls_warn; set it for this template too)"),
        ({"t": {"max_steps_warn": 10, "max_steps_stop": 5}},
         "templates.t.max_steps_stop must be >= max_steps_warn (10), got 5"),
        ({"t": 150}, "templates.t must be a table of budgets, got int"),
        ({"": {"max_tool_calls_warn": 1}},
         "templates: a prompt template name must not be empty"),
    ], ids=["unknown-key", "out-of-range", "wrong-type", "ladder", "ladder-with-global",
            "steps-ladder", "not-a-table", "empty-name"])
    def test_validation(self, templates: dict[str, Any], message: str) -> None:
        """Bad tables fail with one line naming the table and the key."""
        with pytest.raises(ConfigError) as caught:
            LoopGuardConfig.create(templates=templates)
        assert str(caught.value) == message

    def test_templates_must_be_a_table_in_the_file(self, tmp_path: Path) -> None:
        """templates = 3 in the file is rejected, naming the file."""
        path = tmp_path / "c.toml"
        path.write_text("[loopguard]\ntemplates = 3\n", encoding="utf-8")
        with pytest.raises(ConfigError, match=r"c\.toml: templates must be a table of prompt "
                                              r"template name -> budgets"):
            LoopGuardConfig.from_file(path)

    def test_a_template_may_lower_warn_with_its_stop(self) -> None:
        """A template setting both rungs of a ladder is checked with its own values only."""
        config = LoopGuardConfig.create(templates={"t": {"max_tool_calls_warn": 10,
                                                         "max_tool_calls_stop": 20}})
        assert config.budget("t", "max_tool_calls_stop") == 20


class TestThroughSpans:
    @staticmethod
    def _live_budget_codes(**config: Any) -> list[tuple[int, str]]:
        """Run a 60-call coding session through the processor on a real provider."""
        harness = LoopGuardHarness(LoopGuardConfig.create(**config))
        exporter = InMemorySpanExporter()
        harness.provider.add_span_processor(LoopGuardSpanProcessor(
            harness.config, downstream=SimpleSpanProcessor(exporter),
            registry=CollectorRegistry(), clock=harness.clock, raise_internal_errors=True))
        with harness.run() as agent:  # the template is named on the chat spans only
            for i in range(60):
                agent.turn(finish_reasons=["tool_calls"],
                           attributes={"gen_ai.prompt.name": "coding-agent"})
                agent.tool("bash", {"command": f"pytest -k t{i}"}, f"{i} passed")
        harness.shutdown()
        return [(int(a["loopguard.call_index"]), str(a["loopguard.code"]))
                for a in (s.attributes or {} for s in exporter.get_finished_spans())
                if "loopguard.code" in a]

    def test_live_template_from_chat_spans_raises_the_budget(self) -> None:
        """Live: 60 calls of a coding-agent run with a raised template budget: no finding."""
        assert self._live_budget_codes(templates=CODING) == []

    def test_live_without_the_table_warns_at_50(self) -> None:
        """Live: the same run without a template table warns at the 50th tool call."""
        assert self._live_budget_codes() == [(50, "BUDGET_WARNING")]

    def test_check_uses_the_template_table(self) -> None:
        """check: a run named by its template gets that template's budget."""
        for templates, expected in ((CODING, []), ({}, [(50, "BUDGET_WARNING")])):
            harness = LoopGuardHarness(LoopGuardConfig.create(templates=templates))
            with harness.run(prompt="coding-agent") as agent:
                for i in range(60):
                    agent.turn(finish_reasons=["tool_calls"])
                    agent.tool("bash", {"command": f"pytest -k t{i}"}, f"{i} passed")
            findings = harness.check()[0].findings
            assert [(d.call_index, d.code) for d in findings] == expected
            harness.shutdown()
