"""A tool whose name says it changes files is ``mutating``: a rerun after it is new.

MLAgentBench's research agents edit with ``Edit Script (AI)`` and copy with ``Copy File``; the
MCP filesystem server moves with ``move_file`` and makes directories with ``create_directory``.
None is in ``mutating_tools``, so at ``arguments`` capture a script run after each of three
different edits read as the same call three times (an unseen audit's research-agent run).
"""

from __future__ import annotations

from _calls import by, call, run

from otel_loopguard import LoopEngine, LoopGuardConfig


def test_names_with_a_file_word_and_a_change_word_are_mutating() -> None:
    engine = LoopEngine()
    for tool in ("Edit Script (AI)", "Undo Edit Script", "Copy File", "move_file",
                 "create_directory", "filesystem__move_file", "MoveFile",
                 "write_file_pentest"):
        assert engine.tool_kind(tool) == "mutating", tool


def test_names_that_only_look_or_run_stay_as_they_were() -> None:
    engine = LoopEngine()
    for tool in ("Execute Script", "Inspect Script Lines", "List Files", "get_file_info",
                 "search_files", "directory_tree", "create_ticket", "update_record"):
        assert engine.tool_kind(tool) == "default", tool
    assert engine.tool_kind("update_file_status") == "poll"  # the poll globs come first


def test_a_configured_kind_wins() -> None:
    config = LoopGuardConfig.from_mapping({"tools": {"Copy File": {"kind": "read"}}})
    assert LoopEngine(config).tool_kind("Copy File") == "read"


def test_a_script_run_after_each_edit_is_no_repeat() -> None:
    """Results not captured: each run of the script after a different edit is new."""
    calls = []
    for n in range(3):
        calls.append(call("Edit Script (AI)", {"script_name": "train.py",
                                               "edit_instruction": f"change {n}"}))
        calls.append(call("Execute Script", {"script_name": "train.py"}))
    assert by(run(calls), "repeat") == {}
    runs_alone = [call("Execute Script", {"script_name": "train.py"})] * 3
    assert by(run(runs_alone), "repeat") == {3: "warn"}


def test_a_file_change_is_a_change() -> None:
    """``file_change`` and ``change_file`` name a change of files too (``codex exec --json``'s
    edits, kept as their paths alone): four edits of one file between reads of new parts of
    it, results not captured, warned as one call made four times."""
    engine = LoopEngine()
    for tool in ("file_change", "change_file", "apply_file_change"):
        assert engine.tool_kind(tool) == "mutating", tool
    assert engine.tool_kind("list_file_changes") == "default"
    edit = call("file_change", {"changes": [{"path": "/src/internal.c", "kind": "update"}]})
    calls = []
    for n in range(4):
        calls.append(edit)
        calls.append(call("shell", {"command": f"sed -n {100 * n},{100 * n + 60}p internal.c"}))
    assert by(run(calls), "repeat") == {}


def test_codex_exec_json_commands_and_changes() -> None:
    """``codex exec --json`` logs its commands as ``command_execution`` and its edits as
    ``file_change`` items that name their files and operations only. Three ``git status`` with
    an ``rm``, a ``mkdir`` and a heredoc write between them were one read repeated (the
    command's kind unknown), and three edits of one file back to back one change re-applied."""
    engine = LoopEngine()
    rm = {"command": "bash -lc 'rm a.lock'"}
    assert engine.tool_kind("command_execution", arguments=rm) == "mutating"
    status = call("command_execution", {"command": "bash -lc 'git status -sb'"}, "## main\n?? out/")
    calls = [status, call("command_execution", {"command": "bash -lc 'rm package-lock.json'"}, ""),
             status, call("command_execution", {"command": "mkdir -p out/logs"}, ""), status]
    assert [d.code for d in run(calls) if d.flagged] == []
    edit = call("file_change", {"changes": [{"path": "/w/Jenkinsfile", "kind": "update"}]})
    assert by(run([edit] * 3), "repeat") == {}
    patch = call("file_change", {"changes": [{"path": "/w/Jenkinsfile", "kind": "update",
                                              "diff": "@@ -1 +1 @@\n-a\n+b\n"}]})
    assert by(run([patch] * 3), "repeat") == {3: "warn"}
