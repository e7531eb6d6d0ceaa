"""Engine cost per tool call, and otel-loopguard against loopguard-runtime side by side.

Usage (from the repository root)::

    python benchmarks/bench_engine.py [--repeat N] [--json FILE]

in a venv with the project and ``loopguard-runtime`` (``pip install . --group bench``). Under a
venv without loopguard-runtime the head-to-head part is skipped with a note; the scaling part
still runs.

Part 1, scaling: LoopEngine with every default detector (``LoopGuardConfig()``), over runs of
100, 1,000 and 10,000 calls, for three workloads: ``no_loop`` (every call new), ``cycle8`` (8
distinct calls repeated) and ``cycle100`` (100 distinct calls repeated, with
``cycle_max_length=100``). Each configuration runs in a fresh process; inside it, one warm-up
then ``--repeat`` timed repeats of at least 10,000 calls each (100 runs of 100, 10 of 1,000 or
1 of 10,000). Reported: the median µs per call (``engine.new_run()`` included), and the median
µs per call of the first and the last tenth of each run, which shows whether cost grows as a run
gets longer.

Part 2, head to head: the same calls (tool name, 4-key arguments dict, ~1 KB JSON result
string) through otel-loopguard's engine and through loopguard-runtime's callback handler and bare
``Monitor`` (see ``_loopguard_runtime_adapter.py``), in one process, contenders interleaved
within each repeat (rotating the order), ``--repeat`` repeats; runs of 100 calls (and of 1,000
for context), on the ``no_loop`` calls, on the same with plain-text results (``text``) and on
``cycle8``. The ratio is loopguard-runtime's median over otel-loopguard's median.

Accelerator or not, ``--pure-python-baseline``: the same, with this checkout run with
``LOOPGUARD_PURE_PYTHON=1`` (the C accelerator of the signatures off) as the before.

Before and after, ``--baseline DIR``: part 2 only, for the code of this checkout and for the
code in ``DIR`` (another checkout, ``git worktree add DIR <commit>``), each in its own process
(its ``otel_loopguard`` first on the path), alternating ``--rounds`` times in one session;
reported: the median over the rounds of each version's medians, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
from _checkout import imported_from, put_checkout_on_path  # noqa: E402

put_checkout_on_path(os.path.dirname(_HERE))  # after PYTHONPATH: a snapshot given there wins

from _workload import Call, cycle_run, no_loop_run, text_run, to_tool_calls  # noqa: E402

RUN_LENGTHS = (100, 1_000, 10_000)
WORKLOADS = ("no_loop", "cycle8", "cycle100")
CALLS_PER_REPEAT = 10_000
H2H_LENGTHS = (100, 1_000)
H2H_WORKLOADS = ("no_loop", "text", "cycle8")


def code_version() -> str:
    """Return the commit measured, marked ``+dirty`` when otel_loopguard/ has local changes."""
    root = os.path.dirname(_HERE)
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "otel_loopguard"],
                               check=True, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def make_calls(workload: str, length: int) -> list[Call]:
    """Return the calls of one run of ``workload``."""
    if workload == "no_loop":
        return no_loop_run(length)
    if workload == "text":
        return text_run(length)
    if workload == "cycle8":
        return cycle_run(length, 8)
    if workload == "cycle100":
        return cycle_run(length, 100)
    raise ValueError(workload)


def make_engine(workload: str) -> Any:
    """Return a LoopEngine with the default detectors (cycle100 sets cycle_max_length=100)."""
    from otel_loopguard.config import LoopGuardConfig
    from otel_loopguard.engine import LoopEngine

    config = LoopGuardConfig.create(cycle_max_length=100) if workload == "cycle100" \
        else LoopGuardConfig.create()
    return LoopEngine(config)


# ---------------------------------------------------------------------------------------------
# Part 1: scaling, one configuration per process


def _time_engine_runs(engine: Any, tool_calls: list[Any], runs: int) -> dict[str, Any]:
    """Run ``runs`` runs over ``tool_calls``; return total and per-tenth timings in ns."""
    length = len(tool_calls)
    tenth = max(1, length // 10)
    first = tool_calls[:tenth]
    middle = tool_calls[tenth:length - tenth]
    last = tool_calls[length - tenth:]
    process = engine.process
    first_ns = last_ns = first_cpu = last_cpu = 0
    actions: dict[str, int] = {}
    clock, cpu_clock = time.perf_counter_ns, time.process_time_ns
    cpu_start = cpu_clock()
    start = clock()
    for _ in range(runs):
        run = engine.new_run()
        c0, t0 = cpu_clock(), clock()
        for call in first:
            process(run, call)
        t1, c1 = clock(), cpu_clock()
        for call in middle:
            process(run, call)
        c2, t2 = cpu_clock(), clock()
        for call in last:
            decision = process(run, call)
        t3, c3 = clock(), cpu_clock()
        first_ns += t1 - t0
        last_ns += t3 - t2
        first_cpu += c1 - c0
        last_cpu += c3 - c2
        label = run.highest.label
        actions[label] = actions.get(label, 0) + 1
        del decision
    total_ns = clock() - start
    cpu_ns = time.process_time_ns() - cpu_start
    return {"total_ns": total_ns, "cpu_ns": cpu_ns, "calls": runs * length, "first_ns": first_ns,
            "first_calls": runs * len(first), "last_ns": last_ns, "last_calls": runs * len(last),
            "first_cpu_ns": first_cpu, "last_cpu_ns": last_cpu,
            "run_highest_action": actions}


def _flag_share(engine: Any, tool_calls: list[Any]) -> float:
    run = engine.new_run()
    flagged: int = sum(engine.process(run, call).flagged for call in tool_calls)
    return flagged / len(tool_calls)


JSON_ARGS = True
"""Arguments as the JSON text of the span (the adapters' shape); ``--dict-args`` passes dicts."""


def worker(workload: str, length: int, repeat: int) -> dict[str, Any]:
    """Measure one configuration (called in a fresh process)."""
    engine = make_engine(workload)
    tool_calls = to_tool_calls(make_calls(workload, length), json_args=JSON_ARGS)
    runs = max(1, CALLS_PER_REPEAT // length)
    _time_engine_runs(engine, tool_calls, runs)  # warm-up: caches, allocator, branch history
    samples = [_time_engine_runs(engine, tool_calls, runs) for _ in range(repeat)]
    per_call = [s["total_ns"] / s["calls"] / 1e3 for s in samples]
    cpu_per_call = [s["cpu_ns"] / s["calls"] / 1e3 for s in samples]
    first = [s["first_ns"] / s["first_calls"] / 1e3 for s in samples]
    last = [s["last_ns"] / s["last_calls"] / 1e3 for s in samples]
    first_cpu = [s["first_cpu_ns"] / s["first_calls"] / 1e3 for s in samples]
    last_cpu = [s["last_cpu_ns"] / s["last_calls"] / 1e3 for s in samples]
    return {
        "workload": workload, "run_length": length, "runs_per_repeat": runs, "repeat": repeat,
        "us_per_call": statistics.median(per_call), "us_per_call_all": per_call,
        "cpu_us_per_call": statistics.median(cpu_per_call),
        "us_first_tenth": statistics.median(first), "us_last_tenth": statistics.median(last),
        "cpu_us_first_tenth": statistics.median(first_cpu),
        "cpu_us_last_tenth": statistics.median(last_cpu),
        "flagged_share": _flag_share(engine, tool_calls),
        "run_highest_action": samples[-1]["run_highest_action"],
        "source": imported_from(),
        "arguments": "json text" if JSON_ARGS else "dict",
    }


def run_scaling(repeat: int) -> list[dict[str, Any]]:
    """Run every scaling configuration, each in a fresh process."""
    results = []
    for workload in WORKLOADS:
        for length in RUN_LENGTHS:
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", f"{workload}:{length}",
                   "--repeat", str(repeat), *([] if JSON_ARGS else ["--dict-args"])]
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                filter(None, [os.environ.get("PYTHONPATH"), os.path.dirname(_HERE)]))}
            out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            results.append(result)
            if result["source"] != os.path.join(os.path.dirname(_HERE), "otel_loopguard"):
                print(f"  (otel_loopguard from {result['source']})", file=sys.stderr)
            print(f"  {workload:9} {length:>6} calls/run: {result['us_per_call']:8.1f} µs/call, "
                  f"cpu {result['cpu_us_per_call']:.1f} (first tenth "
                  f"{result['cpu_us_first_tenth']:.1f}, last tenth "
                  f"{result['cpu_us_last_tenth']:.1f} cpu µs)", file=sys.stderr, flush=True)
    return results


# ---------------------------------------------------------------------------------------------
# Part 2: head to head, one process, interleaved


def _engine_contender(workload: str, length: int) -> tuple[str, Callable[[int], int]]:
    engine = make_engine(workload)
    tool_calls = to_tool_calls(make_calls(workload, length), json_args=JSON_ARGS)
    process = engine.process

    def run(runs: int) -> int:
        for _ in range(runs):
            state = engine.new_run()
            for call in tool_calls:
                process(state, call)
        return runs * len(tool_calls)

    return "otel-loopguard", run


def _runtime_contender(adapter_cls: Any, workload: str, length: int
                       ) -> tuple[str, Callable[[int], int]]:
    calls = make_calls(workload, length)
    adapter = adapter_cls()
    triples = [(c.tool, c.arguments, c.result) for c in calls]

    def run(runs: int) -> int:
        for _ in range(runs):
            adapter.new_run()
            process = adapter.process
            for tool, arguments, result in triples:
                process(tool, arguments, result)
        return runs * len(triples)

    return adapter_cls.name, run


def run_head_to_head(repeat: int, lengths: tuple[int, ...]) -> dict[str, Any]:
    """Time otel-loopguard and loopguard-runtime on the same calls, interleaved."""
    try:
        import _loopguard_runtime_adapter as lgr
    except ImportError as exc:
        print(f"  head to head skipped: loopguard-runtime not importable ({exc}); run this "
              "script in a venv where loopguard-runtime is installed", file=sys.stderr)
        return {"skipped": str(exc)}
    out: dict[str, Any] = {"loopguard_runtime_version": lgr.version(), "results": [],
                           "source": imported_from()}
    print(f"  otel_loopguard from {out['source']}", file=sys.stderr, flush=True)
    for workload in H2H_WORKLOADS:
        for length in lengths:
            contenders = [_engine_contender(workload, length),
                          _runtime_contender(lgr.RuntimeCallbackAdapter, workload, length),
                          _runtime_contender(lgr.RuntimeMonitorAdapter, workload, length)]
            runs = max(1, 5_000 // length)
            for _, fn in contenders:
                fn(runs)  # warm-up
            samples: dict[str, list[float]] = {name: [] for name, _ in contenders}
            cpu: dict[str, list[float]] = {name: [] for name, _ in contenders}
            for rep in range(repeat):
                shift = rep % len(contenders)
                for name, fn in contenders[shift:] + contenders[:shift]:
                    cpu_start = time.process_time_ns()
                    start = time.perf_counter_ns()
                    calls = fn(runs)
                    samples[name].append((time.perf_counter_ns() - start) / calls / 1e3)
                    cpu[name].append((time.process_time_ns() - cpu_start) / calls / 1e3)
            medians = {name: statistics.median(v) for name, v in samples.items()}
            cpu_medians = {name: statistics.median(v) for name, v in cpu.items()}
            base = medians["otel-loopguard"]
            row = {"workload": workload, "run_length": length, "runs_per_repeat": runs,
                   "us_per_call": medians, "cpu_us_per_call": cpu_medians, "samples": samples,
                   "ratio_runtime_over_loopguard": {n: m / base for n, m in medians.items()
                                                    if n != "otel-loopguard"},
                   "cpu_ratio_runtime_over_loopguard": {
                       n: m / cpu_medians["otel-loopguard"] for n, m in cpu_medians.items()
                       if n != "otel-loopguard"}}
            out["results"].append(row)
            print(f"  {workload:8} {length:>5} calls/run: " + ", ".join(
                f"{n} {m:.1f} µs" for n, m in medians.items()), file=sys.stderr, flush=True)
    return out


# ---------------------------------------------------------------------------------------------
# Before and after: part 2 for two checkouts, alternating processes


def run_versions(baseline: str | None, repeat: int, lengths: tuple[int, ...],
                 rounds: int) -> dict[str, Any]:
    """Run part 2 for the code at ``baseline`` and this checkout's, alternating processes.

    Without ``baseline``, "before" is this checkout in pure Python (``LOOPGUARD_PURE_PYTHON``
    set: the C accelerator off), "after" this checkout as installed.
    """
    here = os.path.dirname(_HERE)
    versions = {"before": os.path.abspath(baseline) if baseline else here, "after": here}
    pure = {"before": baseline is None, "after": False}
    passes: dict[str, list[dict[str, Any]]] = {name: [] for name in versions}
    for rnd in range(rounds):
        order = list(versions.items())
        for name, path in order if rnd % 2 == 0 else order[::-1]:
            cmd = [sys.executable, os.path.abspath(__file__), "--h2h-worker", "--repeat",
                   str(repeat), "--h2h-lengths", ",".join(map(str, lengths))]
            env = {**os.environ, "PYTHONPATH": path, "LOOPGUARD_PURE_PYTHON": "1"
                   if pure[name] else ""}
            out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
            passes[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"  round {rnd + 1} {name} done", file=sys.stderr, flush=True)
    rows = []
    for index, first in enumerate(passes["after"][0]["results"]):
        row: dict[str, Any] = {"workload": first["workload"], "run_length": first["run_length"]}
        for name in versions:
            for contender in first["cpu_us_per_call"]:
                row.setdefault(contender, {})[name] = statistics.median(
                    p["results"][index]["cpu_us_per_call"][contender] for p in passes[name])
        rows.append(row)
    before_code = _code_at(versions["before"]) + (" pure Python" if pure["before"] else "")
    return {"versions": {**versions, "before_code": before_code},
            "rounds": rounds, "cpu_us_per_call": rows, "passes": passes}


def _code_at(path: str) -> str:
    try:
        return subprocess.run(["git", "-C", path, "rev-parse", "--short", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _print_versions(result: dict[str, Any]) -> None:
    print(f"\nBefore ({result['versions']['before_code']}) and after (this checkout), "
          f"{result['rounds']} alternating rounds; cpu µs per tool call, median of the rounds")
    for row in result["cpu_us_per_call"]:
        ours = row["otel-loopguard"]
        print(f"{row['workload']:8} {row['run_length']:>6,} calls/run: otel-loopguard "
              f"{ours['before']:.1f} -> {ours['after']:.1f} "
              f"({ours['before'] / ours['after']:.2f}x)")
        for name, value in row.items():
            if name not in ("workload", "run_length", "otel-loopguard"):
                print(f"{'':26}{name} {value['after']:.1f}: "
                      f"{value['after'] / ours['after']:.2f}x otel-loopguard after, "
                      f"{value['before'] / ours['before']:.2f}x before")


# ---------------------------------------------------------------------------------------------


def _print_tables(scaling: list[dict[str, Any]], h2h: dict[str, Any]) -> None:
    print("\nEngine per tool call (LoopGuardConfig defaults; cycle100 sets cycle_max_length=100)")
    print("(wall µs/call; cpu µs/call; cpu µs/call over the first and the last tenth of each run)")
    print(f"{'workload':10} {'calls/run':>9} {'wall µs':>8} {'cpu µs':>7} {'first 10%':>10} "
          f"{'last 10%':>9} {'last/first':>10} {'flagged':>8}")
    for r in scaling:
        print(f"{r['workload']:10} {r['run_length']:>9,} {r['us_per_call']:>8.1f} "
              f"{r['cpu_us_per_call']:>7.1f} "
              f"{r['cpu_us_first_tenth']:>10.1f} {r['cpu_us_last_tenth']:>9.1f} "
              f"{r['cpu_us_last_tenth'] / r['cpu_us_first_tenth']:>10.2f} "
              f"{r['flagged_share']:>8.1%}")
    if "results" not in h2h:
        return
    print(f"\nAgainst loopguard-runtime {h2h['loopguard_runtime_version']} (same process, "
          "same calls, interleaved; µs per tool call, median)")
    for row in h2h["results"]:
        med = row["us_per_call"]
        print(f"{row['workload']:8} {row['run_length']:>6,} calls/run, wall: " + "  ".join(
            f"{name} {value:.1f}" for name, value in med.items()))
        print(f"{'':8} {'':>6}            cpu:  " + "  ".join(
            f"{name} {value:.1f}" for name, value in row["cpu_us_per_call"].items()))
        for name, ratio in row["ratio_runtime_over_loopguard"].items():
            cpu_ratio = row["cpu_ratio_runtime_over_loopguard"][name]
            verdict = ("otel-loopguard faster" if min(ratio, cpu_ratio) >= 1 else
                       "otel-loopguard SLOWER" if max(ratio, cpu_ratio) < 1 else
                       "wall and cpu disagree: about even")
            print(f"    {name} / otel-loopguard = {ratio:.2f}x wall, {cpu_ratio:.2f}x cpu "
                  f"({verdict})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="timed repeats (median), >= 5")
    parser.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument("--skip-h2h", action="store_true")
    parser.add_argument("--h2h-lengths", default=",".join(map(str, H2H_LENGTHS)),
                        help="run lengths for the head to head (default 100,1000)")
    parser.add_argument("--dict-args", action="store_true",
                        help="give otel-loopguard arguments as dicts (in-process integrations) "
                             "instead of the span's JSON text")
    parser.add_argument("--baseline", metavar="DIR",
                        help="also run part 2 for the checkout in DIR, alternating (before/after)")
    parser.add_argument("--pure-python-baseline", action="store_true",
                        help="like --baseline, with this checkout in pure Python (the C "
                             "accelerator off) as the before")
    parser.add_argument("--rounds", type=int, default=3,
                        help="with --baseline: alternating rounds per version (default 3)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--h2h-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    global JSON_ARGS  # noqa: PLW0603 - a module switch read by the worker helpers
    JSON_ARGS = not args.dict_args
    if args.worker:
        workload, length = args.worker.split(":")
        print(json.dumps(worker(workload, int(length), args.repeat)))
        return 0
    lengths = tuple(int(x) for x in args.h2h_lengths.split(",") if x)
    if args.h2h_worker:
        print(json.dumps(run_head_to_head(args.repeat, lengths)))
        return 0
    if args.repeat < 5:
        parser.error("--repeat must be >= 5 (medians of fewer repeats are too noisy here)")
    machine: dict[str, Any] = {
        "python": platform.python_version(), "cpus": os.cpu_count(),
        "platform": platform.platform(), "executable": sys.executable,
        "loadavg_at_start": os.getloadavg(), "code": code_version()}
    print(f"python {machine['python']} on {machine['cpus']} cpus; repeat={args.repeat}; "
          f"otel-loopguard {machine['code']}",
          file=sys.stderr)
    scaling = [] if args.skip_scaling else run_scaling(args.repeat)
    if args.baseline or args.pure_python_baseline:
        h2h = run_versions(args.baseline, args.repeat, lengths, args.rounds)
    elif args.skip_h2h:
        h2h = {"skipped": "--skip-h2h"}
    else:
        h2h = run_head_to_head(args.repeat, lengths)
    machine["loadavg_at_end"] = os.getloadavg()
    _print_tables(scaling, h2h)
    if args.baseline or args.pure_python_baseline:
        _print_versions(h2h)
    print(f"\nload average (1 min) at start {machine['loadavg_at_start'][0]:.2f}, at end "
          f"{machine['loadavg_at_end'][0]:.2f}: above ~1 another process shared the 2 cores, "
          "so trust the cpu figures and the interleaved ratios more than wall times")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"machine": machine, "repeat": args.repeat, "scaling": scaling,
                       "head_to_head": h2h}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
