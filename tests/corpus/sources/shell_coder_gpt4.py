"""Convert CodeR runs (multi-agent SWE-agent 0.x harness, GPT-4, SWE-bench Lite) into corpus runs.

Source: github.com/NL2Code/CodeR, commit d63468344bc215bbabb8f0c1ba4af24897a946df (the
``trajs/`` folder was last changed by d4e77d8b2213d0417098e154ec81f771ab9df330, 2024-06-10):
the trajectories of the CodeR submission to SWE-bench Lite (``20240604_CodeR``), one
``trajs/<instance>.traj`` per task, 261 files. The repository has no licence, so result text is
not copied: every result is ``sha256:<hex of the whole text>`` (``""`` for an empty one) and
``content`` is ``"hashed"``; arguments, the model's thoughts and the harness's task messages are
kept, as for the other sources without a licence. So is SWE-agent's own message in place of an
empty observation (``NO_OUTPUT``, with the state lines its template adds): the harness's text,
not the run's output.

Harness: CodeR (paper arXiv 2406.01304), built on SWE-agent 0.x: a Manager picks a plan (a task
graph) and hands the issue to agents in turn (Reproducer, Debugger, Programmer, Tester), each an
SWE-agent loop with its own prompt (``config/roles/*.yml``, ``model_name: gpt4``) in one shared
container. Actions are command lines written by the model in its text (``ThoughtActionParser``):
SWE-agent's interface commands (``open``, ``goto``, ``scroll_down``, ``scroll_up``, ``create``,
``edit N:M`` with its text up to ``end_of_edit``, ``search_dir``, ``search_file``, ``find_file``),
CodeR's retrieval commands (``rover_search_*``, ``similar_issue_search``,
``stackoverflow_search``), the hand-over commands ``plan`` (Manager), ``succeed`` and ``fail``
(the other agents) and ``submit``; any other line is run in bash.

Runs taken (chosen without looking at their content): a seeded random sample of ``SAMPLE``
(``random.Random(2026).sample`` of the sorted instance ids of ``trajs/``). Runs in which the
model never answered would be left out; every file holds at least one answer.

How the records map to turns and calls: ``history`` holds every message, each with the agent
that made or received it; its ``assistant`` messages are, one for one and in order, the steps
of ``trajectory`` (``action``, ``observation``). Every ``assistant`` message is one turn
(``agent`` its agent, ``output`` its ``thought``) with one call: ``tool`` is the command's name
when the action starts with one of the commands the agent's system prompt documents or with
``plan``, ``succeed``, ``fail`` or ``submit``, and ``bash`` otherwise (as SWE-agent routes it);
``args`` is ``{"command": <the action as the model wrote it, final newline removed>}``, the form
the shell converters give a bare command. The result is what the harness showed the model next:
the agent's next ``user`` message when it directly follows (the observation in the harness's
``next_step_template``, with the open file and directory), for ``plan`` the Manager's next
``user`` message (the conclusions of the agents it planned for); for ``succeed``, ``fail`` and
``submit`` (control leaves the agent) the step's ``observation``. A non-demonstration ``user``
message that is no call's result (the task given to an agent when the Manager hands over) is
the ``input`` of the agent's next turn; demonstrations and system prompts are left out. The
harness records no exit code: ``error`` is ``edit rejected: <the first error the lint check
lists>`` (e.g. ``edit rejected: E999 IndentationError: unexpected indent``) when the harness
refused an edit ("Your proposed edit has introduced new syntax error(s)"), the first line of an
interface command's own ``Error:``/``Usage:`` message, and null otherwise
(a Python traceback in a script's output is output, not a failed call). An ``exit_cost`` step
is the harness stopping the run at its cost limit (its thought reads "Exit due to cost limit"),
not a model response: it is left out. Responses the harness rejected for their format were
retried without being recorded, so the source has none.

Usage: ``python tests/corpus/sources/shell_coder_gpt4.py TRAJS_DIR`` where TRAJS_DIR is the
``trajs/`` folder of that commit (``git archive <commit> trajs``); writes
``tests/corpus/runs/shell/coder-gpt4.jsonl.gz``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

from _store import SWE_AGENT_NO_OUTPUT as NO_OUTPUT

SOURCE = "NL2Code/CodeR"
COMMIT = "d63468344bc215bbabb8f0c1ba4af24897a946df"
LICENCE = "none"
HARNESS = "coder"
MODEL = "gpt4"
SLUG = "coder-gpt4"
SAMPLE = 40
SEED = 2026
HANDOVER = ("plan", "succeed", "fail", "submit")
LINT_REJECTION = "Your proposed edit has introduced new syntax error(s)"
OUT = Path(__file__).resolve().parents[1] / "runs" / "shell" / f"{SLUG}.jsonl.gz"


def cap(text: str) -> str:
    """No licence: a result is stored as the sha256 of its whole text (empty stays empty), but
    the harness's own no-output message as it is."""
    if not text or text.startswith(NO_OUTPUT):
        return text
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def documented_commands(history: list[dict[str, Any]]) -> dict[str, set[str]]:
    """The commands each agent's system prompt documents (``name:`` then ``docstring:``)."""
    found: dict[str, set[str]] = {}
    for message in history:
        if message["role"] == "system" and "COMMANDS:" in message["content"]:
            docs = message["content"].split("COMMANDS:", 1)[1]
            names = re.findall(r"^(\w+):\n\s+docstring:", docs, re.MULTILINE)
            found.setdefault(message["agent"], set()).update(names)
    return found


def tool_of(action: str, commands: set[str]) -> str:
    words = action.split()
    first = words[0] if words else ""
    return first if first in commands or first in HANDOVER else "bash"


def error_of(tool: str, observation: str) -> str | None:
    text = observation.strip()
    if tool == "edit" and text.startswith(LINT_REJECTION):
        listed = re.search(r"^ERRORS:\n- (.+)$", text, re.MULTILINE)
        return "edit rejected: " + (listed.group(1).strip()[:150] if listed else "syntax errors")
    first = text.splitlines()[0].strip() if text else ""
    if tool != "bash" and first.startswith(("Error:", "Usage:")):
        return first[:200]
    return None


def convert(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    history = doc["history"]
    steps = doc["trajectory"]
    commands = documented_commands(history)
    answers = [i for i, message in enumerate(history) if message["role"] == "assistant"]
    if len(answers) != len(steps):
        raise ValueError(f"{path.name}: {len(answers)} answers, {len(steps)} steps")
    results: dict[int, str] = {}  # index of the answer -> the text shown as its result
    consumed: set[int] = set()  # user messages that are some call's result
    for index, step in zip(answers, steps, strict=True):
        agent = history[index]["agent"]
        first = step["action"].split()[0] if step["action"].split() else ""
        if first in ("succeed", "fail", "submit"):
            results[index] = step["observation"]
            continue
        later = range(index + 1, len(history)) if first == "plan" else range(index + 1, index + 2)
        for other in later:
            if other >= len(history):
                break
            message = history[other]
            if (
                message["role"] == "user"
                and message["agent"] == agent
                and not message.get("is_demo")
            ):
                results[index] = message["content"]
                consumed.add(other)
                break
        else:
            results[index] = step["observation"]
    turns: list[dict[str, Any]] = []
    pending_input: dict[str, str] = {}
    for index, message in enumerate(history):
        role, agent = message["role"], message["agent"]
        if role == "user" and not message.get("is_demo") and index not in consumed:
            previous = pending_input.get(agent)
            text = message["content"]
            pending_input[agent] = text if previous is None else previous + "\n" + text
        elif role == "assistant":
            step = steps[answers.index(index)]
            action = step["action"]
            if action.strip() == "exit_cost":
                continue  # the harness's cost limit, not a model response
            tool = tool_of(action, commands.get(agent, set()))
            call = {
                "tool": tool,
                "args": {"command": action[:-1] if action.endswith("\n") else action},
                "result": cap(results[index]),
                "error": error_of(tool, step["observation"]),
            }
            turns.append(
                {
                    "agent": agent,
                    "input": pending_input.pop(agent, None),
                    "output": message.get("thought") or None,
                    "calls": [call],
                }
            )
    instance = path.name.removesuffix(".traj")
    return {
        "id": f"shell-{SLUG}-{instance}",
        "family": "shell",
        "source": SOURCE,
        "path": f"trajs/{path.name}",
        "commit": COMMIT,
        "licence": LICENCE,
        "harness": HARNESS,
        "model": MODEL,
        "content": "hashed",
        "turns": turns,
    }


def main(argv: list[str]) -> int:
    root = Path(argv[0])
    pool = sorted(path.name.removesuffix(".traj") for path in root.glob("*.traj"))
    chosen = sorted(random.Random(SEED).sample(pool, SAMPLE))
    runs = [convert(root / f"{instance}.traj") for instance in chosen]
    runs = [run for run in runs if run["turns"]]
    runs.sort(key=lambda run: run["id"])
    lines = "".join(json.dumps(run, sort_keys=True, ensure_ascii=False) + "\n" for run in runs)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_bytes(gzip.compress(lines.encode(), mtime=0))
    print(f"wrote {len(runs)} runs to {OUT} ({OUT.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
