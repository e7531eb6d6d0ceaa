"""Convert the ReAct HotPotQA runs logged in noahshinn/reflexion to the corpus format.

Source: github.com/noahshinn/reflexion, file
``hotpotqa_runs/root/ReAct/base/100_questions_5_trials.txt`` at commit
218cf0ef1df84b05ce379dd4a8e47f17766733a0. Licence: MIT (LICENSE, Copyright (c) 2023 Noah Shinn),
so results are kept as text (``content: "full"``).

Harness: the ReAct agent of ``hotpotqa_runs/agents.py`` (``ReactAgent``), a Wikipedia research
agent with three actions, ``Search[<entity>]`` and ``Lookup[<keyword>]`` (LangChain's
``DocstoreExplorer`` over Wikipedia) and ``Finish[<answer>]``; at most 6 steps
(``max_steps=6``), halted earlier when the prompt grows past 3,896 tokens. The model is not
named in the log; ``agents.py`` defaults ``ReactAgent`` to ``gpt-3.5-turbo`` (temperature 0),
which is what the model field says.

Runs: only TRIAL 1 of the file (the first attempt at each question of the 100-question sample,
before any retry); every run of that trial is kept, correct, incorrect and halted alike (the
trial holds 103 runs: three questions appear twice in the sample).

Mapping: the harness asks the model twice a step (``Thought n`` then ``Action n``); each step is
one turn whose ``output`` is the thought (the first turn's ``input`` is the question), and whose single call is the action: tool ``Search``,
``Lookup`` or ``Finish`` as the harness names it, ``args`` ``{"argument": <text between the
brackets>}`` exactly as the model wrote it, ``result`` the ``Observation n`` text (the log
keeps Wikipedia paragraphs on continuation lines, joined back with ``\\n``). ``Finish`` returns
``Answer is CORRECT`` / ``Answer is INCORRECT``. ``error``: the harness's own failure lines
(``Could not find that page, please try again.``, ``The last page Searched was not found...``,
``Invalid Action...``) are recorded as errors; a search that finds no page returns
``Could not find [...]. Similar: [...]`` as an ordinary result, as the agent saw it. An action
the harness could not parse (not ``Word[...]``) is a turn without a call, and the harness's
``Invalid Action`` reply is the next turn's ``input``.

Usage: python browsing_reflexion_react_hotpotqa.py /path/to/reflexion.git [OUT.jsonl.gz]
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

COMMIT = "218cf0ef1df84b05ce379dd4a8e47f17766733a0"
PATH = "hotpotqa_runs/root/ReAct/base/100_questions_5_trials.txt"
SLUG = "reflexion_react_hotpotqa"
HARD_ERRORS = (
    "Could not find that page, please try again.",
    "The last page Searched was not found",
    "Invalid Action.",
)
STEP = re.compile(r"^(Thought|Action|Observation) (\d+):(.*)$")


def cap(text: str) -> str:
    if len(text) <= 4000:
        return text
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return text[:2000] + f"\n[... sha256:{digest} len={len(text)}]"


def blocks(text: str) -> list[list[str]]:
    """The question blocks of trial 1, each a list of lines from 'Question:' to 'Correct answer:'."""
    lines = text.split("\n")
    end = next(i for i, line in enumerate(lines) if line.startswith("BEGIN TRIAL 2"))
    out: list[list[str]] = []
    current: list[str] | None = None
    for line in lines[:end]:
        if line.startswith("Question:"):
            current = [line]
        elif current is not None:
            current.append(line)
            if line.startswith("Correct answer:"):
                out.append(current)
                current = None
    return out


def convert_block(block: list[str]) -> tuple[str, list[dict]]:
    question = block[0][len("Question:") :].strip()
    steps: dict[int, dict[str, list[str]]] = {}
    last: tuple[int, str] | None = None
    for line in block[1:-1]:
        match = STEP.match(line)
        if match:
            kind, number, rest = match.group(1), int(match.group(2)), match.group(3)
            steps.setdefault(number, {})[kind] = [rest.strip()]
            last = (number, kind)
        elif last is not None and line.strip():
            steps[last[0]][last[1]].append(line.rstrip())
    turns: list[dict] = []
    pending_input = "Question: " + question
    for number in sorted(steps):
        step = steps[number]
        thought = "\n".join(step.get("Thought", [])) or None
        action = "\n".join(step.get("Action", [])) if "Action" in step else None
        observation = "\n".join(step["Observation"]).strip() if "Observation" in step else None
        turn = {"agent": None, "input": pending_input, "output": thought, "calls": []}
        pending_input = None
        parsed = re.match(r"^(\w+)\[(.+)\]$", action or "", re.S)
        if action is None:
            pass
        elif parsed:
            tool, argument = parsed.group(1), parsed.group(2)
            error = None
            if observation is not None and observation.startswith(HARD_ERRORS):
                error = observation.split(". ")[0].rstrip(".")
            turn["calls"].append(
                {
                    "tool": tool,
                    "args": {"argument": argument},
                    "result": None if observation is None else cap(observation),
                    "error": error,
                }
            )
        else:
            turn["output"] = (thought or "") + "\nAction: " + action
            pending_input = observation
        turns.append(turn)
    if pending_input is not None:
        turns.append({"agent": None, "input": pending_input, "output": None, "calls": []})
    return question, turns


def main(argv: list[str]) -> int:
    git_dir = Path(argv[0])
    out = (
        Path(argv[1])
        if len(argv) > 1
        else Path(__file__).resolve().parents[1] / "runs" / "browsing" / f"{SLUG}.jsonl.gz"
    )
    text = subprocess.run(
        ["git", "--git-dir", str(git_dir), "show", f"{COMMIT}:{PATH}"],
        check=True,
        capture_output=True,
    ).stdout.decode("utf-8")
    runs = []
    for index, block in enumerate(blocks(text), 1):
        _question, turns = convert_block(block)
        runs.append(
            {
                "id": f"browsing-{SLUG}-t1-{index:03d}",
                "family": "browsing",
                "source": "noahshinn/reflexion",
                "path": PATH,
                "commit": COMMIT,
                "licence": "MIT",
                "harness": "Reflexion ReactAgent (HotPotQA, Wikipedia Search/Lookup)",
                "model": "gpt-3.5-turbo",
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
    print(f"{len(runs)} runs -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
