"""Convert tau-bench's published gpt-4o airline trajectories into corpus runs.

Source: github.com/sierra-research/tau-bench, commit 7362a1708d720a4d697d042f21fd8637ea144c3b,
file ``historical_trajectories/gpt-4o-airline.json``; licence MIT (LICENSE, Sierra), so result
text is kept (``content: "full"``).

Runs taken: all 200 of the file (the 50 airline tasks, 4 trials each), the tool-calling agent
on gpt-4o talking to a simulated user.

How the records map to turns and calls (OpenAI chat messages): every ``assistant`` message is
one turn, its ``content`` the turn's ``output`` and each of its ``tool_calls`` a call of the
function it names with its JSON arguments. The user's messages since the previous assistant
message are the turn's ``input``. A call's result is the ``tool`` message answering it: the
first not yet taken after the assistant message with its ``tool_call_id`` (the file reuses
ids across turns), its ``content`` as the agent saw it; a result that starts with ``Error:``
(the environment's refusal) is the call's error, its first line. The system prompt (the
airline policy) is left out. Results longer than 4,000 characters are capped as FORMAT.md says.

Usage: ``python tests/corpus/sources/conversation_taubench_gpt4o_airline.py FILE`` where FILE
is that JSON file of a local copy of the commit; writes
``tests/corpus/runs/conversation/taubench-gpt4o-airline.jsonl.gz``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from _store import cap, write_runs

SOURCE = "sierra-research/tau-bench"
COMMIT = "7362a1708d720a4d697d042f21fd8637ea144c3b"
LICENCE = "MIT"
HARNESS = "tau-bench tool-calling agent, airline"
SLUG = "taubench-gpt4o-airline"
PATH = "historical_trajectories/gpt-4o-airline.json"
OUT = Path(__file__).resolve().parents[1] / "runs" / "conversation" / f"{SLUG}.jsonl.gz"



def turns_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    said: list[str] = []
    taken: set[int] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "user":
            if message.get("content"):
                said.append(str(message["content"]))
        elif role == "assistant":
            calls = []
            for call in message.get("tool_calls") or []:
                function = call["function"]
                answer = next((i for i in range(index + 1, len(messages))
                               if i not in taken and messages[i].get("role") == "tool"
                               and messages[i].get("tool_call_id") == call.get("id")), None)
                text = None
                if answer is not None:
                    taken.add(answer)
                    text = str(messages[answer].get("content") or "")
                calls.append({
                    "tool": function["name"],
                    "args": json.loads(function.get("arguments") or "{}"),
                    "result": None if text is None else cap(text),
                    "error": text.splitlines()[0][:200] if text and text.startswith("Error:")
                    else None,
                })
            turns.append({"agent": None, "input": "\n\n".join(said) if said else None,
                          "output": message.get("content"), "calls": calls})
            said = []
    return turns


def main(argv: list[str]) -> int:
    records = json.loads(Path(argv[0]).read_text())
    runs = []
    for record in records:
        turns = turns_of(record["traj"])
        if not turns:
            continue
        runs.append({
            "id": f"conversation-{SLUG}-{record['task_id']}-t{record['trial']}",
            "family": "conversation",
            "source": SOURCE,
            "path": PATH,
            "commit": COMMIT,
            "licence": LICENCE,
            "harness": HARNESS,
            "model": "gpt-4o",
            "content": "full" if all(call["result"] is not None for turn in turns
                                     for call in turn["calls"]) else "partial",
            "turns": turns,
        })
    runs.sort(key=lambda run: (int(run["id"].rsplit("-", 2)[1]), run["id"]))
    write_runs(runs, OUT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
