"""Convert tau2-bench simulations run with xAI Grok models (a public fork) into corpus runs.

Source: github.com/blakeelias/tau2-bench, branch ``addendum``, commit
cf95bf5acba69b67e31b79fc7a7255307cb446bc, files under ``data/simulations/`` (the fork owner's
own runs of tau2-bench's ``llm_agent``, agent and user simulator the same Grok model):

- ``2025-10-06T06:45:09.212115_airline_llm_agent_grok-4-fast-reasoning_...json``: 66 simulations
  (41 airline tasks, up to 4 trials; the run file as saved, interrupted before all trials);
- ``2025-10-13T00:01:41.624853_airline_llm_agent_grok-3_...json``: 41 simulations (airline);
- ``2025-10-13T11:43:45.549419_airline_llm_agent_grok-4_...json``: 16 simulations (4 airline
  tasks x 4 trials);
- ``2025-10-05T22:26:20.526995_telecom-workflow_llm_agent_grok-3_...json``: 20 simulations and
  ``2025-10-05T07:52:52.930199_telecom_llm_agent_grok-3_...json``: 5 simulations (telecom, where
  the simulated user has tools of its own on the phone).

Every simulation of these five files is converted (the fork's other files are smaller reruns
of one or two tasks, or empty). Licence: MIT (the fork keeps tau2-bench's LICENSE), so results
are kept (``content: "full"``).

Mapping (tau2 ``SimulationRun.messages`` ordered by ``turn_idx``):
- every ``assistant`` message is one turn; its ``content`` is ``output`` (``null`` when the
  source has ``null``), its ``tool_calls`` the turn's calls in order (several in one message are
  parallel calls), ``name`` as ``tool`` and ``arguments`` as ``args``;
- the text of the ``user`` messages since the previous assistant message, joined by a blank
  line, is the turn's ``input``. In telecom the simulated user also calls its own tools
  (``requestor: "user"``, e.g. ``toggle_airplane_mode``); those are the user's actions on the
  phone, not the agent's, so they are not calls of the run; the user's words about them are the
  input;
- each ``tool`` message answering an agent call is matched by ``id``; its ``content`` is the
  ``result`` (over 4,000 characters capped as FORMAT.md says); a tool message with
  ``error: true`` gives ``error`` = the result's first line (tau2 writes ``Error: ...``);
- the harness's fixed greeting (the first assistant message) is kept as a turn with no calls.

Usage: ``python conversation_tau2_grok.py ROOT`` where ROOT holds the files at their repository
paths (``git --git-dir=MIRROR show COMMIT:PATH > ROOT/PATH``). Writes
``tests/corpus/runs/conversation/tau2_grok.jsonl.gz``.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import sys
from pathlib import Path

from _tau2 import turns_of

SOURCE = "blakeelias/tau2-bench"
COMMIT = "cf95bf5acba69b67e31b79fc7a7255307cb446bc"
LICENCE = "MIT"
HARNESS = "tau2-bench llm_agent"
SLUG = "tau2_grok"
DIR = "data/simulations"
FILES = [
    (
        "grok-4-fast-reasoning",
        "airline",
        f"{DIR}/2025-10-06T06:45:09.212115_airline_llm_agent_grok-4-fast-reasoning_user_simulator_grok-4-fast-reasoning.json",
    ),
    (
        "grok-3",
        "airline",
        f"{DIR}/2025-10-13T00:01:41.624853_airline_llm_agent_grok-3_user_simulator_grok-3.json",
    ),
    (
        "grok-4",
        "airline",
        f"{DIR}/2025-10-13T11:43:45.549419_airline_llm_agent_grok-4_user_simulator_grok-4.json",
    ),
    (
        "grok-3",
        "telecom-workflow",
        f"{DIR}/2025-10-05T22:26:20.526995_telecom-workflow_llm_agent_grok-3_user_simulator_grok-3.json",
    ),
    (
        "grok-3",
        "telecom",
        f"{DIR}/2025-10-05T07:52:52.930199_telecom_llm_agent_grok-3_user_simulator_grok-3.json",
    ),
]


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")


def main(root: Path) -> None:
    runs = []
    for model, domain, path in FILES:
        data = json.loads((root / path).read_text(encoding="utf-8"))
        for sim in data["simulations"]:
            turns = turns_of(sim["messages"])
            content = "full"
            if any(c["result"] is None for t in turns for c in t["calls"]):
                content = "partial"
            runs.append(
                {
                    "id": f"conversation-tau2-{model}-{domain}-{slug(str(sim['task_id']))}-t{sim.get('trial', 0)}",
                    "family": "conversation",
                    "source": SOURCE,
                    "path": path,
                    "commit": COMMIT,
                    "licence": LICENCE,
                    "harness": HARNESS,
                    "model": model,
                    "content": content,
                    "turns": turns,
                }
            )
    runs.sort(key=lambda r: r["id"])
    assert len({r["id"] for r in runs}) == len(runs)
    out = Path(__file__).resolve().parents[1] / "runs" / "conversation" / f"{SLUG}.jsonl.gz"
    out.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, filename="") as handle:
        for run in runs:
            handle.write(
                (json.dumps(run, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
            )
    out.write_bytes(buffer.getvalue())
    print(f"{len(runs)} runs -> {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
