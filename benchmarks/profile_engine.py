"""Where the engine spends its time per tool call: cProfile over realistic 100-call runs.

Usage (from the repository root)::

    python benchmarks/profile_engine.py [--workload no_loop]
        [--runs 100] [--top 15]

Prints, for the otel_loopguard functions, the share of the engine's total time spent inside
each (cumulative, callees included) and the top functions by own time. Shares are of
``LoopEngine.process`` under the profiler, which inflates small Python functions; use them to
rank hotspots, and ``bench_engine.py`` for absolute costs.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
sys.path.insert(0, os.path.dirname(_HERE))

from _workload import to_tool_calls  # noqa: E402
from bench_engine import make_calls, make_engine  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="no_loop", choices=("no_loop", "text",
                                                                    "cycle8", "cycle100"))
    parser.add_argument("--length", type=int, default=100, help="calls per run")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)

    engine = make_engine(args.workload)
    calls = to_tool_calls(make_calls(args.workload, args.length))

    def go() -> None:
        for _ in range(args.runs):
            run = engine.new_run()
            for call in calls:
                engine.process(run, call)

    go()  # warm-up
    profiler = cProfile.Profile()
    profiler.runcall(go)
    stats = pstats.Stats(profiler)
    raw = stats.stats  # type: ignore[attr-defined]  # {(file, line, func): (cc, nc, tt, ct, callers)}
    total = next(ct for (file, _, func), (_, _, _, ct, _) in raw.items()
                 if func == "process" and file.endswith(os.path.join("otel_loopguard",
                                                                      "engine.py")))
    calls_total = args.runs * args.length

    def label(key: tuple[str, int, str]) -> str:
        file, line, func = key
        if "otel_loopguard" in file:
            file = "otel_loopguard" + file.split("otel_loopguard", 1)[1]
        elif file == "~":
            return func
        else:
            file = os.path.basename(file)
        return f"{file}:{line}({func})"

    ours = {k: v for k, v in raw.items() if "otel_loopguard" in k[0]}
    print(f"engine.process total under cProfile: {total:.3f} s for {calls_total:,} calls "
          f"({total / calls_total * 1e6:.0f} µs/call with profiler overhead)\n")
    print("otel_loopguard functions by cumulative time (callees included), share of process():")
    by_cum = sorted(ours.items(), key=lambda kv: kv[1][3], reverse=True)
    for key, (_, ncalls, _, cum, _) in by_cum[:args.top]:
        print(f"  {cum / total:6.1%}  {cum / calls_total * 1e6:7.1f} µs/call  {ncalls:>8,}x  "
              f"{label(key)}")
    print("\nall functions by own time (callees excluded), share of process():")
    by_own = sorted(raw.items(), key=lambda kv: kv[1][2], reverse=True)
    for key, (_, ncalls, own, _, _) in by_own[:args.top]:
        print(f"  {own / total:6.1%}  {ncalls:>8,}x  {label(key)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
