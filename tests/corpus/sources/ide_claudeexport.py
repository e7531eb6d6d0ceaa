"""Claude Code sessions exported to markdown ("# Claude Session Export") -> runs/ide/claudeexport.jsonl.gz.

Source: github.com/goodsch/brain_explore, folder ``claude-prompts/``, commit
5f0065446d2c83d2a5caf13c11a0e498f9faee56 (the commit read is recorded on every run). One developer's
Claude Code sessions (Nov-Dec 2025, a knowledge-graph / therapy-framework project), exported with a
session exporter in "Full Conversation" mode: every message of the session's JSONL as a JSON array
of content blocks (``text``, ``tool_use`` with ``name``/``input``, ``tool_result`` with
``content``/``is_error``). The repository has no licence file: results are stored hashed
(``content: "hashed"``), arguments kept.

Selection (made without reading the sessions): the main sessions (files named ``<uuid>-...-full.md``;
the ``agent-*`` files are sub-agent transcripts and are left out), in file-name order (uuid order,
unrelated to content), skipping files with no tool call; the first ``LIMIT``. One file = one run,
never cut.

Export artefact: some session logs hold a stretch of messages twice (same time stamps, same
``tool_use`` ids, e.g. after a resumed session); a message identical to an earlier one (header with
time stamp and body) is dropped, so no call is counted twice.

Mapping: assistant ``text`` blocks are the turn's ``output``; consecutive assistant blocks with no
user message in between form one turn, so the ``tool_use`` blocks Claude Code issued together are the
calls of one turn (parallel calls). Tool names as Claude Code names them (Bash, Read, Edit,
MultiEdit, Write, Grep, Glob, TodoWrite, Task, mcp__serena__..., ...); ``args`` are the ``input``
objects as the model sent them. A ``tool_result`` is matched to its call by ``tool_use_id``;
``is_error: true`` gives ``error`` = the first line of the result. A user message that is not a
tool result (typed text, slash command, hook output) is the ``input`` of the next model turn. The
model name is not in the export: ``model`` is ``claude (not exported)``.

Usage: python ide_claudeexport.py MIRROR_DIR (bare git dir from the fetch tool); writes
tests/corpus/runs/ide/claudeexport.jsonl.gz. Standard library only.
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

LIMIT = 20
SOURCE = "goodsch/brain_explore"
OUT = Path(__file__).resolve().parents[1] / "runs" / "ide" / "claudeexport.jsonl.gz"
MESSAGE = re.compile(r"^### (User|Assistant)\n> [^\n]*\n\n", re.M)


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(
        ["git", f"--git-dir={repo}", *args], check=True, capture_output=True
    ).stdout


def hashed(text: str) -> str:
    return "" if text == "" else "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def blocks_of(body: str):
    """The content blocks of one message: a JSON array, or plain text as one text block."""
    body = re.sub(r"\n---\s*$", "", body.strip()).strip()
    if body.startswith("["):
        try:
            loaded = json.loads(body)
            if isinstance(loaded, list):
                return loaded
        except ValueError:
            pass
    return [{"type": "text", "text": body}] if body else []


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


def parse(md: str) -> list[dict]:
    heads = list(MESSAGE.finditer(md))
    turns: list[dict] = []
    by_id: dict[str, dict] = {}
    pending: list[str] = []
    current = None
    seen: set[tuple[str, str]] = set()
    for i, h in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(md)
        key = (h.group(0), md[h.end() : end].strip())
        if key in seen:
            continue  # a message the log holds twice (same time stamp, same content): export artefact
        seen.add(key)
        blocks = blocks_of(md[h.end() : end])
        if h.group(1) == "User":
            texts = []
            for b in blocks:
                if b.get("type") == "tool_result":
                    call = by_id.get(b.get("tool_use_id"))
                    if call is not None:
                        text = result_text(b.get("content"))
                        call["result"] = hashed(text)
                        if b.get("is_error"):
                            first = (
                                text.strip().splitlines()[0] if text.strip() else "is_error: true"
                            )
                            call["error"] = first[:200]
                elif b.get("type") == "text" and b.get("text", "").strip():
                    texts.append(b["text"].strip())
            if texts:
                pending.append("\n\n".join(texts))
            current = None  # a user message (result or text) ends the model's response
            continue
        for b in blocks:
            if current is None:
                current = {"agent": None, "input": None, "output": None, "calls": []}
                turns.append(current)
                if pending:
                    current["input"] = "\n\n".join(pending)
                    pending = []
            if b.get("type") == "text" and b.get("text", "").strip():
                if current["calls"]:  # text after calls: a new response
                    current = {"agent": None, "input": None, "output": None, "calls": []}
                    turns.append(current)
                current["output"] = (current["output"] + "\n\n" if current["output"] else "") + b[
                    "text"
                ].strip()
            elif b.get("type") == "tool_use":
                call = {
                    "tool": b.get("name", "unknown"),
                    "args": b.get("input") or {},
                    "result": None,
                    "error": None,
                }
                current["calls"].append(call)
                if b.get("id"):
                    by_id[b["id"]] = call
    return turns


def main(argv: list[str]) -> int:
    repo = Path(argv[0])
    commit = git(repo, "rev-parse", "HEAD").decode().strip()
    names = sorted(
        p
        for p in git(repo, "ls-tree", "-r", "--name-only", "HEAD", "claude-prompts/")
        .decode()
        .split("\n")
        if p.endswith("-full.md") and not Path(p).name.startswith("agent-")
    )
    runs = []
    for path in names:
        md = git(repo, "show", f"HEAD:{path}").decode("utf-8", "replace")
        turns = parse(md)
        calls = [c for t in turns for c in t["calls"]]
        if not calls:
            continue
        runs.append(
            {
                "id": "ide-claudeexport-" + Path(path).name[:8],
                "family": "ide",
                "source": SOURCE,
                "path": path,
                "commit": commit,
                "licence": "none",
                "harness": "Claude Code",
                "model": "claude (not exported)",
                "content": "hashed",
                "turns": turns,
            }
        )
        if len(runs) == LIMIT:
            break
    runs.sort(key=lambda r: r["id"])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="") as gz:
        for run in runs:
            gz.write((json.dumps(run, sort_keys=True, ensure_ascii=False) + "\n").encode())
    OUT.write_bytes(buf.getvalue())
    print(f"{len(runs)} runs -> {OUT} ({OUT.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
