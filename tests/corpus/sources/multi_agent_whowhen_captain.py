"""Who&When, algorithm-generated systems: CaptainAgent (AG2) expert teams on GAIA tasks.

Source: github.com/ag2ai/Agents_Failure_Attribution, folder ``Who&When/Algorithm-Generated``
(one JSON file per run, all 126 taken), commit f4d2b6da464a826580e59b3a0eae15ea2d642d7c.
Licence: MIT (repository LICENSE), so result text is kept (content "full").
Harness: CaptainAgent (AG2 group chat): the experts CaptainAgent built for the task, each an
LLM agent, and ``Computer_terminal``, a non-LLM agent that executes the code blocks of the
message before it. Model: GPT-4o, as the Who&When paper states (the files name no model).
Who&When kept only runs that FAILED their task (``is_correct`` false); a failed task is not
a loop.

Mapping of the ``history`` messages (``name`` field) to turns:

- every message of an expert is one turn of that agent, ``output`` its text. The first
  message is the task and plan the manager handed to the group (it is stored under the first
  expert's name, as in the source) and is a turn like the others.
- a ``Computer_terminal`` message that executed code ("exitcode: N (...)\\nCode output: ...")
  is the result of one call ``execute_code_blocks`` {"code_blocks": [[language, code], ...]}
  added to the turn before it (the code blocks of that message, as AG2's code extraction
  reads them; [] if none parse). ``error`` is the terminal's first line when the exit code is
  not 0 ("exitcode: 1 (execution failed)").
- a message of an expert that is a browser page ("Address: ...", then "Viewport position:
  Showing page i of n."; AG2's web-surfer experts such as ``WebServing_Expert`` reply with the
  page their browser tool returned) is a turn of that agent with one call, the tool read back
  from the page as AG2's web surfer names its tools: an address "bing: q" ->
  ``informational_web_search`` {"query": q}; a new address -> ``visit_page`` {"url": address};
  the same address one page on / back -> ``page_down`` / ``page_up`` {}; otherwise
  ``visit_page`` again. ``output`` is null and ``result`` the page.
- a ``Computer_terminal`` message that executed nothing ("There is no code from the last 1
  message for me to execute. ...") is the harness's feedback: it becomes the ``input`` of the
  next turn (a turn of agent ``Computer_terminal`` without calls when it ends the log).

Results longer than 4,000 characters are stored as FORMAT.md says. Runs are sorted by file
number. Usage: ``python multi_agent_whowhen_captain.py <checkout of the repository>``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import sys
from pathlib import Path

COMMIT = "f4d2b6da464a826580e59b3a0eae15ea2d642d7c"
SOURCE = "ag2ai/Agents_Failure_Attribution"
FOLDER = "Who&When/Algorithm-Generated"
OUT = Path(__file__).resolve().parent.parent / "runs" / "multi_agent" / "whowhen_captain.jsonl.gz"

CODE = re.compile(r"```[ \t]*(\w*)[ \t]*\r?\n(.*?)\r?\n[ \t]*```", re.S)
TERMINAL = "Computer_terminal"
ADDRESS = re.compile(r"^Address: (.*)$", re.M)
VIEWPORT = re.compile(r"^Viewport position: Showing page (\d+) of (\d+)\.", re.M)


def cap(text: str | None) -> str | None:
    if text is None or len(text) <= 4000:
        return text
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return text[:2000] + f"\n[... sha256:{digest} len={len(text)}]"


def convert_run(number: str, data: dict, rel: str) -> dict:
    turns: list[dict] = []
    pending: list[str] = []
    browser: dict[str, tuple[str, int]] = {}
    for message in data["history"]:
        name, content = message.get("name") or message.get("role"), message.get("content") or ""
        if name == TERMINAL:
            match = re.match(r"exitcode: (\d+)", content)
            if match and turns and not turns[-1].get("_executed"):
                previous = turns[-1]
                blocks = [[lang, code] for lang, code in CODE.findall(previous["output"] or "")]
                error = None if match[1] == "0" else content.splitlines()[0]
                previous["calls"].append(
                    {
                        "tool": "execute_code_blocks",
                        "args": {"code_blocks": blocks},
                        "result": cap(content),
                        "error": error,
                    }
                )
                previous["_executed"] = True
            else:
                pending.append(content)
            continue
        turn = {
            "agent": name,
            "input": "\n\n".join(pending) or None,
            "output": content,
            "calls": [],
        }
        pending = []
        address = ADDRESS.match(content)
        viewport = VIEWPORT.search(content)
        if address and viewport:
            url, page = address[1].strip(), int(viewport[1])
            state = browser.get(name)
            if url.startswith("bing: "):
                tool, args = "informational_web_search", {"query": url[len("bing: ") :]}
            elif state and state[0] == url and page == state[1] + 1:
                tool, args = "page_down", {}
            elif state and state[0] == url and page == state[1] - 1:
                tool, args = "page_up", {}
            else:
                tool, args = "visit_page", {"url": url}
            browser[name] = (url, page)
            turn["output"] = None
            turn["calls"].append(
                {"tool": tool, "args": args, "result": cap(content), "error": None}
            )
            turn["_executed"] = True
        turns.append(turn)
    if pending:
        turns.append(
            {"agent": TERMINAL, "input": None, "output": "\n\n".join(pending), "calls": []}
        )
    for turn in turns:
        turn.pop("_executed", None)
    return {
        "id": f"multi_agent-whowhen-captain-{int(number):03d}",
        "family": "multi_agent",
        "source": SOURCE,
        "path": rel,
        "commit": COMMIT,
        "licence": "MIT",
        "harness": "CaptainAgent (AG2)",
        "model": "gpt-4o",
        "content": "full",
        "turns": turns,
    }


def main(argv: list[str]) -> int:
    root = Path(argv[0]) / FOLDER
    files = sorted(root.glob("*.json"), key=lambda p: int(p.stem))
    runs = [
        convert_run(p.stem, json.loads(p.read_text(encoding="utf-8")), f"{FOLDER}/{p.name}")
        for p in files
    ]
    runs.sort(key=lambda r: r["id"])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with (
        open(OUT, "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as handle,
    ):
        for run in runs:
            handle.write(
                (json.dumps(run, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
            )
    print(f"{len(runs)} runs -> {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
