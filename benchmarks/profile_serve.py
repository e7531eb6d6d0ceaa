"""Per-span CPU cost of the ``serve`` path outside the engine: decode, intake, assembly.

Usage (from the repository root)::

    python benchmarks/profile_serve.py [--runs 7] [--traces 200]
        [--content full|names] [--profile decode|decode_py|json|json_py|intake] [--top 25]
        [--serve http|grpc [--breakdown]]

Builds the traces of ``bench_serve.py`` (a root ``invoke_agent`` span, 16 turns of one ``chat``
and one ``execute_tool`` span, GenAI attributes, ~1 KB results), encodes them as 512-span
OTLP protobuf requests (and as OTLP/JSON), then times in this process, with CPU time
(``process_time_ns``), the median of ``--runs`` interleaved runs of:

* ``parse``: ``ExportTraceServiceRequest.ParseFromString`` alone;
* ``decode_protobuf``: what the receiver does per request (the C decoder ``_wire.c`` when it is
  built, else parse + ``SpanRecord`` s);
* ``decode_protobuf_py``: the same with the C decoder turned off (protobuf's parse, then
  ``decode_proto_spans``), what ``decode_protobuf`` costs without it;
* ``decode_json``: the same for OTLP/JSON bodies (the C decoder makes the span records);
* ``decode_json_py``: the same with that C decoder turned off (``otlp._json._span`` per span);
* ``intake``: ``StreamingChecker.add`` of every batch, then ``flush`` with the engine replaced by
  a no-op (``process`` returns a clean decision): trace buffering, assembly, the adapters,
  run bookkeeping and the metrics (a fresh Prometheus registry, as ``serve`` has);
* ``engine``: the same with the real engine, for reference (not this benchmark's subject).

Costs are reported in CPU microseconds per span (all spans: 33 per trace) and per tool span
(16 per trace). ``--profile`` runs one phase under cProfile and prints the top functions.

``--serve http|grpc`` measures the whole receiver instead: a real ``serve`` process (pinned to
CPU 0 when ``taskset`` exists) whose engine is replaced by the no-op, fed the same requests by
``bench_serve``'s clients; its CPU time (``/proc``) per span covers the HTTP or gRPC server,
decoding, the queue, intake and metrics (not the benchmark's own polls of ``/metrics``, which
``bench_serve.Serve.scrape_cpu_seconds`` prices and takes out). ``--breakdown`` adds where
that CPU went, by thread and by part (decoding, intake, garbage collection, ...; see
``_serve_breakdown.py``).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
sys.path[:0] = [_HERE, _ROOT]

import bench_serve  # noqa: E402
from prometheus_client import CollectorRegistry  # noqa: E402

import otel_loopguard.otlp._json as json_module  # noqa: E402
import otel_loopguard.otlp._proto as proto_module  # noqa: E402
from otel_loopguard.config import LoopGuardConfig  # noqa: E402
from otel_loopguard.engine import LoopEngine  # noqa: E402
from otel_loopguard.metrics import LoopGuardMetrics  # noqa: E402
from otel_loopguard.otlp._request import decode_json, decode_protobuf  # noqa: E402
from otel_loopguard.receiver._stream import StreamingChecker  # noqa: E402
from otel_loopguard.types import Action, Decision  # noqa: E402

_CLEAN = Decision(Action.CONTINUE)


class _NoEngine(LoopEngine):
    """``LoopEngine`` that detects nothing: every call, handoff and model turn is clean.

    A subclass, so every other part of the engine's interface (``idle``, ``set_template``, run
    states) is the real one and the benchmark follows the engine as it changes.
    """

    def process(self, run: Any, call: Any) -> Decision:
        return _CLEAN

    def process_handoff(self, run: Any, handoff: Any) -> Decision:
        return _CLEAN

    def process_model_turn(self, run: Any, turn: Any) -> Decision:
        return _CLEAN


def _json_bodies(bodies: list[bytes]) -> list[bytes]:
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    out = []
    for body in bodies:
        doc = MessageToDict(ExportTraceServiceRequest.FromString(body))
        # OTLP/JSON carries ids as hex, not base64 (MessageToDict writes base64).
        for rs in doc.get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for span in ss.get("spans", []):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in span:
                            import base64

                            span[key] = base64.b64decode(span[key]).hex()
        out.append(json.dumps(doc).encode())
    return out


def _stream(real_engine: bool) -> StreamingChecker:
    config = LoopGuardConfig()
    metrics = LoopGuardMetrics(CollectorRegistry(),
                               max_prompt_templates=config.max_prompt_templates,
                               max_tools=config.max_tools)
    stream = StreamingChecker(config, metrics=metrics, reorder_window_seconds=1.0,
                              clock=lambda: 0, raise_internal_errors=True)
    if not real_engine:
        stream._checker.engine = _NoEngine(stream._checker.engine.config)
    return stream


_SERVE_LAUNCHER = """
import sys
import _serve_breakdown  # does nothing without PROFILE_SERVE_BREAKDOWN
from otel_loopguard.engine import LoopEngine
from otel_loopguard.types import Action, Decision
clean = Decision(Action.CONTINUE)
LoopEngine.process = lambda self, run, call: clean
LoopEngine.process_handoff = lambda self, run, handoff: clean
LoopEngine.process_model_turn = lambda self, run, turn: clean
from otel_loopguard.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _serve(protocol: str, traces: int, runs: int, breakdown: bool = False) -> None:
    """Print the CPU time per span of a ``serve`` process with a no-op engine.

    With ``breakdown``, also where it went in the median run (``_serve_breakdown``).
    """
    import shutil
    import subprocess
    import threading

    spans = bench_serve.make_traces(traces, seed=1)
    bodies = bench_serve.encode_batches(spans)
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    per_span: list[float] = []
    parts: list[dict[str, float]] = []
    for run in range(runs):
        serve = bench_serve.Serve.__new__(bench_serve.Serve)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPGUARD_")}
        env["PYTHONPATH"] = os.pathsep.join((_HERE, _ROOT))
        out = os.path.join(tempfile.gettempdir(), f"profile_serve_{os.getpid()}_{run}.json")
        if breakdown:
            env["PROFILE_SERVE_BREAKDOWN"] = out
        serve.proc = subprocess.Popen(
            [*pin, sys.executable, "-c", _SERVE_LAUNCHER, "serve", "--grpc-port", "0",
             "--http-port", "0", "--reports", "none", "--reorder-window", "0.2"],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env, cwd=_ROOT)
        assert serve.proc.stderr is not None
        match = bench_serve.BANNER.search(serve.proc.stderr.readline())
        assert match, "serve did not start"
        serve.grpc_port, serve.url = int(match.group(1)), match.group(2)
        serve.scrapes = 0
        try:
            work = list(reversed(bodies))
            lock = threading.Lock()
            target = bench_serve._client_http if protocol == "http" else bench_serve._client_grpc
            address: Any = serve.url if protocol == "http" else serve.grpc_port
            threads = [threading.Thread(target=target, args=(address, work, [],
                                                             {"throttled": 0}, lock))
                       for _ in range(bench_serve.CLIENTS)]
            cpu = serve.cpu_seconds()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            serve.wait_for("loopguard_receiver_spans_total", len(spans))
            serve.wait_until_closed()
            cpu = serve.cpu_seconds() - cpu - serve.scrapes * serve.scrape_cpu_seconds()
            per_span.append(cpu * 1e6 / len(spans))
        finally:
            serve.stop()
        if breakdown:
            with open(out) as file:
                parts.append(json.load(file))
            os.unlink(out)
    tools = traces * bench_serve.TURNS
    median = statistics.median(per_span)
    print(f"serve over {protocol}, no-op engine: {len(spans)} spans ({tools} tool spans) in "
          f"{len(bodies)} requests; median of {runs} runs, serve CPU time")
    print(f"us/span {median:.2f}  us/tool span {median * len(spans) / tools:.2f}  "
          f"runs {[round(x, 2) for x in per_span]}")
    if parts:
        median_run = parts[per_span.index(statistics.median_low(per_span))]
        print("where it went in that run (whole process life, start-up and polls included), "
              "CPU us per tool span:")
        for name, seconds in sorted(median_run.items(), key=lambda item: -item[1]):
            print(f"  {name:<58} {seconds * 1e6 / tools:7.2f}")


def _profile(target: Callable[[], None], top: int) -> None:
    target()
    profiler = cProfile.Profile()
    profiler.runcall(target)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


def _phases(traces: int) -> tuple[dict[str, Callable[[], None]], int, int, int]:
    """Return the timed phases over ``traces`` traces, and the span, tool-span, request counts.

    The phases are parse, decode_protobuf, decode_protobuf_py, decode_json, decode_json_py,
    intake (no-op engine) and engine.
    """
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    spans = bench_serve.make_traces(traces, seed=1)
    bodies = bench_serve.encode_batches(spans)
    json_bodies = _json_bodies(bodies)
    n_spans = len(spans)
    n_tools = traces * bench_serve.TURNS
    decoded = [decode_protobuf(body).spans for body in bodies]
    assert sum(map(len, decoded)) == n_spans

    def parse() -> None:
        for body in bodies:
            ExportTraceServiceRequest().ParseFromString(body)

    def protobuf() -> None:
        for body in bodies:
            decode_protobuf(body)

    def as_json() -> None:
        for body in json_bodies:
            decode_json(body)

    def python_only(run: Callable[[], None], module: Any, name: str) -> Callable[[], None]:
        """``run`` with the C decoder ``module.name`` turned off (None) meanwhile."""
        def go() -> None:
            native = getattr(module, name)
            setattr(module, name, None)
            try:
                run()
            finally:
                setattr(module, name, native)
        return go

    def intake(real_engine: bool) -> Callable[[], None]:
        def go() -> None:
            stream = _stream(real_engine)
            for batch in decoded:
                stream.add(batch, received_ns=0)
            reports = stream.flush()
            assert len(reports) == traces, len(reports)
        return go

    phases: dict[str, Callable[[], None]] = {
        "parse": parse, "decode_protobuf": protobuf,
        "decode_protobuf_py": python_only(protobuf, proto_module, "WIRE"),
        "decode_json": as_json, "decode_json_py": python_only(as_json, json_module, "_JSON_SPANS"),
        "intake": intake(False), "engine": intake(True)}
    return phases, n_spans, n_tools, len(bodies)



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--traces", type=int, default=200)
    parser.add_argument("--content", choices=("full", "names"), default="full")
    parser.add_argument("--profile", choices=("decode", "decode_py", "json", "json_py", "intake",
                                              "engine"))
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--serve", choices=("http", "grpc"),
                        help="measure a whole serve process (no-op engine) instead")
    parser.add_argument("--breakdown", action="store_true",
                        help="with --serve: the serve process's CPU by thread and by part")
    parser.add_argument("--no-engine-ref", action="store_true",
                        help="skip the 'engine' phase (the real engine)")
    args = parser.parse_args(argv)
    bench_serve.CONTENT["capture"] = args.content == "full"
    if args.serve:
        _serve(args.serve, args.traces, args.runs, args.breakdown)
        return 0

    phases, n_spans, n_tools, n_requests = _phases(args.traces)
    if args.profile:
        names = {"decode": "decode_protobuf", "decode_py": "decode_protobuf_py",
                 "json": "decode_json", "json_py": "decode_json_py", "intake": "intake",
                 "engine": "engine"}
        _profile(phases[names[args.profile]], args.top)
        return 0
    if args.no_engine_ref:
        del phases["engine"]

    samples = _time(phases, args.runs)
    print(f"{n_spans} spans ({n_tools} tool spans) in {n_requests} requests; content "
          f"{args.content}; median of {args.runs} runs, CPU time")
    print(f"{'phase':<18} {'us/span':>9} {'us/tool span':>13} {'min us/span':>12}")
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"{name:<18} {median / n_spans:9.2f} {median / n_tools:13.2f} "
              f"{min(values) / n_spans:12.2f}")
    return 0


def _time(phases: dict[str, Callable[[], None]], runs: int) -> dict[str, list[float]]:
    """Return CPU microseconds of each phase over ``runs`` interleaved runs (after a warm-up)."""
    samples: dict[str, list[float]] = {name: [] for name in phases}
    for phase in phases.values():
        phase()
    for _ in range(runs):
        for name, phase in phases.items():
            start = time.process_time_ns()
            phase()
            samples[name].append((time.process_time_ns() - start) / 1000)
    return samples


if __name__ == "__main__":
    raise SystemExit(main())
