"""Moatless Tools 0.4 runs of Claude 3.5 Sonnet on SWE-bench Lite, converted to the corpus format.

Source: github.com/aorwall/moatless-tools, commit 8ab89f27450e715a1aac16b0e37eb7a1947d3842
(the last commit that still holds ``evaluations/``), folder
``evaluations/20241117_moatless_claude_3_5_sonnet_20241022/<instance>/trajectory.json``; licence
MIT (the repository's LICENSE), so results are kept (``content: "full"``), long ones capped as
FORMAT.md says. ``function_moatless.py`` converts the three earlier submissions, whose format
differs.

Runs taken (chosen without looking at their content): a seeded random sample of 60 of the
271 instance folders whose file the snapshot holds (``random.Random(2026).sample`` of their
sorted paths); the other 28 files, the largest of the 299, were absent from the snapshot, so the
longest runs are under-represented.

Format: ``nodes``, each after the first (the task) a child of the one before: one model
response with one function call. A node's ``action`` holds the call's arguments, the model's
``scratch_pad`` (the turn's ``output``) and ``action_args_class``, which names the function:
``FindFunctionArgs`` -> ``FindFunction``, ``FindClassArgs`` -> ``FindClass``,
``FindCodeSnippetArgs`` -> ``FindCodeSnippet``, ``SemanticSearchArgs`` -> ``SemanticSearch``,
``ViewCodeArgs`` -> ``ViewCode``, ``FinishArgs`` -> ``Finish``, ``RejectArgs`` -> ``Reject``, and
``EditActionArguments`` -> ``str_replace_editor`` (Anthropic's editor tool, its ``command`` kept
in the arguments). The node's ``observation.message`` is the call's result as the model saw it.
A call is failed when the harness asks the model to correct it (``expect_correction``), its error
the ``fail_reason`` the harness gives (``string_not_found``...); a ``fail_reason`` without that
request (``no_spans_added``: code already in context) is not an error. A run whose nodes are not
one chain is left out (3 of the 60: the harness went back to the task and started again, a
second branch from the root), which leaves 57 runs.

Usage: ``python tests/corpus/sources/function_moatless_v04.py SUBMISSION_DIR`` where
SUBMISSION_DIR is that folder of a local copy of the commit; writes
``tests/corpus/runs/function/moatless_v04.jsonl.gz``.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

from _store import cap, write_runs

SOURCE = "aorwall/moatless-tools"
COMMIT = "8ab89f27450e715a1aac16b0e37eb7a1947d3842"
LICENCE = "MIT"
FOLDER = "evaluations/20241117_moatless_claude_3_5_sonnet_20241022"
SAMPLE = (60, 2026)
OUT = Path(__file__).resolve().parents[1] / "runs" / "function" / "moatless_v04.jsonl.gz"
_TOOLS = {"EditActionArguments": "str_replace_editor", "ViewCodeArgs": "ViewCode"}



def _tool(args_class: str) -> str:
    name = args_class.rsplit(".", 1)[-1]
    return _TOOLS.get(name) or name.removesuffix("Args")


def convert(path: Path) -> dict[str, Any] | None:
    nodes = json.loads(path.read_text())["nodes"]
    if [node.get("parent_id") for node in nodes[1:]] != [node["node_id"] for node in nodes[:-1]]:
        return None  # not one chain
    turns = []
    for node in nodes[1:]:
        action = dict(node.get("action") or {})
        thought = action.pop("scratch_pad", None)
        tool = _tool(action.pop("action_args_class", "Unknown"))
        observation = node.get("observation") or {}
        properties = observation.get("properties") or {}
        reason = properties.get("fail_reason") if isinstance(properties, dict) else None
        message = observation.get("message")
        turns.append({"agent": None, "input": None, "output": thought or None, "calls": [{
            "tool": tool, "args": action,
            "result": None if message is None else cap(str(message)),
            "error": str(reason) if reason and observation.get("expect_correction") else None}]})
    instance = path.parent.name
    return {
        "id": f"function-moatless-v04-sonnet-{instance}",
        "family": "function",
        "source": SOURCE,
        "path": f"{FOLDER}/{instance}/trajectory.json",
        "commit": COMMIT,
        "licence": LICENCE,
        "harness": "Moatless Tools 0.4",
        "model": "claude-3-5-sonnet-20241022",
        "content": "full" if all(turn["calls"][0]["result"] is not None for turn in turns)
        else "partial",
        "turns": turns,
    }


def main(argv: list[str]) -> int:
    pool = sorted(Path(argv[0]).glob("*/trajectory.json"))
    size, seed = SAMPLE
    runs = [run for path in sorted(random.Random(seed).sample(pool, size))
            if (run := convert(path)) is not None and run["turns"]]
    runs.sort(key=lambda run: run["id"])
    write_runs(runs, OUT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
