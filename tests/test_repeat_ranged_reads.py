"""A read repeated with no result captured counts when its tool keeps its range arguments.

Claude Code's ``Read`` of one file eleven times back to back, results not captured (its
arguments only): the run's earlier ``Read`` with an ``offset`` shows that the export keeps the
range, so the same call again reads the same part. Without such a call a read without its
content may be another page (an IDE export that dropped the offsets), and is left to ``reread``.
"""

from __future__ import annotations

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
