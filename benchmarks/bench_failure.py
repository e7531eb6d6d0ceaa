"""What reading one failure costs: masking and classifying the errors of real coding-agent runs.

Usage (from the repository root)::

    python benchmarks/bench_failure.py [--baseline DIR] [--rounds 7] [--repeat 5] [--json FILE]

Every failed call of a run has its error read once (``_run_state._failure_of``): numbers, ids,
dates and quoted text masked, then ``classify_error`` (declined, an HTTP status, a permanent or
a retryable phrase). On the development corpus's coding-agent runs (``shell`` and ``function``)
that is one call in seven, at a few tens of µs each, a tenth or more of the engine's time on
those runs.

The texts are those the engine reads: this checkout's engine runs over the corpus's tool calls
(as ``bench_check_floor.py`` extracts them from the OTLP/JSON that ``bench_check_parse.py``
writes) with ``_failure_of`` wrapped to record its argument. Each round then times, in a fresh
process per tree and in an order that reverses every round, ``_failure_of`` of every text
``--repeat`` times (CPU time). With ``--baseline DIR`` (another checkout) its code is timed on
the same texts. Reported: µs per failure, medians of the rounds, and the ratio of the pairs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
sys.path.insert(0, _HERE)
from _checkout import put_checkout_on_path  # noqa: E402

put_checkout_on_path(_ROOT)  # after PYTHONPATH: a snapshot given there wins

_CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from otel_loopguard._run_state import _failure_of
texts = json.load(open(sys.argv[2], encoding="utf-8"))
repeat = int(sys.argv[3])
for text in texts:  # warm: the patterns compiled, the caches filled once
    _failure_of(text)
start = time.process_time()
for _ in range(repeat):
    for text in texts:
        _failure_of(text)
print((time.process_time() - start) / repeat / len(texts) * 1e6)
"""


def failure_texts(limit: int | None = None) -> list[str]:
    """Return the error text of every failure the engine reads on the coding-agent corpus."""
    import orjson
    from bench_check_floor import _tool_calls
    from bench_check_parse import write_coding_corpus

    import otel_loopguard._run_state as run_state
    from otel_loopguard import LoopEngine, LoopGuardConfig

    texts: list[str] = []
    read = run_state._failure_of

    def recorded(text: str) -> tuple[str, str, str]:
        texts.append(text)
        return read(text)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "coding.jsonl")
        write_coding_corpus(path, limit)
        engine = LoopEngine(LoopGuardConfig())
        run_state._failure_of = recorded  # record_failure looks it up per call
        try:
            with open(path, "rb") as handle:
                for line in handle:
                    run = engine.new_run()
                    for call in _tool_calls(orjson.loads(line)):
                        engine.process(run, call)
        finally:
            run_state._failure_of = read
    return texts


def time_tree(tree: str, texts_path: str, repeat: int) -> float:
    """Return µs of CPU per ``_failure_of`` call of ``tree``'s code, in a fresh process."""
    out = subprocess.run([sys.executable, "-c", _CHILD, os.path.abspath(tree), texts_path,
                          str(repeat)], check=True, capture_output=True, text=True,
                         cwd=tempfile.gettempdir())
    return float(out.stdout.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--baseline", help="another checkout, timed on the same texts")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=5, help="passes over the texts per round")
    parser.add_argument("--limit", type=int, help="the first runs of the corpus only")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)

    texts = failure_texts(args.limit)
    if not texts:
        parser.error("the corpus gave no failures to time")
    trees = {"this": _ROOT, **({"baseline": args.baseline} if args.baseline else {})}
    times: dict[str, list[float]] = {name: [] for name in trees}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False,
                                     encoding="utf-8") as handle:
        json.dump(texts, handle)
    try:
        for index in range(args.rounds):
            order = list(trees) if index % 2 == 0 else list(reversed(trees))
            for name in order:
                times[name].append(time_tree(trees[name], handle.name, args.repeat))
            print(f"  round {index + 1}: " + ", ".join(
                f"{name} {times[name][-1]:.2f} µs" for name in trees) +
                f" (load {os.getloadavg()[0]:.2f})", file=sys.stderr, flush=True)
    finally:
        os.unlink(handle.name)
    result: dict[str, Any] = {
        "failures": len(texts), "mean_chars": sum(map(len, texts)) / len(texts),
        "rounds": args.rounds, "repeat": args.repeat, "us_per_failure": times,
        "median_us": {name: statistics.median(values) for name, values in times.items()},
        "python": platform.python_version(), "machine": platform.machine()}
    if args.baseline:
        result["this_over_baseline"] = statistics.median(
            a / b for a, b in zip(times["this"], times["baseline"], strict=True))
    print(f"{len(texts)} failures, {result['mean_chars']:.0f} characters on average: " +
          ", ".join(f"{name} {value:.2f} µs" for name, value in result["median_us"].items()) +
          (f"; this / baseline {result['this_over_baseline']:.2f}" if args.baseline else ""))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(result, out, indent=2)
            out.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
