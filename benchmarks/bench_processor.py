"""Cost of LoopGuardSpanProcessor per span, and memory with 100,000 open runs.

Run: python benchmarks/bench_processor.py [--spans 20000] [--repeat 5]
    [--kinds plain,tool,end] [--runs 100000] [--io-us 300]
    [--in-process ROUNDS [--exporter null|otlp] [--floor] [--shape agent|web|flat]
     [--open-run]]

``end`` is the agent's view: tool spans whose tools wait on I/O (a sleep of ``--io-us``, 300 us
by default, each; with a longer wait the worker is idle by the time the next span ends, as it is
between the tool calls of a real agent, which come seconds apart), and the
median wall time of ``span.end()`` on the agent's thread, beside the process CPU per tool span
(the worker thread's included). ``loopguard-sync`` is the processor with ``background=False``
(detection inside ``span.end()``, as in enforce mode).

Each configuration runs in a fresh process (warm-up skews in-process comparisons), several
times, interleaved; the medians of the process's CPU time are reported (the batch exporter
thread's time included). The two configurations of a kind run back to back, in an order that
alternates between repeats, and the median of those pairs' differences is reported too: on a
machine whose speed drifts, it is steadier than the difference of the medians. Exporting goes
to a null exporter behind a BatchSpanProcessor.

``--in-process ROUNDS`` measures other spans inside one process instead (``in_process``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

ARGS = json.dumps({"query": "refund policy for damaged items", "limit": 10, "lang": "en",
                   "filters": {"region": "eu"}})
RESULT = json.dumps({"results": [{"id": i, "title": f"Policy section {i}",
                                  "snippet": "Items damaged in transit may be returned " * 2}
                                 for i in range(6)], "total": 6})


_KEPT: list[Any] = []
"""The processor ``batch-imported`` builds, kept alive as an installed one would be."""


def _provider(config: str, adjust: Callable[[Any], None] | None = None, *,
              simple: bool = False, endpoint: str | None = None) -> Any:
    """Return a provider with a null exporter: ``batch`` alone, or ``loopguard`` before it.

    ``endpoint``: export with the OTLP/HTTP exporter to that URL instead of the null exporter.

    ``adjust`` receives the loopguard processor before it is added (profile_processor's stub).
    ``simple`` exports through a ``SimpleSpanProcessor`` instead (bench_instructions: no export
    thread on a timer). ``batch-imported`` is ``batch`` in a process that has built a loopguard
    processor without adding it: what importing the package costs, apart from its hooks.
    """
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    exporter = exporter_to(endpoint)
    provider = TracerProvider()
    batch = SimpleSpanProcessor(exporter) if simple else BatchSpanProcessor(
        exporter, max_queue_size=1 << 20)
    if config == "batch":
        provider.add_span_processor(batch)
    elif config == "batch-imported":
        from prometheus_client import CollectorRegistry

        from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor

        _KEPT.append(LoopGuardSpanProcessor(LoopGuardConfig(), registry=CollectorRegistry()))
        provider.add_span_processor(batch)
    elif config in ("forward", "open-table"):
        provider.add_span_processor(_floor(config, batch))
    else:
        from prometheus_client import CollectorRegistry

        from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor

        processor = LoopGuardSpanProcessor(LoopGuardConfig(), downstream=batch,
                                           registry=CollectorRegistry(),
                                           background=config != "loopguard-sync")
        if adjust is not None:
            adjust(processor)
        provider.add_span_processor(processor)
    return provider


def exporter_to(endpoint: str | None) -> Any:
    """Return an exporter that does nothing, or the OTLP/HTTP exporter to ``endpoint``."""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class Null(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    if endpoint is None:
        return Null()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=endpoint)


def _floor(config: str, downstream: Any) -> Any:
    """Return a wrapper doing part of what loopguard's hooks do to a span, to price that part.

    ``forward``: ``on_end`` hands the span to ``downstream``, nothing else (the price of a
    wrapper). ``open-table``: it also keeps the open spans in a dict by span id, stored at the
    start and removed at the end, as loopguard does to find a tool span's agent.
    """
    from opentelemetry.sdk.trace import SpanProcessor

    class Forward(SpanProcessor):
        def on_end(self, span: Any) -> None:
            downstream.on_end(span)

        def shutdown(self) -> None:
            downstream.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return downstream.force_flush(timeout_millis)  # type: ignore[no-any-return]

    class OpenTable(Forward):
        def __init__(self) -> None:
            self.spans: dict[int, Any] = {}

        def on_start(self, span: Any, parent_context: Any = None) -> None:
            self.spans[span._context[1]] = span

        def on_end(self, span: Any) -> None:
            self.spans.pop(span._context[1], None)
            downstream.on_end(span)

    return Forward() if config == "forward" else OpenTable()


def child(config: str, kind: str, spans: int, *, simple: bool = False) -> None:
    """Emit spans in this process (a warm-up pass, then a timed one); print spans per second."""
    provider = _provider(config, simple=simple)
    tracer = provider.get_tracer("bench")
    if kind == "plain":
        attrs: list[dict[str, Any]] = [{"http.method": "GET", "http.route": "/x"}] * 64
    else:  # a healthy agent: distinct arguments and results (loops are the rare case)
        attrs = [{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": f"tool_{i % 4}",
                  "gen_ai.tool.call.arguments": ARGS.replace("refund", f"refund {i}")}
                 for i in range(64)]
    results = [RESULT.replace('"total": 6', f'"total": {i}') for i in range(64)]
    per_trace = 20
    for _ in range(2):  # warm-up pass, then the timed pass
        started = time.process_time()  # CPU time: far less sensitive to other processes
        for t in range(spans // per_trace):
            with tracer.start_as_current_span("invoke_agent a"):
                for i in range(per_trace):
                    n = (t * per_trace + i) % 64
                    with tracer.start_as_current_span("execute_tool search_kb",
                                                      attributes=attrs[n]) as span:
                        if kind == "tool":
                            span.set_attribute("gen_ai.tool.call.result", results[n])
        elapsed = time.process_time() - started
    provider.shutdown()
    print(json.dumps({"spans_per_s": spans / elapsed, "us_per_span": elapsed / spans * 1e6}))


def tool_calls() -> tuple[list[dict[str, Any]], list[str]]:
    """Return the attributes and results of 64 healthy tool calls (every call different)."""
    attrs: list[dict[str, Any]] = [
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": f"tool_{i % 4}",
         "gen_ai.tool.call.arguments": ARGS.replace("refund", f"refund {i}")} for i in range(64)]
    return attrs, [RESULT.replace('"total": 6', f'"total": {i}') for i in range(64)]


def end_child(config: str, spans: int, io_seconds: float = 0.0003) -> None:
    """Emit tool spans whose tools wait on I/O; print the median ``span.end()`` wall time."""
    provider = _provider(config)
    tracer = provider.get_tracer("bench")
    attrs, results = tool_calls()
    per_trace = 20
    ends: list[int] = []
    cpu = 0.0
    for _ in range(2):  # warm-up pass, then the timed pass
        ends.clear()
        cpu = time.process_time()  # the whole process: the worker thread's CPU included
        for t in range(spans // per_trace):
            with tracer.start_as_current_span("invoke_agent a"):
                for i in range(per_trace):
                    n = (t * per_trace + i) % 64
                    span = tracer.start_span("execute_tool search_kb", attributes=attrs[n])
                    span.set_attribute("gen_ai.tool.call.result", results[n])
                    time.sleep(io_seconds)  # the tool waits on I/O; the worker may run meanwhile
                    started = time.perf_counter_ns()
                    span.end()
                    ends.append(time.perf_counter_ns() - started)
        provider.force_flush()
        cpu = time.process_time() - cpu
    provider.shutdown()
    ends.sort()
    print(json.dumps({"us_per_span": ends[len(ends) // 2] / 1000,
                      "cpu_us_per_span": cpu / spans * 1e6}))


SHAPES: dict[str, tuple[str, int]] = {
    "agent": ("invoke_agent a", 20), "web": ("GET /orders", 4), "flat": ("GET /health", 0)}
"""Traces of the in-process blocks: root name, children per root (``--shape``)."""


def in_process(rounds: int, block: int = 500, *, exporter: str = "null",
               floor: bool = False, shape: str = "agent", open_run: bool = False) -> None:
    """Time other spans in one process: each configuration in turn, ``rounds`` blocks each.

    Fresh processes on a shared machine differ by about 5 % from one another, as much as the
    bound on other spans; blocks that take turns inside one process share its drift, imports
    and heap. Each block makes about ``block`` spans and is timed in process CPU (the export
    threads included: each block ends with a ``force_flush``, so its export is timed with it);
    the configurations run in an order that reverses every round. ``batch-again`` is a second
    ``batch`` provider: the difference the method reads between two identical configurations.

    ``exporter="otlp"`` exports with the OTLP/HTTP (protobuf) exporter to bench_serve.py's sink,
    another process on 127.0.0.1 that answers each request and discards it, so the export thread
    does what an application's does; its encoding counts in this process's CPU, the sink's work
    does not. ``floor`` adds the two wrappers of ``_floor``: what wrapping the downstream, and
    keeping a table of open spans besides, cost before loopguard reads anything.

    ``shape``: ``agent``, traces of 20 spans under an ``invoke_agent`` root (spans of an agent
    framework that are not tool calls); ``web``, a request root with 4 children (an application
    that also runs agents); ``flat``, every span a root of its own trace. ``open_run``: an agent
    run (one tool call) stays open in another trace of each provider while the blocks run, as
    in an application that serves requests while agents run.
    """
    configs: tuple[str, ...] = ("batch", "loopguard", "batch-again")
    if floor:
        configs += ("forward", "open-table")
    sink = _sink() if exporter == "otlp" else None
    endpoint = None if sink is None else f"http://127.0.0.1:{sink[1]}/v1/traces"
    providers = {config: _provider(config.removesuffix("-again"), endpoint=endpoint)
                 for config in configs}
    tracers = {config: provider.get_tracer("bench") for config, provider in providers.items()}
    attrs = {"http.method": "GET", "http.route": "/x"}
    root, per_trace = SHAPES[shape]
    traces = block // max(per_trace, 1)
    agents = [_open_run(provider, tracers[config]) for config, provider in providers.items()
              if open_run]

    def timed(config: str) -> float:
        tracer = tracers[config]
        started = time.process_time()
        for _ in range(traces):
            with tracer.start_as_current_span(root):
                for _ in range(per_trace):
                    with tracer.start_as_current_span("execute_tool search_kb",
                                                      attributes=attrs):
                        pass
        providers[config].force_flush()  # the block's export is its own, not the next one's
        return (time.process_time() - started) / (traces * (per_trace + 1)) * 1e6

    for _ in range(5):  # warm-up
        for config in configs:
            timed(config)
    cpu: dict[str, list[float]] = {config: [] for config in configs}
    for repeat in range(rounds):
        for config in configs if repeat % 2 == 0 else configs[::-1]:
            cpu[config].append(timed(config))
    for agent in agents:
        agent.end()
    for provider in providers.values():
        provider.shutdown()
    if sink is not None:
        sink[0].terminate()
        sink[0].wait()
    _print_in_process(cpu, f"{exporter} exporter, {shape}{', a run open' if open_run else ''}")


def _open_run(provider: Any, tracer: Any) -> Any:
    """Start an agent span, make one tool call under it, and return the agent span, open."""
    from opentelemetry import trace

    agent = tracer.start_span("invoke_agent a", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"})
    with trace.use_span(agent), tracer.start_as_current_span("execute_tool search", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
            "gen_ai.tool.call.arguments": '{"q": 1}', "gen_ai.tool.call.result": "r"}):
        pass
    provider.force_flush()
    return agent


def _sink() -> tuple[subprocess.Popen[str], int]:
    """Start bench_serve's OTLP sink (answers and discards); return it and its HTTP port."""
    sink = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__),
                                                          "bench_serve.py"), "--sink"],
                            stdout=subprocess.PIPE, text=True)
    assert sink.stdout is not None
    return sink, int(sink.stdout.readline().split()[0])


def _print_in_process(cpu: dict[str, list[float]], setup: str) -> None:
    base = cpu["batch"]
    for config, times in cpu.items():
        line = (f"plain/{config:12} in one process ({setup}): "
                f"median {statistics.median(times):6.2f} us")
        if config != "batch":
            pairs = sorted((x / b - 1) * 100 for x, b in zip(cpu[config], base, strict=True))
            quarter = len(pairs) // 4
            line += (f"; against batch, paired median {statistics.median(pairs):+.1f}% "
                     f"(middle half {pairs[quarter]:+.1f}% to {pairs[-quarter - 1]:+.1f}%), "
                     f"totals {(sum(cpu[config]) / sum(base) - 1) * 100:+.1f}%")
        print(line, flush=True)


def memory_child(runs: int, with_loopguard: bool = True) -> None:
    """Open ``runs`` runs (root spans not ended, one tool call each) and print peak RSS."""
    import resource

    from prometheus_client import CollectorRegistry

    from otel_loopguard import LoopGuardConfig, LoopGuardSpanProcessor

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    processor = LoopGuardSpanProcessor(LoopGuardConfig.create(max_runs=runs),
                                       registry=CollectorRegistry())
    if with_loopguard:
        provider.add_span_processor(processor)
    tracer = provider.get_tracer("bench")
    roots = []
    for i in range(runs):
        root = tracer.start_span("invoke_agent a")
        with trace.use_span(root), tracer.start_as_current_span("execute_tool s", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search_kb",
                "gen_ai.tool.call.arguments": f'{{"q": {i}}}',
                "gen_ai.tool.call.result": "ok"}):
            pass
        roots.append(root)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"open_runs": len(processor.store), "peak_rss_mb": peak / 1024,
                      "delta_mb": (peak - before) / 1024, "runs": runs}))


def _spawn(*args: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _print_cpu(cpu: dict[str, list[float]]) -> None:
    for key in sorted(cpu):
        print(f"{key:18} process CPU median {statistics.median(cpu[key]):7.2f} us/tool span")


def _order(repeat: int, kind: str, *, imported: bool) -> list[str]:
    """Return the configurations of one repeat of ``kind``, in the order they run."""
    # back to back, the order swapped every repeat: each pair shares the machine's mood
    order = ["batch", "loopguard"] if repeat % 2 == 0 else ["loopguard", "batch"]
    if kind == "end":
        order.append("loopguard-sync")
    elif imported:
        order.append("batch-imported")
    return order


def main() -> None:
    """Run every configuration in fresh processes and print the medians."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--runs", type=int, default=100_000,
                        help="open runs for the memory measurement (0: skip it)")
    parser.add_argument("--kinds", default="plain,tool", help="plain,tool or one of them")
    parser.add_argument("--child", nargs=2)
    parser.add_argument("--memory-child", type=int)
    parser.add_argument("--without", action="store_true")
    parser.add_argument("--imported", action="store_true",
                        help="also run batch-imported: batch in a process that imports loopguard")
    parser.add_argument("--io-us", type=int, default=300,
                        help="how long each tool of the end kind waits on I/O (microseconds)")
    parser.add_argument("--in-process", type=int, metavar="ROUNDS",
                        help="time other spans in one process, ROUNDS blocks per configuration")
    parser.add_argument("--exporter", choices=("null", "otlp"), default="null",
                        help="--in-process: export to a null exporter (default) or over "
                             "OTLP/HTTP to a local receiver that discards what it gets")
    parser.add_argument("--floor", action="store_true",
                        help="--in-process: also time a wrapper that only forwards, and one that "
                             "keeps a table of open spans besides")
    parser.add_argument("--open-run", action="store_true",
                        help="--in-process: an agent run stays open in another trace")
    parser.add_argument("--shape", choices=tuple(SHAPES), default="agent",
                        help="--in-process: traces of 20 spans under an agent root (default), "
                             "a request root with 4 children, or root spans only")
    args = parser.parse_args()
    if args.in_process:
        in_process(args.in_process, exporter=args.exporter, floor=args.floor, shape=args.shape,
                   open_run=args.open_run)
        return
    if args.child:
        if args.child[1] == "end":
            end_child(args.child[0], args.spans, args.io_us / 1e6)
        else:
            child(args.child[0], args.child[1], args.spans)
        return
    if args.memory_child:
        memory_child(args.memory_child, with_loopguard=not args.without)
        return
    results: dict[str, list[float]] = {}
    kinds = [kind for kind in args.kinds.split(",") if kind]
    cpu: dict[str, list[float]] = {}
    for repeat in range(args.repeat):  # interleave configurations against drift
        for kind in kinds:
            for config in _order(repeat, kind, imported=args.imported):
                got = _spawn("--child", config, kind, "--spans", str(args.spans),
                             "--io-us", str(args.io_us))
                results.setdefault(f"{kind}/{config}", []).append(got["us_per_span"])
                if "cpu_us_per_span" in got:
                    cpu.setdefault(f"{kind}/{config}", []).append(got["cpu_us_per_span"])
    med = {k: statistics.median(v) for k, v in results.items()}
    for key in sorted(med):
        print(f"{key:18} median {med[key]:7.2f} us/span  ({1e6 / med[key]:,.0f} spans/s)  "
              f"runs: {', '.join(f'{x:.2f}' for x in results[key])}")
    _print_cpu(cpu)
    for kind in kinds:
        base, ours = med[f"{kind}/batch"], med[f"{kind}/loopguard"]
        print(f"{kind}: loopguard adds {ours - base:+.2f} us/span ({(ours / base - 1) * 100:+.1f}%)"
              " (difference of the medians)")
        pairs = [(lg / b - 1) * 100 for b, lg in zip(results[f"{kind}/batch"],
                                                      results[f"{kind}/loopguard"], strict=True)]
        diffs = [lg - b for b, lg in zip(results[f"{kind}/batch"],
                                         results[f"{kind}/loopguard"], strict=True)]
        print(f"{kind}: paired runs: median added {statistics.median(diffs):+.2f} us/span, "
              f"{statistics.median(pairs):+.1f}% (pairs from {min(pairs):+.1f}% to "
              f"{max(pairs):+.1f}%)")
    if args.runs <= 0:
        return
    mem = _spawn("--memory-child", str(args.runs))
    without = _spawn("--memory-child", str(args.runs), "--without")
    extra = mem["peak_rss_mb"] - without["peak_rss_mb"]
    print(f"memory: {mem['open_runs']:,} open runs, peak RSS {mem['peak_rss_mb']:.0f} MB vs "
          f"{without['peak_rss_mb']:.0f} MB for the same open spans without loopguard: "
          f"+{extra:.0f} MB, {extra * 1024 * 1024 / args.runs / 1024:.1f} KB per open run")


if __name__ == "__main__":
    main()
