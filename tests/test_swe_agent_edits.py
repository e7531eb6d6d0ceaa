"""SWE-agent's own editing commands change the file open in its viewer.

Classic SWE-agent edits through commands named after what they do: ``create reproduce.py``,
``insert 12`` (a block after line 12), ``append``, ``edit 10:12``. Each changes a file, so a
rejected one is a failing change: the same rejection of one place, whatever the text tried,
is ``mutating_failure``'s (an unseen SWE-agent run: one ``insert`` rejected three times with the
same ``IndentationError``).
"""

from __future__ import annotations

import pytest
from _calls import by, call, run

from otel_loopguard import LoopGuardConfig
from otel_loopguard.kinds._tools import ToolKinds

_REJECTED = "E999 IndentationError: unexpected indent"


@pytest.mark.parametrize("tool", ["create", "insert", "append", "edit"])
def test_an_editing_command_changes_the_file(tool: str) -> None:
    kinds = ToolKinds(LoopGuardConfig())
    assert kinds.kind(tool, arguments={"command": f"{tool} 12\nx = 1"}) == "mutating"


def test_the_same_insert_rejected_alike_is_a_failing_change() -> None:
    """Re-indented each time, rejected alike: warn at the third, stop at the fourth (F23)."""
    calls = [call("insert", {"command": f"insert 12\n{'    ' * n}x = 1\nend_of_insert"},
                  f"Your proposed edit has introduced new syntax error(s).\n{_REJECTED}",
                  error=_REJECTED) for n in range(1, 5)]
    assert by(run(calls), "mutating_failure") == {3: "warn", 4: "stop"}


def test_a_created_file_then_viewed_is_a_new_look() -> None:
    """``create`` changes the world: the same ``open`` after it reads anew."""
    look = call("open", {"command": "open reproduce.py"}, "[File: reproduce.py (1 lines total)]")
    calls = [look, call("create", {"command": "create reproduce.py"}, "[File: reproduce.py]"),
             look, call("create", {"command": "create other.py"}, "[File: other.py]"), look]
    decisions = run(calls)
    assert by(decisions, "stagnation") == {} and by(decisions, "reread") == {}
