"""A Claude Agent SDK customer-service agent (claude-haiku-4-5) on tau2 retail requests -> corpus runs.

Source: github.com/codesque16/tau2-mermaid, commit 6c0f8a540ce9c40173c376cf7c614b3e444af905,
folder ``results/haiku_run_complete_dataset/`` (committed 2026-03-20 with the repository's
"tau2 retail claude agent" configurations). The repository has no licence file, so results are
stored as digests (``content: "hashed"``); arguments, the request and the agent's words are kept.

Harness: the ``tau2-retail-agent`` agent setting of the Claude Agent SDK (Claude Code's engine,
``entrypoint: sdk-cli``, permissions bypassed), model ``claude-haiku-4-5-20251001``, given tau2's
retail tools as an MCP server (``mcp__retail-tools__get_order_details``,
``..._exchange_delivered_order_items``, ``..._transfer_to_human_agents``...). Each of tau2's 114
retail tasks is handed over as a ticket: the customer's information and request in one message
("Fulfill the request using the available tools. Assume the customer has already agreed to any
required confirmations."); the agent looks the customer up, acts, and ends with its message to
the customer (or a transfer). There is no simulated user: one request, one answer.

Runs taken: ``random.Random(2026).sample`` of 50 of the folder's 114 ``task_<n>.jsonl`` session
logs, by sorted task id, drawn without reading them. One file = one session = one run, never cut.

Mapping (the session JSONL, one line per event): lines of ``type: "assistant"`` carry one content
block each; the lines of one API response share ``message.id`` and form one turn: its ``text``
blocks, joined, are ``output``; its ``tool_use`` blocks are the turn's calls in order (several in one
response are parallel calls), ``name`` as ``tool`` and ``input`` as ``args``. ``thinking`` blocks
(with their signatures) are left out. A ``type: "user"`` line that holds ``tool_result`` blocks
gives each call, matched by ``tool_use_id``, its ``result``: ``sha256:<hex>`` of the result's text
(text blocks joined by newlines); ``is_error: true`` gives ``error`` = the first line of that text.
A ``user`` line with plain text (the ticket) is the next turn's ``input``. The SDK's bookkeeping
lines (``agent-setting``, ``queue-operation``, ``last-prompt``) are left out.

Usage: ``python conversation_claude_retail_haiku.py GIT_DIR`` (the bare git dir from the fetch
tool, read with ``git show``/``ls-tree`` only); writes
``tests/corpus/runs/conversation/claude_retail_haiku.jsonl.gz``. Standard library only.
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

SOURCE = "codesque16/tau2-mermaid"
COMMIT = "6c0f8a540ce9c40173c376cf7c614b3e444af905"
FOLDER = "results/haiku_run_complete_dataset"
HARNESS = "Claude Agent SDK (tau2-retail-agent, retail tools over MCP)"
SAMPLE = 50
SEED = 2026
OUT = Path(__file__).resolve().parents[1] / "runs" / "conversation" / "claude_retail_haiku.jsonl.gz"


def git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True
    ).stdout


def hashed(text: str) -> str:
    return "" if text == "" else "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def result_text(content: object) -> str:
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


def turns_of(lines: list[str]) -> tuple[list[dict], str]:
    turns: list[dict] = []
    by_message: dict[str, dict] = {}
    by_call: dict[str, dict] = {}
    pending: list[str] = []
    model = ""
    for line in lines:
        event = json.loads(line)
        message = event.get("message")
        if not isinstance(message, dict):
            continue
        if event.get("type") == "assistant":
            model = model or message.get("model", "")
            turn = by_message.get(message.get("id", ""))
            if turn is None:
                turn = {
                    "agent": None,
                    "input": "\n\n".join(pending) if pending else None,
                    "output": None,
                    "calls": [],
                }
                pending = []
                turns.append(turn)
                by_message[message.get("id", "")] = turn
            for block in message.get("content") or []:
                if block.get("type") == "text" and block.get("text", "").strip():
                    text = block["text"].strip()
                    turn["output"] = f"{turn['output']}\n\n{text}" if turn["output"] else text
                elif block.get("type") == "tool_use":
                    call = {
                        "tool": block.get("name", "unknown"),
                        "args": block.get("input") or {},
                        "result": None,
                        "error": None,
                    }
                    turn["calls"].append(call)
                    by_call[block.get("id", "")] = call
        elif event.get("type") == "user":
            content = message.get("content")
            if isinstance(content, str):
                if content.strip():
                    pending.append(content.strip())
                continue
            for block in content or []:
                if block.get("type") == "tool_result":
                    call = by_call.get(block.get("tool_use_id", ""))
                    if call is None:
                        continue
                    text = result_text(block.get("content"))
                    call["result"] = hashed(text)
                    if block.get("is_error"):
                        first = text.strip().splitlines()
                        call["error"] = first[0][:200] if first else "is_error: true"
                elif block.get("type") == "text" and block.get("text", "").strip():
                    pending.append(block["text"].strip())
    return turns, model


def task_number(path: str) -> int:
    match = re.search(r"task_(\d+)\.jsonl$", path)
    assert match, path
    return int(match.group(1))


def main(git_dir: Path) -> None:
    listing = git(git_dir, "ls-tree", "--name-only", COMMIT, f"{FOLDER}/").decode().split("\n")
    paths = sorted((p for p in listing if p.endswith(".jsonl")), key=task_number)
    assert len(paths) == 114, len(paths)
    chosen = sorted(random.Random(SEED).sample(paths, SAMPLE), key=task_number)
    runs = []
    for path in chosen:
        lines = git(git_dir, "show", f"{COMMIT}:{path}").decode("utf-8").splitlines()
        turns, model = turns_of([line for line in lines if line.strip()])
        content = "hashed"
        if any(call["result"] is None for turn in turns for call in turn["calls"]):
            content = "partial"
        runs.append(
            {
                "id": f"conversation-claude-retail-haiku-task{task_number(path):03d}",
                "family": "conversation",
                "source": SOURCE,
                "path": path,
                "commit": COMMIT,
                "licence": "none",
                "harness": HARNESS,
                "model": model,
                "content": content,
                "turns": turns,
            }
        )
    runs.sort(key=lambda r: r["id"])
    assert len({r["id"] for r in runs}) == len(runs)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, filename="") as handle:
        for run in runs:
            handle.write(
                (json.dumps(run, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
            )
    OUT.write_bytes(buffer.getvalue())
    print(f"{len(runs)} runs -> {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
