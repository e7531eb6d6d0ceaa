"""Trae Agent runs (gpt-5) on ISO-Bench performance tasks of vLLM, converted to the corpus format (family ``function``).

Source: github.com/ISO-Bench/ISO-Bench, commit 9cc08ddd1011a34c49b43c22671ae639f16a21d3 (its only
commit, 2026-01-29). Licence: Apache-2.0 (the repository's LICENSE). Results are kept (content
``full``), long ones capped.

Harness: Trae Agent (bytedance/trae-agent, a function-calling agent) driven by ISO-Bench's runner
on "vllm_core" tasks: make a test script of the vLLM repository run faster, by a patch to
non-test files. Model gpt-5-2025-08-07 through OpenAI's Responses API. The model calls named
tools with JSON arguments: ``bash`` (``command``, ``restart``), ``str_replace_based_edit_tool``
(``command``: ``view``, ``create``, ``str_replace``, ``insert``...; ``path``...),
``sequentialthinking`` and ``task_done``.

Runs taken: the submission ``ISO-Bench/state/runs/vllm/trae/gpt-5/2025-11-06_03-26-11/`` (60 runs,
``vllm_core-<n>/trajectory.json``), a seeded random sample of ``SAMPLE`` of them
(``random.Random(2026).sample`` of the sorted run folder names), chosen without looking at their
content. Runs with no model response at all would be left out; every run of the sample has some.

How the records map to turns and calls: ``agent_steps`` in order. A step with an
``llm_response`` is one turn: ``output`` is the response's text (``content``; null when empty;
the model's reasoning is not recorded), ``calls`` are the response's ``tool_calls`` in order
(several = parallel calls), ``tool`` the function name and ``args`` the ``arguments`` as the
model sent them. A call's result is its ``tool_results`` entry (matched by ``call_id``) rendered
as Trae's OpenAI client renders it for the model: the ``result`` text, then ``"\\nError: "`` and
the ``error`` text when there is one, stripped (so a command's stderr is part of its result).
``error`` is null when the tool result says ``success: true`` (for ``bash``, exit code 0); when
it says ``success: false`` (a non-zero exit code, an edit the editor refused, a tool exception)
it is the first line of the tool's error text, or ``success: false`` when that text is empty.
A step's ``llm_messages`` are what the harness sends next: its tool results, or a user message
of the harness (the ``<system-reminder>`` after a response with no tool call, ``ERROR! Your
Patch is empty...`` when the model called ``task_done`` with no change made); such a user
message is the ``input`` of the next turn. The first turn's ``input`` is the task (the user
message of the first model call; the system prompt is left out). ``task_done`` gets no tool
result from the harness: its result is null, and when the harness refused it (the next message
is ``ERROR! Your Patch is empty...``) that line is its ``error``.

Left out: a last step with no ``llm_response``: the API call failed (mostly ``Error code: 400
... No tool output found for function call``, the harness sending its refusal of ``task_done``
without a tool result for it; or the model's arguments not being valid JSON) and the run ended
there; the message sent in that failed call reached no model answer.

Usage: ``python tests/corpus/sources/function_trae_gpt5.py GIT_DIR`` (a bare clone of
ISO-Bench/ISO-Bench; read with ``git show``/``ls-tree`` only); writes
``tests/corpus/runs/function/trae_gpt5.jsonl.gz``.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

SOURCE = "ISO-Bench/ISO-Bench"
COMMIT = "9cc08ddd1011a34c49b43c22671ae639f16a21d3"
SUBMISSION = "ISO-Bench/state/runs/vllm/trae/gpt-5/2025-11-06_03-26-11"
SLUG = "trae_gpt5"
SAMPLE = 40
SEED = 2026
PATCH_EMPTY = "ERROR! Your Patch is empty."
OUT = Path(__file__).resolve().parents[1] / "runs" / "function" / f"{SLUG}.jsonl.gz"


def cap(text: str) -> str:
    """Results over 4,000 characters: first 2,000 and the hash and length of the whole."""
    if len(text) <= 4000:
        return text
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return text[:2000] + f"\n[... sha256:{digest} len={len(text)}]"


def first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0].strip()[:200] if lines else ""


def git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True
    ).stdout


def rendered(result: dict[str, Any]) -> str:
    """A tool result as Trae's OpenAI client sends it to the model."""
    text = ""
    if result.get("result") is not None:
        text += str(result["result"])
    if result.get("error"):
        text += f"\nError: {result['error']}"
    return text.strip()


def user_texts(messages: list[dict[str, Any]] | None) -> list[str]:
    return [
        m["content"]
        for m in messages or []
        if m.get("role") == "user" and m.get("content") and not m.get("tool_result")
    ]


def turns_of(doc: dict[str, Any]) -> list[dict[str, Any]]:
    first = doc["llm_interactions"][0]["input_messages"] if doc.get("llm_interactions") else []
    pending: str | None = "\n".join(user_texts(first)) or None
    turns: list[dict[str, Any]] = []
    for step in doc["agent_steps"]:
        response = step.get("llm_response")
        following = user_texts(step.get("llm_messages"))
        if response is None:
            continue  # the API call failed: no model answer (always a run's last step here)
        results = {r["call_id"]: r for r in step.get("tool_results") or []}
        calls = []
        for call in response.get("tool_calls") or []:
            outcome = results.get(call["call_id"])
            if outcome is None:
                refused = next((t for t in following if t.startswith(PATCH_EMPTY)), None)
                calls.append(
                    {
                        "tool": call["name"],
                        "args": call.get("arguments") or {},
                        "result": None,
                        "error": first_line(refused) if refused else None,
                    }
                )
                continue
            error = None
            if not outcome.get("success"):
                error = first_line(outcome.get("error") or "") or "success: false"
            calls.append(
                {
                    "tool": call["name"],
                    "args": call.get("arguments") or {},
                    "result": cap(rendered(outcome)),
                    "error": error,
                }
            )
        turns.append(
            {
                "agent": None,
                "input": pending,
                "output": response.get("content") or None,
                "calls": calls,
            }
        )
        pending = "\n".join(following) or None
    return turns


def convert(git_dir: Path) -> list[dict[str, Any]]:
    listing = git(git_dir, "ls-tree", "--name-only", COMMIT, SUBMISSION + "/").decode().split()
    pool = sorted(path.rsplit("/", 1)[1] for path in listing)
    chosen = sorted(random.Random(SEED).sample(pool, SAMPLE))
    runs = []
    for name in chosen:
        path = f"{SUBMISSION}/{name}/trajectory.json"
        doc = json.loads(git(git_dir, "show", f"{COMMIT}:{path}"))
        turns = turns_of(doc)
        if not turns:
            continue  # no model response at all
        runs.append(
            {
                "id": f"function-{SLUG.replace('_', '-')}-{name}",
                "family": "function",
                "source": SOURCE,
                "path": path,
                "commit": COMMIT,
                "licence": "Apache-2.0",
                "harness": "trae-agent",
                "model": doc.get("model") or "gpt-5-2025-08-07",
                "content": "full",
                "turns": turns,
            }
        )
    return sorted(runs, key=lambda run: run["id"])


def main(argv: list[str]) -> int:
    git_dir = Path(argv[0])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    runs = convert(git_dir)
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as handle:
        for run in runs:
            handle.write(
                (json.dumps(run, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
            )
    OUT.write_bytes(buffer.getvalue())
    print(f"wrote {len(runs)} runs to {OUT} ({OUT.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
