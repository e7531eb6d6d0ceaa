"""The policy: strongest evidence, escalation, hints, sticky stop and the ``on_decision`` hook."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pytest

from otel_loopguard import (
    Action,
    Decision,
    Evidence,
    Handoff,
    LoopEngine,
    LoopGuardConfig,
    LoopGuardError,
    Policy,
    ToolCall,
)
from otel_loopguard.engine import RunState
from otel_loopguard.policy import NO_PROGRESS_DETECTORS, PATTERN_DETECTORS, render_hint

_CODES = {"stagnation": "STAGNANT_RESULT", "repeat": "REPEATED_CALL", "cycle": "CYCLE_DETECTED",
          "failure": "REPEATED_FAILURE", "mutating_failure": "MUTATING_FAILURE",
          "reread": "REPEATED_READ", "batch": "REPEATED_BATCH", "handoff": "HANDOFF_LOOP",
          "near_duplicate": "NEAR_DUPLICATE", "budget": "BUDGET_WARNING"}


def _ev(detector: str, action: Action, count: int = 3, **details: Any) -> Evidence:
    return Evidence(detector=detector, code=_CODES[detector], action=action, tool="search",
                    count=count, details=details)


@pytest.fixture(name="policy")
def _policy() -> Policy:
    return Policy()


def _decide(policy: Policy, *evidence: Evidence) -> Decision:
    return policy.decide(evidence, tool="search", call_index=7, span_id="00000000000000aa")


def _calls(engine: LoopEngine, calls: Sequence[dict[str, Any]],
           run: RunState | None = None) -> list[Decision]:
    run = engine.new_run() if run is None else run
    out = []
    for index, call in enumerate(calls):
        out.append(engine.process(run, ToolCall(**{
            "start_time_ns": 10 * index + 1, "end_time_ns": 10 * index + 2,
            "span_id": f"{index + 1:016x}", **call})))
    return out


_STAGNANT = {"tool": "web_search", "arguments": {"q": "pricing"}, "result": "no results",
             "has_result": True}
_FAILING = {"tool": "fetch", "arguments": {"id": 1}, "error": True,
            "error_message": "HTTP 401 Unauthorized"}


class TestPolicy:
    def test_no_evidence_is_continue(self, policy: Policy) -> None:
        """Without evidence the decision is ``continue`` with code ``OK`` and no hint."""
        decision = _decide(policy)
        assert (decision.action, decision.code, decision.hint) == (Action.CONTINUE, "OK", "")
        assert not decision.flagged and decision.detector == ""

    def test_decision_identifies_the_call(self, policy: Policy) -> None:
        """The decision carries the tool, call index and span id it was made for."""
        decision = _decide(policy, _ev("stagnation", Action.WARN))
        assert (decision.tool, decision.call_index, decision.span_id) == (
            "search", 7, "00000000000000aa")

    @pytest.mark.parametrize(("weak", "strong"), [
        ("budget", "stagnation"), ("stagnation", "failure"), ("reread", "mutating_failure"),
        ("batch", "handoff"), ("cycle", "near_duplicate"),
    ], ids=str)
    def test_strongest_action_wins(self, policy: Policy, weak: str, strong: str) -> None:
        """The decision takes the action, code and hint of the strongest evidence."""
        decision = _decide(policy, _ev(weak, Action.WARN), _ev(strong, Action.STOP))
        assert decision.action is Action.STOP
        assert decision.code == _CODES[strong]
        assert decision.detector == strong
        assert [e.detector for e in decision.evidence] == [strong, weak]

    def test_ties_follow_detector_priority(self, policy: Policy) -> None:
        """Between equal actions, failure outranks stagnation, which outranks budget."""
        decision = _decide(policy, _ev("budget", Action.WARN), _ev("stagnation", Action.WARN),
                           _ev("failure", Action.WARN))
        assert [e.detector for e in decision.evidence] == ["failure", "stagnation", "budget"]

    @pytest.mark.parametrize(("pattern", "no_progress"),
                             list(itertools.product(sorted(PATTERN_DETECTORS),
                                                    sorted(NO_PROGRESS_DETECTORS))),
                             ids=str)
    def test_pattern_and_no_progress_escalate(self, policy: Policy, pattern: str,
                                              no_progress: str) -> None:
        """A repeating pattern plus no progress on one call raises the action one level."""
        decision = _decide(policy, _ev(pattern, Action.WARN), _ev(no_progress, Action.WARN))
        assert decision.action is Action.REPLAN
        assert decision.escalated

    def test_escalation_from_replan_reaches_stop(self, policy: Policy) -> None:
        """Replan escalates to stop, and the hint gives stop advice."""
        decision = _decide(policy, _ev("near_duplicate", Action.REPLAN),
                           _ev("stagnation", Action.WARN))
        assert decision.action is Action.STOP and decision.escalated
        assert "Do not call it again" in decision.hint

    @pytest.mark.parametrize("pattern", sorted(PATTERN_DETECTORS))
    def test_never_past_stop(self, policy: Policy, pattern: str) -> None:
        """Evidence already at stop stays at stop and is not marked escalated."""
        decision = _decide(policy, _ev(pattern, Action.WARN), _ev("failure", Action.STOP))
        assert decision.action is Action.STOP
        assert not decision.escalated

    @pytest.mark.parametrize("repeat_of_outcome", ["reread", "batch"])
    def test_outcome_repeats_do_not_escalate_stagnation(self, policy: Policy,
                                                        repeat_of_outcome: str) -> None:
        """Reread and batch are outcome repeats of the same calls: no escalation with stagnation."""
        decision = _decide(policy, _ev(repeat_of_outcome, Action.WARN),
                           _ev("stagnation", Action.WARN))
        assert decision.action is Action.WARN
        assert not decision.escalated

    def test_a_change_repeated_back_to_back_does_not_escalate_stagnation(
            self, policy: Policy) -> None:
        """``repeat``'s streak of one change back to back counts the calls whose unchanged
        result ``stagnation`` counts (a browser action): one piece of evidence, no escalation.
        The same ``repeat`` of calls without results still escalates with another call's
        stagnation evidence."""
        decision = _decide(policy, _ev("repeat", Action.WARN, back_to_back=True),
                           _ev("stagnation", Action.WARN))
        assert decision.action is Action.WARN and not decision.escalated
        decision = _decide(policy, _ev("repeat", Action.WARN), _ev("stagnation", Action.WARN))
        assert decision.action is Action.REPLAN and decision.escalated

    @pytest.mark.parametrize("evidence", [
        ("repeat", "cycle"), ("stagnation", "failure"), ("budget", "stagnation"),
        ("handoff", "repeat"), ("near_duplicate",), ("mutating_failure",),
    ], ids="+".join)
    def test_no_escalation_without_both_kinds(self, policy: Policy,
                                              evidence: tuple[str, ...]) -> None:
        """Only a pattern together with no progress escalates; anything else keeps its action."""
        decision = _decide(policy, *(_ev(d, Action.WARN) for d in evidence))
        assert decision.action is Action.WARN
        assert not decision.escalated

    @pytest.mark.parametrize(("pattern_action", "progress_action", "expected"), [
        (Action.CONTINUE, Action.CONTINUE, Action.CONTINUE),
        (Action.CONTINUE, Action.WARN, Action.WARN),
    ], ids=["both-continue", "pattern-continue"])
    def test_continue_evidence_does_not_escalate(self, policy: Policy, pattern_action: Action,
                                                 progress_action: Action,
                                                 expected: Action) -> None:
        """Evidence that did not fire (continue) takes no part in escalation."""
        decision = _decide(policy, _ev("repeat", pattern_action),
                           _ev("stagnation", progress_action))
        assert decision.action is expected


class TestHints:
    @pytest.mark.parametrize("detector", sorted(_CODES))
    @pytest.mark.parametrize("action", [Action.WARN, Action.REPLAN, Action.STOP],
                             ids=lambda a: a.label)
    def test_hint_names_the_tool_and_advises(self, detector: str, action: Action) -> None:
        """Every hint says what is repeated and ends with the advice of its action."""
        evidence = _ev(detector, action, cycle_tools=["search", "summarize"], cycle_length=2,
                       cycle=["a", "b", "a"], budget="run", limit=50, batch_size=2,
                       error_reason="429", window=12)
        hint = render_hint(evidence, action)
        advice = {Action.WARN: "Consider a different approach.",
                  Action.REPLAN: "Stop and re-plan", Action.STOP: "Do not call it again"}
        assert advice[action] in hint
        if detector not in ("budget", "handoff", "batch", "cycle"):
            assert '"search"' in hint

    def test_unknown_code_still_hints(self) -> None:
        """Evidence with a code the policy does not know gets a generic hint."""
        evidence = Evidence(detector="custom", code="MY_CODE", action=Action.WARN, tool="t",
                            count=2)
        assert render_hint(evidence, Action.WARN).startswith('Loop detected on "t".')

    @pytest.mark.parametrize("count", [2, 3])
    def test_cycle_hint_ordinal(self, count: int) -> None:
        """The cycle hint spells ordinals correctly (2nd, 3rd)."""
        hint = render_hint(_ev("cycle", Action.WARN, count=count, cycle_length=2,
                               cycle_tools=["a", "b"]), Action.WARN)
        assert f"{count}th" not in hint

    def test_an_unclassified_error_is_not_called_a_service_outage(self) -> None:
        """An error no code or phrase classifies (an edit whose text occurs twice) is retried
        by the lenient ladder, but its hint does not tell the model to wait for a service."""
        engine = LoopEngine()
        hints = {}
        for tool, message in (("lookup", "Failed to edit, the string to replace occurs "
                                          "twice."), ("fetch", "HTTP 429 Too Many Requests")):
            run = engine.new_run()
            for i in range(3):
                decision = engine.process(run, ToolCall(
                    tool=tool, arguments={"q": "same"}, error=True, error_message=message,
                    start_time_ns=10 * i + 1, end_time_ns=10 * i + 2))
            hints[tool] = decision.hint
        assert "service" not in hints["lookup"] and "(error)" not in hints["lookup"]
        assert "change the arguments or the approach" in hints["lookup"]
        assert "(429)" in hints["fetch"] and "Wait before retrying" in hints["fetch"]

    def test_cycle_hint_without_results(self) -> None:
        """Without captured results the cycle hint does not claim the results were the same."""
        hint = render_hint(_ev("cycle", Action.WARN, count=3, cycle_length=2,
                               cycle_tools=["a", "b"], outcomes_compared=False), Action.WARN)
        assert "same results" not in hint


class TestEngineEscalation:
    def test_near_duplicates_that_also_stagnate_escalate(self) -> None:
        """Reworded searches (replan) whose repeat also stagnates (warn) escalate to stop."""
        queries = ["weather paris", "paris weather", "weather paris", "paris weather",
                   "weather paris"]
        decisions = _calls(LoopEngine(), [{"tool": "search", "arguments": {"q": q},
                                           "result": "no results", "has_result": True}
                                          for q in queries])
        last = decisions[-1]
        assert {e.detector for e in last.evidence} >= {"near_duplicate", "stagnation"}
        assert last.action is Action.STOP and last.escalated
        assert not any(d.escalated for d in decisions[:-1])

    def test_reread_with_stagnation_is_not_escalated(self) -> None:
        """Re-reading a file three times trips reread and stagnation, and stays at warn."""
        read = {"tool": "read_file", "arguments": {"path": "a.py"}, "result": "x = 1",
                "has_result": True}
        decisions = _calls(LoopEngine(), [read] * 3)
        assert {e.detector for e in decisions[-1].evidence} == {"reread", "stagnation"}
        assert decisions[-1].action is Action.WARN and not decisions[-1].escalated

    def test_a_scroll_acknowledged_alike_is_a_page_not_captured(self) -> None:
        """browser-use answers every scroll with the same line ("Scrolled down the page by 2.0
        pages"), which holds no page: paging down a long page three times is quiet, and the same
        scroll from the fifth on only warns (``repeat``, as for pages not captured), never
        escalated by a stagnation the line cannot show."""
        scroll = {"tool": "scroll", "arguments": {"down": True, "num_pages": 2.0},
                  "result": "Scrolled down the page by 2.0 pages", "has_result": True}
        decisions = _calls(LoopEngine(), [scroll] * 6)
        assert [d.action for d in decisions[:4]] == [Action.CONTINUE] * 4
        for last in decisions[4:]:
            assert {e.detector for e in last.evidence} == {"repeat"}
            assert last.action is Action.WARN and not last.escalated

    def test_retryable_failure_ladder_without_results(self) -> None:
        """A 429 five times without captured results follows the failure ladder: warn 3, stop 5."""
        call = {"tool": "fetch", "arguments": {"id": 1}, "error": True,
                "error_message": "HTTP 429 Too Many Requests"}
        actions = [d.action.label for d in _calls(LoopEngine(), [call] * 5)]
        assert actions == ["continue", "continue", "warn", "warn", "stop"]


class TestStickyStop:
    def test_enforce_mode_stop_is_sticky(self) -> None:
        """In enforce mode every call after a stop is a stop too, with the first stop's code."""
        engine = LoopEngine(LoopGuardConfig.create(mode="enforce"))
        healthy = {"tool": "other", "arguments": {"n": 1}, "result": "fine", "has_result": True}
        decisions = _calls(engine, [_FAILING, _FAILING, healthy])
        assert [d.action for d in decisions] == [Action.CONTINUE, Action.STOP, Action.STOP]
        assert decisions[2].code == "PERMANENT_FAILURE"
        assert (decisions[2].tool, decisions[2].call_index) == ("other", 3)

    def test_observe_mode_stop_is_not_sticky(self) -> None:
        """In observe mode a healthy call after a stop is judged on its own."""
        healthy = {"tool": "other", "arguments": {"n": 1}, "result": "fine", "has_result": True}
        engine = LoopEngine()
        run = engine.new_run()
        decisions = _calls(engine, [_FAILING, _FAILING, healthy], run)
        assert decisions[2] == Policy().decide((), tool="other", call_index=3,
                                               span_id=decisions[2].span_id)
        assert engine.summary(run)["action"] == "stop"  # the run's highest stays

    def test_stop_does_not_cross_runs(self) -> None:
        """A stop in one run leaves a fresh run clean, even in enforce mode."""
        engine = LoopEngine(LoopGuardConfig.create(mode="enforce"))
        _calls(engine, [_FAILING, _FAILING])
        assert _calls(engine, [_STAGNANT])[0].action is Action.CONTINUE


class TestOnDecision:
    def test_receives_every_non_continue_decision(self) -> None:
        """The callback sees exactly the decisions above continue, in order."""
        seen: list[Decision] = []
        engine = LoopEngine(on_decision=seen.append)
        decisions = _calls(engine, [_STAGNANT] * 5 + [_FAILING] * 2)
        assert seen == [d for d in decisions if d.flagged]
        assert [d.call_index for d in seen] == [3, 4, 5, 7]

    def test_exceptions_are_contained_and_counted(self) -> None:
        """An exception in the callback never reaches the caller and is counted."""
        def explode(decision: Decision) -> None:
            raise RuntimeError(f"boom on {decision.code}")

        engine = LoopEngine(on_decision=explode)
        decisions = _calls(engine, [_STAGNANT] * 5)
        assert [d.action.label for d in decisions][2:] == ["warn", "replan", "stop"]
        assert engine.callback_errors == 3

    def test_nested_engine_call_is_not_renotified(self) -> None:
        """A callback that calls the engine again is not called back for the nested decision."""
        seen: list[int] = []
        engine = LoopEngine()
        inner_run = engine.new_run()

        def callback(decision: Decision) -> None:
            seen.append(decision.call_index)
            for _ in range(3):
                engine.process(inner_run, ToolCall(**_STAGNANT))

        engine.on_decision = callback
        _calls(engine, [_STAGNANT] * 3)
        assert seen == [3]
        assert engine.callback_errors == 0

    @pytest.mark.parametrize("entry", ["process", "precheck", "process_handoff"])
    def test_the_callback_cannot_feed_its_own_run(self, entry: str) -> None:
        """Feeding the run the callback was called for raises inside the callback (contained,
        counted) and leaves the run as it was; the caller never sees it."""
        engine = LoopEngine()
        run = engine.new_run()
        errors: list[Exception] = []
        calls_seen: list[int] = []

        def callback(decision: Decision) -> None:
            calls_seen.append(run.calls)
            try:
                if entry == "process":
                    engine.process(run, ToolCall(**_STAGNANT))
                elif entry == "precheck":
                    engine.precheck(run, "web_search", {"q": "pricing"})
                else:
                    engine.process_handoff(run, Handoff(from_agent="a", to_agent="b"))
            except LoopGuardError as exc:
                errors.append(exc)
                raise

        engine.on_decision = callback
        decisions = [engine.process(run, ToolCall(**_STAGNANT)) for _ in range(4)]
        assert [d.action.label for d in decisions] == ["continue", "continue", "warn", "replan"]
        assert calls_seen == [3, 4]  # the nested calls changed nothing
        assert run.calls == 4
        assert len(errors) == 2
        assert "on_decision must not feed or reset the run it was called for" in str(errors[0])
        assert engine.callback_errors == 2
        assert not run.in_callback()  # cleared once the callback returned

    def test_no_callback_on_clean_calls(self) -> None:
        """A clean run never calls the callback."""
        seen: list[Decision] = []
        engine = LoopEngine(on_decision=seen.append)
        _calls(engine, [{"tool": "search", "arguments": {"q": q}, "result": q, "has_result": True}
                        for q in ("a", "b", "c")])
        assert seen == []


class TestSignatureHooks:
    """Seed 004's ``signature`` and ``result_signature`` hooks."""

    def test_signature_hook_decides_what_is_the_same_call(self) -> None:
        """Calls whose hook text matches are one call, whatever else their arguments carry."""
        engine = LoopEngine(signature=lambda tool, args: str(args["q"]))
        calls = [{"tool": "search", "arguments": {"q": "pricing", "request_nonce": n},
                  "result": "no results", "has_result": True} for n in range(5)]
        assert [d.action.label for d in _calls(engine, calls)] == [
            "continue", "continue", "warn", "replan", "stop"]
        assert [d.action.label for d in _calls(LoopEngine(), calls)] == ["continue"] * 5

    def test_result_signature_hook_decides_what_is_the_same_answer(self) -> None:
        """Results whose hook text matches are one answer (here: only the items count)."""
        engine = LoopEngine(result_signature=lambda tool, result: str(result["items"]))
        calls = [{"tool": "search", "arguments": {"q": "pricing"},
                  "result": {"items": [], "served_by": f"node-{n}"}, "has_result": True}
                 for n in range(3)]
        assert _calls(engine, calls)[2].code == "STAGNANT_RESULT"
        assert _calls(LoopEngine(), calls)[2].code == "OK"  # served_by differs each time

    def test_precheck_uses_the_signature_hook(self) -> None:
        """The enforce-mode precheck matches calls the way the hook does."""
        engine = LoopEngine(signature=lambda tool, args: str(args["q"]))
        run = engine.new_run()
        for n in range(4):
            engine.process(run, ToolCall(tool="search", arguments={"q": "x", "n": n},
                                         result="no results", has_result=True))
        assert engine.precheck(run, "search", {"q": "x", "n": 99}).action is Action.STOP

    @pytest.mark.parametrize("hook", [lambda tool, args: 1 / 0, lambda tool, args: 42],
                             ids=["raises", "not-a-string"])
    def test_a_failing_hook_falls_back_and_is_counted(self, hook: Any) -> None:
        """A hook that raises or returns a non-string never breaks the call: built-in
        signatures are used and the error is counted."""
        engine = LoopEngine(signature=hook, result_signature=hook)
        decisions = _calls(engine, [_STAGNANT] * 3)
        assert decisions[2].code == "STAGNANT_RESULT"
        assert engine.callback_errors == 6


class TestSummaryAndReset:
    def test_summary_counts_the_run(self) -> None:
        """Tool calls, distinct calls, highest action and the budget left."""
        engine = LoopEngine(LoopGuardConfig.create(max_tool_calls_warn=None,
                                                   max_tool_calls_stop=10))
        run = engine.new_run()
        for call in [_STAGNANT] * 3 + [_FAILING]:
            engine.process(run, ToolCall(**call))
        assert engine.summary(run) == {
            "tool_calls": 4, "unique_call_signatures": 2, "action": "warn",
            "max_tool_calls": 10, "budget_remaining": 6,
            "waste": {"tool_calls": 0, "model_turns": 0, "input_tokens": 0, "output_tokens": 0,
                      "tool_seconds": 0.0, "cost": {}}}
        assert LoopEngine().summary(LoopEngine().new_run())["max_tool_calls"] == 50

    def test_reset_forgets_the_run(self) -> None:
        """After reset, the same calls start counting from zero again."""
        engine = LoopEngine()
        run = engine.new_run()
        for _ in range(4):
            engine.process(run, ToolCall(**_STAGNANT))
        engine.reset(run)
        assert engine.summary(run)["tool_calls"] == 0
        assert run.highest is Action.CONTINUE
        labels = [engine.process(run, ToolCall(**_STAGNANT)).action.label for _ in range(3)]
        assert labels == ["continue", "continue", "warn"]

    def test_reset_from_the_callback_of_its_run_is_refused(self) -> None:
        """Like process, reset cannot be called from on_decision for the same run."""
        engine = LoopEngine()
        run = engine.new_run()
        errors: list[LoopGuardError] = []

        def callback(decision: Decision) -> None:
            for change in (engine.reset, lambda run: engine.set_template(run, "t")):
                try:
                    change(run)
                except LoopGuardError as exc:
                    errors.append(exc)

        engine.on_decision = callback
        for _ in range(3):
            engine.process(run, ToolCall(**_STAGNANT))
        assert run.calls == 3
        assert run.template is None
        assert len(errors) == 2
        assert all("process_handoff, reset, set_template" in str(error) for error in errors)
