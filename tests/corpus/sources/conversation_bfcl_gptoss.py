"""Convert BFCL v4 multi-turn runs of gpt-oss-120b and gpt-oss-20b served by vLLM into corpus runs.

Source: github.com/bbrowning/bfcl-vllm-results, commit f98223aef4e7a560e2d2d69849dfb04eed260a52
(the mirror's HEAD): the repository owner's Berkeley Function Calling Leaderboard (BFCL v4) runs of
the gpt-oss models behind vLLM's OpenAI-compatible server, each under one vLLM build or tool-call
parser (``results/<run>/``). The repository has no licence file, so results are stored as digests
(``content: "hashed"``); the user's messages and the calls are kept.

Files: ``results/<run>/result/openai_gpt-oss-<size>/multi_turn/``
``BFCL_v4_multi_turn_<category>_result.json`` for the categories ``base``, ``miss_func`` and
``miss_param`` (JSON lines, one task a line, 200 tasks each). At this commit the run folders are
``2025-11-12-harmony-fixes`` (120b and 20b), ``2025-11-12-harmony-fixes-2`` (120b),
``2025-11-12-main`` (120b and 20b), ``v0.10.2`` (120b) and ``v0.11.0`` (120b); all their multi-turn
result files are readable in the snapshot. The ``result-baseline``, ``result-chat-multi-turn``,
``result-chat-tool-fix``, ``result-fixed`` and ``result-non-strict-parser`` folders of earlier
commits are not in this commit's tree (the ``cleanup`` commit 5bd74cc removed them; some of their
blobs are missing from the snapshot) and are not read. The seven configurations ran the same 200
tasks, so to keep near-duplicate runs out, one configuration is taken per model: the first run
folder, in sorted order, whose three files are all readable. That is ``2025-11-12-harmony-fixes``
for both models (the converter finds it again and prints it).

Runs taken (chosen without looking at their content): the six files give 1,200 records (model,
category, record id); ``random.Random(2026).sample`` of that list, sorted, draws 160. A drawn
record whose inference failed holds only BFCL's error and traceback (``Error during inference:
...``: vLLM's 500 on a malformed harmony header, or BFCL's own ``Holdout turn should not have user
message`` on some miss_func tasks) and no inference log, so it has no model turn and is left out;
the converter prints how many.

What a record holds: ``id``, ``result`` (the calls per step, per user turn), token counts,
latencies and ``inference_log``: a list alternating the environment's state (a list of ``{"role":
"state_info", "class_name", "content"}``, one per API class of the task, before each user turn and
once more at the end; not converted) and one dict per user turn: ``begin_of_turn_query`` (the
user's messages) and ``step_0``, ``step_1``, ... (the model's responses). A step is ``{"role":
"assistant", "content": [{name: arguments-JSON}, ...]}``, the harness's ``handler_log``
(``Successfully decoded model response.``, ``Empty response from the model. Proceed to next
turn.``, ``Error decoding the model response. Proceed to next turn.``, ``Model has been forced to
quit after 20 steps.``) and one ``{"role": "tool", "content": text}`` per executed call, in call
order. BFCL's OpenAI handler logs the response's ``tool_calls`` as the assistant content; vLLM
sends an empty list when the response calls no tool, so a text answer (a summary, or the question a
miss_param task expects) is logged as ``[]`` and its text is not in the source (the token counts
show it was written).

How steps map to turns and calls: every step is one turn (``agent`` null). The user's messages of a
user turn (joined by a blank line) are the ``input`` of its first step; in miss_func the turn where
BFCL adds the held-out functions is a user turn whose message is BFCL's ``I have updated some more
functions you can choose from. What about now?``. ``output`` is the model's text when the assistant
content is a string, else null (always, in these files). Each entry of the content list is a call
in order (several are parallel calls of one turn; gpt-oss made one per response here): ``tool`` its
name, ``args`` its arguments parsed from JSON, ``result`` the digest of the tool message's text as
stored (``sha256:<hex>`` of its UTF-8, ``""`` when empty), ``error`` one line (at most 200
characters) when the text shows a failure: a JSON or Python-repr object with an ``error`` key
(``{"error": "grep: log.txt: No such file or directory"}``, also inside a one-item list), an
``Error: ...`` string in a one-item list, or BFCL's ``Error during execution: ...`` (a call it
could not run: wrong argument names, unknown function); else null. An empty content list is a turn
without calls (the model answered in text; BFCL goes on to the next user turn). When BFCL could not
decode the response (its arguments are not JSON), nothing is executed: the turn has no calls, and
the next user turn's message is what reaches the model next. After 20 steps in one user turn BFCL
stops the model (its last call still executed) and moves to the next user turn.

Usage: ``python tests/corpus/sources/conversation_bfcl_gptoss.py MIRROR_GIT_DIR [--plain OUT]``
where MIRROR_GIT_DIR is a git directory holding the commit (read with ``git show``). Writes
``tests/corpus/runs/conversation/bfcl-gptoss.jsonl.gz``; with ``--plain OUT`` it writes the same
runs to OUT with each result's text (capped as FORMAT.md says) instead of its digest, for reading
only.
"""

from __future__ import annotations

import ast
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

from _store import blob, cap, digest, git, write_runs

SOURCE = "bbrowning/bfcl-vllm-results"
COMMIT = "f98223aef4e7a560e2d2d69849dfb04eed260a52"
LICENCE = "none"
HARNESS = "BFCL v4 multi-turn (vLLM, function calling)"
SLUG = "bfcl-gptoss"
MODELS = {"120b": "gpt-oss-120b", "20b": "gpt-oss-20b"}
CATEGORIES = ["base", "miss_func", "miss_param"]
SEED = 2026
SAMPLE = 160
OUT = Path(__file__).resolve().parents[1] / "runs" / "conversation" / f"{SLUG}.jsonl.gz"


def file_path(run_folder: str, size: str, category: str) -> str:
    return (f"results/{run_folder}/result/openai_gpt-oss-{size}/multi_turn/"
            f"BFCL_v4_multi_turn_{category}_result.json")


def git_show(git_dir: Path, path: str) -> str | None:
    """The file's text at COMMIT, or None when the tree or the snapshot lacks it."""
    data = blob(git_dir, f"{COMMIT}:{path}")
    return None if data is None else data.decode("utf-8")


def choose_folder(git_dir: Path, size: str) -> tuple[str, dict[str, str]]:
    """The first run folder (sorted) with all three category files readable, and their texts."""
    listing = git(git_dir, "ls-tree", "--name-only", f"{COMMIT}:results").decode()
    for folder in sorted(listing.split()):
        texts = {c: git_show(git_dir, file_path(folder, size, c)) for c in CATEGORIES}
        if all(texts.values()):
            return folder, texts  # type: ignore[return-value]
    raise SystemExit(f"no run folder of gpt-oss-{size} has all three categories")


def one_line(text: str) -> str:
    return " ".join(text.split())[:200]


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)  # the Python reprs some tools return
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def error_of(text: str) -> str | None:
    """One line when the tool's text shows a failure (module docstring), else None."""
    if text.startswith("Error during execution:"):
        return one_line(text)
    value = _parsed(text)
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, dict) and "error" in value:
        return one_line(str(value["error"])) or "error"
    if isinstance(value, str) and value.startswith("Error:"):
        return one_line(value)
    return None


def turns_of(log: list[Any], plain: bool) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for user_turn in log:
        if not isinstance(user_turn, dict):
            continue  # the environment's state between user turns
        queries = [m["content"] for m in user_turn.get("begin_of_turn_query", [])
                   if m.get("content")]
        pending: str | None = "\n\n".join(queries) if queries else None
        steps = sorted((k for k in user_turn if k.startswith("step_")),
                       key=lambda k: int(k.split("_")[1]))
        for step in steps:
            messages = user_turn[step]
            output: str | None = None
            wanted: list[tuple[str, str]] = []
            for message in messages:
                if message.get("role") != "assistant":
                    continue
                content = message.get("content")
                if isinstance(content, str):
                    output = content if content.strip() else output
                elif isinstance(content, list):
                    wanted.extend((name, arguments) for call in content
                                  for name, arguments in call.items())
            undecoded = any(m.get("role") == "handler_log"
                            and str(m.get("content", "")).startswith("Error decoding")
                            for m in messages)
            tool_texts = [m.get("content") for m in messages if m.get("role") == "tool"]
            calls: list[dict[str, Any]] = []
            if not undecoded:
                for index, (name, arguments) in enumerate(wanted):
                    args = json.loads(arguments) if isinstance(arguments, str) else arguments
                    text = tool_texts[index] if index < len(tool_texts) else None
                    if text is not None and not isinstance(text, str):
                        text = json.dumps(text)
                    calls.append({
                        "tool": name,
                        "args": args,
                        "result": None if text is None else (cap(text) if plain else digest(text)),
                        "error": None if text is None else error_of(text),
                    })
            turns.append({"agent": None, "input": pending, "output": output, "calls": calls})
            pending = None
    return turns


def main(argv: list[str]) -> None:
    git_dir = Path(argv[0])
    plain_out = Path(argv[argv.index("--plain") + 1]) if "--plain" in argv else None
    records: dict[tuple[str, str, str], tuple[str, dict[str, Any]]] = {}
    for size, model in MODELS.items():
        folder, texts = choose_folder(git_dir, size)
        print(f"{model}: {folder}")
        for category in CATEGORIES:
            path = file_path(folder, size, category)
            for line in texts[category].splitlines():
                if line.strip():
                    record = json.loads(line)
                    records[(model, category, record["id"])] = (path, record)
    drawn = sorted(random.Random(SEED).sample(sorted(records), SAMPLE))
    runs = []
    skipped = 0
    for model, _category, record_id in drawn:
        path, record = records[(model, _category, record_id)]
        if "inference_log" not in record:
            skipped += 1
            continue
        turns = turns_of(record["inference_log"], plain_out is not None)
        hashed = plain_out is None
        content = "hashed" if hashed else "full"
        if any(call["result"] is None for turn in turns for call in turn["calls"]):
            content = "partial"
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", record_id)
        runs.append({
            "id": f"conversation-{SLUG}-{model.removeprefix('gpt-oss-')}-{safe}",
            "family": "conversation",
            "source": SOURCE,
            "path": f"{path}#{record_id}",
            "commit": COMMIT,
            "licence": LICENCE,
            "harness": HARNESS,
            "model": model,
            "content": content,
            "turns": turns,
        })
    runs.sort(key=lambda run: run["id"])
    assert len({run["id"] for run in runs}) == len(runs)
    print(f"{len(drawn)} records drawn, {skipped} without an inference log left out")
    write_runs(runs, plain_out or OUT)


if __name__ == "__main__":
    main(sys.argv[1:])
