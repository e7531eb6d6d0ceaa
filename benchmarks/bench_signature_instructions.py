"""Instructions per call of the signatures alone: a result's, its arguments', the call's.

Run (from the repository root)::

    python benchmarks/bench_signature_instructions.py [--baseline DIR] [--workloads no_loop,text]

``bench_engine_instructions.py`` counts the whole engine; this counts only what signing a call
costs, on the same calls (bench_engine's runs of 100 calls, default volatile keys): the result's
``analyze_result``, the arguments' ``canonical_args`` (their JSON text, as the adapters hand
it over) and the call's ``tool_signature`` (the digest of its tool and canonical arguments, as
the engine signs a call), each in its own process under ``valgrind --tool=callgrind``, run
over the 100 calls 22 times and 2 times (after one warm-up pass); the difference divided by
2,000 is the cost per call, start-up excluded. With ``--baseline DIR`` (another checkout) the
same is counted for its code and the ratio printed. Needs valgrind; a few seconds per count.
"""

from __future__ import annotations

import argparse
import os
import sys

from bench_engine_instructions import callgrind_instructions, print_counts

_HERE = os.path.dirname(os.path.abspath(__file__))
PASSES = (22, 2)
"""The two numbers of passes over the 100 calls counted; their difference is 2,000 calls."""
SIGNATURES = ("result", "args", "call")


def child(tree: str, workload: str, signature: str, passes: int) -> None:
    """Sign the results or the arguments of ``workload``'s 100 calls, 1 + ``passes`` times."""
    sys.path.insert(0, _HERE)
    sys.path.insert(0, tree)
    from _workload import to_tool_calls
    from bench_engine import make_calls

    from otel_loopguard.signature import (
        VolatileMatcher,
        analyze_result,
        canonical_args,
        tool_signature,
    )

    calls = to_tool_calls(make_calls(workload, 100))
    matcher = VolatileMatcher()
    values = [call.result if signature == "result" else call.arguments for call in calls]
    tools = [call.tool for call in calls]
    for _ in range(1 + passes):
        if signature == "result":
            for value in values:
                analyze_result(value, matcher)
        elif signature == "args":
            for value in values:
                canonical_args(value)
        else:
            for tool, value in zip(tools, values, strict=True):
                tool_signature(tool, value)


def per_call(job: tuple[str, ...]) -> float:
    """Return the instructions per call of one (tree, workload, signature)."""
    tree, workload, signature = job
    # PYTHONPATH names the tree: bench_engine, which the child imports, puts its own checkout
    # on sys.path right after the PYTHONPATH entries, which would otherwise shadow the tree
    env = {**os.environ, "PYTHONPATH": tree}
    high, low = (callgrind_instructions([__file__, "--child", tree, workload, signature,
                                         str(passes)], env) for passes in PASSES)
    return (high - low) / ((PASSES[0] - PASSES[1]) * 100)


def main() -> None:
    """Count every configuration (two valgrind processes at a time); one JSON line each."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--workloads", default="no_loop,text")
    parser.add_argument("--baseline", metavar="DIR")
    parser.add_argument("--child", nargs=4)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.child[2], int(args.child[3]))
        return
    print_counts(args.baseline, [{"workload": workload, "signature": signature}
                                 for workload in args.workloads.split(",")
                                 for signature in SIGNATURES], per_call)

if __name__ == "__main__":
    main()
