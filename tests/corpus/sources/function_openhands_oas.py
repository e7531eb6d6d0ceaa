"""OpenHands agent-SDK runs on OpenAgentSafety tasks, converted to the corpus format (family ``function``).

Source: github.com/OpenHands/benchmarks, commit 78ea45aed7d0e53199463fd1fbca4123b782eef7, folder
``benchmarks/openagentsafety/outputs/mgulavani__openagentsafety_full_updated-train/litellm_proxy/
neulab/gpt-4o-2024-08-06_maxiter_100_N_initial/``: one ``state_<instance>.json`` per task
(``instance_id`` and ``history``, the agent's whole event list) from one evaluation of the
OpenHands SDK agent with gpt-4o-2024-08-06 (max 100 iterations) on OpenAgentSafety tasks
(an agent acting for employees of a simulated company: shell, file editor, browser, chatting
with simulated colleagues through a ``chat_npc`` command). Tools: ``execute_bash``,
``str_replace_editor``, ``browser_*``, ``think``, ``finish``.
Licence: MIT (the repository's LICENSE). Results are kept (content ``full``), long ones capped.

Which runs: every ``state_*.json`` of the folder (45), except the two whose ``history`` is empty
(the task failed before the agent acted). The ``traj_*.json`` files hold the same histories; the
folder's ``output.jsonl`` holds two runs of an earlier attempt and is not used.

Mapping (OpenHands SDK events):
- ``MessageEvent`` from the user (nine of the 43 histories start with the task message;
  the others hold no user text): its text is the ``input`` of the next turn, else ``input`` is
  null. ``MessageEvent`` from the agent: a turn with its text as ``output`` and no calls (the agent
  answering in prose instead of calling ``finish``).
- ``ActionEvent``: consecutive action events with the same ``llm_response_id`` are one model
  response, one turn; each is a call (several = parallel calls). ``tool`` is ``tool_call.name``;
  ``args`` is ``tool_call.arguments`` parsed from JSON, as the model sent them. The turn's
  ``output`` is the text of the events' ``thought`` (and ``reasoning_content``), often empty.
- ``ObservationEvent``: matched to its call by ``tool_call_id``. Result: ``execute_bash`` ->
  ``metadata.prefix + output + metadata.suffix`` as the SDK renders it; editor and browser ->
  ``output`` or the ``error`` text (the browser's ``screenshot_data`` is dropped); ``think`` ->
  ``content``; ``finish`` -> ``message``. ``error``: ``exit code N`` for a non-zero exit code
  (``exit_code`` or ``metadata.exit_code``), ``error: true`` when the error flag is set, or the
  first line of an error text. An action with no observation in the history (a few ``finish``
  calls) keeps a null result, so those runs are ``partial``.

Usage: python function_openhands_oas.py FOLDER (the folder above, extracted from the commit);
writes tests/corpus/runs/function/openhands_oas.jsonl.gz.
"""

from __future__ import annotations

import gzip
import io
import json
import sys
from pathlib import Path
from typing import Any

from _openhands_sdk import turns_of

SOURCE = "OpenHands/benchmarks"
COMMIT = "78ea45aed7d0e53199463fd1fbca4123b782eef7"
FOLDER = (
    "benchmarks/openagentsafety/outputs/mgulavani__openagentsafety_full_updated-train/"
    "litellm_proxy/neulab/gpt-4o-2024-08-06_maxiter_100_N_initial"
)
SLUG = "openhands_oas"




def convert(folder: Path) -> list[dict[str, Any]]:
    runs = []
    for path in sorted(folder.glob("state_*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        history = data.get("history") or []
        if not history:
            continue
        turns = turns_of(history)
        calls = [call for turn in turns for call in turn["calls"]]
        content = "partial" if any(call["result"] is None for call in calls) else "full"
        runs.append(
            {
                "id": f"function-openhands-oas-gpt4o-{data['instance_id']}",
                "family": "function",
                "source": SOURCE,
                "path": f"{FOLDER}/{path.name}",
                "commit": COMMIT,
                "licence": "MIT",
                "harness": "openhands-sdk",
                "model": "gpt-4o-2024-08-06",
                "content": content,
                "turns": turns,
            }
        )
    return sorted(runs, key=lambda run: run["id"])


def main(argv: list[str]) -> int:
    folder = Path(argv[0])
    out = Path(__file__).resolve().parents[1] / "runs" / "function" / f"{SLUG}.jsonl.gz"
    out.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as handle:
        for run in convert(folder):
            handle.write(
                (json.dumps(run, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
            )
    out.write_bytes(buffer.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
