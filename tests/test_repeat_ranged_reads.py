"""A read repeated with no result captured counts when its tool keeps its range arguments.

Claude Code's ``Read`` of one file eleven times back to back, results not captured (its
arguments only): the run's earlier ``Read`` with an ``offset`` shows that the export keeps the
range, so the same call again reads the same part. Without such a call a read without its
content may be another page (an IDE export that dropped the offsets), and is left to ``reread``.
A shell read keeps its range in its command line. Also here: what an export lost (a shell's or
an editor's ``{}``) and an edit tool that changes what the reads around it return.
"""

from __future__ import annotations

import pytest
from _calls import by, call, run

from otel_loopguard import LoopGuardConfig

FILE = "/home/dev/project/src/error.rs"


def test_the_same_read_again_counts_once_its_tool_showed_a_range() -> None:
    ranged = call("Read", {"file_path": "/home/dev/project/src/main.rs", "offset": 331})
    same = call("Read", {"file_path": FILE})
    grep = call("Grep", {"pattern": "SOURCES", "path": "src"})
    assert by(run([ranged, grep, same, same, same]), "repeat") == {5: "warn"}
    assert by(run([ranged, *[same] * 5]), "repeat") == {4: "warn", 5: "warn", 6: "replan"}


def test_without_a_range_in_the_run_a_read_may_be_another_page() -> None:
    """The same calls with no ranged call of the tool before: nothing, as before; a range
    named by another tool's call does not count for this one."""
    same = call("Read", {"file_path": FILE})
    other = call("view_file", {"path": FILE, "offset": 10})
    assert by(run([same] * 5), "repeat") == {}
    assert by(run([other, *[same] * 5]), "repeat") == {}


def test_an_edit_between_the_reads_restarts_the_count() -> None:
    """A change of the file between the reads: each read is a new observation."""
    ranged = call("Read", {"file_path": FILE, "offset": 1, "limit": 50})
    same = call("Read", {"file_path": FILE})
    calls = [ranged]
    for n in range(4):
        calls += [same, call("Edit", {"file_path": FILE, "old_string": f"a{n}",
                                      "new_string": f"b{n}"})]
    assert by(run(calls), "repeat") == {}


def test_without_the_near_duplicate_detector_reads_are_left_alone() -> None:
    """Arguments reach the detectors only with near_duplicate on: without it, as before."""
    config = LoopGuardConfig.create(detectors=[d for d in LoopGuardConfig().detectors
                                               if d != "near_duplicate"])
    ranged = call("Read", {"file_path": FILE, "offset": 331})
    same = call("Read", {"file_path": FILE})
    assert by(run([ranged, *[same] * 5], config), "repeat") == {}


def test_a_shell_read_carries_its_range_in_its_command_line() -> None:
    """``grep -n x f`` or ``sed -n 10,20p f`` names what it reads in the command itself: the same
    command line reads the same part, and counts as a plain call does (a mini-swe-agent
    grepping one file ten times, results not captured). Another command, or a change of the
    file between, does not."""
    grep = call("bash", {"command": 'grep -n "NdarrayMixin" astropy/table/table.py'})
    assert by(run([grep] * 5), "repeat") == {3: "warn", 4: "warn", 5: "replan"}
    pages = [call("bash", {"command": f"sed -n {n},{n + 40}p astropy/table/table.py"})
             for n in range(1, 200, 40)]
    assert by(run(pages), "repeat") == {}
    edit = call("bash", {"command": "sed -i 's/a/b/' astropy/table/table.py"})
    assert by(run([grep, grep, edit, grep, grep, edit, grep]), "repeat") == {}


@pytest.mark.parametrize("command", ["ls", "git status", "git diff", "docker ps -a"])
def test_a_shell_read_that_names_nothing_reads_the_working_directory(command: str) -> None:
    """``ls`` or ``git status`` names no file: what it reads changes with the working directory
    (a ``cd``, a build), which no mutating call announces; left alone as before."""
    bare = call("bash", {"command": command})
    assert by(run([bare] * 5), "repeat") == {}


def test_a_shell_read_is_still_no_repeat_where_its_result_was_captured() -> None:
    """With the output captured the outcome decides (``stagnation``), not the call alone."""
    grep = call("bash", {"command": "grep -n x a.py"}, "12: x = 1")
    assert by(run([grep] * 5), "repeat") == {}


@pytest.mark.parametrize("tool", ["bash", "str_replace_editor", "Edit"])
def test_an_empty_arguments_object_of_a_shell_or_editor_lost_them(tool: str) -> None:
    """A shell always sends a command, an editor a file: ``{}`` from one of them is an export
    that lost the arguments (Cursor's ``Edit {}``), so no two such calls are the same call,
    even as the run's first calls. A tool that takes no arguments repeats as before."""
    assert by(run([call(tool, {})] * 5), "repeat") == {}
    rejected = call(tool, {}, error="rejected by the user")
    assert by(run([rejected] * 3), "failure") == {}
    assert by(run([call("list_tables", {})] * 3), "repeat") == {3: "warn"}


def test_browser_use_edits_its_files_with_replace_file_str() -> None:
    """browser-use's ``replace_file_str`` changes the file it names: the same read after each
    edit is a new observation, not a re-read (its log's "Read from file" acknowledgement)."""
    read = call("read_file", {"file_name": "notes.md"}, "Read from file notes.md.")
    calls = [read]
    for old, new in (("x", "y"), ("y", "z")):
        calls += [call("replace_file_str", {"file_name": "notes.md", "old_str": old,
                                             "new_str": new}, "Successfully replaced"), read]
    decisions = run(calls)
    assert by(decisions, "reread") == {} and by(decisions, "stagnation") == {}
