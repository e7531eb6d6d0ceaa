"""Convert Live-SWE-agent runs of GPT-5-mini (SWE-bench Verified subset) into corpus runs.

Source: github.com/RussellRyanH/CSCI-635-LiveSWE-Agent, commit
2813cfb19465bb9f57d50ebd0798550480a2f836, folder ``results/llm-ablation/gpt-5-mini/``: all 45
runs (``*/*.traj.json``), chosen without looking at their content. The repository has no licence
of its own (its ``live-swe-agent/LICENSE``, MIT, covers the vendored agent code, not these
results), so result text is not copied: every result is ``sha256:<hex of the whole text>``
(``""`` for an empty one) and ``content`` is ``"hashed"``; arguments are kept as the model sent
them. The repository's ``scripts/remove_error_problems.py`` says tasks that hit rate-limit errors
were removed from its runs.

Harness: the Live-SWE-agent prompt (the agent is told to create its own tools as scripts) run by
mini-swe-agent 2.2.4 (``ProgressTrackingAgent``, step limit 250, cost limit 3) in tool-calling
mode, model ``openai/gpt-5-mini``.

How the records map to turns and calls (``trajectory_format`` ``mini-swe-agent-1.1``): every
``assistant`` message is one turn, its ``content`` the turn's ``output``; each of its
``tool_calls`` is a call of the tool the harness names (``bash``) with the arguments as the model
sent them (``{"command": ...}``). The ``tool`` message answering a call (by ``tool_call_id``) is
the call's result (its ``content``, as shown to the model, hashed). ``extra.returncode`` non-zero
is the error ``exit code N``. The last call (the submit command) is answered by the ``exit``
message instead of a tool message: the submitted diff (hashed) is stored as its result. A
``user`` message after the first is harness feedback and becomes the next turn's ``input``. This
harness version does not record a model response it rejects: a ``FormatError`` message ("No tool
calls found in the response...") with no ``assistant`` message before it stands for one rejected
response, stored as a turn with no calls and ``output`` null.

Usage: ``python tests/corpus/sources/shell_liveswe_gpt5mini.py RUNS_DIR`` where RUNS_DIR is
``results/llm-ablation/gpt-5-mini`` of that commit; writes
``tests/corpus/runs/shell/liveswe-gpt5mini.jsonl.gz``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

SOURCE = "RussellRyanH/CSCI-635-LiveSWE-Agent"
COMMIT = "2813cfb19465bb9f57d50ebd0798550480a2f836"
LICENCE = "none"
HARNESS = "live-swe-agent"
SLUG = "liveswe-gpt5mini"
FOLDER = "results/llm-ablation/gpt-5-mini"
OUT = Path(__file__).resolve().parents[1] / "runs" / "shell" / f"{SLUG}.jsonl.gz"


def cap(text: str) -> str:
    """No licence: a result is stored as the sha256 of its whole text (empty stays empty)."""
    if not text:
        return ""
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def convert(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text())
    instance = doc.get("instance_id") or path.parent.name
    model = doc["info"]["config"]["model"]["model_name"].split("/")[-1]
    turns: list[dict[str, Any]] = []
    pending: dict[str, dict[str, Any]] = {}
    last_call: dict[str, Any] | None = None
    feedback: str | None = None
    previous_role = None
    for index, message in enumerate(doc["messages"]):
        role = message["role"]
        content = message.get("content")
        if role == "assistant":
            turn = {"agent": None, "input": feedback, "output": content or None, "calls": []}
            feedback = None
            for tool_call in message.get("tool_calls") or []:
                function = tool_call["function"]
                call = {
                    "tool": function["name"],
                    "args": json.loads(function["arguments"]),
                    "result": None,
                    "error": None,
                }
                pending[tool_call["id"]] = call
                turn["calls"].append(call)
                last_call = call
            turns.append(turn)
        elif role == "tool":
            call = pending.pop(message["tool_call_id"])
            call["result"] = cap(str(content or ""))
            code = (message.get("extra") or {}).get("returncode")
            if code not in (None, 0):
                call["error"] = f"exit code {code}"
        elif role == "user" and index > 1:
            interrupt = (message.get("extra") or {}).get("interrupt_type")
            if interrupt == "FormatError" and previous_role != "assistant":
                # the rejected response itself was not recorded by the harness
                turns.append({"agent": None, "input": feedback, "output": None, "calls": []})
            feedback = str(content)
        elif role == "exit":
            if last_call is not None and last_call["result"] is None and pending:
                last_call["result"] = cap(str(content or ""))
                pending.clear()
        previous_role = role
    return {
        "id": f"shell-{SLUG}-{instance}",
        "family": "shell",
        "source": SOURCE,
        "path": f"{FOLDER}/{path.parent.name}/{path.name}",
        "commit": COMMIT,
        "licence": LICENCE,
        "harness": HARNESS,
        "model": model,
        "content": "hashed",
        "turns": turns,
    }


def main(argv: list[str]) -> int:
    root = Path(argv[0])
    runs = [convert(path) for path in sorted(root.glob("*/*.traj.json"))]
    runs.sort(key=lambda run: run["id"])
    lines = "".join(json.dumps(run, sort_keys=True, ensure_ascii=False) + "\n" for run in runs)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_bytes(gzip.compress(lines.encode(), mtime=0))
    print(f"wrote {len(runs)} runs to {OUT} ({OUT.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
