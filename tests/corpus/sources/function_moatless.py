"""Moatless Tools runs on SWE-bench Lite, converted to the corpus format (family ``function``).

Source: github.com/aorwall/moatless-tools, commit 8ab89f27450e715a1aac16b0e37eb7a1947d3842
(the last commit that still holds ``evaluations/``; the next commit removed the folder).
Licence: MIT (the repository's LICENSE). Results are kept (content ``full``), long ones capped.

Three submissions, each a whole set of SWE-bench Lite runs; from each a seeded random sample
of ``PER_SUBMISSION`` runs is taken (``random.Random(SEED)`` over the sorted instance ids),
without regard to what the runs did:

- ``evaluations/20240609_moatless_gpt4o/trajs/*.json`` (gpt-4o-2024-05-13). Format: ``steps``;
  each step is one model response and becomes one turn; its ``actions`` are the function calls
  of that response in order (some responses hold several: parallel calls). ``name`` is the
  function the model called (``search``, ``identify``, ``request_for_change``, ``specify_lines``,
  ``search_replace``, ``finish``, ``reject``), ``input`` its arguments, ``output`` the harness's
  structured answer. A step's ``thought`` (rarely present) is the turn's output text.
- ``evaluations/20240617_moatless_gpt-4o-2024-05-13/trajs/*.json`` (gpt-4o-2024-05-13) and
  ``evaluations/20240623_moatless_claude-3.5-sonnet/trajs/*.json`` (claude-3-5-sonnet-20240620).
  Format: ``transitions`` between states; each action of a state is one model response and
  becomes one turn with one call. The harness asks for one function per state (instructor tool
  mode); the function is the state's action class in the moatless code of those days:
  SearchCode -> ``Search``, IdentifyCode -> ``Identify``, DecideRelevance -> ``Decision``,
  PlanToCode -> ``TakeAction`` (0617) or ``ApplyChange`` (0623), ClarifyCodeChange ->
  ``LineNumberClarification``. EditCode is not a function call: the model answers in text
  (``<replace>`` blocks) that the harness applies as the edit; it is stored as a call named
  ``EditCode`` with the model's text as ``{"content": ...}`` (as shell harnesses store a bare
  command). The model's reasoning (``thoughts``/``scratch_pad``) is an argument of the call and
  stays there; turn ``output`` is then null.

Results: the source records the harness's structured output (a dict), not the rendered text
the model saw; the result is that dict as JSON with sorted keys. An action the harness rejected
has a ``retry_message`` instead of an output: the result is that message and ``error`` its first
line. A ``search_replace`` whose output has an ``error`` (edit refused, ``updated: false``) has
that error's first line as ``error``. Terminal calls (``finish``, ``reject``, a PlanToCode finish
with no output) have no result in the source: null. A step-level ``error`` of the 0609 format
(cost limit reached) ends the run and is not a call's result; it is not stored.

Usage: python function_moatless.py EVALUATIONS_DIR  (the ``evaluations/`` folder extracted from
the commit above); writes tests/corpus/runs/function/moatless.jsonl.gz.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import random
import sys
from pathlib import Path
from typing import Any

SOURCE = "aorwall/moatless-tools"
COMMIT = "8ab89f27450e715a1aac16b0e37eb7a1947d3842"
SEED = 20240609
PER_SUBMISSION = 40

SUBMISSIONS = {
    "20240609_moatless_gpt4o": ("gpt4o-0609", "gpt-4o-2024-05-13"),
    "20240617_moatless_gpt-4o-2024-05-13": ("gpt4o-0617", "gpt-4o-2024-05-13"),
    "20240623_moatless_claude-3.5-sonnet": ("sonnet35-0623", "claude-3-5-sonnet-20240620"),
}

FUNCTIONS = {
    "20240617_moatless_gpt-4o-2024-05-13": {
        "SearchCode": "Search",
        "IdentifyCode": "Identify",
        "PlanToCode": "TakeAction",
        "ClarifyCodeChange": "LineNumberClarification",
        "EditCode": "EditCode",
    },
    "20240623_moatless_claude-3.5-sonnet": {
        "SearchCode": "Search",
        "IdentifyCode": "Identify",
        "DecideRelevance": "Decision",
        "PlanToCode": "ApplyChange",
        "ClarifyCodeChange": "LineNumberClarification",
        "EditCode": "EditCode",
    },
}


def cap(text: str) -> str:
    """Results over 4,000 characters: first 2,000 and the hash and length of the whole."""
    if len(text) <= 4000:
        return text
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return text[:2000] + f"\n[... sha256:{digest} len={len(text)}]"


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def as_result(output: Any) -> str | None:
    if output is None:
        return None
    if isinstance(output, str):
        return cap(output)
    return cap(json.dumps(output, sort_keys=True, ensure_ascii=False))


def turns_0609(data: dict[str, Any]) -> list[dict[str, Any]]:
    turns = []
    for step in data["steps"]:
        calls = []
        for action in step.get("actions", []):
            output = action.get("output")
            error = None
            if isinstance(output, dict) and output.get("error"):
                error = first_line(str(output["error"]))
            calls.append(
                {
                    "tool": action["name"],
                    "args": action.get("input") or {},
                    "result": as_result(output),
                    "error": error,
                }
            )
        turns.append({"agent": None, "input": None, "output": step.get("thought"), "calls": calls})
    return turns


def turns_transitions(data: dict[str, Any], functions: dict[str, str]) -> list[dict[str, Any]]:
    turns = []
    for transition in data["transitions"]:
        for action in transition.get("actions", []):
            tool = functions[transition["name"]]
            if "retry_message" in action:
                result: str | None = cap(action["retry_message"])
                error = "retry: " + first_line(action["retry_message"])
            else:
                result = as_result(action.get("output"))
                error = None
            call = {"tool": tool, "args": action["action"], "result": result, "error": error}
            turns.append({"agent": None, "input": None, "output": None, "calls": [call]})
    return turns


def convert(evaluations: Path) -> list[dict[str, Any]]:
    runs = []
    for submission, (short, model) in sorted(SUBMISSIONS.items()):
        folder = evaluations / submission / "trajs"
        instances = sorted(path.stem for path in folder.glob("*.json"))
        chosen = sorted(random.Random(SEED).sample(instances, PER_SUBMISSION))
        for instance in chosen:
            data = json.loads((folder / f"{instance}.json").read_text(encoding="utf-8"))
            if submission == "20240609_moatless_gpt4o":
                turns = turns_0609(data)
            else:
                turns = turns_transitions(data, FUNCTIONS[submission])
            runs.append(
                {
                    "id": f"function-moatless-{short}-{instance}",
                    "family": "function",
                    "source": SOURCE,
                    "path": f"evaluations/{submission}/trajs/{instance}.json",
                    "commit": COMMIT,
                    "licence": "MIT",
                    "harness": "moatless-tools",
                    "model": model,
                    "content": "full",
                    "turns": turns,
                }
            )
    return sorted(runs, key=lambda run: run["id"])


def main(argv: list[str]) -> int:
    evaluations = Path(argv[0])
    out = Path(__file__).resolve().parents[1] / "runs" / "function" / "moatless.jsonl.gz"
    out.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as handle:
        for run in convert(evaluations):
            handle.write(
                (json.dumps(run, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
            )
    out.write_bytes(buffer.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
