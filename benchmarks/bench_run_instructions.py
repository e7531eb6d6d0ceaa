"""Instructions per new run (``LoopEngine.new_run``) and per ``reset``, counted by valgrind.

Run (from the repository root)::

    PYTHONPATH=. python benchmarks/bench_run_instructions.py [--baseline DIR] [--json FILE]

Every run the span processor, ``check`` and ``serve`` open starts with ``new_run``: one state
per detector, the run's counters, its waste. Each (tree, operation) runs under ``valgrind
--tool=callgrind`` twice, with 2,200 and with 200 operations on an engine of the default config
(``PYTHONHASHSEED=0``, after 200 uncounted ones); the difference over 2,000 is the cost of one,
start-up excluded. ``--baseline DIR`` (another checkout) counts its code too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)

from bench_engine_instructions import callgrind_instructions  # noqa: E402

COUNTS = (2_200, 200)
"""The two operation counts; their difference is the cost of 2,000."""
OPERATIONS = ("new_run", "reset")


def child(tree: str, operation: str, count: int) -> None:
    """Do ``operation`` ``count`` times with ``tree``'s engine, after 200 uncounted ones."""
    sys.path.insert(0, tree)
    from otel_loopguard import LoopEngine

    engine = LoopEngine()
    run = engine.new_run()
    work = engine.new_run if operation == "new_run" else lambda: engine.reset(run)
    for _ in range(200 + count):
        work()


def per_operation(tree: str, operation: str) -> float:
    """Return the instructions of one ``operation`` with ``tree``'s code."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the tree's own code
    high, low = (callgrind_instructions([__file__, "--child", tree, operation, str(count)], env)
                 for count in COUNTS)
    return (high - low) / (COUNTS[0] - COUNTS[1])


def main() -> None:
    """Count every (tree, operation), two valgrind processes at a time; print them."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", metavar="DIR")
    parser.add_argument("--json", metavar="FILE", help="also write the figures to FILE")
    parser.add_argument("--child", nargs=3)
    args = parser.parse_args()
    if args.child:
        tree, operation, count = args.child
        child(tree, operation, int(count))
        return
    trees = {"after": os.path.dirname(_HERE)}
    if args.baseline:
        trees["before"] = os.path.abspath(args.baseline)
    jobs = [(name, operation) for name in trees for operation in OPERATIONS]
    with ThreadPoolExecutor(2) as pool:
        counts = list(pool.map(lambda job: per_operation(trees[job[0]], job[1]), jobs))
    found = {f"{name}_{operation}": round(count)
             for (name, operation), count in zip(jobs, counts, strict=True)}
    print(json.dumps(found))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"baseline": args.baseline, "instructions": found}, out, indent=1)
            out.write("\n")


if __name__ == "__main__":
    main()
