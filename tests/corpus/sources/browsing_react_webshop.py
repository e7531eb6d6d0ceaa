"""Convert the ReAct WebShop episodes printed in ysymyth/ReAct's WebShop.ipynb to the corpus format.

Source: github.com/ysymyth/ReAct, file ``WebShop.ipynb`` (output of the cell
``res1 = run_episodes(prompt1, 500)``) at commit 6bdb3a1fd38b8188fc7ba4102969fe483df8fdc9.
Licence: MIT (LICENSE, Copyright (c) 2023 Shunyu Yao), so results are kept as text
(``content: "full"``; pages longer than 4,000 characters capped as FORMAT.md says).

Harness: the notebook's ``webshop_run`` loop (ReAct prompting, one-shot ``prompt1``) over the
WebShop simulated shopping site: the model (``text-davinci-002``, temperature 0, 100 tokens,
stop at newline, as the notebook's ``llm`` sets it) writes one action per completion,
``search[<query>]``, ``click[<button>]`` or ``think[<thought>]``; the harness steps the site
and prints ``Action: ...`` / ``Observation: <page text>``. At most 15 iterations (the first is
the harness's own ``reset``); an episode ends when the site says done (``click[Buy Now]``).

Runs: the notebook printed 500 episodes (``fixed_0`` .. ``fixed_499``); a seeded random sample
of 80 of them (``random.Random(20241203).sample(range(500), 80)``), chosen without looking at
them, each kept whole.

Mapping: the harness's ``reset`` observation (the shopping instruction page) is the first
turn's ``input``. Each model action is one turn. ``search[...]`` and ``click[...]`` are calls,
tool ``search`` / ``click`` as the site names them, ``args`` ``{"argument": <text between the
brackets>}`` as the model wrote it, ``result`` the observation (page text); any other
``word[...]`` action the model wrote (``exit[quit]``) is a call to the tool it named, which the
site rejects. ``think[...]`` is
not sent to the site for a result (the harness answers ``OK.`` itself): it is a turn with no
call whose ``output`` is the action text, and the ``OK.`` is the next turn's ``input``. An
action the site rejects gets the harness's ``Invalid action!`` as its result and
``error: "Invalid action!"``. A model output that is not of the ``word[...]`` form is a turn
without a call; what the harness answered is the next turn's ``input``.

Usage: python browsing_react_webshop.py /path/to/ReAct.git [OUT.jsonl.gz]
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
PATH = "WebShop.ipynb"
SLUG = "react_webshop"
SEED = 20241203
SAMPLE = 80


def cap(text: str) -> str:
    if len(text) <= 4000:
        return text
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return text[:2000] + f"\n[... sha256:{digest} len={len(text)}]"


def episodes(notebook: dict) -> dict[int, str]:
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code" and "run_episodes(prompt1, 500)" in "".join(cell["source"]):
            text = "".join("".join(out.get("text", "")) for out in cell.get("outputs", []))
            parts = re.split(r"^-----------------\n(\d+)\n", text, flags=re.M)
            return {int(parts[i]): parts[i + 1] for i in range(1, len(parts), 2)}
    raise SystemExit("episode cell not found")


def steps(body: str) -> list[tuple[str, str]]:
    """(action, observation) pairs of one printed episode."""
    body = re.sub(r"\n\d+ [0-9.]+ [0-9.]+ [0-9.]+\n-------------\n?\Z", "\n", body)
    chunks = re.split(r"^Action: ", body, flags=re.M)
    out = []
    for chunk in chunks[1:]:
        action, _, observation = chunk.partition("\nObservation: ")
        out.append(
            (
                action,
                observation.rstrip("\n").rstrip(" ")
                if observation.strip()
                else observation.strip(),
            )
        )
    return out


def convert(body: str) -> list[dict]:
    pairs = steps(body)
    assert pairs and pairs[0][0] == "reset", pairs[:1]
    turns: list[dict] = []
    pending = pairs[0][1].strip()
    for action, observation in pairs[1:]:
        turn = {"agent": None, "input": pending, "output": None, "calls": []}
        pending = None
        match = re.match(r"^(\w+)\[(.*)\]$", action, re.S)
        tool = match.group(1) if match else None
        if match and tool != "think":
            error = "Invalid action!" if observation.strip() == "Invalid action!" else None
            turn["calls"].append(
                {
                    "tool": tool,
                    "args": {"argument": match.group(2)},
                    "result": cap(observation.strip()),
                    "error": error,
                }
            )
        else:
            turn["output"] = action
            pending = observation.strip()
        turns.append(turn)
    return turns


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
    chosen = sorted(random.Random(SEED).sample(sorted(eps), SAMPLE))
    runs = []
    for index in chosen:
        runs.append(
            {
                "id": f"browsing-{SLUG}-fixed_{index:03d}",
                "family": "browsing",
                "source": "ysymyth/ReAct",
                "path": PATH,
                "commit": COMMIT,
                "licence": "MIT",
                "harness": "ReAct WebShop notebook (webshop_run)",
                "model": "text-davinci-002",
                "content": "full",
                "turns": convert(eps[index]),
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
