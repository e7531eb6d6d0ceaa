"""Scale-out: three ``serve`` processes behind trace-id routing add up to one instance.

Spans are partitioned the way the Collector's ``loadbalancing`` exporter does it with
``routing_key: traceID``: a consistent-hash ring of 100 CRC-32 points per backend on a circle
of 36,000 positions, and a trace goes to the first point at or after ``crc32(trace id bytes)``.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from prometheus_client.parser import text_string_to_metric_families
from test_receiver_stream import script_fleet

from otel_loopguard.testing import LoopGuardHarness

ROOT = Path(__file__).resolve().parent.parent
BANNER = re.compile(r"OTLP/gRPC [\d.]+:(\d+), OTLP/HTTP (http://[\d.:]+)/v1/traces")
COUNTERS = ("loopguard_tool_calls_total", "loopguard_loop_detected_total",
            "loopguard_runs_total", "loopguard_runs_flagged_total",
            "loopguard_receiver_spans_total")
MAX_POSITIONS = 36_000
POINTS_PER_BACKEND = 100


class HashRing:
    """The loadbalancing exporter's consistent-hash ring (``consistent_hashing.go``)."""

    def __init__(self, endpoints: list[str]) -> None:
        items: dict[int, str] = {}
        for endpoint in endpoints:
            for i in range(POINTS_PER_BACKEND):
                position = zlib.crc32(endpoint.encode() + bytes([i])) % MAX_POSITIONS
                items.setdefault(position, endpoint)
        self.positions = sorted(items)
        self.endpoints = [items[p] for p in self.positions]

    def endpoint_for(self, trace_id: bytes) -> str:
        position = zlib.crc32(trace_id) % MAX_POSITIONS
        index = bisect.bisect_left(self.positions, position)
        return self.endpoints[index % len(self.endpoints)]


class ServeProcess:
    """``python -m otel_loopguard serve`` on free ports, as a subprocess."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env = {k: v for k, v in env.items() if not k.startswith("LOOPGUARD_")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "otel_loopguard", "serve", "--grpc-port", "0",
             "--http-port", "0", "--reorder-window", "0.1", "--reports", "all"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        self.grpc_port = 0
        self.http_url = ""

    def wait_ready(self) -> None:
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        match = BANNER.search(line)
        assert match, line
        self.grpc_port, self.http_url = int(match.group(1)), match.group(2)

    def counters(self) -> Counter[tuple[str, tuple[tuple[str, str], ...]]]:
        text = urllib.request.urlopen(f"{self.http_url}/metrics", timeout=10).read().decode()
        out: Counter[tuple[str, tuple[tuple[str, str], ...]]] = Counter()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in (*COUNTERS, "loopguard_open_runs"):
                    out[(sample.name, tuple(sorted(sample.labels.items())))] += sample.value
        return out

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=30)
        return self.proc.returncode, out


@pytest.fixture(name="fleet", scope="module")
def _fleet() -> tuple[ReadableSpan, ...]:
    harness = LoopGuardHarness()
    script_fleet(harness, runs=30, seed=11)
    harness.shutdown()
    return harness.exporter.get_finished_spans()


@pytest.fixture(name="instances")
def _instances() -> Iterator[list[ServeProcess]]:
    procs = [ServeProcess() for _ in range(4)]
    try:
        for proc in procs:
            proc.wait_ready()
        yield procs
    finally:
        for proc in procs:
            if proc.proc.poll() is None:
                proc.proc.kill()
                proc.proc.communicate()


def send(proc: ServeProcess, spans: list[ReadableSpan]) -> None:
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{proc.grpc_port}", insecure=True)
    for start in range(0, len(spans), 512):
        assert exporter.export(spans[start:start + 512]).name == "SUCCESS"
    exporter.shutdown()


def settled(proc: ServeProcess, spans: int) -> Counter[Any]:
    """Wait until every span is accepted and every trace checked; return the counters."""
    deadline = time.monotonic() + 20
    while True:
        counters = proc.counters()
        accepted = counters[("loopguard_receiver_spans_total", (("outcome", "accepted"),))]
        if accepted == spans and counters[("loopguard_open_runs", ())] == 0:
            del counters[("loopguard_open_runs", ())]
            return counters
        assert time.monotonic() < deadline, counters
        time.sleep(0.1)


@pytest.mark.slow
def test_three_instances_add_up_to_one(instances: list[ServeProcess],
                                       fleet: tuple[ReadableSpan, ...]) -> None:
    """Summed counters and run reports of three routed instances equal a single instance's."""
    single, *shards = instances
    ring = HashRing([f"loopguard-{i}:4317" for i in range(len(shards))])
    parts: dict[str, list[ReadableSpan]] = {}
    for span in fleet:
        key = ring.endpoint_for(span.context.trace_id.to_bytes(16, "big"))
        parts.setdefault(key, []).append(span)
    assert len(parts) == len(shards)
    send(single, list(fleet))
    for index, proc in enumerate(shards):
        send(proc, parts[f"loopguard-{index}:4317"])
    expected = settled(single, len(fleet))
    summed: Counter[Any] = Counter()
    for index, proc in enumerate(shards):
        summed.update(settled(proc, len(parts[f"loopguard-{index}:4317"])))
    assert {k: v for k, v in summed.items() if v} == {k: v for k, v in expected.items() if v}
    assert any(name == "loopguard_loop_detected_total" for name, _ in expected)
    code, single_out = single.stop()
    assert code == 0
    shard_lines = []
    for proc in shards:
        code, out = proc.stop()
        assert code == 0
        shard_lines += out.splitlines()
    assert _runs(shard_lines) == _runs(single_out.splitlines())
    assert len(single_out.splitlines()) == 30


def _runs(lines: list[str]) -> list[str]:
    """Return the report lines without the time each was printed at, sorted."""
    return sorted(json.dumps({k: v for k, v in json.loads(line).items() if k != "time"})
                  for line in lines)
