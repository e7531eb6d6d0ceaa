"""State change is progress: the world version, and each repetition detector counting within it.

A successful mutating call that differs from the run's earlier ones (other arguments or another
result) advances the run's world version; a read or plain call repeated after it starts a new
count. Re-applying the same mutation with the same result is no change.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from _calls import by, call, codes, filler, run, tool_call

from otel_loopguard import Action, LoopEngine, LoopGuardConfig
from otel_loopguard.detectors._step import in_world, sequence_key
from otel_loopguard.policy import render_hint
from otel_loopguard.testing import LoopGuardHarness

FAILING = {"passed": False, "output": "FAILED test_total - assert 3 == 4"}


def edit(n: Any, result: Any = "ok", **extra: Any) -> dict[str, Any]:
    """Return a successful (by default) edit of a.py, distinct for each ``n``."""
    return call("edit_file", {"path": "a.py", "old": f"v{n}", "new": f"v{n}+"}, result, **extra)


def rerun(result: Any = FAILING) -> dict[str, Any]:
    return call("run_tests", {}, result)


class TestRestartIsProgress:
    @pytest.mark.parametrize("restart", ["docker restart web", "docker compose up -d",
                                         "supervisorctl restart app", "systemctl restart app"])
    def test_a_rerun_after_a_restart_counts_afresh(self, restart: str) -> None:
        """A command rerun after a service restart is a new observation: its count restarts."""
        curl = call("bash", {"command": "curl -s localhost:8080/health"}, "502 Bad Gateway")
        calls = [curl, curl, call("bash", {"command": restart}, ""), curl, curl]
        assert by(run(calls), "stagnation") == {}
        assert by(run([curl] * 4), "stagnation") == {3: "warn", 4: "replan"}


class TestWorldVersion:
    @staticmethod
    def _versions(calls: list[dict[str, Any]]) -> list[int]:
        engine = LoopEngine()
        state = engine.new_run()
        return [engine.make_step(state, tool_call(i, c)).version for i, c in enumerate(calls)]

    def test_only_new_successful_mutations_advance_it(self) -> None:
        """New edits advance the version; a re-applied edit with the same result, a failed
        edit, a read and a plain call do not; the same edit with another result does."""
        calls = [edit(1), edit(2), edit(1), edit(1, error="old_text not found"),
                 call("read_file", {"path": "a.py"}, "x"), rerun(), edit(1, "ok, 2 changes")]
        assert self._versions(calls) == [1, 2, 2, 2, 2, 2, 3]

    def test_a_configured_mutating_tool_counts(self) -> None:
        """Any tool whose kind is mutating (here by configuration) is a state change."""
        engine = LoopEngine(LoopGuardConfig.create(tools={"deploy": {"kind": "mutating"}}))
        state = engine.new_run()
        step = engine.make_step(state, tool_call(0, call("deploy", {"v": 2}, "deployed")))
        assert (step.kind, step.version) == ("mutating", 1)

    def test_keys_carry_the_version(self) -> None:
        """Repetition keys carry the version; a sequence keys a mutation without it."""
        engine = LoopEngine()
        state = engine.new_run()
        steps = [engine.make_step(state, tool_call(i, c))
                 for i, c in enumerate([rerun(), edit(1), rerun(), edit(1), call("ls", {})])]
        assert in_world("k", 0) == "k" != in_world("k", 3)
        assert steps[0].pair == steps[0].outcome != steps[2].pair
        assert steps[1].pair == steps[3].pair != steps[1].outcome
        assert [sequence_key(s) for s in steps] == [steps[0].pair, steps[1].outcome,
                                                    steps[2].pair, steps[1].outcome, "\x00absent:5"]
        assert [s.sequence for s in steps] == [sequence_key(s) for s in steps]  # set by make_step

    def test_memory_is_bounded(self) -> None:
        """A run remembers at most 1,024 mutations to tell a new one from a re-applied one."""
        engine = LoopEngine(LoopGuardConfig.create(max_tool_calls_warn=None))
        state = engine.new_run()
        for i in range(3_000):
            engine.process(state, tool_call(i, edit(i)))
        assert len(state.mutations) <= 1024
        assert state.version == 3_000

    def test_reset_forgets_it(self) -> None:
        engine = LoopEngine()
        state = engine.new_run()
        engine.process(state, tool_call(0, edit(1)))
        engine.reset(state)
        assert (state.version, len(state.mutations)) == (0, 0)


class TestStagnation:
    def test_a_rerun_after_a_different_edit_starts_a_new_count(self) -> None:
        """The same failing test run twice, an edit, twice again: never three in one world."""
        assert by(run([rerun(), rerun(), edit(1), rerun(), rerun()]), "stagnation") == {}
        assert by(run([rerun()] * 3), "stagnation") == {3: "warn"}

    def test_a_re_applied_edit_is_no_change(self) -> None:
        """The same edit with the same result before each rerun: the third rerun warns."""
        assert by(run([edit(1), rerun()] * 3), "stagnation")[6] == "warn"

    def test_a_failed_edit_is_no_change(self) -> None:
        """An edit that failed changed nothing: the reruns around it add up."""
        calls = [rerun(), edit(1, error="old_text not found"), rerun(), rerun()]
        assert by(run(calls), "stagnation") == {4: "warn"}

    def test_poll_streak_restarts_after_a_change(self) -> None:
        """A poll that reports the same state after a different state change starts again."""
        poll = call("poll_job", {"id": 1}, "pending")
        calls = [poll] * 4 + [call("restart_job", {"id": 1}, "restarted")] + [poll] * 4
        config = LoopGuardConfig.create(tools={"restart_job": {"kind": "mutating"}})
        assert by(run(calls, config), "stagnation") == {}
        assert by(run([poll] * 5), "stagnation") == {5: "warn"}


class TestNoEffect:
    def test_warns_at_the_sixth_identical_result_and_never_more(self) -> None:
        """After each of 8 different edits the test fails identically: NO_EFFECT warns from
        the 6th identical result on, and nothing climbs to replan."""
        calls = [c for n in range(8) for c in (edit(n), rerun())]
        decisions = run(calls)
        assert by(decisions, "stagnation") == {12: "warn", 14: "warn", 16: "warn"}
        assert codes(decisions) == {"NO_EFFECT"}
        assert max(d.action for d in decisions) is Action.WARN
        evidence = decisions[11].evidence[0]
        assert (evidence.count, evidence.details["state_changes"]) == (6, 5)
        assert "have not changed" in decisions[11].hint

    @pytest.mark.parametrize("result", [
        "EXIT:0", "===== 5 passed in 0.21s =====", "Build succeeded. 0 Warning(s) 0 Error(s)",
        "> docs@0.1.0 lint\n> next lint\n\n\x1b[32m✔ No ESLint warnings or errors\x1b[39m\n",
        "**No lint errors found**", "No linter errors found.", "Found 0 type errors.",
        "sha256:371671f3ab6eab6c5926a92c5e112d67d0a8185eb0a587367f1ce22a9a15842e",
        {"passed": True, "output": "5 passed"}])
    def test_a_check_that_keeps_passing_is_not_without_effect(self, result: Any) -> None:
        """The same passing (or unreadable) output after each of 8 edits is verification: no
        ``NO_EFFECT``, and ``precheck`` predicts none before the next rerun."""
        calls = [c for n in range(8) for c in (edit(n), rerun(result))]
        engine = LoopEngine()
        state = engine.new_run()
        decisions = [engine.process(state, tool_call(i, fields))
                     for i, fields in enumerate(calls)]
        assert by(decisions, "stagnation") == {}
        engine.process(state, tool_call(len(calls), edit(8)))
        assert engine.precheck(state, "run_tests", {}).action is Action.CONTINUE

    @pytest.mark.parametrize("result", [
        "src/a.ts(3,4): error TS1005: ';' expected.\nEXIT:2", "Traceback (most recent call "
        "last):\n  File \"a.py\", line 1\nNameError: name 'x' is not defined", "EXIT:1",
        "Found 3 errors in 1 file.", "No tests ran, 1 error"])
    def test_the_same_failure_after_each_change_is_without_effect(self, result: Any) -> None:
        """Output that reads as a failure keeps counting: ``NO_EFFECT`` at the 6th rerun, and
        ``precheck`` predicts it for the rerun that would reach it."""
        calls = [c for n in range(6) for c in (edit(n), rerun(result))]
        assert by(run(calls), "stagnation") == {12: "warn"}
        engine = LoopEngine()
        state = engine.new_run()
        for i, fields in enumerate([*calls[:10], edit(5)]):
            engine.process(state, tool_call(i, fields))
        assert engine.precheck(state, "run_tests", {}).code == "NO_EFFECT"

    @pytest.mark.parametrize("result", [
        {"passed": False, "output": "assert 3 == 4"},
        '{"passed": false, "output": "assert 3 == 4"}'], ids=["dict", "json-text"])
    def test_a_passed_false_field_reads_as_a_failure(self, result: Any) -> None:
        """A ``"passed": false``-style field is a failure as an object and as the JSON text a
        span records (the processor, ``check`` and ``serve`` see the text)."""
        calls = [c for n in range(6) for c in (edit(n), rerun(result))]
        assert by(run(calls), "stagnation") == {12: "warn"}

    def test_a_passed_false_field_on_spans_is_without_effect(self) -> None:
        """Through real spans, ``check`` warns NO_EFFECT at the 6th identical rerun."""
        harness = LoopGuardHarness()
        with harness.run() as script:
            for n in range(6):
                script.tool("edit_file", {"path": "a.py", "old": f"v{n}", "new": f"v{n}+"}, "ok")
                script.tool("run_tests", {}, {"passed": False, "output": "assert 3 == 4"})
        reports = harness.check()
        harness.shutdown()
        assert [(d.code, d.call_index) for r in reports for d in r.findings] == [
            ("NO_EFFECT", 12)]

    def test_each_change_counts_once(self) -> None:
        """Two reruns after each change: the identical result must survive 5 changes."""
        calls = [c for n in range(7) for c in (edit(n), rerun(), rerun())]
        assert by(run(calls), "stagnation") == {17: "warn", 18: "warn", 20: "warn", 21: "warn"}

    def test_changes_before_the_repeats_do_not_count(self) -> None:
        """Changes made before the result started repeating are not changes it survived."""
        calls = [rerun(), *[edit(n) for n in range(5)]]
        for n in range(6):
            calls += [*filler(12, 20 * n), rerun()]
        assert by(run(calls), "stagnation") == {}

    def test_a_changed_result_restarts_it(self) -> None:
        """Five identical failures, then another one: the count starts again."""
        other = {"passed": False, "output": "FAILED test_total - assert 4 == 5"}
        calls = [c for n in range(5) for c in (edit(n), rerun())]
        calls += [c for n in range(5, 10) for c in (edit(n), rerun(other))]
        assert by(run(calls), "stagnation") == {}

    @pytest.mark.parametrize(("settings", "expected"), [
        ({"stagnation_no_effect_warn": None}, {}),
        ({"stagnation_no_effect_warn": 4}, {8: "warn", 10: "warn", 12: "warn"}),
        ({"tools": {"run_tests": {"stagnation_no_effect_warn": 3}}},
         {6: "warn", 8: "warn", 10: "warn", 12: "warn"}),
    ], ids=["off", "global", "per-tool"])
    def test_threshold(self, settings: dict[str, Any], expected: dict[int, str]) -> None:
        calls = [c for n in range(6) for c in (edit(n), rerun())]
        config = LoopGuardConfig.create(**settings)
        assert by(run(calls, config), "stagnation") == expected

    def test_reads_and_mutations_are_not_reruns(self) -> None:
        """A file read after each edit of another file, or a ``git add`` after each edit,
        returns the same thing every time: that is no finding."""
        config = LoopGuardConfig.create(tools={"git_add": {"kind": "mutating"}})
        for same in (call("read_file", {"path": "b.py"}, "b"), call("git_add", {}, "")):
            calls = [c for n in range(8) for c in (edit(n), same)]
            assert all(d.action is Action.CONTINUE for d in run(calls, config))


class TestRepeatAndReread:
    def test_repeat_without_results_counts_within_a_version(self) -> None:
        """Without captured results, a call repeated after a different state change is new."""
        again = call("run_tests", {})
        assert by(run([again, again, edit(1), again, again]), "repeat") == {}
        assert by(run([again] * 3), "repeat") == {3: "warn"}

    def test_a_read_after_a_change_is_a_new_observation(self) -> None:
        """Reading an unchanged file around other edits is not a re-read."""
        read = call("read_file", {"path": "b.py", "range": "0-100"}, "b")
        assert by(run([read, read, edit(1), read, read]), "reread") == {}
        assert by(run([read, read, rerun(), read]), "reread") == {4: "warn"}


class TestBatch:
    @staticmethod
    def _turns(*batches: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**c, "turn": turn} for turn, batch in enumerate(batches) for c in batch]

    def test_a_change_between_batches_restarts_the_count(self) -> None:
        pair = [call("price", {"s": 1}, "12"), call("stock", {"s": 1}, "0")]
        config = LoopGuardConfig.create(detectors=["batch"])
        assert by(run(self._turns(pair, pair, [edit(1)], pair), config), "batch") == {}
        assert by(run(self._turns(pair, pair, [rerun()], pair), config), "batch") == {7: "warn"}


class TestNearDuplicate:
    def test_mutating_calls_are_never_near_duplicates(self) -> None:
        """Three writes of reworded content, each returning nothing, are three changes."""
        calls = [call("write_file", {"path": "notes.md", "content": text}, "")
                 for text in ("the weather in Paris", "Paris weather", "paris weather today")]
        assert all(d.action is Action.CONTINUE for d in run(calls))

    def test_a_change_between_rewordings_restarts_the_group(self) -> None:
        search = [call("search", {"q": q}, "no results")
                  for q in ("weather in Paris", "Paris weather", "paris weather today")]
        assert by(run(search), "near_duplicate") == {3: "replan"}
        assert by(run([search[0], search[1], edit(1), search[2]]), "near_duplicate") == {}


class TestRepeatedBlocks:
    @staticmethod
    def _blocks(count: int, gap: int, block: list[dict[str, Any]]) -> list[dict[str, Any]]:
        calls: list[dict[str, Any]] = []
        for n in range(count):
            calls += block
            if n < count - 1:
                calls += [call("think", {"n": n, "i": i}, f"thought {n}.{i}") for i in range(gap)]
        return calls

    BLOCK: ClassVar[list[dict[str, Any]]] = [
        call("write_file", {"path": "fix.py", "content": "print(1"}, ""),
        call("write_file", {"path": "fix.py", "content": "print(1\n", "append": True}, ""),
        call("run_script", {"path": "fix.py"}, "SyntaxError: '(' was never closed")]

    @pytest.mark.parametrize("gap", [1, 2, 4])
    def test_warns_by_the_third_block(self, gap: int) -> None:
        """A block (mutations included) rebuilt identically with other calls between warns on
        the second call of its third occurrence, once, and again at the fourth."""
        decisions = run(self._blocks(4, gap, self.BLOCK))
        third, fourth = 2 * (3 + gap) + 2, 3 * (3 + gap) + 2
        assert by(decisions, "cycle") == {third: "warn", fourth: "warn"}
        evidence = next(e for e in decisions[third - 1].evidence if e.detector == "cycle")
        assert (evidence.code, evidence.count, evidence.details["gap"]) == (
            "REPEATED_BLOCK", 3, 3 + gap - 2)
        assert "with other calls in between" in render_hint(evidence, Action.WARN)

    def test_back_to_back_blocks_are_cycles(self) -> None:
        """Without other calls between, the same block is a cycle: warn at 2, stop at 3."""
        assert by(run(self._blocks(3, 0, self.BLOCK)), "cycle") == {6: "warn", 9: "stop"}

    def test_blocks_too_far_apart(self) -> None:
        """Occurrences that start more than ``cycle_max_length + cycle_max_gap`` calls apart
        (12 by default) are not compared."""
        assert by(run(self._blocks(3, 10, self.BLOCK)), "cycle") == {}
        wide = LoopGuardConfig.create(cycle_max_gap=5)
        assert by(run(self._blocks(3, 10, self.BLOCK), wide), "cycle") == {28: "warn"}

    def test_turned_off(self) -> None:
        config = LoopGuardConfig.create(cycle_gap_warn=None)
        assert by(run(self._blocks(3, 2, self.BLOCK), config), "cycle") == {}

    def test_changed_outcomes_are_no_repetition(self) -> None:
        """The same calls whose results move on (the file and the output change) are work."""
        calls: list[dict[str, Any]] = []
        for n in range(3):
            calls += [call("read_file", {"path": "fix.py"}, f"print({n}"),
                      call("run_script", {"path": "fix.py"}, f"line {n}: SyntaxError"),
                      call("think", {"n": n}, "again")]
        assert by(run(calls), "cycle") == {}

    def test_without_results_nothing_is_reported(self) -> None:
        """Calls alone repeating with gaps are too weak a sign."""
        block = [{k: v for k, v in c.items() if k not in ("result", "has_result")}
                 for c in self.BLOCK]
        assert by(run(self._blocks(3, 2, block)), "cycle") == {}

    def test_a_new_change_between_blocks_makes_the_reads_new(self) -> None:
        """A block of reads and runs repeated after another edit each time is new work."""
        block = [call("read_file", {"path": "a.py"}, "a"), rerun()]
        calls = [*block, edit(1), *block, edit(2), *block]
        assert by(run(calls), "cycle") == {}
        calls = [*block, call("think", {}, "1"), *block, call("think", {}, "2"), *block]
        assert by(run(calls), "cycle") == {8: "warn"}

    def test_a_parallel_block_with_turns_between(self) -> None:
        """The same parallel calls in a turn, other turns between, warn at the third turn."""
        calls: list[dict[str, Any]] = []
        for n in range(3):
            calls += [{**c, "turn": 2 * n} for c in self.BLOCK]
            calls.append({**call("think", {"n": n}, f"t{n}"), "turn": 2 * n + 1})
        decisions = run(calls, LoopGuardConfig.create(detectors=["batch"]))
        assert by(decisions, "batch") == {11: "warn"}


@pytest.mark.parametrize(("result", "failing"), [
    ("FAILED test_total - assert 3 == 4", True), ('{"passed": false, "output": "x"}', True),
    ("exit code 2", True), ("Process exited with status 1", True), ("returncode=1", True),
    ('{"error": "boom"}', True), ("src/a.ts(3,4): error TS1005", True),
    ("EXIT:0", False), ("Found 0 errors", False), ("return code 200", False),
    ("return 5 items", False), ('{"error": null, "result": 3}', False), ('{"errors": []}', False),
    ("errors: 0", False)])
def test_what_reads_as_a_failure(result: str, failing: bool) -> None:
    """A failure word, a non-zero exit code or a failed flag; not an empty error key, a zero
    count, or a ``return`` of a number."""
    from otel_loopguard.detectors._failing_text import reads_as_failure

    assert reads_as_failure(result) is failing


def test_a_tool_set_low_does_not_make_other_tools_results_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With one tool's NO_EFFECT threshold at 2, another tool's results are read for failure
    words only when its own count nears its own threshold (6), not on every call."""
    from otel_loopguard import engine as engine_module

    read: list[Any] = []
    real = engine_module.reads_as_failure

    def counting(result: Any) -> bool:
        read.append(result)
        return real(result)

    monkeypatch.setattr(engine_module, "reads_as_failure", counting)
    config = LoopGuardConfig.create(tools={"lint": {"stagnation_no_effect_warn": 2}})
    calls = [c for n in range(8) for c in (edit(n), rerun())]
    assert by(run(calls, config), "stagnation") == {12: "warn", 14: "warn", 16: "warn"}
    assert len(read) == 4  # the 5th to the 8th rerun (unchanged 5 to 8), not all 8
