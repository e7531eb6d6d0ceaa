"""Claude Code's ``BashOutput`` polls a background command: reads while it runs are no loop.

Claude Code runs a long command in the background (``Bash`` with ``run_in_background``) and reads
what it printed so far with ``BashOutput {"bash_id": …}``: the same call each time, while the
command runs (``TaskOutput {"task_id": …}`` for a background task). With tool details on and no
results sent, three such reads used to be a repeat.
"""

from __future__ import annotations

from _calls import by, call, run

from otel_loopguard import LoopEngine, LoopGuardConfig


def test_bash_output_is_a_poll_tool() -> None:
    assert LoopEngine().tool_kind("BashOutput") == "poll"
    config = LoopGuardConfig.from_mapping({"tools": {"BashOutput": {"kind": "default"}}})
    assert LoopEngine(config).tool_kind("BashOutput") == "default"


def test_reads_of_a_running_command_are_not_repeats() -> None:
    """Three reads of one background shell, then it is killed: results not captured."""
    start = call("Bash", {"command": "find / -name .mcp.json", "run_in_background": True})
    read = call("BashOutput", {"bash_id": "a63b8e"})
    kill = call("KillShell", {"shell_id": "a63b8e"})
    assert by(run([start, read, read, read, kill]), "repeat") == {}


def test_the_same_output_read_on_and_on_is_still_stagnant() -> None:
    """With results captured, the same output ten times in a row stops, as any poll does."""
    read = call("BashOutput", {"bash_id": "a63b8e"}, "<status>running</status>\n(no new output)")
    found = by(run([read] * 10), "stagnation")
    assert min(found) == 5 and found[5] == "warn" and found[10] == "stop", found


def test_task_output_the_newer_name_is_a_poll_tool_too() -> None:
    """Claude Code reads a background task with ``TaskOutput {"task_id": …}``.

    Three reads of a build running in the background, results not sent, then the task is
    stopped: no repeat, as with ``BashOutput``.
    """
    assert LoopEngine().tool_kind("TaskOutput") == "poll"
    start = call("Bash", {"command": "npm run build", "run_in_background": True})
    read = call("TaskOutput", {"task_id": "b2prhow7g", "block": False})
    stop = call("TaskStop", {"task_id": "b2prhow7g"})
    assert by(run([start, read, read, read, stop]), "repeat") == {}


def test_codex_write_stdin_is_a_poll_tool() -> None:
    """Codex CLI reads a running command's new output with ``write_stdin`` (no characters).

    Three reads of a server starting up, the same output each time: no warning, as for any
    poll before its fifth unchanged result (a plain tool warns at the third); results not
    sent: no repeat.
    """
    assert LoopEngine().tool_kind("write_stdin") == "poll"
    start = call("exec_command", {"cmd": "npm run dev", "yield_time_ms": 1000}, "started")
    read = call("write_stdin", {"session_id": 7, "chars": "", "yield_time_ms": 5000},
                "Process running with session ID 7\nOutput:\n")
    assert by(run([start, read, read, read]), "stagnation") == {}
    blind = call("write_stdin", {"session_id": 7, "chars": ""})
    assert by(run([start, blind, blind, blind]), "repeat") == {}
