"""A repetition screen for the corpus, independent of the detectors.

It decides which runs a person must read closely before labelling them; it never labels.
It imports nothing from ``otel_loopguard``. ``python tests/corpus/screen.py FILE.jsonl.gz
[RUN_ID]`` prints each run's signals, or one run call by call for reading.
"""

from __future__ import annotations

import gzip
import itertools
import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def load_runs(path: Path) -> Iterator[dict[str, Any]]:
    """Runs of one stored file, in order."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def calls_of(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's tool calls in order (turn order, then call order)."""
    return [call for turn in run["turns"] for call in turn["calls"]]


def _key(call: dict[str, Any]) -> str:
    return call["tool"] + " " + json.dumps(call["args"], sort_keys=True)


def signals(run: dict[str, Any]) -> list[str]:
    """Plain repetition signals: what a reader should look at, with 1-based call indices."""
    calls = calls_of(run)
    found: list[str] = []
    keys = [_key(call) for call in calls]
    for key, count in Counter(keys).items():
        if count >= 3:
            where = [str(i) for i, other in enumerate(keys, 1) if other == key]
            found.append(f"same call x{count} at {','.join(where[:12])}: {key[:80]}")
    outcomes = [(call["tool"], call["result"]) for call in calls]
    for i in range(len(outcomes) - 2):
        tool, result = outcomes[i]
        if result is not None and outcomes[i + 1] == outcomes[i] == outcomes[i + 2]:
            found.append(f"same tool and result x3 from {i + 1}: {tool}")
            break
    errors = [(call["tool"], call["error"]) for call in calls if call["error"]]
    for (tool, error), count in Counter(errors).items():
        if count >= 3:
            found.append(f"same error x{count}: {tool}: {str(error)[:60]}")
    for i in range(len(keys) - 3):
        if keys[i] == keys[i + 2] and keys[i + 1] == keys[i + 3] and keys[i] != keys[i + 1]:
            found.append(f"alternation from {i + 1}")
            break
    idle = 0
    for turn in run["turns"]:
        idle = 0 if turn["calls"] else idle + 1
        if idle == 3:
            found.append("3 turns in a row without a tool call")
    agents = [turn.get("agent") for turn in run["turns"] if turn.get("agent")]
    changes = [b for a, b in itertools.pairwise(agents) if a != b]
    if len(changes) >= 4:
        found.append(f"{len(changes)} agent changes")
    return found


def show(run: dict[str, Any], width: int = 160) -> str:
    """The run call by call, for reading."""
    lines = [f"{run['id']} ({run['harness']}, {run['model']}): {len(calls_of(run))} calls"]
    index = 0
    for number, turn in enumerate(run["turns"], 1):
        if turn.get("input"):
            lines.append(f"  [turn {number} input] {turn['input'][:width]!r}")
        if turn.get("output"):
            who = turn.get("agent") or "model"
            lines.append(f"  [turn {number} {who}] {turn['output'][:width]!r}")
        for call in turn["calls"]:
            index += 1
            result = "<not captured>" if call["result"] is None else repr(call["result"][:width])
            error = f" ERROR {call['error']!r}" if call["error"] else ""
            lines.append(f"  {index:4} {call['tool']} {json.dumps(call['args'])[:width]}{error}")
            lines.append(f"       -> {result}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    path = Path(argv[0])
    for run in load_runs(path):
        if len(argv) > 1:
            if run["id"] == argv[1]:
                print(show(run))
            continue
        print(run["id"], len(calls_of(run)), "; ".join(signals(run)) or "-")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
