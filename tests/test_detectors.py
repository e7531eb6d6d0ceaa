"""Each detector on its own: truth tables, per-tool overrides, selection, bounded state, cost.

The spec's scenario catalogue lives in ``test_scenarios.py``; these tests pin the edges around it.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from _calls import by as _by
from _calls import call as _call
from _calls import codes as _codes
from _calls import filler as _filler
from _calls import run as _run
from _calls import tool_call
from hypothesis import given
from hypothesis import strategies as st

from otel_loopguard import (
    Action,
    ConfigError,
    Decision,
    Evidence,
    Handoff,
    LoopEngine,
    LoopGuardConfig,
    ToolCall,
    make_default_detectors,
)
from otel_loopguard.detectors import NearDuplicateDetector, RepeatDetector, RereadDetector
from otel_loopguard.detectors._step import CountingWindow
from otel_loopguard.detectors.cycle import PeriodMatcher
from otel_loopguard.detectors.failure import classify_error
from otel_loopguard.types import ModelTurn

_OLD_PERMANENT = (
    r"unauthori[sz]ed|unauthenticated|authenticat|\bauth\b|forbidden|permission[ _]?denied|"
    r"permission[ _]?error|access[ _]?denied|eacces|eperm|enoent|invalid|schema|"
    r"validation[ _]?error|unprocessable|not[ _]?found|no[ _]?such[ _]?file|unknown[ _]?tool|"
    r"does not exist|bad[ _]?request|not allowed|key[ _]?error|type[ _]?error|value[ _]?error")
"""The error phrases as one case-insensitive pattern: the reference of ``classify_error``."""
_DECLINED_WORDS = (
    r"^\W*(?:cancell?ed|declined)\W*$|"
    r"\buser (?:rejected|declined|denied|cancell?ed|did not allow)\b|"
    r"\b(?:rejected|declined|denied|cancell?ed|interrupted) by (?:the )?user\b|"
    r"doesn't want to proceed with this tool use|tell claude what to do differently")
"""A refusal's words as one case-insensitive pattern, searched first."""
_OLD_RETRYABLE = (
    r"rate.?limit|too[ _]?many[ _]?requests|time.?out|timed out|temporar|unavailable|"
    r"try again|overloaded|connection[ _]?(?:reset|refused|error|aborted)|econnreset|"
    r"etimedout|busy")


class TestStagnationDetector:
    @pytest.mark.parametrize(("gap", "expected"), [(0, {3: "warn"}), (4, {11: "warn"}),
                                                   (5, {})],
                             ids=["consecutive", "gap-4-in-window", "gap-5-out-of-window"])
    def test_counts_within_the_window(self, gap: int, expected: dict[int, str]) -> None:
        """Three identical (call, result) pairs count only while all sit in the last 12 calls."""
        same = _call("web_search", {"q": "pricing"}, "no results")
        calls = [same, *_filler(gap, 0), same, *_filler(gap, 100), same]
        assert _by(_run(calls), "stagnation") == expected

    def test_a_new_result_of_the_call_restarts_its_count(self) -> None:
        """A job's output read with one call: "no output yet", a new line, "no output yet"...
        Each new line is progress, so the third "no output yet" is no stagnation (an unseen
        audit's agent polling a background script warned at the 5th read, replanned at the
        7th). Two results taking turns, each seen before, still count."""
        wait = "Returning control to agent after 90 seconds with no output."
        reads = []
        for n in range(4):
            reads += [_call("code_execution_tool", {"runtime": "output"}, wait),
                      _call("code_execution_tool", {"runtime": "output"}, f"post {n} done")]
        assert _by(_run(reads), "stagnation") == {}
        toggle = [_call("flag", {"id": 1}, result) for result in "ABABABAB"]
        assert _by(_run(toggle), "stagnation") == {6: "warn", 7: "warn", 8: "replan"}

    def test_globs_that_all_match_nothing_are_a_search_going_on(self) -> None:
        """GitHub Copilot CLI's glob answers "No files matched the pattern." for each of an
        ``/init`` sweep's globs: empty, as "No files found" is, so different globs that all
        find nothing are not the same result read again (12 warns on one healthy run of an
        unseen audit)."""
        globs = [_call("glob", {"pattern": f"**/*.{ext}"}, "No files matched the pattern.")
                 for ext in ("ts", "tsx", "js", "vue", "svelte", "astro")]
        assert _by(_run(globs), "stagnation") == {}

    def test_failed_calls_are_left_to_failure(self) -> None:
        """The same failing call with the same output is never stagnation."""
        calls = [_call("fetch", {"id": 1}, "Too Many Requests", error="HTTP 429")] * 5
        decisions = _run(calls)
        assert _by(decisions, "stagnation") == {}
        assert _by(decisions, "failure") == {3: "warn", 4: "warn", 5: "stop"}

    def test_structured_errors_are_left_to_failure(self) -> None:
        """A result that is a structured error is not stagnation either."""
        calls = [_call("crm", {"id": 1}, {"ok": False, "message": "quota"})] * 3
        assert _by(_run(calls), "stagnation") == {}

    def test_quiet_without_results(self) -> None:
        """Calls whose result was not captured are repeat's business, not stagnation's."""
        assert _by(_run([_call("search", {"q": "x"})] * 6), "stagnation") == {}

    def test_in_progress_result_makes_a_poll(self) -> None:
        """A default tool reporting "running" is judged as a poll: warn at 5 in a row, not 3."""
        decisions = _run([_call("export", {"id": 9}, {"status": "running"})] * 5)
        assert _by(decisions, "stagnation") == {5: "warn"}
        assert decisions[-1].code == "POLL_STAGNANT"

    def test_poll_streak_restarts_on_change(self) -> None:
        """A poll whose state changes restarts its count."""
        states = ["pending"] * 4 + ["running"] + ["pending"] * 4
        assert _by(_run([_call("poll_job", {"id": 1}, s) for s in states]), "stagnation") == {}

    def test_poll_streak_ignores_other_tools(self) -> None:
        """Other calls between two polls do not break the streak of unchanged results."""
        calls = []
        for i in range(5):
            calls += [_call("poll_job", {"id": 1}, "pending"), *_filler(1, i)]
        decisions = _run(calls)
        assert _by(decisions, "stagnation") == {9: "warn"}


    @staticmethod
    def _greps(count: int,
               output: Any = "12:    ordered = sorted(items)\n") -> list[dict[str, Any]]:
        """``count`` greps that only widen the context window, the same output each time."""
        return [_call("bash", {"command": f'grep -n -C{i} "sorted" t.py'}, output)
                for i in range(count)]

    def test_stalled_result_warns_at_the_fourth_different_call(self) -> None:
        """Different reads in a row with one identical non-empty result: STALLED_RESULT warn at
        the 4th and on, never more (and never escalated by another detector)."""
        decisions = _run(self._greps(6))
        assert _by(decisions, "stagnation") == {4: "warn", 5: "warn", 6: "warn"}
        assert {d.code for d in decisions if d.action > Action.CONTINUE} == {"STALLED_RESULT"}
        assert decisions[3].evidence[0].details["call_indices"] == [1, 2, 3, 4]
        assert max(d.action for d in decisions) is Action.WARN

    def test_stalled_result_three_in_a_row_stay_quiet(self) -> None:
        """The third time, not the second: and three different calls are not yet a stall."""
        assert _by(_run(self._greps(3)), "stagnation") == {}

    def test_stalled_result_needs_calls_in_a_row(self) -> None:
        """Another call between them (or a failed, uncaptured or mutating one) ends the run."""
        greps = self._greps(4)
        others: list[dict[str, Any]] = [
            *_filler(1), _call("bash", {"command": "ls"}, error="boom"),
            _call("bash", {"command": "ls"}),
            _call("bash", {"command": "sed -i 's/a/b/' t.py"}, "")]
        for other in others:
            assert _by(_run([*greps[:2], other, *greps[2:]]), "stagnation") == {}

    @pytest.mark.parametrize("output", [
        "", "no results", "[]",
        "Your command ran successfully and did not produce any output.\n"
        "(Open file: /repo/src/Main.java)\n(Current directory: /repo)\nbash-$",
        "<returncode>0</returncode>\n<output>\n</output>", "No files found", "No matches found."],
        ids=["blank", "no-results", "empty-list", "swe-agent", "mini-swe-agent", "no-files",
             "no-matches"])
    def test_stalled_result_ignores_empty_results(self, output: str) -> None:
        """Different greps all empty (H29) are healthy, however many, also where the harness
        says so in its own words."""
        assert _by(_run(self._greps(8, output)), "stagnation") == {}

    @staticmethod
    def _thoughts(count: int) -> list[dict[str, Any]]:
        """``count`` reworded ``think`` calls, each returning nothing (tau-bench's tool)."""
        return [_call("think", {"thought": f"I need to ask the user for the user id ({i})."}, "")
                for i in range(count)]

    def test_thoughts_in_a_row_stall_at_the_fourth(self) -> None:
        """An agent that keeps rewording one thought instead of acting (a small model's
        tau-bench run: twelve `think` calls, then a transfer) learns nothing new: warn at the
        4th in a row, never more. Before, reworded thoughts were different calls returning an
        empty result, and nothing fired."""
        decisions = _run(self._thoughts(6))
        assert _by(decisions, "stagnation") == {4: "warn", 5: "warn", 6: "warn"}
        assert {d.code for d in decisions if d.action > Action.CONTINUE} == {"STALLED_RESULT"}
        assert _by(_run(self._thoughts(3)), "stagnation") == {}

    def test_thoughts_stall_without_their_results_captured(self) -> None:
        """A thought returns nothing by what it is: with results off (arguments captured),
        reworded thoughts in a row stall all the same (a small model's tau-bench run, six
        thoughts then a transfer, was missed). Without the arguments, whether they were
        reworded is not known, but four thoughts in a row are deliberating all the same: the
        4th warns. (It was the 8th: tau-bench ReAct runs of Qwen3-4B with four thoughts in a
        row, waiting for a user who had not spoken, were missed.) A captured result between
        them starts again."""
        unsaid = [_call("think", c["arguments"]) for c in self._thoughts(6)]
        assert _by(_run(unsaid), "stagnation") == {4: "warn", 5: "warn", 6: "warn"}
        assert _by(_run([_call("think") for _ in range(3)]), "stagnation") == {}
        assert _by(_run([_call("think") for _ in range(5)]), "stagnation") == {
            4: "warn", 5: "warn"}
        lookup = _call("get_user_details", {"user_id": "u1"}, '{"name": "A"}')
        assert _by(_run([*unsaid[:3], lookup, *unsaid[3:]]), "stagnation") == {}

    def test_thoughts_broken_by_an_action_or_the_user_start_again(self) -> None:
        """A call between thoughts, or a user's message (a new world version), is progress."""
        thoughts = self._thoughts(6)
        lookup = _call("get_user_details", {"user_id": "u1"}, '{"name": "A"}')
        assert _by(_run([*thoughts[:3], lookup, *thoughts[3:5]]), "stagnation") == {}
        engine = LoopEngine()
        found = {}
        for says in (False, True):
            run = engine.new_run()
            engine.process_model_turn(run, ModelTurn(  # the task: the run's first message
                "t0", 0, 1, True, None, input_sig="user: change my flight", user_input=True))
            codes = []
            for i, fields in enumerate(thoughts[:5]):
                if i == 3 and says:  # the user says something new before the 4th thought
                    engine.process_model_turn(run, ModelTurn(
                        "t1", 10 * i, 10 * i + 1, True, None, input_sig="user: it is u2",
                        user_input=True))
                codes.append(engine.process(run, tool_call(i, fields)).code)
            found[says] = codes
        assert found[False][3:] == ["STALLED_RESULT"] * 2
        assert "STALLED_RESULT" not in found[True]

    def test_stalled_result_ignores_writes_with_a_constant_result(self) -> None:
        """A constant success result of a write is its success (H19, H20)."""
        writes = [_call("write_file", {"path": f"f{i}.py", "content": str(i)}, "ok")
                  for i in range(8)]
        edits = [_call("bash", {"command": f"sed -i 's/x{i}/y/' a.py"}, "done") for i in range(8)]
        assert _by(_run(writes), "stagnation") == {}
        assert _by(_run(edits), "stagnation") == {}

    def test_stalled_result_counts_reads_only(self) -> None:
        """Plain calls with one constant answer (clicks landing on the same page) never count."""
        clicks = [_call("click", {"target": f"link {i}"}, "the same page") for i in range(8)]
        assert _by(_run(clicks), "stagnation") == {}

    def test_stalled_result_of_one_call_is_ordinary_stagnation(self) -> None:
        """The same call each time is STAGNANT_RESULT's, never STALLED_RESULT."""
        assert "STALLED_RESULT" not in _codes(_run([self._greps(1)[0]] * 6))

    def test_stalled_result_predicted_by_precheck(self) -> None:
        """Enforce mode's look-ahead predicts the warn the 4th call would get."""
        engine = LoopEngine()
        state = engine.new_run()
        greps = self._greps(4)
        for i, fields in enumerate(greps[:3]):
            engine.process(state, tool_call(i, fields))
        predicted = engine.precheck(state, "bash", greps[0]["arguments"])
        assert predicted.action is Action.WARN and predicted.code == "STALLED_RESULT"
        assert engine.precheck(state, "bash", {"command": "grep -n new t.py"}).action \
            is Action.CONTINUE


class TestRepeatDetector:
    def test_never_stops_by_itself(self) -> None:
        """Twenty identical calls without results reach replan and no further."""
        decisions = _run([_call("search", {"q": "x"})] * 20)
        assert _by(decisions, "repeat")[3] == "warn"
        assert set(_by(decisions, "repeat").values()) == {"warn", "replan"}
        assert max(d.action for d in decisions) is Action.REPLAN

    def test_reads_going_round_warn_over_three_windows(self) -> None:
        """SWE-agent-LM-32B viewed six ranges in turn, round and round, results not captured:
        each view came back every sixth call, twice in any twelve, and nothing fired. A read
        is counted over 36 calls too: its third round warns, never more. An edit between the
        rounds restarts the count, and calls that are not reads (tests run in turn) are
        counted in the last 12 only."""
        views = [_call("str_replace_editor", {"command": "view", "path": "/w/q.py",
                                              "view_range": [100 * i, 100 * i + 8]})
                 for i in range(6)]
        found = _by(_run(views * 5), "repeat")
        assert min(found) == 13 and set(found.values()) == {"warn"}
        edit = _call("str_replace_editor", {"command": "str_replace", "path": "/w/q.py",
                                            "old_str": "a", "new_str": "b"})
        assert _by(_run([*views, edit, *views, edit, *views]), "repeat") == {}
        runs = [_call("bash", {"command": f"python -m pytest -q tests/test_{i}.py"})
                for i in range(6)]
        assert _by(_run(runs * 4), "repeat") == {}

    @pytest.mark.parametrize("result", ["", None, "no results"], ids=["empty", "null", "none"])
    def test_quiet_when_results_are_captured(self, result: Any) -> None:
        """A captured result, even an empty one, hands the call to stagnation."""
        decisions = _run([_call("search", {"q": "x"}, result)] * 3)
        assert _by(decisions, "repeat") == {}
        assert _by(decisions, "stagnation") == {3: "warn"}

    @pytest.mark.parametrize("kind", ["poll", "exempt"])
    def test_skips_poll_and_exempt(self, kind: str) -> None:
        """Poll and exempt tools are never flagged for repetition."""
        config = LoopGuardConfig.create(tools={"tick": {"kind": kind}})
        assert _by(_run([_call("tick", {})] * 8, config), "repeat") == {}

    def test_without_arguments_or_results_a_call_tells_nothing(self) -> None:
        """A call with neither arguments nor result captured (a coding agent's default
        telemetry) equals no other: three of them are no repeat. With its arguments captured,
        they are; and with only its result, the same result three times is stagnation."""
        assert _by(_run([_call("search")] * 3), "repeat") == {}
        assert _by(_run([_call("search", {"q": "x"})] * 3), "repeat") == {3: "warn"}
        assert _by(_run([_call("search", None, "none")] * 3), "stagnation") == {3: "warn"}
        # an empty arguments object is captured: a call that takes none, the same each time
        assert _by(_run([_call("search", {})] * 3), "repeat") == {3: "warn"}
        # unless the tool took arguments earlier in the run: then an export (or an
        # instrumentation) lost them, and with no result the calls tell nothing (three
        # `web_fetch {}` of an IDE export warned in a healthy session)
        fetched = _call("web_fetch", {"url": "https://docs.example.com/auth"}, "Auth docs")
        lost = _call("web_fetch", {})
        assert _by(_run([fetched, lost, lost, lost]), "repeat") == {}
        assert _by(_run([fetched, *[_call("web_fetch", {}, "same")] * 3]), "stagnation") == \
            {4: "warn"}

    def test_restarts_after_a_mutating_call(self) -> None:
        """A mutating call (success assumed without a result) restarts the count; a failed
        one does not."""
        fetch, edit = _call("fetch", {"url": "a"}), _call("edit_file", {"path": "a.py"})
        assert _by(_run([fetch, fetch, edit, fetch, fetch, edit, fetch, fetch]), "repeat") == {}
        failed = _call("edit_file", {"path": "a.py"}, error="old_text not found")
        assert _by(_run([fetch, fetch, failed, fetch]), "repeat") == {4: "warn"}

    def test_reads_without_content_are_left_to_reread(self) -> None:
        """A read whose content was not captured may be another page of the file (offsets an
        export dropped): repeat does not count reads; a plain call it does."""
        read = _call("read_file_v2", {"target_file": "a.py"})
        assert _by(_run([read] * 5), "repeat") == {}
        assert _by(_run([_call("fetch", {"url": "a"})] * 5), "repeat") == \
            {3: "warn", 4: "warn", 5: "replan"}

    def test_edits_whose_content_was_not_captured_are_never_the_same_change(self) -> None:
        """An IDE export keeps only an edit's file: four such edits back to back may be four
        different edits, so they are no repeated change; an edit that says what it changes,
        four times, is. A search whose pattern was dropped (empty) is no repeat either."""
        bare = _call("edit_file_v2", {"target_file": "a.py"})
        assert _by(_run([bare] * 4), "repeat") == {}
        insert = _call("edit_file_v2", {"target_file": "a.py", "code_edit": "x = 1"})
        assert _by(_run([insert] * 4), "repeat") == {3: "warn", 4: "warn"}
        lost = _call("glob_file_search", {"query": "", "target_directory": "/r"}, "a.py")
        assert _by(_run([lost] * 4), "stagnation") == {}
        assert _by(_run([_call("glob_file_search", {"query": "*.py"}, "a.py")] * 4),
                   "stagnation") == {3: "warn", 4: "replan"}

    def test_a_one_line_diff_is_no_edit_content(self) -> None:
        """Cursor's export, having lost an edit, puts a status or an error line where its diff
        was (``Status: **loading**``, "The string to replace was not found in the file"), the
        same for every lost edit: four of them back to back were a repeated change (two
        healthy IDE sessions warned). A diff spans lines; one that does is still compared."""
        for line in ("Status: **loading**", "The string to replace was not found in the file"):
            lost = _call("edit_file_v2", {"diff": line})
            assert _by(_run([lost] * 4), "repeat") == {}, line
        real = _call("edit_file_v2", {"diff": "-x = 1\n+x = 2"})
        assert _by(_run([real] * 4), "repeat") == {3: "warn", 4: "warn"}

    def test_a_diff_of_markers_and_blanks_is_no_edit_content(self) -> None:
        """Cursor's export of an edit whose content it lost, with no file named: ``- \n+  \n``,
        the same for five new files in a row (two healthy sessions replanned at the 5th, as
        F24's same change back to back). A diff of markers and blanks alone says nothing; one
        line with content in it is compared."""
        lost = _call("edit_file", {"diff": "- \n+  \n"})
        assert _by(_run([lost] * 5), "repeat") == {}
        blank = _call("edit_file", {"diff": "- \n+ x\n"})
        assert _by(_run([blank] * 5), "repeat") == {3: "warn", 4: "warn", 5: "replan"}

    def test_tool_names_with_a_version_suffix_keep_their_kind(self) -> None:
        """``edit_file_v2`` is an edit: a read after it is a new observation; a to-do list
        tool is exempt (updating the plan again and again is not a loop)."""
        fetch = _call("fetch", {"url": "a"})
        edit = _call("edit_file_v2", {"target_file": "a.py", "code_edit": "y"})
        assert _by(_run([fetch, fetch, edit, fetch, fetch]), "repeat") == {}
        todo = _call("todo_write", {"merge": True})
        assert _by(_run([todo] * 6), "repeat") == {}

    def test_restarts_after_a_new_result(self) -> None:
        """A call whose captured result is new restarts the count; a known result does not."""
        same = _call("search", {"q": "x"})
        calls = [same, same, _call("run_tests", {}, "1 failed"), same, same,
                 _call("run_tests", {}, "1 failed"), same]
        assert _by(_run(calls), "repeat") == {7: "warn"}

    def test_same_change_back_to_back(self) -> None:
        """The same mutating call, identical arguments, back to back: warn at 3 whatever its
        results; anything between breaks the streak."""
        insert = {"command": "insert", "path": "A.java", "insert_line": 1, "new_str": "x"}
        calls = [_call("str_replace_editor", insert, f"now {n} lines") for n in range(6)]
        decisions = _run(calls)
        assert _by(decisions, "repeat") == {3: "warn", 4: "warn", 5: "replan", 6: "replan"}
        assert "same change" in decisions[2].hint
        spaced = [c for call in calls[:4] for c in (call, _call("think", {}, "hm"))]
        assert _by(_run(spaced), "repeat") == {}


class TestCycleDetector:
    @pytest.mark.parametrize(("length", "max_length", "expected"), [
        (2, 8, {4: "warn", 6: "stop"}),
        (8, 8, {16: "warn", 24: "stop"}),
        (9, 8, {20: "warn"}),
        (13, 8, {}),
        (9, 9, {18: "warn", 27: "stop"}),
    ], ids=["2-steps", "8-steps", "9-steps-as-a-block", "13-steps-too-long", "9-steps-allowed"])
    def test_cycle_lengths(self, length: int, max_length: int,
                           expected: dict[int, str]) -> None:
        """Cycles up to ``cycle_max_length`` steps are reported when a repetition completes;
        a longer one, up to ``cycle_max_length + cycle_max_gap``, only warns as a repeated block
        at its third occurrence."""
        steps = [_call(f"t{i}", {"i": i}, f"r{i}") for i in range(length)]
        config = LoopGuardConfig.create(cycle_max_length=max_length)
        assert _by(_run(steps * 3, config), "cycle") == expected

    def test_changing_results_break_the_cycle(self) -> None:
        """A B A B with advancing results is not a cycle."""
        calls = [_call(t, {}, f"r{i}") for i, t in enumerate("ABABAB")]
        assert _by(_run(calls), "cycle") == {}

    def test_without_results_never_a_cycle(self) -> None:
        """Absent results equal no other result: A B A B... without results is no cycle."""
        calls = [_call(t, {}) for t in "AB" * 6]
        assert _by(_run(calls), "cycle") == {}

    def test_batch_is_one_step(self) -> None:
        """The parallel calls of one turn form one step, in any order."""
        a, b, c = (_call("get", {"k": k}, k) for k in "abc")
        turns = [[a, b], [c], [b, a], [c]]
        calls = [{**call, "turn": turn} for turn, batch in enumerate(turns) for call in batch]
        assert _by(_run(calls), "cycle") == {6: "warn"}

    def test_same_step_repeated_is_not_a_cycle(self) -> None:
        """Period 1 (the same call again and again) is left to stagnation and repeat."""
        assert _by(_run([_call("A", {}, "r")] * 6), "cycle") == {}

    @pytest.mark.parametrize("kind", ["poll", "exempt"])
    def test_quiet_when_completed_by_poll_or_exempt(self, kind: str) -> None:
        """A repetition completed by a poll or exempt call is not reported."""
        config = LoopGuardConfig.create(tools={"B": {"kind": kind}})
        calls = [_call(t, {}, "same") for t in "ABAB"]
        assert _by(_run(calls, config), "cycle") == {}


class TestPeriodMatcherReference:
    """PeriodMatcher agrees with a brute-force reading of the whole sequence."""

    @staticmethod
    def _reference(sequence: list[str], max_period: int, min_period: int) -> tuple[int, int]:
        for period in range(1, max_period + 1):
            suffix = 0
            for i in range(len(sequence) - 1, period - 1, -1):
                if sequence[i] != sequence[i - period]:
                    break
                suffix += 1
            if suffix >= period:
                return (period, suffix) if period >= min_period else (0, 0)
        return 0, 0

    @given(st.lists(st.sampled_from("abcd"), max_size=60), st.sampled_from([2, 3, 5, 8]))
    def test_matches_the_reference(self, sequence: list[str], max_period: int) -> None:
        matcher = PeriodMatcher(max_period)
        for i, key in enumerate(sequence):
            matcher.push(key)
            for min_period in (1, 2):
                assert matcher.period(min_period) == self._reference(
                    sequence[:i + 1], max_period, min_period)

    @given(st.lists(st.tuples(st.sampled_from("abcd"), st.booleans()), max_size=60),
           st.sampled_from([2, 3, 5, 8]))
    def test_counts_follow_the_kept_keys(self, pushes: list[tuple[str, bool]],
                                         max_period: int) -> None:
        """The per-key counts that answer ``push`` match the kept keys, batches replaced too."""
        matcher = PeriodMatcher(max_period, max(1, max_period - 2))
        for key, replace in pushes:
            kept = list(matcher._keys)
            seen = (matcher.replace_last(key) if replace else matcher.push(key))
            assert seen == (key in (kept[:-1] if replace and kept else kept))
            assert matcher._counts == Counter(matcher._keys)


class TestCountingWindowReference:
    """CountingWindow (which drops old occurrences lazily) agrees with a brute-force window."""

    @given(st.lists(st.tuples(st.sampled_from("abcd"), st.integers(1, 4)), max_size=80),
           st.sampled_from([1, 2, 3, 6, 12]))
    def test_matches_the_reference(self, pushes: list[tuple[str, int]], size: int) -> None:
        """Positions advance by 1 to 4 (calls that push nothing); copies evolve on their own."""
        window, index, seen = CountingWindow(size), 0, []
        for key, step in pushes:
            index += step
            seen.append((key, index))
            if index % 3 == 0:  # a copy, and a copy of one key, answer as the window would
                expected = [(i, f"s{i}") for k, i in seen if k == key and i > index - size]
                assert window.copy().push(key, index, f"s{index}") == expected
                assert window.only(key).push(key, index, f"s{index}") == expected
            found = window.push(key, index, f"s{index}")
            assert found == [(i, f"s{i}") for k, i in seen if k == key and i > index - size]
        stored = sum(len(occurrences) for generation in (window._members, window._previous)
                     for occurrences in generation.values())
        assert stored <= 3 * size  # bounded, however many keys came and went


    @given(st.lists(st.tuples(st.sampled_from(["x:a", "x:b", "x:c", "y:a"]), st.integers(1, 4)),
                    max_size=80),
           st.sampled_from([2, 3, 6, 12]), st.integers(0, 40))
    def test_first_since_matches_the_reference(self, pushes: list[tuple[str, int]], size: int,
                                               after: int) -> None:
        """The latest first occurrence in the window, after ``after``, of another key with the
        prefix; and the occurrences of a key in the window."""
        window, index, seen = CountingWindow(size), 0, []
        for key, step in pushes:
            index += step
            seen.append((key, index))
            window.push(key, index, f"s{index}")
            firsts = [min(i for k, i in seen if k == other and i > index - size)
                      for other in {k for k, _ in seen}
                      if other != key and other.startswith("x:")
                      and any(k == other and i > index - size for k, i in seen)]
            expected = max([i for i in firsts if i > after], default=0)
            assert window.first_since("x:", key, after, index) == expected
            assert window.occurrences(key, index) == [
                (i, f"s{i}") for k, i in seen if k == key and i > index - size]


class TestResultCache:
    """A run reuses the analysis of its recent result texts, bounded by ``cycle_max_length``."""

    @staticmethod
    def _count_analyses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
        import otel_loopguard.engine as engine_module

        seen: list[str] = []
        real = engine_module.analyze_result

        def counting(result: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append(result)
            return real(result, *args, **kwargs)

        monkeypatch.setattr(engine_module, "analyze_result", counting)
        return seen

    def test_a_cycle_within_the_cache_is_analysed_once_per_step(
            self, monkeypatch: pytest.MonkeyPatch) -> None:
        seen = self._count_analyses(monkeypatch)
        engine = LoopEngine(LoopGuardConfig.create(cycle_max_length=8))
        run = engine.new_run()
        results = [f'{{"step": {i}, "fetched_at": "2026-01-01T00:00:0{i}Z"}}' for i in range(8)]
        for i in range(80):
            engine.process(run, ToolCall(tool=f"t{i % 8}", arguments={"i": i % 8},
                                         result=results[i % 8], has_result=True,
                                         start_time_ns=i + 1, end_time_ns=i + 2))
        assert len(seen) == 8
        assert len(run.results) == 8

    def test_the_cache_is_bounded(self, monkeypatch: pytest.MonkeyPatch) -> None:
        seen = self._count_analyses(monkeypatch)
        engine = LoopEngine(LoopGuardConfig.create(cycle_max_length=4))
        run = engine.new_run()
        for i in range(50):  # a cycle of 10 results: longer than the cache, never a hit
            engine.process(run, ToolCall(tool="t", arguments={"i": i % 10},
                                         result=f'{{"n": {i % 10}}}', has_result=True,
                                         start_time_ns=i + 1, end_time_ns=i + 2))
            assert len(run.results) <= 4
        assert len(seen) == 50


class TestCycleCost:
    def test_history_is_bounded_by_the_longest_period(self) -> None:
        """The matcher keeps at most ``max_period`` steps whatever the run length."""
        matcher = PeriodMatcher(8)
        for i in range(10_000):
            matcher.push(str(i % 7))
            assert len(matcher._history) <= 8
        assert matcher.period() == (7, 10_000 - 7)

    @pytest.mark.parametrize("steps", [100, 10_000])
    def test_comparisons_per_step_do_not_grow(self, steps: int) -> None:
        """Each push compares at most 2 x ``max_period`` keys (a membership scan, then the
        periods), for short and long runs alike."""
        comparisons = 0

        class Key(str):
            __hash__ = str.__hash__

            def __eq__(self, other: object) -> bool:
                nonlocal comparisons
                comparisons += 1
                return str.__eq__(self, other)

        matcher = PeriodMatcher(8)
        for i in range(steps):
            matcher.push(Key(i % 3))
        assert comparisons <= 2 * 8 * steps

    def test_detector_state_is_bounded(self) -> None:
        """The cycle detector's own state stays O(``cycle_max_length``) over a long run."""
        engine = LoopEngine(LoopGuardConfig.create(detectors=["cycle"]))
        run = engine.new_run()
        for i in range(5_000):
            engine.process(run, ToolCall(tool=f"t{i % 13}", arguments={"i": i}, result=i,
                                         has_result=True, turn=i))
        state = run.states[0]
        config = engine.config
        assert len(state.matcher._history) <= config.cycle_max_length + config.cycle_max_gap
        assert len(state.matcher._chains) == len(state.matcher._history)
        assert len(state.batch) == 1


class TestFailureDetector:
    @pytest.mark.parametrize(("text", "kind", "reason"), [
        ("HTTP 401 Unauthorized", "permanent", "401"),
        ("403 Forbidden", "permanent", "403"),
        ("404 page not found", "permanent", "404"),
        ("HTTP 408 Request Timeout", "retryable", "408"),
        ("429 Too Many Requests", "retryable", "429"),
        ("502 Bad Gateway", "retryable", "502"),
        ("EACCES: permission denied, open '/etc/app.conf'", "permanent", "eacces"),
        ("1 validation error for SearchArgs", "permanent", "validation error"),
        ("Unknown tool: frobnicate", "permanent", "unknown tool"),
        ("rate limit exceeded", "retryable", "rate limit"),
        ("request timed out after 30s", "retryable", "timed out"),
        ("service temporarily unavailable", "retryable", "temporar"),
        ("merge conflict", "retryable", "error"),
        ("An error occurred while running the tool. Please try again.", "retryable",
         "try again"),
        ("Tool execution failed. Error details are redacted.", "retryable", "error"),
        ("version 4.0.1 failed", "retryable", "error"),
        ('ERROR: syntax error at or near "all"', "permanent", "syntax error"),
        ("SyntaxError: unterminated string literal", "permanent", "syntaxerror"),
        ("CRITICAL ERROR: Missing required 'content' field in request body", "permanent",
         "missing required"),
        ("body: Field required", "permanent", "field required"),
    ], ids=["401", "403", "404", "408", "429", "502", "eacces", "validation", "unknown-tool",
            "rate-limit", "timed-out", "temporarily", "unclassified", "agents-sdk-result",
            "agents-sdk-status", "dotted-number", "sql-syntax", "python-syntax",
            "missing-required", "field-required"])
    def test_classification(self, text: str, kind: str, reason: str) -> None:
        """Codes win, then permanent phrases, then retryable ones; the rest is retryable."""
        assert classify_error(text) == (kind, reason)

    def test_made_up_arguments_rejected_alike_are_one_failure(self) -> None:
        """smolagents' page_down sent a made-up keyword argument six times, another each time,
        arguments not captured: each name made its own error, two of each, and nothing fired.
        The names are masked: the tool's signature rejection warns at the third, stops at the
        fourth. Another error of the tool is still another failure."""
        rejected = [_call("page_down", None, error="TypeError: PageDownTool.forward() got an "
                          f"unexpected keyword argument '{name}'")
                    for name in ("page_down", "page_down", "arguments", "", "x", "y")]
        assert _by(_run(rejected[:4]), "failure") == {3: "warn", 4: "stop"}
        other = _call("page_down", None, error="TypeError: PageDownTool.forward() missing 1 "
                      "required positional argument: 'n'")
        assert _by(_run([rejected[0], other, rejected[2]]), "failure") == {}

    def test_an_error_quoting_the_calls_own_values_is_the_same_call(self) -> None:
        """tau-bench's book_reservation sent four times unchanged, each rejected "total price is
        3195, but paid 1162", arguments not captured: an unclassified error, on the lenient
        other-targets ladder (warn at 5). Two numbers of the call's own in the same text again
        are the same call: warn at the third, never a stop. An error naming no such values
        stays on that ladder (H24: each gift card "balance not enough")."""
        echoed = _call("book_reservation", None, error="Error: payment amount does not add "
                       "up, total price is 3195, but paid 1162")
        assert _by(_run([echoed] * 5), "failure") == {3: "warn", 4: "warn", 5: "warn"}
        plain = _call("pay", None, error="Error: not enough balance in the payment method")
        assert _by(_run([plain] * 4), "failure") == {}
        one = _call("get_order", None, error="Error: order 1042 could not be loaded now")
        assert _by(_run([one] * 4), "failure") == {}  # one number: the order's

    def test_a_missing_required_field_resubmitted_is_a_permanent_failure(self) -> None:
        """An MCP action rejected four times for a body without its required field, arguments
        not captured: it was an unclassified error on the lenient any-target ladder (no warning
        before the fifth). It is a validation error: the same request lacks the field again."""
        error = "CRITICAL ERROR: Missing required 'content' field in request body"
        blind = _call("execute_action", None, error=error)
        assert _by(_run([blind] * 4), "failure") == {3: "warn", 4: "stop"}
        seen = _call("execute_action", {"action_name": "create_or_update_file"}, error=error)
        assert _by(_run([seen] * 2), "failure") == {2: "stop"}

    @given(st.lists(st.sampled_from([
        "Unauthorised", "AUTH", "Permission_Denied", "EACCES", "not found", "No such FILE",
        "Bad Request", "KeyError", "rate-limit", "Too many requests", "TIMED OUT", "busy",
        "Connection Refused", "try again", "\u017fchema", "\u212aeyError", "\u0131nvalid", "é",
        " ", "x",
        "author", "valueerror", "time_out", "\n", "User Rejected", "CANCELED", "by the user",
        "Interrupted"]), max_size=8).map("".join))
    def test_phrases_as_a_case_insensitive_search_finds_them(self, text: str) -> None:
        """The cheaper search of ASCII text finds what one case-insensitive search finds, and
        other text (the long s, the Kelvin sign, the dotless i) still folds as ``re`` does."""
        def reference(text: str) -> tuple[str, str]:
            if re.search(_DECLINED_WORDS, text[:300], re.IGNORECASE):
                return "declined", "declined"
            for kind, pattern in (("permanent", _OLD_PERMANENT), ("retryable", _OLD_RETRYABLE)):
                hit = re.search(pattern, text, re.IGNORECASE)
                if hit is not None:
                    return kind, hit.group(0).lower()
            return "retryable", "error"

        assert classify_error(text) == reference(text)

    @given(st.lists(st.sampled_from([
        "not", "found", " ", "_", "no", "such", "file", "match", "exact", "could", "find",
        "type", "error", "key", "value", "valid", "in", "a", "auth", "api", "-", "missing",
        "required", "time", "out", "rate", "limit", "step", "round", "s", "connection", "reset",
        "user", "by", "the", "cancelled", "Permission", "DENIED", "\u212a", "\u017f", "x"]),
        max_size=10).map("".join))
    def test_only_the_phrases_whose_words_are_there_are_searched(self, text: str) -> None:
        """Searching only the phrases whose words the text holds finds what the whole list,
        as one case-insensitive alternation in its order, finds first."""
        from otel_loopguard.detectors.failure import _DECLINED, _PERMANENT, _RETRYABLE

        def first(phrases: tuple[tuple[str, str], ...], text: str) -> str | None:
            hit = re.search("|".join(p for p, _ in phrases), text, re.IGNORECASE)
            return None if hit is None else hit.group(0).lower()

        declined = first(_DECLINED, text[:300])
        permanent = first(_PERMANENT, text)
        retryable = first(_RETRYABLE, text)
        kind, reason = classify_error(text)
        if declined is not None:
            assert (kind, reason) == ("declined", "declined")
        elif re.search(r"(?<![\d.])[45]\d\d(?![\d.])", text) is None:
            expected = ("permanent", permanent) if permanent is not None else \
                ("retryable", retryable or "error")
            assert (kind, reason) == expected

    @given(st.lists(st.sampled_from([
        "0", "1", "9", "a", "F", "f", "g", "\u0661", "\uff11", "\u212a", "-", "T", "t", " ", ":",
        ".", "Z", "\x1c", "\u00e9", "12345", "2024-01-02", "2024-01-02t1", "0123456789ab",
        "DEADBEEFcafe"]),
        max_size=12).map("".join))
    def test_error_masking_matches_the_case_insensitive_pattern(self, text: str) -> None:
        """Ids, long numbers and date-times of an error are masked as the case-insensitive
        pattern masks them, whatever the digits and letters (Arabic-Indic and full-width
        digits, the Kelvin sign)."""
        from otel_loopguard._run_state import _MASK_RE

        reference = re.compile(r"\b[0-9a-f]{12,}\b|\d{5,}|\d{4}-\d{2}-\d{2}[T ][\d:.]+\S*",
                               re.IGNORECASE)
        assert _MASK_RE.sub("#", text) == reference.sub("#", text)

    def test_every_phrase_names_a_word_it_contains(self) -> None:
        """A text without a phrase's word is never searched: each word is literal in its phrase."""
        from otel_loopguard.detectors.failure import _DECLINED, _PERMANENT, _RETRYABLE

        for phrase, word in _DECLINED + _PERMANENT + _RETRYABLE:
            assert word in phrase and re.escape(word) == word, phrase

    @pytest.mark.parametrize("text", ["ValidationError", "PermissionError", "FileNotFoundError",
                                      "DoesNotExist", "method_not_allowed", "NotAllowed"])
    def test_exception_type_names(self, text: str) -> None:
        """Exception type names of permanent errors classify as permanent: every phrase also
        matches without its spaces or with underscores (Django's ``DoesNotExist`` was not)."""
        assert classify_error(text)[0] == "permanent"

    @pytest.mark.parametrize("text", ["TryAgain", "timed_out", "TimedOut", "try_again later"])
    def test_retryable_names(self, text: str) -> None:
        """The same for retryable phrases (``timed_out``, ``TryAgain`` were unclassified)."""
        assert classify_error(text) == ("retryable", text.lower().split()[0])

    def test_a_subclass_sees_every_success(self) -> None:
        """The engine spares the built-in class successes before a failure, not a subclass."""
        from otel_loopguard.detectors import FailureDetector

        class Counting(FailureDetector):
            seen = 0

            def observe(self, state: Any, step: Any) -> Evidence | None:
                Counting.seen += 1
                return super().observe(state, step)

        engine = LoopEngine(detectors=[Counting()])
        _run([_call("get", {"id": i}, "ok") for i in range(4)], engine=engine)
        assert Counting.seen == 4

    def test_a_detector_that_declares_it_waits_for_the_first_failure(self) -> None:
        """``quiet_until_failure``: a subclass that declares it, or any protocol detector, is
        called from the run's first failure on (that failure included), not before."""
        from otel_loopguard.detectors import FailureDetector

        seen: list[int] = []

        class Declared(FailureDetector):
            quiet_until_failure = True

            def observe(self, state: Any, step: Any) -> Evidence | None:
                seen.append(step.index)
                return super().observe(state, step)

        class Plain:
            name = "plain"
            quiet_until_failure = True

            def new_state(self) -> None:
                return None

            def observe(self, state: Any, step: Any) -> Evidence | None:
                seen.append(-step.index)
                return None

        engine = LoopEngine(detectors=[Declared(), Plain()])
        calls = [_call("get", {"id": 1}, "ok"), _call("get", {"id": 2}, "ok"),
                 _call("get", {"id": 3}, error="HTTP 500"), _call("get", {"id": 4}, "ok")]
        _run(calls, engine=engine)
        assert seen == [3, -3, 4, -4]

    def test_success_resets(self) -> None:
        """A success of the tool resets its failures."""
        fail, ok = _call("fetch", {"id": 1}, error="HTTP 429"), _call("fetch", {"id": 1}, "ok")
        assert _by(_run([fail, fail, ok, fail, fail]), "failure") == {}

    def test_other_tools_do_not_reset(self) -> None:
        """Another tool's success between two failures does not reset the count."""
        fail = _call("fetch", {"id": 1}, error="HTTP 429")
        calls = [fail, _call("search", {"q": "x"}, "hit"), fail, fail]
        assert _by(_run(calls), "failure") == {4: "warn"}

    def test_volatile_parts_of_errors_are_masked(self) -> None:
        """Errors that differ only in request numbers are the same error."""
        calls = [_call("get", {"path": "/data/report.csv", "attempt": i},
                       error=f"record {n} not found")
                 for i, n in enumerate((81723, 99102, 55210, 61234))]
        assert _by(_run(calls), "failure") == {3: "warn", 4: "stop"}

    def test_different_errors_do_not_add_up(self) -> None:
        """Different permanent errors of one tool are counted apart."""
        calls = [_call("get", {"id": 1}, error="not found"),
                 _call("get", {"id": 2}, error="permission denied")]
        assert _by(_run(calls), "failure") == {}

    def test_structured_error_on_an_ok_span(self) -> None:
        """A structured error result counts as a failure even when the span is OK."""
        calls = [_call("crm", {"id": 42}, {"status": 403, "message": "forbidden"})] * 2
        assert _by(_run(calls), "failure") == {2: "stop"}

    def test_exempt_is_never_flagged(self) -> None:
        """An exempt tool failing identically is not flagged."""
        config = LoopGuardConfig.create(tools={"fetch": {"kind": "exempt"}})
        decisions = _run([_call("fetch", {"id": 1}, error="HTTP 401")] * 4, config)
        assert all(d.action is Action.CONTINUE for d in decisions)

    def test_retryable_failures_without_arguments_are_not_known_to_be_one_call(self) -> None:
        """Without arguments (a coding agent's tool events at its default level) no two failing
        calls are known to be the same call: the tool's same unclassified error, or the same
        refusal of the user's, counts as on other targets, a warning from the 5th, never a stop
        by itself; with arguments, from the 3rd. A classified retryable error (a 429) keeps its
        ladder: ``test_failure_ladder``."""
        error = "The user denied this operation."
        unknown = _call("execute_command", error=error)
        assert _by(_run([unknown] * 7), "failure") == {5: "warn", 6: "warn", 7: "warn"}
        same = _call("execute_command", {"command": "docker-compose ps"}, error=error)
        assert _by(_run([same] * 5), "failure") == {3: "warn", 4: "warn", 5: "stop"}

    def test_permanent_failures_whose_arguments_were_lost_are_not_one_call(self) -> None:
        """An empty arguments object, where the run sent the tool's arguments before, is
        arguments an export lost: two edits failing with the same "not found" are then two
        edits of unknown files, not one edit resubmitted (no stop at the second); the same
        error again counts as on one target, a warning at the 3rd and a stop at the 4th, as
        with no arguments at all. A tool that takes no arguments keeps the stop at 2."""
        error = "The string to replace was not found in the file."
        first = _call("edit_file", {"target_file": "a.tsx", "diff": "+x"}, "")
        lost = _call("edit_file", {}, error=error)
        assert _by(_run([first, *[lost] * 4]), "failure") == {4: "warn", 5: "stop"}
        assert _by(_run([_call("edit_file", error=error)] * 4), "failure") == {3: "warn", 4: "stop"}
        none_taken = _call("list_projects", {}, error="401 unauthorized")
        assert _by(_run([none_taken] * 2), "failure") == {2: "stop"}

    def test_a_build_resumed_after_each_timeout_is_progress(self) -> None:
        """A long build killed at the harness's time limit and started again, with fewer
        targets left each time, fails the same way with another output: progress, not the
        same failure (RepoLaunch's ClickHouse and ROOT builds, healthy; the same timeout
        seven times stopped them). The same output each time is the same failure."""
        build = {"command": "cmake --build build --parallel 1"}
        resumed = [_call("command", build, f"[{n}/14474] Building CXX object", error="timed out")
                   for n in (8256, 3308, 2561, 2096, 1426)]
        assert _by(_run(resumed), "failure") == {}
        stuck = [_call("command", build, "[12/14474] Building CXX object", error="timed out")] * 5
        assert _by(_run(stuck), "failure") == {3: "warn", 4: "warn", 5: "stop"}

    def test_redacted_agents_sdk_errors_look_retryable(self) -> None:
        """The Agents SDK's redacted errors follow the retryable ladder: nothing at 2, warn at 3."""
        status = ("Error running tool (non-fatal): {'tool_name': 'fetch_account', 'error': "
                  "'Tool execution failed. Error details are redacted.'}")
        call = _call("fetch_account", {"account_id": 42},
                     "An error occurred while running the tool. Please try again.", error=status)
        assert _by(_run([call] * 3), "failure") == {3: "warn"}


class TestDeclinedCalls:
    @pytest.mark.parametrize("text", [
        "User rejected update to specs/cli_spec.py", "No (tell Claude what to do differently)",
        "The user doesn't want to proceed with this tool use. The tool use was rejected",
        "cancelled", "Canceled.", "Interrupted by user", "The user denied this operation.",
        "[Operation Cancelled] Reason: User did not allow tool call",
        "Error: the request was cancelled by the user"])
    def test_a_users_refusal_is_declined(self, text: str) -> None:
        """What coding agents say of a call their user turned down or stopped."""
        assert classify_error(text) == ("declined", "declined")

    @pytest.mark.parametrize("text", [
        "context canceled", "job cancelled after 3 retries", "permission denied",
        "403 Forbidden: request denied", "Error: String to replace not found in file."])
    def test_a_tools_own_failure_is_not(self, text: str) -> None:
        """A cancellation or denial of the tool's own is a failure like any other."""
        assert classify_error(text)[0] != "declined"


class TestMutatingFailureDetector:
    def test_a_server_check_writing_to_dev_null_changes_nothing(self) -> None:
        """``curl -s -o /dev/null -w "%{http_code}" URL`` failing while a server restarts is
        a check, not a failing write to the URL (a mutating_failure warn on a healthy run of
        an unseen audit); ``-o`` into a file is still a write."""
        check = 'curl -s -o /dev/null -w "%{http_code}" http://localhost:3000/api/auth/me'
        calls = [_call("bash", {"command": check}, "000", error="exit code 7")] * 3
        assert _by(_run(calls), "mutating_failure") == {}
        fetch = "curl -s -o me.json http://localhost:3000/api/auth/me"
        calls = [_call("bash", {"command": fetch}, "", error="exit code 7")] * 3
        assert _by(_run(calls), "mutating_failure") == {3: "warn"}

    def test_mcp_suffix_is_mutating(self) -> None:
        """An MCP tool whose name ends in ``__edit_file`` is mutating."""
        calls = [_call("fs__edit_file", {"path": "a"}, error="old_text not in file")] * 4
        assert _by(_run(calls), "mutating_failure") == {3: "warn", 4: "stop"}

    def test_memory_tools_that_write_are_mutating(self) -> None:
        """An agent's memory writes (Letta's, BFCL's) are changes: the same rejected write
        warns at the third, and a search repeated around new writes is a new observation."""
        add = _call("core_memory_add", {"key": "budget", "value": "100"},
                    error="Key name must be unique")
        assert _by(_run([add] * 4), "mutating_failure") == {3: "warn", 4: "stop"}
        search = _call("archival_memory_search", {"query": "budget"}, "[]")
        calls = [search, search]
        for n in range(2):
            calls += [_call("archival_memory_insert", {"content": f"note {n}"}, "ok"), search]
        assert _by(_run(calls), "stagnation") == {}
        assert _by(_run([search] * 4), "stagnation") == {3: "warn", 4: "replan"}

    def test_a_key_is_a_target(self) -> None:
        """A record's key names it as an id does: the same key rejected again and again is
        one streak, its value reworded each time, whatever other keys the tool writes in
        between (a memory agent re-adding the keys it has just added, in other words)."""
        def add(key: str, value: str, error: str | None = None) -> dict[str, Any]:
            if error:
                return _call("core_memory_add", {"key": key, "value": value}, error=error)
            return _call("core_memory_add", {"key": key, "value": value}, "ok")

        taken = [add("team_size", f"180 people, take {n}", "Key name must be unique")
                 for n in range(3)]
        calls = [taken[0], add("a", "x"), taken[1], add("b", "y"), taken[2]]
        assert _by(_run(calls), "mutating_failure") == {5: "warn"}
        assert _by(_run([taken[0], add("team_size", "z"), taken[1], add("b", "y"), taken[2]]),
                   "mutating_failure") == {}

    def test_other_arguments_restart_the_streak(self) -> None:
        """A failure with other arguments starts a new streak."""
        calls = [_call("edit_file", {"path": p}, error="old_text not in file") for p in "aba"]
        assert _by(_run(calls), "mutating_failure") == {}

    def test_success_restarts_the_streak(self) -> None:
        """A success of the tool restarts the streak."""
        fail = _call("edit_file", {"path": "a"}, error="old_text not in file")
        calls = [fail, _call("edit_file", {"path": "a"}, "ok"), fail]
        assert _by(_run(calls), "mutating_failure") == {}

    def test_other_tools_in_between(self) -> None:
        """Other tools' calls between two identical failures do not break the streak."""
        fail = _call("edit_file", {"path": "a"}, error="old_text not in file")
        calls = [fail, _call("read_file", {"path": "a"}, "text"), fail, fail]
        assert _by(_run(calls), "mutating_failure") == {4: "warn"}

    def test_other_content_on_the_same_target_adds_up(self) -> None:
        """The same error on the same file counts whether or not the content tried changed."""
        calls = [_call("edit_file", {"path": "a", "new": f"v{i}"}, error="IndentationError")
                 for i in range(4)]
        assert _by(_run(calls), "mutating_failure") == {3: "warn", 4: "stop"}

    def test_success_elsewhere_keeps_the_streak(self) -> None:
        """A success on another target does not end a target's streak; one on it does."""
        fail = _call("edit_file", {"path": "a"}, error="old_text not in file")
        elsewhere = [_call("edit_file", {"path": f"b{i}"}, "ok") for i in range(2)]
        calls = [fail, elsewhere[0], fail, elsewhere[1], fail]
        assert _by(_run(calls), "mutating_failure") == {5: "warn"}
        calls = [fail, fail, _call("edit_file", {"path": "a", "old": "x"}, "ok"), fail, fail]
        assert _by(_run(calls), "mutating_failure") == {}

    @staticmethod
    def _refused(edits: int, *, said_between: bool) -> list[str]:
        """Edits of one file the user turns down, with or without a word from them between."""
        from otel_loopguard.types import ModelTurn

        engine = LoopEngine()
        run = engine.new_run()
        actions = []
        for n in range(edits):
            if said_between and n:
                engine.process_model_turn(run, ModelTurn(
                    span_id=f"t{n}", input_sig=f"do it this way, take {n}", user_input=True,
                    requested_tools=True))
            decision = engine.process(run, tool_call(n, _call(
                "edit_file", {"path": "a.py", "new": f"v{n}"},
                error="User rejected update to a.py")))
            actions.append(decision.action.label)
        return actions

    def test_a_refusal_after_the_users_words_is_a_new_attempt(self) -> None:
        """An edit the user turns down and then explains is tried again differently: each
        refusal after the user's new words starts over (an interactive session, where the
        developer declines a change and says what they want instead)."""
        assert self._refused(5, said_between=True) == ["continue"] * 5
        # with nothing said between them, refusals of one file add up as any failure does
        assert self._refused(4, said_between=False)[2:] == ["warn", "stop"]

    def test_an_edit_that_says_it_changed_nothing_failed(self) -> None:
        """Moatless returns ``No changes were made`` as a plain result when an edit's old and
        new text are the same: edits of one file told so again and again are a failing edit
        (its astropy-14182, a loop of six), not six changes of the file, each of which made
        the next one look new. Read only at the head of a mutating call's result."""
        said = "The old_str and new_str are the same. No changes were made."
        calls = [_call("str_replace_editor", {"command": "str_replace", "path": "t.py",
                                              "old_str": f".0 {i}", "new_str": f".0 {i}"}, said)
                 for i in range(4)]
        assert _by(_run(calls), "mutating_failure") == {3: "warn", 4: "stop"}
        # an edit whose result only quotes those words further down changed the file
        quoted = [_call("str_replace_editor", {"command": "str_replace", "path": "t.py",
                                               "old_str": f"a{i}", "new_str": f"b{i}"},
                        "The file t.py has been edited.\n" + "x = 1\n" * 60 + f"# {said} {i}")
                  for i in range(4)]
        assert _by(_run(quoted), "mutating_failure") == {}
        # a read that shows them is a read
        reads = [_call("read_file", {"path": f"n{i}.txt"}, said) for i in range(4)]
        assert _by(_run(reads), "failure") == {}

    def test_another_error_restarts_the_streak(self) -> None:
        """Another error on the same target starts a new streak."""
        calls = [_call("edit_file", {"path": "a", "new": str(i)}, error=e)
                 for i, e in enumerate(["SyntaxError", "SyntaxError", "IndentationError"])]
        assert _by(_run(calls), "mutating_failure") == {}

    def test_interface_edits_of_one_place_add_up(self) -> None:
        """SWE-agent's interface edits name no file (the open one): ``edit 897:902`` with its
        text, rewritten each time and refused each time by the lint check with one error
        (CodeR's sympy-12481, a loop). Their place is their first line; before, each new text
        was its own target and nothing was flagged."""
        def edit(lines: str, text: str, error: str) -> dict[str, Any]:
            return _call("edit", {"command": f"edit {lines}\n{text}\nend_of_edit"},
                         error=f"edit rejected: {error}")

        indent = "E999 IndentationError: unexpected indent"
        calls = [edit("897:902", f"        temp = flatten(args){' ' * i}", indent)
                 for i in range(3)] + [edit("897:903", "        temp = args", indent)]
        assert _by(_run(calls), "mutating_failure") == {3: "warn", 4: "stop"}
        # other places (the agent working down the file) are other targets
        elsewhere = [edit(f"{line}:{line + 2}", "x = (", indent) for line in (10, 40, 90, 120)]
        assert _by(_run(elsewhere), "mutating_failure") == {}

    def test_a_rewrite_of_the_file_a_command_reads_after_cd_ends_its_streak(self) -> None:
        """``cd /app && conda env create -f environment.yml`` reads ``/app/environment.yml``:
        rewriting that file (by its absolute path) and running the command again is trial and
        error, not the same failure (Terminal-Bench's conda-env-conflict-resolution, healthy;
        before, the relative and the absolute path were two targets and it stopped at 4)."""
        create = _call("bash", {"command": "cd /app && conda env create -f environment.yml"},
                       error="timed out")
        def rewrite(version: str) -> dict[str, Any]:
            return _call("bash", {"command": f"cat <<'EOF' > /app/environment.yml\n"
                                             f"  - python={version}\nEOF"}, "")
        calls = [create, rewrite("3.10"), create, rewrite("3.11"), create, rewrite("3.9"),
                 create]
        assert _by(_run(calls), "mutating_failure") == {}
        # nothing rewritten between: the same failure three times is still one
        assert _by(_run([create] * 4), "mutating_failure") == {3: "warn", 4: "stop"}

    def test_a_file_named_with_and_without_its_directory_is_one_target(self) -> None:
        """A harness runs a bare command where ``cd /testbed`` would go: the same failing edit
        of ``pkg/a.py``, written with and without ``cd /testbed &&``, is one streak, and a
        success on ``/testbed/pkg/a.py`` ends it. Another file of that name is another."""
        def sed(prefix: str, path: str, error: str | None = "sed: no match") -> dict[str, Any]:
            return _call("bash", {"command": f"{prefix}sed -i 's/x/y/' {path}"},
                         "" if error is None else None, error=error)
        mixed = [sed("cd /testbed && ", "pkg/a.py"), sed("", "pkg/a.py"),
                 sed("", "/testbed/pkg/a.py"), sed("cd /testbed && ", "pkg/a.py")]
        assert _by(_run(mixed), "mutating_failure") == {3: "warn", 4: "stop"}
        ended = [*mixed[:2], sed("", "/testbed/pkg/a.py", error=None), *mixed[2:]]
        assert _by(_run(ended), "mutating_failure") == {}
        others = [sed("", "pkg/a.py"), sed("", "/testbed/lib/a.py"), sed("", "/srv/a.py")]
        assert _by(_run(others), "mutating_failure") == {}

    @pytest.mark.parametrize(("one", "other", "same"), [
        ("bash\x00pkg/a.py", "bash\x00/testbed/pkg/a.py", True),
        ("bash\x00/testbed/pkg/a.py", "bash\x00./pkg/a.py", True),
        ("bash\x00a.py", "bash\x00/testbed/ba.py", False),  # another file's name ends so
        ("bash\x00scipy", "bash\x00/opt/scipy", False),  # a package, not a path
        ("bash\x00pkg/a.py", "edit\x00/testbed/pkg/a.py", False),  # another tool
        ("bash\x00/a/x.py", "bash\x00/b/x.py", False),  # two absolute paths
    ])
    def test_which_names_are_one_file(self, one: str, other: str, same: bool) -> None:
        """A relative path and an absolute path ending in it, of one tool, are one target."""
        from otel_loopguard.detectors.failure import _same_target
        assert _same_target(one, other) is same
        assert _same_target(other, one) is same

    def test_a_program_after_the_change_owns_the_failure(self) -> None:
        """``cat > index.rst <<EOF ... EOF`` then ``sphinx-build`` in one line exits with the
        build's status: three different pages, each built with the broken link the agent
        meant to test, are three experiments, not a write failing three times (SWE-bench's
        sphinx-7985 with Gemini 3 Pro, healthy; before, they stopped at 4). The same line
        failing the same way again and again still counts, as the call itself."""
        def page(text: str) -> dict[str, Any]:
            return _call("bash", {"command": f"cat <<'EOF' > r/index.rst\n{text}\nEOF\n"
                                             "cd r && sphinx-build -b linkcheck . _build"},
                         "broken link", error="exit code 1")
        calls = [page(f"broken link {i}") for i in range(4)]
        assert _by(_run(calls), "mutating_failure") == {}
        assert _by(_run([page("broken link")] * 4), "mutating_failure") == {3: "warn",
                                                                            4: "stop"}

    def test_non_mutating_tools_are_ignored(self) -> None:
        """A tool that is not mutating never gets this evidence."""
        calls = [_call("search", {"q": "x"}, error="conflict")] * 3
        assert _by(_run(calls), "mutating_failure") == {}


class TestRereadDetector:
    def test_counts_anywhere_in_the_run(self) -> None:
        """Three identical reads far apart warn, although stagnation's window lost them."""
        read = _call("read_file", {"path": "a.py", "range": "0-100"}, "content")
        decisions = _run([read, *_filler(15), read, *_filler(15, 50), read])
        assert _by(decisions, "reread") == {33: "warn"}
        assert _by(decisions, "stagnation") == {}

    def test_changed_content_is_a_new_read(self) -> None:
        """The same read returning new content does not count."""
        calls = [_call("read_file", {"path": "a.py"}, f"v{i}") for i in range(4)]
        assert _by(_run(calls), "reread") == {}

    @pytest.mark.parametrize("config", [
        LoopGuardConfig.create(read_tools=["cat"]),
        LoopGuardConfig.create(tools={"cat": {"kind": "read"}}),
    ], ids=["read_tools", "kind"])
    def test_read_tools_are_configurable(self, config: LoopGuardConfig) -> None:
        """A tool listed in ``read_tools`` or given kind read is watched."""
        read = _call("cat", {"path": "a"}, "x")
        decisions = _run([read, *_filler(15), read, *_filler(15, 50), read], config)
        assert _by(decisions, "reread") == {33: "warn"}

    def test_without_results_reads_never_count(self) -> None:
        """Without captured content a re-read is never counted (absent equals no other), only
        ``repeat`` sees identical reads, and in its window only."""
        read = _call("read_file", {"path": "a.py"})
        calls = [read, *_filler(15), read, *_filler(15, 50), read, *_filler(15, 100), read,
                 *_filler(15, 150), read]
        decisions = _run(calls)
        assert _by(decisions, "reread") == {}
        assert _by(decisions, "repeat") == {}  # each re-read is outside its 12-call window
        assert _by(_run([read] * 6), "reread") == {}

    def test_without_results_other_reads_do_not_count(self) -> None:
        """Without content, only the same read (same arguments) counts."""
        calls = [_call("read_file", {"path": p}) for p in ("a.py", "b.py", "c.py", "d.py")]
        assert _by(_run(calls * 2), "reread") == {}


class TestBatchDetector:
    @staticmethod
    def _turns(*batches: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**call, "turn": turn} for turn, batch in enumerate(batches) for call in batch]

    def test_order_insensitive(self) -> None:
        """The same two calls in any order, three turns in a row, warn once."""
        a, b = _call("price", {"s": 1}, "12"), _call("stock", {"s": 1}, "0")
        decisions = _run(self._turns([a, b], [b, a], [a, b]), LoopGuardConfig.create(
            detectors=["batch"]))
        assert _by(decisions, "batch") == {6: "warn"}

    def test_a_few_other_turns_between_repeats_still_count(self) -> None:
        """Another batch between repeats does not hide them: the third identical batch warns."""
        a, b = _call("price", {"s": 1}, "12"), _call("stock", {"s": 1}, "0")
        c, d = _call("price", {"s": 2}, "7"), _call("stock", {"s": 2}, "3")
        calls = self._turns([a, b], [a, b], [c, d], [a, b])
        assert _by(_run(calls), "batch") == {8: "warn"}

    def test_more_other_turns_than_the_gap_restart_the_count(self) -> None:
        """More than ``cycle_max_gap`` other turns between two repeats restart the count."""
        a, b = _call("price", {"s": 1}, "12"), _call("stock", {"s": 1}, "0")
        others = [[_call("think", {"n": i}, f"t{i}")] for i in range(5)]
        calls = self._turns([a, b], [a, b], *others, [a, b])
        config = LoopGuardConfig.create(detectors=["batch"])
        assert _by(_run(calls, config), "batch") == {}
        narrow = config.replace(cycle_max_gap=5)
        assert _by(_run(calls, narrow), "batch") == {11: "warn"}

    def test_single_calls_are_not_batches(self) -> None:
        """One call per turn never makes a repeated batch."""
        assert _by(_run(self._turns(*[[_call("x", {}, "r")]] * 5)), "batch") == {}

    def test_overlapping_times_form_a_batch(self) -> None:
        """Without model turns, calls that overlap in time form one batch."""
        calls = []
        for turn in range(3):
            base = 1_000 * (turn + 1)
            calls += [_call("price", {"s": 1}, "12", start=base, end=base + 50),
                      _call("stock", {"s": 1}, "0", start=base + 10, end=base + 60)]
        assert _by(_run(calls, LoopGuardConfig.create(detectors=["batch"])), "batch") == {
            6: "warn"}


class TestHandoffDetector:
    @staticmethod
    def _handoffs(pairs: Sequence[tuple[str, str]],
                  config: LoopGuardConfig | None = None) -> list[Decision]:
        engine = LoopEngine(config)
        run = engine.new_run()
        return [engine.process_handoff(run, Handoff(from_agent=a, to_agent=b, span_id=f"{i:016x}"))
                for i, (a, b) in enumerate(pairs)]

    @pytest.mark.parametrize(("pairs", "first_stop"), [
        ([("a", "b"), ("b", "a")] * 2, 4),
        ([("a", "b"), ("b", "c"), ("c", "a")] * 2, 6),
        ([("s", "w")] * 6, None),
        ([("a", "b"), ("b", "a"), ("a", "c"), ("c", "a")], None),
        ([("a", "b")], None),
        ([("a", "b"), ("b", "a")], None),
        ([("a", "b"), ("a", "b"), ("b", "a"), ("b", "a"), ("a", "b"), ("b", "a")], 6),
        ([("", "b"), ("", "a"), ("", "b"), ("", "a"), ("", "b")], 5),
        ([("s", "w1"), ("s", "w2"), ("s", "w1"), ("s", "w2"), ("s", "w1")], None),
        ([("a", "b"), ("b", "a"), ("a", "a"), ("a", "b"), ("b", "a")], 5),
        ([("a", "b"), ("b", "a"), ("a", "c"), ("c", "a"), ("a", "b"), ("b", "a"), ("a", "c"),
          ("c", "a")], 8),
    ], ids=["ping-pong", "three-agents", "not-chained", "different-cycles", "single",
            "there-and-back", "reported-twice", "unknown-sources", "supervisor-dispatch",
            "self-handoff", "cycle-through-the-same-agent"])
    def test_closed_cycles(self, pairs: list[tuple[str, str]], first_stop: int | None) -> None:
        """The second identical closed cycle of chained handoffs stops."""
        decisions = self._handoffs(pairs)
        stops = [i + 1 for i, d in enumerate(decisions) if d.action is Action.STOP]
        assert (stops[0] if stops else None) == first_stop
        if stops:
            assert decisions[stops[0] - 1].code == "HANDOFF_LOOP"

    def test_cycle_longer_than_the_maximum(self) -> None:
        """A cycle of more agents than ``handoff_max_cycle`` is not reported."""
        ring = [(f"a{i}", f"a{(i + 1) % 6}") for i in range(6)] * 2
        assert all(d.action is Action.CONTINUE for d in self._handoffs(ring))
        config = LoopGuardConfig.create(handoff_max_cycle=6)
        assert self._handoffs(ring, config)[-1].action is Action.STOP

    def test_agent_change_of_tool_calls(self) -> None:
        """Without handoff spans, tool calls alternating between agents with nothing new are a
        ping-pong; agents that each bring something new are delegating, however often."""
        calls = [_call("lookup", {"n": agent}, "none", agent=agent)
                 for agent in ["triage", "billing"] * 3]
        assert _by(_run(calls), "handoff") == {6: "stop"}  # calls 1-2 were new: from 2 on
        working = [_call("lookup", {"n": i}, f"r{i}", agent=agent)
                   for i, agent in enumerate(["triage", "billing"] * 3)]
        assert _by(_run(working), "handoff") == {}

    def test_explicit_handoffs_disable_inference(self) -> None:
        """Once a run has explicit handoffs, agent changes of tool calls are not handoffs."""
        engine = LoopEngine()
        run = engine.new_run()
        engine.process_handoff(run, Handoff(from_agent="triage", to_agent="billing"))
        flagged = [engine.process(run, ToolCall(tool="lookup", arguments={"n": i}, agent=agent,
                                                result=i, has_result=True)).flagged
                   for i, agent in enumerate(["triage", "billing"] * 3)]
        assert not any(flagged)

    def test_a_new_contribution_between_handoffs_is_work_done(self) -> None:
        """Agents of a group chat taking turns, each saying something new, are discussing;
        the same words handed back and forth are a ping-pong (stop at the second closure)."""
        from otel_loopguard.types import ModelTurn

        def chat(outputs: list[str]) -> list[str]:
            engine = LoopEngine()
            run = engine.new_run()
            actions, current = [], "a"
            for n, output in enumerate(outputs):
                target = "b" if current == "a" else "a"
                engine.process_model_turn(run, ModelTurn(span_id=f"t{n}", output_sig=output,
                                                         requested_tools=False))
                actions.append(engine.process_handoff(run, Handoff(
                    from_agent=current, to_agent=target, explicit=False)).action.label)
                current = target
            return actions

        assert "stop" not in chat([f"point {n}" for n in range(6)])
        assert chat(["again"] * 5)[-2:] == ["stop", "stop"]
        # words not captured: absent is not the same, each answer may be new work
        assert "stop" not in chat([""] * 6)

    @pytest.mark.parametrize("answered", [True, False])
    def test_an_answer_not_captured_between_handoffs_may_be_work(self, answered: bool) -> None:
        """A blank turn (no content) whose finish reasons say it answered is a contribution
        whose words are unknown: handed back and forth, such turns are no known ping-pong. A
        blank turn that asked for tools is not one: its calls say what was done."""
        engine = LoopEngine()
        run = engine.new_run()
        actions, current = [], "a"
        for n in range(6):
            target = "b" if current == "a" else "a"
            assert engine.process_blank_turn(run, n + 1, n, n, None, answered=answered)
            actions.append(engine.process_handoff(run, Handoff(
                from_agent=current, to_agent=target, explicit=False)).action.label)
            current = target
        assert ("stop" in actions) is not answered

    def test_sibling_handoffs_count_until_the_run_reports_its_own(self) -> None:
        """Handoffs inferred from sibling agent spans count until a handoff span arrives."""
        engine = LoopEngine()
        run = engine.new_run()
        assert engine.counts_inferred_handoff(run)
        engine.process_handoff(run, Handoff(from_agent="a", to_agent="b", explicit=False))
        assert engine.counts_inferred_handoff(run)
        engine.process_handoff(run, Handoff(from_agent="b", to_agent="a"))
        assert not engine.counts_inferred_handoff(run)

    def test_disabled(self) -> None:
        """With ``handoff`` off there is no handoff detector at all."""
        config = LoopGuardConfig.create(detectors=["stagnation"])
        assert all(d.action is Action.CONTINUE
                   for d in self._handoffs([("a", "b"), ("b", "a")] * 3, config))


_REFINED = ("cheap flights", "cheap flights abroad for a family of four",
            "cheap flights abroad for a family of four in late summer")
"""Each query refines the one before (words added, none replaced); the first and the last
share too few words for token overlap."""


class TestNearDuplicateDetector:
    @pytest.mark.parametrize(("values", "fires"), [
        (["Paris", "paris!", "PARIS"], True),
        (["cheap flights to rome", "Rome cheap flights", "flights to Rome, cheap"], True),
        (["42", "43", "44"], False),
        (["order-42", "order-43", "order-44"], False),
        (["paris", "london", "tokyo"], False),
        (["weather in paris", "best hotels in rome", "train tickets to oslo"], False),
    ], ids=["case-punct", "word-order", "numbers", "ids", "distinct-words", "distinct-text"])
    def test_similarity(self, values: list[str], fires: bool) -> None:
        """Case, punctuation, word order and paraphrase match; distinct values do not."""
        calls = [_call("lookup", {"q": v}, "no results") for v in values]
        assert (_by(_run(calls), "near_duplicate") == {3: "replan"}) is fires

    @pytest.mark.parametrize("values", [
        ["2025-03-17", "2025-03-18", "2025-03-19"],
        ["/src/a/b.py", "/src/a/c.py", "/src/a/d.py"],
        ["INV-2025-0001", "INV-2025-0002", "INV-2025-0003"],
    ], ids=["dates", "paths", "ids"])
    def test_single_word_values_must_match(self, values: list[str]) -> None:
        """Different dates, paths or ids are not near-duplicates of each other."""
        calls = [_call("lookup", {"q": v}, "no results") for v in values]
        assert _by(_run(calls), "near_duplicate") == {}

    @pytest.mark.parametrize("as_json", [False, True], ids=["dict", "json-text"])
    def test_nested_key_order_is_ignored(self, as_json: bool) -> None:
        """A nested filter written in another key order is the same value, as dict or JSON."""
        filters = [{"region": "eu", "tier": 1}, {"tier": 1, "region": "eu"},
                   {"region": "eu", "tier": 1}]
        calls = [_call("search", json.dumps(args) if as_json else args, "no results")
                 for args in ({"q": q, "filters": f} for q, f in zip(
                     ("Paris weather", "weather Paris", "paris, weather"), filters, strict=True))]
        assert _by(_run(calls), "near_duplicate") == {3: "replan"}

    @pytest.mark.parametrize(("results", "fires"), [
        (["no results", "[]", "not found"], True),
        (["Paris: 21C, sunny"] * 3, True),
        (["Paris: 21C, sunny", "no results", "[]"], True),
        (["Paris: 21C, sunny", "no results", "Paris: 21C, sunny"], True),
        (["no results", "Paris: 21C, sunny", "Paris: 21C, sunny"], False),
        (["Paris: 21C, sunny", "Paris: 19C, rain", "Paris: 21C, sunny"], False),
    ], ids=["all-empty", "one-answer-repeated", "answer-then-empty", "answer-empty-answer",
            "answer-after-empty", "new-answer-between"])
    def test_progress_is_judged_per_member(self, results: list[str], fires: bool) -> None:
        """After the group's first call, each result must be empty or already returned.

        Rewordings that keep getting the first answer are a loop; a new answer is progress.
        """
        calls = [_call("search", {"q": q}, r) for q, r in zip(
            ("weather in Paris", "Paris weather", "paris weather today"), results, strict=True)]
        assert (_by(_run(calls), "near_duplicate") == {3: "replan"}) is fires

    def test_progress_restarts_the_count(self) -> None:
        """A rewording that brought a new answer starts the group anew: three rewordings that
        each get that answer again are a loop, whatever came before it (an unseen audit: four
        rewordings of one search, the second finding one page more, the last two nothing new).
        Two after the new answer are not yet."""
        queries = ("australia venture capital investment 2019",
                   "venture capital investment australia 2019 dealroom",
                   "dealroom venture capital australia 2019",
                   "australia 2019 dealroom venture capital investment")
        results = ("page 13", "pages 13 and 29", "pages 13 and 29", "pages 13 and 29")
        calls = [_call("search_knowledge_base", {"query": q}, r)
                 for q, r in zip(queries, results, strict=True)]
        assert _by(_run(calls), "near_duplicate") == {4: "replan"}
        assert _by(_run(calls[:3]), "near_duplicate") == {}

    def test_a_failed_call_is_in_no_group(self) -> None:
        """A search that failed, then the same search and a case variant that find nothing,
        are one failure and two tries: the failure ladders' (a file looked for in the wrong
        place, then in the right one); three empty tries after it are a group again."""
        grep = [_call("grep", {"file_name": "summary.txt", "pattern": p}, r, error=e)
                for p, r, e in [("Progress", "No such file or directory", "no such file"),
                                ("Progress", "[]", None), ("progress", "[]", None)]]
        assert _by(_run(grep), "near_duplicate") == {}
        again = _call("grep", {"file_name": "summary.txt", "pattern": "PROGRESS"}, "[]")
        assert _by(_run([*grep, again]), "near_duplicate") == {4: "replan"}

    def test_progress_keeps_it_quiet(self) -> None:
        """A rewording that finds something new is progress."""
        calls = [_call("search", {"q": q}, r) for q, r in [
            ("weather in Paris", "no results"), ("Paris weather", "no results"),
            ("paris weather today", "sunny, 21C")]]
        assert _by(_run(calls), "near_duplicate") == {}

    def test_without_results_is_quiet(self) -> None:
        """Without captured results rewordings are never near-duplicates: nothing shows that
        they brought nothing new."""
        calls = [_call("search", {"q": q}) for q in
                 ("weather in Paris", "Paris weather", "paris weather today",
                  "weather paris now", "Paris, weather")]
        config = LoopGuardConfig.create(near_duplicate_window=6)
        assert _by(_run(calls, config), "near_duplicate") == {}

    def test_without_arguments_is_quiet(self) -> None:
        """Without captured arguments there is nothing to compare."""
        assert _by(_run([_call("search", None, "no results")] * 4), "near_duplicate") == {}

    @pytest.mark.parametrize("values", [
        ["sort", "deterministic", "order"],
        ["src/a.py", "src/b.py", "src/c.py"],
        ["flights to paris 2024", "flights to paris 2025", "paris flights 2026"],
        ["ls -la src", "ls -la tests", "ls -la docs"],
        ["def f():\n    return 1", "def f():\n    return 2", "def f():\n  return  3"],
    ], ids=["search-terms", "paths", "numbers-in-text", "operands-in-text", "code"])
    def test_another_operand_is_another_call(self, values: list[str]) -> None:
        """A changed operand (a search term, a path, a number, a word of a command, code)
        makes a different call, never a near-duplicate, even when nothing is found."""
        calls = [_call("search", {"q": v}, "no results") for v in values]
        assert _by(_run(calls), "near_duplicate") == {}

    @pytest.mark.parametrize("values", [
        ["best pizza in new york", "best pizza in brooklyn", "best pizza in queens"],
        ["Tesla stock price today", "Tesla stock price yesterday", "Tesla stock price last week"],
        ["flights from London to Paris", "flights from london to rome",
         "London to Berlin flights"],
    ], ids=["places", "days", "destinations"])
    def test_a_replaced_content_word_is_another_search(self, values: list[str]) -> None:
        """When each query has a content word the other lacks, the operand changed: however
        many words they share, they are different searches (the contract's "a search term
        that changes makes a different call"), even when nothing is found."""
        calls = [_call("search", {"q": v}, "no results") for v in values]
        assert _by(_run(calls), "near_duplicate") == {}

    @pytest.mark.parametrize("values", [
        ["weather in Paris", "Paris weather", "paris  weather today"],
        ["best pizza brooklyn", "Brooklyn: the best pizza", "best pizza places in brooklyn"],
        ["tesla stock price", "stock price of Tesla", "Tesla stock price today"],
        ["cheap hotel in rome tonight", "Rome cheap hotels tonight",
         "cheap hotels in rome tonight"],
    ], ids=["F12", "reordered-filler-added", "filler-swapped-for-a-word", "plural"])
    def test_a_word_added_or_a_filler_changed_is_a_rewording(self, values: list[str]) -> None:
        """Reordered words, a filler (``in``, ``the``, ``of``) swapped, a plural, or a word
        added or dropped: a refinement of the same search, still a near-duplicate."""
        calls = [_call("search", {"q": v}, "no results") for v in values]
        assert _by(_run(calls), "near_duplicate") == {3: "replan"}

    def test_shell_command_lines_are_never_near_duplicates(self) -> None:
        """Greps for other terms through a shell tool are other calls (H29)."""
        calls = [_call("bash", {"command": f'grep -n "{t}" t.py'}, "")
                 for t in ("sort", "deterministic", "order")]
        assert _by(_run(calls), "near_duplicate") == {}

    def test_argument_names_must_match(self) -> None:
        """Calls with different argument names are not near-duplicates."""
        calls = [_call("search", {k: "paris weather"}, "no results")
                 for k in ("q", "query", "text")]
        assert _by(_run(calls), "near_duplicate") == {}

    def test_pluggable_embedder(self) -> None:
        """An embedder replaces token overlap for multi-word text."""
        config = LoopGuardConfig.create(detectors=["near_duplicate"])
        detector = NearDuplicateDetector(config, embedder=lambda text: [1.0, 0.0])
        engine = LoopEngine(config, detectors=[detector])
        calls = [_call("search", {"q": q}, "no results") for q in _REFINED]
        assert _by(_run(calls, engine=engine), "near_duplicate") == {3: "replan"}
        assert _by(_run(calls), "near_duplicate") == {}  # token overlap: too few words shared

    def test_an_embedder_never_joins_a_replaced_operand(self) -> None:
        """A content word replaced by another is another search even to an embedder that finds
        every text alike: the contract's operand rule comes before any similarity."""
        config = LoopGuardConfig.create(detectors=["near_duplicate"])
        detector = NearDuplicateDetector(config, embedder=lambda text: [1.0, 0.0])
        engine = LoopEngine(config, detectors=[detector])
        calls = [_call("search", {"q": q}, "no results") for q in
                 ("best pizza in new york", "best pizza in brooklyn", "best pizza in queens")]
        assert _by(_run(calls, engine=engine), "near_duplicate") == {}

    def test_each_text_is_embedded_once(self) -> None:
        """An embedder (often a network call) sees each argument text once, not once per
        comparison."""
        embedded: list[str] = []

        def embed(text: str) -> list[float]:
            embedded.append(text)
            return [1.0, float(len(text) % 3)]

        config = LoopGuardConfig.create(detectors=["near_duplicate"])
        engine = LoopEngine(config, detectors=[NearDuplicateDetector(config, embedder=embed)])
        queries = ["cheap flights", "flights cheap", "cheap flight deals",
                   "cheap flight deals abroad", "cheap last minute flight deals abroad"]
        _run([_call("search", {"q": q}, "no results") for q in queries], engine=engine)
        assert sorted(embedded) == sorted(set(embedded))
        assert set(embedded) == set(queries)  # every text was embedded, and only once

    def test_embedder_named_in_the_config(self) -> None:
        """``near_duplicate_embedder`` imports the embedder, so check, serve and zero-code
        installs can use one; ``near_duplicate_similarity`` is its threshold."""
        calls = [_call("search", {"q": q}, "no results") for q in _REFINED]
        config = LoopGuardConfig.create(near_duplicate_embedder="_embedder:everything_alike")
        assert _by(_run(calls, config), "near_duplicate") == {3: "replan"}
        assert _by(_run(calls), "near_duplicate") == {}  # token overlap: too few words shared
        strict = LoopGuardConfig.create(near_duplicate_embedder="_embedder:everything_alike",
                                        near_duplicate_similarity=1.0)
        assert _by(_run(calls, strict), "near_duplicate") == {3: "replan"}  # cosine is 1.0

    def test_a_failing_embedder_falls_back_to_token_overlap(self) -> None:
        """An embedder that raises never breaks the call: token overlap decides, and the
        failures are counted."""
        config = LoopGuardConfig.create(near_duplicate_embedder="_embedder:broken")
        detector = NearDuplicateDetector(config)
        engine = LoopEngine(config, detectors=[detector])
        calls = [_call("search", {"q": q}, "no results") for q in
                 ("weather in Paris", "Paris weather", "paris weather today")]
        assert _by(_run(calls, engine=engine), "near_duplicate") == {3: "replan"}
        assert detector.embedder_errors > 0

    @pytest.mark.parametrize(("path", "message"), [
        ("not a path", "near_duplicate_embedder must be an import path module:function"),
        ("no_such_module_xyz:embed", "near_duplicate_embedder: cannot load "
                                     "'no_such_module_xyz:embed': No module named"),
        ("_embedder:missing", "near_duplicate_embedder: cannot load '_embedder:missing'"),
        ("_embedder:NOT_A_FUNCTION", "is a int, not a function"),
    ])
    def test_a_bad_embedder_path_is_a_config_error(self, path: str, message: str) -> None:
        """A malformed path fails the config; one that does not import fails the engine."""
        with pytest.raises(ConfigError, match=re.escape(message)):
            LoopEngine(LoopGuardConfig.create(near_duplicate_embedder=path))

    def test_jaccard_threshold(self) -> None:
        """Raising ``near_duplicate_jaccard`` turns a paraphrase into distinct text."""
        calls = [_call("search", {"q": q}, "no results") for q in
                 ("weather in Paris", "Paris weather", "paris weather today")]
        strict = LoopGuardConfig.create(near_duplicate_jaccard=0.9)
        assert _by(_run(calls, strict), "near_duplicate") == {}


class TestBudgetDetector:
    def test_warn_fires_once(self) -> None:
        """The tool-call budget warns on the 50th call only."""
        decisions = _run([_call(f"t{i % 9}", {"n": i}, f"r{i}") for i in range(60)])
        assert _by(decisions, "budget") == {50: "warn"}

    def test_stop_fires_on_every_call_past_it(self) -> None:
        """A stop budget of 5 lets 5 calls run and holds on each call past it."""
        config = LoopGuardConfig.create(max_tool_calls_warn=None, max_tool_calls_stop=5)
        decisions = _run([_call(f"t{i}", {"n": i}, f"r{i}") for i in range(8)], config)
        assert _by(decisions, "budget") == {i: "stop" for i in (6, 7, 8)}
        assert {d.code for d in decisions[5:]} == {"BUDGET_EXHAUSTED"}

    def test_per_tool_budget_and_override(self) -> None:
        """Per-tool budgets count one tool, and one tool may have its own."""
        config = LoopGuardConfig.create(max_calls_per_tool_warn=3,
                                        tools={"search": {"max_calls_per_tool_warn": 2}})
        calls = [_call(t, {"n": i}, f"r{i}") for i, t in enumerate(["search", "fetch"] * 3)]
        assert _by(_run(calls, config), "budget") == {3: "warn", 6: "warn"}

    def test_seconds_budget(self) -> None:
        """The wall-clock budget warns once and stops on every later call."""
        config = LoopGuardConfig.create(max_run_seconds_warn=2.0, max_run_seconds_stop=4.0)
        second = 1_000_000_000
        calls = [_call(f"t{i}", {"n": i}, f"r{i}", start=i * second, end=i * second + 1)
                 for i in range(1, 8)]
        decisions = _run(calls, config)
        assert _by(decisions, "budget") == {3: "warn", 5: "stop", 6: "stop", 7: "stop"}
        assert decisions[2].hint.startswith("This run has run for 2.0 s (budget 2.0 s)")

    def test_step_budget_counts_tool_calls_and_model_turns(self) -> None:
        """Steps are tool calls plus the model turns before each: one call per turn is two
        steps, so a warn budget of 5 is reached at the 3rd call (6 steps) and a stop of 8 is
        passed at the 5th (10 steps: the 4th takes 8); the warn fires once although the count
        passes it."""
        config = LoopGuardConfig.create(max_steps_warn=5, max_steps_stop=8)
        calls = [_call(f"t{i}", {"n": i}, f"r{i}", turn=i) for i in range(1, 7)]
        decisions = _run(calls, config)
        assert _by(decisions, "budget") == {3: "warn", 5: "stop", 6: "stop"}
        warn = next(e for e in decisions[2].evidence if e.detector == "budget")
        assert (warn.count, warn.details["budget"], warn.details["limit"]) == (6, "steps", 5)
        assert decisions[2].hint.startswith("This run has taken 6 steps, tool calls and model "
                                            "turns (step budget 5); wrap up soon.")

    def test_step_budget_is_off_by_default(self) -> None:
        """Without a step budget, many model turns flag nothing (the tool-call warn aside)."""
        calls = [_call(f"t{i}", {"n": i}, f"r{i}", turn=3 * i) for i in range(1, 40)]
        assert _by(_run(calls), "budget") == {}

    def test_exempt_counts_but_is_not_flagged(self) -> None:
        """Exempt calls count toward the budget, and the next other call is flagged."""
        config = LoopGuardConfig.create(max_tool_calls_warn=3, max_tool_calls_stop=4,
                                        tools={"hb": {"kind": "exempt"}})
        calls = [_call("hb", {}, "ok"), _call("hb", {}, "ok"), _call("hb", {}, "ok"),
                 _call("search", {"q": 1}, "r"), _call("search", {"q": 2}, "r2")]
        assert _by(_run(calls, config), "budget") == {4: "warn", 5: "stop"}

    @pytest.mark.parametrize(("settings", "hint"), [
        ({"max_tool_calls_warn": 2, "max_tool_calls_stop": 3},
         "This run has used its budget of 3 tool calls. Make no more tool calls: answer with "
         "what you have, or report the blocker."),
        ({"max_calls_per_tool_warn": 2, "max_calls_per_tool_stop": 3},
         'This run has used its budget of 3 calls of "search". Do not call "search" again: '
         "answer with what you have, or use another tool."),
        ({"max_steps_warn": 2, "max_steps_stop": 3},
         "This run has used its budget of 3 steps (tool calls and model turns). Make no more "
         "tool calls: answer with what you have, or report the blocker."),
    ], ids=["run", "tool", "steps"])
    def test_hints_say_which_budget_and_what_to_do(self, settings: dict[str, Any],
                                                   hint: str) -> None:
        """A budget's hints name the budget, and the tool of a per-tool one; its stop hint
        tells the model what to stop doing, not to stop calling an unnamed "it"."""
        decisions = _run([_call("search", {"n": i}, f"r{i}") for i in range(4)],
                         LoopGuardConfig.create(**settings))
        assert decisions[2].action is not Action.STOP  # a budget of 3 lets 3 calls run
        assert decisions[3].hint == hint
        if "max_calls_per_tool_warn" in settings:
            assert decisions[1].hint.startswith(
                'This run has called "search" 2 times (per-tool budget 2); wrap up soon.')

    def test_seconds_budget_stop_hint(self) -> None:
        """The wall-clock stop hint names the budget in seconds."""
        config = LoopGuardConfig.create(max_run_seconds_stop=2.0)
        second = 1_000_000_000
        decisions = _run([_call(f"t{i}", {"n": i}, f"r{i}", start=i * second,
                                end=i * second + 1) for i in range(1, 4)], config)
        assert decisions[2].hint.startswith("This run has used its budget of 2.0 s. Make no "
                                            "more tool calls")

    def test_stop_wins_over_warn_on_the_same_call(self) -> None:
        """When a warn budget is reached and a stop budget passed on one call, it stops."""
        config = LoopGuardConfig.create(max_tool_calls_warn=4, max_calls_per_tool_stop=3)
        calls = [_call("search", {"n": i}, f"r{i}") for i in range(4)]
        assert _by(_run(calls, config), "budget") == {4: "stop"}


class TestToolOverrides:
    def test_exempt_counted_never_flagged(self) -> None:
        """An exempt tool repeated ten times stays clean."""
        config = LoopGuardConfig.create(tools={"hb": {"kind": "exempt"}})
        decisions = _run([_call("hb", {}, "ok")] * 10, config)
        assert all(not d.flagged for d in decisions)
        assert decisions[-1].call_index == 10

    def test_poll_gets_more_room(self) -> None:
        """A tool declared poll warns at 5 unchanged results and stops at 10."""
        config = LoopGuardConfig.create(tools={"fetch": {"kind": "poll"}})
        decisions = _run([_call("fetch", {}, "same")] * 10, config)
        assert _by(decisions, "stagnation") == {i: "warn" for i in range(5, 10)} | {10: "stop"}
        assert _codes(decisions) == {"POLL_STAGNANT"}

    def test_poll_stop_raised_per_tool(self) -> None:
        """A tool's own ``poll_stop`` above the global one stops at that count, not never."""
        config = LoopGuardConfig.create(tools={"fetch": {"kind": "poll", "poll_stop": 30}})
        decisions = _run([_call("fetch", {}, "same")] * 31, config)
        assert _by(decisions, "stagnation") == ({i: "warn" for i in range(5, 30)}
                                                | {30: "stop", 31: "stop"})
        assert decisions[29].evidence[0].count == 30

    def test_mutating_kind(self) -> None:
        """A tool declared mutating gets the mutating-failure ladder."""
        config = LoopGuardConfig.create(tools={"deploy": {"kind": "mutating"}})
        decisions = _run([_call("deploy", {"v": 1}, error="conflict")] * 4, config)
        assert _by(decisions, "mutating_failure") == {3: "warn", 4: "stop"}

    def test_configured_default_beats_name_inference(self) -> None:
        """``kind = "default"`` turns off the poll inference of a ``*status*`` name."""
        config = LoopGuardConfig.create(tools={"get_status": {"kind": "default"}})
        calls = [_call("get_status", {"id": 1}, {"status": "running"})] * 3
        assert _by(_run(calls, config), "stagnation") == {3: "warn"}
        assert _by(_run(calls), "stagnation") == {}

    def test_threshold_override(self) -> None:
        """A per-tool threshold replaces the global one for that tool only."""
        config = LoopGuardConfig.create(tools={"fetch": {"stagnation_warn": 2}})
        assert _by(_run([_call("fetch", {}, "same")] * 2, config), "stagnation") == {2: "warn"}
        assert _by(_run([_call("other", {}, "same")] * 2, config), "stagnation") == {}

    def test_override_by_mcp_base_name(self) -> None:
        """A tool whose MCP base name is in ``mutating_tools`` is mutating."""
        config = LoopGuardConfig.create(mutating_tools=["deploy"])
        calls = [_call("ops__deploy", {"v": 1}, error="conflict")] * 3
        assert _by(_run(calls, config), "mutating_failure") == {3: "warn"}


class TestDetectorSelection:
    @pytest.mark.parametrize("enabled", [["repeat"], ["stagnation", "cycle"]],
                             ids=["one", "two"])
    def test_only_enabled_detectors_run(self, enabled: list[str]) -> None:
        """``detectors=[...]`` decides which detectors the engine builds."""
        config = LoopGuardConfig.create(detectors=enabled)
        assert [d.name for d in make_default_detectors(config)] == enabled

    def test_no_detector_at_all_is_a_config_error(self) -> None:
        """An empty list turned detection off without a word (a CI gate passed every loop),
        where the variable that names nothing (``LOOPGUARD_DETECTORS=,``) is an error."""
        with pytest.raises(ConfigError, match=r"^detectors: names no detector"):
            LoopGuardConfig.create(detectors=[])

    def test_disabled_detector_is_silent(self) -> None:
        """With stagnation off, five identical (call, result) pairs are not flagged by it."""
        config = LoopGuardConfig.create(detectors=["repeat", "failure"])
        decisions = _run([_call("search", {"q": "x"}, "none")] * 5, config)
        assert all(not d.flagged for d in decisions)

    def test_handoff_toggle(self) -> None:
        """The handoff detector exists only when ``handoff`` is enabled."""
        assert LoopEngine(LoopGuardConfig.create(detectors=["handoff"])).handoffs is not None
        assert LoopEngine(LoopGuardConfig.create(detectors=["repeat"])).handoffs is None

    def test_explicit_detectors_override_config(self) -> None:
        """Detectors passed to the engine replace the configured set."""
        engine = LoopEngine(detectors=[RepeatDetector()])
        assert [d.name for d in engine.detectors] == ["repeat"]

    def test_a_detector_sees_only_the_kinds_it_observes(self) -> None:
        """A detector is not called for the kinds its ``observed_kinds`` leaves out; one that
        overrides ``observe`` without saying so is called for every kind."""
        seen: dict[str, list[str]] = {"reread": [], "subclass": []}

        class Declared(RereadDetector):
            observed_kinds = frozenset({"read"})

            def observe(self, state: Any, step: Any) -> Evidence | None:
                seen["reread"].append(step.kind)
                return super().observe(state, step)

        class Spied(RereadDetector):
            def observe(self, state: Any, step: Any) -> Evidence | None:
                seen["subclass"].append(step.kind)
                return super().observe(state, step)

        engine = LoopEngine(detectors=[Declared(), Spied()])
        run = engine.new_run()
        calls = [_call("read_file", {"path": "a"}, "x"),
                 _call("write_file", {"path": "a", "content": "y"}, "ok"),
                 _call("search", {"q": "z"}, "none"), _call("read_file", {"path": "a"}, "x")]
        for index, fields in enumerate(calls):
            engine.process(run, tool_call(index, fields))
        assert seen == {"reread": ["read", "read"],
                        "subclass": ["read", "mutating", "default", "read"]}


def _sizes(state: Any) -> list[int]:
    """Return the sizes of every container inside a detector state (one level of nesting)."""
    sizes: list[int] = []
    attrs = [getattr(state, s) for s in getattr(state, "__slots__", ())] or [state]
    for value in attrs:
        for item in itertools.chain([value], getattr(value, "__slots__", ()) and [
                getattr(value, s) for s in value.__slots__]):
            if isinstance(item, dict | list | set | frozenset) or hasattr(item, "maxlen"):
                sizes.append(len(item))
                if isinstance(item, dict):
                    sizes += [len(v) for v in item.values() if hasattr(v, "__len__")]
                    sizes += [len(x) for v in item.values() if hasattr(v, "__slots__")
                              for x in (getattr(v, s) for s in v.__slots__)
                              if hasattr(x, "__len__")]
    return sizes


class TestBoundedState:
    @pytest.mark.slow
    def test_hundred_thousand_distinct_calls(self) -> None:
        """Detector state stays under a constant size over 100,000 distinct calls of one run."""
        config = LoopGuardConfig.create(max_tool_calls_warn=None, max_calls_per_tool_warn=10**9)
        engine = LoopEngine(config)
        run = engine.new_run()
        for i in range(100_000):
            kind = i % 4
            if kind == 0:
                call = _call("read_file", {"path": f"f{i}.py"}, f"content {i}")
            elif kind == 1:
                call = _call(f"fetch_{i % 700}", {"id": i}, error=f"failure kind {i % 997}")
            elif kind == 2:
                call = _call(f"srv{i % 500}__edit_file", {"p": i}, error="old_text missing")
            else:
                call = _call(f"tool_{i}", {"n": i}, f"r{i}")
            engine.process(run, ToolCall(**{**call, "turn": i, "span_id": f"{i:016x}",
                                            "start_time_ns": 10 * i + 1,
                                            "end_time_ns": 10 * i + 2}))
        for detector, state in zip(engine.detectors, run.states, strict=True):
            assert max(_sizes(state), default=0) <= 1025, detector.name
        assert len(engine._kinds) <= 4096

    def test_one_endless_turn_stays_bounded(self) -> None:
        """Calls that all belong to one model turn still keep bounded state."""
        engine = LoopEngine(LoopGuardConfig.create(max_tool_calls_warn=None))
        run = engine.new_run()
        for i in range(2_000):
            engine.process(run, ToolCall(tool=f"t{i % 50}", arguments={"i": i}, result=i,
                                         has_result=True, turn=1))
        for detector, state in zip(engine.detectors, run.states, strict=True):
            assert max(_sizes(state), default=0) <= 1025, detector.name


class TestStatusCodesInContext:
    """Only a number that reads as an HTTP status makes a failure permanent (spec: permanent
    401, 403, 404 and other 4xx; retryable 408, 429, timeout, unavailable, 5xx)."""

    @pytest.mark.parametrize(("text", "kind"), [
        ("ReadTimeout: HTTPSConnectionPool(host='api.x.com', port=443): Read timed out.",
         "retryable"),
        ("ConnectTimeout: connection to api.x.com:443 timed out", "retryable"),
        ("Request timed out after 400ms", "retryable"),
        ("timeout after 404 ms", "retryable"),
        ("exit status 1: 2 failed, 450 passed", "retryable"),
        ("File app.py:412: ZeroDivisionError", "retryable"),
        ("503 Service Unavailable from https://api.x.com:443/v1", "retryable"),
        ("HTTP 401 Unauthorized", "permanent"),
        ("status=404", "permanent"),
        ("HTTP/1.1 403 Forbidden", "permanent"),
        ("413 Payload Too Large", "permanent"),
    ])
    def test_ports_durations_counts_and_lines_are_no_status(self, text: str, kind: str) -> None:
        assert classify_error(text)[0] == kind
