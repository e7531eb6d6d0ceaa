"""Convert tau2-bench's ToolOrchestra leaderboard submission into corpus runs.

Source: github.com/sierra-research/tau2-bench, commit 2f6c259b85fb6ced67f75ed3d0f8becae6d3dea6
(the last commit holding the submission's trajectories before they moved to S3), files
``web/leaderboard/public/submissions/toolorchestra_nvidia_2025-12-02/trajectories/
toolorchestra_{airline,retail}_gpt-5_1trial.json``. The telecom file of the same submission is
over 4 MiB and was not in the snapshot, so only airline (50 simulations) and retail (114
simulations) are converted: every simulation of both files, one trial each.

Licence: MIT (tau2-bench's LICENSE), so results are kept (``content: "full"``).

Harness: tau2-bench 0.1.3 ``llm_agent`` driven by NVIDIA's ToolOrchestra orchestrator
(Nemotron-Orchestrator-8B routing between models; the file's ``agent_info.llm`` field says
``gpt-4.1-mini-2025-04-14``), against a ``gpt-4.1`` user simulator.

Mapping (tau2 ``SimulationRun.messages`` ordered by ``turn_idx``):
- every ``assistant`` message is one turn; its ``content`` is ``output`` (``null`` when the
  source has ``null``), its ``tool_calls`` are the turn's calls in order (several in one message
  are parallel calls), with ``name`` as ``tool`` and ``arguments`` as ``args``;
- the ``user`` messages since the previous assistant message, joined by a blank line, are the
  turn's ``input`` (the simulated customer's words); ``null`` when the turn follows tool results;
- each ``tool`` message is matched to its call by ``id``; its ``content`` is the ``result``
  (results over 4,000 characters capped as FORMAT.md says). These files carry no ``error`` flag
  on tool messages; tau2's environment reports a failed call by a result starting with
  ``Error:``, so such a result's first line is the call's ``error``;
- the harness's fixed greeting (the first assistant message) is kept as a turn with no calls.

Usage: ``python conversation_tau2_toolorchestra.py ROOT`` where ROOT holds the two files at their
repository paths (``git --git-dir=MIRROR show COMMIT:PATH > ROOT/PATH``). Writes
``tests/corpus/runs/conversation/tau2_toolorchestra.jsonl.gz``.
"""

from __future__ import annotations

import gzip
import io
import json
import sys
from pathlib import Path

from _tau2 import turns_of

SOURCE = "sierra-research/tau2-bench"
COMMIT = "2f6c259b85fb6ced67f75ed3d0f8becae6d3dea6"
LICENCE = "MIT"
HARNESS = "tau2-bench llm_agent (ToolOrchestra)"
MODEL = "Nemotron-Orchestrator-8B"
SLUG = "tau2_toolorchestra"
DIR = "web/leaderboard/public/submissions/toolorchestra_nvidia_2025-12-02/trajectories"
FILES = {
    "airline": f"{DIR}/toolorchestra_airline_gpt-5_1trial.json",
    "retail": f"{DIR}/toolorchestra_retail_gpt-5_1trial.json",
}


def main(root: Path) -> None:
    runs = []
    for domain, path in FILES.items():
        data = json.loads((root / path).read_text(encoding="utf-8"))
        for sim in data["simulations"]:
            turns = turns_of(sim["messages"])
            content = "full"
            if any(c["result"] is None for t in turns for c in t["calls"]):
                content = "partial"
            runs.append(
                {
                    "id": f"conversation-tau2-toolorchestra-{domain}-{sim['task_id']}-t{sim.get('trial', 0)}",
                    "family": "conversation",
                    "source": SOURCE,
                    "path": path,
                    "commit": COMMIT,
                    "licence": LICENCE,
                    "harness": HARNESS,
                    "model": MODEL,
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
