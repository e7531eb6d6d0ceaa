"""Who&When, hand-crafted systems: Magentic-One runs on GAIA / AssistantBench tasks.

Source: github.com/ag2ai/Agents_Failure_Attribution, folder ``Who&When/Hand-Crafted``
(one JSON file per run, all 58 taken), commit f4d2b6da464a826580e59b3a0eae15ea2d642d7c.
Licence: MIT (repository LICENSE), so result text is kept (content "full").
Harness: Magentic-One (autogen), orchestrator with WebSurfer, FileSurfer, Assistant (coder)
and ComputerTerminal. Model: GPT-4o, as the Who&When paper states for its Magentic-One logs
(the files do not name a model per run). Who&When kept only runs that FAILED their task
(each has a ``mistake_agent`` / ``mistake_step``); a failed task is not a loop.

Mapping of the ``history`` messages (``role`` field) to turns:

- ``human``: the task; it becomes the ``input`` of the next turn.
- ``Orchestrator (thought)``, ``Orchestrator (-> X)``, ``Orchestrator (termination
  condition)``: consecutive orchestrator messages (the ledger, the instruction taken from it,
  the "Next speaker X" line) are one turn of agent ``Orchestrator`` without calls, ``output``
  the messages joined by a blank line. The delegation to X is in that text.
- ``WebSurfer``: one turn of agent ``WebSurfer`` with one call. The log keeps the action
  sentence Magentic-One's WebSurfer writes for each tool, not the raw tool call, so the tool
  is read back from that sentence with the names of the WebSurfer's tools:
  "I typed 'q' into the browser search bar." -> ``web_search`` {"query": q};
  "I typed 'u' into the browser address bar." -> ``visit_url`` {"url": u};
  "I typed 't' into 'f'." -> ``input_text`` {"input_field": f, "text_value": t};
  "I input 't'." -> ``input_text`` {"text_value": t};
  "I clicked 'x'." -> ``click`` {"target": x} ("I clicked the control." -> {"target": null});
  "I clicked the browser back button." -> ``history_back`` {};
  "I scrolled down/up one page in the browser." -> ``page_down`` / ``page_up`` {}.
  The element ids the model sent are not in the log; the arguments are the names the sentence
  gives. The ``result`` is the rest of the message (screenshot description, metadata, OCR).
  The action sentence may span lines (a target with line breaks); it ends at the first "'."
  followed by a blank line or the end.
  A WebSurfer message without an action sentence (a summary or an answer) is a turn without
  calls, ``output`` the text.
- ``FileSurfer``: one turn of agent ``FileSurfer`` with one call. The log keeps only the
  viewer's page ("Address: ...", then "Viewport position: Showing page i of n."); the tool is read
  back from it: a new address -> ``open_local_file`` {"path": address}; the same address one
  page on / back -> ``page_down`` / ``page_up`` {}; otherwise ``open_local_file`` again.
  A FileSurfer message that is not a viewer page (an error, an answer) is a turn without calls.
- ``Assistant``: a turn of agent ``Assistant`` without calls (it writes code for the terminal).
- ``ComputerTerminal``: a turn of agent ``ComputerTerminal`` with one call ``execute_code``
  {"code_blocks": [[language, code], ...]} (the code blocks of the latest earlier message, of
  any agent but the terminal, that has any; [] when none), ``result`` the terminal's message;
  ``error`` "exit code N" when the message reports a non-zero exit code, or the terminal's
  first line when it found no code block.

Results longer than 4,000 characters are stored as FORMAT.md says. Runs are sorted by file
number. Usage: ``python multi_agent_whowhen_magentic.py <checkout of the repository>``.
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
FOLDER = "Who&When/Hand-Crafted"
OUT = Path(__file__).resolve().parent.parent / "runs" / "multi_agent" / "whowhen_magentic.jsonl.gz"

CODE = re.compile(r"```[ \t]*(\w*)[ \t]*\r?\n(.*?)\r?\n[ \t]*```", re.S)


def cap(text: str | None) -> str | None:
    if text is None or len(text) <= 4000:
        return text
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return text[:2000] + f"\n[... sha256:{digest} len={len(text)}]"


def websurfer_call(text: str) -> dict | None:
    end = r"(?=\n\n|\s*$)"
    patterns = [
        (
            r"I typed '(.*?)' into the browser search bar\." + end,
            lambda m: ("web_search", {"query": m[1]}),
        ),
        (
            r"I typed '(.*?)' into the browser address bar\." + end,
            lambda m: ("visit_url", {"url": m[1]}),
        ),
        (
            r"I typed '(.*?)' into '(.*?)'\." + end,
            lambda m: ("input_text", {"input_field": m[2], "text_value": m[1]}),
        ),
        (r"I input '(.*?)'\." + end, lambda m: ("input_text", {"text_value": m[1]})),
        (r"I clicked the browser back button\." + end, lambda m: ("history_back", {})),
        (r"I clicked the control\." + end, lambda m: ("click", {"target": None})),
        (r"I clicked '(.*?)'\." + end, lambda m: ("click", {"target": m[1]})),
        (r"I scrolled down one page in the browser\." + end, lambda m: ("page_down", {})),
        (r"I scrolled up one page in the browser\." + end, lambda m: ("page_up", {})),
    ]
    for pattern, build in patterns:
        match = re.match(pattern, text, re.S)
        if match:
            tool, args = build(match)
            rest = text[match.end() :].lstrip("\n")
            return {"tool": tool, "args": args, "result": cap(rest), "error": None}
    return None


ADDRESS = re.compile(r"^Address: (.*)$", re.M)
VIEWPORT = re.compile(r"^Viewport position: Showing page (\d+) of (\d+)\.", re.M)


def convert_run(number: str, data: dict, rel: str) -> dict:
    turns: list[dict] = []
    pending_input: str | None = None
    orchestrator: list[str] = []
    last_code: list[list[str]] = []
    file_state: tuple[str, int] | None = None

    def flush() -> None:
        nonlocal pending_input
        if orchestrator:
            turns.append(
                {
                    "agent": "Orchestrator",
                    "input": pending_input,
                    "output": "\n\n".join(orchestrator),
                    "calls": [],
                }
            )
            orchestrator.clear()
            pending_input = None

    def add(agent: str, output: str | None, calls: list[dict]) -> None:
        nonlocal pending_input
        turns.append({"agent": agent, "input": pending_input, "output": output, "calls": calls})
        pending_input = None

    for message in data["history"]:
        role, content = message["role"], message["content"] or ""
        if role == "human":
            flush()
            pending_input = content
            continue
        if role.startswith("Orchestrator"):
            orchestrator.append(content)
            blocks = [[lang, code] for lang, code in CODE.findall(content)]
            if blocks:
                last_code = blocks
            continue
        flush()
        if role == "WebSurfer":
            call = websurfer_call(content)
            if call:
                add("WebSurfer", None, [call])
            else:
                add("WebSurfer", content, [])
        elif role == "FileSurfer":
            match = ADDRESS.match(content)
            if match:
                viewport = VIEWPORT.search(content)
                address, page = match[1], int(viewport[1]) if viewport else 0
                if file_state and file_state[0] == address and page == file_state[1] + 1:
                    tool, args = "page_down", {}
                elif file_state and file_state[0] == address and page == file_state[1] - 1:
                    tool, args = "page_up", {}
                else:
                    tool, args = "open_local_file", {"path": address}
                file_state = (address, page)
                add(
                    "FileSurfer",
                    None,
                    [{"tool": tool, "args": args, "result": cap(content), "error": None}],
                )
            else:
                add("FileSurfer", content, [])
        elif role == "ComputerTerminal":
            exit_code = re.search(r"exit code:? (\d+)", content)
            if content.startswith("No code block detected"):
                error = content.splitlines()[0]
            elif exit_code and exit_code[1] != "0":
                error = f"exit code {exit_code[1]}"
            else:
                error = None
            add(
                "ComputerTerminal",
                None,
                [
                    {
                        "tool": "execute_code",
                        "args": {"code_blocks": last_code},
                        "result": cap(content),
                        "error": error,
                    }
                ],
            )
        else:
            add(role, content, [])
        blocks = [[lang, code] for lang, code in CODE.findall(content)]
        if blocks and role != "ComputerTerminal":
            last_code = blocks
    flush()
    return {
        "id": f"multi_agent-whowhen-magentic-{int(number):03d}",
        "family": "multi_agent",
        "source": SOURCE,
        "path": rel,
        "commit": COMMIT,
        "licence": "MIT",
        "harness": "Magentic-One",
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
