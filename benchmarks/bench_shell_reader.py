"""What reading one command line costs: ``ShellReader.analyze`` in two source trees, side by side.

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/bench_shell_reader.py --before /path/to/older/tree [FILE ...]
        [--rounds 9] [--instructions] [--json OUT]

``FILE`` is OTLP/JSON lines with OTel GenAI tool spans (``bench_check_parse.py --keep DIR``
writes the coding corpus); the command lines are the distinct command texts of its shell-tool
calls, as ``CallKindClassifier`` reads them (cut at ``MAX_COMMAND_CHARS``). Without ``FILE``:
the 353 labelled commands of ``tests/data/shell_commands.jsonl``. Every text is read once per
pass, uncached (the classifier caches outcomes by text; a real run's distinct commands miss).

* CPU: both packages are imported into this process (``bench_kinds.load``); round after round,
  one pass per tree in alternating order, after a warm-up pass. Reported: the median CPU µs per
  command line of each tree, and after/before.
* ``--instructions``: each tree in a child process under ``valgrind --tool=callgrind``, once
  with one pass and once with three; the difference over two passes is the instructions per
  pass, start-up and imports excluded (a figure the machine's load cannot move).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
sys.path.insert(0, _HERE)
from bench_engine_instructions import callgrind_instructions  # noqa: E402

_CORPUS = os.path.join(_ROOT, "tests", "data", "shell_commands.jsonl")


def command_texts(paths: list[str]) -> list[str]:
    """Return the distinct command texts of the shell-tool calls in ``paths`` (OTLP/JSON lines)."""
    if not paths:
        with open(_CORPUS, encoding="utf-8") as handle:
            return [json.loads(line)["command"] for line in handle]
    import orjson
    from bench_check_floor import _tool_calls

    from otel_loopguard.kinds import MAX_COMMAND_CHARS, CallKindClassifier, _command_text, _parsed

    classifier = CallKindClassifier()
    texts: dict[str, None] = {}
    for path in paths:
        with open(path, "rb") as handle:
            for line in handle:
                if not line.strip():
                    continue
                for call in _tool_calls(orjson.loads(line)):
                    if classifier.mode(call.tool) == "shell":
                        text = _command_text(_parsed(call.arguments))
                        if text is not None:
                            texts[text[:MAX_COMMAND_CHARS]] = None
    return list(texts)


def _reader(tree: str) -> Any:
    """Return a reader with the built-in table, of ``tree``'s package (imported afresh)."""
    from bench_kinds import load

    package = load(tree)
    kinds = importlib.import_module("otel_loopguard.kinds")
    return kinds.CallKindClassifier(package.LoopGuardConfig())._reader


def _cpu_us_per_text(reader: Any, texts: list[str]) -> float:
    analyze = reader.analyze
    start = time.process_time_ns()
    for text in texts:
        analyze(text)
    return (time.process_time_ns() - start) / len(texts) / 1e3


def compare_cpu(trees: dict[str, str], texts: list[str], rounds: int) -> dict[str, float]:
    """Return the median CPU µs per command line of each tree's reader."""
    readers = {name: _reader(tree) for name, tree in trees.items()}
    for reader in readers.values():
        _cpu_us_per_text(reader, texts)  # warm-up
    samples: dict[str, list[float]] = {name: [] for name in readers}
    names = list(readers)
    for index in range(rounds):
        for name in names if index % 2 == 0 else names[::-1]:
            samples[name].append(_cpu_us_per_text(readers[name], texts))
    return {name: statistics.median(values) for name, values in samples.items()}


def _child(tree: str, texts_path: str, passes: int) -> None:
    with open(texts_path, encoding="utf-8") as handle:
        texts = json.load(handle)
    analyze = _reader(tree).analyze
    for _ in range(passes):
        for text in texts:
            analyze(text)


def _instructions(tree: str, texts_path: str, passes: int) -> int:
    return callgrind_instructions([__file__, "--child", tree, texts_path, str(passes)])


def instructions_per_text(tree: str, texts: list[str]) -> float:
    """Return the instructions one ``analyze`` costs in ``tree``, averaged over ``texts``."""
    return per_text(texts, lambda path, passes: _instructions(tree, path, passes))


def per_text(texts: list[str], count: Any) -> float:
    """Return the instructions of one pass over ``texts``, per text: ``count(path, passes)``
    counts a child reading the texts (written as JSON to ``path``) ``passes`` times, once with
    one pass and once with three; the difference over two passes leaves start-up out."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(texts, handle)
    try:
        one, three = (count(handle.name, n) for n in (1, 3))
    finally:
        os.unlink(handle.name)
    return (three - one) / 2 / len(texts)


def main(argv: list[str] | None = None) -> int:
    """Measure both trees and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("files", nargs="*", metavar="FILE")
    parser.add_argument("--before", help="root of the older source tree")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], args.child[1], int(args.child[2]))
        return 0
    if not args.before:
        parser.error("--before is required")
    sys.path.insert(0, _ROOT)
    texts = command_texts(args.files)
    trees = {"before": os.path.abspath(args.before), "after": _ROOT}
    out: dict[str, Any] = {
        "texts": len(texts), "median_chars": statistics.median(map(len, texts)),
        "rounds": args.rounds, "cpu_us_per_text": compare_cpu(trees, texts, args.rounds)}
    print(f"{len(texts):,} command lines, median {out['median_chars']:.0f} characters")
    report(out, ("before", "after"), lambda name: instructions_per_text(trees[name], texts)
           if args.instructions else None, args.json)
    return 0


def report(out: dict[str, Any], names: tuple[str, str], count: Any, path: str | None) -> None:
    """Print ``out``'s CPU per text of the two ``names`` (and their instructions, counted by
    ``count(name)`` unless it gives None), second/first; write ``out`` as JSON to ``path``."""
    first, second = names
    cpu = out["cpu_us_per_text"]
    print(f"CPU µs per analyze: {first} {cpu[first]:.2f}, {second} {cpu[second]:.2f}, "
          f"{second}/{first} {cpu[second] / cpu[first]:.3f}", flush=True)
    counts = {name: count(name) for name in names}
    if None not in counts.values():
        out["instructions_per_text"] = counts
        print(f"instructions per analyze: {first} {counts[first]:,.0f}, "
              f"{second} {counts[second]:,.0f}, {second}/{first} "
              f"{counts[second] / counts[first]:.3f}")
    if path:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(out, handle, indent=2)


if __name__ == "__main__":
    sys.exit(main())
