"""The development corpus's IDE and CLI sessions as Claude Code, Codex CLI and Gemini CLI send them.

``tests/corpus/native_agents.py`` re-expresses every run of the ``ide`` family as each coding
agent's own log events, at each level of opt-in, written as the Collector's file exporter
writes logs; ``check``'s reader and engine then judge each session against its run's label.
The test fails on any drop, per agent and level: more healthy sessions flagged by a loop
detector, more at replan or stop, fewer loops caught at or after their labelled start. The
bounds are the current figures (``FIGURES.md``, last section), with no slack: re-tighten them
after a change that improves them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from corpus import native_agents, replay
from corpus.figures import format_table

from otel_loopguard.cli import main

BOUNDS: dict[str, tuple[int, int, int]] = {
    # level: (most healthy sessions flagged, most at replan or stop, fewest loops caught)
    # without arguments a mutating tool's same failures warn at 5 (they were one file's streak,
    # warn 3): the two healthy sessions flagged so are quiet, and so is a borderline Cline loop
    # (three refusals for truncation with a read between), caught before: 2 then 1
    "claude-code | telemetry on (default)": (0, 0, 1),
    # 5 caught, then 4: Gemini CLI's bookminder day011 loop (calls 94-112) had been "caught" by
    # a flag on its healthy CI polling at 259-270 (gh run list), now a poll; then 3 (the Cline
    # loop above)
    "claude-code | OTEL_LOG_TOOL_DETAILS=1": (1, 0, 3),
    "codex | [otel] exporter (default)": (3, 0, 5),
    "gemini-cli | logPrompts: false": (0, 0, 1),
    "gemini-cli | logPrompts: true (default)": (4, 0, 4),
}


@pytest.fixture(scope="module", name="figures")
def _figures() -> dict:
    """Check every agent at every level once for the module."""
    result = native_agents.native_figures()
    print("\n" + native_agents.format_section(result))
    return result


@pytest.fixture(scope="module", name="ide_runs")
def _ide_runs() -> list[dict]:
    return [run for run in replay.iter_runs() if run["family"] == native_agents.FAMILY]


def test_every_level_has_bounds() -> None:
    """Each agent and level the corpus is sent at is guarded by a bound."""
    assert [level.key for level in native_agents.LEVELS] == list(BOUNDS)


@pytest.mark.parametrize("level", list(BOUNDS))
def test_no_drop_at_any_level(figures: dict, level: str) -> None:
    """No more healthy sessions flagged or stopped, no fewer loops caught, than now."""
    counts = figures[level].counts()
    most_flagged, most_stopped, fewest_caught = BOUNDS[level]
    table = format_table(figures[level], heading="level")
    assert counts["healthy_flagged"] <= most_flagged, table
    assert counts["replan_or_stop_on_healthy"] <= most_stopped, table
    assert counts["caught"] >= fewest_caught, table


def test_every_session_is_checked_whole(figures: dict, ide_runs: list[dict]) -> None:
    """Each run becomes one session of the agent with one tool call per call of the run."""
    for result in figures.values():
        assert [o.run for o in result.outcomes] == [run["id"] for run in ide_runs]
        for outcome, run in zip(result.outcomes, ide_runs, strict=True):
            assert outcome.tool_calls == len(replay.calls_of(run)), run["id"]


def test_a_saved_file_goes_through_the_check_command(
        tmp_path: Path, ide_runs: list[dict], capsys: pytest.CaptureFixture[str]) -> None:
    """The command line reads the written log file and names each session's agent template."""
    looping = [run for run in ide_runs if run["id"] ==
               "ide-specstory-learnwithcc-focuslab-2025-06-21-23-36z-commence-task-5-3-implementati"]
    level = native_agents.LEVELS[1]  # Claude Code with tool details
    path = tmp_path / "claude-code.jsonl"
    native_agents.write_logs(looping, level, path)
    code = main(["check", "--format", "json", str(path)])
    doc = json.loads(capsys.readouterr().out)
    [report] = doc["runs"] if isinstance(doc, dict) else doc
    assert code == 0  # a warn: check's exit code says stop (see docs/cli.md)
    assert report["action"] == "warn" and report["findings"]
    assert report["run_id"] == native_agents.run_key(level, looping[0]["id"])
    assert report["prompt_template"] == f"claude-code/{looping[0]['model']}"


@pytest.mark.parametrize(("agent", "tool", "args", "expected"), [
    ("claude-code", "read_file_v2", {"target_file": "a.py"}, ("Read", {"file_path": "a.py"})),
    ("gemini-cli", "read_file_v2", {"target_file": "a.py"},
     ("read_file", {"absolute_path": "a.py"})),
    ("codex", "read_file", {"target_file": "a.py", "offset": 5, "limit": 10},
     ("shell", {"command": ["bash", "-lc", "sed -n '5,14p' a.py"], "workdir": "/repo"})),
    ("codex", "run_terminal_cmd", {"command": "npm test"},
     ("shell", {"command": ["bash", "-lc", "npm test"], "workdir": "/repo"})),
    ("codex", "edit_file_v2", {"target_file": "a.py"}, ("apply_patch", {"file_path": "a.py"})),
    ("codex", "glob_file_search", {"query": "", "target_directory": "src"},
     ("shell", {"pattern": "", "path": "src"})),
    ("gemini-cli", "run_terminal_cmd", {"command": "ls"},
     ("run_shell_command", {"command": "ls"})),
    ("claude-code", "mcp_supabase_execute_sql", {"query": "x"},
     ("mcp__supabase__execute_sql", {"query": "x"})),
    ("codex", "codebase_search", {"query": "x"}, ("codebase_search", {"query": "x"})),
], ids=["claude-read", "gemini-read", "codex-read-range", "codex-shell",
        "codex-edit-dropped", "codex-search-dropped", "gemini-shell", "claude-mcp",
        "no-equivalent"])
def test_tools_are_named_and_shaped_as_each_agent_calls_them(
        agent: str, tool: str, args: dict, expected: tuple[str, dict]) -> None:
    """A tool with an equivalent takes the agent's name and argument names; content is kept."""
    assert native_agents.native_call(agent, tool, args) == expected


def test_codex_reads_whose_range_the_source_lost_carry_no_command() -> None:
    """A source whose reads never name a range dropped them: Codex's read names the part it
    reads in its command, so the call goes with its arguments lost, not as a ``cat`` of the
    whole file; where the run's reads keep ranges, a read without one is the whole file."""
    read = {"target_file": "src/a.py"}
    assert native_agents.native_call("codex", "read_file", read, ranges_kept=False) == \
        ("shell", {})
    assert native_agents.native_call("codex", "read_file", read) == \
        ("shell", {"command": ["bash", "-lc", "cat src/a.py"], "workdir": "/repo"})

    def run(*reads: dict) -> dict:
        return {"id": "ide-x", "turns": [{"calls": [
            {"tool": "read_file", "args": args, "result": None, "error": None}
            for args in reads]}]}

    assert not native_agents.keeps_ranges(run(read, read))
    assert native_agents.keeps_ranges(run(read, {"target_file": "b.py", "offset": 40}))


def test_claude_code_sends_arguments_cut_and_mcp_calls_as_mcp_tool() -> None:
    """Claude Code's tool_input cuts values at 512 characters; MCP calls are ``mcp_tool``."""
    run = {"id": "ide-x", "model": "m", "turns": [{"input": None, "output": None, "calls": [
        {"tool": "Write", "args": {"file_path": "a", "content": "x" * 2000}, "result": None,
         "error": None},
        {"tool": "mcp__siyuan__sql_query", "args": {"sql": "s"}, "result": None,
         "error": "boom"}]}]}
    detailed = native_agents.session_records(run, native_agents.LEVELS[1], 1)
    plain = native_agents.session_records(run, native_agents.LEVELS[0], 1)
    write, mcp = (attrs for _, _, attrs in detailed if attrs["event.name"] == "tool_result")
    assert len(json.loads(write["tool_input"])["content"]) == 512
    assert mcp["tool_name"] == "mcp_tool" and mcp["error"] == "boom"
    assert json.loads(mcp["tool_parameters"])["mcp_tool_name"] == "sql_query"
    for _, _, attrs in plain:
        assert not {"tool_input", "tool_parameters", "error"} & set(attrs)
