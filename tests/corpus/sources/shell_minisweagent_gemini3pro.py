"""Convert mini-swe-agent 1.15 runs of Gemini 3 Pro (SWE-bench Verified) into corpus runs.

Source: github.com/gruckion/mini-swe-agent (a fork of SWE-agent/mini-swe-agent that publishes
one submission's trajectories), commit d12a71affd95403b036b2bdbd827349b77bfffb9, folder
``swebench_results/20251118_gemini-3-pro-74pct/trajs/``; licence MIT (LICENSE.md, Kilian A.
Lieret and Carlos E. Jimenez), so result text is kept (``content: "full"``).

Runs taken (chosen without looking at their content): a seeded random sample of 100 of the 500
instance folders (``random.Random(2026).sample`` of their sorted paths).

How the records map to turns and calls (``trajectory_format`` ``mini-swe-agent-1``, actions in
text): every ``assistant`` message is one turn, its ``content`` the turn's ``output``. A
response with exactly one ```` ```bash ```` block is one ``bash`` call with ``{"command": ...}``;
the ``user`` message after it is the call's result, as the harness showed it to the model
(``<returncode>..</returncode><output>..</output>``, or a warning that the output was too long
with its head and tail), with the error ``exit code N`` for a non-zero return code and ``timed
out`` when the harness killed the command. A response with none or several blocks is a turn
without a call, and the harness's format error after it is the next turn's ``input``. The last
call (``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` and the diff) has no observation: the
submission (``info.submission``) is stored as its result. Results longer than 4,000 characters
are capped as FORMAT.md says.

Usage: ``python tests/corpus/sources/shell_minisweagent_gemini3pro.py TRAJS_DIR`` where
TRAJS_DIR is that ``trajs/`` folder of a local copy of the commit; writes
``tests/corpus/runs/shell/minisweagent-gemini3pro.jsonl.gz``.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path
from typing import Any

from _store import cap, write_runs

SOURCE = "gruckion/mini-swe-agent"
COMMIT = "d12a71affd95403b036b2bdbd827349b77bfffb9"
LICENCE = "MIT"
HARNESS = "mini-swe-agent"
SLUG = "minisweagent-gemini3pro"
FOLDER = "swebench_results/20251118_gemini-3-pro-74pct/trajs"
SAMPLE = (100, 2026)
OUT = Path(__file__).resolve().parents[1] / "runs" / "shell" / f"{SLUG}.jsonl.gz"

_ACTION = re.compile(r"```bash\s*\n(.*?)\n```", re.S)
_RETURNCODE = re.compile(r"<returncode>(-?\d+)</returncode>")



def _error(observation: str) -> str | None:
    if "timed out and has been killed" in observation:
        return "timed out"
    code = _RETURNCODE.search(observation)
    return f"exit code {code.group(1)}" if code is not None and code.group(1) != "0" else None


def convert(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text())
    instance = doc.get("instance_id") or path.parent.name
    model = doc["info"]["config"]["model"]["model_name"].split("/")[-1]
    turns: list[dict[str, Any]] = []
    feedback: str | None = None
    waiting: dict[str, Any] | None = None  # the call whose observation comes next
    rejected = False  # the last response had no single action: the next user message is feedback
    for message in doc["messages"][2:]:  # after the system prompt and the task
        role, content = message["role"], str(message.get("content") or "")
        if role == "assistant":
            actions = _ACTION.findall(content)
            turn: dict[str, Any] = {"agent": None, "input": feedback, "output": content or None,
                                    "calls": []}
            feedback, waiting, rejected = None, None, len(actions) != 1
            if not rejected:
                waiting = {"tool": "bash", "args": {"command": actions[0]}, "result": None,
                           "error": None}
                turn["calls"].append(waiting)
            turns.append(turn)
        elif role == "user":
            if waiting is not None:
                waiting["result"], waiting["error"] = cap(content), _error(content)
                waiting = None
            elif rejected:
                feedback = content
    if waiting is not None and "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in waiting["args"]["command"]:
        waiting["result"] = cap(str(doc["info"].get("submission") or ""))
    return {
        "id": f"shell-{SLUG}-{instance}",
        "family": "shell",
        "source": SOURCE,
        "path": f"{FOLDER}/{path.parent.name}/{path.name}",
        "commit": COMMIT,
        "licence": LICENCE,
        "harness": HARNESS,
        "model": model,
        "content": "full" if all(call["result"] is not None for turn in turns
                                 for call in turn["calls"]) else "partial",
        "turns": turns,
    }


def main(argv: list[str]) -> int:
    root = Path(argv[0])
    pool = sorted(root.glob("*/*.traj.json"))
    size, seed = SAMPLE
    runs = [run for run in (convert(path) for path in sorted(random.Random(seed).sample(pool, size)))
            if run["turns"]]
    runs.sort(key=lambda run: run["id"])
    write_runs(runs, OUT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
