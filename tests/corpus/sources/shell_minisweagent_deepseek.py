"""Convert mini-swe-agent 2.2.7 runs of DeepSeek (SWE-bench Lite dev/test) into corpus runs.

Source: github.com/SWE-agent/mini-swe-agent, commit ec0e8e849fea5b1619deb1753007201000904672
("Update DeepSeek evaluation artifacts"), folder ``output/``; licence MIT (LICENSE.md, Kilian A.
Lieret and Carlos E. Jimenez), so result text is kept (``content: "full"``).

Runs taken (chosen without looking at their content, all runs of each chosen submission):

* ``output/deepseek_reasoner_dev/*/*.traj.json``: all runs, model ``deepseek/deepseek-reasoner``;
* ``output/deepseek_chat_dev/*/*.traj.json``: all runs, model ``deepseek/deepseek-chat``;
* ``output/deepseek_chat_test_1-100/*/*.traj.json``: a seeded random sample of 35
  (``random.Random(2026).sample`` of the sorted instance folders whose file the snapshot holds;
  one file of that submission, django__django-13220, is absent from the snapshot, over 4 MiB).

(The two other submissions of that commit rerun the dev tasks with the same model.) Runs in
which the model never answered (the first request timed out: no assistant message) are left out.

How the records map to turns and calls (``trajectory_format`` ``mini-swe-agent-1.1``, tool
calling): every ``assistant`` message is one turn, its ``content`` the turn's ``output``; each of
its ``tool_calls`` is a call of the tool the harness names (``bash``) with the arguments as the
model sent them (``{"command": ...}``). The ``tool`` message answering a call (by
``tool_call_id``) is the call's result, its ``content`` as the harness showed it to the model
(``<returncode>..</returncode><output>..</output>``). ``extra.returncode`` non-zero is the error
``exit code N`` (-1 when the harness's ``docker exec`` failed or timed out, its
``exception_info`` then in the content). The last call (the submit command) is answered by the
``exit`` message instead of a tool message: the submitted diff is stored as its result. A
``user`` message after the first (harness feedback, e.g. a format error) is the next turn's
``input``; a format error with no ``assistant`` message before it stands for a model response the
harness rejected without recording it: a turn with no calls and ``output`` null. Results longer
than 4,000 characters are capped as FORMAT.md says.

Usage: ``python tests/corpus/sources/shell_minisweagent_deepseek.py OUTPUT_DIR`` where
OUTPUT_DIR is the ``output/`` folder of that commit; writes
``tests/corpus/runs/shell/minisweagent-deepseek.jsonl.gz``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Any

SOURCE = "SWE-agent/mini-swe-agent"
COMMIT = "ec0e8e849fea5b1619deb1753007201000904672"
LICENCE = "MIT"
HARNESS = "mini-swe-agent"
SLUG = "minisweagent-deepseek"
SUBSETS = ("deepseek_reasoner_dev", "deepseek_chat_dev")
SAMPLED = ("deepseek_chat_test_1-100", 35, 2026)
OUT = Path(__file__).resolve().parents[1] / "runs" / "shell" / f"{SLUG}.jsonl.gz"


def cap(text: str) -> str:
    """Results over 4,000 characters: first 2,000, then the digest and length of the whole."""
    if len(text) <= 4000:
        return text
    whole = hashlib.sha256(text.encode()).hexdigest()
    return f"{text[:2000]}\n[... sha256:{whole} len={len(text)}]"


def convert(path: Path, subset: str) -> dict[str, Any]:
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
        "id": f"shell-{SLUG}-{subset.replace('_', '-')}-{instance}",
        "family": "shell",
        "source": SOURCE,
        "path": f"output/{subset}/{path.parent.name}/{path.name}",
        "commit": COMMIT,
        "licence": LICENCE,
        "harness": HARNESS,
        "model": model,
        "content": "full",
        "turns": turns,
    }


def main(argv: list[str]) -> int:
    root = Path(argv[0])
    runs = []
    chosen = [
        (subset, path)
        for subset in SUBSETS
        for path in sorted((root / subset).glob("*/*.traj.json"))
    ]
    subset, size, seed = SAMPLED
    pool = sorted((root / subset).glob("*/*.traj.json"))
    chosen += [(subset, path) for path in sorted(random.Random(seed).sample(pool, size))]
    for subset, path in chosen:
        run = convert(path, subset)
        if run["turns"]:
            runs.append(run)
    runs.sort(key=lambda run: run["id"])
    lines = "".join(json.dumps(run, sort_keys=True, ensure_ascii=False) + "\n" for run in runs)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_bytes(gzip.compress(lines.encode(), mtime=0))
    print(f"wrote {len(runs)} runs to {OUT} ({OUT.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
