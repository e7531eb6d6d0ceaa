"""smolagents CodeAgent runs of small local models on everyday tasks, converted to the corpus format (family ``function``).

Source: github.com/Luna-Inference/agent-evaluation, commit 3b0621b4982e73290b5dcf685962698f3f553bd4
(2025-06-04, the newest). Licence: Apache-2.0 (the repository's LICENSE). Results are kept
(content ``full``), long ones capped.

Harness: Hugging Face smolagents ``CodeAgent`` with its base tools (``web_search``,
``visit_webpage``, ``final_answer``...), run by the repository's ``loop*.py`` scripts over a task
list (general knowledge, arithmetic, code writing, creative writing...), one task per run, on
models served by Ollama or hosted APIs: qwen3 1.7b and 14b, qwen2.5 0.5b and 1.5b, qwen2.5-coder,
llama3.2 1b and 3b, gemma3 1b, phi4, smollm2 135m and 360m, deepseek-r1 distills, mistral,
olmo2, starcoder, gpt-4.1, o3-mini, sonar-pro. Each run's log is the smolagents console output
(rich text, lines wrapped at the console width) saved as ``log<NN> - <model>/task_<n>_<type>_<time>.txt``.

Runs taken: a seeded random sample of ``SAMPLE`` of the ``task_*.txt`` files of all ``log*``
folders (``random.Random(2026).sample`` of their sorted paths), chosen without reading them. The
pool leaves out the three logs whose blobs the snapshot does not hold (files over 4 MiB: a
starcoder and two smollm2-135m runs). Runs with no model response at all are left out: 4 of the
50 sampled, sonar-pro runs whose every API call failed (the log holds LiteLLM's error only), so
46 runs are stored.

Mapping: each ``Step N`` of the log is one model response, one turn. ``output`` is the text
after ``Output message of the LLM:`` (the model's thought and code block, trailing spaces cut).
A CodeAgent acts by writing Python: the harness parses the code block and runs it, and
smolagents records that action as one tool call named ``python_interpreter`` whose argument is
the code; so a step whose code was run has one call, ``tool`` ``python_interpreter``, ``args``
``{"code": <the "Executing parsed code" block, de-indented>}``. Its ``result`` is what the
harness printed after the code, up to the step's ``[Step N: Duration ...]`` line (``Execution
logs:`` and ``Out: ...``, ``Out - Final answer: ...``, or the failure text); ``error`` is the
first line starting ``Code execution failed`` or ``Code parsing failed`` (the interpreter's
error, which smolagents sends back to the model), else null. A step whose answer had no code the harness could parse has no
call: the harness's ``Error in code parsing: ...`` text is the ``input`` of the next turn. When
the agent reaches its step limit, smolagents asks the model once more for a final answer
without tools (``Reached max steps.``, ``Final answer: ...``): a last turn with no call. The first
turn's ``input`` is the task. The runner's summary after the last step (``Output:``, ``Task N
complete.``) is left out.

Usage: ``python tests/corpus/sources/function_smolagents_luna.py GIT_DIR`` (a clone of
Luna-Inference/agent-evaluation; read with ``git ls-tree``/``show`` only); writes
``tests/corpus/runs/function/smolagents_luna.jsonl.gz``.
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
from typing import Any

SOURCE = "Luna-Inference/agent-evaluation"
COMMIT = "3b0621b4982e73290b5dcf685962698f3f553bd4"
SLUG = "smolagents_luna"
SAMPLE = 50
SEED = 2026
OUT = Path(__file__).resolve().parents[1] / "runs" / "function" / f"{SLUG}.jsonl.gz"

STEP = re.compile(r"^━+ Step (\d+) ━+$")
DURATION = re.compile(r"^\[Step \d+: Duration")
RULE = re.compile(r"^ ─+$")
MODEL = re.compile(r"^╰─ \w+ - (.+?) ─+╯?$")
TASK = re.compile(r"^Task \d+(?:/\d+)?: (.*)$")


def cap(text: str) -> str:
    """Results over 4,000 characters: first 2,000 and the hash and length of the whole."""
    if len(text) <= 4000:
        return text
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return text[:2000] + f"\n[... sha256:{digest} len={len(text)}]"


def git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True
    ).stdout


def block(lines: list[str]) -> str | None:
    text = "\n".join(lines).strip("\n")
    return text if text.strip() else None


def step_turn(lines: list[str]) -> tuple[dict[str, Any] | None, str | None]:
    """One step's turn, and the harness's text for the next turn (a parse error), if any."""
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith("Output message of the LLM:"))
    except StopIteration:
        return None, block(lines)  # no model answer in this step
    end = len(lines)
    for i in range(start + 1, len(lines)):
        if DURATION.match(lines[i]):
            end = i
            break
    body = lines[start + 1:end]
    code_at = next((i for i, line in enumerate(body) if line.startswith(" ─ Executing parsed code:")), None)
    if code_at is None:
        parse = next((i for i, line in enumerate(body) if line.startswith("Error in code parsing:")), None)
        if parse is None:
            return {"agent": None, "input": None, "output": block(body), "calls": []}, None
        return ({"agent": None, "input": None, "output": block(body[:parse]), "calls": []},
                block(body[parse:]))
    close = next((i for i in range(code_at + 1, len(body)) if RULE.match(body[i])), len(body))
    code = "\n".join(line[2:] if line.startswith("  ") else line for line in body[code_at + 1:close])
    result = block(body[close + 1:]) or ""
    error = next((line.strip()[:200] for line in body[close + 1:]
                  if line.startswith(("Code execution failed", "Code parsing failed"))), None)
    call = {"tool": "python_interpreter", "args": {"code": code.strip("\n")},
            "result": cap(result), "error": error}
    return {"agent": None, "input": None, "output": block(body[:code_at]), "calls": [call]}, None


def parse(text: str) -> tuple[str | None, str | None, list[dict[str, Any]]]:
    lines = [line.rstrip() for line in text.splitlines()]
    task = next((m.group(1) for m in map(TASK.match, lines) if m), None)
    model = next((m.group(1).strip() for m in map(MODEL.match, lines) if m), None)
    starts = [i for i, line in enumerate(lines) if STEP.match(line)]
    tail_at = next((i for i, line in enumerate(lines) if line.startswith("Reached max steps.")), None)
    turns: list[dict[str, Any]] = []
    pending = task
    for n, begin in enumerate(starts):
        stop = starts[n + 1] if n + 1 < len(starts) else len(lines)
        if tail_at is not None and begin < tail_at < stop:
            stop = tail_at
        turn, feedback = step_turn(lines[begin + 1:stop])
        if turn is None:
            pending = "\n".join(t for t in (pending, feedback) if t) or None
            continue
        turn["input"] = pending
        turns.append(turn)
        pending = feedback
    if tail_at is not None:
        final = next((i for i in range(tail_at, len(lines)) if lines[i].startswith("Final answer:")), None)
        if final is not None:
            end = next((i for i in range(final, len(lines))
                        if DURATION.match(lines[i]) or lines[i] == "Output:"), len(lines))
            turns.append({"agent": None, "input": pending,
                          "output": block([lines[final][len("Final answer:"):].strip(), *lines[final + 1:end]]),
                          "calls": []})
    return task, model, turns


def convert(git_dir: Path) -> list[dict[str, Any]]:
    listing = git(git_dir, "ls-tree", "-r", "--name-only", COMMIT).decode().splitlines()
    pool = []
    for path in listing:
        folder, _, name = path.partition("/")
        if folder.startswith("log") and name.startswith("task_") and "/" not in name:
            present = subprocess.run(["git", f"--git-dir={git_dir}", "cat-file", "-e",
                                      f"{COMMIT}:{path}"], capture_output=True,
                                     check=False).returncode == 0
            if present:
                pool.append(path)
    chosen = sorted(random.Random(SEED).sample(sorted(pool), SAMPLE))
    runs = []
    for path in chosen:
        text = git(git_dir, "show", f"{COMMIT}:{path}").decode("utf-8", "replace")
        _task, model, turns = parse(text)
        if not turns:
            continue  # no model step at all
        folder, name = path.split("/")
        number = folder.split(" ", 1)[0]
        stem = name.rsplit("_", 2)[0]
        runs.append({
            "id": f"function-smolagents-luna-{number}-{stem.replace('_', '-')}",
            "family": "function",
            "source": SOURCE,
            "path": path,
            "commit": COMMIT,
            "licence": "Apache-2.0",
            "harness": "smolagents CodeAgent",
            "model": model or folder.split(" - ", 1)[-1],
            "content": "full",
            "turns": turns,
        })
    return sorted(runs, key=lambda run: run["id"])


def main(argv: list[str]) -> int:
    git_dir = Path(argv[0])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    runs = convert(git_dir)
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as handle:
        for run in runs:
            handle.write((json.dumps(run, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8"))
    OUT.write_bytes(buffer.getvalue())
    print(f"wrote {len(runs)} runs to {OUT} ({OUT.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
