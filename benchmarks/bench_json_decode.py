"""What the C decoder of OTLP/JSON spans buys ``check``: its trace reader with it and without.

Usage (from the repository root)::

    python benchmarks/bench_json_decode.py FILE [FILE ...]
        [--rounds 7] [--json OUT]

``FILE`` is OTLP/JSON lines (one ``ExportTraceServiceRequest`` per line), such as the two inputs
``bench_check_parse.py --keep DIR`` writes. Timed in this process, CPU medians of interleaved
rounds (the order reverses every round): ``json`` (``json.loads`` of every line, the yardstick
of the ``check`` targets), ``c`` (``replay.tracefile.iter_spans``, check's reader: each line
parsed, each span made a record, the records by ``_wire.json_spans``) and ``python`` (the same
with the C decoder off: every record by ``otlp._json._span``). Also reported: how many spans the
C decoder left to ``_span`` (what it does not read, none in exporters' files).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections.abc import Callable
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
from _checkout import put_checkout_on_path  # noqa: E402

put_checkout_on_path(os.path.dirname(_HERE))

import orjson  # noqa: E402
from bench_check_floor import files_arguments, interleaved, write_figures  # noqa: E402

import otel_loopguard.otlp._json as json_module  # noqa: E402
from otel_loopguard.replay.tracefile import iter_spans  # noqa: E402
from otel_loopguard.types import SpanRecord  # noqa: E402


def holes_in(path: str) -> tuple[int, int]:
    """Return (spans, spans the C decoder leaves to Python) of the camelCase file ``path``."""
    native = json_module._JSON_SPANS
    if native is None:
        raise SystemExit("the C decoder is not built (or LOOPGUARD_PURE_PYTHON is set)")
    spans = holes = 0
    with open(path, "rb") as handle:
        for line in handle:
            for resource_spans in orjson.loads(line).get("resourceSpans", ()):
                for scope_spans in resource_spans.get("scopeSpans", ()):
                    records, left = native(scope_spans.get("spans", []), {}, "", SpanRecord)
                    spans += len(records)
                    holes += left
    return spans, holes


def contenders(path: str) -> dict[str, Callable[[], int]]:
    native = json_module._JSON_SPANS

    def parse() -> int:
        with open(path, "rb") as handle:
            return sum(1 for line in handle if json.loads(line) is not None)

    def read(decoder: Any) -> Callable[[], int]:
        def run() -> int:
            json_module._JSON_SPANS = decoder
            try:
                return sum(1 for _ in iter_spans(path))
            finally:
                json_module._JSON_SPANS = native
        return run

    return {"json": parse, "c": read(native), "python": read(None)}


def measure(path: str, rounds: int) -> dict[str, Any]:
    cpu, _ = interleaved(contenders(path), rounds)
    median = {name: statistics.median(values) for name, values in cpu.items()}
    spans, holes = holes_in(path)
    return {"bytes": os.path.getsize(path), "spans": spans, "left_to_python": holes,
            "median_cpu_s": median,
            "over_json": {name: value / median["json"] for name, value in median.items()},
            "c_over_python": statistics.median(
                c / p for c, p in zip(cpu["c"], cpu["python"], strict=True))}


def main(argv: list[str] | None = None) -> int:
    args = files_arguments(__doc__, 7, argv)
    results = {os.path.basename(path): measure(path, args.rounds) for path in args.files}
    print(f"check's reader with the C decoder of OTLP/JSON spans and without it "
          f"(CPU medians of {args.rounds} interleaved rounds):")
    for name, info in results.items():
        med = info["median_cpu_s"]
        print(f"  {name}: {info['bytes'] / 1e6:.1f} MB, {info['spans']:,} spans "
              f"({info['left_to_python']:,} left to Python): json.loads {med['json']:.3f} s, "
              f"reader {med['c']:.3f} s with C ({info['over_json']['c']:.2f}x), "
              f"{med['python']:.3f} s without ({info['over_json']['python']:.2f}x); "
              f"C/Python {info['c_over_python']:.3f}")
    write_figures(args.json, args.rounds, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
