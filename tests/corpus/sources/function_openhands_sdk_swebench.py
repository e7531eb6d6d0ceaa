"""OpenHands agent-SDK runs on SWE-bench instances, converted to the corpus format (family ``function``).

Source: github.com/OpenHands/benchmarks. For a few hours in September 2025 the repository tracked a
developer's ``workspace/conversations/<id>/event_service/`` folder: the event logs of OpenHands
SDK conversations (CodeAct-style agent, claude-sonnet-4-20250514, tools ``execute_bash``,
``str_replace_editor``, ``think``, ``task_tracker``, ``finish``) solving SWE-bench issues
(astropy, matplotlib, pylint, pytest, requests, sphinx, sympy). The folder was first committed in
8acc621c63ccb8e565b27567e1475aef0a189108 (2025-09-25) and dropped from tracking by
dab6cb96818a3fef44827b37a76e8355ea347279 and d4e9b4fa5920358617c748e15e269e1467523e27 (2025-09-26).
Licence: MIT (the repository's LICENSE). Results are kept (content ``full``), long ones capped.

Which runs: every event file ever committed is one event (``event-<n>-<uuid>.json``); a
conversation is rebuilt from the union of its event files over the history. Only whole runs are
kept: event numbers contiguous from 0 and the run finished (its last event is the observation of
the ``finish`` tool and its ``base_state.json`` says ``agent_status: finished``). That gives 21
runs; the other conversations were committed while still running (status ``idle``, no finish,
or gaps in the numbering) and are not whole. The choice does not look at what the runs did
between start and finish.

Mapping (OpenHands SDK events):
- ``SystemPromptEvent``: not a turn. ``Condensation`` (the harness's context condenser dropping
  old events) is not a turn either and is not stored.
- ``MessageEvent`` from the user: its text is the ``input`` of the next turn (the task).
  ``MessageEvent`` from the agent: a turn with that text as ``output`` and no calls.
- ``ActionEvent``: consecutive action events with the same ``llm_response_id`` are one model
  response, so one turn; each is a call (several = parallel calls). ``tool`` is
  the function name of ``tool_call`` (OpenAI form, ``tool_call.function.name``), ``args`` is
  ``tool_call.function.arguments`` parsed from JSON exactly as the model sent them
  (``str_replace_editor`` keeps ``command``; the ``security_risk`` field the SDK asks for stays). The turn's ``output`` is the text blocks
  of the events' ``thought`` (and ``reasoning_content`` when present), joined by newlines.
- ``ObservationEvent``: matched to its call by ``tool_call_id``. Result: ``execute_bash`` ->
  ``metadata.prefix + output + metadata.suffix`` (as the SDK renders it for the model, e.g.
  ``[The command completed with exit code 1.]``); ``str_replace_editor`` -> ``output``, or the
  ``error`` text when the edit was refused; ``think``/``task_tracker`` -> ``content``;
  ``finish`` -> ``message``. ``error``: ``exit code N`` for a command with a non-zero exit code,
  ``error: true`` when the observation's ``error`` flag is set, or the first line of the
  editor's error text.

Each run's ``commit`` is the newest commit whose tree holds all of its events.

Usage: python function_openhands_sdk_swebench.py GIT_DIR (a bare clone of OpenHands/benchmarks;
read with ``git rev-list``/``cat-file``/``ls-tree`` only); writes
tests/corpus/runs/function/openhands_sdk_swebench.jsonl.gz.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from _openhands_sdk import text_of, turns_of

SOURCE = "OpenHands/benchmarks"
SLUG = "openhands_sdk_swebench"




def instance_of(events: list[dict[str, Any]]) -> str:
    for event in events:
        if event.get("kind") == "MessageEvent" and event.get("source") == "user":
            text = text_of((event.get("llm_message") or {}).get("content"))
            match = re.search(r"directory /tmp/tmp\w+/([\w-]+)", text)
            if match:
                return match.group(1)
    return "unknown"


def git(git_dir: Path, *args: str) -> bytes:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True
    ).stdout


def conversations(git_dir: Path) -> dict[str, dict[str, Any]]:
    """Every conversation folder ever committed: its event blobs by number, and its base states."""
    found: dict[str, dict[str, Any]] = {}
    listing = git(git_dir, "rev-list", "--all", "--objects", "--missing=allow-any").decode()
    for line in listing.splitlines():
        oid, _, path = line.partition(" ")
        match = re.match(
            r"workspace/conversations/([0-9a-f]+)/event_service/(events/event-(\d+)-[^/]+\.json|base_state\.json)$",
            path,
        )
        if not match:
            continue
        entry = found.setdefault(match.group(1), {"events": {}, "bases": []})
        if match.group(3) is not None:
            entry["events"][int(match.group(3))] = oid
        else:
            entry["bases"].append(oid)
    return found


def commit_of(git_dir: Path, name: str, count: int) -> str:
    """The newest commit whose tree holds every event of the conversation."""
    folder = f"workspace/conversations/{name}/event_service/events"
    for commit in git(git_dir, "log", "--all", "--format=%H", "--", folder).decode().split():
        if (
            len(git(git_dir, "ls-tree", "--name-only", commit, folder + "/").decode().split())
            == count
        ):
            return commit
    return ""


def convert(git_dir: Path) -> list[dict[str, Any]]:
    runs = []
    for name, entry in sorted(conversations(git_dir).items()):
        numbers = sorted(entry["events"])
        if not numbers or numbers != list(range(len(numbers))):
            continue
        bases = [json.loads(git(git_dir, "cat-file", "-p", oid)) for oid in entry["bases"]]
        base = next((b for b in bases if b.get("agent_status") == "finished"), None)
        events = [json.loads(git(git_dir, "cat-file", "-p", entry["events"][n])) for n in numbers]
        last = events[-1]
        if (
            base is None
            or last.get("kind") != "ObservationEvent"
            or (last.get("observation") or {}).get("kind") != "FinishObservation"
        ):
            continue
        model = ((base.get("agent") or {}).get("llm") or {}).get("model", "").split("/")[-1]
        repo = instance_of(events)
        runs.append(
            {
                "id": f"function-openhands-sdk-{repo}-{name[:8]}",
                "family": "function",
                "source": SOURCE,
                "path": f"workspace/conversations/{name}/event_service/events",
                "commit": commit_of(git_dir, name, len(numbers)),
                "licence": "MIT",
                "harness": "openhands-sdk",
                "model": model,
                "content": "full",
                "turns": turns_of(events),
            }
        )
    return sorted(runs, key=lambda run: run["id"])


def main(argv: list[str]) -> int:
    git_dir = Path(argv[0])
    out = Path(__file__).resolve().parents[1] / "runs" / "function" / f"{SLUG}.jsonl.gz"
    out.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as handle:
        for run in convert(git_dir):
            handle.write(
                (json.dumps(run, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
            )
    out.write_bytes(buffer.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
