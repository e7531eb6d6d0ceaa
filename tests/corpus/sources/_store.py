"""What the converters added last share: the cap on long results and the writing of a runs file.

Standard library only, like every converter (which imports it as a sibling module when run as a
script, as the tau2 converters import ``_tau2``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

__all__ = ["cap", "write_runs"]


def cap(text: str) -> str:
    """FORMAT.md's cap: over 4,000 characters, the first 2,000, then the whole's digest and length."""
    if len(text) <= 4000:
        return text
    whole = hashlib.sha256(text.encode()).hexdigest()
    return f"{text[:2000]}\n[... sha256:{whole} len={len(text)}]"


def write_runs(runs: list[dict[str, Any]], out: Path) -> None:
    """Write ``runs`` to ``out`` (JSON lines, keys sorted, gzip) and say how many runs and calls."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(out, "wt", encoding="utf-8") as handle:
        handle.writelines(json.dumps(run, sort_keys=True, ensure_ascii=False) + "\n"
                          for run in runs)
    calls = sum(len(turn["calls"]) for run in runs for turn in run["turns"])
    print(f"{len(runs)} runs, {calls} calls -> {out}")
