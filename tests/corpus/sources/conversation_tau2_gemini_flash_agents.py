"""tau2-bench airline runs of four agent harnesses on gemini-2.5-flash (tau2-enhanced) -> corpus runs.

Source: github.com/jitrc/tau2-enhanced, commit 4b23a7edc99ca836665784f6d6c0d4d0c79b49ba, files
``samples/logs/airline_gemini2_5_flash_10tasks_2t{,_retry_agent,_context_agent,_enhanced_agent}.json``
(added 2025-09-29 in "adding samples"): the repository owner's own tau2-bench runs of the first 10
airline tasks, 2 trials each, agent and simulated user both ``gemini/gemini-2.5-flash``, one file
per agent harness:

- ``llm_agent``: tau2-bench's own agent;
- ``retry_agent`` (tau2-enhanced's ``RetryManagedLLMAgent``): the same agent with up to three
  attempts after a tool call fails validation;
- ``context_agent`` (``ContextManagedLLMAgent``): the same agent with a sliding window over a long
  conversation;
- ``enhanced_agent``: both.

Every simulation of the four files is taken (80 runs); none is left out. The files' other
siblings (``*_enhanced_logs.json``) are the tool's event logs of the same runs, not other runs, and
the repository's grok-3 and 4-trial files are not in the snapshot (over its size limit). The
repository has no licence file and its ``pyproject.toml`` names none, so results are stored as
digests (``content: "hashed"``); arguments, the simulated user's words and the agent's words are
kept.

Mapping (tau2 ``SimulationRun.messages`` ordered by ``turn_idx``, as ``_tau2.turns_of``):
- every ``assistant`` message is one turn; its ``content`` is ``output`` (``null`` when the source
  has ``null``), its ``tool_calls`` the turn's calls in order (several in one message are parallel
  calls), ``name`` as ``tool`` and ``arguments`` as ``args``;
- the text of the ``user`` messages since the previous assistant message, joined by a blank line,
  is the turn's ``input`` (airline gives the simulated user no tools);
- each ``tool`` message answering a call is matched by ``id``; ``sha256:<hex>`` of its content
  (JSON-dumped with sorted keys when not a string) is the ``result``; a tool message with
  ``error: true``, or whose text starts ``Error:``, gives ``error`` = that text's first line;
- the harness's fixed greeting (the first assistant message) is kept as a turn with no calls.
Left out: the messages' token counts, costs, timestamps and ``raw_data`` (the provider's raw
response, which repeats the message), and the task and reward records.

Usage: ``python conversation_tau2_gemini_flash_agents.py GIT_DIR`` (the bare git dir from the
fetch tool, read with ``git show`` only); writes
``tests/corpus/runs/conversation/tau2_gemini_flash_agents.jsonl.gz``. Standard library only.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import subprocess
import sys
from pathlib import Path

from _tau2 import turns_of

SOURCE = "jitrc/tau2-enhanced"
COMMIT = "4b23a7edc99ca836665784f6d6c0d4d0c79b49ba"
MODEL = "gemini-2.5-flash"
DIR = "samples/logs"
FILES = [
    ("llm_agent", f"{DIR}/airline_gemini2_5_flash_10tasks_2t.json"),
    ("retry_agent", f"{DIR}/airline_gemini2_5_flash_10tasks_2t_retry_agent.json"),
    ("context_agent", f"{DIR}/airline_gemini2_5_flash_10tasks_2t_context_agent.json"),
    ("enhanced_agent", f"{DIR}/airline_gemini2_5_flash_10tasks_2t_enhanced_agent.json"),
]
OUT = (Path(__file__).resolve().parents[1] / "runs" / "conversation"
       / "tau2_gemini_flash_agents.jsonl.gz")


def git_show(git_dir: Path, path: str) -> bytes:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{COMMIT}:{path}"], check=True,
        capture_output=True,
    ).stdout


def hashed(text: str) -> str:
    return "" if text == "" else "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def main(git_dir: Path) -> None:
    runs = []
    for harness, path in FILES:
        data = json.loads(git_show(git_dir, path))
        assert data["info"]["agent_info"]["implementation"] == harness, path
        assert data["info"]["agent_info"]["llm"] == f"gemini/{MODEL}", path
        for sim in data["simulations"]:
            turns = turns_of(sim["messages"], store=lambda text: hashed(text or ""))
            calls = [c for t in turns for c in t["calls"]]
            content = "partial" if any(c["result"] is None for c in calls) else "hashed"
            runs.append({
                "id": f"conversation-tau2-gemini-flash-{harness.replace('_', '-')}"
                      f"-airline-{sim['task_id']}-t{sim.get('trial', 0)}",
                "family": "conversation",
                "source": SOURCE,
                "path": path,
                "commit": COMMIT,
                "licence": "none",
                "harness": f"tau2-bench {harness} (tau2-enhanced)",
                "model": MODEL,
                "content": content,
                "turns": turns,
            })
    runs.sort(key=lambda r: r["id"])
    assert len({r["id"] for r in runs}) == len(runs)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, filename="") as handle:
        for run in runs:
            handle.write((json.dumps(run, sort_keys=True, ensure_ascii=False) + "\n").encode())
    OUT.write_bytes(buffer.getvalue())
    print(f"{len(runs)} runs -> {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
