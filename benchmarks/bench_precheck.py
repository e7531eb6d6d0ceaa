"""Cost of ``LoopEngine.precheck`` (enforce mode), next to the cost of ``process``.

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/bench_precheck.py [--repeat N]

The precheck forks every detector's state and runs the detectors on a hypothetical repeat of the
call. For runs of 100 and 1,000 calls of the ``no_loop`` and ``cycle8`` workloads (see
``_workload.py``), it builds the run, then times a precheck of each of its calls against the
finished run (the run's state is the same before and after), and ``process`` over the run for
comparison. ``full`` is a run whose per-run tables are at their bounds (1,024 distinct reads,
256 failing tools, 1,024 tools in the budget's per-tool count). Reported: the median over
``--repeat`` repeats of the CPU µs per call.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _workload import cycle_run, no_loop_run, to_tool_calls

from otel_loopguard.config import LoopGuardConfig
from otel_loopguard.engine import LoopEngine
from otel_loopguard.types import ToolCall


def _full_run(length: int = 3_000) -> list[Any]:
    calls = []
    for i in range(length):
        kind = i % 3
        if kind == 0:
            calls.append(ToolCall(tool="read_file", arguments={"path": f"f{i}.py"},
                                  result=f"content {i}", has_result=True, turn=i))
        elif kind == 1:
            calls.append(ToolCall(tool=f"fetch_{i % 300}", arguments={"id": i}, error=True,
                                  error_message="HTTP 404 not found", turn=i))
        else:
            calls.append(ToolCall(tool=f"tool_{i % 1100}", arguments={"n": i},
                                  result=f"r{i}", has_result=True, turn=i))
    return calls


def _workloads() -> dict[str, list[Any]]:
    return {"no_loop:100": to_tool_calls(no_loop_run(100)),
            "no_loop:1000": to_tool_calls(no_loop_run(1_000)),
            "cycle8:1000": to_tool_calls(cycle_run(1_000, 8)),
            "full:3000": _full_run()}


def _measure(calls: list[Any], repeat: int) -> tuple[float, float]:
    engine = LoopEngine(LoopGuardConfig.create(max_tool_calls_warn=None))
    process_us, precheck_us = [], []
    probes = [(call.tool, call.arguments) for call in calls[-200:]]
    for _ in range(repeat + 1):  # the first repeat warms up
        run = engine.new_run()
        start = time.process_time_ns()
        for call in calls:
            engine.process(run, call)
        process_us.append((time.process_time_ns() - start) / len(calls) / 1e3)
        start = time.process_time_ns()
        for tool, arguments in probes:
            engine.precheck(run, tool, arguments)
        precheck_us.append((time.process_time_ns() - start) / len(probes) / 1e3)
    return statistics.median(process_us[1:]), statistics.median(precheck_us[1:])


def main() -> None:
    """Print the process and precheck cost per call of each workload."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    for name, calls in _workloads().items():
        process_us, precheck_us = _measure(calls, repeat)
        print(f"{name:14} process {process_us:6.1f} µs/call   precheck {precheck_us:6.1f} "
              "µs/call (cpu, median)", flush=True)


if __name__ == "__main__":
    main()
