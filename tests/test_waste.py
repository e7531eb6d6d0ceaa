"""Waste: the tool calls a run makes continuing its loop after its first finding, and their cost.

The definition is in docs/metrics.md ("Waste"). The engine computes it; ``check``, the live
processor and ``serve`` report it from the same code, so the same spans give the same totals.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _otlp_files import json_line
from _replay import replay_live
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from prometheus_client import CollectorRegistry

from otel_loopguard.adapters import usage_of
from otel_loopguard.cli import main
from otel_loopguard.config import LoopGuardConfig, ModelPrice
from otel_loopguard.engine import LoopEngine, RunState
from otel_loopguard.exceptions import ConfigError
from otel_loopguard.metrics import LoopGuardMetrics
from otel_loopguard.processor import LoopGuardSpanProcessor
from otel_loopguard.receiver import LoopGuardReceiver, ReceiverOptions
from otel_loopguard.replay.checker import Checker
from otel_loopguard.replay.tracefile import iter_spans
from otel_loopguard.testing import AgentScript, LoopGuardHarness
from otel_loopguard.types import Action, ModelTurn, SpanRecord, ToolCall
from otel_loopguard.waste import Waste

PRICES = {"gpt-4o": {"input_per_million": 2.5, "output_per_million": 10.0},
          "claude-sonnet-4": {"input_per_million": 3.0, "output_per_million": 15.0,
                              "currency": "EUR"}}
USAGE = {"gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 50,
         "gen_ai.request.model": "gpt-4o", "gen_ai.response.model": "gpt-4o-2024-08-06"}


class Run:
    """One run fed to the engine call by call, each call issued by its own model turn."""

    def __init__(self, engine: LoopEngine | None = None) -> None:
        self.engine = engine or LoopEngine(LoopGuardConfig.create(prices=PRICES))
        self.state: RunState = self.engine.new_run()
        self.turns = 0
        self.now = 1_000_000_000
        self.actions: list[str] = []

    def turn(self, tokens_in: int = 1000, tokens_out: int = 50,
             models: tuple[str, ...] = ("gpt-4o",)) -> int:
        self.turns += 1
        self.engine.process_model_turn(self.state, ModelTurn(
            f"m{self.turns}", self.now, self.now + 1, index=self.turns,
            input_tokens=tokens_in, output_tokens=tokens_out, models=models))
        self.now += 10
        return self.turns

    def call(self, tool: str, args: Any, result: Any = "no results", *, turn: int | None = None,
             error: bool = False, seconds: float = 0.5) -> Action:
        start = self.now
        self.now += int(seconds * 1e9)
        decision = self.engine.process(self.state, ToolCall(
            tool, args, result, result is not None, error, "401 unauthorized" if error else "",
            start_time_ns=start, end_time_ns=self.now, turn=self.turns if turn is None else turn))
        self.now += 10
        self.actions.append(decision.action.label)
        return decision.action

    def step(self, tool: str, args: Any, result: Any = "no results", **kw: Any) -> Action:
        """A model turn that asks for one call, then the call."""
        self.turn()
        return self.call(tool, args, result, **kw)

    def repeat(self, times: int, tool: str = "search", args: Any = None,
               result: Any = "no results", **kw: Any) -> None:
        """``times`` steps of the same call (``search(q=x)`` unless told)."""
        for _ in range(times):
            self.step(tool, {"q": "x"} if args is None else args, result, **kw)

    @property
    def waste(self) -> Waste:
        return self.state.waste.total()


class TestDefinition:
    def test_the_example(self) -> None:
        """Six identical calls with identical results, each issued by a model turn of 1,000
        input and 50 output tokens, first finding at call 3: calls 4 to 6 are wasted."""
        run = Run()
        for _ in range(6):
            run.step("search", {"q": "pricing"})
        assert run.actions[:3] == ["continue", "continue", "warn"]
        assert run.waste == Waste(3, 3, 3000, 150, pytest.approx(1.5),
                                  {"USD": pytest.approx(3 * (2500 + 500) / 1e6)})
        assert run.engine.summary(run.state)["waste"] == {
            "tool_calls": 3, "model_turns": 3, "input_tokens": 3000, "output_tokens": 150,
            "tool_seconds": 1.5, "cost": {"USD": 0.009}}

    def test_breaking_out_stops_the_count(self) -> None:
        """A new call ends the loop: it and the productive calls after it are not wasted."""
        run = Run()
        run.repeat(4)
        run.step("search", {"q": "y"}, "3 results")
        run.step("summarize", {"text": "3 results"}, "summary")
        run.step("search", {"q": "y"}, "3 results")  # a repeat, but the loop had ended
        assert run.actions[2:4] == ["warn", "replan"]
        assert run.waste.tool_calls == 1  # call 4
        assert run.waste.model_turns == 1

    def test_back_into_the_loop_counts_again(self) -> None:
        """After breaking out, a call a detector flags again is wasted."""
        run = Run()
        run.repeat(3)
        run.step("search", {"q": "y"}, "3 results")
        run.step("search", {"q": "x"})  # the 4th identical result in the window: replan
        assert run.actions == ["continue", "continue", "warn", "continue", "replan"]
        assert run.waste.tool_calls == 1

    def test_a_changed_result_is_progress(self) -> None:
        """The same call with a new result is something new (polling, pagination)."""
        run = Run()
        run.repeat(3)
        run.step("search", {"q": "x"}, "1 result")
        assert run.waste.tool_calls == 0

    @pytest.mark.parametrize("detectors", [None, ["cycle"]], ids=["default", "cycle-only"])
    def test_a_cycle_counts_its_repeats(self, detectors: list[str] | None) -> None:
        """A B A B warns at call 4; A at call 5 repeats the cycle and B at call 6 stops: both
        are wasted. With the cycle detector alone, nothing flags A at call 5 by itself: it is
        wasted as a repeat of the loop's calls."""
        config = LoopGuardConfig.create(**({"detectors": detectors} if detectors else {}))
        run = Run(LoopEngine(config))
        for _ in range(3):
            run.step("search", {"q": "claim"}, "none")
            run.step("summarize", {"text": "none"}, "none")
        fifth = "continue" if detectors else "warn"  # by default: stagnation, A's 3rd result
        assert run.actions == ["continue", "continue", "continue", "warn", fifth, "stop"]
        assert run.waste.tool_calls == 2
        assert run.waste.model_turns == 2

    def test_a_parallel_batch_counts_each_call_and_each_turn_once(self) -> None:
        """The batch [a, b] in five turns: the first finding is a's third result (call 5);
        calls 6 to 10 are wasted, issued by turns 3, 4 and 5."""
        run = Run()
        for _ in range(5):
            run.turn(2000, 100)
            run.call("read", {"path": "a"}, "A")
            run.call("read", {"path": "b"}, "B")
        assert run.actions.index("warn") == 4
        assert run.waste.tool_calls == 5
        assert run.waste.model_turns == 3
        assert (run.waste.input_tokens, run.waste.output_tokens) == (6000, 300)

    def test_a_failure_loop(self) -> None:
        """A permanent error stops at the second identical call; calls 3 and 4 are wasted."""
        run = Run()
        for _ in range(4):
            run.step("fetch", {"id": 1}, None, error=True)
        assert run.actions[:2] == ["continue", "stop"]
        assert run.waste.tool_calls == 2

    def test_budget_findings_start_no_waste(self) -> None:
        """A budget says the run is long, not that it repeats: varied calls past it waste
        nothing."""
        run = Run(LoopEngine(LoopGuardConfig.create(max_tool_calls_warn=3)))
        for i in range(6):
            run.step("search", {"q": i}, f"result {i}")
        assert "warn" in run.actions
        assert run.waste == Waste()

    def test_exempt_calls_are_neither_wasted_nor_end_the_loop(self) -> None:
        run = Run(LoopEngine(LoopGuardConfig.create(tools={"log": {"kind": "exempt"}})))
        run.repeat(3)
        run.step("log", {"line": "still nothing"}, "ok")
        run.call("search", {"q": "x"})  # issued by the log call's turn
        assert run.waste.tool_calls == 1
        assert run.waste.model_turns == 1

    def test_a_turn_that_arrives_after_its_calls_counts_once(self) -> None:
        """When the wasted calls of a turn are decided before the turn arrives, the turn is
        counted at once and its tokens when it arrives; either order gives the same total."""
        first, later = Run(), Run()
        for run in (first, later):
            for _ in range(3):
                run.step("search", {"q": "x"})
        first.turn(4000, 200)
        first.call("search", {"q": "x"})
        first.call("search", {"q": "x"})
        later.call("search", {"q": "x"}, turn=4)
        later.call("search", {"q": "x"}, turn=4)
        assert later.waste.model_turns == 1 and later.waste.input_tokens == 0
        later.turn(4000, 200)
        assert first.waste == later.waste
        assert later.waste.tool_calls == 2
        assert (later.waste.model_turns, later.waste.input_tokens) == (1, 4000)

    def test_calls_without_model_turns(self) -> None:
        """Without model spans there are no turns and no tokens; the calls still count."""
        run = Run()
        for _ in range(5):
            run.call("search", {"q": "x"}, turn=None)
        assert run.waste == Waste(2, 0, 0, 0, pytest.approx(1.0))

    def test_enforce_stop_is_sticky_but_a_new_call_is_not_waste(self) -> None:
        """In enforce mode every call after a stop is decided stop; a new one still ends the
        loop (its own evidence is what counts)."""
        run = Run(LoopEngine(LoopGuardConfig.create(mode="enforce")))
        for _ in range(2):
            run.step("fetch", {"id": 1}, None, error=True)
        run.step("search", {"q": "docs"}, "found")
        assert run.actions == ["continue", "stop", "stop"]
        assert run.waste.tool_calls == 0

    def test_prices_by_response_then_request_model(self) -> None:
        run = Run()
        for models in (("claude-sonnet-4-20250514", "claude-sonnet-4"),) * 3 + (
                ("gpt-4o", "claude-sonnet-4"), ("unpriced-model",)):
            run.turn(1_000_000, 100_000, models)
            run.call("search", {"q": "x"})
        assert run.waste.model_turns == 2
        assert run.waste.cost == {"USD": pytest.approx(3.5)}  # gpt-4o wins; unpriced: tokens only
        run.turn(1_000_000, 0, ("claude-sonnet-4",))
        run.call("search", {"q": "x"})
        assert run.waste.cost == {"USD": pytest.approx(3.5), "EUR": pytest.approx(3.0)}
        assert run.waste.input_tokens == 3_000_000

    def test_take_gives_what_accrued_since_the_last_take(self) -> None:
        run = Run()
        taken: list[Waste] = []
        for _ in range(6):
            run.step("search", {"q": "x"})
            got = run.state.waste.take()
            if got is not None:
                taken.append(got)
        assert len(taken) == 3
        assert sum(taken, Waste()) == run.waste
        assert run.state.waste.take() is None

    def test_reset_forgets_the_waste(self) -> None:
        run = Run()
        run.repeat(5)
        run.engine.reset(run.state)
        assert run.waste == Waste()
        run.step("search", {"q": "x"})
        assert run.waste == Waste()


class TestUsageAndPrices:
    @pytest.mark.parametrize(("attributes", "expected"), [
        (USAGE, (1000, 50, ("gpt-4o-2024-08-06", "gpt-4o"))),
        ({"gen_ai.usage.prompt_tokens": "12", "gen_ai.usage.completion_tokens": 3,
          "gen_ai.request.model": "gpt-4o"}, (12, 3, ("gpt-4o",))),
        ({"llm.token_count.prompt": 7, "llm.token_count.completion": 2.0,
          "llm.model_name": "claude-sonnet-4"}, (7, 2, ("claude-sonnet-4",))),
        ({"gen_ai.usage.input_tokens": -5, "gen_ai.usage.output_tokens": True}, (0, 0, ())),
        ({"gen_ai.usage.input_tokens": "many"}, (0, 0, ())),
        ({"gen_ai.usage.input_tokens": "\u00b2", "gen_ai.usage.output_tokens": "7"},
         (0, 7, ())),
        ({}, (0, 0, ())),
    ], ids=["genai", "openllmetry", "openinference", "negative-and-bool", "text", "superscript",
            "none"])
    def test_usage_of(self, attributes: dict[str, Any], expected: tuple[Any, ...]) -> None:
        assert usage_of(attributes) == expected

    def test_prices_from_a_file(self, tmp_path: Path) -> None:
        path = tmp_path / "loopguard.toml"
        path.write_text('[loopguard.prices."gpt-4o"]\ninput_per_million = 2.5\n'
                        'output_per_million = 10\n[loopguard.prices.local]\ncurrency = "EUR"\n')
        config = LoopGuardConfig.load(path)
        assert config.prices == {"gpt-4o": ModelPrice(input_per_million=2.5,
                                                      output_per_million=10.0),
                                 "local": ModelPrice(currency="EUR")}
        assert config.replace(stagnation_warn=4).prices == config.prices
        assert config.price(("gpt-4o-2024-08-06", "gpt-4o")) is config.prices["gpt-4o"]

    @pytest.mark.parametrize(("prices", "message"), [
        ({"gpt-4o": {"input_per_million": -1}},
         "prices.gpt-4o.input_per_million must be a number >= 0, got -1"),
        ({"gpt-4o": {"output_per_million": float("nan")}},
         "prices.gpt-4o.output_per_million must be a number >= 0, got nan"),
        ({"gpt-4o": {"input_per_million": True}},
         "prices.gpt-4o.input_per_million must be a number >= 0, got True"),
        ({"gpt-4o": {"input_per_mil": 2}}, "prices.gpt-4o: unknown setting 'input_per_mil' "
         "(did you mean 'input_per_million'?); a price table takes input_per_million, "
         "output_per_million, currency"),
        ({"gpt-4o": {"currency": "US Dollar"}}, "prices.gpt-4o.currency must be a currency "
         "code of letters, digits and _ (e.g. USD), at most 16 characters, got 'US Dollar'"),
        ({"gpt-4o": 3}, "prices.gpt-4o must be a table of input_per_million, "
         "output_per_million and currency, got int"),
        ({"": {}}, "prices: a model name must not be empty"),
    ])
    def test_bad_prices_are_named(self, prices: dict[str, Any], message: str) -> None:
        with pytest.raises(ConfigError) as caught:
            LoopGuardConfig.create(prices=prices)
        assert str(caught.value) == message

    def test_prices_must_be_a_table_in_the_file(self, tmp_path: Path) -> None:
        path = tmp_path / "loopguard.toml"
        path.write_text("[loopguard]\nprices = 3\n")
        with pytest.raises(ConfigError, match="prices must be a table of model name -> prices"):
            LoopGuardConfig.from_file(path)


# --- end to end: check on a trace file, the live processor, serve ----------------------------

Body = Callable[[AgentScript], None]


def _step(agent: AgentScript, tool: str, args: Any, result: Any = "no results") -> None:
    agent.turn(attributes=USAGE)
    agent.tool(tool, args, result, seconds=0.25)


def _example(agent: AgentScript) -> None:
    for _ in range(6):
        _step(agent, "search", {"q": "pricing"})


def _cycle(agent: AgentScript) -> None:
    for _ in range(3):
        _step(agent, "search", {"q": "claim"}, "none")
        _step(agent, "summarize", {"text": "none"}, "none")


def _batch(agent: AgentScript) -> None:
    for _ in range(5):
        agent.turn(attributes={**USAGE, "gen_ai.usage.input_tokens": 2000})
        agent.batch([("read", {"path": "a"}, "A"), ("read", {"path": "b"}, "B")], seconds=0.25)


def _breaks_out(agent: AgentScript) -> None:
    for _ in range(4):
        _step(agent, "search", {"q": "x"})
    _step(agent, "search", {"q": "y"}, "3 results")
    _step(agent, "summarize", {"text": "3 results"}, "summary")


def _failure(agent: AgentScript) -> None:
    for _ in range(4):
        agent.turn(attributes=USAGE)
        agent.tool("crm_lookup", {"id": 42}, {"error": {"code": 401, "message": "unauthorized"}},
                   seconds=0.25)


def _healthy(agent: AgentScript) -> None:
    for city in ("paris", "london", "tokyo"):
        _step(agent, "search", {"q": city}, f"weather in {city}")


RUNS: dict[str, Body] = {"example@v1": _example, "cycle@v1": _cycle, "batch@v1": _batch,
                         "breaks-out@v1": _breaks_out, "failure@v1": _failure,
                         "healthy@v1": _healthy}
EXPECTED: dict[str, tuple[int, int, int, int]] = {
    # wasted tool calls, model turns, input tokens, output tokens
    "example@v1": (3, 3, 3000, 150),
    "cycle@v1": (2, 2, 2000, 100),
    "batch@v1": (5, 3, 6000, 150),
    "breaks-out@v1": (1, 1, 1000, 50),
    "failure@v1": (2, 2, 2000, 100),
    "healthy@v1": (0, 0, 0, 0),
}
CONFIG = LoopGuardConfig.create(prices=PRICES)
CORPUS = Path(__file__).parent / "corpus" / "runs.jsonl.gz"


def _script(harness: LoopGuardHarness) -> None:
    for template, body in RUNS.items():
        with harness.run(prompt=template) as agent:
            body(agent)


@pytest.fixture(name="live", scope="module")
def _live() -> tuple[LoopGuardHarness, CollectorRegistry]:
    """The runs scripted on a real TracerProvider watched by the live processor."""
    harness = LoopGuardHarness(CONFIG)
    harness.clock.now_ns = time.time_ns()  # the processor forgets open spans older than its TTL
    registry = CollectorRegistry()
    harness.provider.add_span_processor(LoopGuardSpanProcessor(
        CONFIG, metrics=LoopGuardMetrics(registry)))
    _script(harness)
    harness.provider.force_flush()
    return harness, registry


@pytest.fixture(name="trace_file", scope="module")
def _trace_file(live: tuple[LoopGuardHarness, CollectorRegistry],
                tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same spans as the Collector's file exporter writes them."""
    path = tmp_path_factory.mktemp("waste") / "traces.jsonl"
    path.write_text(json_line(live[0].exporter.get_finished_spans()) + "\n", encoding="utf-8")
    return path


def _config_file(tmp_path: Path) -> Path:
    path = tmp_path / "loopguard.toml"
    path.write_text('[loopguard.prices."gpt-4o"]\ninput_per_million = 2.5\n'
                    'output_per_million = 10.0\n', encoding="utf-8")
    return path


def _check_json(trace_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                ) -> dict[str, Any]:
    code = main(["check", "--format", "json", "--config", str(_config_file(tmp_path)),
                 str(trace_file)])
    assert code == 1
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def _metric_totals(registry: CollectorRegistry) -> dict[str, dict[str, float]]:
    """Template → the waste counters' values (cost in USD), summed over serve's services."""
    out: dict[str, dict[str, float]] = {t: {} for t in RUNS}
    for family in registry.collect():
        for sample in family.samples:
            if not sample.name.startswith("loopguard_wasted_") or \
                    not sample.name.endswith("_total"):
                continue
            key = sample.name + "".join(f":{v}" for k, v in sorted(sample.labels.items())
                                        if k not in ("prompt_template", "service_name"))
            totals = out.setdefault(sample.labels["prompt_template"], {})
            totals[key] = totals.get(key, 0.0) + sample.value
    return out


def _waste_as_metrics(waste: dict[str, Any] | Waste) -> dict[str, float]:
    """A run's waste (JSON or not) as the counters would hold it (zero counters never exist)."""
    if isinstance(waste, Waste):
        waste = {"tool_calls": waste.tool_calls, "input_tokens": waste.input_tokens,
                 "output_tokens": waste.output_tokens, "tool_seconds": waste.tool_seconds,
                 "cost": waste.cost}
    values = {"loopguard_wasted_tool_calls_total": waste["tool_calls"],
              "loopguard_wasted_tokens_total:input": waste["input_tokens"],
              "loopguard_wasted_tokens_total:output": waste["output_tokens"],
              "loopguard_wasted_tool_seconds_total": waste["tool_seconds"],
              **{f"loopguard_wasted_cost_total:{c}": a for c, a in waste["cost"].items()}}
    return {k: v for k, v in values.items() if v}


def _approx(totals: dict[str, dict[str, float]]) -> Any:
    return {t: {k: pytest.approx(v, rel=1e-6) for k, v in m.items()} for t, m in totals.items()}


def _by_template(totals: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    return {t: m for t, m in totals.items() if m}


def _serve_totals(spans: Any, config: LoopGuardConfig) -> dict[str, dict[str, float]]:
    """Export ``spans`` over OTLP/HTTP to serve on 127.0.0.1 and return its waste counters."""
    registry = CollectorRegistry()
    receiver = LoopGuardReceiver(config, options=ReceiverOptions(
        http_port=0, grpc_port=0, reorder_window_seconds=0.05), registry=registry,
        raise_internal_errors=True)
    with receiver:
        processor = BatchSpanProcessor(OTLPSpanExporter(
            endpoint=f"{receiver.http_url}/v1/traces"), max_export_batch_size=512,
            max_queue_size=max(2048, len(spans)))  # fed in a tight loop: room for them all
        for span in spans:
            processor.on_end(span)
        processor.shutdown()
        assert receiver.flush(10)
    return _metric_totals(registry)


def _with_usage(record: SpanRecord, index: int) -> SpanRecord:
    """Give a model span token counts that vary from span to span, and a priced model."""
    if record.attributes.get("gen_ai.operation.name") != "chat":
        return record
    return dataclasses.replace(record, attributes={
        **record.attributes, "gen_ai.usage.input_tokens": 1000 + index,
        "gen_ai.usage.output_tokens": 10 + index % 90, "gen_ai.request.model": "gpt-4o"})


class TestEndToEnd:
    def test_check_reports_the_waste_the_definition_gives(
            self, trace_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Several detectors, a parallel batch and a run that breaks out of its loop, in one
        OTLP file: each run's waste, and the summary's."""
        doc = _check_json(trace_file, tmp_path, capsys)
        runs = {r["prompt_template"]: r for r in doc["runs"]}
        got = {t: (r["waste"]["tool_calls"], r["waste"]["model_turns"],
                   r["waste"]["input_tokens"], r["waste"]["output_tokens"])
               for t, r in runs.items()}
        assert got == EXPECTED
        example = runs["example@v1"]["waste"]
        assert example["tool_seconds"] == pytest.approx(0.75)
        assert example["cost"] == {"USD": pytest.approx(3 * (1000 * 2.5 + 50 * 10) / 1e6)}
        summary = doc["summary"]["waste"]
        assert summary["tool_calls"] == sum(e[0] for e in EXPECTED.values())
        assert summary["input_tokens"] == sum(e[2] for e in EXPECTED.values())

    def test_check_text_shows_the_waste(self, trace_file: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
        main(["check", "--config", str(_config_file(tmp_path)), str(trace_file)])
        out = capsys.readouterr().out
        assert ("  wasted after the first finding: 3 tool calls, 3 model turns, 3,000 input and "
                "150 output tokens, 0.75 s in tools, 0.009 USD\n") in out
        # the second call of each parallel pair ends 0.25 s after the first (0.5 s long)
        assert out.rstrip().endswith("; 5 flagged; wasted 13 tool calls, 11 model turns, "
                                     "14,000 input and 550 output tokens, 4 s in tools, "
                                     "0.0405 USD; 4 failing the check")

    @pytest.mark.parametrize("fmt", ["junit", "sarif", "github"])
    def test_ci_formats_show_the_waste(self, fmt: str, trace_file: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
        main(["check", "--format", fmt, "--config", str(_config_file(tmp_path)),
              str(trace_file)])
        out = capsys.readouterr().out
        if fmt == "junit":
            assert '<property name="loopguard.waste.tool_calls" value="13"/>' in out
            assert '<property name="loopguard.waste.cost.USD" value="0.0405"/>' in out
            assert "wasted after the first finding: 2 tool calls, 2 model turns" in out
        elif fmt == "sarif":
            doc = json.loads(out)
            assert doc["runs"][0]["properties"]["waste"]["tool_calls"] == 13
            wastes = {r["properties"]["prompt_template"]: r["properties"]["run_waste"]
                      for r in doc["runs"][0]["results"]}
            assert wastes["batch@v1"]["tool_calls"] == 5
        else:
            assert "wasted after the first finding: 5 tool calls, 3 model turns" in out
            assert "; wasted 13 tool calls" in out.splitlines()[-1]

    def test_live_processor_and_serve_count_what_check_reports(
            self, live: tuple[LoopGuardHarness, CollectorRegistry], trace_file: Path,
            tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """The live processor (on the spans as they ended), serve (the spans exported over
        OTLP/HTTP) and check (the spans in a file) give the same totals per template."""
        doc = _check_json(trace_file, tmp_path, capsys)
        from_check = {r["prompt_template"]: _waste_as_metrics(r["waste"]) for r in doc["runs"]}
        harness, live_registry = live
        from_live = _metric_totals(live_registry)
        assert from_live == _approx(from_check)

        spans = harness.exporter.get_finished_spans()
        assert _serve_totals(spans, CONFIG) == _approx(from_check)
        assert from_check["batch@v1"]["loopguard_wasted_tool_calls_total"] == 5

    def test_a_corpus_of_real_runs_gives_the_same_totals_everywhere(self) -> None:
        """The corpus of real agent runs (token counts and a priced model on every model span):
        check on its spans, the live processor on them replayed on a real TracerProvider, and
        serve on those give the same waste."""
        records = [_with_usage(r, i) for i, r in enumerate(iter_spans(str(CORPUS), strict=True))]
        assert any(usage_of(r.attributes)[0] for r in records)
        by_template: dict[str, Waste] = {}
        for report in Checker(CONFIG).run(records):
            template = report.prompt_template or "unknown"
            by_template[template] = by_template.get(template, Waste()) + report.waste
        assert sum(by_template.values(), Waste()).tool_calls > 50  # the corpus loops
        from_check = {t: _waste_as_metrics(w) for t, w in by_template.items()}
        spans, registry = replay_live(records, CONFIG)
        from_live = _metric_totals(registry)
        assert _by_template(from_live) == _approx(_by_template(from_check))
        assert _by_template(_serve_totals(spans, CONFIG)) == _approx(_by_template(from_check))
