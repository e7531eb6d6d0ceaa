"""Engine cost per call of per-call kinds: two source trees side by side, interleaved, medians.

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/bench_kinds.py --before /path/to/older/tree [--rounds 30]

``--before`` is the root of another checkout (for instance ``git archive <commit> | tar -x -C
/tmp/before``); the current tree is ``after``. Both packages are imported into this one process
(the older one first, then ``sys.modules`` is cleared and the newer one imported), so each
workload's runs alternate between the two engines: round after round, one run of ``--calls``
calls through ``LoopEngine.process`` per engine, in alternating order, after a warm-up run.
Arguments are JSON text, as the adapters hand them over. Reported: per workload and tree, the
median CPU µs per call over the rounds, and after/before. CPU time (``process_time``) rather
than wall time, and tight alternation, keep a shared machine's noise out of the ratio.

Workloads:

* ``no_loop``: the eight non-shell tools of ``_workload.no_loop_run`` (every call new): the path
  that must not get slower;
* ``cycle8``: those tools in a cycle of 8 calls (``_workload.cycle_run``): a loop's path;
* ``shell_new``: ``bash`` calls of those command lines, each made unique by a trailing comment
  (``# 17``): every command text is new, as in a healthy session;
* ``shell_varied``: ``bash`` calls cycling through the 353 real command lines of
  ``tests/data/shell_commands.jsonl`` (each command text seen again only every 353 calls);
* ``shell_repeat``: ``bash`` calls of 8 command lines in turn (the command cache hits);
* ``editor``: ``str_replace_editor`` calls alternating view and str_replace on 50 files.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import time
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
sys.path.insert(0, _HERE)

WORKLOADS = ("no_loop", "cycle8", "shell_new", "shell_varied", "shell_repeat", "editor")
_CORPUS = os.path.join(_ROOT, "tests", "data", "shell_commands.jsonl")


def _commands() -> list[str]:
    with open(_CORPUS, encoding="utf-8") as handle:
        return [json.loads(line)["command"] for line in handle]


def make_calls(package: Any, workload: str, count: int) -> list[Any]:
    """Return ``count`` ToolCalls of ``workload``, of ``package``'s ToolCall class."""
    from _workload import cycle_run, no_loop_run

    tool_call = package.ToolCall
    if workload in ("no_loop", "cycle8"):
        run = no_loop_run(count) if workload == "no_loop" else cycle_run(count, 8)
        return [tool_call(tool=c.tool, arguments=json.dumps(c.arguments), result=c.result,
                          has_result=True, span_id=f"{i:016x}", turn=i)
                for i, c in enumerate(run)]
    if workload == "editor":
        return [tool_call(tool="str_replace_editor", arguments=json.dumps(
            {"command": "view" if i % 2 else "str_replace", "path": f"/repo/m{i % 50}.py",
             "old_str": f"x = {i}", "new_str": f"x = {i + 1}"}), result=f"edited {i}",
            has_result=True, span_id=f"{i:016x}", turn=i) for i in range(count)]
    commands = _commands()
    if workload == "shell_repeat":
        commands = commands[:8]
    texts = [commands[i % len(commands)] + (f"\n# {i}" if workload == "shell_new" else "")
             for i in range(count)]
    return [tool_call(tool="bash", arguments=json.dumps({"command": text}),
                      result=f"output {i}\n" * 8, has_result=True, span_id=f"{i:016x}", turn=i)
            for i, text in enumerate(texts)]


def load(tree: str) -> Any:
    """Import ``otel_loopguard`` from ``tree`` (dropping any copy imported before)."""
    for name in [n for n in sys.modules if n == "otel_loopguard" or
                 n.startswith("otel_loopguard.")]:
        del sys.modules[name]
    sys.path.insert(0, tree)
    try:
        package = importlib.import_module("otel_loopguard")
    finally:
        sys.path.remove(tree)
    source = os.path.dirname(os.path.dirname(package.__file__ or ""))
    if os.path.realpath(source) != os.path.realpath(tree):
        raise SystemExit(f"imported otel_loopguard from {source}, not {tree}")
    for name in ("LoopEngine", "ToolCall"):  # the package imports these on first use: now,
        getattr(package, name)  # from this tree, not from whichever tree is loaded last
    return package


def _cpu_us_per_call(engine: Any, calls: list[Any]) -> float:
    run = engine.new_run()
    start = time.process_time_ns()
    for call in calls:
        engine.process(run, call)
    return (time.process_time_ns() - start) / len(calls) / 1e3


def compare(packages: dict[str, Any], workload: str, count: int,
            rounds: int) -> dict[str, float]:
    """Return the median CPU µs per call of each package's engine on ``workload``."""
    engines = {name: (p.LoopEngine(), make_calls(p, workload, count))
               for name, p in packages.items()}
    for engine, calls in engines.values():
        _cpu_us_per_call(engine, calls)  # warm-up: caches, allocator
    samples: dict[str, list[float]] = {name: [] for name in packages}
    names = list(packages)
    for index in range(rounds):
        for name in names if index % 2 == 0 else names[::-1]:
            samples[name].append(_cpu_us_per_call(*engines[name]))
    return {name: statistics.median(values) for name, values in samples.items()}


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--before", required=True, help="root of the older source tree")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help=f"comma-separated, of {', '.join(WORKLOADS)} (default: all)")
    args = parser.parse_args(argv)
    workloads = [w for w in args.workloads.split(",") if w]
    unknown = sorted(set(workloads) - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown workload {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    packages = {"before": load(os.path.abspath(args.before)), "after": load(_ROOT)}
    print(f"{'workload':14} {'before µs':>10} {'after µs':>10} {'after/before':>13}")
    for workload in workloads:
        medians = compare(packages, workload, args.calls, args.rounds)
        print(f"{workload:14} {medians['before']:10.2f} {medians['after']:10.2f} "
              f"{medians['after'] / medians['before']:13.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
