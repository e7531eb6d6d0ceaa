"""Instructions per span the span processor adds, counted by valgrind: a figure noise cannot move.

Run: python benchmarks/bench_instructions.py [--kinds plain,tool] [--spans 2000,10000]

CPU time on a shared 2-core machine varies by 20 % and more from run to run, more than the bound
on other spans (+5 %); the instructions a process executes do not. Each configuration runs under
``valgrind --tool=callgrind`` twice, with the two span counts of ``--spans``, and the difference
divided by the extra spans is the cost per span, start-up excluded. The downstream is a
``SimpleSpanProcessor`` with a null exporter, so no export thread runs on a timer; ``batch`` is
that processor alone, ``loopguard`` the processor in front of it, in the background mode.
The workload is bench_processor's (its warm-up pass and timed pass): traces of 20 spans under an
``invoke_agent`` root, plain spans with two attributes or healthy ``execute_tool`` spans with
arguments and a result.
Needs valgrind (``apt-get install valgrind``); slow (about a minute per configuration).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_processor import child

PER_TRACE = 20
"""Spans under each root in bench_processor's workload."""


def _instructions(config: str, kind: str, spans: int) -> int:
    # both runs import alike: a first run that wrote bytecode would make the second look cheap
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                           sys.executable, __file__, "--child", config, kind, str(spans)],
                          capture_output=True, text=True, env=env, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count in valgrind's output: {done.stderr[-500:]}")
    return int(found.group(1))


def main() -> None:
    """Count both configurations of each kind and print instructions per span and the ratio."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--kinds", default="plain,tool")
    parser.add_argument("--spans", default="2000,10000", help="the two span counts")
    parser.add_argument("--child", nargs=3)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]), simple=True)
        return
    low, high = (int(n) for n in args.spans.split(","))
    extra = 2 * (high - low) * (PER_TRACE + 1) // PER_TRACE  # two passes; the roots count too
    for kind in args.kinds.split(","):
        per_span = {config: (_instructions(config, kind, high) - _instructions(config, kind, low))
                    / extra for config in ("batch", "loopguard")}
        base, ours = per_span["batch"], per_span["loopguard"]
        print(json.dumps({"kind": kind, "batch_instructions_per_span": round(base),
                          "loopguard_instructions_per_span": round(ours),
                          "added": round(ours - base), "ratio": round(ours / base, 4)}),
              flush=True)


if __name__ == "__main__":
    main()
