"""``otel-loopguard check`` against ``json.loads`` of every line, on two inputs, in one session.

Usage (from the repository root)::

    python benchmarks/bench_check_parse.py [--rounds 5]
        [--scripted-mb 73] [--baseline DIR] [--keep DIR] [--json FILE]

Two inputs, OTLP/JSON lines (one ``ExportTraceServiceRequest`` per line):

* **scripted**: the framework-shaped traces of ``bench_check.py`` (an SDK-encoded agent trace as
  the template: ``invoke_agent`` root, ``chat`` and ``execute_tool`` spans, ~1 KB JSON results),
  ``--scripted-mb`` megabytes of them;
* **coding**: the development corpus's ``shell`` and ``function`` families (real coding agents,
  multi-KB results) written by ``tests/corpus/replay.py`` ``write_otlp``, one trace per run.

Each round runs, in fresh processes and in an order that reverses every round: ``parse`` (a
Python process that reads the file and calls ``json.loads`` on every line), ``check`` (``python
-m otel_loopguard check --format json FILE > /dev/null``, start-up included) and, with
``--baseline DIR``, the same ``check`` with ``DIR`` (another checkout) first on ``PYTHONPATH``,
so before and after share the machine's load. Reported: CPU seconds (user + system, from
``getrusage(RUSAGE_CHILDREN)``), medians of the rounds, and each ``check`` as a multiple of the
parse, pair by pair (the median of the round ratios).

The children import compiled bytecode, as an installed package does: ``PYTHONDONTWRITEBYTECODE``
is dropped from their environment and ``PYTHONPYCACHEPREFIX`` points at a cache of this run,
filled by one warm-up run of each contender before the rounds. Without it (``--compile``, or
where ``PYTHONDONTWRITEBYTECODE`` is set and nothing was compiled), every ``check`` also
compiles the ~100 modules it imports, ~0.08 s of CPU here, a third of the coding input's parse.

``--phases`` also times, in this process (CPU medians of interleaved runs), where ``check``'s
time goes: ``parse`` (``json.loads`` of every line), ``decode`` (the trace reader: parse and
``SpanRecord`` s), ``intake`` (decode, grouping and assembly, the engine replaced by one that
detects nothing, as ``profile_serve.py`` does) and ``check`` (the real engine, no report).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
sys.path.insert(0, _HERE)
from _checkout import put_checkout_on_path  # noqa: E402

put_checkout_on_path(_ROOT)  # after PYTHONPATH: a snapshot given there wins

from bench_check import code_version, generate  # noqa: E402

_PARSE = "import json, sys\nfor line in open(sys.argv[1], 'rb'):\n    json.loads(line)\n"
_FAMILIES = ("shell", "function")


def write_coding_corpus(path: str, limit: int | None = None) -> dict[str, Any]:
    """Write the development corpus's shell and function runs as OTLP/JSON lines; return counts.

    ``limit``: the first runs only (a quick run).
    """
    from tests.corpus.replay import iter_runs, write_otlp

    runs = [run for run in iter_runs() if run["family"] in _FAMILIES][:limit]
    traces = write_otlp(runs, Path(path))
    spans = tools = 0
    with open(path, "rb") as handle:
        for line in handle:
            for span in json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"]:
                spans += 1
                tools += span["name"].startswith("execute_tool")
    return {"bytes": os.path.getsize(path), "traces": traces, "spans": spans,
            "tool_calls": tools, "families": list(_FAMILIES)}


def cpu_of(cmd: list[str], pythonpath: str | None, pycache: str | None = None) -> float:
    """Run ``cmd`` to the end with stdout discarded; return its CPU seconds (user + system).

    ``pycache``: the bytecode cache the child reads and writes (``PYTHONPYCACHEPREFIX``);
    None: the environment's own setting.
    """
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pycache
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(os.devnull, "w") as devnull:
        # cwd: ``python -m`` puts it first on sys.path, where it would shadow PYTHONPATH
        proc = subprocess.run(cmd, check=False, stdout=devnull, stderr=subprocess.PIPE,
                              text=True, env=env, cwd=tempfile.gettempdir())
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):  # 1: check found loops
        raise RuntimeError(f"{cmd} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def contenders(python: str, path: str, baseline: str | None) -> dict[str, tuple[list[str],
                                                                                str | None]]:
    """Return name -> (command, PYTHONPATH) of what one round runs on ``path``."""
    check = [python, "-m", "otel_loopguard", "check", "--format", "json", path]
    out: dict[str, tuple[list[str], str | None]] = {
        "parse": ([python, "-c", _PARSE, path], None), "check": (check, _ROOT)}
    if baseline:
        out["baseline"] = (check, os.path.abspath(baseline))
    return out


def measure(python: str, inputs: dict[str, str], rounds: int,
            baseline: str | None, pycache: str | None) -> dict[str, Any]:
    """Run every contender on every input for ``rounds`` rounds; return CPU seconds and ratios.

    With ``pycache``, one uncounted run of each contender first fills that bytecode cache.
    """
    results: dict[str, Any] = {}
    for name, path in inputs.items():
        runs = contenders(python, path, baseline)
        if pycache is not None:
            for cmd, pythonpath in runs.values():
                cpu_of(cmd, pythonpath, pycache)
        cpu: dict[str, list[float]] = {key: [] for key in runs}
        for index in range(rounds):
            order = list(runs) if index % 2 == 0 else list(reversed(runs))
            for key in order:
                cmd, pythonpath = runs[key]
                cpu[key].append(cpu_of(cmd, pythonpath, pycache))
            print(f"  {name} round {index + 1}: " + ", ".join(
                f"{key} {cpu[key][-1]:.2f} s" for key in runs) +
                f" (load {os.getloadavg()[0]:.2f})", file=sys.stderr, flush=True)
        summary: dict[str, Any] = {"cpu_s": cpu, "median_cpu_s": {
            key: statistics.median(values) for key, values in cpu.items()}}
        for key in runs:
            if key != "parse":
                summary[f"{key}_over_parse"] = statistics.median(
                    c / p for c, p in zip(cpu[key], cpu["parse"], strict=True))
        if baseline:
            summary["check_over_baseline"] = statistics.median(
                c / b for c, b in zip(cpu["check"], cpu["baseline"], strict=True))
        results[name] = summary
    return results


def phases(inputs: dict[str, str], rounds: int) -> dict[str, dict[str, float]]:
    """Return CPU medians (seconds) of check's phases on each input, timed in this process."""
    import time

    from profile_serve import _NoEngine

    from otel_loopguard.replay.checker import Checker
    from otel_loopguard.replay.tracefile import iter_spans

    def parse(path: str) -> None:
        with open(path, "rb") as handle:
            for line in handle:
                json.loads(line)

    def decode(path: str) -> None:
        for _ in iter_spans(path):
            pass

    def intake(path: str, engine: bool = False) -> None:
        checker = Checker()
        if not engine:
            checker.engine = _NoEngine(checker.config)
        for _ in checker.run(iter_spans(path)):
            pass

    steps = {"parse": parse, "decode": decode, "intake": intake,
             "check": lambda path: intake(path, engine=True)}
    out: dict[str, dict[str, float]] = {}
    for name, path in inputs.items():
        cpu: dict[str, list[float]] = {step: [] for step in steps}
        for index in range(rounds):
            order = list(steps) if index % 2 == 0 else list(reversed(steps))
            for step in order:
                start = time.process_time()
                steps[step](path)
                cpu[step].append(time.process_time() - start)
        out[name] = {step: statistics.median(values) for step, values in cpu.items()}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scripted-mb", type=float, default=73.0)
    parser.add_argument("--coding-runs", type=int, help="the first N corpus runs only")
    parser.add_argument("--baseline", metavar="DIR",
                        help="another checkout whose check runs in the same rounds (before)")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--keep", metavar="DIR", help="write the inputs here and keep them")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument("--phases", action="store_true",
                        help="also time check's phases in this process")
    parser.add_argument("--compile", action="store_true",
                        help="children compile what they import, as the environment says "
                             "(no bytecode cache of this run)")
    args = parser.parse_args(argv)

    workdir = args.keep or tempfile.mkdtemp(prefix="loopguard-parse-")
    os.makedirs(workdir, exist_ok=True)
    try:
        inputs = {"scripted": os.path.join(workdir, "scripted.jsonl"),
                  "coding": os.path.join(workdir, "coding.jsonl")}
        described = {"scripted": generate(inputs["scripted"], args.scripted_mb),
                     "coding": write_coding_corpus(inputs["coding"], args.coding_runs)}
        for name, info in described.items():
            print(f"{name}: {info['bytes'] / 1e6:.1f} MB, {info['traces']:,} traces, "
                  f"{info['spans']:,} spans, {info['tool_calls']:,} tool calls",
                  file=sys.stderr)
        pycache = None if args.compile else os.path.join(workdir, "pycache")
        results = measure(args.python, inputs, args.rounds, args.baseline, pycache)
        split = phases(inputs, args.rounds) if args.phases else None
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    print(f"\ncheck against json.loads of every line, CPU medians of {args.rounds} rounds "
          f"(code {code_version()}{'; baseline ' + args.baseline if args.baseline else ''}; "
          f"{'compiling on import' if args.compile else 'bytecode cached'}):")
    for name, summary in results.items():
        med = summary["median_cpu_s"]
        line = f"  {name:9s} parse {med['parse']:.2f} s, check {med['check']:.2f} s " \
               f"({summary['check_over_parse']:.2f}x)"
        if args.baseline:
            line += (f", baseline {med['baseline']:.2f} s ({summary['baseline_over_parse']:.2f}x"
                     f"); check/baseline {summary['check_over_baseline']:.3f}")
        print(line)
    if split is not None:
        print("where the time goes, in this process (CPU medians; multiples of parse):")
        for name, costs in split.items():
            print(f"  {name:9s} " + ", ".join(
                f"{step} {cost:.2f} s ({cost / costs['parse']:.2f}x)"
                for step, cost in costs.items()))
    if args.json:
        doc = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                           "code": code_version(), "baseline": args.baseline},
               "rounds": args.rounds, "bytecode_cached": not args.compile,
               "inputs": described, "results": results,
               "phases": split}
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(doc, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
