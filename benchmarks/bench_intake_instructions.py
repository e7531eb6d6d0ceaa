"""Instructions per span of the intake of ``serve`` or ``check`` (the engine a no-op), by valgrind.

Run (from the repository root)::

    python benchmarks/bench_intake_instructions.py [--baseline DIR] [--path serve|check]
        [--traces 40] [--content full|names] [--json FILE]

CPU time on a shared 2-core machine moves by 20 % and more from run to run; the instructions a
process executes do not. The spans are those of ``bench_serve``'s traces (a root, 16 chat and
16 tool spans each), decoded from their OTLP protobuf requests. ``--path serve`` is
``profile_serve``'s ``intake`` phase: they go through ``StreamingChecker.add`` batch by batch and
then ``flush``; ``--path check``: through ``Checker.run``, as ``check`` feeds them. Either way
the engine is replaced by one that detects nothing. Each tree runs under ``valgrind
--tool=callgrind`` twice, doing the phase three times and once (``PYTHONHASHSEED=0``, after one
warm-up run); the difference, divided by twice the spans, is the cost per span, start-up and
decoding excluded. ``--baseline DIR`` (another checkout, ``git worktree add DIR <commit>``)
counts its code too, and prints the ratio; the decoding and the traces come from each tree's own
``benchmarks``. About a minute per tree on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)

from bench_engine_instructions import callgrind_instructions  # noqa: E402

REPEATS = (3, 1)
"""The two repeat counts of the phase; their difference is the cost of two intakes."""


def child(tree: str, path: str, traces: int, content: str, repeats: int) -> None:
    """Run ``tree``'s intake of ``path`` over ``traces`` traces ``repeats`` times, after a
    warm-up."""
    sys.path[:0] = [os.path.join(tree, "benchmarks"), tree]
    import bench_serve
    import profile_serve

    bench_serve.CONTENT["capture"] = content == "full"
    if path == "check":
        intake = _check_phase(profile_serve, bench_serve, traces)
    else:
        intake = profile_serve._phases(traces)[0]["intake"]
    for _ in range(1 + repeats):
        intake()


def _check_phase(profile_serve: Any, bench_serve: Any, traces: int) -> Callable[[], None]:
    """Return ``check``'s intake: ``Checker.run`` over the decoded spans, no-op engine."""
    from otel_loopguard.config import LoopGuardConfig
    from otel_loopguard.otlp._request import decode_protobuf
    from otel_loopguard.replay.checker import Checker

    bodies = bench_serve.encode_batches(bench_serve.make_traces(traces, seed=1))
    spans = [span for body in bodies for span in decode_protobuf(body).spans]
    config = LoopGuardConfig()

    def run() -> None:
        checker = Checker(config, engine=profile_serve._NoEngine(config))
        assert sum(1 for _ in checker.run(spans)) == traces
    return run


def _instructions(job: tuple[str, str, int, str], repeats: int) -> int:
    tree, path, traces, content = job
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the tree's own code
    return callgrind_instructions([__file__, "--child", tree, path, str(traces), content,
                                   str(repeats)], env)


def per_span(job: tuple[str, str, int, str]) -> float:
    """Return the instructions per span of one (tree, path, traces, content)."""
    high, low = (_instructions(job, repeats) for repeats in REPEATS)
    spans = job[2] * 33  # bench_serve: a root and 16 turns of a chat and a tool span
    return (high - low) / ((REPEATS[0] - REPEATS[1]) * spans)


def main() -> None:
    """Count each tree (two valgrind processes at a time) and print one JSON line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", metavar="DIR")
    parser.add_argument("--path", choices=("serve", "check"), default="serve",
                        help="serve: StreamingChecker, as profile_serve; check: Checker.run")
    parser.add_argument("--traces", type=int, default=40)
    parser.add_argument("--content", choices=("full", "names"), default="full")
    parser.add_argument("--json", metavar="FILE", help="also write the row to FILE")
    parser.add_argument("--child", nargs=5)
    args = parser.parse_args()
    if args.child:
        tree, path, traces, content, repeats = args.child
        child(tree, path, int(traces), content, int(repeats))
        return
    trees = {"after": os.path.dirname(_HERE)}
    if args.baseline:
        trees["before"] = os.path.abspath(args.baseline)
    jobs = [(tree, args.path, args.traces, args.content) for tree in trees.values()]
    with ThreadPoolExecutor(2) as pool:
        counts = dict(zip(trees, pool.map(per_span, jobs), strict=True))
    row: dict[str, Any] = {"path": args.path, "traces": args.traces, "content": args.content,
                           "instructions_per_span": {k: round(v) for k, v in counts.items()},
                           "instructions_per_tool_span": {k: round(v * 33 / 16)
                                                          for k, v in counts.items()}}
    if "before" in counts:
        row["after/before"] = round(counts["after"] / counts["before"], 3)
    print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(row, out, indent=1)
            out.write("\n")


if __name__ == "__main__":
    main()
