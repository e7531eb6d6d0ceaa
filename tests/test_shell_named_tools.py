"""A tool whose name says it runs shell commands is read per call, as ``bash`` is.

UFO2's ``run_shell`` and a pentest harness's ``execute_bash_pentest`` are in no list of shell
tools, so their ``pip install`` and ``apt install`` calls were plain: a script rerun after each
install read as the same call again (a repeat warn on a healthy run of an unseen audit).
"""

from __future__ import annotations

from _calls import by, call, run

from otel_loopguard import LoopEngine, LoopGuardConfig
from otel_loopguard.detectors.failure import classify_error


def test_a_run_word_and_a_shell_word_name_a_shell() -> None:
    engine = LoopEngine()
    for tool in ("run_shell", "execute_bash_pentest", "ExecuteShellCommand",
                 "terminal_execute", "mcp__box__run_shell", "bash_command", "ShellCmd"):
        assert engine.tool_kind(tool, arguments={"command": "pip install numpy"}) \
            == "mutating", tool
        assert engine.tool_kind(tool, arguments={"command": "cat a.py"}) == "read", tool
    for tool in ("run_shellcheck", "shell_tool", "run_python", "run_sql_command"):
        assert engine.tool_kind(tool, arguments={"command": "pip install numpy"}) \
            == "default", tool


def test_terminus_keystrokes_after_a_rewrite_are_new() -> None:
    """Terminus 2 in Harbor types keys through ``bash_command``: the benchmark binary run
    again after each heredoc rewrite of its source and a rebuild is a new observation (with
    results off, it warned at the 3rd run of a healthy trial-and-error run)."""
    def keys(text: str) -> dict[str, object]:
        return call("bash_command", {"keystrokes": text, "duration": 1.0})

    calls = []
    for n in range(3):
        calls += [keys(f"cat << 'EOF' > target.c\nint main() {{ return {n}; }}\nEOF\n"),
                  keys("gcc -O2 -o /out/bench target.c\n"), keys("/out/bench\n")]
    assert by(run(calls), "repeat") == {}


def test_turned_off_per_tool() -> None:
    config = LoopGuardConfig.from_mapping({"tools": {"run_shell": {"shell": False}}})
    assert LoopEngine(config).tool_kind("run_shell", arguments={"command": "rm a"}) \
        == "default"


def test_a_rerun_after_each_install_is_new() -> None:
    """Results not captured: the script run after each install is a new observation."""
    solve = call("execute_bash_pentest", {"command": "python3 /root/scripts/solve.py"})
    calls = [solve]
    for package in ("pycryptodome", "sympy", "gmpy2"):
        calls += [call("execute_bash_pentest", {"command": f"pip install {package}"}), solve]
    assert by(run(calls), "repeat") == {}


def test_a_missing_api_key_is_permanent() -> None:
    """Retried verbatim it fails the same way: stop at 2, as a 401 does."""
    for text in ("Error: API key is required", "missing api key", "OPENAI_API_KEY not set",
                 "No API_KEY provided"):
        assert classify_error(text)[0] == "permanent", text
    assert classify_error("api key rate limit exceeded")[0] == "retryable"
    failing = call("tavily_search", {"query": "otel"}, error="Tavily API key is required")
    assert by(run([failing] * 2), "failure") == {2: "stop"}
