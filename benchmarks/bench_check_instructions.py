"""Instructions of ``check`` and its intake per span, as multiples of ``json.loads``, by valgrind.

Run (from the repository root)::

    PYTHONPATH=. python benchmarks/bench_check_instructions.py [--baseline DIR]
        [--scripted-mb 1.5] [--coding-runs 15] [--json FILE]

``bench_check_parse.py --phases`` times the same phases in CPU seconds, which move by 30 % on a
shared machine; instruction counts do not. The inputs are small slices of that benchmark's
two: ``--scripted-mb`` of its framework-shaped traces and the first ``--coding-runs`` runs of the
coding-agent corpus, written once and read by every tree. Phases, each run on the whole file:

* ``parse``: ``json.loads`` of every line (the yardstick);
* ``decode``: ``iter_spans`` (reading, parsing, span records);
* ``intake``: ``Checker.run`` over ``iter_spans`` with an engine that detects nothing
  (``profile_serve._NoEngine``): decoding, grouping, assembly, adapters;
* ``check``: ``Checker.run`` over ``iter_spans`` with the real engine (``check`` without its
  start-up and report).

Each (tree, input, phase) runs under ``valgrind --tool=callgrind`` twice, doing the phase three
times and once after a warm-up run (``PYTHONHASHSEED=0``); the difference over twice the spans
is the cost per span, start-up excluded. ``--baseline DIR`` (another checkout) counts its code
too. About five minutes per tree on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)

from bench_engine_instructions import callgrind_instructions  # noqa: E402

REPEATS = (3, 1)
"""The two repeat counts of a phase; their difference is the cost of two passes."""
PHASES = ("parse", "decode", "intake", "check")


def child(tree: str, phase: str, path: str, repeats: int) -> None:
    """Run ``tree``'s ``phase`` over ``path`` ``repeats`` times, after a warm-up."""
    sys.path[:0] = [os.path.join(tree, "benchmarks"), tree]
    work = _phase(phase, path)
    for _ in range(1 + repeats):
        work()


def _phase(phase: str, path: str) -> Callable[[], None]:
    from otel_loopguard.replay.tracefile import iter_spans

    if phase == "parse":
        def parse() -> None:
            with open(path, "rb") as handle:
                for line in handle:
                    json.loads(line)
        return parse
    if phase == "decode":
        def decode() -> None:
            for _ in iter_spans(path):
                pass
        return decode
    from profile_serve import _NoEngine

    from otel_loopguard.replay.checker import Checker

    def intake() -> None:
        checker = Checker()
        if phase == "intake":
            checker.engine = _NoEngine(checker.config)
        for _ in checker.run(iter_spans(path)):
            pass
    return intake


def per_span(job: tuple[str, str, str, int]) -> float:
    """Return the instructions per span of one (tree, phase, input, spans in it)."""
    tree, phase, path, spans = job
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the tree's own code
    high, low = (callgrind_instructions([__file__, "--child", tree, phase, path, str(repeats)],
                                        env) for repeats in REPEATS)
    return (high - low) / ((REPEATS[0] - REPEATS[1]) * spans)


def write_inputs(workdir: str, scripted_mb: float, coding_runs: int) -> dict[str, Any]:
    """Write the two inputs into ``workdir``; return name -> (path, spans)."""
    from bench_check import generate
    from bench_check_parse import write_coding_corpus

    sys.path.append(os.path.dirname(_HERE))  # tests.corpus, for the coding corpus
    paths = {"scripted": os.path.join(workdir, "scripted.jsonl"),
             "coding": os.path.join(workdir, "coding.jsonl")}
    described = {"scripted": generate(paths["scripted"], scripted_mb),
                 "coding": write_coding_corpus(paths["coding"], coding_runs)}
    return {name: (paths[name], described[name]["spans"], described[name]["bytes"])
            for name in paths}


def main() -> None:
    """Count every (tree, input, phase), two valgrind processes at a time; print the table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", metavar="DIR")
    parser.add_argument("--scripted-mb", type=float, default=1.5)
    parser.add_argument("--coding-runs", type=int, default=15)
    parser.add_argument("--json", metavar="FILE", help="also write the figures to FILE")
    parser.add_argument("--child", nargs=4)
    args = parser.parse_args()
    if args.child:
        tree, phase, path, repeats = args.child
        child(tree, phase, path, int(repeats))
        return
    trees = {"after": os.path.dirname(_HERE)}
    if args.baseline:
        trees["before"] = os.path.abspath(args.baseline)
    workdir = tempfile.mkdtemp(prefix="loopguard-instr-")
    try:
        inputs = write_inputs(workdir, args.scripted_mb, args.coding_runs)
        jobs = [(name, tree_name, phase) for name in inputs for tree_name in trees
                for phase in PHASES if phase != "parse" or tree_name == "after"]
        with ThreadPoolExecutor(2) as pool:
            counts = list(pool.map(lambda job: per_span(
                (trees[job[1]], job[2], inputs[job[0]][0], inputs[job[0]][1])), jobs))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    found = {job: count for job, count in zip(jobs, counts, strict=True)}
    rows: dict[str, Any] = {}
    for name, (_, spans, size) in inputs.items():
        parse = found[(name, "after", "parse")]
        row: dict[str, Any] = {"spans": spans, "bytes": size,
                               "parse_per_span": round(parse)}
        for tree_name in trees:
            for phase in PHASES[1:]:
                count = found[(name, tree_name, phase)]
                row[f"{tree_name}_{phase}_per_span"] = round(count)
                row[f"{tree_name}_{phase}_over_parse"] = round(count / parse, 3)
        rows[name] = row
        print(f"{name}: " + ", ".join(f"{key} {value}" for key, value in row.items()),
              flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"baseline": args.baseline, "inputs": rows}, out, indent=1)
            out.write("\n")


if __name__ == "__main__":
    main()
