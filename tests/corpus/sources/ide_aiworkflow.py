"""Claude Code and Codex CLI sessions of an issue-to-PR workflow -> runs/ide/aiworkflow.jsonl.gz.

Source: github.com/tielec/ai-workflow-agent (MIT), its git history up to commit
78f4ac506d868613713f1488bb6667a841708c40 (the commit each session file was read at is recorded
on every run). The repository is a TypeScript tool that takes a GitHub issue through ten phases
(planning, requirements, design, test scenario, implementation, test implementation, testing,
documentation, report, evaluation), each phase an ``execute`` session, a ``review`` session and
sometimes a ``revise`` session of a coding agent run headless from Jenkins on the tool's own
repository. It commits each session's raw output as
``.ai-workflow/issue-<n>/<phase>/<step>/agent_log_raw.txt``: Claude Code's ``stream-json``
output (Claude Code 2.0.21 through the Claude Agent SDK, ``claude-sonnet-4-5-20250929``,
``bypassPermissions``) or, for a few sessions, ``codex exec --json`` output (Codex CLI). Most of
these files were deleted after their issue was done; they are read from the history.

Selection (made without reading the sessions): every distinct ``agent_log_raw.txt`` path in the
history, each at the commit that first added it (a path rewritten later by a rerun of the phase
keeps its first session), skipping files with no tool call; run ids are
``ide-aiworkflow-issue-<n>-<phase>-<step>``; ``SAMPLE`` of them drawn with
``random.Random(2026).sample`` of the sorted ids. One file = one session = one run, never cut.

Mapping, Claude Code (``stream-json``): each ``assistant`` line holds one content block; the lines
with the same ``message.id`` are one model turn, so the ``tool_use`` blocks of one message are
the turn's (parallel) calls and its ``text`` blocks its ``output`` (``thinking`` blocks are left
out). Tool names and ``input`` objects as Claude Code sent them (Bash, Read, Edit, Write, Glob,
Grep, TodoWrite, Task...). A ``tool_result`` is matched to its call by ``tool_use_id``; its
content (text blocks joined) is the ``result``; ``is_error: true`` gives ``error`` = its first
line. A ``user`` line with text that is not a tool result is the ``input`` of the next turn. The
session's prompt is not in the stream: the ``prompt.txt`` beside the log (same commit), when
there is one, is the first turn's ``input``. Lines of a sub-agent (``parent_tool_use_id`` set)
are turns of agent ``subagent`` (the main agent's turns have ``agent`` null).

Mapping, Codex CLI (``codex exec --json``): the stream does not mark model responses; each
``command_execution`` item is one turn with one call ``shell`` {"command": ...} (Codex runs these
sessions' commands one after another), its ``aggregated_output`` the result and a non-zero
``exit_code`` the error (``exit code N``); a ``file_change`` item is one call ``apply_patch``
{"changes": [{path, kind}]} (the patch text is not in the stream; result null, ``error`` when
its status is ``failed``); ``todo_list`` items are calls ``update_plan`` {"items": ...};
``agent_message`` items are model text with no call (the turn's ``output``); ``error`` lines
(``Re-connecting... 1/5``) are transport notices, left out.

Results longer than 4,000 characters keep their first 2,000 and a digest of the whole
(FORMAT.md); the licence (MIT) allows the text. Left out: the final ``result`` line (cost and
usage), ``system`` lines, token counts.

Usage: python ide_aiworkflow.py MIRROR_DIR (bare git dir of the repository, with its history);
writes tests/corpus/runs/ide/aiworkflow.jsonl.gz. Standard library only.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import random
import re
import subprocess
import sys
from pathlib import Path

SAMPLE = 40
SEED = 2026
SOURCE = "tielec/ai-workflow-agent"
LICENCE = "MIT"
OUT = Path(__file__).resolve().parents[1] / "runs" / "ide" / "aiworkflow.jsonl.gz"
PATH = re.compile(r"^\.ai-workflow/issue-(\d+)/([0-9]+_[a-z_]+)/([a-z]+)/agent_log_raw\.txt$")


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(
        ["git", f"--git-dir={repo}", *args], check=True, capture_output=True
    ).stdout


def cap(text: str) -> str:
    if len(text) > 4000:
        digest = hashlib.sha256(text.encode()).hexdigest()
        return text[:2000] + f"\n[... sha256:{digest} len={len(text)}]"
    return text


def result_text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for item in content:
            if isinstance(item, dict) and item.get("type") == "text":
                parts.append(item.get("text", ""))
            elif isinstance(item, dict):
                parts.append(json.dumps(item, sort_keys=True))
        return "\n".join(parts)
    return "" if content is None else json.dumps(content, sort_keys=True)


def records(raw: str) -> list[dict]:
    out = []
    for text in raw.splitlines():
        line = text.strip()
        if not line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a torn line (the log was cut while written)
        if isinstance(record, dict):
            out.append(record)
    return out


def new_turn(agent, pending: list[str]) -> dict:
    turn = {"agent": agent, "input": None, "output": None, "calls": []}
    if pending:
        turn["input"] = "\n\n".join(pending)
        pending.clear()
    return turn


def parse_claude(recs: list[dict], prompt: str | None) -> tuple[list[dict], str]:
    turns: list[dict] = []
    by_id: dict[str, dict] = {}
    pending: list[str] = [cap(prompt)] if prompt else []
    current = None
    current_msg = None
    model = "unknown"
    for rec in recs:
        kind = rec.get("type")
        if kind == "system" and rec.get("subtype") == "init" and rec.get("model"):
            model = rec["model"]
        if kind not in ("assistant", "user"):
            continue
        agent = "subagent" if rec.get("parent_tool_use_id") else None
        message = rec.get("message") or {}
        content = message.get("content")
        if kind == "user":
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            for b in blocks or []:
                if b.get("type") == "tool_result":
                    call = by_id.get(b.get("tool_use_id"))
                    if call is None:
                        continue
                    text = result_text(b.get("content"))
                    call["result"] = cap(text)
                    if b.get("is_error"):
                        first = text.strip().splitlines()[0] if text.strip() else "is_error: true"
                        call["error"] = first[:200]
                elif b.get("type") == "text" and b.get("text", "").strip():
                    pending.append(cap(b["text"].strip()))
            current = None
            current_msg = None
            continue
        msg_id = message.get("id")
        if current is None or msg_id != current_msg or current["agent"] != agent:
            current = new_turn(agent, pending)
            turns.append(current)
            current_msg = msg_id
        for b in content or []:
            if b.get("type") == "text" and b.get("text", "").strip():
                text = b["text"].strip()
                current["output"] = current["output"] + "\n\n" + text if current["output"] else text
            elif b.get("type") == "tool_use":
                call = {"tool": b.get("name", "unknown"), "args": b.get("input") or {},
                        "result": None, "error": None}
                current["calls"].append(call)
                if b.get("id"):
                    by_id[b["id"]] = call
    return turns, model


def parse_codex(recs: list[dict], prompt: str | None) -> tuple[list[dict], str]:
    turns: list[dict] = []
    pending: list[str] = [cap(prompt)] if prompt else []
    for rec in recs:
        if rec.get("type") != "item.completed":
            continue
        item = rec.get("item") or {}
        kind = item.get("type")
        if kind == "agent_message":
            turn = new_turn(None, pending)
            turn["output"] = item.get("text")
            turns.append(turn)
            continue
        if kind == "command_execution":
            code = item.get("exit_code")
            call = {"tool": "shell", "args": {"command": item.get("command", "")},
                    "result": cap(item.get("aggregated_output") or ""),
                    "error": f"exit code {code}" if code not in (0, None) else None}
        elif kind == "file_change":
            changes = [{"path": c.get("path"), "kind": c.get("kind")}
                       for c in item.get("changes") or []]
            call = {"tool": "apply_patch", "args": {"changes": changes}, "result": None,
                    "error": "status: failed" if item.get("status") == "failed" else None}
        elif kind == "todo_list":
            call = {"tool": "update_plan", "args": {"items": item.get("items") or []},
                    "result": None, "error": None}
        else:
            continue
        turn = new_turn(None, pending)
        turn["calls"].append(call)
        turns.append(turn)
    return turns, "not exported"


def population(repo: Path) -> list[tuple[str, str, str]]:
    """(run id, commit, path) of each session file, at the commit that first added it."""
    log = git(repo, "log", "--all", "--reverse", "--format=C %H", "--name-only",
              "--diff-filter=A", "--", ".ai-workflow/").decode()
    seen: dict[str, tuple[str, str, str]] = {}
    commit = ""
    for line in log.splitlines():
        if line.startswith("C "):
            commit = line[2:]
            continue
        m = PATH.match(line.strip())
        if m:
            issue, phase, step = m.groups()
            run_id = f"ide-aiworkflow-issue-{issue}-{phase.replace('_', '-')}-{step}"
            seen.setdefault(run_id, (run_id, commit, line.strip()))
    return sorted(seen.values())


def convert(repo: Path, run_id: str, commit: str, path: str) -> dict | None:
    raw = git(repo, "show", f"{commit}:{path}").decode("utf-8", "replace")
    recs = records(raw)
    prompt_path = path.replace("agent_log_raw.txt", "prompt.txt")
    try:
        prompt = git(repo, "show", f"{commit}:{prompt_path}").decode("utf-8", "replace").strip()
    except subprocess.CalledProcessError:
        prompt = None
    if recs and recs[0].get("type") == "thread.started":
        turns, model = parse_codex(recs, prompt)
        harness = "Codex CLI (codex exec --json)"
    else:
        turns, model = parse_claude(recs, prompt)
        harness = "Claude Code (stream-json, Claude Agent SDK)"
    calls = [c for t in turns for c in t["calls"]]
    if not calls:
        return None
    content = "full" if all(c["result"] is not None for c in calls) else "partial"
    return {"id": run_id, "family": "ide", "source": SOURCE, "path": path, "commit": commit,
            "licence": LICENCE, "harness": harness, "model": model, "content": content,
            "turns": turns}


def main(argv: list[str]) -> int:
    repo = Path(argv[0])
    candidates = []
    for run_id, commit, path in population(repo):
        run = convert(repo, run_id, commit, path)
        if run is not None:
            candidates.append(run)
    by_id = {run["id"]: run for run in candidates}
    chosen = random.Random(SEED).sample(sorted(by_id), SAMPLE)
    runs = [by_id[run_id] for run_id in sorted(chosen)]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="") as gz:
        for run in runs:
            gz.write((json.dumps(run, sort_keys=True, ensure_ascii=False) + "\n").encode())
    OUT.write_bytes(buf.getvalue())
    print(f"{len(candidates)} sessions, {len(runs)} sampled -> {OUT} ({OUT.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
