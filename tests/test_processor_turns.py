"""The processor's model turns: the usage read only once the run's waste counts it.

``LoopGuardSpanProcessor._model_turn`` keeps a reference to the latest turn's attributes and
gives the waste its usage when a wasted call could draw on it, instead of at every turn. These
tests pin that the totals are those the engine gives when every turn's usage comes at once.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.engine import LoopEngine
from otel_loopguard.metrics import LoopGuardMetrics
from otel_loopguard.processor import LoopGuardSpanProcessor
from otel_loopguard.testing import AgentScript, LoopGuardHarness
from otel_loopguard.types import ModelTurn, ToolCall

PRICES = {"gpt-4o": {"input_per_million": 2.5, "output_per_million": 10.0}}
USAGE = {"gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 50,
         "gen_ai.request.model": "gpt-4o"}
CALLS_PER_TURN = 2
WITHOUT_IDLE = ("repeat", "cycle", "stagnation", "budget")


def _live(config: LoopGuardConfig) -> tuple[LoopGuardHarness, LoopGuardSpanProcessor,
                                              CollectorRegistry]:
    harness = LoopGuardHarness(config)
    harness.clock.now_ns = time.time_ns()  # the processor forgets open spans older than its TTL
    registry = CollectorRegistry()
    processor = LoopGuardSpanProcessor(config, metrics=LoopGuardMetrics(registry))
    harness.provider.add_span_processor(processor)
    return harness, processor, registry


def _wasted(registry: CollectorRegistry) -> dict[str, float]:
    """The waste counters' values by sample name (and token type)."""
    out: dict[str, float] = {}
    for family in registry.collect():
        for sample in family.samples:
            if sample.name.startswith("loopguard_wasted_") and sample.name.endswith("_total"):
                key = sample.name + "".join(f":{sample.labels[k]}" for k in ("type", "currency")
                                            if k in sample.labels)
                out[key] = out.get(key, 0.0) + sample.value
    return out


def _loop(agent: AgentScript, turns: int) -> None:
    """Each turn calls the same tool twice: the second call of a turn after the run's first
    finding draws on a turn that arrived before it."""
    for n in range(turns):
        agent.turn(attributes={**USAGE, "gen_ai.usage.input_tokens": 1000 + n})
        for _ in range(CALLS_PER_TURN):
            agent.tool("search", {"q": "pricing"}, "no results", seconds=0.25)


def _engine_totals(config: LoopGuardConfig, turns: int) -> dict[str, Any]:
    """The same run fed straight to the engine, every turn's usage as it comes."""
    engine = LoopEngine(config)
    run = engine.new_run()
    clock, ms = 0, 1_000_000
    for n in range(turns):
        engine.process_model_turn(run, ModelTurn(f"t{n}", clock, clock + 50 * ms, index=n + 1,
                                                 input_tokens=1000 + n, output_tokens=50,
                                                 models=("gpt-4o",)))
        for call in range(CALLS_PER_TURN):
            start = clock + (60 + 300 * call) * ms
            engine.process(run, ToolCall("search", {"q": "pricing"}, "no results", True,
                                         start_time_ns=start, end_time_ns=start + 250 * ms,
                                         turn=n + 1))
        clock += 1000 * ms
    return run.waste.total().to_json()


@pytest.mark.parametrize("detectors", [None, WITHOUT_IDLE], ids=["idle_turns", "no_idle_turns"])
def test_wasted_tokens_are_those_of_the_turns_that_issued_the_wasted_calls(
        detectors: tuple[str, ...] | None) -> None:
    """With the idle-turns detector (turns go to the engine) and without it (they do not)."""
    options: dict[str, Any] = {"prices": PRICES}
    if detectors is not None:
        options["detectors"] = list(detectors)
    config = LoopGuardConfig.create(**options)
    harness, _, registry = _live(config)
    with harness.run(prompt="loop@v1") as agent:
        _loop(agent, 6)
    expected = _engine_totals(config, 6)
    assert expected["input_tokens"] > 0  # the run wastes turns, so the usage is read
    assert _wasted(registry) == pytest.approx({
        "loopguard_wasted_tool_calls_total": expected["tool_calls"],
        "loopguard_wasted_tokens_total:input": expected["input_tokens"],
        "loopguard_wasted_tokens_total:output": expected["output_tokens"],
        "loopguard_wasted_tool_seconds_total": expected["tool_seconds"],
        "loopguard_wasted_cost_total:USD": expected["cost"]["USD"]})


def test_a_conversation_run_counts_the_same_waste() -> None:
    """A conversation's run (which outlives its traces) reads every turn's usage at once."""
    config = LoopGuardConfig.create(prices=PRICES, run_key="conversation")
    harness, processor, registry = _live(config)
    with harness.run(prompt="loop@v1", conversation="c-1") as agent:
        _loop(agent, 6)
    [entry] = processor.store._runs.values()
    assert entry.unfed is None
    expected = _engine_totals(config, 6)
    assert _wasted(registry)["loopguard_wasted_tokens_total:input"] == \
        expected["input_tokens"] > 0


def test_a_reset_forgets_the_usage_of_the_turn_before_it() -> None:
    """``LoopEngine.reset`` starts a new waste: the turn given to the old one is not counted
    in the new one, as when the engine took its usage at the turn."""
    config = LoopGuardConfig.create(prices=PRICES)
    harness, processor, registry = _live(config)
    with harness.run(prompt="reset@v1") as agent:
        agent.turn(attributes=USAGE)
        agent.tool("search", {"q": "x"}, "none")
        [entry] = processor.store._runs.values()
        with entry.state.lock:
            processor.engine.reset(entry.state)
        for _ in range(4):
            agent.tool("search", {"q": "x"}, "none")
    wasted = _wasted(registry)
    assert wasted["loopguard_wasted_tool_calls_total"] >= 1
    assert "loopguard_wasted_tokens_total:input" not in wasted
