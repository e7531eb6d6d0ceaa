"""The failure ladders: identical arguments, the same target, other targets; and ``call_target``.

A mistake the agent corrects is not a loop: the same error with the user's corrected input, on
another gift card, on another order, stays quiet; the same call failing again does not.
"""

from __future__ import annotations

from typing import Any

import pytest
from _calls import by, call, run

from otel_loopguard import Action, ConfigError, LoopGuardConfig
from otel_loopguard.kinds._target import call_target

DENIED = "EACCES: permission denied, open '/etc/app.conf'"


def _fail(tool: str, arguments: dict[str, Any], error: str) -> dict[str, Any]:
    return call(tool, arguments, error=error)


class TestLadders:
    @pytest.mark.parametrize(("calls", "expected"), [
        ([_fail("fetch", {"id": 1}, "HTTP 401 Unauthorized")] * 3,
         {2: "stop", 3: "stop"}),
        ([_fail("write_file", {"path": "/etc/app.conf", "content": f"v{i}"}, DENIED)
          for i in range(5)], {3: "warn", 4: "stop", 5: "stop"}),
        ([_fail("get_user", {"email": f"user{i}@example.com"}, "user not found")
          for i in range(8)], {5: "warn", 6: "warn", 7: "warn", 8: "warn"}),
        ([_fail("fetch", {"id": 1}, "HTTP 429 Too Many Requests")] * 6,
         {3: "warn", 4: "warn", 5: "stop", 6: "stop"}),
        ([_fail("get_order", {"order_id": f"#W{i}"}, "503 Service Unavailable")
          for i in range(8)], {}),
    ], ids=["permanent-identical", "permanent-same-target", "permanent-other-targets",
            "retryable-identical", "retryable-other-calls"])
    def test_ladder(self, calls: list[dict[str, Any]], expected: dict[int, str]) -> None:
        assert by(run(calls), "failure") == expected

    def test_an_edit_rejected_again_verbatim_is_not_stopped_at_the_second(self) -> None:
        """Two identical rejected edits and then another approach are ordinary (Crush's
        ``edit`` with one extra space in ``old_string``, which signatures fold): no 404 asked
        again. The edit counts on its file's ladder, as ``mutating_failure`` does: the third
        warns, the fourth stops. Before, the second stopped the run. A read asked again
        verbatim after a "not found" still stops at the second."""
        rejected = _fail("edit", {"file_path": "app/route.ts", "old_string": "  return x;",
                                  "new_string": "  return y;"},
                         "old_string not found in file. Make sure it matches exactly")
        decisions = run([rejected] * 2)
        assert by(decisions, "failure") == {}
        assert by(run([rejected] * 4), "failure") == {3: "warn", 4: "stop"}
        details = run([rejected] * 3)[2].evidence[0].details
        assert (details["ladder"], details["same_arguments"]) == ("same_target", 3)
        missing = _fail("read_file", {"path": "a.py"}, "File not found: a.py")
        assert by(run([missing] * 2), "failure") == {2: "stop"}

    @pytest.mark.parametrize("error", [
        "search_jokes is not a valid action, try one of [jokes_random, jokes_search].",
        "No such function name: get_odds", "Unknown function: get_odds"],
        ids=["langchain-not-a-valid-action", "toolbench-no-such-function", "unknown-function"])
    def test_a_tool_that_does_not_exist_is_permanent(self, error: str) -> None:
        """Harnesses word an unknown tool in their own way (ToolAlpaca's LangChain agent,
        ToolBench): the same call sent again fails again, so the second stops, as an
        ``unknown tool`` does. Before, these were unclassified retryable errors: no finding."""
        call = _fail("jokes_search", {"query": "chuck"}, error)
        assert by(run([call] * 2), "failure") == {2: "stop"}

    def test_a_go_decoding_error_is_permanent(self) -> None:
        """``json: cannot unmarshal string into Go struct field ... of type bool`` (a Go tool
        given an argument of the wrong type, Crush's grep) fails again however the string is
        varied: permanent, so five such failures warn on the other-targets ladder. Before, it
        was an unclassified retryable error, and varied arguments never counted."""
        error = ("error parsing parameters: json: cannot unmarshal string into Go struct "
                 "field GrepParams.literal_text of type bool")
        calls = [_fail("grep", {"pattern": "pytest", "literal_text": text}, error)
                 for text in ("True", "true", "False", "0", "1")]
        decisions = run(calls)
        assert by(decisions, "failure") == {5: "warn"}
        assert decisions[4].evidence[0].details["error_class"] == "permanent"

    def test_a_syntax_error_is_permanent(self) -> None:
        """A statement the database cannot parse (``syntax error at or near "all"``) fails
        the same way however often it is sent. An MCP server's SQL tool, its arguments lost
        after the first call (``{}``), failed 95 times in a row with only a warning at the
        5th (an unclassified error of calls not known to be the same); now the same permanent
        error of the tool's calls without arguments counts as on one target: warn at the 3rd
        of them, stop at the 4th. The same statement sent again verbatim stops at the 2nd, as
        any permanent error does."""
        error = 'ERROR: syntax error at or near "all"\nLINE 1: all'
        first = _fail("execute_sql", {"sql": "INSERT INTO t VALUES (1)"}, error)
        lost = _fail("execute_sql", {}, error)
        assert by(run([first, *[lost] * 4]), "failure") == {4: "warn", 5: "stop"}
        assert by(run([first] * 2), "failure") == {2: "stop"}

    def test_without_captured_arguments_no_stop_at_the_second_failure(self) -> None:
        """Arguments not captured (Claude Code's and Gemini CLI's default telemetry, an
        instrumentation without content capture): two reads of missing files may be two files.
        Before, "identical arguments" was taken for granted and the second stopped the run."""
        missing = _fail("read_file", None, "ENOENT: no such file or directory")
        assert by(run([missing] * 2), "failure") == {}
        assert by(run([missing] * 5), "failure") == {3: "warn", 4: "stop", 5: "stop"}
        decisions = run([missing] * 3)
        assert decisions[2].evidence[0].details["ladder"] == "same_target"
        # captured and identical, the second still stops
        same = _fail("read_file", {"path": "a.py"}, "ENOENT: no such file or directory")
        assert by(run([same] * 2), "failure") == {2: "stop"}
        # retryable errors warn at the third, and without the arguments never stop: five ids
        # of a cocktail API asked in turn, each "status_code=500", stopped at the fifth
        busy = _fail("fetch", None, "HTTP 429 Too Many Requests")
        assert by(run([busy] * 5), "failure") == {3: "warn", 4: "warn", 5: "warn"}
        same_busy = _fail("fetch", {"id": 1}, "HTTP 429 Too Many Requests")
        assert by(run([same_busy] * 5), "failure") == {3: "warn", 4: "warn", 5: "stop"}

    @pytest.mark.parametrize("error", [
        "Error: Could not find exact match in src/_pytest/nodes.py", "No match found for old_str",
        "Error: no exact match for the search block"])
    def test_an_edit_that_finds_no_match_is_a_permanent_failure(self, error: str) -> None:
        """An editor's "could not find" or "no match" fails the same way however often it is
        resubmitted (a gpt-5-mini agent's ``replace_in_file`` four times with reads between):
        permanent, so without the arguments it counts as on one target (warn at 3, stop at
        4), where it counted as on other targets (warn at 5)."""
        assert by(run([_fail("replace_in_file", None, error)] * 4), "failure") == {
            3: "warn", 4: "stop"}

    def test_an_edit_while_another_waits_for_review_is_a_permanent_failure(self) -> None:
        """Cursor refuses any edit of a file whose earlier edit the user has not accepted or
        rejected ("This file is already being edited in another thread"): resubmitting cannot
        get past it, so four such refusals of edits whose arguments were lost warn at the 3rd
        and stop at the 4th, where they reached no ladder (warn at 5)."""
        error = ("This file is already being edited in another thread, please accept or "
                 "reject that edit first")
        assert by(run([_fail("edit_file", None, error)] * 4), "failure") == {
            3: "warn", 4: "stop"}

    def test_without_captured_arguments_timeouts_are_not_one_calls_retries(self) -> None:
        """Any command may reach its time limit, a long build again and again: without its
        arguments, a timeout says no more of the call than "exit code 1", and counts as on
        other targets (warn at 5, never a stop). Before, four shell timeouts in a healthy
        build session were one call retried (warn at 3, stop at 5). With the arguments, the
        same command timing out again keeps the retry ladder."""
        timeout = _fail("bash", None, "Exited due to timeout")
        assert by(run([timeout] * 4), "failure") == {}
        assert by(run([timeout] * 6), "failure") == {5: "warn", 6: "warn"}
        same = _fail("bash", {"command": "make -j2"}, "Exited due to timeout")
        assert by(run([same] * 5), "failure") == {3: "warn", 4: "warn", 5: "stop"}

    @pytest.mark.parametrize(("error", "expected"), [
        ("exit code 1", {}), ("Error", {}), ("NameError", {}), ("user declined", {}),
        ("Error: hunk 2 was rejected in src/app.py", {5: "warn", 6: "warn"}),
        ("accessibility tree don't have this element_id", {5: "warn", 6: "warn"}),
    ], ids=["exit-code", "error", "class-name", "declined", "names-a-file", "names-an-element"])
    def test_without_arguments_an_error_of_few_words_names_nothing(
            self, error: str, expected: dict[int, str]) -> None:
        """Six failures of a tool with no arguments captured: an unclassified error of three
        words or fewer may be any call's (a shell agent's setup fails with ``exit code 1``
        again and again, another command each time: 10 healthy runs of the corpus flagged
        that way with no content captured), so it is not counted; one that names something
        counts as on other targets (warn at 5). With the arguments, the same call failing
        with ``exit code 1`` keeps its ladder."""
        assert by(run([_fail("bash", None, error)] * 6), "failure") == expected
        same = _fail("bash", {"command": "make"}, "exit code 1")
        assert by(run([same] * 3), "failure") == {3: "warn"}

    def test_an_unclassified_error_is_told_apart_by_its_output(self) -> None:
        """"exit code 1" says nothing: a script fixed for its indentation that then misses its
        data file fails another way (Who&When's captain-088, healthy). Before, three failures
        of what normalises to one call warned; the same output three times still does."""
        code = {"code": "import pandas as pd\ndf = pd.read_csv('prices.csv')"}

        def run_code(output: str) -> dict[str, Any]:
            return call("execute_code", code, output, error="exitcode: 1 (execution failed)")

        indentation = run_code("IndentationError: unexpected indent")
        missing = run_code("FileNotFoundError: [Errno 2] No such file: 'prices.csv'")
        assert by(run([indentation, missing, missing]), "failure") == {}
        assert by(run([missing] * 3), "failure") == {3: "warn"}
        # a classified error is its class: a 429 whose body differs each time still counts
        busy = [call("fetch", {"id": 1}, f"rate limited, {n} requests in window",
                      error="HTTP 429 Too Many Requests") for n in (97, 98, 99)]
        assert by(run(busy), "failure") == {3: "warn"}

    def test_an_unclassified_error_word_for_word_on_one_target_warns_at_the_third(self) -> None:
        """tau2's register_order: the same order placed three times, its date written two ways,
        each failing with the same TypeError (a loop by the labelling rubric: the agent is not
        getting past the error). Before, only the two identical calls counted, and nothing was
        flagged. Warn only: an unclassified error may still be transient."""
        def order(when: str, message: str = "'<' not supported between 'str' and 'datetime'"
                  ) -> dict[str, Any]:
            return _fail("register_order", {"customer_id": "c9001", "item_id": "item_0088",
                                            "scheduled": when}, message)

        looping = [order("2024-07-27 08:00"), order("2024-07-27T08:00:00"),
                   order("2024-07-27T08:00:00"), order("2024-07-27T08:00")]
        assert by(run(looping), "failure") == {3: "warn", 4: "warn"}
        assert run(looping)[2].evidence[0].details["ladder"] == "same_target"
        # another message each time: the agent is getting somewhere
        changing = [order(f"2024-07-2{n}", f"date 2024-07-2{n} is fully booked") for n in range(4)]
        assert by(run(changing), "failure") == {}
        # other targets (each customer in turn) keep the lenient ladder
        others = [_fail("register_order", {"customer_id": f"c{n}", "item_id": "item_0088"},
                        "'<' not supported between 'str' and 'datetime'") for n in range(4)]
        assert by(run(others), "failure") == {}

    def test_other_targets_never_stop(self) -> None:
        """Thirty users not found, one after the other, warn and never stop."""
        calls = [_fail("get_user", {"email": f"u{i}@example.com"}, "user not found")
                 for i in range(30)]
        decisions = run(calls)
        assert max(d.action for d in decisions) is Action.WARN
        assert "each time with other input" in decisions[4].hint
        assert decisions[4].evidence[0].details["ladder"] == "any_target"

    def test_retries_of_other_calls_do_not_add_up(self) -> None:
        """Two calls each retried twice on a 503 are two retries of each, not four."""
        a, b = (_fail("get_order", {"order_id": o}, "503 Service Unavailable") for o in "AB")
        assert by(run([a, b, a, b]), "failure") == {}
        assert by(run([a, b, a, b, a]), "failure") == {5: "warn"}

    def test_a_corrected_input_after_one_mistake_is_quiet(self) -> None:
        """Another zip code after "not found", then another approach: nothing at all."""
        calls = [_fail("find_user", {"name": "Yusuf Rossi", "zip": z}, "user not found")
                 for z in ("10001", "10010")] + [call("find_user_by_email", {"email": "y@r.io"},
                                                      "user_1")]
        assert all(d.action is Action.CONTINUE for d in run(calls))

    def test_a_success_of_the_tool_resets(self) -> None:
        denied = [_fail("write_file", {"path": "/etc/app.conf", "content": f"v{i}"}, DENIED)
                  for i in range(2)]
        calls = [denied[0], call("write_file", {"path": "/tmp/app.conf", "content": "v"}, "ok"),
                 denied[1]]
        assert by(run(calls), "failure") == {}

    def test_identical_arguments_after_a_state_change_are_a_new_attempt(self) -> None:
        """The same call failing again after another successful change is not the same call
        repeated: it no longer stops at 2 (and twice on one target is not yet a warn)."""
        failing = _fail("read_file", {"path": "out/report.csv"}, "ENOENT: no such file")
        build = call("run_build", {"target": "report"}, "built")
        config = LoopGuardConfig.create(tools={"run_build": {"kind": "mutating"}})
        assert by(run([failing, build, failing], config), "failure") == {}
        assert by(run([failing, call("think", {}, "hm"), failing]), "failure") == {3: "stop"}

    @pytest.mark.parametrize(("settings", "expected"), [
        ({"failure_permanent_any_target_warn": 3}, {3: "warn", 4: "warn"}),
        ({"failure_permanent_any_target_warn": None}, {}),
        ({"tools": {"get_user": {"failure_permanent_any_target_warn": 2}}},
         {2: "warn", 3: "warn", 4: "warn"}),
    ], ids=["global", "off", "per-tool"])
    def test_other_targets_threshold(self, settings: dict[str, Any],
                                     expected: dict[int, str]) -> None:
        calls = [_fail("get_user", {"email": f"u{i}@example.com"}, "user not found")
                 for i in range(4)]
        assert by(run(calls, LoopGuardConfig.create(**settings)), "failure") == expected

    def test_evidence_says_which_ladder(self) -> None:
        """The evidence counts the ladder that decided and lists the other counts."""
        calls = [_fail("write_file", {"path": "/etc/app.conf", "content": f"v{i}"}, DENIED)
                 for i in range(4)]
        evidence = run(calls)[3].evidence
        failure = next(e for e in evidence if e.detector == "failure")
        assert (failure.action, failure.count) == (Action.STOP, 4)
        assert (failure.details["same_target"], failure.details["same_arguments"]) == (4, 1)

    def test_a_bad_threshold_is_a_config_error(self) -> None:
        with pytest.raises(ConfigError, match="failure_permanent_any_target_warn must be an "
                                              "integer >= 2"):
            LoopGuardConfig.create(failure_permanent_any_target_warn=1)


class TestCallTarget:
    @pytest.mark.parametrize(("tool", "arguments", "same_as", "expected"), [
        ("write_file", {"path": "/a", "content": "x"}, {"path": "/a", "content": "y"}, True),
        ("write_file", {"path": "/a"}, {"path": "/b"}, False),
        ("pay", {"order_id": "W1", "payment_method_id": "gc_1"},
         {"order_id": "W1", "payment_method_id": "gc_2"}, False),
        ("get_order", {"orderId": "W1", "verbose": True}, {"orderId": "W1"}, True),
        ("fetch", {"input": {"url": "https://x.io/a"}}, {"url": "https://x.io/a"}, True),
        ("view", {"path": "/repo/src", "view_range": [1, 40]}, {"path": "/repo/tests"}, False),
    ], ids=["content-changes", "other-path", "other-card", "camel-id", "wrapped",
            "other-directory"])
    def test_same_target(self, tool: str, arguments: dict[str, Any], same_as: dict[str, Any],
                         expected: bool) -> None:
        assert (call_target(tool, arguments) == call_target(tool, same_as)) is expected

    @pytest.mark.parametrize("arguments", [
        {"zip": "10001", "name": "Yusuf"}, {"command": "ed a.py"}, "free text", None,
        {"path": ["a", "b"]}, {"id": True}])
    def test_no_target(self, arguments: Any) -> None:
        """Arguments with no path, URL or id (or only odd values there) have no target."""
        assert call_target("tool", arguments) is None

    def test_targets_belong_to_one_tool(self) -> None:
        assert call_target("read", {"path": "/a"}) != call_target("write", {"path": "/a"})


class TestArgumentsNotCaptured:
    """A coding agent that sends no arguments (Claude Code and Gemini CLI by default): a
    failing edit names no target, so it may be on any file."""

    def test_a_success_of_the_tool_between_failures_ends_their_streak(self) -> None:
        """Write fails, succeeds, fails...: the success may have been on the failing file."""
        calls = [call("write_file", error="Error") if i % 2 == 0 else call("write_file")
                 for i in range(9)]
        assert by(run(calls), "mutating_failure") == {}

    def test_the_same_failure_back_to_back_counts_on_the_other_targets_ladder(self) -> None:
        """Nothing between the failures, but they may be on as many files (absent is not the
        same): warn at 5, never a stop. Before, they were one file's streak and stopped at 4
        (on the development corpus without content: 4 healthy runs stopped, one of them a
        user's cancelled edits of several files). The same edits of one captured file still
        stop at 4."""
        error = "Failed to edit, could not find the string to replace."
        assert by(run([call("replace", None, error=error)] * 6), "mutating_failure") == {
            5: "warn", 6: "warn"}
        seen = [call("replace", {"file_path": "a.md", "old_string": f"x{n}", "new_string": "y"},
                     error=error) for n in range(4)]
        assert by(run(seen), "mutating_failure") == {3: "warn", 4: "stop"}

    def test_a_read_between_failures_does_not_end_them(self) -> None:
        """Only a success of a mutating call of that tool could have changed the file."""
        calls = [call("write_file", error="Error"), call("read_file")] * 5
        assert by(run(calls), "mutating_failure") == {9: "warn"}


class TestPatchesThroughTheShell:
    def test_rejected_patches_of_one_file_count_on_it(self) -> None:
        """Codex CLI applies its edits through its shell tool (``["apply_patch", PATCH]``):
        three different patches of one file, each rejected, with reads between, are one file's
        rejected edits, as when the patch is ``apply_patch``'s own argument. Before, such a
        call had no target, and the rejections counted nowhere."""
        def patch(n: int) -> dict[str, Any]:
            text = f"*** Begin Patch\n*** Update File: src/App.tsx\n@@\n-old {n}\n+new {n}\n"
            return call("shell", {"command": ["apply_patch", text + "*** End Patch\n"]},
                        error="apply_patch verification failed: Failed to find expected lines")
        read = call("shell", {"command": ["bash", "-lc", "sed -n 1,80p src/App.tsx"]}, "x")
        calls = [patch(1), read, patch(2), read, patch(3)]
        assert by(run(calls), "mutating_failure") == {5: "warn"}


class TestAskTheUser:
    """A tool that asks the user returns the user's reply: a new message from the user."""

    TOKEN = call("create_issue", {"repo": "a/b", "title": "t"}, error="404 Not Found")

    @pytest.mark.parametrize("tool", ["ask_followup_question", "AskUserQuestion",
                                      "attempt_completion", "mcp__helper__ask_user"])
    def test_a_retry_after_the_users_answer_is_a_new_attempt(self, tool: str) -> None:
        """404, the user renews the token and says so, the same call 404s again: no stop
        until it fails twice after the same answer."""
        calls = [self.TOKEN, call(tool, {"question": "Renew the token?"}, "Done, try again"),
                 self.TOKEN, call(tool, {"question": "Renew the token?"}, "Renewed it again"),
                 self.TOKEN, self.TOKEN]
        assert by(run(calls), "failure") == {6: "stop"}

    def test_without_the_users_answer_the_second_failure_stops(self) -> None:
        """The same call failing twice with a permanent error: stop at the second."""
        calls = [self.TOKEN, call("lookup", {"q": "token"}, "no token found"), self.TOKEN]
        assert by(run(calls), "failure") == {3: "stop"}

    def test_an_answer_not_captured_is_a_new_answer(self) -> None:
        """Claude Code and Gemini CLI send no tool output, nor does an instrumentation with
        content capture off: a successful ask still means the user answered, and an answer not
        seen is never the same one (absent is not the same). A failed ask is no answer."""
        calls = [self.TOKEN, call("AskUserQuestion", {"question": "Renew the token?"}),
                 self.TOKEN, call("AskUserQuestion", {"question": "Renew the token?"}),
                 self.TOKEN, self.TOKEN]
        assert by(run(calls), "failure") == {6: "stop"}
        refused = [self.TOKEN, call("AskUserQuestion", {"question": "Renew the token?"},
                                    error="declined by the user"), self.TOKEN]
        assert by(run(refused), "failure") == {3: "stop"}

    def test_the_same_answer_again_changes_nothing(self) -> None:
        """A reply the run already heard is no news."""
        ask = call("ask_followup_question", {"question": "Go on?"}, "yes")
        calls = [self.TOKEN, ask, self.TOKEN, ask, self.TOKEN]
        assert by(run(calls), "failure") == {5: "stop"}

    def test_ask_tool_patterns_names_the_tools(self) -> None:
        """With no patterns, an answer is only a tool's result."""
        calls = [self.TOKEN, call("ask_followup_question", {"question": "q"}, "Done"),
                 self.TOKEN, call("ask_followup_question", {"question": "q"}, "Done again"),
                 self.TOKEN]
        assert by(run(calls), "failure") == {}
        assert by(run(calls, LoopGuardConfig.create(ask_tool_patterns=[])), "failure") == {
            3: "stop", 5: "stop"}

    def test_patterns_match_whatever_their_case(self) -> None:
        """A pattern written as the tool is named (``AskHuman``) matches it too."""
        calls = [self.TOKEN, call("AskHuman", {"q": "q"}, "Fixed it"), self.TOKEN,
                 call("AskHuman", {"q": "q"}, "Fixed it again"), self.TOKEN]
        config = LoopGuardConfig.create(ask_tool_patterns=["AskHuman"])
        assert by(run(calls, config), "failure") == {}


class TestOneTurnIsOneAttempt:
    """Calls of one model turn are issued before any of their results is seen: another call
    failing the same way in that turn is no retry (three edits of one reply rejected alike are
    one rejected reply); the same call issued again in one turn is still a repeat."""

    @staticmethod
    def _edit(n: int, turn: int, captured: bool = True) -> dict[str, Any]:
        return call("edit_file", {"path": "a.py", "old": f"x{n}", "new": f"y{n}"}
                    if captured else None, error="old_str not found in a.py", turn=turn)

    @pytest.mark.parametrize("captured", [True, False], ids=["arguments", "no-content"])
    def test_different_edits_of_one_reply_failing_alike_are_one_failure(
            self, captured: bool) -> None:
        calls = [self._edit(n, turn=1, captured=captured) for n in range(4)]
        assert by(run(calls), "failure") == {} and by(run(calls), "mutating_failure") == {}

    def test_the_same_edits_over_turns_are_attempts(self) -> None:
        calls = [self._edit(n, turn=n + 1) for n in range(4)]
        assert by(run(calls), "mutating_failure") == {3: "warn", 4: "stop"}

    def test_the_same_call_repeated_in_one_turn_still_counts(self) -> None:
        calls = [self._edit(0, turn=1)] * 4
        assert by(run(calls), "mutating_failure") == {3: "warn", 4: "stop"}

    def test_a_call_failing_again_beside_another_is_still_its_own_retry(self) -> None:
        """Toolathlon: ``list_courses(term="Intro")`` fails with a 500 in two turns, then again
        in a turn beside another term failing alike. That third one is a retry of its own
        failure, not another call of the reply: warn at 3, as in turns of its own (it was
        passed over as a sibling). Arguments not captured, calls are not known to be the same:
        the tool's third failing turn warns, and the call beside it is of that turn."""
        def listing(term: str, turn: int, captured: bool = True) -> dict[str, Any]:
            return call("list_courses", {"term": term} if captured else None,
                        error="Canvas API Error (500): An error occurred", turn=turn)

        calls = [listing("Intro", 1), listing("Intro", 2), listing("AI", 3), listing("Intro", 3)]
        assert by(run(calls), "failure") == {4: "warn"}
        unknown = [listing("Intro", n, captured=False) for n in (1, 2, 3, 3)]
        assert by(run(unknown), "failure") == {3: "warn"}

    def test_without_turns_overlapping_calls_are_one_batch(self) -> None:
        """No model turns known: calls that overlap in time (started before the others ended)
        are one batch; calls one after another are attempts."""
        together = [{**self._edit(n, turn=0), "turn": None, "start_time_ns": 100,
                     "end_time_ns": 200 + n} for n in range(4)]
        assert by(run(together), "mutating_failure") == {}
        apart = [{**self._edit(n, turn=0), "turn": None, "start_time_ns": 100 + 10 * n,
                  "end_time_ns": 105 + 10 * n} for n in range(4)]
        assert by(run(apart), "mutating_failure") == {3: "warn", 4: "stop"}


@pytest.mark.parametrize("error", [
    "Request failed after {n}.2s: 503 Service Unavailable",
    "TimeoutError: timed out after 30.{n}s",
    "upstream took {n}43 ms and then returned 502",
])
def test_a_duration_in_an_error_is_volatile(error: str) -> None:
    """The same failure again, but for how long it took (spec: volatile text): the retryable
    ladder counts it, warn at 3 and stop at 5, as with identical texts."""
    calls = [call("fetch", {"id": 1}, error=error.format(n=n)) for n in range(1, 6)]
    assert by(run(calls), "failure") == {3: "warn", 4: "warn", 5: "stop"}


@pytest.mark.parametrize("tail", ["", " in lines [103, 113]. Please ensure it is unique."])
def test_what_an_error_quotes_back_is_no_part_of_it(tail: str) -> None:
    """The editors quote the agent's ``old_str`` back: three edits of one file, each its own
    ``old_str``, rejected with 'Multiple occurrences' are the same error on the same target
    (warn at 3, stop at 4), also where the one-line error is cut inside the quote."""
    calls = [call("str_replace_editor", {"command": "str_replace", "path": "/w/a.py",
                                         "old_str": f"value = {n}\n    total", "new_str": "x"},
                  error=f"No replacement was performed. Multiple occurrences of old_str "
                        f"`value = {n}{'`' + tail if tail else ''}") for n in range(4)]
    assert by(run(calls), "mutating_failure") == {3: "warn", 4: "stop"}


def test_a_broken_tool_answering_every_call_alike_warns_at_the_fifth() -> None:
    """A tool that fails every command with one unclassified message and output (a CLI tool
    whose dependency broke: ``uname -s``, ``systeminfo``, ``echo $OSTYPE``... each answered
    with the same traceback) counts as when the arguments are unknown: warn at 5, no stop.
    Calls that fail alike with other outputs, or with an error that names nothing, do not."""
    broken = "An error occurred while executing the command: (psutil 5.9.5, Requirement.parse"
    calls = [call("cli_executor", {"command": f"cmd {n}"}, broken, error=broken)
             for n in range(6)]
    assert by(run(calls), "failure") == {5: "warn", 6: "warn"}
    varied = [call("cli_executor", {"command": f"cmd {n}"}, f"{broken} {n}", error=broken)
              for n in range(6)]
    assert by(run(varied), "failure") == {}
    bare = [call("bash", {"command": f"cmd {n}"}, error="exit code 1") for n in range(6)]
    assert by(run(bare), "failure") == {}


def test_a_step_limit_reached_is_told_apart_by_its_output_as_a_timeout_is() -> None:
    """A sub-agent tool that ran out of rounds (CAMEL's ``browse_url``: "task not completed
    within the round limit") on one site for different tasks, results not captured: no
    repeated failure of one target, as with a timeout (an audit's healthy runs warned at the
    third such failure, eight of them). The same task again still counts on the retry
    ladder."""
    limit = "task not completed within the round limit"
    calls = [call("browse_url", {"start_url": "http://intranet:8092", "task_prompt": f"find {n}"},
                  error=limit) for n in range(4)]
    assert by(run(calls), "failure") == {}
    same = call("browse_url", {"start_url": "http://intranet:8092", "task_prompt": "find x"},
                error=limit)
    assert by(run([same] * 3), "failure") == {3: "warn"}


def test_lost_argument_edit_failures_end_on_a_later_success_of_the_tool() -> None:
    """Edits whose arguments an export lost (``{}`` where the run sent edit_file arguments
    before) fail 'File has not been read yet'; each is followed by a read and a successful
    edit: four different mistakes, each corrected, are no streak (a real Claude Code session
    was stopped at the 4th). Back to back with no success between, they still count, on the
    other-targets ladder (no target is known: warn at 5, no stop)."""
    first = call("edit_file", {"path": "z.py", "old": "x", "new": "y"}, "ok")
    lost = call("edit_file", {}, None, error="File has not been read yet. Read it first.")
    calls = [first]
    for n in range(4):
        calls += [lost, call("read_file", {"path": f"f{n}.py"}, f"content {n}"),
                  call("edit_file", {"path": f"f{n}.py", "old": "a", "new": "b"}, "ok")]
    assert by(run(calls), "mutating_failure") == {}
    assert by(run([first, *[lost] * 6]), "mutating_failure") == {6: "warn", 7: "warn"}



def test_a_refusal_with_the_users_words_is_new_input() -> None:
    """Cline hands the model the user's words with a refused edit (``The user provided the
    following feedback: <feedback>...</feedback>``): each is new input, as a message of the
    user's is, so three rewrites refused with new instructions each time are no streak (a
    Cline task warned at the 3rd). Refusals without words still count: warn at the 3rd."""
    refused = "The user denied this operation. The file was not updated."

    def write(n: int, feedback: str | None) -> dict[str, Any]:
        said = f"\nThe user provided the following feedback:\n<feedback>\n{feedback}\n" \
               "</feedback>" if feedback else ""
        return call("write_to_file", {"path": "describe.py", "content": f"v{n}"},
                    refused + said, error=refused)

    told = [write(n, f"the model name is argument {n}") for n in range(4)]
    assert by(run(told), "mutating_failure") == {}
    silent = [write(n, None) for n in range(4)]
    assert by(run(silent), "mutating_failure") == {3: "warn", 4: "stop"}
