"""What reading one command line costs with the C shell reader and without it, in one process.

Usage (from the repository root, with ``otel_loopguard/kinds/_reader.c`` built)::

    PYTHONPATH=. python benchmarks/bench_shell_reader_native.py [FILE ...] [--rounds 9]
        [--instructions] [--json OUT]

``FILE`` and the command lines are as in ``bench_shell_reader.py`` (the distinct command texts
of the shell-tool calls, cut at ``MAX_COMMAND_CHARS``; without ``FILE``, the labelled commands of
``tests/data/shell_commands.jsonl``). One reader with the built-in table answers both ways:

* ``python``: ``ShellReader._analyze``, the Python definition (what ``LOOPGUARD_PURE_PYTHON=1``
  or a missing module runs);
* ``native``: ``ShellReader.analyze``, the C reader with the Python one for what it leaves.

CPU: after a warm-up pass of each, round after round one pass of each in alternating order;
reported: the median CPU µs per command line of each, and native/python, and the share of the
lines the C reader leaves to Python. ``--instructions``: each way in a child process under
``valgrind --tool=callgrind``, once with one pass and once with three; the difference over two
passes is the instructions per pass (start-up and imports excluded).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
sys.path.insert(0, _HERE)
from bench_engine_instructions import callgrind_instructions  # noqa: E402
from bench_shell_reader import command_texts, per_text, report  # noqa: E402

MODES = ("python", "native")


def _analyzers() -> dict[str, Callable[[str], Any]]:
    """Return the Python and the C way of the same reader (the built-in table)."""
    from otel_loopguard.kinds import CallKindClassifier

    reader = CallKindClassifier()._reader
    if reader._native is None:
        raise SystemExit("the C reader is not built here (or LOOPGUARD_PURE_PYTHON is set)")
    return {"python": lambda text: reader._analyze(text, 0), "native": reader.analyze}


def _cpu_us_per_text(analyze: Callable[[str], Any], texts: list[str]) -> float:
    start = time.process_time_ns()
    for text in texts:
        analyze(text)
    return (time.process_time_ns() - start) / len(texts) / 1e3


def compare_cpu(texts: list[str], rounds: int) -> dict[str, float]:
    """Return the median CPU µs per command line of each way."""
    analyzers = _analyzers()
    for analyze in analyzers.values():
        _cpu_us_per_text(analyze, texts)  # warm-up
    samples: dict[str, list[float]] = {name: [] for name in MODES}
    for index in range(rounds):
        for name in MODES if index % 2 == 0 else MODES[::-1]:
            samples[name].append(_cpu_us_per_text(analyzers[name], texts))
    return {name: statistics.median(values) for name, values in samples.items()}


def left_to_python(texts: list[str]) -> int:
    """Return how many of ``texts`` the C reader leaves to Python, checking the others' outcome."""
    from otel_loopguard.kinds import CallKindClassifier
    from otel_loopguard.kinds._shell import native_reads

    reader = CallKindClassifier()._reader
    left = 0
    for text in texts:
        found = reader._native(text, 0) if native_reads(text) else None
        if found is None:
            left += 1
        elif found != reader._analyze(text, 0):
            raise SystemExit(f"the C reader differs from Python on {text[:200]!r}")
    return left


def _child(mode: str, texts_path: str, passes: int) -> None:
    with open(texts_path, encoding="utf-8") as handle:
        texts = json.load(handle)
    analyze = _analyzers()[mode]
    for _ in range(passes):
        for text in texts:
            analyze(text)


def instructions_per_text(mode: str, texts: list[str]) -> float:
    """Return the instructions one analyze costs in ``mode``, averaged over ``texts``."""
    return per_text(texts, lambda path, passes: callgrind_instructions(
        [__file__, "--child", mode, path, str(passes)]))


def main(argv: list[str] | None = None) -> int:
    """Measure both ways and print the figures."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("files", nargs="*", metavar="FILE")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sys.path.insert(0, _ROOT)
    if args.child:
        _child(args.child[0], args.child[1], int(args.child[2]))
        return 0
    texts = command_texts(args.files)
    left = left_to_python(texts)
    out: dict[str, Any] = {
        "texts": len(texts), "median_chars": statistics.median(map(len, texts)),
        "texts_with_heredoc": sum("<<" in text for text in texts),
        "left_to_python": left, "rounds": args.rounds,
        "cpu_us_per_text": compare_cpu(texts, args.rounds)}
    print(f"{len(texts):,} command lines, median {out['median_chars']:.0f} characters; the C "
          f"reader leaves {left} ({left / len(texts):.1%}) to Python")
    report(out, ("python", "native"), lambda mode: instructions_per_text(mode, texts)
           if args.instructions else None, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
