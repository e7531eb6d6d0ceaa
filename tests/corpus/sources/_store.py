"""What the converters added last share: the cap on long results, a result's digest, SWE-agent's
no-output message, reading a bare git mirror, and the writing of a runs file.

Standard library only, like every converter (which imports it as a sibling module when run as a
script, as the tau2 converters import ``_tau2``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["SWE_AGENT_NO_OUTPUT", "blob", "cap", "digest", "git", "write_runs"]

SWE_AGENT_NO_OUTPUT = "Your command ran successfully and did not produce any output."
"""What SWE-agent 0.x shows the model when a command printed nothing (its
``next_step_no_output_template``, followed by the ``(Open file: ...)`` and ``(Current
directory: ...)`` lines and ``bash-$``): the harness's words, kept as text by converters that
store a run's results as digests."""


def cap(text: str) -> str:
    """FORMAT.md's cap: over 4,000 characters, the first 2,000, then the whole's digest and length."""
    if len(text) <= 4000:
        return text
    whole = hashlib.sha256(text.encode()).hexdigest()
    return f"{text[:2000]}\n[... sha256:{whole} len={len(text)}]"


def digest(text: str) -> str:
    """A result as a source without a licence stores it: ``sha256:<hex>``, ``""`` when empty."""
    return f"sha256:{hashlib.sha256(text.encode()).hexdigest()}" if text else ""


def git(git_dir: Path, *args: str) -> bytes:
    """The output of a git command on the bare mirror ``git_dir`` (it must succeed)."""
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True,
                          capture_output=True).stdout


def blob(git_dir: Path, name: str) -> bytes | None:
    """The object ``name`` (a blob's id, or ``<commit>:<path>``), or None when the tree or the
    snapshot lacks it."""
    done = subprocess.run(["git", f"--git-dir={git_dir}", "cat-file", "blob", name],
                          capture_output=True, check=False)
    return done.stdout if done.returncode == 0 else None


def write_runs(runs: list[dict[str, Any]], out: Path) -> None:
    """Write ``runs`` to ``out`` (JSON lines, keys sorted, gzip) and say how many runs and calls."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(out, "wt", encoding="utf-8") as handle:
        handle.writelines(json.dumps(run, sort_keys=True, ensure_ascii=False) + "\n"
                          for run in runs)
    calls = sum(len(turn["calls"]) for run in runs for turn in run["turns"])
    print(f"{len(runs)} runs, {calls} calls -> {out}")
