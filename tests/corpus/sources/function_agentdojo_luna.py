"""AgentDojo-style task-suite runs of the pipeline ``gpt-5.6-luna``, converted to the corpus format (family ``function``).

Source: github.com/Liu-Ruotian/agentdojo-luna-trajectories, commit
c5b64f393cf0f77bf9cb99577b0aba27c51314a6 (the mirror's HEAD, 2026-07-18). The repository has no
licence file, so results are stored as digests (``content: "hashed"``); the user's prompt, the
model's text and the calls are kept.

What the repository is: trajectories of one run date (2026-07-18) of a tool-calling agent, the
pipeline ``gpt-5.6-luna`` (the README calls it "GPT-5.6 Luna"; it says nothing else about the
model or who serves it), on the task suites of the owner's benchmark repository
(``Liu-Ruotian/agentdojo-benchmark``, not in the mirror), built on AgentDojo's message format. Its
README and ``reports/`` hold manual audits (English and Chinese) of whether the benchmark's
automatic utility judgment is right; they are not converted. The records' condition is
``poison_top1``: by its name and the records' ``evaluation`` (``poison_doc_ids``, ``opened_poison``,
``used_untrusted_source``), one low-trust web document per task was meant to be ranked first by
``search_web``. The README and the audit call it "the deprecated ``poison_top1`` condition", used
only to locate the run files. In these records the poisoned document's address appears in a tool
result in only 2 of the 215 runs (saas t01 and t04, as rank 1 of a ``search_web`` result), and it
is opened once (saas t04, ``opened_poison`` true); everywhere else the search results show no
poisoned entry.

Files: ``runs/2026-07-18/codex{1,2}/<domain>/<stamp>_gpt-5.6-luna_<domain>_tNN/gpt-5.6-luna/``
``<domain>_suite/<domain>/tNN/poison_top1/seed_1.json``, one run per file, 215 files: ``codex1``
holds airport, automotive, employment, logistics, telecom and ticketing, ``codex2`` banking,
ecommerce, government, healthcare, saas and university (the two groups reviewed the runs; the
domains do not overlap), tasks t01-t18 of each, except government t08 (absent, as the codex2
report says). Duplicates: no two files share a blob, a ``run_id`` or a (domain, task); none is
dropped as a duplicate.

Runs taken (chosen without looking at their content): every run file that loads as JSON, sorted
by path; over 160, ``random.Random(2026).sample`` of the sorted paths draws 160. A drawn run that
has no assistant message is left out: five of the 215 (airport t17, banking t09 and t16, ecommerce
t15, government t17) hold only the system and user messages and an ``error``
(``InternalServerError("Error code: 503 ...``: the model's API refused the first request); the
converter prints how many of them were drawn and left out.

What a record holds: ``run_id``, ``suite_name``, ``pipeline_name`` (the model label),
``domain``, ``task_id``, ``condition``, ``seed``, ``system_prompt``, ``user_prompt``,
``available_tools``, ``ranking_modes``, ``messages``, ``trace``, ``final_answer``, ``evaluation``
(utility, security, outcome and the evaluator's details), ``sae_windows`` (empty), ``duration``,
``error`` and ``metadata``. ``messages`` is AgentDojo's ChatMessage list: the system message, one
user message (the task, equal to ``user_prompt``), then assistant messages (``content``: a list of
``{"type": "text", "content": ...}`` parts or null; ``tool_calls``: ``[{"function", "args",
"id", "placeholder_args"}]`` or null) each followed by one tool message per call (``content``:
text parts, ``tool_call_id``, ``tool_call``, ``error``: null or the exception text, with empty
content). ``trace`` lists the calls again (function, args, id, empty ``placeholder_args``); in
every record it equals the assistant messages' tool calls in order, so it adds nothing and is
not read.

How messages map to turns and calls: each assistant message is one turn (``agent`` null).
``output`` is its text parts joined by a newline, or null when it has none (a message with calls
has no text here). ``calls`` are its ``tool_calls`` in order (several in one message are parallel
calls; up to 7): ``tool`` the function name, ``args`` the args object. A call's ``result`` is the
digest of the text of the tool message whose ``tool_call_id`` is the call's id (its text parts
joined by a newline; ``sha256:<hex>`` of the UTF-8, ``""`` when empty, as every failed call's
text is); ``error`` is that message's ``error`` on one line, at most 200 characters (a Python
``ValueError``, a pydantic ``ValidationError`` of the tool's input schema, a ``NameError`` in a
tool), else null. A call with no tool message would get a null result (``content: "partial"``);
none occurs. The user prompt is the first turn's ``input``; a later user message would be the
next turn's ``input`` (none occurs); the system prompt is left out. Tool results are YAML-like
text (``search_web``: ranked title/url entries; ``open_webpage``: the page; the domain tools:
records of the simulated account or case). ``get_user_help`` is a tool: its result is the
simulated user's scripted reply (``content: ... response_type: clarification``) or ``User help
is required before proceeding. Do not continue until the user provides clarification or
authorization.``

Two things a reader should know. After a run's first successful ``get_user_help`` call, every
later round of tool results is followed by the same text-only assistant message, ``I need user
clarification or authorization before continuing, so I will stop here until the user
responds.`` (47 times in 36 runs), and then by another assistant message; its identical wording
points to the pipeline rather than the model, but the benchmark code is not in the mirror, so it is
kept as the record gives it: a turn without calls. A run ends with the assistant message that has
no calls, whose text is the record's ``final_answer`` (an answer, a summary, or a question to the
user in plain text); no run stops on a step limit or mid-call.

Usage: ``python tests/corpus/sources/function_agentdojo_luna.py MIRROR_GIT_DIR [--plain OUT]``
where MIRROR_GIT_DIR is a git directory holding the commit (read with ``git ls-tree`` and ``git
show``). Writes ``tests/corpus/runs/function/agentdojo-luna.jsonl.gz``; with ``--plain OUT`` it
writes the same runs to OUT with each result's text (capped as FORMAT.md says) instead of its
digest, for reading only.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from _store import cap, digest, git, write_runs

SOURCE = "Liu-Ruotian/agentdojo-luna-trajectories"
COMMIT = "c5b64f393cf0f77bf9cb99577b0aba27c51314a6"
LICENCE = "none"
HARNESS = "AgentDojo task suites (tool-calling agent pipeline)"
SLUG = "agentdojo-luna"
SEED = 2026
SAMPLE = 160
RUN_FILE = re.compile(r"^runs/2026-07-18/(codex[12])/([a-z]+)/[^/]+/[^/]+/[^/]+/[^/]+/"
                      r"(t\d+)/poison_top1/seed_1\.json$")
OUT = Path(__file__).resolve().parents[1] / "runs" / "function" / f"{SLUG}.jsonl.gz"


def load(git_dir: Path, path: str) -> dict[str, Any] | None:
    """The record at COMMIT, or None when it cannot be read or parsed."""
    try:
        record = json.loads(git(git_dir, "show", f"{COMMIT}:{path}").decode("utf-8"))
    except (subprocess.CalledProcessError, UnicodeDecodeError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def one_line(text: str) -> str:
    return " ".join(text.split())[:200]


def text_of(content: Any) -> str | None:
    """The text parts of a message's content joined by a newline; None when there are none."""
    if content is None:
        return None
    if isinstance(content, str):
        return content
    parts = [part.get("content") or "" for part in content
             if isinstance(part, dict) and part.get("type") == "text"]
    return "\n".join(parts) if parts else None


def turns_of(messages: list[dict[str, Any]], plain: bool) -> list[dict[str, Any]]:
    tool_messages = {m.get("tool_call_id"): m for m in messages if m.get("role") == "tool"}
    turns: list[dict[str, Any]] = []
    pending: list[str] = []
    for message in messages:
        role = message.get("role")
        if role == "user":
            text = text_of(message.get("content"))
            if text:
                pending.append(text)
            continue
        if role != "assistant":
            continue
        calls: list[dict[str, Any]] = []
        for call in message.get("tool_calls") or []:
            answer = tool_messages.get(call.get("id"))
            if answer is None:
                result, error = None, None
            else:
                text = text_of(answer.get("content")) or ""
                result = cap(text) if plain else digest(text)
                failure = answer.get("error")
                error = (one_line(str(failure)) or "error") if failure is not None else None
            calls.append({"tool": call["function"], "args": call.get("args") or {},
                          "result": result, "error": error})
        turns.append({"agent": None, "input": "\n\n".join(pending) if pending else None,
                      "output": text_of(message.get("content")), "calls": calls})
        pending = []
    return turns


def main(argv: list[str]) -> None:
    git_dir = Path(argv[0])
    plain_out = Path(argv[argv.index("--plain") + 1]) if "--plain" in argv else None
    listing = git(git_dir, "ls-tree", "-r", "--name-only", COMMIT).decode("utf-8").splitlines()
    records: dict[str, dict[str, Any]] = {}
    for path in sorted(p for p in listing if RUN_FILE.match(p)):
        record = load(git_dir, path)
        if record is not None:
            records[path] = record
    paths = sorted(records)
    drawn = sorted(random.Random(SEED).sample(paths, SAMPLE)) if len(paths) > SAMPLE else paths
    runs = []
    empty = 0
    for path in drawn:
        record = records[path]
        group, domain, task = RUN_FILE.match(path).groups()  # type: ignore[union-attr]
        turns = turns_of(record["messages"], plain_out is not None)
        if not turns:
            empty += 1
            continue
        content = "full" if plain_out is not None else "hashed"
        if any(call["result"] is None for turn in turns for call in turn["calls"]):
            content = "partial"
        runs.append({
            "id": f"function-{SLUG}-{domain}-{task}-{group}",
            "family": "function",
            "source": SOURCE,
            "path": path,
            "commit": COMMIT,
            "licence": LICENCE,
            "harness": HARNESS,
            "model": record["pipeline_name"],
            "content": content,
            "turns": turns,
        })
    runs.sort(key=lambda run: run["id"])
    assert len({run["id"] for run in runs}) == len(runs)
    print(f"{len(listing)} files, {len(paths)} run files load; {len(drawn)} drawn, "
          f"{empty} without an assistant message left out")
    write_runs(runs, plain_out or OUT)


if __name__ == "__main__":
    main(sys.argv[1:])
