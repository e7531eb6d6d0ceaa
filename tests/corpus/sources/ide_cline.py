"""Cline task histories committed with their project -> runs/ide/cline.jsonl.gz.

Source: github.com/thetom42/stock-portfolio, commit 85bd1f7f36f461b9fe59b7423df0c05760473cd7
(the commit read is recorded on every run), folder ``cline/tasks/<task id>/``. One developer
built a study project (a stock-portfolio web application: a Prisma database layer, an Express
backend-for-frontend, Postman and Keycloak) with the Cline VS Code extension (published as
``saoudrizwan.claude-dev``; versions 2.0.19 to 3.1.9 appear in the error traces, October 2024
to January 2025) and committed Cline's own storage of each task: ``api_conversation_history.json``,
the messages exactly as Cline sent them to the model and got them back. The repository has no
licence file: results are stored hashed (``content: "hashed"``), arguments kept. The model is
not in the files (``model``: ``not exported``).

Selection (made without reading the tasks): every task folder of that commit (93), one task =
one run, never cut; tasks with no tool call are skipped. The folder also holds markdown exports
of tasks (``cline/<topic>/<n> <title>.md``); they are Cline's renderings of the same task
histories and are left out, so no task is counted twice. Run ids are ``ide-cline-<task id>``
(the task id is Cline's creation time in milliseconds).

Mapping: Cline's tools are XML in the model's text (``<read_file><path>...</path></read_file>``).
Each ``assistant`` message is one model turn; its text with the tool blocks taken out is the
turn's ``output``. Cline runs only the first tool of a message and refuses the others
("Tool [x] was not executed because a tool has already been used in this message"); the call
of the turn is that first tool, with its parameters (``path``, ``content``, ``diff``,
``command``, ``regex``...) as ``args``; the refused ones are left out, as the tool calls they
never became. The next ``user`` message holds its result: the block ``[<tool> for '...']
Result:`` and the text blocks after it, up to Cline's notices ("Tool [x] was not executed",
"Skipping tool") and the ``<environment_details>`` block Cline appends to every message
(left out: open tabs, visible files, the time). A result that says "The tool execution failed
with the following error" gives ``error`` = that error's first line; "The user denied this
operation" gives ``error`` = "The user denied this operation" (the developer refused the call;
his feedback is part of the result). Commands keep Cline's words ("Command executed." and the
output); Cline records no exit code. A user message that is not a tool result (the ``<task>``,
"[TASK RESUMPTION]", Cline's "[ERROR] You did not use a tool in your previous response!") is
the ``input`` of the next turn. A tool use with no result in the next message (the task was
interrupted there, or it is the task's last message: a final ``attempt_completion`` the
developer accepted) keeps ``result`` null; one whose next message holds no result block but only
environment details (Cline 2.1 writing an empty file) gets the empty result ``""``.

Usage: python ide_cline.py MIRROR_DIR (bare git dir from the fetch tool); writes
tests/corpus/runs/ide/cline.jsonl.gz. Standard library only.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

SOURCE = "thetom42/stock-portfolio"
COMMIT = "85bd1f7f36f461b9fe59b7423df0c05760473cd7"
OUT = Path(__file__).resolve().parents[1] / "runs" / "ide" / "cline.jsonl.gz"
TOOLS = ("read_file", "write_to_file", "replace_in_file", "apply_diff", "execute_command",
         "search_files", "list_files", "list_code_definition_names", "browser_action",
         "ask_followup_question", "attempt_completion", "use_mcp_tool", "access_mcp_resource",
         "plan_mode_response", "new_task")
PARAMS = ("command", "requires_approval", "path", "content", "diff", "regex", "file_pattern",
          "recursive", "action", "url", "coordinate", "text", "server_name", "tool_name",
          "arguments", "uri", "question", "options", "response", "result", "context")
OPEN = re.compile(r"<(" + "|".join(TOOLS) + r")>")
HEADER = re.compile(r"^\[(\w+)(?: for [^\n]*)?\] Result:")
NOTICE = ("Tool [", "Skipping tool [", "<environment_details>")


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(
        ["git", f"--git-dir={repo}", *args], check=True, capture_output=True
    ).stdout


def hashed(text: str) -> str:
    return "" if text == "" else "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def blocks(message: dict) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content or [] if b.get("type") == "text"]


def tool_blocks(text: str) -> list[tuple[int, int, str]]:
    """(start, end, name) of each tool block in a model's text, in order."""
    found = []
    pos = 0
    while True:
        m = OPEN.search(text, pos)
        if m is None:
            return found
        name = m.group(1)
        close = text.find(f"</{name}>", m.end())
        end = len(text) if close < 0 else close + len(name) + 3
        found.append((m.start(), end, name))
        pos = end


def params(body: str) -> dict:
    """A tool block's parameters, as Cline reads them (``content`` up to its last close tag)."""
    args = {}
    for name in PARAMS:
        start = body.find(f"<{name}>")
        if start < 0:
            continue
        start += len(name) + 2
        close = body.rfind(f"</{name}>") if name == "content" else body.find(f"</{name}>", start)
        value = body[start:] if close < start else body[start:close]
        args[name] = value.strip("\n") if name in ("content", "diff") else value.strip()
    return args


def result_of(texts: list[str]) -> tuple[str | None, str | None, str | None]:
    """(tool named in the result header, result text, error) of a user message."""
    for i, text in enumerate(texts):
        m = HEADER.match(text.lstrip())
        if m is None:
            continue
        parts = [text.lstrip()[m.end():].lstrip("\n")]
        for more in texts[i + 1:]:
            if more.lstrip().startswith(NOTICE):
                break
            parts.append(more)
        result = "\n".join(p for p in parts if p).strip()
        error = None
        failed = re.search(r"The tool execution failed with the following error:\s*<error>\s*"
                           r"([^\n]*)", result)
        if failed:
            error = failed.group(1).strip()[:200] or "tool execution failed"
        elif result.startswith("The user denied this operation"):
            error = "The user denied this operation"
        return m.group(1), result, error
    return None, None, None


def other_input(texts: list[str]) -> str | None:
    """A user message's text that is not a tool result, a notice or environment details."""
    kept = [t.strip() for t in texts
            if t.strip() and not t.lstrip().startswith(NOTICE) and not HEADER.match(t.lstrip())]
    return "\n\n".join(kept) or None


def parse(history: list[dict]) -> list[dict]:
    turns: list[dict] = []
    pending: str | None = None
    last_call: dict | None = None
    for message in history:
        texts = blocks(message)
        if message.get("role") == "user":
            tool, result, error = result_of(texts)
            if tool is not None and last_call is not None and last_call["tool"] == tool:
                last_call["result"] = hashed(result or "")
                last_call["error"] = error
            elif tool is None:
                pending = other_input(texts)
                if pending is None and last_call is not None:
                    last_call["result"] = ""  # no result block at all (empty files written)
            last_call = None
            continue
        text = "\n".join(texts)
        found = tool_blocks(text)
        output = text
        for start, end, _ in reversed(found):
            output = output[:start] + output[end:]
        turn = {"agent": None, "input": pending, "output": output.strip() or None, "calls": []}
        pending = None
        last_call = None
        if found:
            start, end, name = found[0]
            last_call = {"tool": name, "args": params(text[start:end]), "result": None,
                         "error": None}
            turn["calls"].append(last_call)
        turns.append(turn)
    return turns


def main(argv: list[str]) -> int:
    repo = Path(argv[0])
    names = git(repo, "ls-tree", "-r", "--name-only", COMMIT, "cline/tasks/").decode().split("\n")
    paths = sorted(p for p in names if p.endswith("/api_conversation_history.json"))
    runs = []
    for path in paths:
        history = json.loads(git(repo, "show", f"{COMMIT}:{path}"))
        turns = parse(history)
        calls = [c for t in turns for c in t["calls"]]
        if not calls:
            continue
        runs.append({"id": "ide-cline-" + path.split("/")[2], "family": "ide", "source": SOURCE,
                     "path": path, "commit": COMMIT, "licence": "none",
                     "harness": "Cline (VS Code extension, XML tool use)",
                     "model": "not exported", "content": "hashed", "turns": turns})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="") as gz:
        for run in runs:
            gz.write((json.dumps(run, sort_keys=True, ensure_ascii=False) + "\n").encode())
    OUT.write_bytes(buf.getvalue())
    print(f"{len(paths)} tasks, {len(runs)} with a tool call -> {OUT} ({OUT.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
