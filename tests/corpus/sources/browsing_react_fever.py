"""Convert the ReAct FEVER episodes printed in ysymyth/ReAct's FEVER.ipynb to the corpus format.

Source: github.com/ysymyth/ReAct, file ``FEVER.ipynb`` (printed output of the cell that runs
``webthink`` on ``idxs[:500]``) at commit 6bdb3a1fd38b8188fc7ba4102969fe483df8fdc9.
Licence: MIT (LICENSE, Copyright (c) 2023 Shunyu Yao), so results are kept as text
(``content: "full"``; observations longer than 4,000 characters capped as FORMAT.md says).

Harness: the notebook's ``webthink`` loop (ReAct, prompt ``webthink_simple3``) over
``wikienv.WikiEnv`` + ``FeverWrapper``: a fact-checking research agent on live Wikipedia with
the actions ``search[<entity>]``, ``lookup[<keyword>]`` and ``finish[<SUPPORTS|REFUTES|NOT
ENOUGH INFO>]``. The model is ``text-davinci-002`` (temperature 0, as the notebook's ``llm``
sets it); at most 7 steps; the harness lower-cases the first letter of the model's action
before stepping the environment, so the tool names are the environment's (``search``,
``lookup``, ``finish``). When the 7 steps run out, the harness itself sends ``finish[]``; that
is not a model call and is not recorded.

Runs: the notebook printed 500 episodes (FEVER dev claims in a ``random.Random(233)`` order); a
seeded random sample of 50 of them (``random.Random(20241203).sample(range(500), 50)`` over the
printed order), chosen without looking at them, each kept whole.

Mapping: each printed step (``Thought i`` / ``Action i`` / ``Observation i``) is one turn:
``output`` the thought, one call for the action. ``args``: ``{"argument": <text between the
brackets>}`` as the model wrote it; an action without brackets (``Login``) has ``{}``. The
action text is kept as the model wrote it for the tool name; an action the environment rejects
(``Invalid action: ...``, e.g. a ``Finish[...]`` the model wrote after blank lines) is still
recorded as the call the model meant (tool from the text, stripped), with the harness's line as
``result`` and ``error``. Search misses (``Could not find ...``) and ``No more results.`` are
ordinary results. The claim is the first turn's ``input``. Lines the notebook printed for a
badly formed completion (``ohh...``) are left out: the harness then asked the model again and
printed the step it used, which is what is recorded.

Usage: python browsing_react_fever.py /path/to/ReAct.git [OUT.jsonl.gz]
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

COMMIT = "6bdb3a1fd38b8188fc7ba4102969fe483df8fdc9"
PATH = "FEVER.ipynb"
SLUG = "react_fever"
SEED = 20241203
SAMPLE = 50
STEP = re.compile(r"^(Thought|Action|Observation) (\d+):(.*)$")


def cap(text: str) -> str:
    if len(text) <= 4000:
        return text
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return text[:2000] + f"\n[... sha256:{digest} len={len(text)}]"


def episodes(notebook: dict) -> list[str]:
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code" and "webthink(i, to_print=True)" in "".join(cell["source"]):
            text = "".join("".join(out.get("text", "")) for out in cell.get("outputs", []))
            return [part for part in text.split("-----------\n") if "Claim:" in part]
    raise SystemExit("episode cell not found")


def convert(body: str) -> tuple[str, str, list[dict]]:
    lines = body.strip("\n").split("\n")
    head = re.match(r"^(\d+) (Claim: .*)$", lines[0])
    idx, claim = head.group(1), head.group(2)
    steps: dict[int, dict[str, list[str]]] = {}
    last = None
    for line in lines[1:]:
        match = STEP.match(line)
        if match:
            kind, number = match.group(1), int(match.group(2))
            steps.setdefault(number, {})[kind] = [
                match.group(3)[1:] if match.group(3).startswith(" ") else match.group(3)
            ]
            last = (number, kind)
        elif line.startswith(("ohh...", "{'steps'")) or re.match(
            r"^\d+ \d+ [0-9.]+ [0-9.]+$", line
        ):
            last = None
        elif last is not None and last[1] == "Action":
            steps[last[0]]["Action"].append(line)
        elif last is not None and last[1] == "Observation" and line.strip():
            steps[last[0]]["Observation"].append(line)
        elif not line.strip() and last is not None and last[1] == "Observation":
            last = None
    turns: list[dict] = []
    for number in sorted(steps):
        step = steps[number]
        turn = {
            "agent": None,
            "input": claim if not turns else None,
            "output": "\n".join(step.get("Thought", [])) or None,
            "calls": [],
        }
        if "Action" in step:
            action = "\n".join(step["Action"])
            observation = "\n".join(step.get("Observation", [])).strip()
            bare = action.strip()
            match = re.match(r"^(\w+)\[(.*)\]$", bare, re.S)
            if match:
                tool, args = match.group(1), {"argument": match.group(2)}
            else:
                tool, args = bare.split("[")[0].strip() or "(empty)", {}
            tool = tool[0].lower() + tool[1:]
            error = observation if observation.startswith("Invalid action") else None
            turn["calls"].append(
                {
                    "tool": tool,
                    "args": args,
                    "result": cap(observation) if "Observation" in step else None,
                    "error": error,
                }
            )
        turns.append(turn)
    return idx, claim, turns


def main(argv: list[str]) -> int:
    git_dir = Path(argv[0])
    out = (
        Path(argv[1])
        if len(argv) > 1
        else Path(__file__).resolve().parents[1] / "runs" / "browsing" / f"{SLUG}.jsonl.gz"
    )
    raw = subprocess.run(
        ["git", "--git-dir", str(git_dir), "show", f"{COMMIT}:{PATH}"],
        check=True,
        capture_output=True,
    ).stdout
    eps = episodes(json.loads(raw))
    chosen = sorted(random.Random(SEED).sample(range(len(eps)), SAMPLE))
    runs = []
    for position in chosen:
        idx, _claim, turns = convert(eps[position])
        runs.append(
            {
                "id": f"browsing-{SLUG}-{position:03d}-claim{idx}",
                "family": "browsing",
                "source": "ysymyth/ReAct",
                "path": PATH,
                "commit": COMMIT,
                "licence": "MIT",
                "harness": "ReAct FEVER notebook (webthink, WikiEnv)",
                "model": "text-davinci-002",
                "content": "full",
                "turns": turns,
            }
        )
    runs.sort(key=lambda run: run["id"])
    out.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, filename="") as handle:
        for run in runs:
            handle.write(
                (json.dumps(run, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
            )
    out.write_bytes(buffer.getvalue())
    print(f"{len(runs)} of {len(eps)} runs -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
