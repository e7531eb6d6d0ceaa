"""The floor of ``check``'s design: what parsing and the engine alone cost, with no intake at all.

Usage (from the repository root)::

    python benchmarks/bench_check_floor.py FILE [FILE ...]
        [--rounds 5] [--json OUT]

``FILE`` is OTLP/JSON lines with OTel GenAI tool spans (``gen_ai.tool.name``,
``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``), such as the two inputs that
``bench_check_parse.py --keep DIR`` writes. Timed in this process, CPU medians of interleaved
rounds, each as a multiple of ``json.loads`` of every line (the yardstick of the ``check``
targets):

* ``json``: ``json.loads`` of every line;
* ``orjson``: ``orjson.loads`` of every line (the parser ``check`` uses);
* ``results``: ``json.loads`` of every line, then of every tool call's result that is a JSON
  document (an object or an array): what reading the input costs when the results, half or more
  of its bytes and each one a JSON text inside a string, are read too, as the engine reads them
  (volatile keys, canonical form);
* ``extract``: ``orjson.loads`` and a dict of each span's attributes, picking out the tool calls;
* ``engine``: ``extract`` and ``LoopEngine.process`` of every tool call, one run per line (trace).

``engine`` is a lower bound for any ``check`` that parses every line and runs today's engine on
every call: it builds no span records, no parent chains, no model turns, no report. Whatever
``check`` costs above it is intake; what it costs above ``extract`` is the engine.
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
from _checkout import put_checkout_on_path  # noqa: E402

put_checkout_on_path(_ROOT)  # after PYTHONPATH: a snapshot given there wins

import orjson  # noqa: E402

from otel_loopguard import LoopEngine, LoopGuardConfig, ToolCall  # noqa: E402


def _tool_calls(document: dict[str, Any]) -> list[ToolCall]:
    """Return the GenAI tool calls of one decoded ``ExportTraceServiceRequest``."""
    calls = []
    for resource_spans in document.get("resourceSpans", ()):
        for scope_spans in resource_spans.get("scopeSpans", ()):
            for span in scope_spans.get("spans", ()):
                attributes = {a["key"]: a["value"] for a in span.get("attributes", ())}
                tool = attributes.get("gen_ai.tool.name")
                if tool is None:
                    continue
                arguments = attributes.get("gen_ai.tool.call.arguments")
                result = attributes.get("gen_ai.tool.call.result")
                calls.append(ToolCall(
                    tool.get("stringValue", ""),
                    arguments.get("stringValue") if arguments else None,
                    result.get("stringValue") if result else None, result is not None,
                    error="error.type" in attributes, span_id=span.get("spanId", ""),
                    trace_id=span.get("traceId", "")))
    return calls


def _parse_results(document: dict[str, Any]) -> int:
    """Parse every tool result in ``document`` that is a JSON text; return how many."""
    documents = 0
    for resource_spans in document.get("resourceSpans", ()):
        for scope_spans in resource_spans.get("scopeSpans", ()):
            for span in scope_spans.get("spans", ()):
                for attribute in span.get("attributes", ()):
                    if attribute["key"] != "gen_ai.tool.call.result":
                        continue
                    result = attribute["value"].get("stringValue")
                    if isinstance(result, str) and result[:1] in ("{", "["):
                        try:
                            json.loads(result)
                        except ValueError:
                            continue
                        documents += 1
    return documents


def contenders(lines: list[bytes]) -> dict[str, Callable[[], int]]:
    """Return the five measured loops over ``lines``; each returns the tool calls it saw
    (``results``: the JSON results it parsed)."""

    def parse_json() -> int:
        for line in lines:
            json.loads(line)
        return 0

    def parse_orjson() -> int:
        for line in lines:
            orjson.loads(line)
        return 0

    def parse_results() -> int:
        return sum(_parse_results(json.loads(line)) for line in lines)

    def extract() -> int:
        return sum(len(_tool_calls(orjson.loads(line))) for line in lines)

    def engine() -> int:
        loop_engine = LoopEngine(LoopGuardConfig())
        seen = 0
        for line in lines:
            run = loop_engine.new_run()
            for call in _tool_calls(orjson.loads(line)):
                loop_engine.process(run, call)
                seen += 1
        return seen

    return {"json": parse_json, "orjson": parse_orjson, "results": parse_results,
            "extract": extract, "engine": engine}


def interleaved(steps: dict[str, Callable[[], int]], rounds: int,
                ) -> tuple[dict[str, list[float]], int]:
    """Run each step once per round, in an order that reverses every round; return the CPU
    seconds of each step's rounds and the largest count a step returned."""
    cpu: dict[str, list[float]] = {name: [] for name in steps}
    count = 0
    for index in range(rounds):
        for name in list(steps) if index % 2 == 0 else list(reversed(steps)):
            start = time.process_time()
            count = max(count, steps[name]())
            cpu[name].append(time.process_time() - start)
    return cpu, count


def write_figures(path: str | None, rounds: int, inputs: dict[str, Any]) -> None:
    """Write ``{"rounds", "inputs"}`` as JSON to ``path`` (nothing when it is None)."""
    if path:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({"rounds": rounds, "inputs": inputs}, handle, indent=2)


def measure(path: str, rounds: int) -> dict[str, Any]:
    """Return CPU medians (seconds) and multiples of ``json`` for one input."""
    with open(path, "rb") as handle:
        lines = [line for line in handle if line.strip()]
    loops = contenders(lines)
    cpu, calls = interleaved(loops, rounds)
    medians = {name: statistics.median(values) for name, values in cpu.items()}
    return {"bytes": sum(map(len, lines)), "lines": len(lines), "tool_calls": calls,
            "median_cpu_s": medians,
            "over_json": {name: value / medians["json"] for name, value in medians.items()},
            "engine_us_per_call": (medians["engine"] - medians["extract"]) / max(calls, 1) * 1e6}


def files_arguments(doc: str, rounds: int, argv: list[str] | None) -> argparse.Namespace:
    """Parse ``FILE [FILE ...] [--rounds N] [--json OUT]`` for a benchmark described by ``doc``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n", maxsplit=1)[0])
    parser.add_argument("files", nargs="+", metavar="FILE")
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = files_arguments(__doc__, 5, argv)
    out = {}
    for path in args.files:
        figures = measure(path, args.rounds)
        out[os.path.basename(path)] = figures
        ratios = ", ".join(f"{name} {value:.2f}x" for name, value in figures["over_json"].items())
        print(f"{os.path.basename(path)}: {figures['bytes'] / 1e6:.1f} MB, "
              f"{figures['tool_calls']:,} tool calls: {ratios} "
              f"(engine {figures['engine_us_per_call']:.1f} µs per call)")
    write_figures(args.json, args.rounds, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
