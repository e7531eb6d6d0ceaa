"""Convert mini-swe-agent runs of Claude Sonnet 4 on Terminal-Bench (core 0.1.1) into corpus runs.

Source: github.com/laude-institute/terminal-bench-leaderboard, commit
8e1925a397d7ed859c027cc19b3a3d90c16ef8df, folder
``results/terminal-bench-core@0.1.1/20250825_swe-agent-mini_claude-4-sonnet``: the submission's
five runs of the benchmark (``<run-date>/<task>/<task>.1-of-1.<run-date>/sessions/agent.log``).
The repository has no licence file, so results are stored as digests (``content: "hashed"``);
the commands are kept.

Runs taken (chosen without looking at their content): every trial whose log holds at least one
model step. The other trials never started the agent (its install failed: ``mini: command not
found``) and hold no model turn.

What the log is: the terminal recording of the trial's tmux session (asciinema's text log), in
which the harness's console prints each step: ``mini-swe-agent (step N, $cost):``, the model's
response (``THOUGHT: ...`` and its ```` ```bash ```` block), then ``User:`` and the observation the
harness sent back (``<returncode>N</returncode><output>...</output>``, or a timeout notice, or a
format error), then a rule. The converter takes out what is not the agent's exchange: terminal
escape sequences and carriage returns, the spinner (``Waiting for the LM to respond...``, cut
where the terminal wrapped it) and LiteLLM's logging tracebacks (a missing ``backoff`` module,
printed after each model call). The console wraps long lines at the terminal's width (each run's
own), so a long command or output line is stored as the console showed it: equal texts of one
run stay equal.

How steps map to turns and calls: every step is one turn, its response the turn's ``output``.
A response with exactly one ```` ```bash ```` block is one ``bash`` call, ``{"command": ...}``; its
result is the observation as the model saw it, and its error ``exit code N`` for a non-zero
return code, ``timed out`` when the harness killed the command. A response with none or several
blocks is a turn without a call, and the harness's format error is the next turn's ``input``.
The last step's ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` ends the run with no observation
(its result is null; ``content`` stays ``hashed``, as for the other sources without a licence).
A run cut by the trial's time limit ends at its last printed step.

Usage: ``python tests/corpus/sources/shell_tbench_minisweagent_sonnet4.py SUBMISSION_DIR`` where
SUBMISSION_DIR is that folder of a local copy of the commit; writes
``tests/corpus/runs/shell/tbench-minisweagent-sonnet4.jsonl.gz``.
"""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path
from typing import Any

from _store import write_runs

SOURCE = "laude-institute/terminal-bench-leaderboard"
COMMIT = "8e1925a397d7ed859c027cc19b3a3d90c16ef8df"
LICENCE = "none"
HARNESS = "mini-swe-agent (Terminal-Bench)"
MODEL = "claude-sonnet-4-20250514"
SLUG = "tbench-minisweagent-sonnet4"
FOLDER = "results/terminal-bench-core@0.1.1/20250825_swe-agent-mini_claude-4-sonnet"
OUT = Path(__file__).resolve().parents[1] / "runs" / "shell" / f"{SLUG}.jsonl.gz"

_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]|\x1b[=>]")
_SPINNER_CHARS = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_SPINNER_TEXT = " Waiting for the LM to respond..."
_LITELLM = re.compile(
    r"^\d\d:\d\d:\d\d - LiteLLM:ERROR:.*?^ImportError: Missing dependency[^\n]*\n", re.M | re.S)
_STEP = re.compile(r"^mini-swe-agent \(step (\d+), \$[0-9.]+\):\s*$", re.M)
_RULE = re.compile(r"^─{20,}.*$", re.M)
_ACTION = re.compile(r"```bash\n(.*?)\n```", re.S)
_RETURNCODE = re.compile(r"<returncode>(-?\d+)</returncode>")


def _drop_spinner(text: str) -> str:
    """Take out the spinner's frames, each a prefix of its text where the terminal cut it."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in _SPINNER_CHARS:
            j = 0
            while j < len(_SPINNER_TEXT) and i + 1 + j < len(text) \
                    and text[i + 1 + j] == _SPINNER_TEXT[j]:
                j += 1
            i += 1 + j
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def clean(raw: str) -> str:
    """The console's text of the agent's exchange (see the module docstring)."""
    text = _ESCAPES.sub("", raw).replace("\r", "")
    return _LITELLM.sub("", _drop_spinner(text))


def digest(text: str) -> str:
    return f"sha256:{hashlib.sha256(text.encode()).hexdigest()}" if text else ""


def _observation(segment: str) -> tuple[str, str | None]:
    """Split a step's text into the model's response and what the harness sent back (or None)."""
    parts = re.split(r"^User:\s*$", segment, maxsplit=1, flags=re.M)
    response = parts[0].strip()
    if len(parts) == 1:
        return response, None
    observation = _RULE.split(parts[1], maxsplit=1)[0].strip()
    if "Saved trajectory to" in observation and "<output>" not in observation:
        return response, None  # the run's end: the harness printed no observation
    return response, observation


def convert(log: Path, run_date: str, task: str) -> dict[str, Any] | None:
    text = clean(log.read_text(errors="replace"))
    headers = list(_STEP.finditer(text))
    if not headers:
        return None
    turns: list[dict[str, Any]] = []
    feedback: str | None = None
    for index, header in enumerate(headers):
        end = headers[index + 1].start() if index + 1 < len(headers) else len(text)
        response, observation = _observation(text[header.end():end])
        actions = _ACTION.findall(response)
        turn: dict[str, Any] = {"agent": None, "input": feedback, "output": response or None,
                                "calls": []}
        feedback = None
        if len(actions) == 1:
            error = None
            if observation is not None:
                code = _RETURNCODE.search(observation)
                if "timed out and has been killed" in observation:
                    error = "timed out"
                elif code is not None and code.group(1) != "0":
                    error = f"exit code {code.group(1)}"
            turn["calls"].append({
                "tool": "bash", "args": {"command": actions[0]},
                "result": None if observation is None else digest(observation), "error": error})
        else:
            feedback = observation
        turns.append(turn)
    return {
        "id": f"shell-{SLUG}-{task}-{run_date}",
        "family": "shell",
        "source": SOURCE,
        "path": f"{FOLDER}/{run_date}/{task}/{log.parts[-3]}/sessions/agent.log",
        "commit": COMMIT,
        "licence": LICENCE,
        "harness": HARNESS,
        "model": MODEL,
        "content": "hashed",  # as every source without a licence: the last call's is null
        "turns": turns,
    }


def main(folder: Path) -> None:
    runs = []
    for log in sorted(folder.glob("*/*/*/sessions/agent.log")):
        run_date, task = log.parts[-5], log.parts[-4]
        run = convert(log, run_date, task)
        if run is not None:
            runs.append(run)
    write_runs(runs, OUT)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
