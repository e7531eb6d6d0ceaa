"""``LoopEngine.precheck``: the detectors themselves predict the next call, and nothing changes.

The precheck runs every detector on a copy of its state (``fork``) with a hypothetical call that
repeats the call's latest outcome, so what it predicts is what processing that call would
decide, for every ladder, and the run's state is left exactly as it was.
"""

from __future__ import annotations

from collections import deque
from typing import Any, ClassVar

import pytest
from _calls import NO_RESULT, call, tool_call
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_loopguard import Action, Evidence, LoopEngine, LoopGuardConfig, make_default_detectors
from otel_loopguard.engine import RunState

FAILING = {"passed": False, "output": "FAILED test_total - assert 3 == 4"}
ALPHABET = [
    call("search", {"q": "weather in Paris"}, "no results"),
    call("search", {"q": "Paris weather"}, "no results"),
    call("search", {"q": "paris weather today"}, "no results"),
    call("edit_file", {"path": "a.py", "n": 1}, "ok"),
    call("edit_file", {"path": "a.py", "n": 2}, "ok"),
    call("edit_file", {"path": "b.py"}, error="old_text not found in b.py"),
    call("run_tests", {}, FAILING),
    call("read_file", {"path": "a.py"}, "def total(a, b): ..."),
    call("fetch", {"id": 1}, error="HTTP 401 Unauthorized"),
    call("fetch", {"id": 2}, error="HTTP 429 Too Many Requests"),
    call("get", {"path": "/x", "v": 1}, error="record not found"),
    call("get", {"path": "/x", "v": 2}, error="record not found"),
    call("poll_job", {"id": 1}, "pending"),
    call("lookup", {"k": 1}, NO_RESULT),
    call("mcp__playwright__browser_click", {"element": "Submit", "ref": "e7"},
         "- button 'Submit' [disabled]"),
    call("mcp__playwright__browser_press_key", {"key": "PageDown"}, NO_RESULT),
    call("browser_navigate", {"url": "https://x.test/admin"}, error="HTTP 403 Forbidden"),
    call("mcp__playwright__browser_take_screenshot", {}, NO_RESULT),
]
"""Calls whose outcome never changes, so a repeat does repeat its latest outcome."""
CONFIG = LoopGuardConfig.create(max_tool_calls_warn=20, max_tool_calls_stop=35)


def snapshot(value: Any) -> Any:
    """Return a comparable copy of ``value``: containers and slotted objects, all the way down."""
    if isinstance(value, dict):
        return ("dict", tuple((k, snapshot(v)) for k, v in value.items()))
    if isinstance(value, list | tuple | deque):
        return (type(value).__name__, tuple(snapshot(v) for v in value))
    if isinstance(value, set | frozenset):
        return ("set", frozenset(snapshot(v) for v in value))
    slots = [name for cls in type(value).__mro__ for name in getattr(cls, "__slots__", ())]
    if slots:
        return (type(value).__name__, tuple(
            (name, snapshot(getattr(value, name, None))) for name in slots if name != "lock"))
    return value


def _run_state(run: RunState) -> Any:
    return snapshot(run)


class TestPrediction:
    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.integers(0, len(ALPHABET) - 1), min_size=1, max_size=40))
    def test_predicts_what_processing_decides(self, picks: list[int]) -> None:
        """For a call seen before (so its next outcome is known), the precheck's action and
        code are those of the decision on it; the precheck changes nothing in the run."""
        engine = LoopEngine(CONFIG)
        state = engine.new_run()
        seen: set[int] = set()
        for index, pick in enumerate(picks):
            fields = ALPHABET[pick]
            before = _run_state(state)
            predicted = engine.precheck(state, fields["tool"], fields["arguments"])
            assert _run_state(state) == before
            # no model turns: the precheck takes a call to be of the latest call's turn (it
            # cannot know one began), so a call in a turn of its own after two failing calls
            # of one tool would be predicted as a sibling of the last (no retry) and decided
            # as a retry; calls one after another, each its own batch, are predicted as decided
            decided = engine.process(state, tool_call(index, fields))
            assert predicted.call_index == decided.call_index
            if pick in seen:
                assert (predicted.action, predicted.code) == (decided.action, decided.code)
                assert all(e.details.get("predicted") for e in predicted.evidence)
            seen.add(pick)

    @pytest.mark.parametrize("results", ["ABACA", "ABABA", "AXAA", "AA"])
    def test_a_new_result_between_repeats_is_predicted(self, results: str) -> None:
        """The call's latest result once more: predicted as decided, the stagnation count
        restarting after a result of the call new to the window (a poll's new output)."""
        engine = LoopEngine(CONFIG)
        state = engine.new_run()
        for index, result in enumerate(results):
            engine.process(state, tool_call(index, call("t", {"q": 1}, result)))
        predicted = engine.precheck(state, "t", {"q": 1})
        decided = engine.process(state, tool_call(len(results), call("t", {"q": 1},
                                                                     results[-1])))
        assert (predicted.action, predicted.code) == (decided.action, decided.code)
        assert decided.action.label == ("continue" if results == "ABACA" else "warn")

    def test_a_cycle_stop_is_predicted(self) -> None:
        """The call that would complete a third repetition of A B is blocked beforehand."""
        engine = LoopEngine()
        state = engine.new_run()
        calls = [call("search", {"q": "claim"}, "none"), call("summarize", {"t": "none"}, "none")]
        for index, fields in enumerate(calls * 2 + calls[:1]):
            engine.process(state, tool_call(index, fields))
        decision = engine.precheck(state, "summarize", {"t": "none"})
        assert (decision.action, decision.code) == (Action.STOP, "CYCLE_DETECTED")

    def test_a_state_change_is_taken_into_account(self) -> None:
        """A rerun after a different edit is predicted as a new observation, not a third."""
        engine = LoopEngine()
        state = engine.new_run()
        for index, fields in enumerate([call("run_tests", {}, FAILING)] * 2):
            engine.process(state, tool_call(index, fields))
        assert engine.precheck(state, "run_tests", {}).action is Action.WARN
        engine.process(state, tool_call(2, call("edit_file", {"path": "a.py"}, "ok")))
        assert engine.precheck(state, "run_tests", {}).action is Action.CONTINUE

    def test_an_unseen_call_gets_only_what_does_not_need_its_outcome(self) -> None:
        """A new call's outcome is unknown: a stop budget is predicted, repetition is not."""
        engine = LoopEngine(LoopGuardConfig.create(max_tool_calls_warn=None,
                                                   max_tool_calls_stop=3))
        state = engine.new_run()
        for index in range(3):
            engine.process(state, tool_call(index, call("search", {"q": index}, "r")))
        decision = engine.precheck(state, "fetch", {"id": 1})
        assert (decision.action, decision.code) == (Action.STOP, "BUDGET_EXHAUSTED")
        assert decision.evidence[0].details["predicted"] is True


class _Counting:
    """A custom detector with no ``fork``: its state is a plain list it appends to."""

    name: ClassVar[str] = "counting"

    def new_state(self) -> list[int]:
        return []

    def observe(self, state: list[int], step: Any) -> Evidence | None:
        state.append(step.index)
        if len(state) < 3:
            return None
        return Evidence(detector=self.name, code="COUNTED", action=Action.WARN, tool=step.tool,
                        count=len(state), details={})


def test_a_detector_without_fork_is_deep_copied() -> None:
    """The precheck runs a custom detector on a deep copy of its state."""
    engine = LoopEngine(detectors=[*make_default_detectors(), _Counting()])
    state = engine.new_run()
    for index in range(2):
        engine.process(state, tool_call(index, call("search", {"q": index}, "r")))
    assert engine.precheck(state, "search", {"q": 9}).code == "COUNTED"
    assert state.states[-1] == [1, 2]


def test_an_exempt_tool_is_never_blocked() -> None:
    """In enforce mode a stop is sticky for the run, but an exempt tool's call still runs."""
    config = LoopGuardConfig.create(mode="enforce", tools={"heartbeat": {"kind": "exempt"}})
    engine = LoopEngine(config)
    state = engine.new_run()
    for index in range(2):
        engine.process(state, tool_call(index, call("fetch", {"id": 1},
                                                    error="HTTP 401 Unauthorized")))
    assert state.stopped is not None
    assert engine.precheck(state, "fetch", {"id": 1}).action is Action.STOP
    assert engine.precheck(state, "heartbeat", {}).action is Action.CONTINUE
