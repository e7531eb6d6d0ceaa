"""Throughput, latency and memory of ``otel-loopguard serve``, and what one agent process emits.

Usage (from the repository root)::

    python benchmarks/bench_serve.py [--repeat 3] [--tool-spans N]
        [--memory-runs 100000] [--agent-traces 1500] [--tree DIR] [--baseline DIR]
        [--json FILE]

A benchmark, not a test. Each part runs in fresh processes:

1. **serve throughput**: one ``serve`` process pinned to CPU 0 (``taskset``); the load generator
   on CPU 1 sends pre-encoded requests of 512 spans over OTLP/HTTP protobuf, then over OTLP/gRPC,
   from 4 concurrent clients (a 429 / RESOURCE_EXHAUSTED is retried after 20 ms). Traces look
   like agent runs: a root ``invoke_agent`` span, then 16 turns of one ``chat`` span and one
   ``execute_tool`` span (GenAI attributes, 4-key JSON arguments, ~1 KB JSON result); 90 % of
   runs never repeat a call, 10 % cycle through 4 calls. Throughput is the tool spans checked
   (``loopguard_tool_calls_total``) divided by the time until every span is accepted and every
   trace checked, minus the reorder window (1 s). Latency is per successful export request,
   client side.
2. **memory**: ``serve`` holding 100,000 open runs (traces whose root has not arrived), each
   with two turns (two chat spans, two tool spans); resident memory (VmRSS) before and after.
3. **agent side**: one Python process pinned to CPU 0 creates the same traces with the SDK's
   tracer and exports them through ``BatchSpanProcessor`` and the OTLP/HTTP (or gRPC) exporter to
   a discarding server on CPU 1; tool spans per second until ``force_flush`` returns. The ratio
   serve/agent is how many such agent processes one ``serve`` keeps up with.

On a shared machine a pinned process gets only part of its CPU, so each rate is also reported
per CPU-second the process used (``tool_spans_per_cpu_s``: serve's user + system time from
``/proc``, the agent's ``process_time``), which is what one dedicated core would sustain.
serve's CPU leaves out the benchmark's own polling of ``/metrics`` (to see when every trace is
checked; ~10 ms each, ``polls`` and ``poll_cpu_s``), priced by 20 more requests after the run.

Medians of ``--repeat`` runs are reported. ``--agent-traces 0`` skips the agent side and
``--memory-runs 0`` the memory part. ``--baseline DIR`` runs ``serve`` from another checkout
too, in the same rounds as this one (the order reversing every round), so that both share the
machine's load; reported per protocol are both medians and the median of the per-round ratios
of tool spans per CPU-second (this tree over the baseline).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
sys.path[:0] = [_HERE, _ROOT]

from _workload import Call, cycle_run, no_loop_run  # noqa: E402

BATCH = 512
TURNS = 16
WINDOW = 1.0
CLIENTS = 4
BANNER = re.compile(r"OTLP/gRPC [\d.]+:(\d+), OTLP/HTTP (http://[\d.:]+)/v1/traces")
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
_POOL: list[list[Call]] = []
CONTENT = {"capture": True}
"""False: tool spans carry no arguments or results (content capture off, the GenAI default)."""


def _runs() -> list[list[Call]]:
    if not _POOL:
        _POOL.extend(no_loop_run(TURNS, seed=s) for s in range(36))
        _POOL.extend(cycle_run(TURNS, 4, seed=s) for s in range(4))
    return _POOL


# --- workload ------------------------------------------------------------------------------
def _span_attrs(kind: str, call: Call | None, index: int) -> dict[str, Any]:
    if kind == "chat":
        return {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.usage.input_tokens": 812 + index, "gen_ai.usage.output_tokens": 64}
    assert call is not None
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.tool,
             "gen_ai.tool.call.id": f"call_{index:08x}"}
    if CONTENT["capture"]:
        attrs["gen_ai.tool.call.arguments"] = json.dumps(call.arguments)
        attrs["gen_ai.tool.call.result"] = call.result
    return attrs


def make_traces(n_traces: int, *, seed: int, root: bool = True,
                turns: int = TURNS) -> list[Any]:
    """Return ReadableSpans of ``n_traces`` agent runs, children first, root last."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, TraceFlags

    rng = random.Random(seed)
    resource = Resource.create({"service.name": "agent-fleet"})
    scope = InstrumentationScope("opentelemetry.instrumentation.openai_agents", "0.1")
    flags = TraceFlags(TraceFlags.SAMPLED)
    spans: list[Any] = []
    now = 1_700_000_000_000_000_000
    pool = _runs()
    for _ in range(n_traces):
        trace_id, root_id = rng.getrandbits(128), rng.getrandbits(64)
        root_ctx = SpanContext(trace_id, root_id, False, flags)
        calls = pool[rng.randrange(len(pool))][:turns]
        start = now
        for i, call in enumerate(calls):
            for kind in ("chat", "tool"):
                ctx = SpanContext(trace_id, rng.getrandbits(64), False, flags)
                name = "chat gpt-4o-mini" if kind == "chat" else f"execute_tool {call.tool}"
                spans.append(ReadableSpan(
                    name, ctx, root_ctx, resource, _span_attrs(kind, call, i),
                    start_time=now, end_time=now + 5_000_000, instrumentation_scope=scope))
                now += 10_000_000
        if root:
            spans.append(ReadableSpan(
                "invoke_agent support", root_ctx, None, resource,
                {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support",
                 "gen_ai.prompt.name": f"tpl_{rng.randrange(20)}"},
                start_time=start, end_time=now, instrumentation_scope=scope))
    return spans


def encode_batches(spans: list[Any]) -> list[bytes]:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return [encode_spans(spans[i:i + BATCH]).SerializeToString()
            for i in range(0, len(spans), BATCH)]


# --- processes -----------------------------------------------------------------------------
SERVE_TREE = {"root": _ROOT}
"""The source tree ``serve`` runs from (``--tree``; by default this checkout)."""


class Serve:
    """``otel-loopguard serve`` pinned to CPU 0."""

    def __init__(self, *extra: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPGUARD_")}
        env["PYTHONPATH"] = SERVE_TREE["root"]
        self.proc = subprocess.Popen(
            ["taskset", "-c", "0", sys.executable, "-m", "otel_loopguard", "serve",
             "--grpc-port", "0", "--http-port", "0", "--reports", "none", *extra],
            # cwd is the tree too: ``python -m`` puts it first on sys.path, before PYTHONPATH
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env,
            cwd=SERVE_TREE["root"])
        assert self.proc.stderr is not None
        for _ in range(10):  # warnings (a previous run that was killed) come first
            match = BANNER.search(line := self.proc.stderr.readline())
            if match or not line:
                break
        assert match, "serve did not start"
        self.grpc_port, self.url = int(match.group(1)), match.group(2)
        self.scrapes = 0
        """``/metrics`` requests made so far (``scrape_cpu_seconds`` prices them)."""

    def metric(self, name: str) -> float:
        self.scrapes += 1
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=30) as response:
            text = response.read().decode()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith(name) and not line.startswith("#")
                   and (line[len(name)] in " {"))

    def scrape_cpu_seconds(self, samples: int = 20) -> float:
        """Return serve's CPU time per ``/metrics`` request, the mean of ``samples`` of them.

        The benchmark polls ``/metrics`` to see when every span is checked: ~10 ms of CPU each
        once the registry holds every tool's series (prometheus_client's text encoder), ten
        and more per run, which an exporter's serve scraped every 15 s never pays. The
        throughput takes them out: it is measured once the work is done, on the same series.
        """
        cpu = self.cpu_seconds()
        for _ in range(samples):
            self.metric("loopguard_open_runs")
        self.scrapes -= samples
        return (self.cpu_seconds() - cpu) / samples

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def cpu_seconds(self) -> float:
        """Return user + system CPU time of the serve process (immune to waiting for a CPU)."""
        with open(f"/proc/{self.proc.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def wait_for(self, name: str, value: float, timeout: float = 600) -> float:
        deadline = time.monotonic() + timeout
        while self.metric(name) < value:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name} stuck below {value}")
            time.sleep(0.1)
        return time.monotonic()

    def wait_until_closed(self, timeout: float = 600) -> float:
        """Wait until no run is open (every trace checked); return the time."""
        deadline = time.monotonic() + timeout
        while self.metric("loopguard_open_runs") > 0:
            if time.monotonic() > deadline:
                raise TimeoutError("runs stay open")
            time.sleep(0.05)
        return time.monotonic()

    def threads(self) -> int:
        """Return the threads of the serve process."""
        return len(os.listdir(f"/proc/{self.proc.pid}/task"))

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


def _client_http(url: str, work: list[bytes], latencies: list[float], state: dict[str, int],
                 lock: threading.Lock) -> None:
    import http.client

    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    headers = {"Content-Type": "application/x-protobuf"}
    while True:
        with lock:
            if not work:
                break
            body = work.pop()
        while True:
            t = time.perf_counter()
            conn.request("POST", "/v1/traces", body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            if response.status == 200:
                latencies.append(time.perf_counter() - t)
                break
            if response.will_close:
                conn.close()
            with lock:
                state["throttled"] += 1
            time.sleep(0.02)
    conn.close()


def _client_grpc(port: int, work: list[bytes], latencies: list[float], state: dict[str, int],
                 lock: threading.Lock) -> None:
    import grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(EXPORT)
        while True:
            with lock:
                if not work:
                    break
                body = work.pop()
            while True:
                t = time.perf_counter()
                try:
                    call(body, timeout=60)
                except grpc.RpcError as error:
                    if error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                        raise
                    with lock:
                        state["throttled"] += 1
                    time.sleep(0.02)
                    continue
                latencies.append(time.perf_counter() - t)
                break


def throughput(protocol: str, batches: list[bytes], tool_spans: int,
               total_spans: int) -> dict[str, float]:
    serve = Serve("--reorder-window", str(WINDOW))
    try:
        work = list(reversed(batches))
        latencies: list[float] = []
        state = {"throttled": 0}
        lock = threading.Lock()
        target = _client_http if protocol == "http" else _client_grpc
        address: Any = serve.url if protocol == "http" else serve.grpc_port
        threads = [threading.Thread(target=target, args=(address, work, latencies, state, lock))
                   for _ in range(CLIENTS)]
        cpu = serve.cpu_seconds()
        scrapes = serve.scrapes
        start = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        sent = time.monotonic()
        serve.wait_for("loopguard_receiver_spans_total", total_spans)
        done = serve.wait_until_closed()
        cpu = serve.cpu_seconds() - cpu
        scrapes = serve.scrapes - scrapes
        scrape_cpu = scrapes * serve.scrape_cpu_seconds()
        cpu -= scrape_cpu
        checked = serve.metric("loopguard_tool_calls_total")
        latencies.sort()
        return {"tool_spans_per_s": checked / (done - start - WINDOW),
                "tool_spans_per_cpu_s": checked / cpu, "unchecked": tool_spans - checked,
                "send_s": sent - start,
                "p50_ms": 1000 * latencies[len(latencies) // 2],
                "p99_ms": 1000 * latencies[min(len(latencies) - 1,
                                               int(len(latencies) * 0.99))],
                "throttled": state["throttled"], "rss_mb": serve.rss_mb(),
                "polls": scrapes, "poll_cpu_s": scrape_cpu}
    finally:
        serve.stop()


def memory(runs: int) -> dict[str, float]:
    serve = Serve("--reorder-window", "3600", "--run-ttl", "36000", "--max-runs",
                  str(runs * 2), "--max-buffered-spans", str(runs * 10),
                  # every run stays open: no trace is checked early for the bytes it holds
                  "--max-pending-bytes", str(runs * 16 << 10))
    try:
        time.sleep(0.5)
        before = serve.rss_mb()
        sent = 0
        for chunk in range(0, runs, 10_000):
            count = min(10_000, runs - chunk)
            spans = make_traces(count, seed=chunk, root=False, turns=2)
            _send_all(serve.url, encode_batches(spans))
            sent += count
        serve.wait_for("loopguard_open_runs", runs)
        after = serve.rss_mb()
        return {"open_runs": runs, "rss_before_mb": before, "rss_after_mb": after,
                "kb_per_open_run": (after - before) * 1024 / runs}
    finally:
        serve.stop()


def _send_all(url: str, batches: list[bytes]) -> None:
    work = list(reversed(batches))
    lock = threading.Lock()
    threads = [threading.Thread(target=_client_http, args=(url, work, [], {"throttled": 0},
                                                           lock)) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


# --- agent side ------------------------------------------------------------------------------
def sink_main() -> None:
    """A server that discards OTLP (HTTP and gRPC), for the agent-side measurement."""
    from concurrent import futures
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import grpc

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    http_server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    grpc_server = grpc.server(futures.ThreadPoolExecutor(4))
    grpc_server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "opentelemetry.proto.collector.trace.v1.TraceService",
        {"Export": grpc.unary_unary_rpc_method_handler(lambda body, ctx: b"")}),))
    grpc_port = grpc_server.add_insecure_port("127.0.0.1:0")
    grpc_server.start()
    print(http_server.server_address[1], grpc_port, flush=True)
    http_server.serve_forever()


def agent_main(protocol: str, port: int, traces: int) -> None:
    """Create ``traces`` agent runs with the SDK and export them; print tool spans per second."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if protocol == "http":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter: Any = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces")
    else:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        exporter = GrpcExporter(endpoint=f"127.0.0.1:{port}", insecure=True)
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    processor = BatchSpanProcessor(exporter, max_queue_size=1 << 20,
                                   max_export_batch_size=BATCH)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("opentelemetry.instrumentation.openai_agents", "0.1")
    pool = _runs()
    start, cpu = time.perf_counter(), time.process_time()
    for n in range(traces):
        calls = pool[n % len(pool)]
        with tracer.start_as_current_span("invoke_agent support", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support",
                "gen_ai.prompt.name": f"tpl_{n % 20}"}):
            for i, call in enumerate(calls):
                with tracer.start_as_current_span("chat gpt-4o-mini",
                                                  attributes=_span_attrs("chat", None, i)):
                    pass
                with tracer.start_as_current_span(f"execute_tool {call.tool}",
                                                  attributes=_span_attrs("tool", call, i)):
                    pass
    provider.force_flush(600_000)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    provider.shutdown()
    print(json.dumps({"tool_spans_per_s": traces * TURNS / elapsed,
                      "tool_spans_per_cpu_s": traces * TURNS / cpu}), flush=True)


def agent_side(protocol: str, traces: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": _ROOT}
    sink = subprocess.Popen(["taskset", "-c", "1", sys.executable, __file__, "--sink"],
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert sink.stdout is not None
        http_port, grpc_port = (int(p) for p in sink.stdout.readline().split())
        port = http_port if protocol == "http" else grpc_port
        content = "full" if CONTENT["capture"] else "names"
        out = subprocess.run(["taskset", "-c", "0", sys.executable, __file__, "--agent",
                              protocol, str(port), str(traces), "--content", content],
                             capture_output=True, text=True, env=env, check=True, timeout=600)
        row: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
        return row
    finally:
        sink.terminate()
        sink.wait(30)


# --- driver ----------------------------------------------------------------------------------
def _median(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(row[key] for row in rows) for key in rows[0]}


def _interleaved(protocol: str, batches: list[bytes], tool_spans: int, total_spans: int,
                 repeat: int, baseline: str, result: dict[str, Any]) -> dict[str, Any]:
    """Run ``serve`` of this tree and of ``baseline`` in turn; return both medians and ratios."""
    own = SERVE_TREE["root"]
    rows: dict[str, list[dict[str, float]]] = {"serve": [], "baseline": []}
    for round_ in range(repeat):
        order = [("serve", own), ("baseline", baseline)]
        for name, tree in order if round_ % 2 == 0 else order[::-1]:
            SERVE_TREE["root"] = tree
            rows[name].append(throughput(protocol, batches, tool_spans, total_spans))
    SERVE_TREE["root"] = own
    result[f"serve_{protocol}"] = _median(rows["serve"])
    ratios = [a["tool_spans_per_cpu_s"] / b["tool_spans_per_cpu_s"]
              for a, b in zip(rows["serve"], rows["baseline"], strict=True)]
    return {"tree": baseline, "serve": result[f"serve_{protocol}"],
            "baseline": _median(rows["baseline"]),
            "serve_cpu_runs": [r["tool_spans_per_cpu_s"] for r in rows["serve"]],
            "baseline_cpu_runs": [r["tool_spans_per_cpu_s"] for r in rows["baseline"]],
            "ratio_cpu_median": statistics.median(ratios)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tool-spans", type=int, default=96_000)
    parser.add_argument("--memory-runs", type=int, default=100_000)
    parser.add_argument("--agent-traces", type=int, default=1_500)
    parser.add_argument("--content", choices=("full", "names"), default="full",
                        help="full: arguments and ~1 KB results on tool spans; names: neither")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--tree", metavar="DIR", default=_ROOT,
                        help="source tree serve runs from, e.g. an older checkout to compare "
                             "(default: this one; the load generator always runs from here)")
    parser.add_argument("--baseline", metavar="DIR",
                        help="another checkout whose serve runs in the same rounds")
    parser.add_argument("--sink", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--agent", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    CONTENT["capture"] = args.content == "full"
    SERVE_TREE["root"] = os.path.abspath(args.tree)
    if args.sink:
        sink_main()
        return
    if args.agent:
        agent_main(args.agent[0], int(args.agent[1]), int(args.agent[2]))
        return
    os.sched_setaffinity(0, {1})
    traces = args.tool_spans // TURNS
    spans = make_traces(traces, seed=1)
    batches = encode_batches(spans)
    result: dict[str, Any] = {"cpus": os.cpu_count(), "python": sys.version.split()[0],
                              "tree": SERVE_TREE["root"],
                              "content": args.content, "loadavg_start": os.getloadavg()[0],
                              "tool_spans": traces * TURNS, "batches": len(batches)}
    for protocol in ("http", "grpc"):
        if args.baseline:
            result[f"baseline_{protocol}"] = _interleaved(
                protocol, batches, traces * TURNS, len(spans), args.repeat,
                os.path.abspath(args.baseline), result)
            print(protocol, json.dumps(result[f"baseline_{protocol}"]), flush=True)
            continue
        rows = [throughput(protocol, batches, traces * TURNS, len(spans))
                for _ in range(args.repeat)]
        result[f"serve_{protocol}"] = _median(rows)
        if not args.agent_traces:
            print(protocol, json.dumps(result[f"serve_{protocol}"]), flush=True)
            continue
        agent = _median([agent_side(protocol, args.agent_traces) for _ in range(args.repeat)])
        result[f"agent_{protocol}"] = agent
        serve = result[f"serve_{protocol}"]
        result[f"ratio_{protocol}"] = serve["tool_spans_per_s"] / agent["tool_spans_per_s"]
        result[f"ratio_{protocol}_cpu"] = serve["tool_spans_per_cpu_s"] / agent[
            "tool_spans_per_cpu_s"]
        print(protocol, json.dumps(serve), json.dumps(agent), flush=True)
    if args.memory_runs:
        result["memory"] = memory(args.memory_runs)
    result["loadavg_end"] = os.getloadavg()[0]
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
