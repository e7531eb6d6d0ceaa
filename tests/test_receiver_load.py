"""``serve`` under load: real exporters in parallel, forwarding, many open runs, big bodies.

The default runs are sized to take seconds. ``pytest --heavy`` adds the runs whose figures
docs/deployment.md quotes (a ``serve`` subprocess, its resident memory read from /proc).
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from test_receiver import JSON, Served, post
from test_receiver_forward import Capture, _grpc_capture  # noqa: F401 - the fixture

from otel_loopguard.config import LoopGuardConfig

ROOT = Path(__file__).resolve().parent.parent


class Counting(SpanExporter):
    """Wraps an exporter and counts the spans the receiver acknowledged."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.acknowledged = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export(spans)
        if result is SpanExportResult.SUCCESS:
            self.acknowledged += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def _agent(exporter: Counting, name: str, traces: int, calls: int) -> int:
    """Run ``traces`` agent runs of ``calls`` tool calls; return the spans created."""
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=128,
                                                   schedule_delay_millis=50))
    tracer = provider.get_tracer("agent")
    created = 0
    for run in range(traces):
        with tracer.start_as_current_span(f"invoke_agent {name}", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}):
            created += 1
            for call in range(calls):
                loops = run % 5 == 0
                with tracer.start_as_current_span("execute_tool search", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
                        "gen_ai.tool.call.arguments": json.dumps({"q": 1 if loops else call}),
                        "gen_ai.tool.call.result": "none" if loops else f"r{call}"}):
                    created += 1
    provider.shutdown()
    return created


def _exporters(served: Served) -> list[tuple[str, Counting]]:
    receiver = served.receiver
    grpc_url = f"127.0.0.1:{receiver.grpc_port}"
    http_url = f"{receiver.http_url}/v1/traces"
    patient = {"timeout": 60}  # a throttled export retries within this deadline, on a busy CI box
    return [
        ("grpc-a", Counting(GrpcExporter(endpoint=grpc_url, insecure=True, **patient))),
        ("grpc-b", Counting(GrpcExporter(endpoint=grpc_url, insecure=True, **patient))),
        ("grpc-gzip", Counting(GrpcExporter(endpoint=grpc_url, insecure=True, **patient,
                                            compression=grpc.Compression.Gzip))),
        ("http-a", Counting(HttpExporter(endpoint=http_url, **patient))),
        ("http-b", Counting(HttpExporter(endpoint=http_url, **patient))),
        ("http-gzip", Counting(HttpExporter(endpoint=http_url, compression=Compression.Gzip,
                                            **patient))),
    ]


def _run_fleet(served: Served, traces: int, calls: int) -> tuple[int, int]:
    """Run one agent per exporter in parallel; return (created, acknowledged)."""
    agents = _exporters(served)
    created: list[int] = []
    threads = [threading.Thread(target=lambda e=exporter, n=name: created.append(
        _agent(e, n, traces, calls))) for name, exporter in agents]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    return sum(created), sum(exporter.acknowledged for _, exporter in agents)


class TestConcurrentExporters:
    def test_created_equals_acknowledged_accepted_and_forwarded(
            self, grpc_capture: tuple[Capture, str]) -> None:
        """Six real exporters (gRPC and HTTP, plain and gzip) at once, serve forwarding to a
        downstream: every span created is acknowledged, accepted, checked and forwarded."""
        capture, endpoint = grpc_capture
        served = Served(forward_endpoint=endpoint, max_request_bytes=8 << 20)
        with served.receiver as receiver:
            created, acknowledged = _run_fleet(served, traces=20, calls=12)
            assert receiver.flush(30)
            accepted = served.value("loopguard_receiver_spans_total", outcome="accepted")
            forwarded = served.value("loopguard_receiver_forwarded_spans_total")
            failures = served.total("loopguard_receiver_forward_failures_total")
            calls = served.total("loopguard_tool_calls_total")
        assert created == 6 * 20 * 13
        assert (acknowledged, accepted, forwarded, len(capture.spans())) == (created,) * 4
        assert (failures, calls) == (0, 6 * 20 * 12)
        assert len(served.reports) == 6 * 20
        assert sum(1 for r in served.reports if r.action.label != "continue") == 6 * 4

    def test_backpressure_loses_nothing(self) -> None:
        """With a two-batch queue the exporters are throttled (429 / RESOURCE_EXHAUSTED) and
        retry: still every span created is accepted."""
        served = Served(max_queue=2, max_request_bytes=8 << 20, retry_after_seconds=1)
        def throttled() -> float:
            return sum(served.value("loopguard_receiver_requests_total", protocol=p,
                                    outcome="throttled") for p in ("grpc", "http"))

        gate = threading.Event()  # the worker waits until the queue has overflowed once
        with served.receiver as receiver:
            original = receiver.stream.add

            def slow(*args: Any, **kwargs: Any) -> Any:
                gate.wait(30)
                time.sleep(0.02)  # then stays slow, so the queue keeps filling
                return original(*args, **kwargs)

            def open_gate() -> None:
                while not gate.is_set() and not throttled():
                    time.sleep(0.01)
                gate.set()

            receiver.stream.add = slow  # type: ignore[method-assign]
            watcher = threading.Thread(target=open_gate)
            watcher.start()
            try:
                created, acknowledged = _run_fleet(served, traces=8, calls=12)
            finally:
                gate.set()
                watcher.join(10)
            assert receiver.flush(30)
            accepted = served.value("loopguard_receiver_spans_total", outcome="accepted")
        assert acknowledged == accepted == created == 6 * 8 * 13
        assert throttled() > 0


def never_ending(batch: int, traces: int, spans: int, result: str | None = None) -> bytes:
    """Return an OTLP/JSON body of ``traces`` traces of ``spans`` tool spans, without roots."""
    extra = [] if result is None else [
        {"key": "gen_ai.tool.call.result", "value": {"stringValue": result}}]
    body = [{"traceId": f"{batch * traces + t + 1:032x}", "spanId": f"{s + 1:016x}",
             "parentSpanId": "e" * 16, "name": "execute_tool search",
             "endTimeUnixNano": str(s + 1), "attributes": [
                 {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                 {"key": "gen_ai.tool.name", "value": {"stringValue": "search"}}, *extra]}
            for t in range(traces) for s in range(spans)]
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": body}]}]}).encode()


class TestMemoryCeilings:
    def test_many_never_ending_runs_stay_within_the_caps(self) -> None:
        """5,000 traces whose root never arrives: at most max_runs stay open, the rest are
        checked early and counted as evicted, and every tool call is still counted."""
        served = Served(config=LoopGuardConfig.create(max_runs=200), grpc_port=None,
                        max_buffered_spans=1_000)
        peaks = [0, 0]
        with served.receiver as receiver:
            stream = receiver.stream
            original = stream.add

            def add(*args: Any, **kwargs: Any) -> Any:
                reports = original(*args, **kwargs)
                peaks[:] = max(peaks[0], stream.open_traces), max(peaks[1], stream.buffered_spans)
                return reports

            stream.add = add  # type: ignore[method-assign]
            for batch in range(50):
                assert post(receiver.http_port, never_ending(batch, 100, 3), JSON)[0] == 200
            assert receiver.flush(30)
            evicted = served.value("loopguard_evicted_runs_total", reason="capacity")
            calls = served.total("loopguard_tool_calls_total")
        peak_traces, peak_spans = peaks
        assert peak_traces <= 200 and peak_spans <= 1_000
        assert evicted >= 5_000 - 200
        assert calls == 15_000


# --- heavy: a serve subprocess, its memory from /proc -------------------------------------------
def _serve_process(*extra: str) -> Any:
    """Start ``otel-loopguard serve`` (this checkout) as ``bench_serve`` does, on free ports."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_serve
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return bench_serve.Serve(*extra)


def _address(serve: Any) -> tuple[str, int]:
    host, port = serve.url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _report(**figures: Any) -> None:
    """Print figures for docs/deployment.md (``pytest --heavy -s`` shows them)."""
    print("\nHEAVY " + json.dumps(figures))


@pytest.mark.heavy
class TestHeavy:
    def test_bodies_that_never_finish_do_not_grow_memory(self) -> None:
        """200 connections each sending 8 MiB minus one byte: serve's memory stays near the
        bytes-in-flight cap (64 MiB) instead of 200 bodies (1.6 GB before)."""
        serve = _serve_process()
        try:
            base = serve.rss_mb()
            chunk = b"\x0a" * (1 << 20)
            socks = []
            for _ in range(200):
                sock = socket.create_connection(_address(serve), timeout=60)
                sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: "
                             b"application/x-protobuf\r\nContent-Length: 8388608\r\n\r\n")
                socks.append(sock)
            for _ in range(7):
                for sock in socks:
                    with contextlib.suppress(OSError):  # refused ones are closed by serve
                        sock.sendall(chunk)
            time.sleep(2)
            peak, threads = serve.rss_mb(), serve.threads()
            throttled = serve.metric("loopguard_receiver_requests_total")
            for sock in socks:
                sock.close()
        finally:
            serve.stop()
        _report(test="slow 8 MiB bodies", connections=200, rss_before_mb=round(base),
                rss_peak_mb=round(peak), threads=threads, refused=throttled)
        assert peak - base < 200
        assert threads < 200

    def test_slowloris_threads(self) -> None:
        """2,000 connections that never finish their headers (2,010 threads before)."""
        serve = _serve_process()
        try:
            socks = [socket.create_connection(_address(serve), timeout=60)
                     for _ in range(2_000)]
            for sock in socks:
                with contextlib.suppress(OSError):
                    sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n")
            time.sleep(2)
            threads, rss = serve.threads(), serve.rss_mb()
            with urllib.request.urlopen(f"{serve.url}/healthz", timeout=30) as response:
                healthy = response.status
            for sock in socks:
                sock.close()
        finally:
            serve.stop()
        _report(test="slowloris", connections=2_000, threads=threads, rss_mb=round(rss),
                healthz=healthy)
        assert threads < 200 and healthy == 200

    def test_open_runs_memory(self) -> None:
        """100,000 traces whose root never arrives (two tool spans each, ~1 KB results),
        with --max-runs 100000: resident memory per open run."""
        serve = _serve_process("--max-runs", "100000", "--max-buffered-spans", "1000000")
        result = "x" * 1000
        try:
            base = serve.rss_mb()
            for batch in range(400):
                body = never_ending(batch, 250, 2, result)
                while True:
                    request = urllib.request.Request(
                        f"{serve.url}/v1/traces", data=body, headers=JSON)
                    try:
                        with urllib.request.urlopen(request, timeout=60) as response:
                            response.read()
                        break
                    except urllib.error.HTTPError as error:
                        if error.code != 429:
                            raise
                        time.sleep(0.2)
            deadline = time.monotonic() + 300
            while serve.metric("loopguard_receiver_queue_batches") > 0:
                assert time.monotonic() < deadline
                time.sleep(0.5)
            time.sleep(1)
            rss, runs = serve.rss_mb(), serve.metric("loopguard_open_runs")
        finally:
            serve.stop()
        _report(test="open runs", runs=runs, rss_before_mb=round(base), rss_mb=round(rss),
                kb_per_run=round((rss - base) * 1024 / max(runs, 1), 1))
        assert runs == 100_000
