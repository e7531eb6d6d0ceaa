"""Budgets are not loops: budget findings count in their own series and reports, on every path.

A run over budget is reported and acted on like any finding, but it is not a looping run: it
does not count in ``loopguard_loop_detected_total``, in ``loopguard_runs_flagged_total`` (the
share of looping runs) or in ``check``'s flagged runs, on the live processor, ``serve`` and
``check`` alike.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _otlp_files import json_line, scripted_spans
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import CollectorRegistry

from otel_loopguard import LoopGuardConfig
from otel_loopguard.cli import main
from otel_loopguard.metrics import LoopGuardMetrics
from otel_loopguard.processor import LoopGuardSpanProcessor
from otel_loopguard.receiver import StreamingChecker
from otel_loopguard.testing import AgentScript, LoopGuardHarness
from otel_loopguard.types import Action, Decision, Evidence

BUDGETS = {"max_tool_calls_warn": 3, "max_tool_calls_stop": 5}
TEMPLATE = "triage@v1"


def _productive(calls: int) -> Callable[[AgentScript], None]:
    """A run that makes progress on every call: only a budget can flag it."""
    def body(agent: AgentScript) -> None:
        for i in range(calls):
            agent.turn()
            agent.tool("search", {"q": f"topic {i}"}, f"facts {i}")
    return body


def _looping(calls: int) -> Callable[[AgentScript], None]:
    """A run that repeats one call with one result: a loop, and over budget past 5 calls."""
    def body(agent: AgentScript) -> None:
        for _ in range(calls):
            agent.turn()
            agent.tool("search", {"q": "refunds"}, "no results")
    return body


def _samples(registry: CollectorRegistry, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(s.labels.items())): s.value for m in registry.collect()
            for s in m.samples if s.name == name and s.value}


def _live(body: Callable[[AgentScript], None], **labels: Any) -> CollectorRegistry:
    registry = CollectorRegistry()
    config = LoopGuardConfig.create(**BUDGETS)
    harness = LoopGuardHarness(config)
    harness.provider.add_span_processor(LoopGuardSpanProcessor(
        config, registry=registry, clock=harness.clock, raise_internal_errors=True))
    with harness.run(prompt=TEMPLATE) as agent:
        body(agent)
    harness.shutdown()
    return registry


def _served(body: Callable[[AgentScript], None]) -> CollectorRegistry:
    registry = CollectorRegistry()
    harness = LoopGuardHarness()
    with harness.run(prompt=TEMPLATE) as agent:
        body(agent)
    stream = StreamingChecker(LoopGuardConfig.create(**BUDGETS),
                              metrics=LoopGuardMetrics(registry), raise_internal_errors=True)
    stream.add(harness.spans())
    stream.flush()
    harness.shutdown()
    return registry


PATHS = {"live": _live, "serve": _served}


@pytest.mark.parametrize("path", list(PATHS))
class TestSeries:
    def test_run_over_budget_is_not_a_loop(self, path: str) -> None:
        """A productive 7-call run warns at 3 and stops at 6, 7 (past 5): budget series only."""
        registry = PATHS[path](_productive(7))
        assert _samples(registry, "loopguard_loop_detected_total") == {}
        assert _samples(registry, "loopguard_runs_flagged_total") == {}
        base = (("mode", "observe"), ("prompt_template", TEMPLATE))
        assert _samples(registry, "loopguard_budget_exceeded_total") == {
            tuple(sorted((*base, ("action", "warn"), ("budget", "run")))): 1.0,
            tuple(sorted((*base, ("action", "stop"), ("budget", "run")))): 2.0}
        assert _samples(registry, "loopguard_wasted_tool_calls_total") == {}

    def test_looping_run_over_budget_counts_in_both(self, path: str) -> None:
        """A run that loops and exceeds its budget counts its loop and its budget apart."""
        registry = PATHS[path](_looping(7))
        loops = _samples(registry, "loopguard_loop_detected_total")
        assert loops and all(dict(k)["detector"] != "budget" for k in loops)
        flagged = {dict(k)["action"]: v
                   for k, v in _samples(registry, "loopguard_runs_flagged_total").items()}
        assert set(flagged.values()) == {1.0} and "warn" in flagged
        budgets = _samples(registry, "loopguard_budget_exceeded_total")
        assert sum(v for k, v in budgets.items() if dict(k)["action"] == "stop") == 2.0


class TestSplit:
    def test_budget_stop_over_a_loop_warn_counts_the_warn_as_the_loop(self) -> None:
        """A call with a budget stop and a repeat warn: one warn finding, one budget stop."""
        registry = CollectorRegistry()
        metrics = LoopGuardMetrics(registry)
        decision = Decision(Action.STOP, "BUDGET_EXHAUSTED", (
            Evidence("budget", "BUDGET_EXHAUSTED", Action.STOP, "search", 5,
                     {"budget": "tool"}),
            Evidence("repeat", "REPEATED_CALL", Action.WARN, "search", 3)))
        metrics.record_decision(TEMPLATE, decision, "observe", Action.CONTINUE)
        assert registry.get_sample_value("loopguard_loop_detected_total", {
            "prompt_template": TEMPLATE, "detector": "repeat", "action": "warn",
            "mode": "observe"}) == 1
        assert registry.get_sample_value("loopguard_runs_flagged_total", {
            "prompt_template": TEMPLATE, "action": "stop"}) is None
        assert registry.get_sample_value("loopguard_budget_exceeded_total", {
            "prompt_template": TEMPLATE, "budget": "tool", "action": "stop",
            "mode": "observe"}) == 1

    def test_unknown_budget_name_is_bounded(self) -> None:
        """A budget name the detector never writes is counted as ``other``, not as itself."""
        registry = CollectorRegistry()
        LoopGuardMetrics(registry).record_budget(TEMPLATE, "abc123-trace", Action.WARN, "observe")
        assert registry.get_sample_value("loopguard_budget_exceeded_total", {
            "prompt_template": TEMPLATE, "budget": "other", "action": "warn",
            "mode": "observe"}) == 1


def test_otlp_metrics_use_the_same_name() -> None:
    """Through a MeterProvider the budget counter has the Prometheus series' name and labels."""
    reader = InMemoryMetricReader()
    metrics = LoopGuardMetrics(None, meter_provider=MeterProvider(metric_readers=[reader]))
    metrics.record_budget(TEMPLATE, "steps", Action.STOP, "enforce")
    data = reader.get_metrics_data()
    points = {m.name: [dict(p.attributes or {}) for p in m.data.data_points]
              for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert points["loopguard_budget_exceeded_total"] == [
        {"prompt_template": TEMPLATE, "budget": "steps", "action": "stop", "mode": "enforce"}]


@pytest.fixture(name="trace_file")
def _trace_file(tmp_path: Path) -> Path:
    """A trace file with a productive run over budget and a clean run, plus the budget config."""
    spans = scripted_spans(({"prompt": TEMPLATE}, _productive(7)),
                           ({"prompt": "clean@v1"}, _productive(2)))
    (tmp_path / "loopguard.toml").write_text(
        "[loopguard]\nmax_tool_calls_warn = 3\nmax_tool_calls_stop = 5\n", encoding="utf-8")
    path = tmp_path / "trace.jsonl"
    path.write_text(json_line(spans) + "\n", encoding="utf-8")
    return path


def _check(trace_file: Path, *args: str) -> int:
    return main(["check", str(trace_file), "--config",
                 str(trace_file.parent / "loopguard.toml"), *args])


class TestCheck:
    def test_text_reports_the_run_over_budget_apart(self, trace_file: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
        """The run line says budget and no loop; the totals count it over budget, not flagged."""
        assert _check(trace_file) == 1
        out = capsys.readouterr().out
        line = next(x for x in out.splitlines() if TEMPLATE in x)
        assert line.startswith("budget run ")
        assert line.endswith(": 7 tool calls, no loop, over budget (stop)")
        assert "  - stop at call 6 (BUDGET_EXHAUSTED, budget): search - call 6" in out
        assert "stop at call 5" not in out  # a stop budget of 5 lets 5 calls run
        assert "wasted after" not in out
        assert out.rstrip().endswith("2 runs, 9 tool calls; 0 flagged; 1 over budget; "
                                     "1 failing the check")

    @pytest.mark.parametrize(("args", "code"), [
        ((), 1), (("--fail-on-budget", "never"), 0), (("--fail-on", "warn"), 1),
        (("--fail-on", "warn", "--fail-on-budget", "never"), 0),
        (("--fail-on-budget", "warn"), 1)],
        ids=["default", "never", "warn-follows", "warn-never", "budget-warn"])
    def test_exit_code(self, trace_file: Path, args: tuple[str, ...], code: int) -> None:
        """Runs over a stop budget fail at --fail-on's level unless --fail-on-budget says not."""
        assert _check(trace_file, *args) == code

    def test_warn_budget_fails_only_at_warn(self, tmp_path: Path) -> None:
        """A run over its warn budget only passes the default gate and fails --fail-on warn."""
        spans = scripted_spans(({"prompt": TEMPLATE}, _productive(4)))
        (tmp_path / "loopguard.toml").write_text("[loopguard]\nmax_tool_calls_warn = 3\n",
                                                 encoding="utf-8")
        path = tmp_path / "trace.jsonl"
        path.write_text(json_line(spans) + "\n", encoding="utf-8")
        assert _check(path) == 0
        assert _check(path, "--fail-on", "warn") == 1
        assert _check(path, "--fail-on-budget", "warn") == 1

    def test_json(self, trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """JSON: the run's action is continue and its budget stop; the summary counts it."""
        _check(trace_file, "--format", "json")
        doc = json.loads(capsys.readouterr().out)
        run = next(r for r in doc["runs"] if r["prompt_template"] == TEMPLATE)
        assert (run["action"], run["budget"]) == ("continue", "stop")
        assert {f["detector"] for f in run["findings"]} == {"budget"}
        assert doc["summary"]["actions"]["continue"] == 2
        assert doc["summary"]["over_budget"] == {"warn": 0, "stop": 1}

    def test_junit(self, trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """JUnit: the run over budget fails as type budget, or is listed in system-out."""
        _check(trace_file, "--format", "junit")
        assert '<failure message="BUDGET run ' in capsys.readouterr().out
        _check(trace_file, "--format", "junit", "--fail-on-budget", "never")
        out = capsys.readouterr().out
        assert "<failure" not in out and "over budget (stop)" in out

    def test_github(self, trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """GitHub: an error annotation titled BUDGET, a warning with --fail-on-budget never."""
        _check(trace_file, "--format", "github")
        assert re.match(r"::error file=[^,]+,line=1,title=BUDGET run ", capsys.readouterr().out)
        _check(trace_file, "--format", "github", "--fail-on-budget", "never")
        assert re.match(r"::warning file=[^,]+,line=1,title=BUDGET run ",
                        capsys.readouterr().out)

    def test_sarif(self, trace_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """SARIF: budget results are errors at --fail-on-budget, warnings with never."""
        _check(trace_file, "--format", "sarif")
        doc = json.loads(capsys.readouterr().out)
        levels = {(r["ruleId"], r["level"]) for r in doc["runs"][0]["results"]}
        assert levels == {("BUDGET_WARNING", "warning"), ("BUDGET_EXHAUSTED", "error")}
        assert doc["runs"][0]["properties"]["over_budget"] == {"warn": 0, "stop": 1}
        _check(trace_file, "--format", "sarif", "--fail-on-budget", "never")
        doc = json.loads(capsys.readouterr().out)
        assert {r["level"] for r in doc["runs"][0]["results"]} == {"warning"}


def test_help_says_how_budget_findings_count() -> None:
    """The HELP says what the 7-call run above shows: a warn budget once per run, a stop
    budget on every call from the one that reached it (not one per call over a budget)."""
    registry = _live(_productive(7))
    (help_text,) = [f.documentation for f in registry.collect()
                    if f.name == "loopguard_budget_exceeded"]
    assert "not loops" in help_text
    assert "warn budget once per run" in help_text
    assert "stop budget on every call from the one that reached it" in help_text
