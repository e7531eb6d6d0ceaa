"""Instructions per span of decoding OTLP protobuf requests: the C decoder and the Python path.

Run (from the repository root)::

    PYTHONPATH=. python benchmarks/bench_wire_instructions.py [--traces 50] [--loops 5]
        [--json FILE]

CPU time on a shared 2-core machine moves by 20 % and more from run to run; the instructions a
process executes do not. Each path runs under ``valgrind --tool=callgrind`` twice on
``bench_serve``'s 512-span requests (``--traces`` agent runs, content captured), decoding them
all ``--loops`` times and 0 times after one warm-up pass; the difference divided by the spans
decoded is the cost per span, start-up and the warm-up excluded. The paths:

* ``wire``: ``_wire.decode_spans`` (the C decoder ``serve`` and ``check`` use when it is built);
* ``python``: ``ExportTraceServiceRequest.FromString``, then ``decode_proto_spans`` (the path
  without it, and the one for requests it leaves to Python).

Needs valgrind and the decoder built (``hatch_build.build_extension``); about a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)


def child(path: str, mode: str, loops: int) -> None:
    """Decode the pickled bodies at ``path`` once, then ``loops`` times more, along ``mode``."""
    sys.path.insert(0, _ROOT)
    from otel_loopguard.types import SpanRecord

    with open(path, "rb") as file:
        bodies: list[bytes] = pickle.load(file)
    if mode == "wire":
        from otel_loopguard.otlp import _wire  # type: ignore[attr-defined]

        def decode(body: bytes) -> object:
            return _wire.decode_spans(body, SpanRecord)
    else:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        from otel_loopguard.otlp._proto import decode_proto_spans

        def decode(body: bytes) -> object:
            return decode_proto_spans(ExportTraceServiceRequest.FromString(body))
    for _ in range(loops + 1):
        for body in bodies:
            decode(body)


def _count(path: str, mode: str, loops: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
             __file__, "--child", path, mode, str(loops)],
            capture_output=True, text=True, check=True, timeout=1800,
            env={**os.environ, "PYTHONHASHSEED": "0"})
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from callgrind: {done.stderr[-300:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=50)
    parser.add_argument("--loops", type=int, default=5)
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return
    sys.path[:0] = [_HERE, _ROOT]
    import bench_serve

    spans = bench_serve.make_traces(args.traces, seed=1)
    bodies = bench_serve.encode_batches(spans)
    with tempfile.NamedTemporaryFile(suffix=".pkl", delete=False) as file:
        pickle.dump(bodies, file)
    try:
        jobs = [(mode, loops) for mode in ("wire", "python") for loops in (args.loops, 0)]
        with ThreadPoolExecutor(max_workers=2) as pool:
            counts = list(pool.map(lambda job: _count(file.name, *job), jobs))
    finally:
        os.unlink(file.name)
    decoded = args.loops * len(spans)
    per_span = {mode: (counts[2 * i] - counts[2 * i + 1]) / decoded
                for i, mode in enumerate(("wire", "python"))}
    print(f"{len(spans)} spans in {len(bodies)} requests, decoded {args.loops} times; "
          "instructions per span (callgrind):")
    for mode, value in per_span.items():
        print(f"  {mode:<7} {value:10,.0f}")
    print(f"  python / wire: {per_span['python'] / per_span['wire']:.2f}x")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"spans": len(spans), "requests": len(bodies), "loops": args.loops,
                       "instructions_per_span": per_span,
                       "ratio_python_over_wire": per_span["python"] / per_span["wire"]},
                      out, indent=2)


if __name__ == "__main__":
    main()
