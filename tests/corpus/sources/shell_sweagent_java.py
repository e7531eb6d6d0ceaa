"""Convert SWE-agent 0.x runs on Multi-SWE-bench's Java tasks (five models) into corpus runs.

Source: github.com/multi-swe-bench/experiments, commit 89888f1604001fcd80b0799a37af42a1bfebfd8f
(its HEAD in the snapshot read, 2024-08-28, "add bench logs"; the trajectories were added by
eb2c166e93bdc37f987418ec3b50fffb93a7f633, 2024-08-25), folders
``evaluation/java/verified/20240825_SWE-agent_<model>/trajs/<instance>.traj`` for the models
``deepseek-chat-v2``, ``deepseek-coder-v2``, ``doubao-pro-128k`` (91 files each),
``gpt-4o-2024-05-13`` (89) and ``gpt-4o-mini-2024-07-18`` (86): 448 files, none of whose blobs
is missing from the snapshot and all of which load (the converter still skips and counts a
missing blob or a file that is not JSON). The tasks are Java issues (apache/dubbo, the
FasterXML jackson repositories, google/gson, GoogleContainerTools/jib...). The repository has no
licence, so result text is not copied: every result is ``sha256:<hex of the whole text>`` (``""``
for an empty one) and ``content`` is ``"hashed"``; the commands, the model's thoughts and the
harness's feedback messages are kept, as for the other sources without a licence. So is the
harness's own message in place of an empty observation (``NO_OUTPUT``, with the state lines its
template adds): SWE-agent's text, not the run's output.

Harness: SWE-agent 0.x with its default, Python-oriented configuration (the system prompt's
interface commands ``open``, ``goto``, ``scroll_down``, ``scroll_up``, ``create``, ``submit``,
``search_dir``, ``search_file``, ``find_file`` and ``edit N:M`` with its text up to
``end_of_edit``; the task prompt's tips to write a ``reproduce.py`` and run it with python; a
syntax check, flake8's, of edits to ``.py`` files only). The model writes a DISCUSSION and one
command in a fenced block; SWE-agent's ``ThoughtActionParser`` takes the last fenced block as the
action and the text before it as the thought, and runs the action in the container's bash (the
interface commands are shell functions there). Many containers have no ``javac``, ``java`` or
``mvn``.

Runs taken (chosen without looking at their content): every ``.traj`` path of those folders
whose file loads, sorted, and ``random.Random(2026).sample`` of ``SAMPLE`` (100) of them.

What a trajectory holds: ``trajectory`` (one step per model response: ``response``,
``thought``, ``action``, ``observation``, ``state``), ``history`` (the system prompt, a
demonstration marked ``is_demo``, the task message, then one ``assistant`` message per step,
equal to the step's response, thought and action, each followed by a ``user`` message: the
step's observation in the harness's ``next_step_template``, i.e. followed by ``(Open file:
...)``, ``(Current directory: ...)`` and ``bash-$``, or ``Your command ran successfully and did
not produce any output.`` in place of an empty observation) and ``info`` (``exit_status``,
``submission``, ``model_stats``). The harness's feedback on a response without a valid command
(SWE-agent's ``format_error_template``, and the retried response) is sent outside the history
and not recorded: ``history`` shows nothing that ``trajectory`` lacks, and the source has no
rejected responses. ``model_stats.api_calls`` counts 19 queries more than the recorded steps
(and the query that hit the cost limit) in 10 of the 448 files: most likely such retries.

How steps map to turns and calls: every step is one turn (``agent`` null, ``output`` the step's
``thought``, null if empty; ``input`` null: the system prompt, the demonstration and the task
message are left out) with one call: ``tool`` is the action's first word when it is one of the
commands the system prompt documents (the list above) and ``bash`` otherwise (as SWE-agent runs
it; this covers the models' own shell commands and the fenced text some responses wrongly put
last, such as a bare ``DISCUSSION`` paragraph or a file listing, which bash then fails to run);
``args`` is ``{"command": <the action as parsed, final newline removed>}``, as in the CodeR
converter. The result is what the harness showed the model next: the ``user`` message that
follows the step in ``history`` (observation and template); the run's last step has none, and
its result is the step's ``observation`` (for ``submit``, the diff submitted). A step whose
parsed action is empty (the last fenced block of the response was empty: 14 steps, all of
doubao-pro-128k) ran nothing: its turn has no call, and the harness's reply (the no-output
message) is the next turn's ``input``. The harness records no exit code; ``error`` is the
first that applies of: ``EXECUTION TIMED OUT`` (or ``... AND INTERRUPT FAILED. RESTARTING
PROCESS.``) when the harness killed the command; ``edit rejected: <the first error the syntax
check lists>`` (e.g. ``edit rejected: E999 SyntaxError: invalid syntax``) when it refused an
edit ("Your proposed edit has introduced new syntax error(s)"; these are all edits of ``.py``
files, often Java code written into ``reproduce.py``); for an interface command, the first line
of its own failure message (``Error: ...``, ``Usage: ...``, ``No file open. ...``, ``File ...
not found``, ``Directory ... not found``); otherwise the first ``/bin/bash: line N: ...`` line
of the observation, the shell's own complaint about the command (``command not found``, ``No
such file or directory`` from ``cd``, a syntax error), stored without its line number as
``/bin/bash: <message>``; else null (a Java or Maven error in a command's output is output).

How a run ends (``info.exit_status``): ``submitted`` (the model's ``submit``, the last step;
one deepseek-chat-v2 run ends with the action ``cd ../../../..`` then ``submit`` on a second
line, a ``bash`` call whose result is the diff), ``exit_cost`` or ``submitted (exit_cost)``
(the harness stopped the run at its cost limit, autosubmitting any changes: its last step,
action ``exit_cost``, thought "Exit due to cost limit", is no model response and is left out,
so the run ends on the last call before it), ``early_exit`` (one run: the command timed out and
the interrupt failed) and no status at all (4 gpt-4o-2024-05-13 and 2 gpt-4o-mini runs, which stop after a step
with nothing recorded after it, under the cost limit).

Usage: ``python tests/corpus/sources/shell_sweagent_java.py MIRROR_GIT_DIR [--plain OUT]``
where MIRROR_GIT_DIR is a bare clone of the repository (read with ``git ls-tree``/``cat-file``
only); writes ``tests/corpus/runs/shell/sweagent-java.jsonl.gz``. With ``--plain OUT`` it
writes the same runs to OUT with each result's text (capped as FORMAT.md says) instead of its
digest, for reading only, never for the corpus.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path
from typing import Any

from _store import SWE_AGENT_NO_OUTPUT as NO_OUTPUT
from _store import blob, cap, digest, git, write_runs

SOURCE = "multi-swe-bench/experiments"
COMMIT = "89888f1604001fcd80b0799a37af42a1bfebfd8f"
LICENCE = "none"
HARNESS = "SWE-agent 0.x (Multi-SWE-bench Java)"
SLUG = "sweagent-java"
SAMPLE = 100
SEED = 2026
OUT = Path(__file__).resolve().parents[1] / "runs" / "shell" / f"{SLUG}.jsonl.gz"

SHORT = {  # the model as the folder names it -> its short name in run ids
    "deepseek-chat-v2": "deepseek-chat-v2",
    "deepseek-coder-v2": "deepseek-coder-v2",
    "doubao-pro-128k": "doubao-pro-128k",
    "gpt-4o-2024-05-13": "gpt-4o",
    "gpt-4o-mini-2024-07-18": "gpt-4o-mini",
}
HARNESS_EXITS = ("exit_cost", "exit_context", "exit_format", "exit_api", "exit_error")
LINT_REJECTION = "Your proposed edit has introduced new syntax error(s)"

_TRAJ = re.compile(r"^evaluation/java/verified/20240825_SWE-agent_([^/]+)/trajs/([^/]+)\.traj$")
_BASH_ERROR = re.compile(r"^/bin/bash: line \d+: (.+)$", re.M)
_INTERFACE_ERROR = re.compile(r"^(?:Error:|Usage:|No file open\.|File .* not found$|Directory .* not "
                              r"found$)")


def documented_commands(history: list[dict[str, Any]]) -> set[str]:
    """The commands the system prompt documents (``name:`` then ``docstring:``)."""
    for message in history:
        if message["role"] == "system" and "COMMANDS:" in message["content"]:
            docs = message["content"].split("COMMANDS:", 1)[1]
            return set(re.findall(r"^(\w+):\n\s+docstring:", docs, re.MULTILINE))
    return set()


def tool_of(action: str, commands: set[str]) -> str:
    words = action.split()
    first = words[0] if words else ""
    return first if first in commands else "bash"


def error_of(tool: str, observation: str) -> str | None:
    text = observation.strip()
    lines = text.splitlines()
    timeout = [line for line in lines if line.startswith("EXECUTION TIMED OUT")]
    if timeout:
        return timeout[-1].strip()
    if tool == "edit" and text.startswith(LINT_REJECTION):
        listed = re.search(r"^ERRORS:\n- (.+)$", text, re.MULTILINE)
        return "edit rejected: " + (listed.group(1).strip()[:150] if listed else "syntax errors")
    first = lines[0].strip() if lines else ""
    if tool != "bash" and _INTERFACE_ERROR.match(first):
        return first[:200]
    shell = _BASH_ERROR.search(text)
    if shell:
        return ("/bin/bash: " + shell.group(1).strip())[:200]
    return None


def convert(doc: dict[str, Any], plain: bool) -> list[dict[str, Any]]:
    """The turns of one trajectory."""
    history = [message for message in doc["history"] if not message.get("is_demo")]
    steps = doc["trajectory"]
    commands = documented_commands(history)
    answers = [i for i, message in enumerate(history) if message["role"] == "assistant"]
    if len(answers) != len(steps):
        raise ValueError(f"{len(answers)} answers, {len(steps)} steps")
    turns: list[dict[str, Any]] = []
    pending: str | None = None  # the harness's reply to a response that ran nothing
    for index, step in zip(answers, steps, strict=True):
        message = history[index]
        if message["content"] != step["response"]:
            raise ValueError(f"history message {index} is not its step's response")
        action = step["action"]
        if action.strip() in HARNESS_EXITS:
            continue  # the harness stopping the run, not a model response
        following = history[index + 1] if index + 1 < len(history) else None
        shown = following["content"] if following and following["role"] == "user" \
            else step["observation"]
        turn: dict[str, Any] = {"agent": None, "input": pending,
                                "output": step["thought"] or None, "calls": []}
        pending = None
        if action.strip():
            tool = tool_of(action, commands)
            turn["calls"].append({
                "tool": tool,
                "args": {"command": action[:-1] if action.endswith("\n") else action},
                "result": cap(shown) if plain or shown.startswith(NO_OUTPUT) else digest(shown),
                "error": error_of(tool, step["observation"]),
            })
        elif following is not None:
            pending = shown
        turns.append(turn)
    return turns


def run_id(model: str, instance: str) -> str:
    return re.sub(r"[^a-z0-9_.-]+", "-", f"shell-{SLUG}-{SHORT[model]}-{instance}".lower())


def main(argv: list[str]) -> None:
    git_dir = Path(argv[0])
    plain_out = Path(argv[argv.index("--plain") + 1]) if "--plain" in argv else None
    head = git(git_dir, "rev-parse", "HEAD").decode().strip()
    if head != COMMIT:
        sys.exit(f"the mirror's HEAD is {head}, not {COMMIT}")
    found: dict[str, str] = {}
    for line in git(git_dir, "ls-tree", "-r", "-z", COMMIT).decode().split("\0"):
        if not line:
            continue
        meta, path = line.split("\t", 1)
        if _TRAJ.match(path):
            found[path] = meta.split()[2]
    docs: dict[str, dict[str, Any]] = {}
    missing = unreadable = 0
    for path in sorted(found):
        data = blob(git_dir, found[path])
        if data is None:
            missing += 1
            continue
        try:
            docs[path] = json.loads(data)
        except ValueError:
            unreadable += 1
    print(f"{len(found)} .traj files, {missing} missing blobs, {unreadable} not JSON, "
          f"{len(docs)} loaded")
    chosen = random.Random(SEED).sample(sorted(docs), SAMPLE)
    runs = []
    for path in sorted(chosen):
        match = _TRAJ.match(path)
        assert match is not None
        model, instance = match.groups()
        runs.append({
            "id": run_id(model, instance),
            "family": "shell",
            "source": SOURCE,
            "path": path,
            "commit": COMMIT,
            "licence": LICENCE,
            "harness": HARNESS,
            "model": model,
            "content": "hashed",
            "turns": convert(docs[path], plain=plain_out is not None),
        })
    runs.sort(key=lambda run: run["id"])
    write_runs(runs, plain_out or OUT)


if __name__ == "__main__":
    main(sys.argv[1:])
