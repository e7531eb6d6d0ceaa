"""Instructions per engine call, counted by valgrind, with and without the signatures' share.

Run (from the repository root)::

    python benchmarks/bench_engine_instructions.py [--baseline DIR] [--workloads no_loop,text]

CPU time on a shared 2-core machine moves by 20 % and more from run to run; the instructions a
process executes do not. Each configuration runs under ``valgrind --tool=callgrind`` twice, with
1,200 and with 200 calls (runs of 100 of bench_engine's calls, default config,
``PYTHONHASHSEED=0``, after one warm-up run), and the difference divided by 1,000 is the cost
per call, start-up excluded.

Two modes per workload: ``full``, the engine as it is, and ``detect``, the engine with
``analyze_result`` and ``call_signature`` (``canonical_args`` in an engine that signs calls with
it: the result's and the call's signatures, the ``otel_loopguard.signature`` package) answered
from a table filled in the warm-up run: what
is left is the engine's and the detectors' own work per call (plus a lookup in that table).
With ``--baseline DIR`` (another checkout, ``git worktree add DIR <commit>``) the same is
counted for its code, and the ratio printed. Needs valgrind; about a minute per configuration.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
CALLS = (1_200, 200)
"""The two run sizes counted; their difference is the cost of 1,000 calls."""


def child(tree: str, workload: str, calls: int, mode: str) -> None:
    """Feed ``calls`` calls of ``workload`` to the engine of ``tree`` (after a warm-up run)."""
    sys.path.insert(0, _HERE)
    sys.path.insert(0, tree)
    from _checkout import imported_from
    from _workload import to_tool_calls
    from bench_engine import make_calls, make_engine

    import otel_loopguard.engine as engine_module

    measured = os.path.dirname(imported_from())
    if os.path.abspath(measured) != os.path.abspath(tree):
        raise SystemExit(f"the child for {tree} imported otel_loopguard from {measured}")
    if mode == "detect":
        _answer_signatures_from_table(engine_module)
    engine = make_engine(workload)
    tool_calls = to_tool_calls(make_calls(workload, 100))
    for _ in range(1 + calls // 100):
        run = engine.new_run()
        for call in tool_calls:
            engine.process(run, call)


def _answer_signatures_from_table(module: Any) -> None:
    """Replace the engine's signature functions by a lookup of what they gave for a value."""
    # (name, the position of the argument that tells a call's value: call_signature's tool is
    # shared by many calls, its arguments are not)
    for name, at in (("analyze_result", 0), ("canonical_args", 0), ("call_signature", 1)):
        compute, seen = getattr(module, name, None), {}
        if compute is None:  # the engine of another version signs with the others
            continue

        def lookup(*args: Any, _compute: Any = compute, _seen: Any = seen, _at: int = at,
                   **kwargs: Any) -> Any:
            found = _seen.get(id(args[_at]))
            if found is None:
                found = _seen[id(args[_at])] = _compute(*args, **kwargs)
            return found

        setattr(module, name, lookup)


def _instructions(tree: str, workload: str, calls: int, mode: str) -> int:
    # PYTHONPATH names the tree, so that bench_engine's put_checkout_on_path puts this
    # script's checkout after it: without, the baseline's child measured this checkout
    env = {**os.environ, "PYTHONPATH": tree}
    return callgrind_instructions([__file__, "--child", tree, workload, str(calls), mode], env)


def callgrind_instructions(argv: list[str], env: dict[str, str] | None = None) -> int:
    """Return the instructions ``python argv...`` executes under callgrind (hash seed 0)."""
    env = {**(os.environ if env is None else env), "PYTHONHASHSEED": "0",
           "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                           sys.executable, *argv], capture_output=True, text=True, env=env,
                          check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count in valgrind's output: {done.stderr[-500:]}")
    return int(found.group(1))


def per_call(job: tuple[str, ...]) -> float:
    """Return the instructions per call of one (tree, workload, mode)."""
    tree, workload, mode = job
    high, low = (_instructions(tree, workload, calls, mode) for calls in CALLS)
    return (high - low) / (CALLS[0] - CALLS[1])


def main() -> None:
    """Count every configuration (two valgrind processes at a time) and print one JSON line each."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--workloads", default="no_loop,text,cycle8")
    parser.add_argument("--baseline", metavar="DIR")
    parser.add_argument("--child", nargs=4)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]), args.child[3])
        return
    print_counts(args.baseline, [{"workload": workload, "mode": mode} for mode in ("full", "detect")
                                 for workload in args.workloads.split(",")], per_call)


def print_counts(baseline: str | None, keys: list[dict[str, str]],
                 per_call: Callable[[tuple[str, ...]], float]) -> None:
    """Print one JSON line per key: ``per_call((tree, *key values))`` of this tree (``after``)
    and of ``baseline`` (``before``) when given, and their ratio; two valgrind processes at a
    time."""
    trees = {"after": os.path.dirname(_HERE)}
    if baseline:
        trees["before"] = os.path.abspath(baseline)
    jobs = [(tree, *key.values()) for key in keys for tree in trees.values()]
    with ThreadPoolExecutor(2) as pool:
        counts = dict(zip(jobs, pool.map(per_call, jobs), strict=True))
    for key in keys:
        row: dict[str, Any] = dict(key)
        for name, tree in trees.items():
            row[name] = round(counts[(tree, *key.values())])
        if "before" in row:
            row["after/before"] = round(row["after"] / row["before"], 3)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
