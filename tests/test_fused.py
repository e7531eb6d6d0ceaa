"""The built-in detectors observed together (``BuiltinDetectors``) give what they give one by one.

The engine observes the built-in detectors at the head of its list in one frame, with inline
paths for the calls on which a detector only records the step. Each test feeds the same calls
to that engine and to one whose list starts with a detector of another class (so every
detector goes through its own ``observe``), and compares every decision, evidence details
included, and what a precheck predicts.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from _calls import tool_call

from otel_loopguard import Action, Decision, Evidence, LoopEngine, LoopGuardConfig, ToolCall
from otel_loopguard.detectors import (
    CycleDetector,
    RepeatDetector,
    StagnationDetector,
    make_default_detectors,
)
from otel_loopguard.detectors._fused import prefix_length

_TOOLS = ("search", "get", "read_file", "write_file", "bash", "job_status", "todo_write",
          "browser_click", "browser_take_screenshot")
_BROWSER_ARGUMENTS = ({"ref": "e7"}, {"ref": "e9"}, {"url": "https://x.test"}, {})
"""A browser action's: an element, a page, none (going back: equals no other call)."""


class _Silent:
    """A detector of another class: it sends every detector after it through ``observe``."""

    name = "silent"

    def new_state(self) -> None:
        return None

    def observe(self, state: Any, step: Any) -> Evidence | None:
        return None


def _calls(rng: random.Random, count: int) -> list[ToolCall]:
    """Return a run's calls: a few distinct calls, often in a repeating order, so that every
    detector fires (and changes nothing on some of them)."""
    pool = [_fields(rng) for _ in range(rng.randrange(3, 9))]
    chosen: list[dict[str, Any]] = []
    period = rng.randrange(1, 4)
    for _ in range(count):
        if len(chosen) >= period and rng.random() < 0.6:
            fields = dict(chosen[-period])
        else:
            fields = dict(rng.choice(pool)) if rng.random() < 0.8 else _fields(rng)
        if rng.random() < 0.05:
            fields.update(error=True, error_message=rng.choice(["HTTP 404", "timed out"]))
        chosen.append(fields)
    calls, turn = [], 0
    for index, fields in enumerate(chosen):
        turn += rng.random() < 0.6
        calls.append(tool_call(index, {**fields, "turn": turn if rng.random() < 0.9 else None}))
    return calls


def _fields(rng: random.Random) -> dict[str, Any]:
    """Return one call's tool, arguments and (mostly) result."""
    tool = rng.choice(_TOOLS)
    arguments: Any = {"path": f"f{rng.randrange(3)}", "content": rng.choice("ab")} \
        if tool == "write_file" else {"q": rng.choice(["x", "x y z", "X, y z", "z"])}
    if tool == "bash":
        arguments = {"command": rng.choice(["ls", "pytest -q", "echo hi > a.txt"])}
    elif tool.startswith("browser_"):  # a click showing a page seen or not, then a look
        arguments = rng.choice(_BROWSER_ARGUMENTS) if tool == "browser_click" else {}
    fields: dict[str, Any] = {"tool": tool, "arguments": json.dumps(arguments)}
    if rng.random() < 0.85:
        fields.update(result=rng.choice(["", "a", "b", json.dumps({"v": rng.randrange(2)})]),
                      has_result=True)
    return fields


def _seen(decision: Decision) -> tuple[Any, ...]:
    return (decision.action, decision.code, decision.call_index, decision.span_id,
            [(e.detector, e.code, e.action, e.tool, e.count, dict(e.details))
             for e in decision.evidence])


_CONFIGS = [
    {},
    {"window_size": 4, "stagnation_stop": 4, "repeat_replan": 4, "cycle_max_gap": 1,
     "near_duplicate_window": 3},
    {"stagnation_warn": 2, "reread_warn": 2, "repeat_warn": 2, "batch_warn": 2},
    {"max_calls_per_tool_warn": 3, "max_steps_warn": 9, "max_tool_calls_warn": 30,
     "max_tool_calls_stop": 40},
    {"max_run_seconds_warn": 0.0000002, "stagnation_no_effect_warn": 2},
    {"detectors": ["stagnation", "cycle", "batch", "budget"]},
]


@pytest.mark.parametrize("settings", _CONFIGS, ids=range(len(_CONFIGS)))
def test_the_same_decisions_as_one_by_one(settings: dict[str, Any]) -> None:
    """Random runs (repeats, cycles, failures, polls, shell calls, browser actions, budgets)
    decide the same."""
    config = LoopGuardConfig.create(**settings)
    fused = LoopEngine(config)
    assert fused._builtins is not None and fused._builtins.count == len(fused.detectors)
    apart = LoopEngine(config, detectors=[_Silent(), *make_default_detectors(config)])
    assert apart._builtins is None
    rng = random.Random(repr(settings))
    for _ in range(12):
        calls = _calls(rng, 60)
        runs = fused.new_run(), apart.new_run()
        for call in calls:
            if rng.random() < 0.1:
                predicted = [engine.precheck(run, call.tool, call.arguments)
                             for engine, run in zip((fused, apart), runs, strict=True)]
                assert _seen(predicted[0]) == _seen(predicted[1])
            decided = [engine.process(run, call)
                       for engine, run in zip((fused, apart), runs, strict=True)]
            assert _seen(decided[0]) == _seen(decided[1])


def test_only_the_built_in_classes_in_their_order_are_fused() -> None:
    """A subclass, a detector of another class, or a built-in out of order ends the prefix."""

    class Sub(RepeatDetector):
        pass

    assert prefix_length([StagnationDetector(), RepeatDetector(), CycleDetector()]) == 3
    assert prefix_length([StagnationDetector(), Sub(), CycleDetector()]) == 1
    assert prefix_length([RepeatDetector(), StagnationDetector()]) == 1
    assert prefix_length([_Silent(), RepeatDetector()]) == 0  # type: ignore[list-item]
    assert prefix_length([RepeatDetector(), RepeatDetector()]) == 1


def test_a_custom_detector_after_the_built_ins_is_still_called() -> None:
    """The detectors after the fused ones go through ``observe``, their evidence after."""

    class Always(_Silent):
        name = "always"

        def observe(self, state: Any, step: Any) -> Evidence | None:
            return Evidence(self.name, "ALWAYS", Action.WARN, step.tool, 1)

    config = LoopGuardConfig.create()
    engine = LoopEngine(config, detectors=[*make_default_detectors(config), Always()])
    run = engine.new_run()
    decisions = [engine.process(run, tool_call(i, {"tool": "get", "arguments": "{}",
                                                    "result": "same", "has_result": True}))
                 for i in range(4)]
    assert [e.detector for e in decisions[0].evidence] == ["always"]
    assert [e.detector for e in decisions[3].evidence][-1] == "always"
    assert "stagnation" in {e.detector for e in decisions[3].evidence}
